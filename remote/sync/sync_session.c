/* The agent's sync session: OPEN (lock the folder, clean up after a killed
 * session, load the manifest and check it against the disk, answer the
 * state in one message), OPS (deletions, folders, symlinks), and COMMIT
 * (one syncfs for every temp file, renames, the manifest written last). */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "sync_agent.h"
#include "sync_proto.h"

#define LOCK_WAIT_MS 30000

enum { CHANGE_UPDATED = 1, CHANGE_MISSING = 2 };

/* The session OPEN handed out, until it is freed: one per connection. */
static struct sync_session *current;

struct sync_session *sync_session_current(void)
{
	return current;
}

struct sync_session *sync_session_get(uint32_t id)
{
	return current && current->id == id ? current : NULL;
}

static int statefd_of(struct sync_session *s, int create)
{
	if (create && mkdirat(s->rootfd, SYNC_STATE_DIR, 0700) < 0 && errno != EEXIST)
		return -1;
	return openat(s->rootfd, SYNC_STATE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

static int take_lock(struct sync_session *s, int statefd, struct gr_err *err)
{
	uint64_t deadline = now_ms() + LOCK_WAIT_MS;

	s->lockfd = openat(statefd, STATE_NAME(SYNC_LOCK_FILE),
			   O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->lockfd < 0)
		return gr_errf(err, GR_EIO, "cannot create '%s/%s': %s", s->root,
			       SYNC_LOCK_FILE, strerror(errno));
	while (flock(s->lockfd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR)
			return gr_errf(err, GR_EIO, "cannot lock '%s/%s': %s", s->root,
				       SYNC_LOCK_FILE, strerror(errno));
		if (now_ms() > deadline)
			return gr_errf(err, GR_ETIMEOUT,
				       "another sync into '%s' is still running", s->root);
		agent_keepalive();
		usleep(50000);
	}
	return 0;
}

/* Remove temp files a killed session left, from the folders its journal lists. */
static void clean_journal(struct sync_session *s, int statefd)
{
	struct strbuf j = STRBUF_INIT;
	int fd = openat(statefd, STATE_NAME(SYNC_JOURNAL_FILE), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return;
	for (;;) {
		sb_grow(&j, 65536);
		ssize_t r = read(fd, j.buf + j.len, j.alloc - j.len - 1);
		if (r <= 0)
			break;
		j.len += (size_t)r;
	}
	close(fd);
	for (size_t off = 0; off < j.len;) {
		const char *dir = j.buf + off;
		size_t n = strnlen(dir, j.len - off);
		if (off + n < j.len && (!n || sm_path_ok(dir)))
			sfs_clean_tmps(&s->dir, dir);
		off += n + 1;
	}
	unlinkat(statefd, STATE_NAME(SYNC_JOURNAL_FILE), 0);
	sb_release(&j);
}

/* What the last COMMIT of this connection wrote (sync_manifest_keep). */
static struct {
	int have;
	struct sync_man_id id;
	uint8_t digest[SM_HASH_LEN];
	struct sm_list man;
} kept;

static void kept_drop(void)
{
	sm_list_free(&kept.man);
	memset(&kept, 0, sizeof(kept));
}

void sync_manifest_keep(struct sync_session *s, const uint8_t digest[SM_HASH_LEN])
{
	kept_drop();
	if (!s->man_written || s->on_disk) /* (on disk: there is no list to keep) */
		return;
	kept.have = 1;
	kept.id = s->man_id;
	memcpy(kept.digest, digest, SM_HASH_LEN);
	kept.man = s->man;
	s->man = (struct sm_list){ 0 };
}

/* The manifest into s->man; 1 when it is the one kept (base: its
 * digest), else 0 (read from the file; what was kept is dropped).
 * may_keep: the lock is held (else the file may change meanwhile).
 * on_disk: a walked session's: unless the kept one is taken, the file is
 * not read into s->man but left open in s->manfd (s->on_disk). */
static int load_manifest(struct sync_session *s, int statefd, int may_keep, int on_disk,
			 uint8_t base[SM_HASH_LEN])
{
	int fd = statefd < 0 ? -1 : openat(statefd, STATE_NAME(SYNC_MANIFEST_FILE),
					   O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct sync_man_id id;
	struct stat st;

	if (fd >= 0 && kept.have && may_keep && fstat(fd, &st) == 0) {
		sync_man_id_of(&st, &id);
		if (!memcmp(&id, &kept.id, sizeof(id))) {
			close(fd);
			s->man = kept.man;
			kept.man = (struct sm_list){ 0 };
			memcpy(base, kept.digest, SM_HASH_LEN);
			kept_drop();
			return 1;
		}
	}
	kept_drop();
	if (on_disk) { /* read as a stream by the refresh, and from then on */
		s->on_disk = 1;
		s->manfd = fd;
		return 0;
	}
	if (fd < 0)
		return 0;
	/* Read in pieces: the file held whole beside the list it becomes was
	 * more than half the agent's peak on a no-op (180 bytes a file). */
	if (sm_decode_fd(fd, 1, &s->man, NULL) < 0) {
		/* A damaged manifest: start over as if nothing were known
		 * (the client then sends everything, replacing by rename). */
		sv_push(&s->warnings, "the host's sync manifest was damaged; rebuilding it");
	}
	close(fd);
	return 0;
}

static uint8_t type_of(const struct stat *st)
{
	return S_ISREG(st->st_mode) ? SM_FILE : S_ISDIR(st->st_mode) ? SM_DIR
	       : S_ISLNK(st->st_mode) ? SM_LINK : 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Is a folder above path in dead (sorted)? */
static int under_dead(const struct strvec *dead, const char *path)
{
	char *p = dead->n ? xstrdup(path) : NULL;
	int found = 0;

	for (char *s = p ? strrchr(p, '/') : NULL; s && !found; s = strrchr(p, '/')) {
		*s = '\0';
		const char *k = p;
		found = bsearch(&k, dead->v, dead->n, sizeof(*dead->v), cmp_str) != NULL;
	}
	free(p);
	return found;
}

/* Describe what is at e->path now (st: its lstat) into e, as the manifest
 * would: the content hash of a file, a symlink's target. A file whose
 * inode, size and mtime are the ones recorded is not read again: only its
 * ctime (a hard link made or removed, as a job's snapshot does) or its mode
 * changed, and a write that kept the size and set the mtime back to the
 * nanosecond is what a copy of the same version does. 0, or -1 if it
 * cannot be read (then it counts as gone). */
static int describe(struct sync_session *s, struct sm_entry *e, const struct stat *st)
{
	uint8_t type = type_of(st);
	int same_type = type == e->type;

	if (type == SM_FILE) {
		if (!same_type || e->host.ino != (uint64_t)st->st_ino ||
		    sm_host_size(e) != (uint64_t)st->st_size ||
		    e->host.mtime_ns != sfs_mtime_ns(st)) {
			uint64_t size;
			if (sfs_hash_file(&s->dir, e->path, e->hash, &size) < 0)
				return -1;
			e->size = size;
		}
		/* The host keeps only the owner's bits of what was sent unless
		 * [sync] preserve_perms (safe_file_mode): either is no change. */
		uint32_t m = (uint32_t)st->st_mode & 0777;
		if (!same_type || (m != (e->mode & 0777) && m != (e->mode & 0700)))
			e->mode = m;
		e->mtime_ns = sfs_mtime_ns(st);
	} else if (type == SM_LINK) {
		char buf[4097];
		const char *base;
		int dfd = sfs_parent(&s->dir, e->path, &base);
		ssize_t r = dfd < 0 ? -1 : readlinkat(dfd, base, buf, sizeof(buf) - 1);
		if (r <= 0)
			return -1;
		buf[r] = '\0';
		if (!e->link || strcmp(e->link, buf)) {
			free(e->link);
			e->link = xstrdup(buf);
		}
	}
	if (!same_type) {
		if (type != SM_LINK) {
			free(e->link);
			e->link = NULL;
		}
		if (type != SM_FILE) {
			e->mode = 0;
			e->size = 0;
			e->mtime_ns = 0;
			memset(e->hash, 0, SM_HASH_LEN);
		}
		e->type = type;
	}
	sync_host_fields(e, st);
	return 0;
}

/* The lstat()s of a refresh, a block of the manifest at a time, on up to
 * STAT_THREADS threads (each with its own folder cache, so no symlink is
 * followed, as sfs_lstat promises): on a no-op of a large tree they are
 * the host's whole work, and the kernel's name lookups run in parallel.
 * Each thread takes a contiguous range: sorted paths share folders. */
#define STAT_BLOCK 4096
#define STAT_THREADS 4
#define STAT_PAR_MIN 2048 /* fewer entries: one thread */

struct stat_slot {
	struct stat st;
	int err; /* the lstat failed (gone) */
};

struct stat_job {
	struct sync_session *s;
	const struct sm_list *l;
	struct stat_slot *slot;
	size_t lo, hi; /* manifest indexes; slot[i - base] */
	size_t base;
};

static void *stat_range(void *arg)
{
	struct stat_job *j = arg;
	struct sfs_dir d;

	sync_dir_init(j->s, &d);
	for (size_t i = j->lo; i < j->hi; i++) {
		struct stat_slot *sl = &j->slot[i - j->base];
		sl->err = sfs_lstat(&d, j->l->e[i].path, &sl->st) < 0;
	}
	sfs_dir_release(&d);
	return NULL;
}

/* slot[0 .. hi-lo) gets the lstat of l's entries lo .. hi. */
static void stat_block(struct sync_session *s, const struct sm_list *l, struct stat_slot *slot,
		       size_t lo, size_t hi, int nthreads)
{
	struct stat_job jobs[STAT_THREADS];
	pthread_t th[STAT_THREADS];
	int started[STAT_THREADS] = { 0 };
	size_t n = hi - lo;

	if (nthreads > STAT_THREADS)
		nthreads = STAT_THREADS;
	if (nthreads < 1 || n < STAT_PAR_MIN)
		nthreads = 1;
	for (int t = 0; t < nthreads; t++) {
		jobs[t] = (struct stat_job){ s, l, slot, lo + n * (size_t)t / (size_t)nthreads,
					     lo + n * (size_t)(t + 1) / (size_t)nthreads, lo };
		if (t > 0 && pthread_create(&th[t], NULL, stat_range, &jobs[t]) == 0)
			started[t] = 1;
	}
	stat_range(&jobs[0]);
	for (int t = 1; t < nthreads; t++) {
		if (started[t])
			pthread_join(th[t], NULL);
		else
			stat_range(&jobs[t]); /* no thread: do it here */
	}
}

enum { REF_KEEP, REF_DEAD, REF_GONE, REF_HOST, REF_UPDATED };

/* One entry of a refresh against its lstat (sl): REF_KEEP (as it was),
 * REF_DEAD (below a folder gone: dropped silently), REF_GONE (described
 * in changes as missing), REF_HOST (only the host fields changed) or
 * REF_UPDATED (e describes it now; in changes). For the last three,
 * *before is e as it was (its link the caller frees). dead: the folders
 * gone, in manifest order. */
static int refresh_entry(struct sync_session *s, struct sm_entry *e, const struct stat_slot *sl,
			 struct strvec *dead, struct strbuf *changes, uint32_t *n,
			 struct sm_entry *before)
{
	const struct stat *st = &sl->st;

	if (under_dead(dead, e->path))
		return REF_DEAD;
	int gone = sl->err || !type_of(st);
	int was_dir = e->type == SM_DIR;
	if (!gone && e->type == SM_DIR && S_ISDIR(st->st_mode))
		return REF_KEEP;
	if (!gone && e->type != SM_DIR && type_of(st) == e->type &&
	    e->host.ino == (uint64_t)st->st_ino && sm_host_size(e) == (uint64_t)st->st_size &&
	    e->host.mtime_ns == sfs_mtime_ns(st) && e->host.ctime_ns == sfs_ctime_ns(st))
		return REF_KEEP;
	*before = *e;
	before->link = e->link ? xstrdup(e->link) : NULL;
	if (!gone)
		gone = describe(s, e, st) < 0;
	if (gone) {
		if (was_dir)
			sv_push(dead, e->path);
		put_u8(changes, CHANGE_MISSING);
		put_str(changes, e->path);
		(*n)++;
		return REF_GONE;
	}
	if (was_dir && e->type != SM_DIR)
		sv_push(dead, e->path);
	if (sm_same(before, e)) /* only what the agent notes changed */
		return REF_HOST;
	put_u8(changes, CHANGE_UPDATED);
	sm_put_entry(changes, e, 0);
	(*n)++;
	return REF_UPDATED;
}

/* Compare the manifest with the disk; what differs is updated in place
 * (dropped when gone) and described in *changes. A folder gone, or now a
 * file or symlink, takes what was below it: only the folder is listed.
 * An entry whose host fields changed but not its description is updated
 * silently (s->host_dirty). Returns the number of changes. */
static uint32_t refresh(struct sync_session *s, struct strbuf *changes)
{
	struct strvec dead = STRVEC_INIT; /* sorted: manifest order */
	uint32_t n = 0;
	size_t keep = 0, nslots = s->man.n < STAT_BLOCK ? s->man.n : STAT_BLOCK;
	struct stat_slot *slot = xcalloc(nslots ? nslots : 1, sizeof(*slot));
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int nthreads = cpus < 1 ? 1 : cpus > STAT_THREADS ? STAT_THREADS : (int)cpus;

	for (size_t i = 0; i < s->man.n; i++) {
		struct sm_entry *e = &s->man.e[i], before;
		if (i % STAT_BLOCK == 0) {
			size_t hi = i + STAT_BLOCK < s->man.n ? i + STAT_BLOCK : s->man.n;
			agent_keepalive();
			stat_block(s, &s->man, slot, i, hi, nthreads);
		}
		if (i % 256 == 0)
			agent_keepalive();
		int r = refresh_entry(s, e, &slot[i % STAT_BLOCK], &dead, changes, &n, &before);
		if (r != REF_KEEP && r != REF_DEAD)
			free(before.link);
		if (r == REF_DEAD || r == REF_GONE) {
			sm_entry_release(e);
			continue;
		}
		if (r == REF_HOST)
			s->host_dirty = 1;
		s->man.e[keep++] = *e;
	}
	s->man.n = keep;
	sv_clear(&dead);
	free(slot);
	return n;
}

/* A copy of e (path, link and all, what the host saw too) at the end of l. */
static void put_copy(struct sm_list *l, const struct sm_entry *e)
{
	sm_add_copy(l, e)->host = e->host;
}

/* The refresh of a manifest left on disk: the file read as a stream, a
 * block of entries at a time, both digests (as read, and after the
 * refresh) made on the way; what changed goes into s->ov, the files a
 * delta may be made against into s->bases. */
struct disk_refresh {
	struct sync_session *s;
	struct sm_list blk;
	struct stat_slot slot[STAT_BLOCK];
	int nthreads;
	struct strvec dead;
	struct strbuf *changes;
	uint32_t n;
	struct sm_digest base, after;
	int after_on;
};

static void keep_base(struct sync_session *s, const struct sm_entry *e)
{
	if (e->type == SM_FILE && e->size >= SYNC_DELTA_BASE_MIN)
		put_copy(&s->bases, e);
}

static void dr_block(struct disk_refresh *r)
{
	struct sync_session *s = r->s;

	agent_keepalive();
	stat_block(s, &r->blk, r->slot, 0, r->blk.n, r->nthreads);
	for (size_t i = 0; i < r->blk.n; i++) {
		struct sm_entry *e = &r->blk.e[i], before;
		if (i % 256 == 0)
			agent_keepalive();
		int res = refresh_entry(s, e, &r->slot[i], &r->dead, r->changes, &r->n, &before);
		if (res == REF_KEEP) {
			sm_digest_add(&r->base, e);
			if (r->after_on)
				sm_digest_add(&r->after, e);
			keep_base(s, e);
			continue;
		}
		if (!r->after_on) { /* the same so far */
			r->after.s = r->base.s;
			r->after_on = 1;
		}
		sm_digest_add(&r->base, res == REF_DEAD ? e : &before);
		if (res == REF_HOST || res == REF_UPDATED) {
			sm_digest_add(&r->after, e);
			put_copy(&s->ov.put, e);
			keep_base(s, e);
			s->host_dirty |= res == REF_HOST;
		} else {
			sv_push(&s->ov.del, e->path);
		}
		if (res != REF_DEAD)
			free(before.link);
	}
	while (r->blk.n)
		sm_entry_release(&r->blk.e[--r->blk.n]);
}

static void dr_entry(void *arg, const struct sm_entry *e)
{
	struct disk_refresh *r = arg;

	put_copy(&r->blk, e);
	if (r->blk.n == STAT_BLOCK)
		dr_block(r);
}

/* base: the digest of the file as read; after: of the manifest after the
 * refresh. Returns the number of changes (as refresh). */
static uint32_t refresh_disk(struct sync_session *s, struct strbuf *changes,
			     uint8_t base[SM_HASH_LEN], uint8_t after[SM_HASH_LEN])
{
	struct disk_refresh *r = xcalloc(1, sizeof(*r));
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t n;

	r->s = s;
	r->changes = changes;
	r->nthreads = cpus < 1 ? 1 : cpus > STAT_THREADS ? STAT_THREADS : (int)cpus;
	sm_digest_init(&r->base);
	sm_digest_init(&r->after);
	int rc = s->manfd < 0 ? 0 : sm_decode_fd_each(s->manfd, 1, dr_entry, r, NULL);
	if (!rc)
		dr_block(r);
	sm_digest_final(&r->base, base);
	sm_digest_final(&r->after, after);
	if (!r->after_on)
		memcpy(after, base, SM_HASH_LEN);
	n = r->n;
	if (rc < 0) {
		/* A damaged manifest: start over as if nothing were known
		 * (the client then sends everything, replacing by rename). */
		sv_push(&s->warnings, "the host's sync manifest was damaged; rebuilding it");
		close(s->manfd);
		s->manfd = -1;
		sync_overlay_clear(&s->ov);
		sm_list_free(&s->bases);
		sb_reset(changes);
		s->host_dirty = 0;
		n = 0;
		struct sm_list none = { 0 };
		sm_digest(&none, base);
		memcpy(after, base, SM_HASH_LEN);
	}
	while (r->blk.n)
		sm_entry_release(&r->blk.e[--r->blk.n]);
	sm_list_free(&r->blk);
	sv_clear(&r->dead);
	free(r);
	return n;
}

/* What OPEN finds before it can answer, kept by PREPARE for it. */
struct session_start {
	uint32_t state;          /* SYNC_STATE_NEW_ROOT */
	uint32_t nchanged;
	struct strbuf changes;   /* what refresh found changed */
	uint8_t base[SM_HASH_LEN]; /* the manifest's digest as loaded */
	uint8_t after[SM_HASH_LEN]; /* on_disk: its digest after the refresh */
};

/* Everything OPEN does before it can answer: the root (made unless dry),
 * the lock, a dead session's temp files, the manifest and its refresh
 * against the disk. For PREPARE (prep): only where there is a manifest to
 * check (nothing is made), and only if the lock is free at once. */
static int session_start(struct sync_session *s, const char *full, int dry, int prep,
			 int trust, struct session_start *ss, struct gr_err *err)
{
	int created = 0, rc;

	rc = sfs_open_root(full, !dry && !prep, &s->rootfd, &s->root, &created, err);
	if (rc == GR_ENOTFOUND && dry) {
		rc = 0; /* a dry run into a folder not made yet: it is empty */
		s->root = xstrdup(full);
		ss->state |= SYNC_STATE_NEW_ROOT;
	}
	if (rc < 0)
		return rc;
	sync_dir_init(s, &s->dir);
	if (created)
		ss->state |= SYNC_STATE_NEW_ROOT;
	if (s->rootfd >= 0) {
		int statefd = s->statefd = statefd_of(s, !dry && !prep);
		if (statefd < 0 && prep)
			return gr_errf(err, GR_ENOTFOUND, "no manifest yet");
		if (statefd < 0 && !dry)
			return gr_errf(err, GR_EIO, "cannot create '%s/%s': %s", s->root,
				       SYNC_STATE_DIR, strerror(errno));
		if (prep) {
			s->lockfd = openat(statefd, STATE_NAME(SYNC_LOCK_FILE),
					   O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
			if (s->lockfd < 0 || flock(s->lockfd, LOCK_EX | LOCK_NB) < 0)
				return gr_errf(err, GR_EIO, "'%s' is locked", s->root);
		} else if (!dry && (rc = take_lock(s, statefd, err)) < 0) {
			return rc;
		}
		if (!dry) {
			clean_journal(s, statefd);
			/* and the manifest's own, had an agent died writing it */
			sfs_clean_tmps(&s->dir, SYNC_STATE_DIR);
		}
		if (!load_manifest(s, statefd, !dry, !trust, ss->base) && !s->on_disk)
			sm_digest(&s->man, ss->base);
		/* (Trusted: the client's watcher says what changed on its side,
		 * and asks for no look at the disk; each file written is still
		 * checked as it is written, and its next walked sync refreshes.) */
		if (s->on_disk)
			ss->nchanged = refresh_disk(s, &ss->changes, ss->base, ss->after);
		else if (!trust)
			ss->nchanged = refresh(s, &ss->changes);
	} else {
		sm_digest(&s->man, ss->base);
	}
	return 0;
}

static struct sync_session *session_new(void)
{
	struct sync_session *s = xcalloc(1, sizeof(*s));

	s->lockfd = s->journalfd = s->rootfd = s->statefd = s->manfd = s->spillfd = -1;
	pthread_mutex_init(&s->mu, NULL);
	return s;
}

/* PREPARE's work, until an OPEN takes it or the connection ends. */
static struct {
	struct sync_session *s;
	char *full;
	uint32_t flags;
	struct session_start ss;
} prepared;

static void prepared_drop(void)
{
	sync_session_free(prepared.s);
	free(prepared.full);
	sb_release(&prepared.ss.changes);
	memset(&prepared, 0, sizeof(prepared));
}

void sync_session_prepare(const char *path, uint32_t flags)
{
	struct gr_err err = { 0 };

	prepared_drop();
	if (current || (flags & (SYNC_OPEN_DRY_RUN | SYNC_OPEN_OPTIMISTIC)))
		return;
	prepared.s = session_new();
	prepared.full = agent_path(path);
	prepared.flags = flags;
	safe_perms_preserve(flags & SYNC_OPEN_PRESERVE_PERMS);
	if (session_start(prepared.s, prepared.full, 0, 1, 0, &prepared.ss, &err) < 0)
		prepared_drop(); /* the OPEN does it again, and says why */
}

int sync_session_open(struct agent *a, uint32_t id, const char *path, uint32_t flags,
		      const uint8_t *expect, const uint8_t *local,
		      struct sync_session **out, struct gr_err *err)
{
	int dry = flags & SYNC_OPEN_DRY_RUN, rc = 0;
	struct sync_session *s = NULL;
	struct session_start ss = { 0 };
	struct strbuf pl = STRBUF_INIT;
	char *full = agent_path(path);
	uint8_t digest[SM_HASH_LEN];
	uint32_t state;

	*out = NULL;
	/* PREPARE did the start for this folder (of the flags, only the
	 * permissions change what the refresh records). */
	if (prepared.s && !dry && !strcmp(prepared.full, full) &&
	    !((prepared.flags ^ flags) & SYNC_OPEN_PRESERVE_PERMS)) {
		s = prepared.s;
		ss = prepared.ss;
		prepared.s = NULL;
		prepared.ss.changes = (struct strbuf)STRBUF_INIT;
	}
	prepared_drop();
	if (!s) {
		s = session_new();
		int trust = (flags & SYNC_OPEN_TRUST) && (flags & SYNC_OPEN_OPTIMISTIC) && !dry;
		if ((rc = session_start(s, full, dry, 0, trust, &ss, err)) < 0)
			goto out;
	}
	s->id = id;
	state = ss.state;
	/* Only a change refresh counted changes a description (a folder gone
	 * is counted for all below it): else the digest is the one loaded
	 * (a second digest of 300k entries was ~60 ms of every OPEN). */
	if (s->on_disk)
		memcpy(digest, ss.after, SM_HASH_LEN);
	else if (ss.nchanged)
		sm_digest(&s->man, digest);
	else
		memcpy(digest, ss.base, SM_HASH_LEN);
	if (!memcmp(digest, local, SM_HASH_LEN))
		state |= SYNC_STATE_IN_SYNC;
	int send_all = !expect || memcmp(expect, ss.base, SM_HASH_LEN) ||
		       (flags & SYNC_OPEN_WANT_MANIFEST);
	int done = dry || (state & SYNC_STATE_IN_SYNC);
	if ((flags & SYNC_OPEN_OPTIMISTIC) && !done && (send_all || ss.nchanged)) {
		/* What the client already sent was planned for another state:
		 * refuse it all; it opens a session again and gets the details. */
		state |= SYNC_STATE_REJECTED;
		done = 1;
	} else if (send_all && !(state & SYNC_STATE_IN_SYNC)) {
		state |= SYNC_STATE_HAS_MANIFEST;
	}
	/* What changed on the disk goes into the manifest now, unless the
	 * client comes back (rejected): it must hear about those changes. */
	if ((ss.nchanged || s->host_dirty) && !dry && !(state & SYNC_STATE_REJECTED)) {
		uint8_t d[SM_HASH_LEN];
		rc = s->on_disk ? sync_man_write(s, &s->ov, d, NULL, err)
				: sync_write_manifest(s, &s->man, err);
		if (rc < 0)
			goto out;
		sync_overlay_clear(&s->ov); /* in the file now */
	}
	s->host_dirty = 0;
	struct statvfs vfs;
	uint64_t free_bytes = 0;
	if (s->rootfd >= 0 && fstatvfs(s->rootfd, &vfs) == 0)
		free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	put_u32(&pl, state);
	put_bytes(&pl, digest, SM_HASH_LEN);
	put_str(&pl, s->root);
	put_u64(&pl, free_bytes);
	put_u32(&pl, ss.nchanged);
	sb_add(&pl, ss.changes.buf, ss.changes.len);
	struct strbuf z = STRBUF_INIT, tail = STRBUF_INIT;
	uint64_t zlen = 0;
	int zfd = -1;
	if ((state & SYNC_STATE_HAS_MANIFEST) && s->on_disk) {
		/* Compressed into a file with no name, sent from it as the
		 * client takes it: never whole in memory (at 1,000,000 entries
		 * ~50 MB, held three times: compressed, the answer, queued). */
		zfd = openat(s->statefd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if ((rc = sync_man_encode_z(s, &s->ov, zfd, &z, &zlen, err)) < 0) {
			if (zfd >= 0)
				close(zfd);
			sb_release(&z);
			goto out;
		}
	} else if (state & SYNC_STATE_HAS_MANIFEST) {
		sm_encode_z(&s->man, &z);
	}
	put_u32(&tail, (uint32_t)s->warnings.n);
	for (size_t i = 0; i < s->warnings.n; i++)
		put_str(&tail, s->warnings.v[i]);
	sv_clear(&s->warnings);
	if (zfd >= 0) {
		put_u32(&pl, (uint32_t)zlen); /* (the client takes 512 MiB at most) */
		int sent = zlen <= SYNC_ANSWER_MAX &&
			   sync_send_long_fd(a, id, SYNC_MSG_STATE, done ? GR_F_END : 0, &pl, zfd,
					     zlen, &tail) == 0;
		close(zfd);
		if (!sent) {
			sb_release(&tail);
			sb_release(&z);
			rc = gr_errf(err, GR_EIO, "cannot send the sync manifest (%llu bytes)",
				     (unsigned long long)zlen);
			goto out;
		}
	} else {
		put_bytes(&pl, z.buf, z.len);
		sb_add(&pl, tail.buf, tail.len);
		sync_send_long(a, id, SYNC_MSG_STATE, done ? GR_F_END : 0, &pl);
	}
	sb_release(&tail);
	sb_release(&z);
	if (!done) {
		*out = current = s;
		s = NULL;
	}
out:
	sync_session_free(s);
	free(full);
	sb_release(&ss.changes);
	sb_release(&pl);
	return rc;
}

void sync_session_free(struct sync_session *s)
{
	if (!s)
		return;
	if (current == s)
		current = NULL;
	untar_free(s->tar);
	sync_wb_stop(s);
	sync_flush_join(s);
	sync_pend_drop(s, 1);
	sync_stages_drop(s);
	if (s->journalfd >= 0) {
		close(s->journalfd);
		unlinkat(s->statefd, STATE_NAME(SYNC_JOURNAL_FILE), 0);
	}
	if (s->statefd >= 0)
		close(s->statefd);
	sfs_dir_release(&s->dir);
	if (s->lockfd >= 0)
		close(s->lockfd); /* releases the flock */
	if (s->rootfd >= 0)
		close(s->rootfd);
	sm_list_free(&s->man);
	if (s->manfd >= 0)
		close(s->manfd);
	sync_overlay_clear(&s->ov);
	sm_list_free(&s->bases);
	sm_list_free(&s->added);
	sv_clear(&s->deleted);
	for (size_t i = 0; i < s->nmetas; i++)
		free(s->metas[i].path);
	free(s->metas);
	free(s->err_kinds);
	sv_clear(&s->err_paths);
	sv_clear(&s->err_msgs);
	sv_clear(&s->warnings);
	sv_clear(&s->journaled);
	pthread_mutex_destroy(&s->mu);
	free(s->root);
	free(s);
}

