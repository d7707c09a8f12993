/* What a sync session holds below its requests: the folders it stages
 * (sync_agent.h says why), the temp files it makes and the pending list
 * that waits for COMMIT, the small files' writeback started as they come,
 * the errors it collects for COMMIT's answer, the paths a client may name,
 * and the manifest written into the state folder. OPEN and COMMIT
 * (sync_session.c, sync_commit.c), the tar worker (sync_untar.c) and FILE
 * (sync_patch.c) all call down into it; it calls none of them, so the
 * folder layers one way: requests, then their work, then this and
 * sync_fs.c. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "sync_agent.h"
#include "sync_proto.h"

int sync_path_ok(const char *path)
{
	const char *base = strrchr(path, '/');
	size_t sl = strlen(SYNC_STATE_DIR);

	if (!sm_path_ok(path))
		return 0;
	if (!strncmp(path, SYNC_STATE_DIR, sl) && (path[sl] == '/' || !path[sl]))
		return 0;
	return !sfs_is_tmp_name(base ? base + 1 : path);
}

static void journal_dir(struct sync_session *s, const char *relpath)
{
	const char *slash = strrchr(relpath, '/');
	size_t n = slash ? (size_t)(slash - relpath) : 0;

	for (size_t i = s->journaled.n; i-- > 0;)
		if (strlen(s->journaled.v[i]) == n && !strncmp(s->journaled.v[i], relpath, n))
			return;
	char *dir = xstrndup(relpath, n);
	sv_push(&s->journaled, dir);
	if (s->journalfd < 0 && s->statefd >= 0)
		s->journalfd = openat(s->statefd, STATE_NAME(SYNC_JOURNAL_FILE),
				      O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (s->journalfd >= 0 && write_full(s->journalfd, dir, n + 1) < 0) {
		/* the journal only helps clean up after a crash */
	}
	free(dir);
}

static int cmp_stage(const void *a, const void *b)
{
	return strcmp(((const struct sync_stage *)a)->path, ((const struct sync_stage *)b)->path);
}

/* Sorted when looked up (the client sends its folders in order, so a
 * sort is rare); never once a file stream began (sync_stage_freeze), as
 * the tar's worker thread looks them up. */
static void stage_sort(struct sync_session *s)
{
	if (!s->stage_sorted && s->nstages > 1)
		qsort(s->stages, s->nstages, sizeof(*s->stages), cmp_stage);
	s->stage_sorted = 1;
}

void sync_stage_freeze(struct sync_session *s)
{
	stage_sort(s);
	s->stage_frozen = 1;
}

/* The main thread sorts before it looks (OPS may stage folders out of
 * order); the tar's worker looks only once they are frozen, sorted. */
static const struct sync_stage *stage_find(struct sync_session *s, const char *path, size_t len)
{
	size_t lo = 0, hi = s->nstages;

	if (!s->stage_frozen)
		stage_sort(s);
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *p = s->stages[mid].path;
		int c = strncmp(p, path, len);
		if (!c && p[len])
			c = 1;
		if (!c)
			return &s->stages[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct sync_stage *sync_stage_above(struct sync_session *s, const char *relpath,
					  size_t len)
{
	if (!s->nstages)
		return NULL;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && relpath[i] != '/')
			continue;
		const struct sync_stage *st = stage_find(s, relpath, i);
		if (st)
			return st;
	}
	return NULL;
}

static const char *stage_name(void *arg, const char *relpath, size_t len)
{
	struct sync_session *s = arg;
	const struct sync_stage *st;

	/* once COMMIT placed it (or failed to), a folder is no longer staged */
	if (!s->nstages || !(st = stage_find(s, relpath, len)) || st->state)
		return NULL;
	return st->tmp;
}

void sync_dir_init(struct sync_session *s, struct sfs_dir *d)
{
	sfs_dir_init(d, s->rootfd);
	d->stage = stage_name;
	d->stage_arg = s;
}

int sync_stage_add(struct sync_session *s, const char *path, const char *tmp)
{
	if (s->stage_frozen)
		return -1;
	pthread_mutex_lock(&s->mu);
	journal_dir(s, path); /* its folder holds a temp name now */
	pthread_mutex_unlock(&s->mu);
	s->stages = xrealloc(s->stages, (s->nstages + 1) * sizeof(*s->stages));
	struct sync_stage *st = &s->stages[s->nstages++];
	st->path = xstrdup(path);
	snprintf(st->tmp, sizeof(st->tmp), "%s", tmp);
	st->state = 0;
	if (s->nstages > 1 && strcmp(s->stages[s->nstages - 2].path, path) > 0)
		s->stage_sorted = 0;
	return 0;
}

int sync_tmp_create(struct sync_session *s, struct sfs_dir *d, const char *relpath,
		    char tmp[SYNC_TMP_MAX])
{
	const char *base;
	int dfd = sfs_parent(d, relpath, &base);

	if (dfd < 0)
		return -1;
	pthread_mutex_lock(&s->mu);
	journal_dir(s, relpath);
	pthread_mutex_unlock(&s->mu);
	const struct sync_stage *sg = sync_stage_above(s, relpath, (size_t)(base - relpath));
	if (sg && !sg->state) {
		/* Below a staged folder: nothing sees it before COMMIT, so the
		 * file is made where it will stay (a name taken already, by a
		 * folder or a symlink OPS made, takes a temp name instead). */
		int fd = openat(dfd, base, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				0600);
		if (fd >= 0 || errno != EEXIST) {
			if (fd >= 0)
				snprintf(tmp, SYNC_TMP_MAX, "%s", base);
			return fd;
		}
	}
	return sfs_tmp_create(dfd, tmp, SYNC_TMP_MAX);
}

int sync_err_kind(int errnum)
{
	switch (errnum) {
	case ENOSPC:
	case EDQUOT:
		return SYNC_ERR_NOSPACE;
	case EACCES:
	case EPERM:
	case EROFS:
		return SYNC_ERR_DENIED;
	case ENOTEMPTY: /* a folder in the way that still holds files */
		return SYNC_ERR_IN_THE_WAY;
	}
	return SYNC_ERR_OTHER;
}

static void add_error(struct sync_session *s, const char *relpath, int kind, const char *fmt,
		      va_list ap)
{
	struct strbuf m = STRBUF_INIT;

	sb_vaddf(&m, fmt, ap);
	pthread_mutex_lock(&s->mu);
	s->err_kinds = xrealloc(s->err_kinds, (s->err_paths.n + 1) * sizeof(*s->err_kinds));
	s->err_kinds[s->err_paths.n] = (uint32_t)kind;
	sv_push(&s->err_paths, relpath);
	sv_push(&s->err_msgs, m.buf);
	pthread_mutex_unlock(&s->mu);
	sb_release(&m);
}

void sync_add_error(struct sync_session *s, const char *relpath, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_error(s, relpath, SYNC_ERR_OTHER, fmt, ap);
	va_end(ap);
}

void sync_add_errno(struct sync_session *s, const char *relpath, int errnum,
		    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	add_error(s, relpath, sync_err_kind(errnum), fmt, ap);
	va_end(ap);
}

void sync_fail(struct agent *a, uint32_t id, int code, int kind, const char *msg)
{
	struct strbuf pl = STRBUF_INIT;

	proto_error_payload(&pl, code, msg);
	put_u32(&pl, (uint32_t)kind);
	agent_send(a, GR_MSG_ERROR, GR_F_END, id, pl.buf, pl.len);
	sb_release(&pl);
}

void sync_send_long(struct agent *a, uint32_t id, uint16_t type, uint16_t flags,
		    const struct strbuf *pl)
{
	size_t off = 0;

	for (; pl->len - off > SYNC_PIECE; off += SYNC_PIECE)
		agent_send(a, GR_MSG_DATA, 0, id, pl->buf + off, SYNC_PIECE);
	agent_send(a, type, flags, id, pl->buf + off, pl->len - off);
}

int sync_send_long_fd(struct agent *a, uint32_t id, uint16_t type, uint16_t flags,
		      const struct strbuf *head, int fd, uint64_t n, const struct strbuf *tail)
{
	for (size_t off = 0; off < head->len; off += SYNC_PIECE)
		agent_send(a, GR_MSG_DATA, 0, id, head->buf + off,
			   head->len - off < SYNC_PIECE ? head->len - off : SYNC_PIECE);
	if (lseek(fd, 0, SEEK_SET) != 0)
		return -1;
	while (n) {
		if (agent_out_drain(a) < 0)
			return -1;
		ssize_t r = agent_send_read(a, GR_MSG_DATA, id, fd, n < SYNC_PIECE ? n : SYNC_PIECE);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		n -= (uint64_t)r;
	}
	agent_send(a, type, flags, id, tail->buf, tail->len);
	return 0;
}

int sync_tmp_finish(int fd, uint32_t mode, int64_t mtime_ns, uint64_t size)
{
	struct timespec ts[2] = {
		{ 0, UTIME_OMIT },
		{ (time_t)(mtime_ns / 1000000000LL), (long)(mtime_ns % 1000000000LL) },
	};
	int rc = 0;

	if (ts[1].tv_nsec < 0) {
		ts[1].tv_sec--;
		ts[1].tv_nsec += 1000000000L;
	}
	/* The file was made 0600, which is what most files get on the host
	 * (safe_file_mode): an fchmod to the mode it has is still a journal
	 * transaction, so it is made only when the mode differs. */
	struct stat st;
	mode_t want = safe_file_mode(mode);
	if ((fstat(fd, &st) < 0 || (st.st_mode & 07777) != want) && fchmod(fd, want) < 0)
		rc = -1;
	if (!rc && futimens(fd, ts) < 0)
		rc = -1;
	/* A large file's writeback starts now; COMMIT waits for it. */
	if (!rc && size >= SYNC_HINT_MIN)
		sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	int e = errno;
	if (close(fd) < 0 && !rc)
		return -1;
	errno = e;
	return rc;
}

/* sync_file_range of one pending temp file: -1 if that failed. One that
 * cannot be opened is skipped: its rename reports it. */
int sync_pending_range(struct sfs_dir *d, const struct sync_pending *p, unsigned flags)
{
	const char *base;
	int dfd = sfs_parent(d, p->path, &base);
	int fd = dfd < 0 ? -1 : openat(dfd, sync_pending_tmp(p), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int rc = 0;

	if (fd < 0)
		return 0;
	if (sync_file_range(fd, 0, 0, flags) < 0)
		rc = -1;
	close(fd);
	return rc;
}

/* Starting a small file's writeback is mostly ext4 allocating its blocks:
 * ~25 us of CPU a file, 85-120 ms for the bench's 3,000 files, which
 * COMMIT spent while the client waited. This thread does it as the files
 * come, beside the stream: the bench's first sync over the WAN profile
 * took 9.03 s instead of 9.16 s (medians of 5), on loopback about the
 * same. (Not the untar worker itself at each close: behind a large
 * file's writeback, the block layer's throttle held it there, and the
 * whole stream waited: 1.10x the time.) It stops past SYNC_OWN_SMALL_MAX
 * small files, where syncfs does it instead. */
#define WB_BATCH 64

static void *wb_main(void *arg)
{
	struct sync_session *s = arg;
	struct sync_pending batch[WB_BATCH];
	struct sfs_dir d;
	size_t small = 0;

	sync_dir_init(s, &d);
	pthread_mutex_lock(&s->mu);
	while (small <= SYNC_OWN_SMALL_MAX) {
		while (!s->wb_stop && s->wb_next == s->npend)
			pthread_cond_wait(&s->wb_cv, &s->mu);
		if (s->wb_stop)
			break;
		/* copies, names and all: pend[] may move as files are added,
		 * and a spill frees the names (sync_pend.c) */
		size_t n = 0, first = s->wb_next;
		for (size_t i = first; i < s->npend && n < WB_BATCH; i++) {
			batch[n] = s->pend[i];
			const char *names = batch[n].path;
			size_t a = strlen(names) + 1, len = a + strlen(names + a) + 1;
			batch[n].path = xmalloc(len);
			memcpy(batch[n].path, names, len);
			n++;
		}
		pthread_mutex_unlock(&s->mu);
		for (size_t i = 0; i < n; i++) {
			if (batch[i].size < SYNC_HINT_MIN && ++small <= SYNC_OWN_SMALL_MAX)
				sync_pending_range(&d, &batch[i], SYNC_FILE_RANGE_WRITE); /* COMMIT's wait checks */
			free(batch[i].path);
		}
		pthread_mutex_lock(&s->mu);
		s->wb_next = first + n;
	}
	pthread_mutex_unlock(&s->mu);
	sfs_dir_release(&d);
	return NULL;
}

void sync_wb_kick(struct sync_session *s)
{
	if (s->wb_stop)
		return;
	if (!s->wb_on) {
		pthread_cond_init(&s->wb_cv, NULL);
		s->wb_on = 1;
		if (pthread_create(&s->wb_thread, NULL, wb_main, s) != 0) {
			s->wb_on = 0;
			s->wb_stop = 1; /* COMMIT starts them all */
			pthread_cond_destroy(&s->wb_cv);
		}
		return;
	}
	pthread_cond_signal(&s->wb_cv);
}

void sync_wb_stop(struct sync_session *s)
{
	pthread_mutex_lock(&s->mu);
	s->wb_stop = 1;
	int on = s->wb_on;
	if (on)
		pthread_cond_signal(&s->wb_cv);
	pthread_mutex_unlock(&s->mu);
	if (on) {
		pthread_join(s->wb_thread, NULL);
		pthread_cond_destroy(&s->wb_cv);
		s->wb_on = 0;
	}
}

static void *flush_main(void *arg)
{
	struct sync_session *s = arg;

	syncfs(s->rootfd);
	__atomic_store_n(&s->flush_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

void sync_small_done(struct sync_session *s)
{
	s->small_files++;
	if (s->small_files <= SYNC_OWN_SMALL_MAX || s->small_files % SYNC_FLUSH_EVERY)
		return;
	if (s->flushing) {
		if (!__atomic_load_n(&s->flush_done, __ATOMIC_ACQUIRE))
			return; /* one at a time */
		sync_flush_join(s);
	}
	s->flush_done = 0;
	s->flushing = pthread_create(&s->flusher, NULL, flush_main, s) == 0;
}

void sync_flush_join(struct sync_session *s)
{
	if (s->flushing)
		pthread_join(s->flusher, NULL);
	s->flushing = 0;
}

/* Remove staged folders that are not in place (never renamed, or failed)
 * with everything in them. */
void sync_stages_drop(struct sync_session *s)
{
	for (size_t i = 0; i < s->nstages; i++) {
		struct sync_stage *st = &s->stages[i];
		const char *base;
		int dfd = st->state == 1 ? -1 : sfs_parent(&s->dir, st->path, &base);
		if (dfd >= 0)
			rm_tree_at(dfd, st->tmp);
		free(st->path);
	}
	free(s->stages);
	s->stages = NULL;
	s->nstages = 0;
}

void sync_host_fields(struct sm_entry *e, const struct stat *st)
{
	e->host.ino = (uint64_t)st->st_ino;
	e->host.mtime_ns = sfs_mtime_ns(st);
	e->host.ctime_ns = sfs_ctime_ns(st);
}

int sync_man_tmp(struct sync_session *s, char tmp[64], struct gr_err *err)
{
	int fd;

	s->man_written = 0;
	if (s->statefd < 0)
		return gr_errf(err, GR_EIO, "cannot open '%s/%s': %s", s->root, SYNC_STATE_DIR,
			       strerror(errno));
	if ((fd = sfs_tmp_create(s->statefd, tmp, 64)) < 0)
		return gr_errf(err, GR_EIO, "cannot write '%s/%s': %s", s->root,
			       SYNC_MANIFEST_FILE, strerror(errno));
	return fd;
}

int sync_man_place(struct sync_session *s, int fd, const char *tmp, int ok, struct gr_err *err)
{
	struct stat st;

	if (!ok || fsync(fd) < 0 ||
	    renameat(s->statefd, tmp, s->statefd, STATE_NAME(SYNC_MANIFEST_FILE)) < 0) {
		int rc = gr_errf(err, GR_EIO, "cannot write '%s/%s': %s", s->root,
				 SYNC_MANIFEST_FILE, strerror(errno));
		unlinkat(s->statefd, tmp, 0);
		return rc;
	}
	fsync(s->statefd);
	/* (After the rename, which may change its ctime; under the lock.) */
	s->man_written = fstat(fd, &st) == 0;
	if (s->man_written)
		sync_man_id_of(&st, &s->man_id);
	return 0;
}

int sync_write_manifest(struct sync_session *s, const struct sm_list *m, struct gr_err *err)
{
	char tmp[64];
	int fd = sync_man_tmp(s, tmp, err), rc;

	if (fd < 0)
		return fd;
	rc = sync_man_place(s, fd, tmp, sm_encode_fd(m, 1, fd) >= 0, err);
	close(fd);
	return rc;
}

void sync_man_id_of(const struct stat *st, struct sync_man_id *id)
{
	memset(id, 0, sizeof(*id));
	id->dev = (uint64_t)st->st_dev;
	id->ino = (uint64_t)st->st_ino;
	id->size = (uint64_t)st->st_size;
	id->mtime_ns = sfs_mtime_ns(st);
	id->ctime_ns = sfs_ctime_ns(st);
}
