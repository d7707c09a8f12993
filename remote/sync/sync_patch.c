/* Large files on the agent: FILE streams carry a file whole or as a
 * librsync delta against the version the host holds, zstd-compressed
 * either way (the delta is applied by sync_apply.c); the result goes to a
 * temp file, is hashed and must match the hash the client announced. SIG makes a librsync
 * signature of a host file (minimal strong sums, rs_sig_args) when the
 * client has none cached for the version there. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <librsync.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "sync_agent.h"
#include "sync_apply.h"

#include "sync_proto.h"

#define OUTBUF (1u << 18)
#define WRITEBACK_STEP (8u << 20)

struct fstream {
	uint32_t sid, id;
	int dirfd;         /* the folder holding tmp (outlives the session) */
	int statefd;       /* .gpurun, for the block hashes (dup, may be -1) */
	uint8_t kind;
	char *path;
	char tmp[SYNC_TMP_MAX];
	int fd, basefd;
	uint8_t hash[SM_HASH_LEN], base[SM_HASH_LEN];
	uint64_t base_size;
	struct sm_entry desc;
	struct thash th;   /* WHOLE: hashed as written */
	uint64_t wb_done;  /* WHOLE: writeback started up to here */
	struct strbuf leaves;
	struct dapply dp;  /* DELTA */
	ZSTD_DStream *z;
	char *zout;
	int zend;          /* the zstd input so far ends a frame */
	int errnum;        /* the errno of a failed write (says its SYNC_ERR_ kind) */
};

static void keep_leaf(void *arg, uint64_t index, const uint8_t h[SM_HASH_LEN])
{
	(void)index;
	sb_add(arg, h, SM_HASH_LEN);
}

static int out_write(struct fstream *f, const void *p, size_t n, struct gr_err *err)
{
	if (f->th.done + n > f->desc.size)
		return gr_errf(err, GR_EREMOTE, "'%s' came out longer than announced", f->path);
	thash_update(&f->th, p, n);
	if (write_full(f->fd, p, n) < 0) {
		f->errnum = errno;
		return gr_errf(err, GR_EIO, "cannot write on the host: %s",
			       strerror(errno));
	}
	/* Writeback as it comes, not only at close: COMMIT's syncfs then
	 * finds little of a large file left to write (it waited 0.8 s for a
	 * 512 MiB one). */
	if (f->th.done - f->wb_done >= WRITEBACK_STEP) {
		(void)sync_file_range(f->fd, (off_t)f->wb_done, (off_t)(f->th.done - f->wb_done),
				      SYNC_FILE_RANGE_WRITE);
		f->wb_done = f->th.done;
	}
	return 0;
}

/* The delta is applied: hash the result, reusing the old version's block
 * hashes for blocks copied in place. */
static int delta_leaves(struct fstream *f, struct gr_err *err)
{
	uint64_t size = f->dp.out;
	uint32_t b = sm_block_len(size);
	uint64_t n = (size + b - 1) / b;
	uint8_t *known = sync_leaves_load(f->statefd, f->base, f->base_size);
	uint8_t *reuse = xcalloc(n ? n : 1, 1);
	int rc = 0;

	if (known)
		dapply_reusable(&f->dp, size, reuse);
	sb_grow(&f->leaves, n * SM_HASH_LEN);
	if (sync_hash_blocks(f->fd, size, known, known ? reuse : NULL,
			     (uint8_t *)f->leaves.buf) < 0)
		rc = gr_errf(err, GR_EIO, "cannot read back '%s' on the host: %s", f->path,
			     strerror(errno));
	f->leaves.len = n * SM_HASH_LEN;
	thash_from_leaves((uint8_t *)f->leaves.buf, n, size, f->desc.hash);
	free(known);
	free(reuse);
	return rc;
}

static int fs_data_do(struct agent *a, uint32_t id, struct fstream *f, const uint8_t *p,
		      size_t n, int end, struct gr_err *err)
{
	ZSTD_inBuffer in = { p, n, 0 };
	uint64_t size;
	int rc;

	if (f->kind == SYNC_FILE_RAW) {
		if (n && (rc = out_write(f, p, n, err)) < 0)
			return rc;
	} else for (;;) {
		ZSTD_outBuffer out = { f->zout, OUTBUF, 0 };
		size_t before = in.pos;
		size_t r = ZSTD_decompressStream(f->z, &out, &in);
		if (ZSTD_isError(r))
			return gr_errf(err, GR_EPROTO, "corrupt data for '%s': %s", f->path,
				       ZSTD_getErrorName(r));
		/* 0: a frame is decoded and flushed. A call that neither took
		 * nor gave a byte (an empty last DATA frame, or the output
		 * filled exactly by the frame's end) returns the size of the
		 * next frame's header instead: it says nothing new. */
		if (r == 0 || in.pos > before || out.pos)
			f->zend = r == 0;
		if (out.pos) {
			if (f->kind != SYNC_FILE_DELTA)
				rc = out_write(f, f->zout, out.pos, err);
			else if ((rc = dapply_feed(&f->dp, (uint8_t *)f->zout, out.pos)) < 0) {
				f->errnum = f->dp.errnum;
				rc = gr_errf(err, GR_EREMOTE, "cannot apply the delta to '%s': %s",
					     f->path, f->dp.err);
			}
			if (rc < 0)
				return rc;
		}
		if (in.pos == in.size && out.pos < out.size)
			break;
	}
	if (!end)
		return 0;
	if (f->kind != SYNC_FILE_RAW && !f->zend)
		return gr_errf(err, GR_EPROTO, "the data for '%s' is truncated", f->path);
	if (f->kind == SYNC_FILE_DELTA) {
		if (!f->dp.done)
			return gr_errf(err, GR_EPROTO, "the delta for '%s' is truncated", f->path);
		if ((rc = delta_leaves(f, err)) < 0)
			return rc;
		size = f->dp.out;
	} else {
		thash_final(&f->th, f->desc.hash);
		size = f->th.done;
	}
	if (size != f->desc.size || memcmp(f->desc.hash, f->hash, SM_HASH_LEN))
		return gr_errf(err, GR_EREMOTE,
			       "'%s' did not come out as sent (size or hash differs)", f->path);
	int fd = f->fd;
	f->fd = -1;
	if (sync_tmp_finish(fd, f->desc.mode, f->desc.mtime_ns, size) < 0) {
		f->errnum = errno;
		return gr_errf(err, GR_EIO, "cannot write on the host: %s",
			       strerror(errno));
	}
	struct sync_session *s = sync_session_get(f->sid);
	if (!s)
		return gr_errf(err, GR_EPROTO, "the sync session is gone");
	if (size >= SYNC_LEAVES_MIN)
		sync_leaves_save(f->statefd, f->desc.hash, (uint8_t *)f->leaves.buf,
				 f->leaves.len / SM_HASH_LEN);
	sync_add_pending(s, f->path, f->tmp, &f->desc);
	f->tmp[0] = '\0';
	agent_ok(a, id, NULL, 0);
	agent_stream_close(a, id);
	return 0;
}

static int fs_data(struct agent *a, uint32_t id, void *st, const uint8_t *p, size_t n,
		   int end, struct gr_err *err)
{
	struct fstream *f = st;
	int rc = fs_data_do(a, id, f, p, n, end, err);

	if (rc < 0 && f->errnum) {
		/* The disk said no (full, read-only...): the client hears the
		 * kind at once, stops sending this file, and says why. */
		sync_fail(a, id, rc, sync_err_kind(f->errnum), err->msg);
		agent_stream_close(a, id);
		return 0;
	}
	return rc;
}

static void fs_close(struct agent *a, uint32_t id, void *st)
{
	struct fstream *f = st;

	(void)a;
	(void)id;
	if (f->fd >= 0)
		close(f->fd);
	if (f->tmp[0] && f->dirfd >= 0)
		unlinkat(f->dirfd, f->tmp, 0);
	if (f->dirfd >= 0)
		close(f->dirfd);
	if (f->statefd >= 0)
		close(f->statefd);
	if (f->basefd >= 0)
		close(f->basefd);
	dapply_release(&f->dp);
	sb_release(&f->leaves);
	ZSTD_freeDStream(f->z);
	free(f->zout);
	free(f->path);
	free(f);
}

static const struct agent_stream_ops fstream_ops = {
	.on_data = fs_data,
	.on_close = fs_close,
};

static const uint8_t *get_hash(struct gr_rd *rd)
{
	size_t n = 0;
	const uint8_t *h = get_bytes(rd, &n);

	if (!h || n != SM_HASH_LEN) {
		rd->bad = 1;
		return NULL;
	}
	return h;
}

int sync_h_file(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	uint32_t sid = get_u32(rd);
	uint8_t kind = get_u8(rd);
	char *path = get_str(rd);
	const uint8_t *base = get_hash(rd), *hash = get_hash(rd);
	uint64_t size = get_u64(rd);
	uint32_t mode = get_u32(rd);
	int64_t mtime = (int64_t)get_u64(rd);
	struct sync_session *s = sync_session_get(sid);
	struct fstream *f = NULL;
	int rc;

	if ((rc = rd_done(rd, err, "SYNC_FILE")) < 0)
		goto out;
	if (!s) {
		rc = gr_errf(err, GR_EPROTO, "no sync session %u", sid);
		goto out;
	}
	sync_stage_freeze(s);
	if (!sync_path_ok(path) ||
	    (kind != SYNC_FILE_WHOLE && kind != SYNC_FILE_DELTA && kind != SYNC_FILE_RAW)) {
		rc = gr_errf(err, GR_EPROTO, "refusing file '%s'", path);
		goto out;
	}
	f = xcalloc(1, sizeof(*f));
	f->sid = sid;
	f->id = id;
	f->dirfd = -1;
	f->statefd = s->statefd >= 0 ? fcntl(s->statefd, F_DUPFD_CLOEXEC, 0) : -1;
	f->kind = kind;
	f->path = path;
	path = NULL;
	f->fd = f->basefd = -1;
	memcpy(f->hash, hash, SM_HASH_LEN);
	f->desc.type = SM_FILE;
	f->desc.mode = mode & 0777;
	f->desc.size = size;
	f->desc.mtime_ns = mtime;
	thash_init(&f->th, size);
	if (size >= SYNC_LEAVES_MIN) {
		f->th.on_leaf = keep_leaf;
		f->th.arg = &f->leaves;
	}
	memcpy(f->base, base, SM_HASH_LEN);
	f->z = ZSTD_createDStream();
	f->zout = xmalloc(OUTBUF);
	if (kind == SYNC_FILE_DELTA) {
		/* The delta is only good against the version it was made for. */
		const struct sm_entry *cur = sync_man_base(s, f->path);
		const char *bn;
		if (!cur || cur->type != SM_FILE || memcmp(cur->hash, base, SM_HASH_LEN)) {
			rc = gr_errf(err, GR_ECONFLICT,
				     "'%s' on the host is not the version the delta was made for",
				     f->path);
			goto out;
		}
		int dfd = sfs_parent(&s->dir, f->path, &bn);
		struct stat bst;
		f->basefd = dfd < 0 ? -1 : openat(dfd, bn, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (f->basefd < 0 || fstat(f->basefd, &bst) < 0) {
			rc = gr_errf(err, GR_EIO, "cannot open '%s' on the host: %s", f->path,
				     strerror(errno));
			goto out;
		}
		f->base_size = (uint64_t)bst.st_size;
	}
	f->fd = sync_tmp_create(s, &s->dir, f->path, f->tmp);
	if (f->fd >= 0) {
		const char *bn;
		f->dirfd = fcntl(sfs_parent(&s->dir, f->path, &bn), F_DUPFD_CLOEXEC, 0);
	}
	if (f->fd < 0 || f->dirfd < 0) {
		int e = errno;
		f->tmp[0] = '\0';
		gr_errf(err, GR_EIO, "cannot create a file beside it on the host: %s", strerror(e));
		sync_fail(a, id, GR_EIO, sync_err_kind(e), err->msg);
		rc = 0; /* answered */
		goto out;
	}
	if (kind == SYNC_FILE_DELTA)
		dapply_init(&f->dp, f->basefd, f->base_size, f->fd, size);
	agent_stream_open(a, id, &fstream_ops, f);
	f = NULL;
out:
	if (f)
		fs_close(a, id, f);
	free(path);
	return rc;
}

int sync_h_sig(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	uint32_t sid = get_u32(rd);
	char *path = get_str(rd);
	struct sync_session *s = sync_session_get(sid);
	struct strbuf pl = STRBUF_INIT;
	char *in = NULL, *out = NULL;
	rs_job_t *job = NULL;
	int fd = -1, rc;
	struct stat st;
	struct thash th;
	const char *bn;

	if ((rc = rd_done(rd, err, "SYNC_SIG")) < 0)
		goto out;
	if (!s || !sync_path_ok(path)) {
		rc = gr_errf(err, GR_EPROTO, "refusing signature request for '%s'", path);
		goto out;
	}
	int dfd = sfs_parent(&s->dir, path, &bn);
	fd = dfd < 0 ? -1 : openat(dfd, bn, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = gr_errf(err, GR_ENOTFOUND, "cannot read '%s' on the host: %s", path,
			     fd < 0 ? strerror(errno) : "not a file");
		goto out;
	}
	rs_magic_number magic = RS_RK_BLAKE2_SIG_MAGIC;
	size_t block = sm_block_len((uint64_t)st.st_size), strong = (size_t)-1;
	rs_sig_args(st.st_size, &magic, &block, &strong);
	job = rs_sig_begin(block, strong, magic);
	thash_init(&th, (uint64_t)st.st_size);
	in = xmalloc(OUTBUF);
	out = xmalloc(OUTBUF);
	int eof = 0;
	while (!eof) {
		ssize_t r = read(fd, in, OUTBUF);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = gr_errf(err, GR_EIO, "cannot read '%s' on the host: %s", path,
				     strerror(errno));
			goto out;
		}
		eof = r == 0;
		thash_update(&th, in, (size_t)r);
		agent_keepalive(); /* and out go the DATA frames queued so far */
		rs_buffers_t b = { in, (size_t)r, eof, out, OUTBUF };
		rs_result res;
		for (;;) {
			size_t before = b.avail_in;
			b.next_out = out;
			b.avail_out = OUTBUF;
			res = rs_job_iter(job, &b);
			size_t produced = OUTBUF - b.avail_out;
			if (produced)
				agent_send(a, GR_MSG_DATA, 0, id, out, produced);
			if (res != RS_BLOCKED || (!produced && b.avail_in == before))
				break;
		}
		if ((res != RS_DONE && res != RS_BLOCKED) || (eof && res != RS_DONE)) {
			rc = gr_errf(err, GR_EIO, "cannot make a signature of '%s': %s", path,
				     rs_strerror(res));
			goto out;
		}
	}
	uint8_t h[SM_HASH_LEN];
	thash_final(&th, h);
	put_bytes(&pl, h, SM_HASH_LEN);
	put_u64(&pl, th.done);
	agent_ok(a, id, pl.buf, pl.len);
out:
	if (fd >= 0)
		close(fd);
	if (job)
		rs_job_free(job);
	free(in);
	free(out);
	free(path);
	sb_release(&pl);
	return rc;
}
