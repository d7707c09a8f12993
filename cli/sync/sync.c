/* gpurun sync: scan the project as git sees it, hash what changed (stat
 * cache), learn the host's state in one round trip (a manifest digest; a
 * no-op sync ends there), plan, transfer pipelined, commit. When gpurun
 * knows what it last committed there, it does not wait for the answer: it
 * streams the changes planned against that state at once and the agent
 * refuses them if the folder is not exactly so (then the usual exchange
 * follows). The pieces: sync_index (local state), sync_diff (the walk read
 * against the last committed state), sync_known (what that state says),
 * sync_steps, sync_plan, sync_xfer (+ sync_delta), and on the host
 * remote/sync/agent_sync.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ignore.h"
#include "sync.h"
#include "sync_ask.h"
#include "sync_diff.h"
#include "sync_fp.h"
#include "sync_incr.h"
#include "sync_index.h"
#include "sync_plan.h"
#include "sync_proto.h"
#include "sync_run.h"
#include "sync_steps.h"
#include "sync_xfer.h"
#include "term.h"

/* GPURUN_IO_TIMEOUT: seconds of silence on the connection after which a
 * sync gives up (the agent sends keepalives while it is busy). */
static int idle_limit_ms(void)
{
	return conn_idle_ms();
}

static int have_sig(void *arg, const uint8_t *hash)
{
	return sync_sig_have(arg, hash);
}

/* What the host should hold after the COMMIT, whole, when local holds
 * only what differs (run_partial): its digest, made as it streams by. */
static int partial_digest(void *arg, const struct sm_list *expected, uint8_t out[SM_HASH_LEN])
{
	struct sync_merged m = run_merged(arg, expected);

	return sync_merged_digest(&m, out);
}

/* After a COMMIT that left the host as expected: remote-KEY says so, and
 * the signatures and block fingerprints of what it no longer holds go. */
static void committed(struct run *r, struct sync_xfer *x, const struct sm_list *expected)
{
	const struct gr_config *cfg = r->ctx->cfg;

	if (r->first) { /* (what was sent is in the spool) */
		sync_rstate_save_each(cfg->root, r->key, sync_spool_each_host, &r->spool, NULL);
		sync_xfer_save_sigs(x);
		sync_sig_gc(cfg->root, sync_spool_each_host, &r->spool);
		sync_fp_gc(cfg->root, sync_spool_each_local, &r->spool, cfg->sync.delta_min);
		return;
	}
	if (r->partial) { /* (the whole streamed: local holds what differs) */
		struct sync_merged host = run_merged(r, expected), here = run_merged(r, &r->local);
		sync_rstate_save_each(cfg->root, r->key, sync_merged_each, &host, NULL);
		sync_xfer_save_sigs(x);
		sync_sig_gc(cfg->root, sync_merged_each, &host);
		sync_fp_gc(cfg->root, sync_merged_each, &here, cfg->sync.delta_min);
		return;
	}
	if (sync_rstate_save(cfg->root, r->key, expected, NULL) == 0 && expected == &r->local) {
		r->local_is_state = 1;
		memcpy(r->state_digest, x->expect_digest, SM_HASH_LEN);
	}
	sync_xfer_save_sigs(x);
	sync_sig_gc(cfg->root, sm_list_each, (void *)expected);
	sync_fp_gc(cfg->root, sm_list_each, &r->local, cfg->sync.delta_min);
}

static void open_payload(struct run *r, uint32_t flags, struct strbuf *pl)
{
	put_str(pl, r->ctx->cfg->remote.path);
	put_u32(pl, flags | (r->ctx->cfg->sync.preserve_perms ? SYNC_OPEN_PRESERVE_PERMS : 0));
	put_bytes(pl, r->known_digest, r->have_known ? SM_HASH_LEN : 0);
	put_bytes(pl, r->local_digest, SM_HASH_LEN);
}

static uint32_t send_open(struct run *r, uint32_t flags)
{
	struct strbuf pl = STRBUF_INIT;
	uint32_t sid = conn_next_id(r->ctx->conn);

	open_payload(r, flags, &pl);
	conn_send(r->ctx->conn, SYNC_MSG_OPEN, 0, sid, pl.buf, pl.len);
	r->wire.out += GR_FRAME_HDR + pl.len;
	sb_release(&pl);
	return sid;
}

/* The agent refused the folder: that is the configuration's fault. */
static int remote_error(struct gr_ctx *ctx, int rc)
{
	if (rc == GR_EINVAL) {
		gr_hintf(&ctx->err, "set [remote] path to a project folder");
		ctx->err.code = rc = GR_ECONFIG;
	}
	return rc;
}

static int open_session(struct run *r, uint32_t *sid, struct host_state *h)
{
	struct strbuf body = STRBUF_INIT; /* a long STATE: its DATA frames, then its own */
	const char *root = r->ctx->cfg->root;
	struct gr_frame f;
	int rc;

	if (r->early_sid) /* it went with the bootstrap command */
		*sid = r->early_sid;
	else
		*sid = send_open(r, r->o->dry_run ? SYNC_OPEN_DRY_RUN : 0);
	r->early_sid = 0;
	/* (its manifest to a file when the walk is spooled or was read
	 * against remote-KEY: sync_host.h) */
	host_file_close(&r->hf);
	host_file_init(&r->hf, r->spooled || ((r->streamed || r->partial) && r->known_fd >= 0));
	for (;;) {
		if ((rc = conn_recv_idle(r->ctx->conn, &f, r->idle_ms, &r->ctx->err)) < 0)
			goto out;
		if (f.id != *sid)
			continue;
		r->wire.in += GR_FRAME_HDR + f.len;
		if (f.type != GR_MSG_DATA)
			break;
		if ((rc = host_file_take(&r->hf, root, &body, f.payload, f.len, &r->ctx->err)) < 0)
			goto out;
	}
	if (f.type == GR_MSG_ERROR) {
		rc = remote_error(r->ctx, conn_error_from_frame(&f, &r->ctx->err));
		goto out;
	}
	if (f.type != SYNC_MSG_STATE) {
		rc = gr_errf(&r->ctx->err, GR_EPROTO, "protocol error: expected SYNC_STATE, got %s",
			     proto_msg_name(f.type));
		goto out;
	}
	if ((rc = host_file_take(&r->hf, root, &body, f.payload, f.len, &r->ctx->err)) == 0)
		rc = host_file_end(&r->hf, root, &body, h, &r->ctx->err);
out:
	sb_release(&body);
	return rc;
}

#define ERRORS_SHOWN 20

/* What could not be synced: each file (the first ERRORS_SHOWN), then one
 * error saying why, and what helps; the hint to sync again only where
 * that can help by itself. */
static int report_errors(struct run *r, const struct sync_xfer *x, const struct sync_plan *plan)
{
	struct gr_err *err = &r->ctx->err;
	size_t n[4] = { 0 }, files = 0, local = 0;
	uint64_t lacking = 0;
	const char *root = x->host_root ? x->host_root : r->ctx->cfg->remote.path;

	for (size_t i = 0; i < x->nerrs; i++) {
		const struct sync_error *e = &x->errs[i];
		if (i < ERRORS_SHOWN && e->path) {
			char *q = sync_quote(e->path);
			sync_say(r->show, r->show_arg, "%s: %s", q, ts(e->msg));
			free(q);
		} else if (i < ERRORS_SHOWN) {
			sync_say(r->show, r->show_arg, "%s", ts(e->msg));
		}
		files += e->path != NULL;
		if (e->kind == SYNC_ERR_LOCAL)
			local++;
		else
			n[e->kind < 4 ? e->kind : SYNC_ERR_OTHER]++;
		if (e->kind == SYNC_ERR_NOSPACE)
			lacking += e->size;
	}
	if (x->nerrs > ERRORS_SHOWN)
		sync_say(r->show, r->show_arg, "(and %zu more)", x->nerrs - ERRORS_SHOWN);
	const char *s = files == 1 ? "" : "s";
	if (n[SYNC_ERR_NOSPACE]) {
		/* Temp files sit beside the old versions until COMMIT: the sync
		 * needs all it sends, at least what did not fit. */
		uint64_t need = plan->send_bytes > x->host_free ? plan->send_bytes - x->host_free : 0;
		if (need < lacking)
			need = lacking;
		unsigned long long mib = (need + (1u << 20) - 1) >> 20;
		gr_errf(err, GR_EREMOTE, "no space left on the host (needs %llu MiB more)",
			mib ? mib : 1);
		gr_hintf(err, "make room in '%s' on the host; the next sync sends the rest", ts(root));
	} else if (n[SYNC_ERR_DENIED]) {
		gr_errf(err, GR_EREMOTE, "%zu file%s could not be synced: permission denied on the "
			"host", files, s);
		gr_hintf(err, "make '%s' and the folders in it writable on the host", ts(root));
	} else if (n[SYNC_ERR_IN_THE_WAY]) {
		gr_errf(err, GR_EREMOTE, "%zu file%s could not be synced: folders on the host "
			"hold files gpurun did not send", files, s);
		gr_hintf(err, "move those files away on the host, or add the paths to .gpurunignore");
	} else if (local && local == x->nerrs) {
		gr_errf(err, GR_EIO, "%zu local file%s could not be read", local,
			local == 1 ? "" : "s");
		gr_hintf(err, "make them readable, or add them to .gpurunignore");
	} else {
		gr_errf(err, GR_EREMOTE, "%zu file%s could not be synced", files ? files : x->nerrs,
			(files ? files : x->nerrs) == 1 ? "" : "s");
		gr_hintf(err, "run 'gpurun sync' again");
	}
	return err->code;
}

/* Plan against view and carry it out: on session *sid, or, optimistic, on
 * a session opened here without waiting for its answer. *rejected: the
 * host was not in the state view says (optimistic only). */
static int transfer(struct run *r, const struct sm_list *view, int optimistic, uint32_t *sid,
		    int *rejected)
{
	struct gr_ctx *ctx = r->ctx;
	const struct gr_config *cfg = ctx->cfg;
	struct sync_plan plan;
	struct sync_xfer x = { 0 };
	struct sync_progress prog = { 0 };
	int rc = 0;

	*rejected = 0;
	if (r->first) { /* (everything, a window at a time: the plan is its size) */
		memset(&plan, 0, sizeof(plan));
		plan.send_bytes = r->spool.bytes;
		r->st.files_sent = r->spool.n;
	} else {
		sync_plan_build(&r->local, view, cfg->sync.delta_min, have_sig, cfg->root, &plan);
		r->st.files_sent = plan.nfiles + plan.nlinks + plan.mkdirs.n;
	}
	r->st.files_deleted = plan.deletes.n;
	r->st.files_updated = plan.nmeta;
	r->st.bytes_total = plan.send_bytes;
	if (r->o->dry_run) {
		struct strbuf list = STRBUF_INIT;
		sync_plan_list(&plan, &r->local, &list);
		r->show->listing(r->show_arg, list.buf ? list.buf : "", list.len);
		sb_release(&list);
		goto out;
	}
	if (!r->o->yes && cfg->sync.warn_size && plan.send_bytes > cfg->sync.warn_size &&
	    (rc = r->show->too_big(r->show_arg, &plan, &r->local, cfg->sync.warn_size,
				   &ctx->err)) < 0) {
		if (!optimistic) {
			conn_send(ctx->conn, GR_MSG_CANCEL, 0, *sid, NULL, 0);
			conn_flush_idle(ctx->conn, r->idle_ms, NULL);
		}
		goto out;
	}
	if (optimistic)
		*sid = send_open(r, SYNC_OPEN_OPTIMISTIC | (r->incr ? SYNC_OPEN_TRUST : 0));
	x.c = ctx->conn;
	x.sid = *sid;
	x.optimistic = optimistic;
	x.root = cfg->root;
	x.tree = r->tree;
	x.plan = &plan;
	x.local = &r->local;
	x.delta_min = cfg->sync.delta_min;
	x.idle_ms = r->idle_ms;
	x.wire = &r->wire;
	x.prog = &prog;
	x.host_root = r->host_root ? xstrdup(r->host_root) : NULL;
	x.host_free = r->host_free;
	if (r->partial) {
		x.whole_digest = partial_digest;
		x.whole_arg = r;
	}
	if (r->first)
		x.windows = &r->windows;
	sync_progress_start(&prog, ctx->progress && !r->o->quiet, plan.send_bytes);
	gr_trace("sync: transfer starts (%zu files, %llu bytes)",
		 r->first ? r->spool.files : plan.nfiles, (unsigned long long)plan.send_bytes);
	rc = sync_xfer_run(&x, &ctx->err);
	gr_trace("sync: transfer done (progress %llu of %llu bytes)",
		 (unsigned long long)prog.done, (unsigned long long)prog.total);
	sync_progress_clear(&prog);
	if (x.rejected) {
		*rejected = 1;
		gr_err_clear(&ctx->err);
		rc = 0;
		goto out;
	}
	for (size_t i = 0; i < x.warnings.n; i++)
		sync_say(r->show, r->show_arg, "%s", ts(x.warnings.v[i]));
	if (rc < 0) {
		sync_rstate_drop(cfg->root, r->key);
		rc = remote_error(ctx, rc);
		goto out;
	}
	r->st.files_tar = x.files_tar;
	r->st.files_delta = x.files_delta;
	r->st.files_whole = x.files_whole;
	r->st.sigs_asked = x.files_sig;
	r->st.bytes_literal = x.literal;
	r->st.bytes_matched = x.matched;
	/* (x.expected is set, and its digest made once, when COMMIT went:
	 * at 300k entries a digest is ~60 ms.) */
	const struct sm_list *expected = x.expected ? x.expected : &x.expect;
	if (x.committed && x.expected && !x.nerrs &&
	    !memcmp(x.expect_digest, x.digest, SM_HASH_LEN)) {
		committed(r, &x, expected);
		goto out;
	}
	/* The next sync asks the host for its manifest and repairs. */
	sync_rstate_drop(cfg->root, r->key);
	if (x.nerrs) {
		rc = report_errors(r, &x, &plan);
	} else {
		rc = gr_errf(&ctx->err, GR_EREMOTE, "the host's manifest does not match what was sent");
		gr_hintf(&ctx->err, "run 'gpurun sync' again");
	}
out:
	sync_xfer_release(&x);
	sync_plan_free(&plan);
	return rc;
}

/* A first sync (the walk spooled) to a host that holds nothing gpurun
 * knows (its manifest empty; the client knows none): everything goes,
 * from the spool, a window at a time. Not when the user is to be asked
 * first (the warning size lists the largest folders from the list). */
static int first_send(struct run *r, const struct host_state *h)
{
	const struct gr_config *cfg = r->ctx->cfg;

	if (!r->spooled || r->have_known || h->manifest.n || h->manifest_apart || h->changed.n ||
	    h->missing.n || r->o->dry_run)
		return 0;
	if (!r->o->yes && cfg->sync.warn_size && r->spool.bytes > cfg->sync.warn_size)
		return 0;
	if (sync_spool_windows(&r->spool, cfg->root, cfg->sync.delta_min, &r->windows) < 0)
		return 0;
	free(r->host_root);
	r->host_root = h->root ? sync_tame(h->root) : NULL;
	r->host_free = h->free;
	r->first = 1;
	return 1;
}

/* The host's state taken: hash what must be compared (against view, or,
 * with compare NULL, what is marked), say what changed on the host (at:
 * local's entries at its changes), then plan against view and send. */
static int send_against(struct run *r, const struct host_state *h, const struct sm_list *view,
			const struct sm_list *compare, const struct sm_list *at, uint32_t *sid)
{
	int rc, rejected;

	if ((rc = resolve_hashes(r->ctx->cfg, r->tree, &r->local, compare, &r->hs,
				 &r->ctx->err)) < 0)
		return rc;
	warn_host_changes(h, at, r->show, r->show_arg);
	free(r->host_root);
	r->host_root = h->root ? sync_tame(h->root) : NULL;
	r->host_free = h->free;
	return transfer(r, view, 0, sid, &rejected);
}

/* The usual exchange: OPEN, the host's state, then the transfer. */
static int exchange(struct run *r)
{
	const struct gr_config *cfg = r->ctx->cfg;
	struct host_state h = { 0 };
	uint32_t sid;
	int rc, rejected;

	if ((rc = open_session(r, &sid, &h)) < 0)
		goto out;
	gr_trace("sync: host state");
	if (r->incr && !(h.flags & SYNC_STATE_IN_SYNC)) {
		/* The host is not as the last sync left it: what this list
		 * leaves out (files not reported) may be needed. */
		if (!r->o->dry_run) {
			conn_send(r->ctx->conn, GR_MSG_CANCEL, 0, sid, NULL, 0);
			conn_flush_idle(r->ctx->conn, r->idle_ms, NULL);
		}
		rc = SYNC_WALK;
		goto out;
	}
	if (h.flags & SYNC_STATE_IN_SYNC) {
		r->st.up_to_date = 1;
		int saved = 0;
		if (!r->o->dry_run && (!r->have_known ||
				       memcmp(r->known_digest, h.digest, SM_HASH_LEN))) {
			if (r->spooled) /* (what the walk spooled is what the host holds) */
				saved = sync_rstate_save_each(cfg->root, r->key, sync_spool_each_walk,
							      &r->spool, NULL) == 0;
			else if ((rc = run_local_whole(r)) < 0) /* (never so: streamed is the state) */
				goto out;
			else
				saved = sync_rstate_save(cfg->root, r->key, &r->local, NULL) == 0;
		}
		/* (local's digest is the host's: as remote-KEY's, or saved) */
		if (saved || (!r->o->dry_run && r->have_known &&
			      !memcmp(r->known_digest, h.digest, SM_HASH_LEN))) {
			r->local_is_state = 1;
			memcpy(r->state_digest, h.digest, SM_HASH_LEN);
		}
		goto out;
	}
	if (first_send(r, &h)) {
		gr_trace("sync: the host holds nothing: all of it from the spool");
		warn_host_changes(&h, &r->local, r->show, r->show_arg); /* (its warnings) */
		rc = transfer(r, NULL, 0, &sid, &rejected);
		goto out;
	}
	if (r->hf.fd >= 0 && (rc = run_host_diff(r, &h)) <= 0) {
		if (rc == 0)
			rc = send_against(r, &h, &r->known, NULL, &r->at_changes, &sid);
		goto out;
	}
	/* The host changed since the state: only the paths it changed join
	 * what differs, no list (when the walk was read against the state). */
	if ((r->streamed || r->partial) && !(h.flags & SYNC_STATE_HAS_MANIFEST) &&
	    r->known_fd >= 0 && (rc = run_host_changes(r, &h)) <= 0) {
		if (rc == 0)
			rc = send_against(r, &h, &r->view, &r->view, &r->local, &sid);
		goto out;
	}
	if ((rc = run_local_whole(r)) < 0)
		goto out;
	if (r->known_loaded == 1) { /* (run_local_whole's, for a plan against the state) */
		sm_list_free(&r->known);
		run_forget_same(r);
		r->known_loaded = 0;
	}
	if (!(h.flags & SYNC_STATE_HAS_MANIFEST) && (rc = run_known_load(r)) < 0)
		goto out;
	if ((rc = host_view(&h, &r->known, &r->view, &r->ctx->err)) < 0) {
		sync_rstate_drop(cfg->root, r->key);
		gr_hintf(&r->ctx->err, "run 'gpurun sync' again");
		goto out;
	}
	run_keep_ignored(r, &r->view);
	rc = send_against(r, &h, &r->view, &r->view, &r->local, &sid);
out:
	host_state_release(&h);
	return rc;
}

static void relay_say(void *arg, const char *msg)
{
	struct run *r = arg;

	sync_say(r->show, r->show_arg, "%s", ts(msg));
}

/* A watcher of this project runs: it syncs what it saw change (it walks
 * nothing), and its answer is this sync's. 1 when it answered, else 0:
 * walk (-v says why). The lock is held: no sync of ours runs meanwhile. */
static int ask_watcher(struct run *r)
{
	struct gr_ctx *ctx = r->ctx;
	struct sync_stats st;
	char *why = NULL;
	long pid = 0;

	if (!sync_ask_flush(ctx->cfg, r->o->yes, r->idle_ms, relay_say, r, &st, &pid, &why)) {
		if (ctx->verbose)
			sync_say(r->show, r->show_arg, "walked the tree (%s)", why);
		free(why);
		return 0;
	}
	if (ctx->verbose)
		sync_say(r->show, r->show_arg, "asked the watcher (pid %ld): %s", pid,
			 st.up_to_date ? "up to date" : "it synced what changed");
	r->st = st;
	return 1;
}

/* One sync: walked, or (incr) from the watcher's list of changed paths,
 * which answers SYNC_WALK where that list cannot settle it. */
static int sync_run(struct gr_ctx *ctx, const struct sync_opts *o, struct sync_stats *st_out,
		    int incr)
{
	const struct gr_config *cfg = ctx->cfg;
	struct scan_ignored ignored = { .walk_dirs = o->dry_run, .names = STRVEC_INIT };
	struct scan_opts so = { (const char *const *)cfg->sync.exclude.v, cfg->sync.exclude.n,
				cfg->sync.include_git,
				(const char *const *)cfg->sync.include.v, cfg->sync.include.n,
				(const char *const *)cfg->train.persist.v, cfg->train.persist.n,
				o->say_ignored ? &ignored : NULL };
	struct connect_job cj = { 0 };
	struct run r = { 0 };
	uint64_t t0 = now_ns();
	int rc, locked = 0, walked = 0;

	r.ctx = ctx;
	r.o = o;
	r.incr = incr;
	r.known_fd = -1;
	r.spool.fd = r.spool.sent_fd = -1;
	host_file_init(&r.hf, 0);
	r.idle_ms = idle_limit_ms();
	/* (The pre-push hook passes no show: it gets what gpurun sync shows.) */
	r.show = o->show ? o->show : &sync_show_default;
	r.show_arg = o->show && o->show_arg ? o->show_arg : ctx;
	if ((rc = sync_check_remote_path(cfg->remote.path, &ctx->err)) < 0)
		goto out;
	/* One sync at a time in a project (a watcher's, train's). Taken
	 * before the connection: PREPARE below takes the host's lock, which
	 * must come second, as for every sync (else a watcher holding this
	 * one would wait for ours on the host while we wait for it here). */
	if (!o->dry_run) {
		if (!o->lock_held) {
			if ((rc = sync_lock_take(cfg->root, r.idle_ms, r.show, r.show_arg,
						 &ctx->err)) < 0)
				goto out;
			locked = 1;
		}
		/* (Asked under the lock: the watcher's own syncs wait for it,
		 * so what it answers stays true until the lock goes.) */
		if (!o->walk && !incr && ask_watcher(&r)) {
			r.st.seconds = (double)(now_ns() - t0) / 1e9;
			r.show->done(r.show_arg, o, &r.st, NULL);
			goto out;
		}
		/* The host checks its copy against its manifest while we scan
		 * ours, instead of after (on a no-op of a large tree the two
		 * walks take about as long each). */
		struct strbuf pl = STRBUF_INIT;
		put_str(&pl, cfg->remote.path);
		put_u32(&pl, cfg->sync.preserve_perms ? SYNC_OPEN_PRESERVE_PERMS : 0);
		if (!incr)
			connect_first(&cj, SYNC_MSG_PREPARE, pl.buf, pl.len);
		sb_release(&pl);
	}
	r.key = sync_remote_key(cfg->remote.host ? cfg->remote.host : "", cfg->remote.path);
	/* A walk makes its own list: the watcher's kept one goes first (held
	 * beside the walk's, a walking watcher's peak was two lists). */
	if (!incr && o->incr)
		sync_incr_keep(o->incr, NULL, NULL);
	if (incr) {
		/* No walk, no stat cache (its entries would lack what the
		 * scan records): the reported paths alone are looked at. */
		size_t looked;
		if (!sync_incr_build(o->incr, cfg->root, r.key, &so, &r.local, &r.known,
				     r.known_digest, &looked)) {
			rc = SYNC_WALK;
			goto out;
		}
		gr_trace("sync: no walk, %zu reported paths looked at", looked);
	}
	connect_start(&cj, ctx);
	r.so = so;
	if (!incr)
		r.idx = sync_index_load(cfg->root);
	/* With a state to read it against (and no list to keep: the
	 * watcher's, --dry-run's), the walk keeps only what differs. */
	if (!incr && !o->dry_run && !o->incr &&
	    (r.known_fd = sync_rstate_open(cfg->root, r.key)) >= 0) {
		if (!(r.tree = sync_tree_open(cfg->root, &ctx->err))) {
			rc = ctx->err.code;
			sync_index_free(r.idx); /* (nothing scanned to save) */
			r.idx = NULL;
			goto out;
		}
		rc = sync_scan_diff(cfg->root, &so, r.idx, r.known_fd, run_ignored_here, run_rehash_racy,
				    &r, &r.diff, &ctx->err);
		if (rc < 0) {
			sync_index_free(r.idx); /* nothing to save: the scan did not finish */
			r.idx = NULL;
			goto out;
		}
		walked = !r.diff.redo;
		r.streamed = walked;
		if (walked)
			gr_trace("sync: walked against the state: %zu entries, %zu differ%s",
				 r.diff.entries, r.diff.kept.n, r.diff.lacking ? ", some gone" : "");
		if (walked && !r.diff.kept.n && !r.diff.lacking) {
			/* local is the state: a no-op, unless the host is not */
			r.have_known = 1;
			memcpy(r.known_digest, r.diff.digest, SM_HASH_LEN);
			r.hs.files_cached += r.diff.cached;
		} else if (walked && !run_partial(&r) &&
			   (rc = run_local_whole(&r)) < 0) { /* (run_known_scan's too) */
			goto out;
		}
	}
	/* No state to read it against (a first sync): into a spool, not a
	 * list, unless the list is wanted anyway (sync_first.h). */
	if (!incr && !walked && r.known_fd < 0 && !o->dry_run && !o->incr) {
		if ((rc = sync_spool_scan(cfg->root, &so, r.idx, &r.spool, &ctx->err)) < 0) {
			sync_index_free(r.idx); /* nothing to save: the scan did not finish */
			r.idx = NULL;
			goto out;
		}
		r.spooled = rc == 0;
		r.hs.files_cached += r.spooled ? r.spool.cached : 0;
		if (r.spooled)
			gr_trace("sync: scanned into the spool: %zu entries", r.spool.n);
	}
	if (!incr && !walked && !r.spooled &&
	    (rc = sync_scan_manifest(cfg->root, &so, r.idx, &r.local, &r.hs, &ctx->err)) < 0) {
		sync_index_free(r.idx); /* nothing to save: the scan did not finish */
		r.idx = NULL;
		goto out;
	}
	if (!r.tree && !(r.tree = sync_tree_open(cfg->root, &ctx->err))) {
		rc = ctx->err.code;
		goto out;
	}
	if (!r.streamed && !r.spooled)
		gr_trace("sync: scanned, local manifest of %zu entries", r.local.n);
	if (incr)
		run_known_from_incr(&r);
	else if (!walked)
		run_known_scan(&r);
	/* While the connection comes up: hash what the host probably has too
	 * (as far as the last sync knows), so a no-op is seen as one. */
	rc = resolve_hashes(cfg, r.tree, &r.local, NULL, &r.hs, &ctx->err);
	if (rc < 0)
		goto out;
	int unhashed = r.spooled && r.spool.unhashed;
	for (size_t i = 0; i < r.local.n && !unhashed; i++)
		unhashed = r.local.e[i].flags & SM_F_UNHASHED;
	if ((!unhashed && incr) || r.partial) /* (the state's, or none: it differs) */
		run_incr_digest(&r);
	else if (r.streamed) /* local is the state */
		memcpy(r.local_digest, r.known_digest, SM_HASH_LEN);
	else if (r.spooled && !unhashed) /* (the spool's, made as it was written) */
		memcpy(r.local_digest, r.spool.digest, SM_HASH_LEN);
	else if (!unhashed) /* else: new or resized files, not a no-op */
		sm_digest(&r.local, r.local_digest);
	gr_trace("sync: hashed %llu files", (unsigned long long)r.hs.files_hashed);
	/* Changes against a state we know go without asking (optimistic);
	 * otherwise the OPEN can go inside the bootstrap command, so the
	 * host's answer follows HELLO (a no-op sync is then the connection
	 * and nothing more). */
	int optimistic = r.have_known && !o->dry_run &&
			 (unhashed || memcmp(r.local_digest, r.known_digest, SM_HASH_LEN));
	size_t offered = 0;
	if (!optimistic) {
		struct strbuf pl = STRBUF_INIT;
		open_payload(&r, o->dry_run ? SYNC_OPEN_DRY_RUN : 0, &pl);
		connect_offer(&cj, SYNC_MSG_OPEN, pl.buf, pl.len);
		offered = pl.len;
		sb_release(&pl);
	}
	if ((rc = connect_finish(&cj)) < 0)
		goto out;
	gr_trace("sync: connected");
	if (cj.offer_id) {
		r.early_sid = cj.offer_id;
		r.wire.out += GR_FRAME_HDR + offered;
	}
	if (optimistic) {
		uint32_t sid;
		int rejected;
		if ((rc = run_known_diff(&r)) < 0)
			goto done;
		if ((rc = transfer(&r, &r.known, 1, &sid, &rejected)) < 0 || !rejected)
			goto done;
		if (incr) { /* the host is not as the last sync left it */
			rc = SYNC_WALK;
			goto out;
		}
		r.st = (struct sync_stats){ 0 };
		if (r.partial) {
			/* The host was not in that state: what it says decides
			 * (its manifest: read against the walk; its changes:
			 * the list, exchange's run_local_whole). */
		} else {
			sm_list_free(&r.known); /* the host was not in that state */
			run_forget_same(&r);
			r.known_loaded = 0;
		}
	}
	rc = exchange(&r);
done:
	r.st.wire_out = r.wire.out;
	r.st.wire_in = r.wire.in;
	r.st.bytes_wire = r.wire.out + r.wire.in;
	r.st.files_hashed = r.hs.files_hashed;
	r.st.bytes_hashed = r.hs.bytes_hashed;
	r.st.bytes_reused = r.hs.bytes_reused;
	r.st.files_cached = r.hs.files_cached;
	r.st.entries = r.partial    ? r.diff.nstate - r.known.n + r.local.n
		     : r.streamed ? r.diff.nstate
		     : r.first || r.spooled ? r.spool.n
				  : r.local.n;
	r.st.seconds = (double)(now_ns() - t0) / 1e9;
	if (rc == 0)
		r.show->done(r.show_arg, o, &r.st, o->say_ignored ? &ignored : NULL);
out:
	connect_abandon(&cj);
	/* (A cache: failing to save it costs time only. After a walk that
	 * found local to be the state, each file came from it as it is.) */
	if (r.idx && r.first) {
		sync_spool_save_index(cfg->root, r.idx, &r.spool);
	} else if (r.idx && r.spooled) {
		/* (never read: nothing sent from it) */
	} else if (r.idx && r.partial) {
		struct sync_merged m = run_merged(&r, &r.local);
		sync_diff_save_index(cfg->root, r.idx, &m, NULL);
	} else if (r.idx && !r.streamed) {
		sync_index_save(cfg->root, r.idx, &r.local, NULL);
	} else if (r.idx && r.diff.rehashed) {
		sync_index_renew(cfg->root, r.diff.start_ns, NULL);
	}
	if (o->incr && rc != SYNC_WALK && r.key) {
		if (!incr) /* the rules may have changed: read them again */
			sync_incr_forget(o->incr);
		o->incr->walked = !incr;
		/* (after the index took what it needs of local) */
		sync_incr_keep(o->incr, rc == 0 && !o->dry_run && r.local_is_state ? &r.local : NULL,
			       r.state_digest);
		sync_incr_committed(o->incr, cfg->root, r.key, rc == 0 && !o->dry_run);
	}
	if (st_out)
		*st_out = r.st;
	for (size_t i = 0; i < r.local.n; i++)
		free(r.local.e[i].leaves);
	ignore_free(r.ig);
	sm_list_free(&r.local);
	sm_list_free(&r.known);
	if (r.known_fd >= 0)
		close(r.known_fd);
	sm_list_free(&r.view);
	sync_index_free(r.idx);
	sync_diff_free(&r.diff);
	sync_spool_close(&r.spool);
	host_file_close(&r.hf);
	sm_list_free(&r.at_changes);
	sync_tree_close(r.tree);
	if (locked)
		sync_lock_release();
	sv_clear(&ignored.names);
	free(r.host_root);
	free(r.key);
	return rc;
}

int sync_project(struct gr_ctx *ctx, const struct sync_opts *o, struct sync_stats *st)
{
	int rc;

	if (o->incr && o->incr->usable && o->incr->have_state && !o->dry_run) {
		if ((rc = sync_run(ctx, o, st, 1)) != SYNC_WALK)
			return rc;
		gr_err_clear(&ctx->err);
		gr_trace("sync: the reported paths cannot settle it: walking");
	}
	return sync_run(ctx, o, st, 0);
}
