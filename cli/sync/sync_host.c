/* The host's manifest into a file as STATE arrives (sync_host.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "sync_host.h"
#include "sync_index.h"
#include "sync_proto.h"

#define TRY_FIRST (64u << 10)  /* the answer's length at which to look for the head */
#define CHUNK (64u << 10)      /* decompressed bytes written at a time */
#define MANIFEST_MAX (512u << 20) /* the largest manifest taken (sm_decode_z's bound) */

void host_file_init(struct host_file *f, int want)
{
	memset(f, 0, sizeof(*f));
	f->want = want;
	f->fd = -1;
	f->try_at = TRY_FIRST;
}

void host_file_close(struct host_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	ZSTD_freeDStream(f->z);
	f->z = NULL;
	sb_release(&f->wb);
}

static int flush(struct host_file *f, struct gr_err *err)
{
	size_t off = 0;

	while (off < f->wb.len) {
		ssize_t w = write(f->fd, f->wb.buf + off, f->wb.len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return gr_errf(err, GR_EIO, "cannot write the host's manifest into .gpurun: %s",
				       w < 0 ? strerror(errno) : "no room");
		off += (size_t)w;
	}
	sb_reset(&f->wb);
	return 0;
}

/* n bytes of the compressed manifest. */
static int inflate(struct host_file *f, const void *p, size_t n, struct gr_err *err)
{
	ZSTD_inBuffer in = { p, n, 0 };
	int rc;

	for (;;) {
		sb_grow(&f->wb, CHUNK);
		ZSTD_outBuffer out = { f->wb.buf + f->wb.len, f->wb.alloc - f->wb.len - 1, 0 };
		size_t r = ZSTD_decompressStream(f->z, &out, &in);
		if (ZSTD_isError(r))
			return gr_errf(err, GR_EPROTO, "cannot decompress the host's manifest: %s",
				       ZSTD_getErrorName(r));
		f->wb.len += out.pos;
		f->out += out.pos;
		f->ended = r == 0;
		if (f->out > MANIFEST_MAX)
			return gr_errf(err, GR_EPROTO, "the host's manifest is too large");
		if (f->wb.len >= CHUNK && (rc = flush(f, err)) < 0)
			return rc;
		if (in.pos == in.size && out.pos < out.size)
			return 0;
	}
}

/* Is what comes before the manifest all here? Then the manifest's bytes
 * go to a file from now on: 1. */
static int find_head(struct host_file *f, const char *root, struct strbuf *body)
{
	struct host_state h = { 0 };
	struct gr_rd rd;

	rd_init(&rd, body->buf, body->len);
	parse_state_head(&rd, &h);
	uint32_t zlen = get_u32(&rd);
	host_state_release(&h);
	if (rd.bad) { /* (not all here yet; or malformed: parse_state says so at the end) */
		f->try_at = body->len * 2;
		return 0;
	}
	if (!(h.flags & SYNC_STATE_HAS_MANIFEST) || (f->fd = sync_state_tmpfile(root)) < 0 ||
	    !(f->z = ZSTD_createDStream())) {
		f->no = 1; /* (in memory, as before) */
		if (f->fd >= 0)
			close(f->fd);
		f->fd = -1;
		return 0;
	}
	ZSTD_initDStream(f->z);
	/* (the agent's window is 2^SM_Z_WINDOW_LOG; an older one's level 3
	 * took at most 2^21: a host cannot make us hold more than 8 MiB) */
	ZSTD_DCtx_setParameter(f->z, ZSTD_d_windowLogMax, 23);
	f->head = (size_t)((const char *)rd.p - body->buf);
	f->zleft = zlen;
	f->streaming = 1;
	return 1;
}

int host_file_take(struct host_file *f, const char *root, struct strbuf *body, const void *p,
		   size_t n, struct gr_err *err)
{
	const char *c = p;
	int rc;

	f->got += n;
	if (f->got > SYNC_ANSWER_MAX)
		return gr_errf(err, GR_EPROTO, "protocol error: the host's state is larger than "
			       "%u MiB", SYNC_ANSWER_MAX >> 20);
	if (f->streaming && f->zleft) {
		size_t k = n < f->zleft ? n : (size_t)f->zleft;
		if ((rc = inflate(f, c, k, err)) < 0)
			return rc;
		f->zleft -= k;
		c += k;
		n -= k;
	}
	sb_add(body, c, n);
	if (!f->want || f->streaming || f->no || body->len < f->try_at ||
	    !find_head(f, root, body))
		return 0;
	/* What came of the manifest so far: to the file; what follows it
	 * stays, and the manifest's length in body says none. */
	size_t avail = body->len - f->head;
	size_t k = avail < f->zleft ? avail : (size_t)f->zleft;
	if ((rc = inflate(f, body->buf + f->head, k, err)) < 0)
		return rc;
	f->zleft -= k;
	/* (a new buffer: the old one took a DATA frame, 1 MiB) */
	struct strbuf rest = STRBUF_INIT;
	sb_add(&rest, body->buf, f->head - 4);
	put_u32(&rest, 0);
	sb_add(&rest, body->buf + f->head + k, avail - k);
	sb_release(body);
	*body = rest;
	return 0;
}

int host_file_end(struct host_file *f, const char *root, struct strbuf *body,
		  struct host_state *h, struct gr_err *err)
{
	int rc;

	if (f->streaming) {
		if (f->zleft || !f->ended)
			return gr_errf(err, GR_EPROTO, "protocol error: the host's manifest is "
				       "truncated");
		if ((rc = flush(f, err)) < 0)
			return rc;
		ZSTD_freeDStream(f->z); /* (its window: gone before the transfer) */
		f->z = NULL;
		sb_release(&f->wb);
		gr_trace("sync: the host's manifest went to a file as it came (%llu bytes)",
			 (unsigned long long)f->out);
		h->manifest_apart = 1;
		return parse_state((const uint8_t *)body->buf, body->len, h, err);
	}
	if ((rc = parse_state((const uint8_t *)body->buf, body->len, h, err)) < 0)
		return rc;
	/* (a short answer: the list is small, and goes the way of a long one;
	 * an empty one stays: the host holds nothing, sync_first.h) */
	if (!f->want || !(h->flags & SYNC_STATE_HAS_MANIFEST) || !h->manifest.n ||
	    (f->fd = sync_state_tmpfile(root)) < 0)
		return 0;
	if (sm_encode_fd(&h->manifest, 0, f->fd) < 0) {
		close(f->fd);
		f->fd = -1;
		return 0;
	}
	sm_list_free(&h->manifest);
	h->manifest_apart = 1;
	return 0;
}
