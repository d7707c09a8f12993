/* Large files on the client (see sync_delta.h): aligned blocks found by
 * hash, librsync's rolling search for the rest, zstd around the delta. */
#include <errno.h>
#include <fcntl.h>
#include <librsync.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "sync_delta.h"

#define RS_DELTA_MAGIC_BE 0x72730236u
#define OP_END 0x00
#define OP_COPY_N8_N8 0x54
#define OP_LITERAL_N4 0x43
#define RK_MULT 0x08104225u
#define CHUNK (1u << 20)
#define PROBE_BYTES (4u << 20)  /* rolling input looked at before deciding */
#define ZLEVEL 3

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be(uint8_t *out, uint64_t v, int n)
{
	for (int i = n - 1; i >= 0; i--, v >>= 8)
		out[i] = (uint8_t)v;
}

int sync_sig_parse(const void *p, size_t n, struct sync_sig *s)
{
	const uint8_t *b = p;

	memset(s, 0, sizeof(*s));
	if (n < 12)
		return -1;
	s->magic = be32(b);
	s->block = be32(b + 4);
	s->strong = be32(b + 8);
	if (s->magic != RS_RK_BLAKE2_SIG_MAGIC || !s->block || !s->strong || s->strong > 32 ||
	    (n - 12) % (4 + s->strong))
		return -1;
	s->n = (n - 12) / (4 + s->strong);
	s->data = b + 12;
	s->raw = p;
	s->rawlen = n;
	return 0;
}

void sync_sig_build(struct strbuf *out, uint32_t block, uint64_t n,
		    const uint32_t *weak, const uint8_t *leaves)
{
	uint8_t h[12];

	put_be(h, RS_RK_BLAKE2_SIG_MAGIC, 4);
	put_be(h + 4, block, 4);
	put_be(h + 8, SM_HASH_LEN, 4);
	sb_grow(out, 12 + n * (4 + SM_HASH_LEN));
	sb_add(out, h, 12);
	for (uint64_t k = 0; k < n; k++) {
		put_be(h, weak[k], 4);
		sb_add(out, h, 4);
		sb_add(out, leaves + k * SM_HASH_LEN, SM_HASH_LEN);
	}
}

void sigmaker_init(struct sigmaker *m, uint64_t size, const uint8_t *given)
{
	memset(m, 0, sizeof(*m));
	m->given = given;
	m->size = size;
	m->block = sm_block_len(size);
	m->nb = (size + m->block - 1) / m->block;
	m->weak = xmalloc((m->nb ? m->nb : 1) * sizeof(*m->weak));
	m->leaves = xmalloc((m->nb ? m->nb : 1) * SM_HASH_LEN);
	m->part = xmalloc(m->block);
}

void sigmaker_fps(struct sigmaker *m, void (*fp)(uint8_t *out, const void *p, size_t n),
		  size_t fp_len)
{
	m->fp = fp;
	m->fp_len = fp_len;
	m->fps = xmalloc((m->nb ? m->nb : 1) * fp_len);
}

static void sig_block(struct sigmaker *m, const uint8_t *p, size_t n)
{
	if (m->k >= m->nb)
		return; /* longer than announced: the hash will say so */
	m->weak[m->k] = sm_weak_sum(p, n);
	if (m->fp)
		m->fp(m->fps + m->k * m->fp_len, p, n);
	if (m->given)
		memcpy(m->leaves + m->k * SM_HASH_LEN, m->given + m->k * SM_HASH_LEN, SM_HASH_LEN);
	else
		sm_leaf_hash(m->leaves + m->k * SM_HASH_LEN, p, n);
	m->k++;
}

void sigmaker_update(struct sigmaker *m, const void *p, size_t n)
{
	const uint8_t *b = p;

	m->done += n;
	if (m->part_len) {
		size_t k = m->block - m->part_len < n ? m->block - m->part_len : n;
		memcpy(m->part + m->part_len, b, k);
		m->part_len += (uint32_t)k;
		b += k;
		n -= k;
		if (m->part_len < m->block)
			return;
		sig_block(m, m->part, m->block);
		m->part_len = 0;
	}
	for (; n >= m->block; b += m->block, n -= m->block)
		sig_block(m, b, m->block);
	memcpy(m->part, b, n);
	m->part_len = (uint32_t)n;
}

void sigmaker_final(struct sigmaker *m, struct strbuf *sig, uint8_t hash[SM_HASH_LEN])
{
	if (m->part_len)
		sig_block(m, m->part, m->part_len);
	m->part_len = 0;
	thash_from_leaves(m->leaves, m->k, m->done, hash);
	if (sig)
		sync_sig_build(sig, m->block, m->k, m->weak, m->leaves);
}

void sigmaker_release(struct sigmaker *m)
{
	free(m->weak);
	free(m->leaves);
	free(m->fps);
	free(m->part);
	memset(m, 0, sizeof(*m));
}

/* zstd around everything given to the sink. */
struct zout {
	ZSTD_CCtx *z;
	const struct sync_send *in;
	struct sync_send_res *res;
	struct strbuf held;   /* output kept back while probing */
	int holding;
	uint8_t buf[1 << 17];
	int failed;
};

static int z_emit(struct zout *o, const void *p, size_t n)
{
	if (o->failed)
		return -1;
	o->res->zbytes += n;
	if (o->holding) {
		sb_add(&o->held, p, n);
		return 0;
	}
	if (o->in->sink(o->in->arg, p, n)) {
		o->failed = 1;
		return -1;
	}
	return 0;
}

int sync_zstd_feed(ZSTD_CCtx *z, const void *p, size_t n, ZSTD_EndDirective end,
		   uint8_t *buf, size_t bufsz, int (*emit)(void *arg, const void *p, size_t n),
		   void *arg)
{
	ZSTD_inBuffer zi = { p, n, 0 };

	for (;;) {
		ZSTD_outBuffer zo = { buf, bufsz, 0 };
		size_t left = ZSTD_compressStream2(z, &zo, &zi, end);
		if (ZSTD_isError(left))
			return -1;
		if (zo.pos && emit(arg, buf, zo.pos) < 0)
			return -1;
		if (end == ZSTD_e_end ? left == 0 : zi.pos == zi.size)
			return 0;
	}
}

/* The frame: magic, a descriptor with no content size, checksum or
 * dictionary, and a window of 128 KiB (2^(10+7)), which is also the
 * largest block it may hold. A block's 3-byte header: its size << 3,
 * type raw (0) << 1, and the last-block bit. */
#define ZRAW_BLOCK (128u << 10)

int zraw_begin(const struct zraw *r)
{
	static const uint8_t head[6] = { 0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3 };

	return r->emit(r->arg, head, sizeof(head)) < 0 ? -1 : 0;
}

static int zraw_block(const struct zraw *r, const void *p, size_t n, int last)
{
	uint32_t v = (uint32_t)n << 3 | (last ? 1u : 0u);
	uint8_t h[3] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16) };

	return r->emit(r->arg, h, sizeof(h)) < 0 || (n && r->emit(r->arg, p, n) < 0) ? -1 : 0;
}

int zraw_put(const struct zraw *r, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		size_t k = n < ZRAW_BLOCK ? n : ZRAW_BLOCK;
		if (zraw_block(r, b, k, 0) < 0)
			return -1;
		b += k;
		n -= k;
	}
	return 0;
}

int zraw_end(const struct zraw *r)
{
	return zraw_block(r, NULL, 0, 1);
}

static int z_emit_cb(void *arg, const void *p, size_t n)
{
	return z_emit(arg, p, n);
}

static int z_write(struct zout *o, const void *p, size_t n, ZSTD_EndDirective end)
{
	return sync_zstd_feed(o->z, p, n, end, o->buf, sizeof(o->buf), z_emit_cb, o);
}

static int release_held(struct zout *o)
{
	o->holding = 0;
	if (o->held.len && o->in->sink(o->in->arg, o->held.buf, o->held.len)) {
		o->failed = 1;
		return -1;
	}
	sb_release(&o->held);
	return 0;
}

static int read_at(int fd, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		got += (size_t)r;
	}
	return 0;
}

static int send_whole(int fd, const struct sync_send *in, struct zout *o,
		      struct sync_send_res *res, struct gr_err *err)
{
	struct sigmaker m;
	uint8_t *buf = xmalloc(CHUNK), hash[SM_HASH_LEN];
	uint64_t off = 0;
	int rc = 0;

	sigmaker_init(&m, in->size, in->leaves);
	while (off < in->size) {
		size_t n = in->size - off < CHUNK ? (size_t)(in->size - off) : CHUNK;
		if (read_at(fd, buf, n, off) < 0) {
			rc = gr_errf(err, GR_ECONFLICT, "'%s' changed while being sent", in->name);
			goto out;
		}
		sigmaker_update(&m, buf, n);
		if (z_write(o, buf, n, ZSTD_e_continue) < 0) {
			rc = gr_errf(err, GR_EIO, "cannot send '%s'", in->name);
			goto out;
		}
		off += n;
		if (res->progress)
			res->progress(res->parg, n);
	}
	if (z_write(o, NULL, 0, ZSTD_e_end) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot send '%s'", in->name);
		goto out;
	}
	sigmaker_final(&m, &res->sig, hash);
	if (memcmp(hash, in->hash, SM_HASH_LEN))
		rc = gr_errf(err, GR_ECONFLICT, "'%s' changed while being sent", in->name);
	res->literal = in->size;
out:
	sigmaker_release(&m);
	free(buf);
	return rc;
}

/* Probing is over: either give up on the delta or let the held output go. */
static int probe_decide(struct zout *o, uint64_t literal, uint64_t seen, int *declined)
{
	if (literal * 10 > 9 * seen) {
		*declined = 1;
		return 0;
	}
	return release_held(o);
}

/* The old version's blocks by weak sum, to tell at a glance that a
 * region of new data holds none of them (an in-place edit: librsync's
 * rolling search would look up every byte offset of it, ~33 MB/s). */
struct weak_index {
	uint32_t mask;
	uint32_t *key;
	uint32_t *idx;   /* block index + 1; 0: empty */
	uint64_t *bits;  /* a bit per (hashed) weak sum: most offsets end here */
	uint32_t bshift;
};

#define WEAK_MIX(w) ((uint32_t)(w) * 0x9e3779b1u)
/* An entry lies at most this far from its slot: a block left out (the
 * same block again, or a crowded slot) costs literals, never a wrong
 * delta, and a file of equal blocks (zeros) builds in linear time. */
#define WEAK_PROBES 32

static void weak_index_build(struct weak_index *wi, const struct sync_sig *old)
{
	uint64_t cap = 16;
	while (cap < 2 * old->n)
		cap *= 2;
	wi->mask = (uint32_t)(cap - 1);
	wi->key = xcalloc(cap, sizeof(*wi->key));
	wi->idx = xcalloc(cap, sizeof(*wi->idx));
	/* ~32 bits per block: 1 offset in ~30 goes on to the table */
	uint32_t lg = 16;
	while (lg < 28 && ((uint64_t)1 << lg) < 32 * old->n)
		lg++;
	wi->bshift = 32 - lg;
	wi->bits = xcalloc(((size_t)1 << lg) / 64, sizeof(*wi->bits));
	for (uint64_t k = 0; k < old->n; k++) {
		const uint8_t *e = old->data + k * (4 + old->strong);
		uint32_t w = be32(e), h = WEAK_MIX(w) & wi->mask, probes = 0;
		int dup = 0;
		for (; wi->idx[h] && probes < WEAK_PROBES; h = (h + 1) & wi->mask, probes++)
			if (wi->key[h] == w &&
			    !memcmp(old->data + (uint64_t)(wi->idx[h] - 1) * (4 + old->strong) + 4, e + 4,
				    old->strong)) {
				dup = 1;
				break;
			}
		if (dup || wi->idx[h])
			continue;
		wi->key[h] = w;
		wi->idx[h] = (uint32_t)(k + 1);
		uint32_t b = WEAK_MIX(w) >> wi->bshift;
		wi->bits[b / 64] |= (uint64_t)1 << (b % 64);
	}
}

static void weak_index_free(struct weak_index *wi)
{
	free(wi->key);
	free(wi->idx);
	free(wi->bits);
}

/* Is the block at p (block bytes, weak sum w) one of the old version's? */
static int old_block_at(const struct weak_index *wi, const struct sync_sig *old, uint32_t w,
			const uint8_t *p, uint32_t block)
{
	uint8_t h[SM_HASH_LEN];
	int hashed = 0;
	uint32_t b = WEAK_MIX(w) >> wi->bshift;

	if (!(wi->bits[b / 64] >> (b % 64) & 1))
		return 0;
	uint32_t probes = 0;
	for (uint32_t i = WEAK_MIX(w) & wi->mask; wi->idx[i] && probes < WEAK_PROBES;
	     i = (i + 1) & wi->mask, probes++) {
		if (wi->key[i] != w)
			continue;
		if (!hashed) {
			sm_leaf_hash(h, p, block);
			hashed = 1;
		}
		if (!memcmp(old->data + (uint64_t)(wi->idx[i] - 1) * (4 + old->strong) + 4, h,
			    old->strong))
			return 1;
	}
	return 0;
}

/* The first offset in [off, off + len) where a whole block of the old
 * version starts (len if none), by a rolling weak sum checked against
 * the index, then the strong sum; -1 if the file cannot be read. */
static int64_t first_old_block(int fd, const struct sync_sig *old, const struct weak_index *wi,
			       uint32_t block, uint64_t off, uint64_t len)
{
	if (len < block)
		return (int64_t)len;
	uint32_t ml = 1;
	for (uint32_t i = 0; i < block; i++)
		ml *= RK_MULT;
	size_t cap = CHUNK + block;
	uint8_t *buf = xmalloc(cap);
	uint64_t base = 0, have = 0, p = 0;
	int64_t found = (int64_t)len;
	uint32_t h = 0;

	for (int done = 0; !done;) {
		/* the window [p, p + block] in the buffer (the byte after it too) */
		uint64_t need = p + block + 1 <= len ? p + block + 1 : len;
		if (need > base + have) {
			memmove(buf, buf + (p - base), (size_t)(base + have - p));
			have -= p - base;
			base = p;
			size_t n = len - (base + have) < cap - have ? (size_t)(len - (base + have))
								     : cap - (size_t)have;
			if (read_at(fd, buf + have, n, off + base + have) < 0) {
				found = -1;
				break;
			}
			have += n;
		}
		if (p == 0)
			h = sm_weak_sum(buf, block);
		/* every offset whose window and next byte are in the buffer */
		uint64_t last = base + have - block - 1;
		for (const uint8_t *w = buf + (p - base);; w++, p++) {
			if (old_block_at(wi, old, h, w, block)) {
				found = (int64_t)p;
				done = 1;
				break;
			}
			if (p + block >= len) {
				done = 1;
				break;
			}
			if (p >= last)
				break;
			/* roll: out goes w[0], in comes w[block] (RabinKarp) */
			h = h * RK_MULT + w[block] - ml * (w[0] + RK_MULT - 1);
		}
		if (!done) { /* roll onto the next offset, then refill */
			const uint8_t *w = buf + (p - base);
			h = h * RK_MULT + w[block] - ml * (w[0] + RK_MULT - 1);
			p++;
		}
	}
	free(buf);
	return found;
}

/* The region [off, off + len) as LITERAL commands, its weak sums noted. */
static int literal_region(int fd, uint64_t off, uint64_t len, uint32_t block, uint32_t *weak,
			  struct zout *o, struct sync_send_res *res)
{
	size_t chunk = (size_t)block * (CHUNK / block ? CHUNK / block : 1);
	uint8_t *in = xmalloc(chunk), cmd[5];
	int rc = 0;

	for (uint64_t pos = 0; pos < len && rc == 0;) {
		size_t n = len - pos < chunk ? (size_t)(len - pos) : chunk;
		if (read_at(fd, in, n, off + pos) < 0) {
			rc = -2;
			break;
		}
		for (size_t b = 0; b < n; b += block)
			weak[(off + pos + b) / block] = sm_weak_sum(in + b, n - b < block ? n - b : block);
		cmd[0] = OP_LITERAL_N4;
		put_be(cmd + 1, n, 4);
		if (z_write(o, cmd, sizeof(cmd), ZSTD_e_continue) < 0 ||
		    z_write(o, in, n, ZSTD_e_continue) < 0)
			rc = -1;
		res->literal += n;
		if (res->progress)
			res->progress(res->parg, n);
		pos += n;
	}
	free(in);
	return rc;
}

/* librsync's delta of one region of the new file, without its header and
 * END: its commands slot into the stream we are writing. Returns 0, -1
 * (cannot send), -2 (the file changed). */
static int rolling_region(int fd, rs_signature_t *rsig, uint64_t off, uint64_t len,
			  uint32_t block, uint32_t *weak, struct zout *o,
			  struct sync_send_res *res, uint64_t *probe_left, int *declined)
{
	size_t chunk = (size_t)block * (CHUNK / block ? CHUNK / block : 1);
	rs_job_t *job = rs_delta_begin(rsig);
	uint8_t *in = xmalloc(chunk), *out = xmalloc(CHUNK), keep = 0;
	uint64_t pos = 0, emitted = 0;
	int have_keep = 0, rc = 0;
	rs_result r = RS_BLOCKED;

	while (r != RS_DONE) {
		size_t n = len - pos < chunk ? (size_t)(len - pos) : chunk;
		if (n && read_at(fd, in, n, off + pos) < 0) {
			rc = -2;
			break;
		}
		for (size_t b = 0; b < n; b += block) /* regions and chunks start on a block */
			weak[(off + pos + b) / block] = sm_weak_sum(in + b, n - b < block ? n - b : block);
		pos += n;
		rs_buffers_t bf = { (char *)in, n, pos == len, NULL, 0 };
		for (;;) {
			size_t before = bf.avail_in;
			bf.next_out = (char *)out;
			bf.avail_out = CHUNK;
			r = rs_job_iter(job, &bf);
			if (r != RS_DONE && r != RS_BLOCKED) {
				rc = -1;
				goto out;
			}
			size_t got = CHUNK - bf.avail_out;
			/* Drop the 4-byte magic; hold back the last byte (END). */
			for (size_t i = 0; i < got; i++, emitted++) {
				if (emitted < 4)
					continue;
				if (have_keep && z_write(o, &keep, 1, ZSTD_e_continue) < 0) {
					rc = -1;
					goto out;
				}
				keep = out[i];
				have_keep = 1;
			}
			if (r == RS_DONE || (!got && bf.avail_in == before) ||
			    (!bf.avail_in && bf.avail_out))
				break;
		}
		if (r != RS_DONE && pos == len && !n) {
			rc = -1; /* at the end and still not done */
			goto out;
		}
		if (res->progress)
			res->progress(res->parg, n);
		if (o->holding && *probe_left) {
			*probe_left = *probe_left > n ? *probe_left - n : 0;
			if (!*probe_left) {
				const rs_stats_t *st = rs_job_statistics(job);
				if (probe_decide(o, (uint64_t)st->lit_bytes, pos, declined) < 0) {
					rc = -1;
					goto out;
				}
				if (*declined)
					goto out;
			}
		}
	}
	if (!have_keep || keep != OP_END)
		rc = -1; /* not a delta we understand */
	res->literal += (uint64_t)rs_job_statistics(job)->lit_bytes;
out:
	rs_job_free(job);
	free(in);
	free(out);
	return rc;
}

static int send_delta(int fd, const struct sync_send *in, const uint8_t *leaves,
		      struct zout *o, struct sync_send_res *res, struct gr_err *err)
{
	const struct sync_sig *old = in->old;
	uint32_t block = sm_block_len(in->size);
	uint64_t nb = (in->size + block - 1) / block, nmatch = 0;
	uint8_t *match = xcalloc(nb ? nb : 1, 1);
	uint32_t *weak = xmalloc((nb ? nb : 1) * sizeof(*weak));
	rs_signature_t *rsig = NULL;
	uint64_t probe = 0;
	int rc = 0, declined = 0;
	uint8_t cmd[17];
	struct weak_index wi = { 0, NULL, NULL, NULL, 0 };

	/* Blocks that did not move: compare the block hashes directly. */
	int aligned = old->strong == SM_HASH_LEN && old->block == block;
	for (uint64_t k = 0; aligned && k < nb && k < old->n; k++) {
		const uint8_t *e = old->data + k * (4 + SM_HASH_LEN);
		if (!memcmp(e + 4, leaves + k * SM_HASH_LEN, SM_HASH_LEN)) {
			match[k] = 1;
			weak[k] = be32(e);
			nmatch++;
		}
	}
	if (nmatch < nb && old->strong == SM_HASH_LEN && nmatch * 8 >= nb)
		weak_index_build(&wi, old);
	if (nmatch < nb) {
		rs_job_t *load = rs_loadsig_begin(&rsig);
		rs_buffers_t b = { (char *)old->raw, old->rawlen, 1, NULL, 0 };
		rs_result r = rs_job_iter(load, &b);
		rs_job_free(load);
		if (r != RS_DONE || rs_build_hash_table(rsig) != RS_DONE) {
			rc = gr_errf(err, GR_EPROTO, "the signature for '%s' is unusable", in->name);
			goto out;
		}
	}
	/* Few blocks in place: look at the first bytes of the rolling search
	 * before committing to a delta that may not shrink anything. */
	if (nmatch * 8 < nb) {
		o->holding = 1;
		probe = PROBE_BYTES;
	}
	put_be(cmd, RS_DELTA_MAGIC_BE, 4);
	if (z_write(o, cmd, 4, ZSTD_e_continue) < 0)
		goto fail_send;
	for (uint64_t k = 0; k < nb;) {
		uint64_t j = k;
		while (j < nb && match[j] == match[k])
			j++;
		uint64_t off = k * block, end = j * block < in->size ? j * block : in->size;
		if (match[k]) {
			cmd[0] = OP_COPY_N8_N8;
			put_be(cmd + 1, off, 8);
			put_be(cmd + 9, end - off, 8);
			if (z_write(o, cmd, sizeof(cmd), ZSTD_e_continue) < 0)
				goto fail_send;
			res->matched += end - off;
			if (res->progress)
				res->progress(res->parg, end - off);
		} else {
			/* Nothing of the old version in it (an edit in place):
			 * literal at once; else literal up to the block where the
			 * first old block may start, librsync's search from there. */
			uint64_t lit = 0;
			int r = 0;
			if (wi.key && !o->holding) {
				int64_t first = first_old_block(fd, old, &wi, block, off, end - off);
				if (first < 0) {
					rc = gr_errf(err, GR_ECONFLICT, "'%s' changed while being sent",
						     in->name);
					goto out;
				}
				lit = (uint64_t)first == end - off ? end - off
								   : (uint64_t)first / block * block;
				if (lit)
					r = literal_region(fd, off, lit, block, weak, o, res);
			}
			if (r == 0 && lit < end - off)
				r = rolling_region(fd, rsig, off + lit, end - off - lit, block, weak, o,
						   res, &probe, &declined);
			if (declined) {
				res->declined = 1;
				goto out;
			}
			if (r == -2) {
				rc = gr_errf(err, GR_ECONFLICT, "'%s' changed while being sent",
					     in->name);
				goto out;
			}
			if (r < 0)
				goto fail_send;
		}
		k = j;
	}
	cmd[0] = OP_END;
	if (z_write(o, cmd, 1, ZSTD_e_end) < 0)
		goto fail_send;
	if (o->holding) { /* smaller than the probe: decide on the whole */
		if (probe_decide(o, res->literal, in->size, &declined) < 0)
			goto fail_send;
		if (declined) {
			res->declined = 1;
			goto out;
		}
	}
	res->matched = in->size - res->literal;
	sync_sig_build(&res->sig, block, nb, weak, leaves);
	goto out;
fail_send:
	rc = gr_errf(err, GR_EIO, "cannot send the delta of '%s'", in->name);
out:
	if (rsig)
		rs_free_sumset(rsig);
	weak_index_free(&wi);
	free(match);
	free(weak);
	return rc;
}

int sync_send_file(const struct sync_send *in, struct sync_send_res *res,
		   struct gr_err *err)
{
	struct zout *o = xcalloc(1, sizeof(*o));
	uint8_t *own = NULL, hash[SM_HASH_LEN];
	const uint8_t *leaves = in->leaves;
	struct stat st;
	int fd, rc = 0;

	o->in = in;
	o->res = res;
	o->z = ZSTD_createCCtx();
	ZSTD_CCtx_setParameter(o->z, ZSTD_c_compressionLevel, ZLEVEL);
	fd = in->fd;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != in->size) {
		rc = gr_errf(err, GR_ECONFLICT, "'%s' changed while being sent", in->name);
		goto out;
	}
	if (in->old && !leaves) {
		if ((rc = sync_hash_fd(fd, in->name, in->size, hash, &own, err)) < 0)
			goto out;
		if (memcmp(hash, in->hash, SM_HASH_LEN)) {
			rc = gr_errf(err, GR_ECONFLICT, "'%s' changed while being sent", in->name);
			goto out;
		}
		leaves = own;
	}
	if (in->old) {
		rc = send_delta(fd, in, leaves, o, res, err);
		if (res->declined) { /* start over, whole */
			sb_release(&o->held);
			o->holding = 0;
			res->zbytes = res->literal = res->matched = 0;
			ZSTD_CCtx_reset(o->z, ZSTD_reset_session_only);
		}
	} else {
		rc = send_whole(fd, in, o, res, err);
	}
out:
	free(own);
	sb_release(&o->held);
	ZSTD_freeCCtx(o->z);
	free(o);
	return rc;
}
