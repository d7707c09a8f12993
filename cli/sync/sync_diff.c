/* A walk read against the last committed state (sync_diff.h): the scan,
 * the index and remote-KEY in step, keeping only where local differs. */
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
		while ((k = sm_reader_next(&kr)) && !(i / 8 < d->asame &&
						      (d->same[i / 8] >> (i % 8) & 1))) {
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
		if (!c || c->size != k->size || c->mtime_ns != k->mtime_ns ||
		    memcmp(c->hash, k->hash, SM_HASH_LEN))
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

void sync_diff_free(struct sync_scan_diff *d)
{
	sm_list_free(&d->kept);
	free(d->same);
	d->same = NULL;
	d->asame = 0;
}

