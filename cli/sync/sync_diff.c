/* A walk read against the last committed state (sync_diff.h): the scan,
 * the index and remote-KEY in step, keeping only where local differs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync_diff.h"
#include "sync_index_rd.h"
#include "sync_plan.h"

/* sync_scan_diff's walk: the scan, the index and the state read in step. */
struct diff_run {
	struct sync_scan_diff *d;
	struct idx_rd ir;
	struct sm_reader kr;
	const struct sm_entry *k; /* the state's next entry, d->nstate'th (NULL: no more) */
	struct sm_digest dg;
	int (*ignored)(void *arg, const char *path, int is_dir);
	int (*rehash)(void *arg, struct sm_entry *m);
	void *arg;
	struct strbuf prev;       /* the path scanned last */
};

#define DIFF_STOP (-1000) /* each's: give up, scan again whole */

/* The state's entry r->k is used: on to the next. */
static void dr_next(struct diff_run *r)
{
	sm_digest_add(&r->dg, r->k);
	r->d->nstate++;
	r->k = sm_reader_next(&r->kr);
}

static void dr_same(struct diff_run *r)
{
	struct sync_scan_diff *d = r->d;
	size_t i = d->nstate;

	if (i / 8 >= d->asame) {
		size_t a = d->asame ? 2 * d->asame : 4096;
		d->same = xrealloc(d->same, a);
		memset(d->same + d->asame, 0, a - d->asame);
		d->asame = a;
	}
	d->same[i / 8] |= (uint8_t)(1u << (i % 8));
}

static int dr_each(void *arg, const struct scan_entry *s)
{
	struct diff_run *r = arg;
	struct sync_scan_diff *d = r->d;
	struct sm_entry m;

	if (!lm_describe(s, &m))
		return 0;
	if (r->prev.len && strcmp(r->prev.buf, s->path) >= 0)
		return DIFF_STOP; /* (scan_tree_each promises path order) */
	sb_reset(&r->prev);
	sb_adds(&r->prev, s->path);
	d->entries++;
	/* What the state holds before this path, local lacks: kept on the
	 * host if it is ignored here (as run_keep_ignored keeps it), else it
	 * goes (asked only until the first: that one settles it). */
	while (r->k && strcmp(r->k->path, s->path) < 0) {
		if (!d->lacking && !r->ignored(r->arg, r->k->path, r->k->type == SM_DIR))
			d->lacking = 1;
		dr_next(r);
	}
	if (r->kr.rc)
		return DIFF_STOP;
	int hashed = 0, rehashed = 0, at = r->k && !strcmp(r->k->path, s->path);
	if (m.type == SM_FILE) {
		const struct idx_entry *c = idx_seek(&r->ir, s->path);
		if (r->ir.bad)
			return DIFF_STOP;
		int stat_same = idx_stat_same(c, &m);
		if (stat_same && c->mtime_ns < r->ir.scan_ns - RACY_NS) {
			memcpy(m.hash, c->hash, SM_HASH_LEN);
			hashed = 1;
		} else if (stat_same && at && r->rehash && r->k->type == SM_FILE &&
			   r->k->size == m.size && r->k->mtime_ns == m.mtime_ns &&
			   !memcmp(r->k->hash, c->hash, SM_HASH_LEN)) {
			/* Changed too close to the last scan for its hash to be
			 * trusted: hashed now (the plan would compare it the
			 * same way), kept if it is not what the index says. */
			m.flags = SM_F_UNHASHED;
			if (r->rehash(r->arg, &m) == 0 && !memcmp(m.hash, c->hash, SM_HASH_LEN)) {
				hashed = rehashed = 1;
				d->rehashed++;
			}
		}
	}
	if (at && (m.type != SM_FILE || hashed) && sm_same(&m, r->k)) {
		dr_same(r);
		if (m.type == SM_FILE) {
			d->cached += !rehashed;
			if (!d->devs || d->dev != s->dev)
				d->devs++;
			d->dev = s->dev;
		}
		dr_next(r);
		return 0;
	}
	/* Kept: as lm_add and lm_finish make it. */
	struct sm_entry *e = lm_keep(&d->kept, &m);
	if (m.type == SM_FILE) {
		if (hashed) {
			memcpy(e->hash, m.hash, SM_HASH_LEN);
			d->cached += !rehashed;
		} else {
			e->flags |= SM_F_UNHASHED;
		}
	}
	if (at) /* (replaced by this one) */
		dr_next(r);
	return 0;
}

int sync_scan_diff(const char *root, const struct scan_opts *so, struct sync_index *idx,
		   int state_fd, int (*ignored)(void *arg, const char *path, int is_dir),
		   int (*rehash)(void *arg, struct sm_entry *m), void *arg,
		   struct sync_scan_diff *d, struct gr_err *err)
{
	struct diff_run r = { .d = d, .ignored = ignored, .rehash = rehash, .arg = arg };
	int rc;

	memset(d, 0, sizeof(*d));
	d->start_ns = wall_ns();
	if (lseek(state_fd, 0, SEEK_SET) != 0 ||
	    sm_reader_open(&r.kr, state_fd, 0, NULL, NULL) < 0) {
		sm_reader_close(&r.kr);
		d->redo = 1;
		return 0;
	}
	idx_open(&r.ir, idx->path);
	sm_digest_init(&r.dg);
	r.k = sm_reader_next(&r.kr);
	rc = scan_tree_each(root, so, dr_each, &r, err);
	idx->scan_ns = wall_ns();
	if (rc == DIFF_STOP) {
		rc = 0;
		d->redo = 1;
	}
	while (rc == 0 && !d->redo && r.k) {
		if (!d->lacking && !ignored(arg, r.k->path, r.k->type == SM_DIR))
			d->lacking = 1;
		dr_next(&r);
	}
	/* All of a damaged index is ignored, the part after the last file
	 * scanned too (as lm_finish): then scan again whole. */
	while (rc == 0 && !d->redo && idx_next(&r.ir))
		;
	if (r.ir.bad || r.kr.rc)
		d->redo = 1;
	sm_digest_final(&r.dg, d->digest);
	idx_close(&r.ir);
	sm_reader_close(&r.kr);
	sb_release(&r.prev);
	if (rc < 0 || d->redo) {
		sync_diff_free(d);
		d->redo = rc == 0;
	}
	return rc;
}

/* sync_spool_diff's: the spool's entries read against the host's
 * manifest, the new index written as they go. */
struct spool_diff {
	struct diff_run r;         /* (its index reader unused: the spool has the hashes) */
	struct idx_wr *w;
	int (*each)(void *src, void (*fn)(void *arg, const struct sm_entry *e), void *arg);
	void *src;
	void (*seen)(void *arg, const struct sm_entry *m);
	struct strbuf last;        /* the host's path read last */
	int stop;
};

/* On to the host's next entry, which must come after the one before. */
static void sd_next(struct spool_diff *s)
{
	dr_next(&s->r);
	if (!s->r.k)
		return;
	if (s->last.len && strcmp(s->last.buf, s->r.k->path) >= 0)
		s->stop = 1; /* (the host's manifest out of order) */
	sb_reset(&s->last);
	sb_adds(&s->last, s->r.k->path);
}

static void sd_entry(void *arg, const struct sm_entry *e)
{
	struct spool_diff *s = arg;
	struct diff_run *r = &s->r;
	struct sync_scan_diff *d = r->d;
	struct sm_entry m = *e;

	if (s->stop)
		return;
	if (r->prev.len && strcmp(r->prev.buf, m.path) >= 0) {
		s->stop = 1; /* (the spool is in path order) */
		return;
	}
	sb_reset(&r->prev);
	sb_adds(&r->prev, m.path);
	d->entries++;
	while (r->k && strcmp(r->k->path, m.path) < 0 && !s->stop) {
		if (!d->lacking && !r->ignored(r->arg, r->k->path, r->k->type == SM_DIR))
			d->lacking = 1;
		sd_next(s);
	}
	if (r->kr.rc || s->stop) {
		s->stop = 1;
		return;
	}
	int at = r->k && !strcmp(r->k->path, m.path);
	int hashed = m.type == SM_FILE && !(m.flags & SM_F_UNHASHED);
	if (m.type == SM_FILE && !hashed && at && r->rehash && r->k->type == SM_FILE &&
	    r->k->size == m.size && r->rehash(r->arg, &m) == 0) {
		/* The host may hold it as it is: hashed now (the plan would
		 * compare it the same way), and the index keeps the hash. */
		hashed = 1;
		d->rehashed++;
	}
	if (hashed)
		idx_wr_add_local(s->w, &m);
	if (s->seen)
		s->seen(r->arg, &m);
	if (at && (m.type != SM_FILE || hashed) && sm_same(&m, r->k)) {
		dr_same(r);
		if (m.type == SM_FILE) {
			if (!d->devs || d->dev != m.dev)
				d->devs++;
			d->dev = m.dev;
		}
		sd_next(s);
		return;
	}
	struct sm_entry *k = lm_keep(&d->kept, &m);
	if (m.type == SM_FILE) {
		memcpy(k->hash, m.hash, SM_HASH_LEN);
		k->flags |= hashed ? 0 : SM_F_UNHASHED;
	}
	if (at)
		sd_next(s);
}

static void spool_diff_fill(void *arg, struct idx_wr *w)
{
	struct spool_diff *s = arg;

	s->w = w;
	if (s->each(s->src, sd_entry, s) < 0)
		s->stop = 1;
	while (!s->stop && s->r.k) {
		if (!s->r.d->lacking &&
		    !s->r.ignored(s->r.arg, s->r.k->path, s->r.k->type == SM_DIR))
			s->r.d->lacking = 1;
		sd_next(s);
	}
	if (s->stop || s->r.kr.rc)
		w->failed = w->failed ? w->failed : EIO; /* (the old index stays) */
}

int sync_spool_diff(int (*each)(void *src, void (*fn)(void *arg, const struct sm_entry *e),
				void *arg),
		    void *src, const char *root, struct sync_index *idx, int state_fd,
		    int (*ignored)(void *arg, const char *path, int is_dir),
		    int (*rehash)(void *arg, struct sm_entry *m),
		    void (*seen)(void *arg, const struct sm_entry *m), void *arg,
		    struct sync_scan_diff *d)
{
	struct spool_diff s = { .r = { .d = d, .ignored = ignored, .rehash = rehash, .arg = arg },
				.each = each, .src = src, .seen = seen };

	memset(d, 0, sizeof(*d));
	d->start_ns = wall_ns();
	if (lseek(state_fd, 0, SEEK_SET) != 0 ||
	    sm_reader_open(&s.r.kr, state_fd, 0, NULL, NULL) < 0) {
		sm_reader_close(&s.r.kr);
		d->redo = 1;
		return 1;
	}
	sm_digest_init(&s.r.dg);
	s.r.k = sm_reader_next(&s.r.kr);
	if (s.r.k)
		sb_adds(&s.last, s.r.k->path);
	/* (the index is written whole, or not at all: then redo) */
	int rc = 0;
	if (root) {
		rc = idx_save_with(root, idx, spool_diff_fill, &s, NULL);
	} else {
		struct idx_wr none = { .fd = -1, .failed = 1 }; /* (adds nothing) */
		spool_diff_fill(&s, &none);
	}
	if (rc < 0 || s.stop || s.r.kr.rc)
		d->redo = 1;
	sm_digest_final(&s.r.dg, d->digest);
	sm_reader_close(&s.r.kr);
	sb_release(&s.r.prev);
	sb_release(&s.last);
	if (d->redo) {
		sync_diff_free(d);
		d->redo = 1;
	}
	return d->redo;
}

int sync_diff_whole(struct sync_scan_diff *d, struct sync_index *idx, int state_fd,
		    struct sm_list *out, struct sm_list *differ, struct sync_hash_stats *hs,
		    struct gr_err *err)
{
	struct sm_list *kept = &d->kept;
	struct sm_reader kr;
	const struct sm_entry *k;
	struct idx_rd ir;
	size_t i = 0, j = 0;
	int changed = 0;

	sm_list_free(out);
	sm_list_free(differ);
	if (d->devs > 1) /* same files on more than one device: which is whose? */
		return 1;
	for (size_t x = 1; x < kept->n; x++)
		if (strcmp(kept->e[x - 1].path, kept->e[x].path) >= 0)
			return 1; /* (cannot be: dr_each keeps them in order) */
	if (lseek(state_fd, 0, SEEK_SET) != 0 || sm_reader_open(&kr, state_fd, 0, NULL, err) < 0) {
		sm_reader_close(&kr);
		return 1;
	}
	idx_open(&ir, idx->path);
	sm_reserve(out, d->entries + 16);
	for (;;) {
		/* the state's next entry local holds as it is */
		while ((k = sm_reader_next(&kr)) && !sync_diff_same(d, i)) {
			sm_add_copy(differ, k);
			i++;
		}
		while (j < kept->n && (!k || strcmp(kept->e[j].path, k->path) < 0)) {
			sm_reserve(out, 1);
			out->e[out->n++] = kept->e[j++]; /* (their paths: the pool moves below) */
		}
		if (!k)
			break;
		i++;
		struct sm_entry *e = sm_add_pooled(out, k->path, k->type);
		e->flags |= SM_F_SAME;
		e->link = k->link ? xstrdup(k->link) : NULL;
		if (k->type != SM_FILE)
			continue;
		e->mode = k->mode;
		e->size = k->size;
		e->mtime_ns = k->mtime_ns;
		memcpy(e->hash, k->hash, SM_HASH_LEN);
		const struct idx_entry *c = idx_seek(&ir, k->path);
		if (!idx_holds(c, k))
			changed = 1; /* (the index changed meanwhile) */
		else
			e->ino = c->ino;
		e->dev = d->dev;
	}
	idx_close(&ir);
	int rc = kr.rc;
	sm_reader_close(&kr);
	sm_pool_move(out, kept);
	kept->n = 0; /* (each moved to out) */
	sync_diff_free(d);
	if (rc < 0 || changed) {
		sm_list_free(out);
		sm_list_free(differ);
		return 1;
	}
	if (hs)
		hs->files_cached += d->cached;
	lm_parents(out);
	return 0;
}

int sync_diff_partial(struct sync_scan_diff *d, int state_fd,
		      int (*ignored)(void *arg, const char *path, int is_dir), void *arg,
		      struct sm_list *local, struct sm_list *differ)
{
	struct sm_list *kept = &d->kept;
	struct sm_reader kr;
	const struct sm_entry *k;
	size_t i = 0, j = 0;

	sm_list_free(local);
	sm_list_free(differ);
	for (size_t x = 1; x < kept->n; x++)
		if (strcmp(kept->e[x - 1].path, kept->e[x].path) >= 0)
			return 1; /* (cannot be: dr_each keeps them in order) */
	if (lseek(state_fd, 0, SEEK_SET) != 0 || sm_reader_open(&kr, state_fd, 0, NULL, NULL) < 0) {
		sm_reader_close(&kr);
		return 1;
	}
	for (; (k = sm_reader_next(&kr)); i++) {
		if (sync_diff_same(d, i))
			continue;
		while (j < kept->n && strcmp(kept->e[j].path, k->path) < 0)
			j++;
		/* replaced here, or gone unless it is ignored here (then it
		 * stays on the host, as run_keep_ignored keeps it) */
		if ((j < kept->n && !strcmp(kept->e[j].path, k->path)) ||
		    !ignored(arg, k->path, k->type == SM_DIR))
			sm_add_copy(differ, k);
	}
	int rc = kr.rc;
	sm_reader_close(&kr);
	if (rc < 0 || i != d->nstate) {
		sm_list_free(differ);
		return 1;
	}
	*local = *kept;
	memset(kept, 0, sizeof(*kept));
	return 0;
}

enum { FROM_LOCAL, FROM_SAME, FROM_STATE };

/* The merge of sync_merged: fn(arg, e, from) for each entry, in order,
 * from saying whose it is (FROM_SAME: the state's, which local holds as
 * it is; FROM_STATE: the state's, which local lacks and the host keeps). */
static int merged_walk(const struct sync_merged *m,
		       void (*fn)(void *arg, const struct sm_entry *e, int from), void *arg)
{
	const struct sm_list *l = m->local, *dif = m->differ;
	struct sm_reader kr;
	const struct sm_entry *k;
	size_t n = 0, i = 0, j = 0;
	int rc = 0;

	if (lseek(m->state_fd, 0, SEEK_SET) != 0 ||
	    sm_reader_open(&kr, m->state_fd, 0, NULL, NULL) < 0) {
		sm_reader_close(&kr);
		return -1;
	}
	for (; (k = sm_reader_next(&kr)); n++) {
		while (i < l->n && strcmp(l->e[i].path, k->path) < 0)
			fn(arg, &l->e[i++], FROM_LOCAL);
		while (j < dif->n && strcmp(dif->e[j].path, k->path) < 0)
			j++;
		if (j < dif->n && !strcmp(dif->e[j].path, k->path))
			continue; /* replaced by local's, or gone */
		if (i < l->n && !strcmp(l->e[i].path, k->path)) {
			rc = -1; /* (cannot be: differ holds every path local replaced) */
			break;
		}
		fn(arg, k, sync_diff_same(m->d, n) ? FROM_SAME : FROM_STATE);
	}
	while (!rc && i < l->n)
		fn(arg, &l->e[i++], FROM_LOCAL);
	if (kr.rc < 0 || (!rc && n != m->d->nstate))
		rc = -1;
	sm_reader_close(&kr);
	return rc;
}

struct merged_fn {
	void (*fn)(void *arg, const struct sm_entry *e);
	void *arg;
};

static void merged_call(void *arg, const struct sm_entry *e, int from)
{
	struct merged_fn *f = arg;

	(void)from;
	f->fn(f->arg, e);
}

int sync_merged_each(void *m, void (*fn)(void *arg, const struct sm_entry *e), void *arg)
{
	struct merged_fn f = { fn, arg };

	return merged_walk(m, merged_call, &f);
}

static void merged_call_here(void *arg, const struct sm_entry *e, int from)
{
	struct merged_fn *f = arg;

	if (from != FROM_STATE)
		f->fn(f->arg, e);
}

int sync_merged_each_here(void *m, void (*fn)(void *arg, const struct sm_entry *e), void *arg)
{
	struct merged_fn f = { fn, arg };

	return merged_walk(m, merged_call_here, &f);
}

static void digest_add(void *arg, const struct sm_entry *e)
{
	sm_digest_add(arg, e);
}

int sync_merged_digest(const struct sync_merged *m, uint8_t out[SM_HASH_LEN])
{
	struct sm_digest dg;
	int rc;

	sm_digest_init(&dg);
	rc = sync_merged_each((void *)m, digest_add, &dg);
	sm_digest_final(&dg, out);
	if (rc < 0)
		memset(out, 0, SM_HASH_LEN);
	return rc;
}

/* sync_diff_save_index's: the old index read in step with the merge. */
struct index_merge {
	struct idx_rd ir;
	struct idx_wr *w;
};

static void index_entry(void *arg, const struct sm_entry *e, int from)
{
	struct index_merge *x = arg;

	if (from == FROM_LOCAL) {
		idx_wr_add_local(x->w, e);
	} else if (from == FROM_SAME && e->type == SM_FILE) {
		const struct idx_entry *c = idx_seek(&x->ir, e->path);
		if (idx_holds(c, e))
			idx_wr_add(x->w, e->path, c);
	}
}

struct index_save {
	const struct sync_merged *m;
	const char *old;
};

static void index_fill(void *arg, struct idx_wr *w)
{
	const struct index_save *a = arg;
	struct index_merge x = { .w = w };

	idx_open(&x.ir, a->old);
	if (merged_walk(a->m, index_entry, &x) < 0 || x.ir.bad)
		w->failed = 1; /* (the old index stays) */
	idx_close(&x.ir);
}

int sync_diff_save_index(const char *root, struct sync_index *idx, const struct sync_merged *m,
			 struct gr_err *err)
{
	struct index_save a = { m, idx->path };

	return idx_save_with(root, idx, index_fill, &a, err);
}

void sync_diff_free(struct sync_scan_diff *d)
{
	sm_list_free(&d->kept);
	free(d->same);
	d->same = NULL;
	d->asame = 0;
}

