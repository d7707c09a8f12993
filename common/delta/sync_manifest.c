/* The sync manifest, its digest and the content hash (see sync_manifest.h).
 * One implementation for both sides: common/delta/ is built into the client
 * and the agent alike. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "compat.h"
#include "proto.h"
#include "sync_manifest.h"

#define SM_MAGIC "GRSM"
#define SM_VERSION 1u
#define SM_MAX_DECODED (512u << 20)

struct sm_entry *sm_add_take(struct sm_list *l, char *path, uint8_t type)
{
	if (l->n == l->alloc) {
		l->alloc = l->alloc ? 2 * l->alloc : 64;
		l->e = xrealloc(l->e, l->alloc * sizeof(*l->e));
	}
	struct sm_entry *e = &l->e[l->n++];
	memset(e, 0, sizeof(*e));
	e->path = path;
	e->type = type;
	return e;
}

struct sm_entry *sm_add(struct sm_list *l, const char *path, uint8_t type)
{
	return sm_add_take(l, xstrdup(path), type);
}

struct sm_entry *sm_add_copy(struct sm_list *l, const struct sm_entry *e)
{
	struct sm_entry *c = sm_add(l, e->path, e->type);

	c->link = e->link ? xstrdup(e->link) : NULL;
	c->size = e->size;
	c->mtime_ns = e->mtime_ns;
	memcpy(c->hash, e->hash, SM_HASH_LEN);
	c->mode = e->mode;
	return c;
}

/* A block of the list's path pool. */
struct sm_pool {
	struct sm_pool *next;
	size_t used, cap;
	char b[];
};

#define SM_POOL_BLOCK ((64u << 10) - 64)

struct sm_entry *sm_add_pooled(struct sm_list *l, const char *path, uint8_t type)
{
	size_t n = strlen(path) + 1;
	struct sm_pool *p = l->pool;

	if (!p || p->cap - p->used < n) {
		size_t cap = n > SM_POOL_BLOCK ? n : SM_POOL_BLOCK;
		p = xmalloc(sizeof(*p) + cap);
		p->next = l->pool;
		p->used = 0;
		p->cap = cap;
		l->pool = p;
	}
	char *d = p->b + p->used;
	memcpy(d, path, n);
	p->used += n;
	struct sm_entry *e = sm_add_take(l, d, type);
	e->flags = SM_F_POOLED;
	return e;
}

void sm_pool_move(struct sm_list *to, struct sm_list *from)
{
	struct sm_pool *last = from->pool;

	if (!last)
		return;
	while (last->next)
		last = last->next;
	if (to->pool) { /* (to's first block stays the one it fills) */
		last->next = to->pool->next;
		to->pool->next = from->pool;
	} else {
		to->pool = from->pool;
	}
	from->pool = NULL;
}

void sm_reserve(struct sm_list *l, size_t more)
{
	if (more > SIZE_MAX / sizeof(*l->e) - l->n)
		return; /* sm_add grows it, or fails, as it goes */
	if (l->alloc < l->n + more) {
		l->alloc = l->n + more;
		l->e = xrealloc(l->e, l->alloc * sizeof(*l->e));
	}
}

void sm_shrink(struct sm_list *l)
{
	if (l->n && l->n < l->alloc) {
		l->e = xrealloc(l->e, l->n * sizeof(*l->e));
		l->alloc = l->n;
	}
}

void sm_entry_release(struct sm_entry *e)
{
	if (!(e->flags & SM_F_POOLED))
		free(e->path);
	free(e->link);
	e->path = e->link = NULL;
}

void sm_list_free(struct sm_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		sm_entry_release(&l->e[i]);
	free(l->e);
	l->e = NULL;
	l->n = l->alloc = 0;
	while (l->pool) {
		struct sm_pool *p = l->pool;
		l->pool = p->next;
		free(p);
	}
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct sm_entry *)a)->path, ((const struct sm_entry *)b)->path);
}

static int cmp_index(const void *a, const void *b, void *arg)
{
	const struct sm_entry *e = arg;
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	int c = strcmp(e[i].path, e[j].path);

	return c ? c : i < j ? -1 : i > j;
}

/* The entries' order is sorted as 32-bit indexes, then they move into
 * place along the permutation's cycles: 8 bytes an entry beside the list
 * (the indexes and qsort's merge buffer), where qsort of the entries
 * themselves takes 16 (it sorts pointers to entries this large). */
void sm_sort(struct sm_list *l)
{
	if (l->n < 2)
		return;
	if (l->n > UINT32_MAX) {
		qsort(l->e, l->n, sizeof(*l->e), cmp_entry);
		return;
	}
	uint32_t *to = xmalloc(l->n * sizeof(*to)); /* to[k]: the entry for place k */
	for (size_t k = 0; k < l->n; k++)
		to[k] = (uint32_t)k;
	compat_qsort_r(to, l->n, sizeof(*to), cmp_index, l->e);
	for (size_t k = 0; k < l->n; k++) {
		if (to[k] == k)
			continue;
		struct sm_entry t = l->e[k];
		size_t j = k;
		for (;;) {
			size_t from = to[j];
			to[j] = (uint32_t)j;
			if (from == k) {
				l->e[j] = t;
				break;
			}
			l->e[j] = l->e[from];
			j = from;
		}
	}
	free(to);
}

struct sm_entry *sm_find(const struct sm_list *l, const char *path)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(l->e[mid].path, path);
		if (!c)
			return &l->e[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int sm_same(const struct sm_entry *a, const struct sm_entry *b)
{
	if (a->type != b->type || strcmp(a->path, b->path))
		return 0;
	switch (a->type) {
	case SM_FILE:
		return a->mode == b->mode && a->size == b->size &&
		       a->mtime_ns == b->mtime_ns &&
		       !memcmp(a->hash, b->hash, SM_HASH_LEN);
	case SM_LINK:
		return a->link && b->link && !strcmp(a->link, b->link);
	default:
		return 1;
	}
}

static inline uint8_t *w32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
	return p + 4;
}

static inline uint8_t *w64(uint8_t *p, uint64_t v)
{
	return w32(w32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

/* As put_str, put_u8, put_u32, put_u64 and put_bytes would write it, with
 * one sb_grow for the entry: a manifest's encoding and digest each write
 * every entry, ten to eighteen fields a file (the calls were a third of
 * a 300k-entry digest). */
void sm_put_entry(struct strbuf *b, const struct sm_entry *e, int with_host)
{
	size_t plen = strlen(e->path);
	const char *link = e->type == SM_LINK ? (e->link ? e->link : "") : NULL;
	size_t llen = link ? strlen(link) : 0;
	size_t n = 4 + plen + 1 + (e->type == SM_FILE ? 4 + 8 + 8 + 4 + SM_HASH_LEN : 0) +
		   (link ? 4 + llen : 0) + (with_host ? 4 * 8 : 0);

	sb_grow(b, n);
	uint8_t *p = (uint8_t *)b->buf + b->len;
	p = w32(p, (uint32_t)plen);
	memcpy(p, e->path, plen);
	p += plen;
	*p++ = e->type;
	if (e->type == SM_FILE) {
		p = w32(p, e->mode);
		p = w64(p, e->size);
		p = w64(p, (uint64_t)e->mtime_ns);
		p = w32(p, SM_HASH_LEN);
		memcpy(p, e->hash, SM_HASH_LEN);
		p += SM_HASH_LEN;
	} else if (link) {
		p = w32(p, (uint32_t)llen);
		memcpy(p, link, llen);
		p += llen;
	}
	if (with_host) {
		p = w64(p, e->host.ino);
		p = w64(p, sm_host_size(e)); /* (a field of its own before) */
		p = w64(p, (uint64_t)e->host.mtime_ns);
		p = w64(p, (uint64_t)e->host.ctime_ns);
	}
	b->len += n;
	b->buf[b->len] = '\0';
}

void sm_digest_init(struct sm_digest *d)
{
	blake2b_init(&d->s, SM_HASH_LEN);
	blake2b_update(&d->s, (const uint8_t *)SM_MAGIC, 4);
	d->b = (struct strbuf)STRBUF_INIT;
}

void sm_digest_add(struct sm_digest *d, const struct sm_entry *e)
{
	sb_reset(&d->b);
	sm_put_entry(&d->b, e, 0);
	blake2b_update(&d->s, (const uint8_t *)d->b.buf, d->b.len);
}

void sm_digest_final(struct sm_digest *d, uint8_t out[SM_HASH_LEN])
{
	blake2b_final(&d->s, out, SM_HASH_LEN);
	sb_release(&d->b);
}

void sm_digest(const struct sm_list *l, uint8_t out[SM_HASH_LEN])
{
	struct sm_digest d;

	sm_digest_init(&d);
	for (size_t i = 0; i < l->n; i++)
		sm_digest_add(&d, &l->e[i]);
	sm_digest_final(&d, out);
}

void sm_encode_head(struct strbuf *out, int with_host, uint32_t count)
{
	sb_add(out, SM_MAGIC, 4);
	put_u32(out, SM_VERSION);
	put_u8(out, (uint8_t)!!with_host);
	put_u32(out, count);
}

void sm_encode(const struct sm_list *l, int with_host, struct strbuf *out)
{
	sm_encode_head(out, with_host, (uint32_t)l->n);
	for (size_t i = 0; i < l->n; i++)
		sm_put_entry(out, &l->e[i], with_host);
}

void sm_writer_init(struct sm_writer *w, int fd, int with_host)
{
	memset(w, 0, sizeof(*w));
	w->fd = fd;
	w->with_host = !!with_host;
	sm_encode_head(&w->b, with_host, 0); /* the count: sm_writer_finish */
}

void sm_writer_add(struct sm_writer *w, const struct sm_entry *e)
{
	if (w->failed)
		return;
	if (w->n == UINT32_MAX) {
		w->failed = EFBIG;
		return;
	}
	sm_put_entry(&w->b, e, w->with_host);
	w->n++;
	if (w->b.len >= (256u << 10)) {
		if (write_full(w->fd, w->b.buf, w->b.len) < 0)
			w->failed = errno ? errno : EIO;
		sb_reset(&w->b);
	}
}

int sm_writer_finish(struct sm_writer *w)
{
	struct strbuf c = STRBUF_INIT;
	int rc = w->failed;

	if (!rc && w->b.len && write_full(w->fd, w->b.buf, w->b.len) < 0)
		rc = errno ? errno : EIO;
	put_u32(&c, w->n);
	if (!rc && pwrite(w->fd, c.buf, 4, 9) != 4)
		rc = errno ? errno : EIO;
	sb_release(&c);
	sb_release(&w->b);
	if (rc)
		errno = rc;
	return rc ? -1 : 0;
}

int sm_list_each(void *src, void (*fn)(void *arg, const struct sm_entry *e), void *arg)
{
	const struct sm_list *l = src;

	for (size_t i = 0; i < l->n; i++)
		fn(arg, &l->e[i]);
	return 0;
}

int sm_encode_fd(const struct sm_list *l, int with_host, int fd)
{
	struct sm_writer w;

	sm_writer_init(&w, fd, with_host);
	for (size_t i = 0; i < l->n; i++)
		sm_writer_add(&w, &l->e[i]);
	return sm_writer_finish(&w);
}

struct sm_entry *sm_get_entry(struct gr_rd *rd, struct sm_list *l, int with_host)
{
	char *path = get_str(rd);
	uint8_t type = get_u8(rd);

	if (!path || rd->bad || !sm_path_ok(path) || type < SM_FILE || type > SM_LINK) {
		free(path);
		rd->bad = 1;
		return NULL;
	}
	struct sm_entry *e = sm_add_take(l, path, type);
	if (type == SM_FILE) {
		size_t hl = 0;
		e->mode = get_u32(rd) & 07777;
		e->size = get_u64(rd);
		e->mtime_ns = (int64_t)get_u64(rd);
		const uint8_t *h = get_bytes(rd, &hl);
		if (h && hl == SM_HASH_LEN)
			memcpy(e->hash, h, SM_HASH_LEN);
		else
			rd->bad = 1;
	} else if (type == SM_LINK) {
		e->link = get_str(rd);
		if (!e->link || !*e->link)
			rd->bad = 1;
	}
	if (with_host) {
		e->host.ino = get_u64(rd);
		get_u64(rd); /* the size, which is the entry's (sm_host_size) */
		e->host.mtime_ns = (int64_t)get_u64(rd);
		e->host.ctime_ns = (int64_t)get_u64(rd);
	}
	return e;
}

int sm_decode(const void *p, size_t n, int with_host, struct sm_list *l,
	      struct gr_err *err)
{
	struct gr_rd rd;
	const char *prev = NULL;
	size_t first = l->n;

	if (n < 4 || memcmp(p, SM_MAGIC, 4))
		return gr_errf(err, GR_EPROTO, "not a sync manifest");
	rd_init(&rd, (const uint8_t *)p + 4, n - 4);
	uint32_t version = get_u32(&rd);
	uint8_t host = get_u8(&rd);
	uint32_t count = get_u32(&rd);
	if (rd.bad || version != SM_VERSION || host != !!with_host)
		return gr_errf(err, GR_EPROTO, "sync manifest of an unknown version");
	/* Room for all at once, not by doubling (a third of it slack at
	 * 100k entries). The count comes from the other side: an entry
	 * takes at least 6 bytes, so it reserves no more than the bytes
	 * could hold, and no more than 1M entries (past that sm_add grows
	 * the list as entries really arrive). */
	size_t room = count < rd.n / 6 ? count : rd.n / 6;
	sm_reserve(l, room < (1u << 20) ? room : (1u << 20));
	for (uint32_t i = 0; i < count && !rd.bad; i++) {
		struct sm_entry *e = sm_get_entry(&rd, l, with_host);
		if (!e)
			break;
		if (prev && strcmp(prev, e->path) >= 0)
			rd.bad = 1;
		prev = e->path;
	}
	if (rd.bad || rd.n) {
		while (l->n > first)
			sm_entry_release(&l->e[--l->n]);
		return gr_errf(err, GR_EPROTO, "malformed sync manifest");
	}
	return 0;
}

#define SM_ENTRY_PEEK (16u << 10) /* read ahead per entry (a path is at most 4 KiB) */

static const struct sm_entry *reader_fail(struct sm_reader *r, int rc)
{
	if (rc == GR_EIO)
		r->rc = gr_errf(r->err, GR_EIO, "cannot read the sync manifest: %s", strerror(errno));
	else
		r->rc = gr_errf(r->err, GR_EPROTO, "malformed sync manifest");
	while (r->l->n > r->first) /* (into: nothing of it is kept) */
		sm_entry_release(&r->l->e[--r->l->n]);
	return NULL;
}

int sm_reader_open(struct sm_reader *r, int fd, int with_host, struct sm_list *into,
		   struct gr_err *err)
{
	struct gr_rd rd;
	struct stat st;

	memset(r, 0, sizeof(*r));
	r->w.fd = fd;
	r->with_host = with_host;
	r->err = err;
	r->l = into ? into : &r->own;
	r->first = r->l->n;
	ssize_t have = fwin_need(&r->w, 13);
	if (have < 0)
		return r->rc = gr_errf(err, GR_EIO, "cannot read the sync manifest: %s",
				       strerror(errno));
	if (have < 4 || memcmp(r->w.b.buf, SM_MAGIC, 4))
		return r->rc = gr_errf(err, GR_EPROTO, "not a sync manifest");
	rd_init(&rd, r->w.b.buf + 4, (size_t)have - 4);
	uint32_t version = get_u32(&rd);
	uint8_t host = get_u8(&rd);
	r->left = get_u32(&rd);
	if (rd.bad || version != SM_VERSION || host != !!with_host)
		return r->rc = gr_errf(err, GR_EPROTO, "sync manifest of an unknown version");
	r->w.pos = 13;
	/* As sm_decode: room for all at once, as many as the bytes can hold. */
	size_t bytes = fstat(fd, &st) == 0 && st.st_size > 13 ? (size_t)st.st_size - 13 : 0;
	size_t room = r->left < bytes / 6 ? r->left : bytes / 6;
	sm_reserve(r->l, into ? (room < (1u << 20) ? room : (1u << 20)) : 3);
	return 0;
}

const struct sm_entry *sm_reader_next(struct sm_reader *r)
{
	struct sm_list *l = r->l;
	struct gr_rd rd;
	ssize_t have;

	if (r->rc)
		return NULL;
	if (!r->left) {
		if (!r->ended && (have = fwin_need(&r->w, 1)) != 0) /* trailing bytes, or a read error */
			return reader_fail(r, have < 0 ? GR_EIO : GR_EPROTO);
		r->ended = 1;
		return NULL;
	}
	for (size_t want = SM_ENTRY_PEEK;; want *= 2) {
		if ((have = fwin_need(&r->w, want)) < 0)
			return reader_fail(r, GR_EIO);
		rd_init(&rd, r->w.b.buf + r->w.pos, (size_t)have);
		struct sm_entry *e = sm_get_entry(&rd, l, r->with_host);
		if (!rd.bad) {
			r->w.pos += (size_t)have - rd.n;
			if (l->n > r->first + 1 && strcmp(l->e[l->n - 2].path, e->path) >= 0)
				return reader_fail(r, GR_EPROTO);
			r->left--;
			if (l == &r->own && l->n == 3) { /* keep this one and the one before */
				sm_entry_release(&l->e[0]);
				l->e[0] = l->e[1];
				l->e[1] = l->e[2];
				l->n = 2;
				e = &l->e[1];
			}
			return e;
		}
		if (e) /* cut by the window, or malformed: read on to know */
			sm_entry_release(&l->e[--l->n]);
		if (r->w.eof || (size_t)have < want)
			return reader_fail(r, GR_EPROTO);
	}
}

void sm_reader_close(struct sm_reader *r)
{
	fwin_release(&r->w);
	sm_list_free(&r->own);
}

/* sm_decode_fd, and with each set sm_decode_fd_each. */
static int decode_fd(int fd, int with_host, struct sm_list *l,
		     void (*each)(void *arg, const struct sm_entry *e), void *arg,
		     struct gr_err *err)
{
	struct sm_reader r;
	const struct sm_entry *e;

	if (sm_reader_open(&r, fd, with_host, each ? NULL : l, err) == 0)
		while ((e = sm_reader_next(&r)))
			if (each)
				each(arg, e);
	sm_reader_close(&r);
	return r.rc;
}

int sm_decode_fd(int fd, int with_host, struct sm_list *l, struct gr_err *err)
{
	return decode_fd(fd, with_host, l, NULL, NULL, err);
}

int sm_decode_fd_each(int fd, int with_host,
		      void (*each)(void *arg, const struct sm_entry *e), void *arg,
		      struct gr_err *err)
{
	return decode_fd(fd, with_host, NULL, each, arg, err);
}

void sm_encode_z(const struct sm_list *l, struct strbuf *out)
{
	struct strbuf raw = STRBUF_INIT;

	ZSTD_CCtx *c = ZSTD_createCCtx();

	sm_encode(l, 0, &raw);
	size_t bound = ZSTD_compressBound(raw.len);
	sb_grow(out, bound);
	if (c && !ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3)) &&
	    !ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, SM_Z_WINDOW_LOG))) {
		size_t z = ZSTD_compress2(c, out->buf + out->len, bound, raw.buf, raw.len);
		if (!ZSTD_isError(z))
			out->len += z;
	}
	ZSTD_freeCCtx(c);
	sb_release(&raw);
}

int sm_decode_z(const void *p, size_t n, struct sm_list *l, struct gr_err *err)
{
	ZSTD_DStream *z = ZSTD_createDStream();
	struct strbuf raw = STRBUF_INIT;
	ZSTD_inBuffer in = { p, n, 0 };
	int rc = 0;

	for (;;) {
		sb_grow(&raw, 1 << 20);
		ZSTD_outBuffer out = { raw.buf + raw.len, raw.alloc - raw.len - 1, 0 };
		size_t r = ZSTD_decompressStream(z, &out, &in);
		raw.len += out.pos;
		if (ZSTD_isError(r)) {
			rc = gr_errf(err, GR_EPROTO, "cannot decompress the manifest: %s",
				     ZSTD_getErrorName(r));
			goto out;
		}
		if (raw.len > SM_MAX_DECODED) {
			rc = gr_errf(err, GR_EPROTO, "the manifest is too large");
			goto out;
		}
		if (r == 0 && in.pos == in.size)
			break;
		if (in.pos == in.size && out.pos < out.size) {
			rc = gr_errf(err, GR_EPROTO, "the manifest is truncated");
			goto out;
		}
	}
	rc = sm_decode(raw.buf, raw.len, 0, l, err);
out:
	ZSTD_freeDStream(z);
	sb_release(&raw);
	return rc;
}

int sm_path_ok(const char *path)
{
	size_t len = strlen(path);
	const char *c = path;

	if (!len || len > 4096 || path[0] == '/')
		return 0;
	while (*c) {
		const char *slash = strchr(c, '/');
		size_t cl = slash ? (size_t)(slash - c) : strlen(c);
		if (cl == 0 || cl > 255 || (cl == 1 && c[0] == '.') ||
		    (cl == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		if (!slash)
			break;
		c = slash + 1;
		if (!*c)
			return 0; /* trailing '/' */
	}
	return 1;
}

uint32_t sm_block_len(uint64_t size)
{
	uint64_t r = 0, b;

	if (size <= (4u << 20))
		return 2048;
	/* integer square root, then up to a multiple of 1 KiB */
	for (uint64_t bit = 1ull << 62; bit; bit >>= 2) {
		if (size >= r + bit) {
			size -= r + bit;
			r = (r >> 1) + bit;
		} else {
			r >>= 1;
		}
	}
	b = (r + 1023) / 1024 * 1024;
	return b > (1u << 20) ? (1u << 20) : (uint32_t)b;
}

void sm_leaf_hash(uint8_t out[SM_HASH_LEN], const void *p, size_t n)
{
	blake2b(out, p, NULL, SM_HASH_LEN, n, 0);
}

void thash_init(struct thash *t, uint64_t size)
{
	memset(t, 0, sizeof(*t));
	t->size = size;
	t->block = sm_block_len(size);
	blake2b_init(&t->root, SM_HASH_LEN);
	blake2b_init(&t->leaf, SM_HASH_LEN);
}

static void leaf_done(struct thash *t)
{
	uint8_t h[SM_HASH_LEN];

	blake2b_final(&t->leaf, h, SM_HASH_LEN);
	blake2b_update(&t->root, h, SM_HASH_LEN);
	if (t->on_leaf)
		t->on_leaf(t->arg, t->nleaf, h);
	t->nleaf++;
	t->in_leaf = 0;
	blake2b_init(&t->leaf, SM_HASH_LEN);
}

void thash_update(struct thash *t, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		size_t k = t->block - t->in_leaf;
		if (k > n)
			k = n;
		blake2b_update(&t->leaf, b, k);
		t->in_leaf += (uint32_t)k;
		t->done += k;
		b += k;
		n -= k;
		if (t->in_leaf == t->block)
			leaf_done(t);
	}
}

static void put_le64(uint8_t out[8], uint64_t v)
{
	for (int i = 0; i < 8; i++)
		out[i] = (uint8_t)(v >> (8 * i));
}

void thash_final(struct thash *t, uint8_t out[SM_HASH_LEN])
{
	uint8_t sz[8];

	if (t->in_leaf)
		leaf_done(t);
	put_le64(sz, t->done);
	blake2b_update(&t->root, sz, sizeof(sz));
	blake2b_final(&t->root, out, SM_HASH_LEN);
}

void thash_from_leaves(const uint8_t *leaves, uint64_t nleaves, uint64_t size,
		       uint8_t out[SM_HASH_LEN])
{
	blake2b_state s;
	uint8_t sz[8];

	blake2b_init(&s, SM_HASH_LEN);
	if (nleaves)
		blake2b_update(&s, leaves, nleaves * SM_HASH_LEN);
	put_le64(sz, size);
	blake2b_update(&s, sz, sizeof(sz));
	blake2b_final(&s, out, SM_HASH_LEN);
}

/* RabinKarp as librsync defines it: seed 1, h = h * 0x08104225 + byte mod
 * 2^32 (a definition, so both sides' signatures agree). */
#define RK_MULT 0x08104225u

/* Eight bytes at a time with the multiplier's powers. */
static uint32_t weak_sum_8(uint32_t h, const uint8_t *b, size_t n)
{
	const uint32_t M = RK_MULT, m2 = M * M, m3 = m2 * M, m4 = m3 * M, m5 = m4 * M,
		m6 = m5 * M, m7 = m6 * M, m8 = m7 * M;

	for (; n >= 8; b += 8, n -= 8)
		h = h * m8 + b[0] * m7 + b[1] * m6 + b[2] * m5 + b[3] * m4 + b[4] * m3 +
		    b[5] * m2 + b[6] * M + b[7];
	for (; n; b++, n--)
		h = h * M + *b;
	return h;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define WEAK_VEC 64 /* bytes a step: 8 lanes of 32 bits, 8 accumulators */

/* rk_pow[j] = RK_MULT^j mod 2^32 (test_sync_manifest checks the sums
 * made with them against the byte-at-a-time definition). */
static const uint32_t rk_pow[WEAK_VEC + 1] = {
	0x00000001u, 0x08104225u, 0xa5b71959u, 0x858f9bddu, 0xf9c080f1u, 0x5120c4d5u,
	0x21cb5cc9u, 0x64e03b0du, 0x7c71e2e1u, 0x8f03cc85u, 0x9696d939u, 0x035e173du,
	0x1a6715d1u, 0x49960935u, 0x8c5efea9u, 0xf9f2606du, 0x0bb409c1u, 0xbf992ae5u,
	0x04823d19u, 0xd423469du, 0x131daeb1u, 0xdd63e195u, 0x80e80489u, 0x0343f9cdu,
	0x0409f4a1u, 0x7891dd45u, 0x0470c4f9u, 0xcea4a9fdu, 0xd96fcb91u, 0x80b3cdf5u,
	0x7c65ee69u, 0x70c2872du, 0x4dc72381u, 0xd4ff63a5u, 0x02e9f0d9u, 0x9177c15du,
	0xe3f8ec71u, 0x6eff4e55u, 0x6a683c49u, 0x4d2b888du, 0x514f1661u, 0x92433e05u,
	0x820540b9u, 0xf9020cbdu, 0x38649151u, 0xb10fe2b5u, 0x830e6e29u, 0xd40c7dedu,
	0x25154d41u, 0xb60eec65u, 0x176a3499u, 0xd5790c1du, 0xb96e3a31u, 0x62ff0b15u,
	0x69080409u, 0xc7c2e74du, 0xfb9d4821u, 0x7463eec5u, 0xaa504c79u, 0xe0e23f7du,
	0xb4e16711u, 0x3a364775u, 0x87947de9u, 0x077c44adu, 0xd17a8701u,
};

/* The same sum, 64 bytes a step (issue 13: the scalar loop's multiply
 * chain was 7 % of a large first sync's client CPU). Accumulator k, lane
 * i holds the bytes at 8k + i of each step, each step multiplying what it
 * holds by M^64; at the end lane (k, i) is weighed by M^(63 - 8k - i) and
 * all are summed. Everything is mod 2^32, so the order of the additions
 * does not matter and the result is the scalar loop's, bit for bit. */
__attribute__((target("avx2"))) static uint32_t weak_sum_avx2(uint32_t h, const uint8_t *b,
							       size_t n)
{
	const uint32_t *pw = rk_pow;
	__m256i acc[8];
	size_t steps = n / WEAK_VEC;
	__m256i step = _mm256_set1_epi32((int)pw[WEAK_VEC]);

	for (int k = 0; k < 8; k++)
		acc[k] = _mm256_setzero_si256();
	for (size_t s = 0; s < steps; s++, b += WEAK_VEC) {
		for (int k = 0; k < 8; k++) {
			__m128i x = _mm_loadl_epi64((const __m128i *)(b + 8 * k));
			acc[k] = _mm256_add_epi32(_mm256_mullo_epi32(acc[k], step),
						  _mm256_cvtepu8_epi32(x));
		}
	}
	/* h * M^(64 * steps): the seed moved past every byte summed. */
	uint32_t hm = h, p = pw[WEAK_VEC];
	for (size_t e = steps; e; e >>= 1, p *= p)
		if (e & 1)
			hm *= p;
	__m256i sum = _mm256_setzero_si256();
	for (int k = 0; k < 8; k++) {
		uint32_t t[8]; /* lane i of accumulator k: M^(63 - 8k - i) */
		for (int i = 0; i < 8; i++)
			t[i] = pw[WEAK_VEC - 1 - 8 * k - i];
		__m256i w = _mm256_loadu_si256((const __m256i *)t);
		sum = _mm256_add_epi32(sum, _mm256_mullo_epi32(acc[k], w));
	}
	uint32_t lanes[8];
	_mm256_storeu_si256((__m256i *)lanes, sum);
	for (int i = 0; i < 8; i++)
		hm += lanes[i];
	return weak_sum_8(hm, b, n - steps * WEAK_VEC);
}
#endif

uint32_t sm_weak_sum(const void *p, size_t n)
{
#ifdef WEAK_VEC
	if (n >= 4 * WEAK_VEC && __builtin_cpu_supports("avx2"))
		return weak_sum_avx2(1, p, n);
#endif
	return weak_sum_8(1, p, n);
}

/* The definition, a byte at a time, for the tests. */
uint32_t sm_weak_sum_ref(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint32_t h = 1;

	for (; n; b++, n--)
		h = h * RK_MULT + *b;
	return h;
}

/* Folders that are never a project folder, nor is anything inside them. */
static const char *const system_trees[] = {
	"/etc", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
	"/boot", "/dev", "/proc", "/sys", "/run", "/var", NULL,
};
/* Folders that may hold projects, but are not one themselves. */
static const char *const shared_roots[] = {
	"/tmp", "/var/tmp", "/home", "/opt", "/srv", "/mnt", "/media", "/root",
	"/snap", "/nix", "/data", NULL,
};

static int is_under(const char *p, const char *dir)
{
	size_t n = strlen(dir);
	return !strncmp(p, dir, n) && (p[n] == '/' || p[n] == '\0');
}

const char *sm_root_refused(const char *real, const char *home)
{
	if (!real[0] || !strcmp(real, "/"))
		return "it is the root folder";
	if (home && *home && strcmp(home, "/")) {
		if (!strcmp(real, home))
			return "it is the home folder";
		if (is_under(home, real))
			return "it holds the home folder";
	}
	for (const char *const *s = shared_roots; *s; s++)
		if (!strcmp(real, *s))
			return "it is a shared system folder";
	for (const char *const *s = system_trees; *s; s++)
		if (is_under(real, *s) && !is_under(real, "/var/tmp"))
			return "it is a system folder";
	return NULL;
}

/* Collapse "//", "." and ".." without touching the filesystem. */
char *sm_clean_path(const char *abs)
{
	struct strbuf out = STRBUF_INIT;
	char *copy = xstrdup(abs);

	for (char *save = NULL, *c = strtok_r(copy, "/", &save); c;
	     c = strtok_r(NULL, "/", &save)) {
		if (!strcmp(c, "."))
			continue;
		if (!strcmp(c, "..")) {
			char *slash = out.len ? strrchr(out.buf, '/') : NULL;
			if (slash)
				out.len = (size_t)(slash - out.buf);
			if (out.buf)
				out.buf[out.len] = '\0';
			continue;
		}
		sb_addf(&out, "/%s", c);
	}
	if (!out.len)
		sb_adds(&out, "/");
	free(copy);
	return sb_detach(&out, NULL);
}

void sm_hex(const uint8_t h[SM_HASH_LEN], char out[2 * SM_HASH_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < SM_HASH_LEN; i++) {
		out[2 * i] = digits[h[i] >> 4];
		out[2 * i + 1] = digits[h[i] & 15];
	}
	out[2 * SM_HASH_LEN] = '\0';
}
