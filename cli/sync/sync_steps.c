/* The steps of a sync around the transfer (see sync_steps.h). What they
 * have to tell the user goes through the caller's struct sync_show. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync_index.h"
#include "sync_proto.h"
#include "sync_steps.h"
#include "term.h"

enum { CHANGE_UPDATED = 1, CHANGE_MISSING = 2 };

void host_state_release(struct host_state *h)
{
	free(h->root);
	sm_list_free(&h->changed);
	sv_clear(&h->missing);
	sm_list_free(&h->manifest);
	sv_clear(&h->warnings);
}

char *sync_tame(const char *msg)
{
	char *m = xstrdup(msg);

	for (unsigned char *c = (unsigned char *)m; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			*c = '?';
	return m;
}

void parse_state_head(struct gr_rd *rd, struct host_state *h)
{
	size_t n = 0;

	h->flags = get_u32(rd);
	const uint8_t *d = get_bytes(rd, &n);
	if (!d || n != SM_HASH_LEN)
		rd->bad = 1;
	else
		memcpy(h->digest, d, SM_HASH_LEN);
	h->root = get_str(rd);
	h->free = get_u64(rd);
	for (uint32_t i = 0, k = get_u32(rd); i < k && !rd->bad; i++) {
		uint8_t kind = get_u8(rd);
		if (kind == CHANGE_UPDATED) {
			sm_get_entry(rd, &h->changed, 0);
		} else if (kind == CHANGE_MISSING) {
			char *q = get_str(rd);
			if (q && sm_path_ok(q))
				sv_push(&h->missing, q);
			else
				rd->bad = 1;
			free(q);
		} else {
			rd->bad = 1;
		}
	}
}

int parse_state(const uint8_t *p, size_t len, struct host_state *h, struct gr_err *err)
{
	struct gr_rd rd;
	size_t n = 0;

	rd_init(&rd, p, len);
	parse_state_head(&rd, h);
	const uint8_t *z = get_bytes(&rd, &n);
	if (!rd.bad && (h->flags & SYNC_STATE_HAS_MANIFEST) && !h->manifest_apart &&
	    sm_decode_z(z, n, &h->manifest, err) < 0)
		return GR_EPROTO;
	for (uint32_t i = 0, k = get_u32(&rd); i < k && !rd.bad; i++) {
		char *w = get_str(&rd), *t = w ? sync_tame(w) : NULL;
		if (t)
			sv_push(&h->warnings, t);
		free(w);
		free(t);
	}
	sm_sort(&h->changed);
	return rd_done(&rd, err, "SYNC_STATE");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int in_sorted(const struct strvec *v, const char *p)
{
	return v->n && bsearch(&p, v->v, v->n, sizeof(*v->v), cmp_str) != NULL;
}

/* The paths whose subtree is gone from the host: folders gone, or now a
 * file or a symlink (the agent does not list what was below them). */
static void dead_folders(const struct host_state *h, struct strvec *dead)
{
	for (size_t i = 0; i < h->missing.n; i++)
		sv_push(dead, h->missing.v[i]);
	for (size_t i = 0; i < h->changed.n; i++)
		if (h->changed.e[i].type != SM_DIR)
			sv_push(dead, h->changed.e[i].path);
	if (dead->n > 1)
		qsort(dead->v, dead->n, sizeof(*dead->v), cmp_str);
}

/* Is path's first n bytes (a folder above it) in v, sorted? */
static int in_sorted_n(const struct strvec *v, const char *path, size_t n)
{
	size_t lo = 0, hi = v->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *e = v->v[mid];
		int c = strncmp(e, path, n);
		if (!c && e[n])
			c = 1;
		if (!c)
			return 1;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

/* Is a folder above path in dead? (Asked of each entry of the state
 * while the host's changes are applied: no copy of the path.) */
static int under_dead(const struct strvec *dead, const char *path)
{
	for (size_t n = dead->n ? strlen(path) : 0; n-- > 0;)
		if (path[n] == '/' && in_sorted_n(dead, path, n))
			return 1;
	return 0;
}

void host_gone_init(struct host_gone *g, const struct host_state *h)
{
	*g = (struct host_gone){ STRVEC_INIT, STRVEC_INIT };
	for (size_t i = 0; i < h->missing.n; i++)
		sv_push(&g->missing, h->missing.v[i]);
	if (g->missing.n > 1)
		qsort(g->missing.v, g->missing.n, sizeof(*g->missing.v), cmp_str);
	dead_folders(h, &g->dead);
}

int host_gone(void *arg, const char *path)
{
	const struct host_gone *g = arg;

	return in_sorted(&g->missing, path) || under_dead(&g->dead, path);
}

void host_gone_release(struct host_gone *g)
{
	sv_clear(&g->missing);
	sv_clear(&g->dead);
}

static void copy_entry(struct sm_list *to, const struct sm_entry *e)
{
	struct sm_entry *c = sm_add(to, e->path, e->type);
	char *p = c->path;
	*c = *e;
	c->path = p;
	c->flags &= (uint8_t)~SM_F_POOLED;
	c->link = e->link ? xstrdup(e->link) : NULL;
}

/* What the host holds: the manifest it sent, or the one we committed
 * last with the changes it found applied. Checked against its digest. */
int host_view(struct host_state *h, struct sm_list *known, struct sm_list *view,
	      struct gr_err *err)
{
	uint8_t d[SM_HASH_LEN];
	const struct sm_list *base = (h->flags & SYNC_STATE_HAS_MANIFEST) ? &h->manifest : known;
	struct host_gone g;

	host_gone_init(&g, h);
	for (size_t i = 0; i < base->n; i++) {
		const struct sm_entry *e = &base->e[i];
		/* A manifest sent whole has the changes in it already. */
		if (base == known && (sm_find(&h->changed, e->path) || host_gone(&g, e->path)))
			continue;
		copy_entry(view, e);
	}
	if (!(h->flags & SYNC_STATE_HAS_MANIFEST))
		for (size_t i = 0; i < h->changed.n; i++)
			copy_entry(view, &h->changed.e[i]);
	host_gone_release(&g);
	sm_sort(view);
	sm_digest(view, d);
	if (memcmp(d, h->digest, SM_HASH_LEN))
		return gr_errf(err, GR_EPROTO,
			       "the host's sync manifest does not match what gpurun last sent");
	return 0;
}

static const char *type_name(uint8_t type)
{
	return type == SM_DIR ? "a folder" : type == SM_LINK ? "a symlink" : "a file";
}

#define CHANGES_SHOWN 20

/* Say which files someone changed on the host, where we undo it: once
 * for a folder, not for each file it held, and the first CHANGES_SHOWN
 * only (then how many more). */
void sync_say(const struct sync_show *sh, void *arg, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (msg)
		sh->say(arg, msg);
	free(msg);
}

void warn_host_changes(const struct host_state *h, const struct sm_list *local,
		       const struct sync_show *sh, void *arg)
{
	struct strvec dead = STRVEC_INIT;
	size_t said = 0;

	dead_folders(h, &dead);
	for (size_t i = 0; i < h->changed.n; i++) {
		const struct sm_entry *e = &h->changed.e[i], *l = sm_find(local, e->path);
		if ((l && sm_same(l, e)) || under_dead(&dead, e->path) || ++said > CHANGES_SHOWN)
			continue;
		char *q = sync_quote(e->path);
		if (!l)
			sync_say(sh, arg, "%s changed on the host since the last sync; "
				 "deleting it", q);
		else if (l->type != e->type)
			sync_say(sh, arg, "%s changed on the host since the last sync (it is "
				 "%s there now); replacing it with %s", q, type_name(e->type),
				 type_name(l->type));
		else
			sync_say(sh, arg, "%s changed on the host since the last sync; "
				 "overwriting", q);
		free(q);
	}
	for (size_t i = 0; i < h->missing.n; i++) {
		if (!sm_find(local, h->missing.v[i]) || under_dead(&dead, h->missing.v[i]) ||
		    ++said > CHANGES_SHOWN)
			continue;
		char *q = sync_quote(h->missing.v[i]);
		sync_say(sh, arg, "%s was deleted on the host since the last sync; "
			 "sending it again", q);
		free(q);
	}
	if (said > CHANGES_SHOWN)
		sync_say(sh, arg, "(and %zu more changed on the host; all are undone)",
			 said - CHANGES_SHOWN);
	for (size_t i = 0; i < h->warnings.n; i++)
		sync_say(sh, arg, "%s", ts(h->warnings.v[i]));
	sv_clear(&dead);
}


/* (connect thread) The offered request, if any, goes with the command. */
static void take_offer(void *arg, struct gr_conn *c, struct strbuf *frames)
{
	struct connect_job *j = arg;

	pthread_mutex_lock(&j->mu);
	if (j->first_type)
		proto_frame_append(frames, j->first_type, 0, conn_next_id(c), j->first.buf,
				   j->first.len);
	j->first_type = 0;
	if (j->offer_type) {
		j->offer_id = conn_next_id(c);
		proto_frame_append(frames, j->offer_type, 0, j->offer_id, j->offer.buf,
				   j->offer.len);
	}
	j->offer_type = 0; /* too late for one now */
	j->offer.len = 0;
	pthread_mutex_unlock(&j->mu);
}

static void *connect_main(void *arg)
{
	struct connect_job *j = arg;
	struct conn_opts o;

	ctx_conn_opts(j->ctx, &o);
	o.early = take_offer;
	o.early_arg = j;

	j->rc = conn_open(&j->conn, j->ctx->cfg, &o, &j->err);
	pthread_mutex_lock(&j->mu);
	j->offer_type = 0;
	pthread_mutex_unlock(&j->mu);
	return NULL;
}

void connect_first(struct connect_job *j, uint16_t type, const void *payload, size_t n)
{
	j->first_type = type;
	sb_reset(&j->first);
	sb_add(&j->first, payload, n);
}

void connect_start(struct connect_job *j, struct gr_ctx *ctx)
{
	j->ctx = ctx;
	pthread_mutex_init(&j->mu, NULL);
	if (!ctx->conn && pthread_create(&j->th, NULL, connect_main, j) == 0)
		j->started = 1;
	if (!j->started) { /* no bootstrap command for it to go in */
		j->first_type = 0;
		sb_release(&j->first);
	}
}

void connect_offer(struct connect_job *j, uint16_t type, const void *payload, size_t n)
{
	if (!j->started)
		return;
	pthread_mutex_lock(&j->mu);
	if (!j->offer_id) {
		j->offer_type = type;
		sb_reset(&j->offer);
		sb_add(&j->offer, payload, n);
	}
	pthread_mutex_unlock(&j->mu);
}

static void connect_done(struct connect_job *j)
{
	pthread_join(j->th, NULL);
	j->started = 0;
	sb_release(&j->offer);
	sb_release(&j->first);
	pthread_mutex_destroy(&j->mu);
}

void connect_abandon(struct connect_job *j)
{
	if (!j->started)
		return;
	connect_done(j);
	if (j->rc == 0)
		j->ctx->conn = j->conn;
}

int connect_finish(struct connect_job *j)
{
	if (!j->started)
		return ctx_connect(j->ctx);
	connect_done(j);
	if (j->rc < 0) {
		j->ctx->err = j->err;
		return j->rc;
	}
	j->ctx->conn = j->conn;
	return 0;
}

/* Must e's content be compared with r, the host's entry at its path?
 * The same size there, or large (a delta needs the block hashes). The
 * rest is new or resized: it is hashed while it is sent. */
static int must_compare(const struct gr_config *cfg, const struct sm_entry *e,
			const struct sm_entry *r)
{
	return r && r->type == SM_FILE && (r->size == e->size || e->size >= cfg->sync.delta_min);
}

void sync_hash_mark(const struct gr_config *cfg, struct sm_entry *e, const struct sm_entry *r)
{
	if ((e->flags & SM_F_UNHASHED) && must_compare(cfg, e, r))
		e->flags |= SM_F_COMPARE;
}

int resolve_hashes(const struct gr_config *cfg, struct sync_tree *tree, struct sm_list *local,
		   const struct sm_list *view, struct sync_hash_stats *hs, struct gr_err *err)
{
	for (size_t i = 0; i < local->n; i++) {
		struct sm_entry *e = &local->e[i];
		int marked = e->flags & SM_F_COMPARE;
		e->flags &= (uint8_t)~SM_F_COMPARE;
		if (!(e->flags & SM_F_UNHASHED))
			continue;
		if (view ? !must_compare(cfg, e, sm_find(view, e->path)) : !marked)
			continue;
		int big = e->size >= cfg->sync.delta_min;
		if (big) { /* (hashed before in this sync: a second exchange) */
			free(e->leaves);
			e->leaves = NULL;
		}
		int rc = sync_hash_entry(tree, cfg->root, e, big ? &e->leaves : NULL, hs, err);
		if (rc == GR_ENOTFOUND || rc == GR_ECONFLICT) { /* the send says so */
			gr_err_clear(err);
			continue;
		}
		if (rc < 0) {
			gr_hintf(err, "make it readable, or add it to .gpurunignore");
			return rc;
		}
	}
	return 0;
}
