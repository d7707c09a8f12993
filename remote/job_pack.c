/* Pack a job's artifacts as tar.zst (see job_pack.h). Only regular files
 * travel: a symlink in the job folder is not followed (but for the
 * persistent paths gpurun made), so a job cannot make gpurun send files
 * from outside its folder and the project's. The walk plans (which files,
 * how big) so the stream can open with what it will hold; then exactly
 * those are packed, however the files change meanwhile. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job_glob.h"
#include "job_pack.h"
#include "job_proto.h"
#include "util.h"

static int S_ISLNK_AT(int dfd, const char *name)
{
	struct stat st;

	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

struct planned {
	char *rel;
	uint64_t size;
};

struct packer {
	struct archive *a;
	const struct pack_opts *o;
	const char *const *pat;
	size_t npat;
	struct pack_have *have;
	size_t nhave;
	struct pack_stats *st;
	struct gr_err *err;
	struct planned *plan;    /* what the walk found to send, in its order */
	size_t nplan, aplan;
	uint64_t plan_bytes;
};

static int cmp_have(const void *x, const void *y)
{
	return strcmp(((const struct pack_have *)x)->path, ((const struct pack_have *)y)->path);
}

static int unchanged(struct packer *p, const char *rel, const struct stat *st)
{
	struct pack_have key = { .path = (char *)rel };
	struct pack_have *h = p->nhave ? bsearch(&key, p->have, p->nhave, sizeof(*h), cmp_have) : NULL;

	return h && h->size == (uint64_t)st->st_size && h->mtime_s == (int64_t)st->st_mtim.tv_sec &&
	       h->mtime_ns == (uint32_t)st->st_mtim.tv_nsec;
}

static int arc_fail(struct packer *p, const char *what)
{
	return gr_errf(p->err, GR_EIO, "cannot pack artifacts (%s): %s", what,
		       archive_error_string(p->a) ? archive_error_string(p->a) : "unknown error");
}

/* Modified at or after since_ms? A file system that keeps whole seconds
 * only (no nanoseconds at all) is compared by the second. */
static int since(const struct stat *st, uint64_t ms)
{
	if (!st->st_mtim.tv_nsec)
		return (uint64_t)st->st_mtim.tv_sec >= ms / 1000;
	return (uint64_t)st->st_mtim.tv_sec * 1000 + (uint64_t)st->st_mtim.tv_nsec / 1000000 >= ms;
}

/* In a persistent path: modified while the job ran? */
static int in_window(const struct pack_opts *o, const struct stat *st)
{
	return since(st, o->since_ms) && (!o->until_ms || !since(st, o->until_ms + 1000));
}

static int is_persist(const struct pack_opts *o, const char *rel)
{
	return o && o->persist && job_persist_is(o->persist, rel);
}

/* First pass: a file the patterns select; planned unless the client has
 * it already (or, in a persistent path, unless this job modified it).
 * Nothing is read yet: a stat (never through a link but a persistent
 * path's own) tells what the plan needs. */
static int add_file(struct packer *p, int dfd, const char *name, const char *rel, int shared,
		    int follow)
{
	struct stat st;

	if (fstatat(dfd, name, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : gr_errf(p->err, GR_EIO, "cannot stat '%s': %s", rel, strerror(errno));
	if (!S_ISREG(st.st_mode) || (shared && !in_window(p->o, &st)))
		return 0;
	p->st->matched++;
	if (unchanged(p, rel, &st))
		return 0;
	if (p->nplan == p->aplan) {
		p->aplan = p->aplan ? 2 * p->aplan : 64;
		p->plan = xrealloc(p->plan, p->aplan * sizeof(*p->plan));
	}
	p->plan[p->nplan++] = (struct planned){ xstrdup(rel), (uint64_t)st.st_size };
	p->plan_bytes += (uint64_t)st.st_size;
	return 0;
}

/* rel below the folder root, opened one component at a time, never
 * through a link but a persistent path's own (the walk followed only
 * those; if another link appeared since, the file is left out). -1 when
 * it cannot be opened so. */
static int open_below(struct packer *p, int root, const char *rel)
{
	char *copy = xstrdup(rel), *part = copy, *slash;
	int dfd = root, fd = -1, shared = 0;

	while ((slash = strchr(part, '/'))) {
		*slash = '\0';
		int follow = !shared && is_persist(p->o, copy);
		int next = openat(dfd, part, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
		shared = shared || follow;
		*slash = '/';
		if (dfd != root)
			close(dfd);
		dfd = next;
		if (dfd < 0)
			break;
		part = slash + 1;
	}
	if (dfd >= 0)
		fd = openat(dfd, part, O_RDONLY | O_CLOEXEC |
			    (!shared && is_persist(p->o, rel) ? 0 : O_NOFOLLOW));
	if (dfd >= 0 && dfd != root)
		close(dfd);
	free(copy);
	return fd;
}

/* Second pass: one planned file, never more of it than announced (a file
 * that grew since is cut at its planned size). */
static int pack_file(struct packer *p, int root, const struct planned *pl)
{
	struct archive_entry *e = NULL;
	struct stat st;
	char buf[65536];
	int fd = open_below(p, root, pl->rel), rc = 0;

	if (fd < 0)
		return 0; /* gone since it was planned: less than announced */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		goto out;
	if ((uint64_t)st.st_size > pl->size)
		st.st_size = (off_t)pl->size;
	e = archive_entry_new();
	archive_entry_set_pathname(e, pl->rel);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, st.st_mode & 0755);
	archive_entry_set_size(e, st.st_size);
	archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	if (archive_write_header(p->a, e) != ARCHIVE_OK) {
		rc = arc_fail(p, pl->rel);
		goto out;
	}
	/* Send exactly the size in the header: a file that shrinks while we
	 * read is padded with zeros (its mtime changed, so the next pull
	 * fetches it again); one that grows is cut at the header's size. */
	for (int64_t left = st.st_size; left > 0;) {
		size_t want = left > (int64_t)sizeof(buf) ? sizeof(buf) : (size_t)left;
		ssize_t r = read(fd, buf, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			memset(buf, 0, want);
			r = (ssize_t)want;
		}
		if (archive_write_data(p->a, buf, (size_t)r) != r) {
			rc = arc_fail(p, pl->rel);
			goto out;
		}
		left -= r;
	}
	p->st->sent++;
	p->st->bytes += (uint64_t)st.st_size;
out:
	archive_entry_free(e);
	close(fd);
	return rc;
}

static int wanted(struct packer *p, const char *rel, int *descend)
{
	*descend = 0;
	for (size_t i = 0; i < p->npat; i++) {
		if (job_glob_match(p->pat[i], rel))
			return 1;
		if (job_glob_may_descend(p->pat[i], rel))
			*descend = 1;
	}
	return 0;
}

/* Walk dfd (relative path prefix rel, "" at the top). all: every file
 * below is wanted (a pattern named this folder). shared: inside a
 * persistent path. */
static int walk(struct packer *p, int dfd, const char *rel, int all, int shared)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	struct strvec names = STRVEC_INIT;
	int rc = 0;

	if (!d) {
		close(dfd);
		return gr_errf(p->err, GR_EIO, "cannot list '%s': %s", *rel ? rel : ".", strerror(errno));
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    !(!*rel && !strcmp(de->d_name, ".gpurun")))
			sv_push(&names, de->d_name);
	/* Sorted, so the archive's order is stable. */
	for (size_t i = 1; i < names.n; i++)
		for (size_t j = i; j > 0 && strcmp(names.v[j - 1], names.v[j]) > 0; j--) {
			char *t = names.v[j];
			names.v[j] = names.v[j - 1];
			names.v[j - 1] = t;
		}
	for (size_t i = 0; i < names.n && rc == 0; i++) {
		char *sub = *rel ? xasprintf("%s/%s", rel, names.v[i]) : xstrdup(names.v[i]);
		struct stat st;
		int descend = 0, want;

		int follow = !shared && S_ISLNK_AT(dirfd(d), names.v[i]) && is_persist(p->o, sub);
		if (fstatat(dirfd(d), names.v[i], &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) == 0) {
			want = all || wanted(p, sub, &descend);
			if (S_ISREG(st.st_mode) && want) {
				rc = add_file(p, dirfd(d), names.v[i], sub, shared || follow, follow);
			} else if (S_ISDIR(st.st_mode) && (want || descend)) {
				int sfd = openat(dirfd(d), names.v[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC |
						 (follow ? 0 : O_NOFOLLOW));
				if (sfd >= 0)
					rc = walk(p, sfd, sub, want, shared || follow);
			}
		}
		free(sub);
	}
	sv_clear(&names);
	closedir(d);
	return rc;
}

int job_pack(const char *dir, const char *const *patterns, size_t npat,
	     struct pack_have *have, size_t nhave, const struct pack_opts *o, int out_fd,
	     struct pack_stats *st, struct gr_err *err)
{
	static const struct pack_opts none = { NULL, 0, 0 };
	struct packer p = { NULL, o ? o : &none, patterns, npat, have, nhave, st, err, NULL, 0, 0, 0 };
	unsigned char hdr[GR_ART_ANNOUNCE_LEN];
	int rc = 0, dfd;

	*st = (struct pack_stats){ 0 };
	if (nhave)
		qsort(have, nhave, sizeof(*have), cmp_have);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return gr_errf(err, GR_EIO, "cannot open '%s': %s", dir, strerror(errno));
	if ((rc = walk(&p, dfd, "", 0, 0)) < 0)
		goto out;
	/* The announcement (PROTOCOL.md, ART_PULL): "GRA1", u32 files,
	 * u64 bytes, big-endian. */
	memcpy(hdr, GR_ART_MAGIC, 4);
	for (int i = 0; i < 4; i++)
		hdr[4 + i] = (unsigned char)((uint32_t)p.nplan >> (24 - 8 * i));
	for (int i = 0; i < 8; i++)
		hdr[8 + i] = (unsigned char)(p.plan_bytes >> (56 - 8 * i));
	if (write_full(out_fd, hdr, sizeof(hdr)) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot send the artifacts: %s", strerror(errno));
		goto out;
	}
	p.a = archive_write_new();
	if (archive_write_add_filter_zstd(p.a) != ARCHIVE_OK ||
	    archive_write_set_format_pax(p.a) != ARCHIVE_OK ||
	    /* zstd to a pipe: no zero padding after the last frame. */
	    archive_write_set_bytes_in_last_block(p.a, 1) != ARCHIVE_OK ||
	    archive_write_open_fd(p.a, out_fd) != ARCHIVE_OK) {
		rc = arc_fail(&p, "start");
		goto out;
	}
	if (p.nplan) { /* else an empty archive */
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			rc = gr_errf(err, GR_EIO, "cannot open '%s': %s", dir, strerror(errno));
			goto out;
		}
		for (size_t i = 0; i < p.nplan && rc == 0; i++)
			rc = pack_file(&p, dfd, &p.plan[i]);
		close(dfd);
		if (rc < 0)
			goto out;
	}
	if (archive_write_close(p.a) != ARCHIVE_OK)
		rc = arc_fail(&p, "finish");
out:
	if (p.a)
		archive_write_free(p.a);
	for (size_t i = 0; i < p.nplan; i++)
		free(p.plan[i].rel);
	free(p.plan);
	return rc;
}

/* ---- what the job wrote ---- */

struct wctx {
	const struct pack_opts *o;
	size_t max;
	struct written *w;
	struct strvec all;
	struct strvec sizes;
};

static void wwalk(struct wctx *c, int dfd, const char *rel, int shared)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (!*rel && !strcmp(de->d_name, ".gpurun")))
			continue;
		char *sub = *rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
		int follow = !shared && S_ISLNK_AT(dirfd(d), de->d_name) && is_persist(c->o, sub);
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISREG(st.st_mode) &&
			    ((shared || follow) ? in_window(c->o, &st) : since(&st, c->o->since_ms))) {
				c->w->total++;
				sv_push(&c->all, sub);
				sv_pushf(&c->sizes, "%llu", (unsigned long long)st.st_size);
			} else if (S_ISDIR(st.st_mode)) {
				int sfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
						 (follow ? 0 : O_NOFOLLOW));
				if (sfd >= 0)
					wwalk(c, sfd, sub, shared || follow);
			}
		}
		free(sub);
	}
	closedir(d);
}

struct wpair {
	const char *path, *size;
};

static int cmp_wpair(const void *a, const void *b)
{
	return strcmp(((const struct wpair *)a)->path, ((const struct wpair *)b)->path);
}

void job_written(const char *dir, const struct pack_opts *o, size_t max, struct written *w)
{
	static const struct pack_opts none = { NULL, 0, 0 };
	struct wctx c = { o ? o : &none, max, w, STRVEC_INIT, STRVEC_INIT };
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	*w = (struct written){ STRVEC_INIT, NULL, 0 };
	if (fd >= 0)
		wwalk(&c, fd, "", 0);
	struct wpair *v = xcalloc(c.all.n ? c.all.n : 1, sizeof(*v));
	for (size_t i = 0; i < c.all.n; i++)
		v[i] = (struct wpair){ c.all.v[i], c.sizes.v[i] };
	if (c.all.n > 1)
		qsort(v, c.all.n, sizeof(*v), cmp_wpair);
	w->sizes = xcalloc(max ? max : 1, sizeof(*w->sizes));
	for (size_t i = 0; i < c.all.n && i < max; i++) {
		long long n = 0;
		parse_ll(v[i].size, 0, (long long)(~0ULL >> 1), &n);
		sv_push(&w->paths, v[i].path);
		w->sizes[i] = (uint64_t)n;
	}
	free(v);
	sv_clear(&c.all);
	sv_clear(&c.sizes);
}

void job_written_free(struct written *w)
{
	sv_clear(&w->paths);
	free(w->sizes);
	*w = (struct written){ STRVEC_INIT, NULL, 0 };
}
