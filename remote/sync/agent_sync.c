/* Sync requests (0x20-0x3f, common/proto/sync_proto.h): OPEN answers the state of
 * the remote project folder in one round trip (manifest digest, files
 * changed behind our back) and keeps a session open; OPS, TAR, FILE and
 * SIG stream changes into temp files; COMMIT renames them into place and
 * writes the manifest last. Spec: PROTOCOL.md, section "Sync". */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safe_dir.h"
#include "sync_agent.h"
#include "sync_apply.h"
#include "sync_proto.h"

static struct sync_session *current;

struct sync_session *sync_session_get(uint32_t id)
{
	return current && current->id == id ? current : NULL;
}

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

void sync_add_pending(struct sync_session *s, const char *relpath, const char *tmp,
		      const struct sm_entry *desc)
{
	pthread_mutex_lock(&s->mu);
	if (s->npend == s->apend) {
		s->apend = s->apend ? 2 * s->apend : 64;
		s->pend = xrealloc(s->pend, s->apend * sizeof(*s->pend));
	}
	struct sync_pending *p = &s->pend[s->npend++];
	size_t a = strlen(relpath) + 1, b = strlen(tmp) + 1;
	p->path = xmalloc(a + b);
	memcpy(p->path, relpath, a);
	memcpy(p->path + a, tmp, b);
	p->size = desc->size;
	p->mtime_ns = desc->mtime_ns;
	memcpy(p->hash, desc->hash, SM_HASH_LEN);
	p->mode = desc->mode;
	sync_wb_kick(s);
	pthread_mutex_unlock(&s->mu);
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

static int sess_frame(struct agent *a, uint32_t id, void *st, const struct gr_frame *f,
		      struct gr_err *err)
{
	struct sync_session *s = st;
	struct gr_rd rd;

	rd_init(&rd, f->payload, f->len);
	if (f->type == SYNC_MSG_OPS)
		return sync_apply_ops(s, &rd, err);
	if (f->type == SYNC_MSG_COMMIT) {
		int rc = sync_commit(a, s, &rd, err);
		if (rc == 0)
			agent_stream_close(a, id);
		return rc;
	}
	return gr_errf(err, GR_EPROTO, "unexpected %s frame in a sync session",
		       proto_msg_name(f->type));
}

static void sess_close(struct agent *a, uint32_t id, void *st)
{
	(void)a;
	(void)id;
	if (current == st)
		current = NULL;
	sync_session_free(st);
}

static const struct agent_stream_ops session_ops = {
	.on_frame = sess_frame,
	.on_close = sess_close,
};

static int h_open(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	sync_apply_busy = agent_keepalive;
	char *path = get_str(rd);
	uint32_t flags = get_u32(rd);
	size_t elen = 0, llen = 0;
	const uint8_t *expect = get_bytes(rd, &elen);
	const uint8_t *local = get_bytes(rd, &llen);
	struct sync_session *s = NULL;
	int rc;

	if ((rc = rd_done(rd, err, "SYNC_OPEN")) < 0)
		goto out;
	if ((elen && elen != SYNC_DIGEST_LEN) || llen != SYNC_DIGEST_LEN) {
		rc = gr_errf(err, GR_EPROTO, "protocol error: malformed SYNC_OPEN");
		goto out;
	}
	if (current) {
		rc = gr_errf(err, GR_EPROTO, "a sync session is already open on this connection");
		goto out;
	}
	safe_perms_preserve(flags & SYNC_OPEN_PRESERVE_PERMS);
	rc = sync_session_open(a, id, path, flags, elen ? expect : NULL, local, &s, err);
	if (rc < 0 || !s)
		goto out;
	current = s;
	agent_stream_open(a, id, &session_ops, s);
out:
	free(path);
	return rc;
}

static int tar_data(struct agent *a, uint32_t id, void *st, const uint8_t *p, size_t n,
		    int end, struct gr_err *err)
{
	struct sync_session *s = st;
	struct strbuf pl = STRBUF_INIT;
	uint32_t files = 0;
	int rc;

	if (s != current || !s->tar)
		return gr_errf(err, GR_EPROTO, "the sync session is gone");
	untar_feed(s->tar, p, n, end);
	/* A worker that stopped early (the disk is full): say so now, so
	 * the client stops sending the rest. */
	if (!end && !untar_stopped(s->tar))
		return 0;
	int kind = SYNC_ERR_OTHER;
	rc = untar_finish(s->tar, &files, &kind, err);
	untar_free(s->tar);
	s->tar = NULL;
	if (rc < 0) {
		sync_fail(a, id, rc, kind, err->msg);
		agent_stream_close(a, id);
		return 0;
	}
	put_u32(&pl, files);
	agent_ok(a, id, pl.buf, pl.len);
	sb_release(&pl);
	agent_stream_close(a, id);
	return 0;
}

static void tar_close(struct agent *a, uint32_t id, void *st)
{
	struct sync_session *s = st;

	(void)a;
	(void)id;
	if (s == current && s->tar) {
		untar_free(s->tar);
		s->tar = NULL;
	}
}

static const struct agent_stream_ops tar_ops = {
	.on_data = tar_data,
	.on_close = tar_close,
};

static int h_tar(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	uint32_t sid = get_u32(rd);
	struct sync_session *s = sync_session_get(sid);
	int rc;

	if ((rc = rd_done(rd, err, "SYNC_TAR")) < 0)
		return rc;
	if (!s)
		return gr_errf(err, GR_EPROTO, "no sync session %u", sid);
	if (s->tar)
		return gr_errf(err, GR_EPROTO, "a tar stream is already open");
	sync_stage_freeze(s); /* its worker looks staged folders up */
	s->tar = untar_start(s);
	agent_stream_open(a, id, &tar_ops, s);
	return 0;
}

const struct agent_handler agent_sync_handlers[] = {
	{ SYNC_MSG_OPEN, "sync-open", h_open },
	{ SYNC_MSG_TAR, "sync-tar", h_tar },
	{ SYNC_MSG_FILE, "sync-file", sync_h_file },
	{ SYNC_MSG_SIG, "sync-sig", sync_h_sig },
	{ 0, NULL, NULL },
};
