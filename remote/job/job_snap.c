/* The per-job snapshot of the project tree (see job_snap.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "job_glob.h"
#include "job_snap.h"
#include "job_store.h"
#include "sync_manifest.h"
#include "sync_proto.h"

struct snap {
	const char *project;
	int store;                 /* the store's folder, or -1 */
	struct sm_list man;        /* what the last sync wrote */
	const struct strvec *persist;
	struct snap_stats *st;
	struct gr_err *err;
	unsigned tmpn;
	int add_made;              /* job_snapshot_add_made: dst holds a snapshot */
};

static int64_t ns_of(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Copy src (open) into a new file name in dfd, with st's mode and times. */
static int copy_into(struct snap *s, int in, int dfd, const char *name, mode_t mode,
		     const struct timespec *mtime, const char *rel, uint64_t *bytes)
{
	char buf[65536];
	int out = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	int rc = 0;

	if (out < 0)
		return gr_errf(s->err, GR_EIO, "cannot create '%s' in the snapshot: %s", rel,
			       strerror(errno));
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
			n = read(in, buf, sizeof(buf));
			if (n > 0 && write_full(out, buf, (size_t)n) < 0)
				n = -1;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = gr_errf(s->err, GR_EIO, "cannot copy '%s' into the snapshot: %s", rel,
				     strerror(errno));
			break;
		}
		if (n == 0)
			break;
		*bytes += (uint64_t)n;
	}
	if (rc == 0) {
		struct timespec ts[2] = { *mtime, *mtime };
		fchmod(out, mode & 07777);
		futimens(out, ts);
	}
	close(out);
	if (rc < 0)
		unlinkat(dfd, name, 0);
	return rc;
}

int job_snap_copy_file(int in, int dfd, const char *name, mode_t mode,
		       const struct timespec *mtime, const char *rel, uint64_t *bytes,
		       struct gr_err *err)
{
	struct snap s = { .err = err };

	return copy_into(&s, in, dfd, name, mode, mtime, rel, bytes);
}

/* Link the store's copy of manifest entry e (whose file in the project
 * is open as in) to name in dfd: 1 linked, 0 not possible (copy it
 * instead), <0 error. An object is named by content, mode and mtime,
 * which it keeps: one whose size or mtime changed was written in place by
 * a job, so it is set aside (still in the store, for the jobs sharing it,
 * until they are gone) and a fresh copy takes its name. */
static int link_object(struct snap *s, const struct sm_entry *e, int in, int dfd,
		       const char *name, const char *rel)
{
	char hex[2 * SM_HASH_LEN + 1], obj[2 * SM_HASH_LEN + 48];
	struct stat st;

	if (s->store < 0)
		return 0;
	sm_hex(e->hash, hex);
	snprintf(obj, sizeof(obj), "%s-%03o-%lld", hex, (unsigned)(e->mode & 0777),
		 (long long)e->mtime_ns);
	for (int tries = 0; tries < 3; tries++) {
		int have = fstatat(s->store, obj, &st, AT_SYMLINK_NOFOLLOW) == 0;
		if (have && (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != e->size ||
			     ns_of(st.st_mtim) != e->mtime_ns)) {
			char aside[sizeof(obj) + 48];
			snprintf(aside, sizeof(aside), "%s.changed-%llu", obj,
				 (unsigned long long)st.st_ino);
			if (renameat(s->store, obj, s->store, aside) < 0)
				return 0;
			have = 0;
		}
		if (!have) {
			char tmp[64];
			struct timespec mt = { (time_t)(e->mtime_ns / 1000000000),
					       (long)(e->mtime_ns % 1000000000) };
			snprintf(tmp, sizeof(tmp), ".tmp-%ld-%u", (long)getpid(), s->tmpn++);
			if (lseek(in, 0, SEEK_SET) < 0)
				return 0;
			int rc = copy_into(s, in, s->store, tmp, (mode_t)e->mode, &mt, rel,
					   &s->st->bytes_objects);
			if (rc < 0)
				return rc;
			/* Never over a name: one made meanwhile is as good. */
			if (linkat(s->store, tmp, s->store, obj, 0) == 0)
				s->st->objects_made++;
			unlinkat(s->store, tmp, 0);
		}
		if (linkat(s->store, obj, dfd, name, 0) == 0) {
			s->st->shared++;
			return 1;
		}
		if (errno != ENOENT) /* EMLINK, EXDEV...: copy it */
			return 0;
		/* Collected meanwhile: make it again. */
	}
	return 0;
}

static int snap_file(struct snap *s, int sdfd, int ddfd, const char *name, const struct stat *st,
		     const char *rel)
{
	const struct sm_entry *e = sm_find(&s->man, rel);
	int in, rc;

	/* Exactly what the sync wrote: share the store's copy. */
	int synced = e && e->type == SM_FILE && e->host.ino == (uint64_t)st->st_ino &&
		     sm_host_size(e) == (uint64_t)st->st_size && e->host.mtime_ns == ns_of(st->st_mtim) &&
		     e->host.ctime_ns == ns_of(st->st_ctim);
	if (!synced && (uint64_t)st->st_size > SNAP_COPY_MAX &&
	    linkat(sdfd, name, ddfd, name, 0) == 0) {
		s->st->linked++;
		return 0;
	}
	in = openat(sdfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return errno == ENOENT ? 0 : gr_errf(s->err, GR_EIO, "cannot read '%s': %s", rel, strerror(errno));
	rc = synced ? link_object(s, e, in, ddfd, name, rel) : 0;
	if (rc == 0) {
		if (lseek(in, 0, SEEK_SET) == 0)
			rc = copy_into(s, in, ddfd, name, st->st_mode, &st->st_mtim, rel,
				       &s->st->bytes_copied);
		else
			rc = gr_errf(s->err, GR_EIO, "cannot read '%s': %s", rel, strerror(errno));
		if (rc == 0)
			s->st->copied++;
	}
	close(in);
	return rc < 0 ? rc : 0;
}

int job_snap_is_env(int dfd, const char *name)
{
	struct stat st;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), env;

	if (fd < 0)
		return 0;
	env = (fstatat(fd, "pyvenv.cfg", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) ||
	      (fstatat(fd, "conda-meta", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode));
	close(fd);
	return env;
}

/* An environment made on the host: linked to its place in the project,
 * as a persistent path is, never copied. One a sync wrote (a venv in the
 * repository) is code like the rest. */
static int link_env(struct snap *s, int sdfd, int ddfd, const char *name, const char *rel)
{
	const struct sm_entry *e = sm_find(&s->man, rel);
	char *src;
	int rc = 0;

	if ((e && e->type == SM_DIR) || !job_snap_is_env(sdfd, name))
		return 0;
	src = xasprintf("%s/%s", s->project, rel);
	if (symlinkat(src, ddfd, name) == 0) {
		s->st->envs++;
		sv_push(&s->st->env_names, rel);
		rc = 1;
	} else if (errno == EEXIST) {
		rc = 1; /* there already (add_made) */
	} else {
		rc = gr_errf(s->err, GR_EIO, "cannot link the environment '%s': %s", rel, strerror(errno));
	}
	free(src);
	return rc;
}

/* add_made: is dst's name already what the project holds? A synced path
 * stays the snapshot's; a file made on the host is added when missing,
 * and replaced when its size or time differ (setup made it again).
 * 1: leave it, 0: add it (anything in the way was removed). */
static int made_have(struct snap *s, int ddfd, const char *name, const struct stat *st,
		     const char *rel)
{
	struct stat have;

	if (sm_find(&s->man, rel))
		return 1;
	if (fstatat(ddfd, name, &have, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (S_ISDIR(st->st_mode) || !S_ISREG(have.st_mode) || !S_ISREG(st->st_mode))
		return 1; /* folders are walked; other kinds stay */
	if (have.st_size == st->st_size && ns_of(have.st_mtim) == ns_of(st->st_mtim))
		return 1;
	return unlinkat(ddfd, name, 0) < 0;
}

static int snap_walk(struct snap *s, int sdfd, int ddfd, const char *rel)
{
	DIR *d = fdopendir(sdfd);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		close(sdfd);
		return gr_errf(s->err, GR_EIO, "cannot list '%s': %s", *rel ? rel : ".", strerror(errno));
	}
	while (rc == 0 && (e = readdir(d))) {
		struct stat st;
		char *sub;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!*rel && !strcmp(e->d_name, SYNC_STATE_DIR))
			continue; /* the sync's state; the job folder's own is there */
		if (!strncmp(e->d_name, SYNC_TMP_PREFIX, strlen(SYNC_TMP_PREFIX)))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		sub = *rel ? xasprintf("%s/%s", rel, e->d_name) : xstrdup(e->d_name);
		if (job_persist_is(s->persist, sub)) {
			free(sub);
			continue; /* linked afterwards */
		}
		if (S_ISDIR(st.st_mode) && (rc = link_env(s, dirfd(d), ddfd, e->d_name, sub)) != 0) {
			free(sub);
			rc = rc < 0 ? rc : 0;
			continue;
		}
		if (s->add_made && !S_ISDIR(st.st_mode) && made_have(s, ddfd, e->d_name, &st, sub)) {
			free(sub);
			continue;
		}
		if (S_ISDIR(st.st_mode) && s->add_made) {
			/* A folder there already is walked; anything else there
			 * (a link) stays. */
			struct stat have;
			if (fstatat(ddfd, e->d_name, &have, AT_SYMLINK_NOFOLLOW) == 0 &&
			    !S_ISDIR(have.st_mode)) {
				free(sub);
				continue;
			}
		}
		if (S_ISDIR(st.st_mode)) {
			if (mkdirat(ddfd, e->d_name, (st.st_mode & 07777) | 0700) < 0 &&
			    !(s->add_made && errno == EEXIST)) {
				rc = gr_errf(s->err, GR_EIO, "cannot create '%s' in the snapshot: %s", sub, strerror(errno));
			} else {
				int a = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				int b = openat(ddfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (a < 0 || b < 0) {
					rc = gr_errf(s->err, GR_EIO, "cannot open '%s': %s", sub, strerror(errno));
					if (a >= 0)
						close(a);
				} else {
					rc = snap_walk(s, a, b, sub); /* closes a */
				}
				if (b >= 0)
					close(b);
			}
		} else if (S_ISLNK(st.st_mode)) {
			char target[4096];
			ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
			if (n >= 0) {
				target[n] = '\0';
				if (symlinkat(target, ddfd, e->d_name) < 0)
					rc = gr_errf(s->err, GR_EIO, "cannot create '%s' in the snapshot: %s", sub, strerror(errno));
			}
		} else if (S_ISREG(st.st_mode)) {
			rc = snap_file(s, dirfd(d), ddfd, e->d_name, &st, sub);
		}
		free(sub);
	}
	closedir(d);
	return rc;
}

/* The folder rel[0..len) below base, made where missing, one component
 * at a time and never through a symlink: an fd, or -1 (errno set). */
static int open_dirs(const char *base, const char *rel, size_t len)
{
	int fd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	for (size_t i = 0; fd >= 0 && i < len;) {
		size_t c = i;
		while (c < len && rel[c] != '/')
			c++;
		char *name = xstrndup(rel + i, c - i);
		if (mkdirat(fd, name, 0700) < 0 && errno != EEXIST) {
			free(name);
			close(fd);
			return -1;
		}
		int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		free(name);
		close(fd);
		fd = sub;
		errno = e;
		i = c + 1;
	}
	return fd;
}

/* Each persistent path: made in the project if missing (a folder for an
 * entry ending in '/'), linked here. No symlink on the way is followed,
 * in the project folder or in the job's. */
static int link_persist(struct snap *s, const char *dst)
{
	for (size_t i = 0; s->persist && i < s->persist->n; i++) {
		const char *e = s->persist->v[i];
		size_t n = strlen(e);
		while (n && e[n - 1] == '/')
			n--;
		int is_dir = n < strlen(e), rc = 0;
		char *rel = xstrndup(e, n), *src = xasprintf("%s/%s", s->project, rel);
		const char *slash = strrchr(rel, '/'), *base = slash ? slash + 1 : rel;
		size_t plen = slash ? (size_t)(slash - rel) : 0;
		int pfd = open_dirs(s->project, rel, is_dir ? n : plen);
		int dfd = pfd < 0 ? -1 : open_dirs(dst, rel, plen);

		if (pfd < 0 || dfd < 0)
			rc = gr_errf(s->err, GR_EIO, "cannot make the persistent path '%s%s' (a symlink "
				     "on the way is not followed): %s", rel, is_dir ? "/" : "",
				     strerror(errno));
		else if (symlinkat(src, dfd, base) < 0)
			rc = gr_errf(s->err, GR_EIO, "cannot link the persistent path '%s': %s", rel,
				     strerror(errno));
		else
			s->st->persistent++;
		if (pfd >= 0)
			close(pfd);
		if (dfd >= 0)
			close(dfd);
		free(rel);
		free(src);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* The sync's manifest: which files the last sync wrote, with what the
 * agent saw after writing them. Unreadable or damaged: nothing is shared,
 * every file is copied. */
static void load_manifest(struct snap *s)
{
	char *p = xasprintf("%s/%s", s->project, SYNC_MANIFEST_FILE);
	int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct strbuf b = STRBUF_INIT;

	free(p);
	if (fd < 0)
		return;
	for (;;) {
		sb_grow(&b, 1 << 20);
		ssize_t r = read(fd, b.buf + b.len, b.alloc - b.len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		b.len += (size_t)r;
	}
	close(fd);
	if (sm_decode(b.buf, b.len, 1, &s->man, NULL) < 0)
		sm_list_free(&s->man);
	else
		sm_sort(&s->man);
	sb_release(&b);
}

/* The sync lock, so the snapshot holds one sync's result: waits up to a
 * minute for a sync in progress, then goes on without. */
static int sync_lock(const char *project)
{
	char *p = xasprintf("%s/%s", project, SYNC_LOCK_FILE);
	int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	free(p);
	if (fd < 0)
		return -1;
	for (int i = 0; i < 600; i++) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return fd;
		usleep(100 * 1000);
	}
	close(fd);
	return -1;
}

static int snapshot(const char *project, const char *dst, const char *root,
		    const struct strvec *persist, struct snap_stats *st, int add_made,
		    struct gr_err *err)
{
	struct snap s = { project, -1, { 0 }, persist, st, err, 0, add_made };
	char *store = xasprintf("%s/%s", root, JOB_OBJECTS);
	int a = -1, b = -1, lock, rc;

	*st = (struct snap_stats){ .env_names = STRVEC_INIT };
	lock = sync_lock(project);
	load_manifest(&s);
	if (s.man.n && (mkdir(store, 0700) == 0 || errno == EEXIST))
		s.store = open(store, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	a = open(project, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	b = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (a < 0 || b < 0) {
		rc = gr_errf(err, GR_EIO, "cannot open '%s': %s", a < 0 ? project : dst, strerror(errno));
		if (a >= 0)
			close(a);
		goto out;
	}
	rc = snap_walk(&s, a, b, ""); /* closes a */
	if (rc == 0 && !s.add_made)
		rc = link_persist(&s, dst);
out:
	if (b >= 0)
		close(b);
	if (s.store >= 0)
		close(s.store);
	if (lock >= 0)
		close(lock);
	sm_list_free(&s.man);
	free(store);
	return rc;
}

int job_snapshot(const char *project, const char *dst, const char *root,
		 const struct strvec *persist, struct snap_stats *st, struct gr_err *err)
{
	return snapshot(project, dst, root, persist, st, 0, err);
}

int job_snapshot_add_made(const char *project, const char *dst, const char *root,
			  const struct strvec *persist, struct snap_stats *st, struct gr_err *err)
{
	return snapshot(project, dst, root, persist, st, 1, err);
}
