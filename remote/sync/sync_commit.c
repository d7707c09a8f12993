/* The agent's OPS (deletions, folders, symlinks, applied at once, since a
 * file that becomes a folder must make room first; a new folder is staged,
 * sync_agent.h) and COMMIT: every temp file is made durable at once
 * (make_durable), then each staged folder and each temp file is renamed
 * over its final name (atomic per rename), metadata changes are applied,
 * and the manifest is written last. A session that never commits leaves
 * every file old. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "sync_agent.h"
#include "sync_apply.h"

static void op_delete(struct sync_session *s, const char *path)
{
	const char *base;
	int dfd = sfs_parent(&s->dir, path, &base);
	struct stat st;

	sv_push(&s->deleted, path);
	if (dfd < 0 || fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return; /* already gone */
	if (S_ISDIR(st.st_mode)) {
		if (unlinkat(dfd, base, AT_REMOVEDIR) < 0) {
			if (errno == ENOTEMPTY || errno == EEXIST) {
				char *w = xasprintf("kept folder '%s' on the host: it holds files "
						    "gpurun did not send", path);
				sv_push(&s->warnings, w);
				free(w);
			} else {
				sync_add_error(s, path, "cannot remove: %s", strerror(errno));
			}
		}
	} else if (unlinkat(dfd, base, 0) < 0 && errno != ENOENT) {
		sync_add_error(s, path, "cannot remove: %s", strerror(errno));
	}
}

/* A folder the host does not have, while no file stream has begun: made
 * under a temp name, renamed into place at COMMIT (sync_agent.h). 1 if
 * staged (or staged already), 0 to make it the usual way. */
static int stage_mkdir(struct sync_session *s, const char *path)
{
	static unsigned long counter;
	const struct sync_stage *up = sync_stage_above(s, path, strlen(path));
	const char *base;
	struct stat st;
	char tmp[64];

	if (up)
		return !strcmp(up->path, path); /* below one: made inside it */
	if (s->stage_frozen)
		return 0;
	int dfd = sfs_parent(&s->dir, path, &base);
	if (dfd < 0 || fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
		return 0;
	snprintf(tmp, sizeof(tmp), SYNC_TMP_PREFIX "d%ld-%lu", (long)getpid(), counter++);
	if (mkdirat(dfd, tmp, safe_dir_mode()) < 0)
		return 0;
	sync_stage_add(s, path, tmp);
	sm_add(&s->added, path, SM_DIR);
	return 1;
}

static void op_mkdir(struct sync_session *s, const char *path)
{
	const char *base;
	struct stat st;

	if (stage_mkdir(s, path))
		return;
	int dfd = sfs_parent(&s->dir, path, &base);
	if (dfd < 0) {
		sync_add_errno(s, path, errno, "cannot create folder: %s", strerror(errno));
		return;
	}
	if (mkdirat(dfd, base, safe_dir_mode()) < 0 && errno != EEXIST) {
		sync_add_errno(s, path, errno, "cannot create folder: %s", strerror(errno));
		return;
	}
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		sync_add_errno(s, path, errno, "cannot create folder: %s", strerror(errno));
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		/* A file or a symlink where the project has a folder: it goes
		 * (a symlink is never followed), and the folder is made. */
		const char *what = S_ISLNK(st.st_mode) ? "a symlink" : "a file";
		if (unlinkat(dfd, base, 0) < 0 || mkdirat(dfd, base, safe_dir_mode()) < 0) {
			sync_add_errno(s, path, errno, "cannot create folder: %s is in the way: %s",
				       what, strerror(errno));
			return;
		}
		sv_pushf(&s->warnings, "'%s' was %s on the host; replaced with the folder", path,
			 what);
	}
	sm_add(&s->added, path, SM_DIR);
}

/* Rename tmp over base: a file or symlink there is replaced, an empty
 * folder removed first; a folder that still holds something stays
 * (ENOTEMPTY). 0, or -1 with errno. */
static int rename_over(int dfd, const char *tmp, const char *base)
{
	if (renameat(dfd, tmp, dfd, base) == 0)
		return 0;
	if (errno != EISDIR && errno != ENOTEMPTY && errno != EEXIST && errno != ENOTDIR)
		return -1;
	struct stat st;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
		return -1;
	if (unlinkat(dfd, base, AT_REMOVEDIR) < 0) {
		if (errno == EEXIST)
			errno = ENOTEMPTY;
		return -1;
	}
	return renameat(dfd, tmp, dfd, base);
}

static const char *rename_error(int e)
{
	return e == ENOTEMPTY ? "a folder holding files gpurun did not send is in the way"
			      : strerror(e);
}

static void op_symlink(struct sync_session *s, const char *path, const char *target)
{
	const char *base;
	int dfd = sfs_parent(&s->dir, path, &base);
	char tmp[64];
	struct stat st;

	if (dfd < 0) {
		sync_add_errno(s, path, errno, "cannot create symlink: %s", strerror(errno));
		return;
	}
	/* Made under a temp name and renamed over the old entry: atomic. */
	for (int tries = 0;; tries++) {
		static unsigned long n;
		snprintf(tmp, sizeof(tmp), SYNC_TMP_PREFIX "l%ld-%lu", (long)getpid(), n++);
		if (symlinkat(target, dfd, tmp) == 0)
			break;
		if (errno != EEXIST || tries > 100) {
			sync_add_errno(s, path, errno, "cannot create symlink: %s", strerror(errno));
			return;
		}
	}
	if (rename_over(dfd, tmp, base) < 0) {
		int e = errno;
		sync_add_errno(s, path, e, "cannot create symlink: %s", rename_error(e));
		unlinkat(dfd, tmp, 0);
		return;
	}
	struct sm_entry *e = sm_add(&s->added, path, SM_LINK);
	e->link = xstrdup(target);
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0)
		sync_host_fields(e, &st);
}

int sync_apply_ops(struct sync_session *s, struct gr_rd *rd, struct gr_err *err)
{
	uint32_t n = get_u32(rd);

	for (uint32_t i = 0; i < n && !rd->bad; i++) {
		uint8_t op = get_u8(rd);
		char *path = get_str(rd), *target = NULL;
		uint32_t mode = 0;
		int64_t mtime = 0;
		if (op == SYNC_OP_SYMLINK)
			target = get_str(rd);
		if (op == SYNC_OP_META) {
			mode = get_u32(rd);
			mtime = (int64_t)get_u64(rd);
		}
		if (rd->bad || !path || !sync_path_ok(path) ||
		    (op == SYNC_OP_SYMLINK && (!target || !*target))) {
			free(path);
			free(target);
			return gr_errf(err, GR_EPROTO, "malformed or unsafe SYNC_OPS");
		}
		if ((i + 1) % 256 == 0)
			agent_keepalive();
		switch (op) {
		case SYNC_OP_DELETE: op_delete(s, path); break;
		case SYNC_OP_MKDIR: op_mkdir(s, path); break;
		case SYNC_OP_SYMLINK: op_symlink(s, path, target); break;
		case SYNC_OP_META: /* at COMMIT, after the renames */
			s->metas = xrealloc(s->metas, (s->nmetas + 1) * sizeof(*s->metas));
			s->metas[s->nmetas++] = (struct sync_meta){ path, mode, mtime };
			path = NULL;
			break;
		default:
			free(path);
			free(target);
			return gr_errf(err, GR_EPROTO, "unknown sync op %u", op);
		}
		free(path);
		free(target);
	}
	return rd_done(rd, err, "SYNC_OPS");
}

/* chmod + mtime on a regular file, never through a symlink. */
static int set_meta(struct sync_session *s, const char *path, uint32_t mode,
		    int64_t mtime_ns, struct stat *st)
{
	const char *base;
	int dfd = sfs_parent(&s->dir, path, &base);
	struct timespec ts[2] = {
		{ 0, UTIME_OMIT },
		{ (time_t)(mtime_ns / 1000000000LL), (long)(mtime_ns % 1000000000LL) },
	};

	if (ts[1].tv_nsec < 0) {
		ts[1].tv_sec--;
		ts[1].tv_nsec += 1000000000L;
	}
	if (dfd < 0 || fstatat(dfd, base, st, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	if (!S_ISREG(st->st_mode)) {
		errno = EINVAL;
		return -1;
	}
	if (fchmodat(dfd, base, safe_file_mode(mode), 0) < 0 ||
	    utimensat(dfd, base, ts, AT_SYMLINK_NOFOLLOW) < 0)
		return -1;
	return fstatat(dfd, base, st, AT_SYMLINK_NOFOLLOW);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int in_sorted(char **v, size_t n, const char *p)
{
	return n && bsearch(&p, v, n, sizeof(*v), cmp_str) != NULL;
}

/* s->added sorted, one entry a path (the later one wins). */
static void added_unique(struct sync_session *s)
{
	size_t keep = 0;

	sm_sort(&s->added);
	for (size_t i = 0; i < s->added.n; i++) {
		struct sm_entry *e = &s->added.e[i];
		if (i + 1 < s->added.n && !strcmp(e->path, s->added.e[i + 1].path)) {
			sm_entry_release(e); /* the later one wins */
			continue;
		}
		s->added.e[keep++] = *e;
	}
	s->added.n = keep;
}

/* The manifest after this session, made in s->man itself: old entries
 * minus deletions and minus those replaced, then the new and replaced
 * ones (s->added, whose entries move in: added is left empty), sorted.
 * Made as a second list beside the old one and added, it held every
 * entry twice at the agent's peak. */
static void merge(struct sync_session *s)
{
	struct sm_list *m = &s->man;
	size_t keep = 0;

	added_unique(s);
	if (s->deleted.n > 1)
		qsort(s->deleted.v, s->deleted.n, sizeof(char *), cmp_str);
	for (size_t i = 0; i < m->n; i++) {
		struct sm_entry *e = &m->e[i];
		if (sm_find(&s->added, e->path) || in_sorted(s->deleted.v, s->deleted.n, e->path)) {
			sm_entry_release(e);
			continue;
		}
		m->e[keep++] = *e;
	}
	m->n = keep;
	/* The shorter list moves into the longer one (a first sync's added
	 * holds every file, an edit's old list does). */
	struct sm_list *big = m->n >= s->added.n ? m : &s->added;
	struct sm_list *small = big == m ? &s->added : m;
	/* Both are sorted and share no path: merged from the end, in place
	 * (a sort of the whole was ~12 ms of a 300k-entry COMMIT). */
	sm_reserve(big, small->n);
	size_t i = big->n, j = small->n, k = big->n + small->n;
	while (j > 0) {
		if (i > 0 && strcmp(big->e[i - 1].path, small->e[j - 1].path) > 0)
			big->e[--k] = big->e[--i];
		else
			big->e[--k] = small->e[--j]; /* moved: path and link go with it */
	}
	big->n += small->n;
	small->n = 0;
	sm_list_free(small);
	if (big != m) {
		*m = *big;
		*big = (struct sm_list){ 0 };
	}
	sm_shrink(m);
}

/* The new manifest's digest, made on a thread while the manifest is
 * written (each is ~60 ms at 300k entries); both only read the list. */
struct digest_job {
	const struct sm_list *m;
	uint8_t digest[SM_HASH_LEN];
};

static void *digest_main(void *arg)
{
	struct digest_job *j = arg;

	sm_digest(j->m, j->digest);
	return NULL;
}

/* How COMMIT makes the temp files durable, before any replaces an old
 * file. syncfs does it, but it also waits for every other writer's dirty
 * data on that file system: on a GPU box, the running job's checkpoints
 * (issue 13: bench_sync's busy case, a 3,000-file first sync with 512 MiB
 * of another writer's data waiting, took 1.34x rsync's time with syncfs
 * and 1.11x without, on a quiet machine).
 * So on ext4 and XFS, for up to SYNC_OWN_SMALL_MAX small files: start each
 * small file's writeback (a large one's started as it was written), wait
 * for every file's own data, then fsync one new, unnamed file there: a
 * journal commit on these file systems takes every earlier metadata change
 * with it and flushes the disk's cache (git's core.fsyncMethod=batch does
 * the same). More small files than that: syncfs, whose write-back merges
 * neighbouring files into one request (100,000 small files: 3.4 s, against
 * 5.9 s started one by one, on a new ext4 here); a long tar stream starts
 * it every SYNC_FLUSH_EVERY small files as they come, so most of it is
 * done by COMMIT. Elsewhere (btrfs, whose fsync logs one file; NFS;
 * others), and if any step fails: syncfs. */
#define EXT4_MAGIC 0xEF53u /* linux/magic.h's EXT4_SUPER_MAGIC */
#define XFS_MAGIC 0x58465342u

struct durable_job {
	struct sync_session *s;
	int done;
	pthread_mutex_t mu;
	pthread_cond_t cv;
};

/* sync_file_range of each pending temp file from pend[from] on with these
 * flags; small: only those under SYNC_HINT_MIN bytes. */
static int each_pending(struct sync_session *s, size_t from, int small, unsigned flags)
{
	struct sfs_dir d;
	int rc = 0;

	sync_dir_init(s, &d);
	for (size_t i = from; i < s->npend && !rc; i++)
		if (!small || s->pend[i].size < SYNC_HINT_MIN)
			rc = sync_pending_range(&d, &s->pend[i], flags);
	sfs_dir_release(&d);
	return rc;
}

static int own_data_then_commit(struct sync_session *s)
{
	struct statfs sf;
	size_t small = 0;

	if (fstatfs(s->rootfd, &sf) < 0 ||
	    ((unsigned long)sf.f_type != EXT4_MAGIC && (unsigned long)sf.f_type != XFS_MAGIC))
		return -1;
	for (size_t i = 0; i < s->npend; i++)
		small += s->pend[i].size < SYNC_HINT_MIN;
	if (small > SYNC_OWN_SMALL_MAX || s->nruns) /* (runs: more than that in all) */
		return -1;
	if (each_pending(s, s->wb_next, 1, SYNC_FILE_RANGE_WRITE) < 0 ||
	    each_pending(s, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
				       SYNC_FILE_RANGE_WAIT_AFTER) < 0)
		return -1;
	int fd = openat(s->rootfd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
	int rc = fd < 0 || fsync(fd) < 0 ? -1 : 0;
	if (fd >= 0)
		close(fd);
	return rc;
}

static void *durable_main(void *arg)
{
	struct durable_job *j = arg;

	sync_flush_join(j->s); /* what a long tar stream started */
	if (own_data_then_commit(j->s) < 0)
		syncfs(j->s->rootfd);
	pthread_mutex_lock(&j->mu);
	j->done = 1;
	pthread_cond_signal(&j->cv);
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

/* On a thread, which may wait long on a busy disk: the agent tells the
 * client meanwhile that it is busy, not gone. The wait ends when the
 * thread's work does (it used to poll every 20 ms, and lost 10 ms a
 * COMMIT on average). */
static void make_durable(struct sync_session *s)
{
	struct durable_job j = { s, 0, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER };
	pthread_t th;

	if (pthread_create(&th, NULL, durable_main, &j) != 0) {
		durable_main(&j);
		return;
	}
	pthread_mutex_lock(&j.mu);
	while (!j.done) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += 200 * 1000000L; /* KEEPALIVE_MS is far longer */
		if (t.tv_nsec >= 1000000000L) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&j.cv, &j.mu, &t);
		if (!j.done) {
			pthread_mutex_unlock(&j.mu);
			agent_keepalive();
			pthread_mutex_lock(&j.mu);
		}
	}
	pthread_mutex_unlock(&j.mu);
	pthread_join(th, NULL);
}

/* One mode/time-only change OPS announced, to the file old describes
 * (NULL: the manifest has no such path). */
static void apply_meta(struct sync_session *s, const struct sync_meta *m, struct sm_entry *old)
{
	struct stat st;

	if (!old || old->type != SM_FILE) {
		sync_add_error(s, m->path, "cannot change mode or time: not a file gpurun sent");
	} else if (set_meta(s, m->path, m->mode, m->mtime_ns, &st) < 0) {
		sync_add_errno(s, m->path, errno, "cannot change mode or time: %s",
			       strerror(errno));
	} else {
		old->mode = m->mode & 0777;
		old->mtime_ns = m->mtime_ns;
		sync_host_fields(old, &st);
	}
}

static void apply_metas(struct sync_session *s)
{
	for (size_t i = 0; i < s->nmetas; i++)
		apply_meta(s, &s->metas[i], sm_find(&s->man, s->metas[i].path));
}

/* By path, and in the order OPS sent them (a second one for a path
 * applies after the first). */
static int cmp_meta(const void *a, const void *b)
{
	const struct sync_meta *x = *(const struct sync_meta *const *)a;
	const struct sync_meta *y = *(const struct sync_meta *const *)b;
	int c = strcmp(x->path, y->path);

	return c ? c : (x > y) - (x < y);
}

/* COMMIT's manifest for a session that left it on disk: the file read
 * and written as a stream with added, the files put in place, deleted
 * and the metas applied on the way (the metas' changes to the files are
 * made then too). */
static int write_on_disk(struct sync_session *s, uint8_t digest[SM_HASH_LEN], struct gr_err *err)
{
	struct man_overlay ov = { .meta = apply_meta };
	struct strvec leaves = STRVEC_INIT;
	int rc;

	added_unique(s);
	if (s->deleted.n > 1)
		qsort(s->deleted.v, s->deleted.n, sizeof(char *), cmp_str);
	ov.put = s->added; /* (lent: the session frees them) */
	ov.pend = sync_pend_merge_start(s);
	ov.del = s->deleted;
	ov.metas = xcalloc(s->nmetas ? s->nmetas : 1, sizeof(*ov.metas));
	for (size_t i = 0; i < s->nmetas; i++)
		ov.metas[i] = &s->metas[i];
	ov.nmetas = s->nmetas;
	qsort(ov.metas, ov.nmetas, sizeof(*ov.metas), cmp_meta);
	rc = sync_man_write(s, &ov, digest, &leaves, err);
	if (!rc)
		sync_leaves_gc_want(s->statefd, &leaves);
	sync_pend_merge_end(ov.pend); /* (its failure failed the write) */
	sync_pend_drop(s, 0); /* in place, or failed */
	sv_clear(&leaves);
	free(ov.metas);
	return rc;
}

/* The staged folders into place, each with one rename; then paths no
 * longer resolve through them. A folder that cannot take its place
 * (something got there meanwhile) fails with all it holds. Returns how
 * many failed. */
static size_t place_stages(struct sync_session *s)
{
	size_t failed = 0;

	for (size_t i = 0; i < s->nstages; i++) {
		struct sync_stage *st = &s->stages[i];
		const char *base;
		int dfd = sfs_parent(&s->dir, st->path, &base);
		if (dfd >= 0 && rename_over(dfd, st->tmp, base) == 0) {
			st->state = 1;
			continue;
		}
		int e = errno;
		st->state = -1;
		failed++;
		sync_add_errno(s, st->path, e, "cannot put in place: %s", rename_error(e));
	}
	sfs_dir_release(&s->dir); /* it may hold a folder by its staged name */
	if (failed) { /* what was made in them is not there */
		size_t keep = 0;
		for (size_t i = 0; i < s->added.n; i++) {
			struct sm_entry *e = &s->added.e[i];
			const struct sync_stage *st = sync_stage_above(s, e->path, strlen(e->path));
			if (st && st->state < 0) {
				sm_entry_release(e);
				continue;
			}
			s->added.e[keep++] = *e;
		}
		s->added.n = keep;
	}
	return failed;
}

struct place_ctx {
	struct sync_session *s;
	size_t stages_failed, n;
};

/* Put one file received in place: 1 if it could not be. A walked
 * session's stays pending (its entry is made as the manifest is written,
 * from the file then in place: no second list of every file a first sync
 * sent); else it moves into s->added. */
static int place_one(void *arg, struct sync_pending *p)
{
	struct place_ctx *pc = arg;
	struct sync_session *s = pc->s;
	const char *base, *tmp = sync_pending_tmp(p);
	struct stat st;

	if (pc->n++ % 256 == 0)
		agent_keepalive();
	int in_place = sync_pending_in_place(p);
	if (in_place && pc->stages_failed) {
		const struct sync_stage *sg = sync_stage_above(s, p->path, strlen(p->path));
		if (sg && sg->state < 0) {
			sync_add_error(s, p->path, "cannot put in place: its folder '%s' could "
				       "not be", sg->path);
			return 1;
		}
	}
	int dfd = sfs_parent(&s->dir, p->path, &base);
	if (dfd < 0 || (!in_place && rename_over(dfd, tmp, base) < 0)) {
		int e = errno;
		sync_add_errno(s, p->path, e, "cannot put in place: %s", rename_error(e));
		if (dfd >= 0)
			unlinkat(dfd, sync_pending_tmp(p), 0);
		return 1;
	}
	if (!s->on_disk) {
		/* The path moves (its temp name after it is a few bytes
		 * more): a copy was 48 bytes a file beside the pending
		 * list. */
		struct sm_entry *e = sm_add_take(&s->added, p->path, SM_FILE);
		p->path = NULL;
		e->size = p->size;
		e->mtime_ns = p->mtime_ns;
		memcpy(e->hash, p->hash, SM_HASH_LEN);
		e->mode = p->mode;
		if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0)
			sync_host_fields(e, &st);
	}
	return 0;
}

int sync_commit(struct agent *a, struct sync_session *s, struct gr_rd *rd, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT;
	size_t elen = 0;
	const uint8_t *expect = get_bytes(rd, &elen);
	int rc = 0;

	(void)expect; /* the client compares the digests */
	if ((rc = rd_done(rd, err, "SYNC_COMMIT")) < 0)
		return rc;
	if (s->tar)
		return gr_errf(err, GR_EPROTO, "COMMIT before the tar stream ended");
	/* Every temp file durable at once, before any of them replaces an
	 * old file. */
	sync_wb_stop(s);
	make_durable(s);
	size_t stages_failed = place_stages(s);
	if (!s->on_disk)
		sm_reserve(&s->added, s->npend);
	struct place_ctx pc = { s, stages_failed, 0 };
	if (sync_pend_each(s, place_one, &pc) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot read back the list of files received: %s",
			     strerror(errno));
		goto out;
	}
	sync_stages_drop(s); /* the ones that failed */
	if (!s->on_disk)
		sync_pend_drop(s, 0); /* gone before the new manifest is made */
	/* No second syncfs for the renames: if the host crashes before they
	 * reach the disk, the manifest is ahead of the files, and the next
	 * OPEN's check (inode, size, mtime, ctime) finds and rehashes them. */
	struct digest_job dj = { .m = &s->man };
	if (s->on_disk) {
		if ((rc = write_on_disk(s, dj.digest, err)) < 0)
			goto out;
	} else {
		apply_metas(s);
		merge(s);
		pthread_t dth;
		int threaded = pthread_create(&dth, NULL, digest_main, &dj) == 0;
		rc = sync_write_manifest(s, &s->man, err);
		if (!rc)
			sync_leaves_gc(s->statefd, &s->man);
		if (threaded)
			pthread_join(dth, NULL);
		else
			digest_main(&dj);
		if (rc < 0)
			goto out;
	}
	put_bytes(&pl, dj.digest, SM_HASH_LEN);
	put_u32(&pl, (uint32_t)s->err_paths.n);
	for (size_t i = 0; i < s->err_paths.n; i++) {
		put_str(&pl, s->err_paths.v[i]);
		put_u32(&pl, s->err_kinds[i]);
		put_str(&pl, s->err_msgs.v[i]);
	}
	put_u32(&pl, (uint32_t)s->warnings.n);
	for (size_t i = 0; i < s->warnings.n; i++)
		put_str(&pl, s->warnings.v[i]);
	sync_send_long(a, s->id, GR_MSG_OK, GR_F_END, &pl);
	sync_manifest_keep(s, dj.digest);
out:
	sb_release(&pl);
	return rc;
}
