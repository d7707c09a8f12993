/* The pending list: files written to temp files, put in place at COMMIT.
 * A walked session's (on_disk) goes to disk in sorted runs once it holds
 * SYNC_PEND_RUN records, so a first sync of a large tree holds one run in
 * memory, not a record (64 bytes and its names) for every file. COMMIT
 * reads the runs in the order they were written to put the files in
 * place, then merges them (k ways, by path) into the manifest it writes. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync_agent.h"

/* A record on disk: u32 seq, u64 size, i64 mtime_ns, hash, u32 mode,
 * u8 flags, u16 length of the names, then the names (path NUL tmp NUL). */
#define REC_HEAD (4 + 8 + 8 + SM_HASH_LEN + 4 + 1 + 2)
#define REC_FLAGS_AT (4 + 8 + 8 + SM_HASH_LEN + 4)
#define REC_FAILED 1
#define RD_BUF (16u << 10)

int sync_pend_cmp(const void *a, const void *b)
{
	const struct sync_pending *x = a, *y = b;

	if (!x->path || !y->path)
		return !x->path - !y->path;
	int c = strcmp(x->path, y->path);
	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static size_t names_len(const struct sync_pending *p)
{
	size_t a = strlen(p->path) + 1;
	return a + strlen(p->path + a) + 1;
}

/* The records in memory, sorted, as a run at the end of the spill file
 * (s->mu held). On any failure nothing is spilled from then on: the
 * records stay in memory, as they did before runs. */
static void spill(struct sync_session *s)
{
	struct strbuf b = STRBUF_INIT;

	if (s->spillfd < 0) {
		s->spillfd = openat(s->statefd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (s->spillfd < 0) {
			s->spill_off = 1;
			return;
		}
		/* The writeback thread holds no record across its unlock (it
		 * copies their names); past this many files COMMIT makes them
		 * durable with syncfs, so it can stop. */
		s->wb_stop = 1;
		if (s->wb_on)
			pthread_cond_signal(&s->wb_cv);
	}
	qsort(s->pend, s->npend, sizeof(*s->pend), sync_pend_cmp);
	for (size_t i = 0; i < s->npend; i++) {
		const struct sync_pending *p = &s->pend[i];
		size_t n = names_len(p);
		put_u32(&b, p->seq);
		put_u64(&b, p->size);
		put_u64(&b, (uint64_t)p->mtime_ns);
		sb_add(&b, p->hash, SM_HASH_LEN);
		put_u32(&b, p->mode);
		put_u8(&b, 0);
		put_u16(&b, (uint16_t)n);
		sb_add(&b, p->path, n);
	}
	if (pwrite_full(s->spillfd, b.buf, b.len, s->spill_end) < 0) {
		s->spill_off = 1;
		sb_release(&b);
		return;
	}
	s->runs = xrealloc(s->runs, (s->nruns + 2) * sizeof(*s->runs));
	s->runs[s->nruns++] = s->spill_end;
	s->spill_end += b.len;
	s->runs[s->nruns] = s->spill_end;
	for (size_t i = 0; i < s->npend; i++)
		free(s->pend[i].path);
	s->npend = 0;
	sb_release(&b);
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
	p->seq = s->pend_seq++;
	if (s->on_disk && !s->spill_off && s->npend >= SYNC_PEND_RUN && s->statefd >= 0)
		spill(s);
	else
		sync_wb_kick(s);
	pthread_mutex_unlock(&s->mu);
}

/* A run read a record at a time. */
struct pend_rd {
	int fd;
	uint64_t off, end;      /* the next byte to read; the run's end */
	char *buf;
	size_t len, pos, alloc; /* buf[pos, len) unread */
	uint64_t buf_off;       /* where buf[0] is in the file */
	struct sync_pending cur; /* its names in buf, until the next read */
	uint64_t cur_off;
	int failed;             /* cur is marked failed */
};

/* At least need bytes unread, or all the run has left. -1: a read error. */
static int rd_fill(struct pend_rd *r, size_t need)
{
	if (r->len - r->pos >= need || r->off >= r->end)
		return 0;
	memmove(r->buf, r->buf + r->pos, r->len - r->pos);
	r->buf_off += r->pos;
	r->len -= r->pos;
	r->pos = 0;
	if (need > r->alloc) {
		r->alloc = need;
		r->buf = xrealloc(r->buf, r->alloc);
	}
	while (r->len < r->alloc && r->off < r->end) {
		size_t want = r->alloc - r->len;
		if (want > r->end - r->off)
			want = (size_t)(r->end - r->off);
		ssize_t got = pread(r->fd, r->buf + r->len, want, (off_t)r->off);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		r->len += (size_t)got;
		r->off += (uint64_t)got;
	}
	return 0;
}

static void rd_open(struct pend_rd *r, int fd, uint64_t start, uint64_t end)
{
	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->off = r->buf_off = start;
	r->end = end;
	r->alloc = RD_BUF;
	r->buf = xmalloc(r->alloc);
}

/* The next record into r->cur: 1, 0 at the run's end, -1 on an error. */
static int rd_next(struct pend_rd *r)
{
	struct gr_rd rd;

	if (rd_fill(r, REC_HEAD) < 0)
		return -1;
	if (r->len == r->pos)
		return 0;
	if (r->len - r->pos < REC_HEAD)
		return -1;
	rd_init(&rd, r->buf + r->pos, REC_HEAD);
	r->cur.seq = get_u32(&rd);
	r->cur.size = get_u64(&rd);
	r->cur.mtime_ns = (int64_t)get_u64(&rd);
	memcpy(r->cur.hash, rd.p, SM_HASH_LEN);
	rd.p += SM_HASH_LEN;
	rd.n -= SM_HASH_LEN;
	r->cur.mode = get_u32(&rd);
	r->failed = get_u8(&rd) & REC_FAILED;
	size_t n = get_u16(&rd);
	if (rd.bad || n < 4)
		return -1;
	if (rd_fill(r, REC_HEAD + n) < 0 || r->len - r->pos < REC_HEAD + n)
		return -1;
	char *names = r->buf + r->pos + REC_HEAD;
	if (names[n - 1] || !memchr(names, '\0', n - 1))
		return -1;
	r->cur.path = names;
	r->cur_off = r->buf_off + r->pos;
	r->pos += REC_HEAD + n;
	return 1;
}

static void rd_close(struct pend_rd *r)
{
	free(r->buf);
	r->buf = NULL;
}

int sync_pend_each(struct sync_session *s, int (*each)(void *arg, struct sync_pending *p),
		   void *arg)
{
	int rc = 0;

	for (size_t k = 0; k < s->nruns && !rc; k++) {
		struct pend_rd r;
		int got;
		rd_open(&r, s->spillfd, s->runs[k], s->runs[k + 1]);
		while ((got = rd_next(&r)) > 0) {
			if (r.failed || !each(arg, &r.cur))
				continue;
			uint8_t f = REC_FAILED; /* not put in place */
			if (pwrite_full(s->spillfd, &f, 1, r.cur_off + REC_FLAGS_AT) < 0) {
				rc = -1;
				break;
			}
		}
		if (got < 0)
			rc = -1;
		rd_close(&r);
	}
	for (size_t i = 0; i < s->npend; i++) {
		struct sync_pending *p = &s->pend[i];
		if (p->path && each(arg, p)) {
			free(p->path);
			p->path = NULL;
		}
	}
	return rc;
}

/* The merge: a source per run, and one for the records in memory. */
struct pend_merge {
	struct sync_session *s;
	struct pend_rd *rd;   /* one per run */
	size_t nrd, mem;      /* mem: the next record in memory */
	size_t *heap, nheap;  /* sources by their current record; nrd = memory */
	int bad;
};

static const struct sync_pending *src_cur(struct pend_merge *m, size_t i)
{
	return i == m->nrd ? &m->s->pend[m->mem] : &m->rd[i].cur;
}

static int src_less(struct pend_merge *m, size_t a, size_t b)
{
	return sync_pend_cmp(src_cur(m, a), src_cur(m, b)) < 0;
}

static void sift_down(struct pend_merge *m, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, min = i;
		if (l < m->nheap && src_less(m, m->heap[l], m->heap[min]))
			min = l;
		if (r < m->nheap && src_less(m, m->heap[r], m->heap[min]))
			min = r;
		if (min == i)
			return;
		size_t t = m->heap[i];
		m->heap[i] = m->heap[min];
		m->heap[min] = t;
		i = min;
	}
}

/* Advance source i past its current record (and past failed ones): 1 if
 * it has another. */
static int src_advance(struct pend_merge *m, size_t i, int first)
{
	if (i == m->nrd) {
		if (!first)
			m->mem++;
		while (m->mem < m->s->npend && !m->s->pend[m->mem].path)
			m->mem++;
		return m->mem < m->s->npend;
	}
	for (;;) {
		int got = rd_next(&m->rd[i]);
		if (got < 0)
			m->bad = 1;
		if (got <= 0)
			return 0;
		if (!m->rd[i].failed)
			return 1;
	}
}

struct pend_merge *sync_pend_merge_start(struct sync_session *s)
{
	struct pend_merge *m = xcalloc(1, sizeof(*m));

	m->s = s;
	if (s->npend > 1)
		qsort(s->pend, s->npend, sizeof(*s->pend), sync_pend_cmp);
	m->nrd = s->nruns;
	m->rd = xcalloc(m->nrd ? m->nrd : 1, sizeof(*m->rd));
	m->heap = xcalloc(m->nrd + 1, sizeof(*m->heap));
	for (size_t i = 0; i <= m->nrd; i++) {
		if (i < m->nrd)
			rd_open(&m->rd[i], s->spillfd, s->runs[i], s->runs[i + 1]);
		if (src_advance(m, i, 1))
			m->heap[m->nheap++] = i;
	}
	for (size_t i = m->nheap / 2; i-- > 0;)
		sift_down(m, i);
	return m;
}

const struct sync_pending *sync_pend_peek(struct pend_merge *m)
{
	return m && m->nheap ? src_cur(m, m->heap[0]) : NULL;
}

void sync_pend_pop(struct pend_merge *m)
{
	if (!m || !m->nheap)
		return;
	if (!src_advance(m, m->heap[0], 0))
		m->heap[0] = m->heap[--m->nheap];
	sift_down(m, 0);
}

int sync_pend_merge_failed(const struct pend_merge *m)
{
	return m->bad;
}

int sync_pend_merge_end(struct pend_merge *m)
{
	int rc = m->bad ? -1 : 0;

	for (size_t i = 0; i < m->nrd; i++)
		rd_close(&m->rd[i]);
	free(m->rd);
	free(m->heap);
	free(m);
	return rc;
}

static int forget(void *arg, struct sync_pending *p)
{
	struct sync_session *s = arg;
	const char *base;
	/* one in place is in a staged folder, which goes whole */
	int dfd = sync_pending_in_place(p) ? -1 : sfs_parent(&s->dir, p->path, &base);

	if (dfd >= 0)
		unlinkat(dfd, sync_pending_tmp(p), 0);
	return 0;
}

void sync_pend_drop(struct sync_session *s, int unlink_tmps)
{
	if (unlink_tmps)
		sync_pend_each(s, forget, s);
	for (size_t i = 0; i < s->npend; i++)
		free(s->pend[i].path);
	free(s->pend);
	s->pend = NULL;
	s->npend = s->apend = 0;
	if (s->spillfd >= 0)
		close(s->spillfd);
	s->spillfd = -1;
	free(s->runs);
	s->runs = NULL;
	s->nruns = 0;
	s->spill_end = 0;
}
