/* gpurun sync: scan the project as git sees it, hash what changed (stat
 * cache), ask the host for its state in one round trip (a manifest digest;
 * a no-op sync ends there), plan, transfer pipelined, commit. The pieces:
 * sync_index (local state), sync_plan, sync_xfer (+ sync_delta), and on
 * the host remote/agent_sync.c. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scan.h"
#include "sync.h"
#include "sync_index.h"
#include "sync_plan.h"
#include "sync_proto.h"
#include "sync_xfer.h"

enum { CHANGE_UPDATED = 1, CHANGE_MISSING = 2 };

struct host_state {
	uint32_t flags;
	uint8_t digest[SM_HASH_LEN];
	char *root;
	struct sm_list changed;   /* updated entries */
	struct strvec missing;    /* gone from the host */
	struct sm_list manifest;  /* when sent whole */
	struct strvec warnings;
};

static void host_state_release(struct host_state *h)
{
	free(h->root);
	sm_list_free(&h->changed);
	sv_clear(&h->missing);
	sm_list_free(&h->manifest);
	sv_clear(&h->warnings);
}

static int parse_state(const struct gr_frame *f, struct host_state *h, struct gr_err *err)
{
	struct gr_rd rd;
	size_t n = 0;

	rd_init(&rd, f->payload, f->len);
	h->flags = get_u32(&rd);
	const uint8_t *d = get_bytes(&rd, &n);
	if (!d || n != SM_HASH_LEN)
		rd.bad = 1;
	else
		memcpy(h->digest, d, SM_HASH_LEN);
	h->root = get_str(&rd);
	for (uint32_t i = 0, k = get_u32(&rd); i < k && !rd.bad; i++) {
		uint8_t kind = get_u8(&rd);
		if (kind == CHANGE_UPDATED) {
			sm_get_entry(&rd, &h->changed, 0);
		} else if (kind == CHANGE_MISSING) {
			char *p = get_str(&rd);
			if (p && sm_path_ok(p))
				sv_push(&h->missing, p);
			else
				rd.bad = 1;
			free(p);
		} else {
			rd.bad = 1;
		}
	}
	const uint8_t *z = get_bytes(&rd, &n);
	if (!rd.bad && (h->flags & SYNC_STATE_HAS_MANIFEST) &&
	    sm_decode_z(z, n, &h->manifest, err) < 0)
		return GR_EPROTO;
	for (uint32_t i = 0, k = get_u32(&rd); i < k && !rd.bad; i++) {
		char *w = get_str(&rd);
		if (w)
			sv_push(&h->warnings, w);
		free(w);
	}
	return rd_done(&rd, err, "SYNC_STATE");
}

/* What the host holds: the manifest it sent, or the one we committed
 * last with the changes it found applied. Checked against its digest. */
static int host_view(struct host_state *h, struct sm_list *known, struct sm_list *view,
		     struct gr_err *err)
{
	uint8_t d[SM_HASH_LEN];
	const struct sm_list *base = (h->flags & SYNC_STATE_HAS_MANIFEST) ? &h->manifest : known;

	for (size_t i = 0; i < base->n; i++) {
		const struct sm_entry *e = &base->e[i];
		int drop = sm_find(&h->changed, e->path) != NULL;
		for (size_t k = 0; k < h->missing.n && !drop; k++)
			drop = !strcmp(h->missing.v[k], e->path);
		if (drop)
			continue;
		struct sm_entry *c = sm_add(view, e->path, e->type);
		char *p = c->path;
		*c = *e;
		c->path = p;
		c->link = e->link ? xstrdup(e->link) : NULL;
	}
	if (!(h->flags & SYNC_STATE_HAS_MANIFEST))
		for (size_t i = 0; i < h->changed.n; i++) {
			const struct sm_entry *e = &h->changed.e[i];
			struct sm_entry *c = sm_add(view, e->path, e->type);
			char *p = c->path;
			*c = *e;
			c->path = p;
			c->link = e->link ? xstrdup(e->link) : NULL;
		}
	sm_sort(view);
	sm_digest(view, d);
	if (memcmp(d, h->digest, SM_HASH_LEN))
		return gr_errf(err, GR_EPROTO,
			       "the host's sync manifest does not match what gpurun last sent");
	return 0;
}

/* Say which files someone changed on the host, where we undo it. */
static void warn_host_changes(const struct host_state *h, const struct sm_list *local)
{
	for (size_t i = 0; i < h->changed.n; i++) {
		const struct sm_entry *e = &h->changed.e[i], *l = sm_find(local, e->path);
		if (l && sm_same(l, e))
			continue;
		char *q = sync_quote(e->path);
		fprintf(stderr, "gpurun: %s changed on the host since the last sync; %s\n", q,
			l ? "overwriting" : "deleting it");
		free(q);
	}
	for (size_t i = 0; i < h->missing.n; i++) {
		if (!sm_find(local, h->missing.v[i]))
			continue;
		char *q = sync_quote(h->missing.v[i]);
		fprintf(stderr, "gpurun: %s was deleted on the host since the last sync; "
			"sending it again\n", q);
		free(q);
	}
	for (size_t i = 0; i < h->warnings.n; i++)
		fprintf(stderr, "gpurun: %s\n", h->warnings.v[i]);
}

/* The connection is opened on a thread while the tree is scanned and
 * hashed here: an ssh handshake costs round trips, the scan costs disk. */
struct connect_job {
	struct gr_ctx *ctx;
	struct gr_conn *conn;
	struct gr_err err;
	int rc, started;
	pthread_t th;
};

static void *connect_main(void *arg)
{
	struct connect_job *j = arg;
	struct conn_opts o = { j->ctx->accept_new, j->ctx->verbose };

	j->rc = conn_open(&j->conn, j->ctx->cfg, &o, &j->err);
	return NULL;
}

static void connect_start(struct connect_job *j, struct gr_ctx *ctx)
{
	j->ctx = ctx;
	if (!ctx->conn && pthread_create(&j->th, NULL, connect_main, j) == 0)
		j->started = 1;
}

static int connect_finish(struct connect_job *j)
{
	if (!j->started)
		return ctx_connect(j->ctx);
	pthread_join(j->th, NULL);
	j->started = 0;
	if (j->rc < 0) {
		j->ctx->err = j->err;
		return j->rc;
	}
	j->ctx->conn = j->conn;
	return 0;
}

/* Hash the files whose content must be compared with the host's: the
 * same path and size there, or large (a delta needs the block hashes).
 * The rest is new or resized: it is hashed while it is sent. */
static int resolve_hashes(const struct gr_config *cfg, struct sm_list *local,
			  const struct sm_list *view, uint8_t **leaves,
			  struct sync_hash_stats *hs, struct gr_err *err)
{
	for (size_t i = 0; i < local->n; i++) {
		struct sm_entry *e = &local->e[i];
		if (!(e->flags & SM_F_UNHASHED))
			continue;
		const struct sm_entry *r = sm_find(view, e->path);
		int big = e->size >= cfg->sync.delta_min;
		if (!r || r->type != SM_FILE || (r->size != e->size && !big))
			continue;
		int rc = sync_hash_entry(cfg->root, e, big ? &leaves[i] : NULL, hs, err);
		if (rc == GR_ENOTFOUND) { /* gone: the send says so */
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

static int have_sig(void *arg, const uint8_t *hash)
{
	return sync_sig_have(arg, hash);
}

/* Above [sync] warn_size: show the total and the largest folders, and ask
 * (on a terminal) or refuse (elsewhere) unless --yes. */
static int size_check(struct gr_ctx *ctx, const struct sync_opts *o,
		      const struct sync_plan *p, const struct sm_list *local)
{
	uint64_t limit = ctx->cfg->sync.warn_size;
	struct sync_folder_size top[5];
	char a[32], b[32];

	if (o->yes || !limit || p->send_bytes <= limit)
		return 0;
	size_t n = sync_plan_largest(p, local, top, 5);
	fprintf(stderr, "gpurun: this sync sends %s, more than [sync] warn_size (%s); largest folders:\n",
		fmt_size(p->send_bytes, a, sizeof(a)), fmt_size(limit, b, sizeof(b)));
	for (size_t i = 0; i < n; i++) {
		char *q = sync_quote(top[i].name);
		fprintf(stderr, "  %10s  %s\n", fmt_size(top[i].bytes, a, sizeof(a)), q);
		free(q);
		free(top[i].name);
	}
	if (!ctx->interactive) {
		gr_errf(&ctx->err, GR_ECANCEL, "not sending %s without confirmation",
			fmt_size(p->send_bytes, a, sizeof(a)));
		gr_hintf(&ctx->err, "pass --yes to send it, or exclude the big folders in "
			 ".gpurunignore or [sync] exclude");
		return GR_ECANCEL;
	}
	fprintf(stderr, "Send it? [y/N] ");
	fflush(stderr);
	char ans[16] = "";
	if (!fgets(ans, sizeof(ans), stdin) || (ans[0] != 'y' && ans[0] != 'Y')) {
		gr_errf(&ctx->err, GR_ECANCEL, "sync cancelled");
		return GR_ECANCEL;
	}
	return 0;
}

static int open_session(struct gr_ctx *ctx, const struct sync_opts *o, int have_known,
			const uint8_t *known_digest, const uint8_t *local_digest,
			struct sync_wire *wire, uint32_t *sid, struct host_state *h)
{
	struct strbuf pl = STRBUF_INIT;
	struct gr_frame f;
	int rc;

	*sid = conn_next_id(ctx->conn);
	put_str(&pl, ctx->cfg->remote.path);
	put_u32(&pl, o->dry_run ? SYNC_OPEN_DRY_RUN : 0);
	put_bytes(&pl, known_digest, have_known ? SM_HASH_LEN : 0);
	put_bytes(&pl, local_digest, SM_HASH_LEN);
	conn_send(ctx->conn, SYNC_MSG_OPEN, 0, *sid, pl.buf, pl.len);
	wire->out += GR_FRAME_HDR + pl.len;
	sb_release(&pl);
	do {
		if ((rc = conn_recv(ctx->conn, &f, -1, &ctx->err)) < 0)
			return rc;
	} while (f.id != *sid);
	wire->in += GR_FRAME_HDR + f.len;
	if (f.type == GR_MSG_ERROR) {
		rc = conn_error_from_frame(&f, &ctx->err);
		if (rc == GR_EINVAL) { /* the agent refused the folder */
			gr_hintf(&ctx->err, "set [remote] path to a project folder");
			ctx->err.code = rc = GR_ECONFIG;
		}
		return rc;
	}
	if (f.type != SYNC_MSG_STATE)
		return gr_errf(&ctx->err, GR_EPROTO, "protocol error: expected SYNC_STATE, got %s",
			       proto_msg_name(f.type));
	return parse_state(&f, h, &ctx->err);
}

static void summary(const struct sync_opts *o, const struct sync_stats *st)
{
	char w[32];

	if (o->quiet)
		return;
	fmt_size(st->bytes_wire, w, sizeof(w));
	if (o->dry_run)
		fprintf(stderr, "would sync %llu files (%llu deleted), %.1f s\n",
			(unsigned long long)st->files_sent, (unsigned long long)st->files_deleted,
			st->seconds);
	else
		fprintf(stderr, "synced %llu files (%llu deleted), %s on the wire, %.2f s%s\n",
			(unsigned long long)st->files_sent, (unsigned long long)st->files_deleted,
			w, st->seconds, st->up_to_date ? " (up to date)" : "");
}

static void print_stats(const struct sync_stats *st)
{
	printf("entries: %llu (%llu files hashed, %llu bytes; %llu from the cache)\n",
	       (unsigned long long)st->entries, (unsigned long long)st->files_hashed,
	       (unsigned long long)st->bytes_hashed, (unsigned long long)st->files_cached);
	printf("sent: %llu files (%llu in the tar, %llu as deltas, %llu whole), %llu updated, "
	       "%llu deleted, %llu signatures asked\n",
	       (unsigned long long)st->files_sent, (unsigned long long)st->files_tar,
	       (unsigned long long)st->files_delta, (unsigned long long)st->files_whole,
	       (unsigned long long)st->files_updated, (unsigned long long)st->files_deleted,
	       (unsigned long long)st->sigs_asked);
	printf("content: %llu bytes (%llu literal, %llu matched)\n",
	       (unsigned long long)st->bytes_total, (unsigned long long)st->bytes_literal,
	       (unsigned long long)st->bytes_matched);
	printf("wire: %llu bytes (%llu sent, %llu received)\n",
	       (unsigned long long)st->bytes_wire, (unsigned long long)st->wire_out,
	       (unsigned long long)st->wire_in);
}

int sync_project(struct gr_ctx *ctx, const struct sync_opts *o, struct sync_stats *st_out)
{
	const struct gr_config *cfg = ctx->cfg;
	struct sync_stats st = { 0 };
	struct scan_opts so = { (const char *const *)cfg->sync.exclude.v, cfg->sync.exclude.n,
				cfg->sync.include_git };
	struct scan_entry *ents = NULL;
	size_t nents = 0;
	struct sync_index *idx = NULL;
	struct sm_list local = { 0 }, known = { 0 }, view = { 0 };
	uint8_t **leaves = NULL, local_digest[SM_HASH_LEN], known_digest[SM_HASH_LEN];
	struct sync_hash_stats hs = { 0 };
	struct host_state h = { 0 };
	struct sync_plan plan = { 0 };
	struct sync_xfer x = { 0 };
	struct sync_wire wire = { 0 };
	struct sync_progress prog = { 0 };
	struct connect_job cj = { 0 };
	char *key = NULL;
	uint32_t sid = 0;
	uint64_t t0 = now_ns();
	int rc, have_known;

	if ((rc = sync_check_remote_path(cfg->remote.path, &ctx->err)) < 0)
		goto out;
	connect_start(&cj, ctx);
	if ((rc = scan_tree(cfg->root, &so, &ents, &nents, &ctx->err)) < 0)
		goto out;
	idx = sync_index_load(cfg->root);
	if ((rc = sync_local_manifest(ents, nents, idx, &local, &hs, &ctx->err)) < 0)
		goto out;
	leaves = xcalloc(local.n ? local.n : 1, sizeof(*leaves));
	key = sync_remote_key(cfg->remote.host ? cfg->remote.host : "", cfg->remote.path);
	have_known = sync_rstate_load(cfg->root, key, &known, known_digest);
	/* While the connection comes up: hash what the host probably has too
	 * (as far as the last sync knows), so a no-op is seen as one. */
	if ((rc = resolve_hashes(cfg, &local, &known, leaves, &hs, &ctx->err)) < 0)
		goto out;
	memset(local_digest, 0, sizeof(local_digest));
	int unhashed = 0;
	for (size_t i = 0; i < local.n && !unhashed; i++)
		unhashed = local.e[i].flags & SM_F_UNHASHED;
	if (!unhashed) /* else: new or resized files, not a no-op */
		sm_digest(&local, local_digest);
	if ((rc = connect_finish(&cj)) < 0)
		goto out;
	rc = open_session(ctx, o, have_known, known_digest, local_digest, &wire, &sid, &h);
	if (rc < 0)
		goto out;
	if (h.flags & SYNC_STATE_IN_SYNC) {
		st.up_to_date = 1;
		if (!o->dry_run && (!have_known || memcmp(known_digest, h.digest, SM_HASH_LEN)))
			sync_rstate_save(cfg->root, key, &local, NULL);
		goto done;
	}
	if ((rc = host_view(&h, &known, &view, &ctx->err)) < 0) {
		sync_rstate_drop(cfg->root, key);
		gr_hintf(&ctx->err, "run 'gpurun sync' again");
		goto out;
	}
	if ((rc = resolve_hashes(cfg, &local, &view, leaves, &hs, &ctx->err)) < 0)
		goto out;
	warn_host_changes(&h, &local);
	sync_plan_build(&local, &view, cfg->sync.delta_min, have_sig, cfg->root, &plan);
	st.files_sent = plan.nfiles + plan.nlinks + plan.mkdirs.n;
	st.files_deleted = plan.deletes.n;
	st.files_updated = plan.nmeta;
	st.bytes_total = plan.send_bytes;
	if (o->dry_run) {
		struct strbuf list = STRBUF_INIT;
		sync_plan_list(&plan, &local, &list);
		fwrite(list.buf ? list.buf : "", 1, list.len, stdout);
		fflush(stdout);
		sb_release(&list);
		goto done;
	}
	if ((rc = size_check(ctx, o, &plan, &local)) < 0) {
		conn_send(ctx->conn, GR_MSG_CANCEL, 0, sid, NULL, 0);
		conn_flush(ctx->conn, NULL);
		goto out;
	}
	x.c = ctx->conn;
	x.sid = sid;
	x.root = cfg->root;
	x.plan = &plan;
	x.local = &local;
	x.leaves = leaves;
	x.delta_min = cfg->sync.delta_min;
	x.wire = &wire;
	x.prog = &prog;
	sync_progress_start(&prog, ctx->progress && !o->quiet, plan.send_bytes);
	rc = sync_xfer_run(&x, &ctx->err);
	sync_progress_clear(&prog);
	for (size_t i = 0; i < x.warnings.n; i++)
		fprintf(stderr, "gpurun: %s\n", x.warnings.v[i]);
	if (rc < 0) {
		sync_rstate_drop(cfg->root, key);
		goto out;
	}
	st.files_tar = x.files_tar;
	st.files_delta = x.files_delta;
	st.files_whole = x.files_whole;
	st.sigs_asked = x.files_sig;
	st.bytes_literal = x.literal;
	st.bytes_matched = x.matched;
	uint8_t expect[SM_HASH_LEN];
	sm_digest(&x.expect, expect);
	if (x.committed && !x.errors.n && !memcmp(expect, x.digest, SM_HASH_LEN)) {
		sync_rstate_save(cfg->root, key, &x.expect, NULL);
		sync_xfer_save_sigs(&x);
		sync_sig_gc(cfg->root, &x.expect);
	} else {
		/* The next sync asks the host for its manifest and repairs. */
		sync_rstate_drop(cfg->root, key);
		for (size_t i = 0; i < x.errors.n; i++)
			fprintf(stderr, "gpurun: %s\n", x.errors.v[i]);
		if (x.errors.n)
			rc = gr_errf(&ctx->err, GR_EREMOTE, "%zu file%s could not be synced",
				     x.errors.n, x.errors.n == 1 ? "" : "s");
		else if (x.committed)
			rc = gr_errf(&ctx->err, GR_EREMOTE,
				     "the host's manifest does not match what was sent");
		gr_hintf(&ctx->err, "run 'gpurun sync' again");
	}
done:
	st.wire_out = wire.out;
	st.wire_in = wire.in;
	st.bytes_wire = wire.out + wire.in;
	st.files_hashed = hs.files_hashed;
	st.bytes_hashed = hs.bytes_hashed;
	st.files_cached = hs.files_cached;
	st.entries = local.n;
	st.seconds = (double)(now_ns() - t0) / 1e9;
	if (rc == 0) {
		summary(o, &st);
		if (o->stats)
			print_stats(&st);
	}
out:
	if (cj.started) { /* failed before needing it: just collect it */
		pthread_join(cj.th, NULL);
		if (cj.rc == 0)
			ctx->conn = cj.conn;
	}
	if (idx) { /* a cache: failing to save it costs time only */
		sync_index_learn(idx, &local);
		sync_index_save(cfg->root, idx, NULL);
	}
	if (st_out)
		*st_out = st;
	sync_xfer_release(&x);
	sync_plan_free(&plan);
	host_state_release(&h);
	if (leaves)
		for (size_t i = 0; i < local.n; i++)
			free(leaves[i]);
	free(leaves);
	sm_list_free(&local);
	sm_list_free(&known);
	sm_list_free(&view);
	sync_index_free(idx);
	scan_free(ents, nents);
	free(key);
	return rc;
}
