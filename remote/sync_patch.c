/* Large files on the agent: FILE streams carry a file whole or as a
 * librsync delta against the version the host holds, zstd-compressed
 * either way; the result goes to a temp file, is hashed as it is written
 * and must match the hash the client announced. SIG makes a librsync
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
#include "sync_proto.h"

#define OUTBUF (1u << 18)

struct fstream {
	uint32_t sid, id;
	int dirfd;         /* the folder holding tmp (outlives the session) */
	uint8_t kind;
	char *path;
	char tmp[64];
	int fd, basefd;
	uint8_t hash[SM_HASH_LEN];
	struct sm_entry desc;
	struct thash th;
	ZSTD_DStream *z;
	rs_job_t *job;
	char *zout, *pout;
	size_t zout_len;   /* decompressed bytes waiting for the patch job */
	int zdone;
	int failed;
};

static rs_result copy_cb(void *arg, rs_long_t pos, size_t *len, void **buf)
{
	struct fstream *f = arg;
	ssize_t r;

	if (pos < 0)
		return RS_CORRUPT;
	do
		r = pread(f->basefd, *buf, *len, (off_t)pos);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return RS_IO_ERROR;
	if (r == 0)
		return RS_INPUT_ENDED; /* never RS_BLOCKED with nothing */
	*len = (size_t)r;
	return RS_DONE;
}

static int out_write(struct fstream *f, const void *p, size_t n, struct gr_err *err)
{
	if (f->th.done + n > f->desc.size)
		return gr_errf(err, GR_EREMOTE, "'%s' came out longer than announced", f->path);
	thash_update(&f->th, p, n);
	if (write_full(f->fd, p, n) < 0)
		return gr_errf(err, GR_EIO, "cannot write '%s' on the host: %s", f->path,
			       strerror(errno));
	return 0;
}

/* Run the patch job over what is decompressed so far. */
static int patch_run(struct fstream *f, int eof, struct gr_err *err)
{
	rs_buffers_t b = { f->zout, f->zout_len, eof, f->pout, OUTBUF };
	int rc;

	while (!f->zdone) {
		b.next_out = f->pout;
		b.avail_out = OUTBUF;
		rs_result r = rs_job_iter(f->job, &b);
		size_t produced = OUTBUF - b.avail_out;
		if (produced && (rc = out_write(f, f->pout, produced, err)) < 0)
			return rc;
		if (r == RS_DONE)
			f->zdone = 1;
		else if (r != RS_BLOCKED)
			return gr_errf(err, GR_EREMOTE, "cannot apply the delta to '%s': %s",
				       f->path, rs_strerror(r));
		else if (b.avail_out)
			break; /* it wants more input */
	}
	if (f->zdone) {
		f->zout_len = 0; /* nothing may follow the delta's END */
		return 0;
	}
	memmove(f->zout, b.next_in, b.avail_in);
	f->zout_len = b.avail_in;
	if (f->zout_len == 2 * OUTBUF)
		return gr_errf(err, GR_EPROTO, "the delta for '%s' does not progress", f->path);
	return 0;
}

static int fs_data(struct agent *a, uint32_t id, void *st, const uint8_t *p, size_t n,
		   int end, struct gr_err *err)
{
	struct fstream *f = st;
	ZSTD_inBuffer in = { p, n, 0 };
	int rc;

	while (in.pos < in.size || end) {
		if (f->kind == SYNC_FILE_DELTA && f->zout_len > OUTBUF / 2) {
			if ((rc = patch_run(f, 0, err)) < 0)
				return rc;
		}
		ZSTD_outBuffer out = { f->zout + f->zout_len, 2 * OUTBUF - f->zout_len, 0 };
		size_t r = ZSTD_decompressStream(f->z, &out, &in);
		if (ZSTD_isError(r))
			return gr_errf(err, GR_EPROTO, "corrupt data for '%s': %s", f->path,
				       ZSTD_getErrorName(r));
		if (f->kind == SYNC_FILE_WHOLE) {
			if (out.pos && (rc = out_write(f, f->zout, out.pos, err)) < 0)
				return rc;
		} else {
			f->zout_len += out.pos;
		}
		if (in.pos == in.size && out.pos < out.size) {
			if (!end)
				break;
			if (r != 0)
				return gr_errf(err, GR_EPROTO, "the data for '%s' is truncated", f->path);
			break;
		}
	}
	if (f->kind == SYNC_FILE_DELTA && (rc = patch_run(f, end, err)) < 0)
		return rc;
	if (!end)
		return 0;
	if (f->kind == SYNC_FILE_DELTA && !f->zdone)
		return gr_errf(err, GR_EPROTO, "the delta for '%s' is truncated", f->path);
	thash_final(&f->th, f->desc.hash);
	if (f->th.done != f->desc.size || memcmp(f->desc.hash, f->hash, SM_HASH_LEN))
		return gr_errf(err, GR_EREMOTE,
			       "'%s' did not come out as sent (size or hash differs)", f->path);
	int fd = f->fd;
	f->fd = -1;
	if (sync_tmp_finish(fd, f->desc.mode, f->desc.mtime_ns) < 0)
		return gr_errf(err, GR_EIO, "cannot write '%s' on the host: %s", f->path,
			       strerror(errno));
	struct sync_session *s = sync_session_get(f->sid);
	if (!s)
		return gr_errf(err, GR_EPROTO, "the sync session is gone");
	sync_add_pending(s, f->path, f->tmp, &f->desc);
	f->tmp[0] = '\0';
	agent_ok(a, id, NULL, 0);
	agent_stream_close(a, id);
	return 0;
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
	if (f->basefd >= 0)
		close(f->basefd);
	if (f->job)
		rs_job_free(f->job);
	ZSTD_freeDStream(f->z);
	free(f->zout);
	free(f->pout);
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
	if (!sync_path_ok(path) || (kind != SYNC_FILE_WHOLE && kind != SYNC_FILE_DELTA)) {
		rc = gr_errf(err, GR_EPROTO, "refusing file '%s'", path);
		goto out;
	}
	f = xcalloc(1, sizeof(*f));
	f->sid = sid;
	f->id = id;
	f->dirfd = -1;
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
	f->z = ZSTD_createDStream();
	f->zout = xmalloc(2 * OUTBUF);
	if (kind == SYNC_FILE_DELTA) {
		/* The delta is only good against the version it was made for. */
		struct sm_entry *cur = sm_find(&s->man, f->path);
		const char *bn;
		if (!cur || cur->type != SM_FILE || memcmp(cur->hash, base, SM_HASH_LEN)) {
			rc = gr_errf(err, GR_ECONFLICT,
				     "'%s' on the host is not the version the delta was made for",
				     f->path);
			goto out;
		}
		int dfd = sfs_parent(&s->dir, f->path, &bn);
		f->basefd = dfd < 0 ? -1 : openat(dfd, bn, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (f->basefd < 0) {
			rc = gr_errf(err, GR_EIO, "cannot open '%s' on the host: %s", f->path,
				     strerror(errno));
			goto out;
		}
		f->pout = xmalloc(OUTBUF);
		f->job = rs_patch_begin(copy_cb, f);
	}
	f->fd = sync_tmp_create(s, &s->dir, f->path, f->tmp);
	if (f->fd >= 0) {
		const char *bn;
		f->dirfd = fcntl(sfs_parent(&s->dir, f->path, &bn), F_DUPFD_CLOEXEC, 0);
	}
	if (f->fd < 0 || f->dirfd < 0) {
		f->tmp[0] = '\0';
		rc = gr_errf(err, GR_EIO, "cannot create a file beside '%s' on the host: %s",
			     f->path, strerror(errno));
		goto out;
	}
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
