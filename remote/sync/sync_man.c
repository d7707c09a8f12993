/* A manifest that stays in its file (a walked session, on_disk): read as
 * a stream with what the session changed applied on the way, written as a
 * stream, encoded for STATE as a stream. No list of the whole tree is
 * made (sync_agent.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "sync_agent.h"
#include "sync_apply.h"

struct each_ctx {
	struct sync_session *s;
	const struct man_overlay *ov;
	size_t pi, di, mi; /* the next put, del and meta */
	struct strbuf path; /* the entry emit_put makes */
	void (*each)(void *arg, const struct sm_entry *e);
	void *arg;
};

/* The path of the overlay's next own entry (put's or pend's), or NULL. */
static const char *next_put(struct each_ctx *c)
{
	const struct man_overlay *ov = c->ov;
	const char *a = c->pi < ov->put.n ? ov->put.e[c->pi].path : NULL;
	const struct sync_pending *p = sync_pend_peek(ov->pend);
	const char *b = p ? p->path : NULL;

	return !a ? b : !b ? a : strcmp(a, b) <= 0 ? a : b;
}

/* The entry of a file put in place: its description, and what the
 * host's file is now. */
static void pend_entry(struct sync_session *s, const struct sync_pending *p, struct sm_entry *e)
{
	const char *base;
	struct stat st;

	memset(e, 0, sizeof(*e));
	e->path = p->path;
	e->type = SM_FILE;
	e->size = p->size;
	e->mtime_ns = p->mtime_ns;
	memcpy(e->hash, p->hash, SM_HASH_LEN);
	e->mode = p->mode;
	int dfd = sfs_parent(&s->dir, p->path, &base);
	if (dfd >= 0 && fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0)
		sync_host_fields(e, &st);
}

/* Emit the overlay's next own entry (at): a file put in place wins over
 * put's entry of its path, the last of a path over the others. */
static void emit_put(struct each_ctx *c, const char *at)
{
	const struct man_overlay *ov = c->ov;
	const struct sync_pending *p;
	struct sync_pending last;
	int have = 0;

	sb_reset(&c->path); /* (at may be a record's, which the pop moves on) */
	sb_adds(&c->path, at);
	while ((p = sync_pend_peek(ov->pend)) && !strcmp(p->path, c->path.buf)) {
		last = *p;
		have = 1;
		sync_pend_pop(ov->pend);
	}
	int in_put = c->pi < ov->put.n && !strcmp(ov->put.e[c->pi].path, c->path.buf);
	if (have) {
		struct sm_entry e;
		last.path = c->path.buf; /* (its temp name is not needed) */
		pend_entry(c->s, &last, &e);
		c->each(c->arg, &e);
		c->pi += in_put;
	} else {
		c->each(c->arg, &ov->put.e[c->pi++]);
	}
}

/* The overlay's own entries that sort before path (NULL: all that are left). */
static void puts_before(struct each_ctx *c, const char *path)
{
	const char *p;

	while ((p = next_put(c)) && (!path || strcmp(p, path) < 0))
		emit_put(c, p);
}

/* The metas that sort before path (NULL: all left) name no old entry. */
static void metas_before(struct each_ctx *c, const char *path)
{
	const struct man_overlay *ov = c->ov;

	while (c->mi < ov->nmetas && (!path || strcmp(ov->metas[c->mi]->path, path) < 0))
		ov->meta(c->s, ov->metas[c->mi++], NULL);
}

static void old_entry(void *arg, const struct sm_entry *e)
{
	struct each_ctx *c = arg;
	const struct man_overlay *ov = c->ov;
	struct sm_entry x = *e; /* what a meta changes: scalars only */

	if (!ov) {
		c->each(c->arg, e);
		return;
	}
	puts_before(c, e->path);
	metas_before(c, e->path);
	while (c->mi < ov->nmetas && !strcmp(ov->metas[c->mi]->path, e->path))
		ov->meta(c->s, ov->metas[c->mi++], &x);
	const char *p = next_put(c);
	if (p && !strcmp(p, e->path)) {
		emit_put(c, p); /* replaced */
		return;
	}
	while (c->di < ov->del.n && strcmp(ov->del.v[c->di], e->path) < 0)
		c->di++;
	if (c->di < ov->del.n && !strcmp(ov->del.v[c->di], e->path))
		return;
	c->each(c->arg, &x);
}

int sync_man_each(struct sync_session *s, const struct man_overlay *ov,
		  void (*each)(void *arg, const struct sm_entry *e), void *arg,
		  struct gr_err *err)
{
	struct each_ctx c = { .s = s, .ov = ov, .each = each, .arg = arg, .path = STRBUF_INIT };
	int rc = 0;

	if (s->manfd >= 0) {
		if (lseek(s->manfd, 0, SEEK_SET) < 0)
			return gr_errf(err, GR_EIO, "cannot read '%s/%s': %s", s->root,
				       SYNC_MANIFEST_FILE, strerror(errno));
		rc = sm_decode_fd_each(s->manfd, 1, old_entry, &c, err);
	}
	if (!rc && ov) {
		puts_before(&c, NULL);
		metas_before(&c, NULL);
	}
	if (!rc && ov && ov->pend && sync_pend_merge_failed(ov->pend))
		rc = gr_errf(err, GR_EIO, "cannot read back the list of files received: %s",
			     strerror(errno));
	sb_release(&c.path);
	return rc;
}

struct write_ctx {
	struct sm_writer w;
	struct sm_digest d;
	struct strvec *leaves;
};

static void write_entry(void *arg, const struct sm_entry *e)
{
	struct write_ctx *wc = arg;

	sm_writer_add(&wc->w, e);
	sm_digest_add(&wc->d, e);
	if (wc->leaves && e->type == SM_FILE && e->size >= SYNC_LEAVES_MIN) {
		char hex[2 * SM_HASH_LEN + 1];
		sm_hex(e->hash, hex);
		sv_push(wc->leaves, hex);
	}
}

int sync_man_write(struct sync_session *s, const struct man_overlay *ov,
		   uint8_t digest[SM_HASH_LEN], struct strvec *leaves, struct gr_err *err)
{
	struct write_ctx wc = { .leaves = leaves };
	char tmp[64];
	int fd = sync_man_tmp(s, tmp, err), rc;

	if (fd < 0)
		return fd;
	sm_writer_init(&wc.w, fd, 1);
	sm_digest_init(&wc.d);
	rc = sync_man_each(s, ov, write_entry, &wc, err);
	int wrc = sm_writer_finish(&wc.w);
	sm_digest_final(&wc.d, digest);
	if (rc < 0) { /* (the damage is reported) */
		sync_man_place(s, fd, tmp, 0, NULL);
		close(fd);
		return rc;
	}
	if ((rc = sync_man_place(s, fd, tmp, wrc >= 0, err)) < 0) {
		close(fd);
		return rc;
	}
	if (s->manfd >= 0)
		close(s->manfd);
	s->manfd = fd; /* read from here on (opened for reading and writing) */
	return 0;
}

struct z_ctx {
	ZSTD_CStream *z;
	struct strbuf raw, *out;
	uint32_t n;
	int bad;
	int fd;          /* out goes here in pieces (-1: kept in out) */
	uint64_t wrote;
};

static void count_entry(void *arg, const struct sm_entry *e)
{
	(void)e;
	((struct z_ctx *)arg)->n++;
}

/* raw through the compressor into out; end: the frame's end. */
static void z_push(struct z_ctx *c, int end)
{
	ZSTD_inBuffer in = { c->raw.buf, c->raw.len, 0 };
	size_t r;

	do {
		sb_grow(c->out, ZSTD_CStreamOutSize());
		ZSTD_outBuffer o = { c->out->buf + c->out->len, c->out->alloc - c->out->len - 1, 0 };
		r = ZSTD_compressStream2(c->z, &o, &in, end ? ZSTD_e_end : ZSTD_e_continue);
		c->out->len += o.pos;
		if (ZSTD_isError(r)) {
			c->bad = 1;
			break;
		}
		if (c->fd >= 0 && c->out->len >= (256u << 10)) {
			c->bad |= write_full(c->fd, c->out->buf, c->out->len) < 0;
			c->wrote += c->out->len;
			sb_reset(c->out);
		}
	} while (end ? r != 0 : in.pos < in.size);
	sb_reset(&c->raw);
}

static void z_entry(void *arg, const struct sm_entry *e)
{
	struct z_ctx *c = arg;

	sm_put_entry(&c->raw, e, 0);
	if (c->raw.len >= (256u << 10))
		z_push(c, 0);
}

int sync_man_encode_z(struct sync_session *s, const struct man_overlay *ov, int fd,
		      struct strbuf *out, uint64_t *len, struct gr_err *err)
{
	struct z_ctx c = { .raw = STRBUF_INIT, .out = out, .fd = fd };
	size_t start = out->len;
	int rc;

	/* The header counts the entries: one pass to count them (only a
	 * client that does not know the host's state asks for the list). */
	if ((rc = sync_man_each(s, ov, count_entry, &c, err)) < 0)
		return rc;
	c.z = ZSTD_createCStream();
	/* (a window of 512 KiB: what the client holds to read it; the
	 * entries' neighbours share their paths' beginnings) */
	if (!c.z || ZSTD_isError(ZSTD_CCtx_setParameter(c.z, ZSTD_c_compressionLevel, 3)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c.z, ZSTD_c_windowLog, SM_Z_WINDOW_LOG))) {
		ZSTD_freeCStream(c.z);
		return gr_errf(err, GR_EIO, "cannot start zstd");
	}
	sm_encode_head(&c.raw, 0, c.n);
	c.n = 0;
	rc = sync_man_each(s, ov, z_entry, &c, err);
	if (!rc)
		z_push(&c, 1);
	if (!rc && !c.bad && fd >= 0 && out->len) {
		c.bad = write_full(fd, out->buf, out->len) < 0;
		c.wrote += out->len;
		sb_reset(out);
	}
	if (!rc && c.bad)
		rc = gr_errf(err, GR_EIO, "cannot compress the sync manifest: %s",
			     errno ? strerror(errno) : "zstd failed");
	if (rc < 0)
		out->len = start;
	*len = fd >= 0 ? c.wrote : out->len - start;
	ZSTD_freeCStream(c.z);
	sb_release(&c.raw);
	return rc;
}

void sync_overlay_clear(struct man_overlay *ov)
{
	sm_list_free(&ov->put);
	sv_clear(&ov->del);
	free(ov->metas);
	ov->metas = NULL;
	ov->nmetas = 0;
}

const struct sm_entry *sync_man_base(const struct sync_session *s, const char *path)
{
	return sm_find(s->on_disk ? &s->bases : &s->man, path);
}
