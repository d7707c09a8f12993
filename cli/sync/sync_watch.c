/* gpurun sync --watch: sync, then watch the tree (sync_notify.c) and sync
 * each burst of edits once the tree has been quiet for quiet_ms (or
 * max_ms after the burst began, so a constant stream still syncs). Every
 * sync is a whole sync_project on the one connection kept open for the
 * watch: a small edit costs the scan (stat cache) and one round trip to
 * the warm agent, no handshake. A lost connection is opened again with
 * back-off, then a full sync; a silent one is found by a PING when idle.
 * With inotify it also answers the project's other syncs on
 * .gpurun/watch.sock (sync_ask.h), so they need not walk the tree. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync.h"
#include "sync_ask.h"
#include "sync_incr.h"
#include "sync_notify.h"

#define QUIET_MS 100
#define MAX_MS 1000
#define POLL_MS 1000
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000
#define PING_IDLE_MS 15000  /* idle this long: ask the agent if it is there */
#define PING_WAIT_MS 15000  /* and wait this long for the answer */
#define LOCK_RETRY_MS 20    /* another gpurun syncs: try the lock again this soon */
#define ASK_READ_MS 1000    /* an asker's request must arrive within this */
/* A sync that walks the tree (and has the agent look at its whole copy)
 * at least this often, whatever inotify says: what changed on the host,
 * or here unseen (a hard link's other name), is repaired by then. */
#define WALK_EVERY_MS (10 * 60 * 1000)

struct watch {
	struct gr_ctx *ctx;
	const struct sync_watch_opts *o;
	struct sync_notify *n;
	int quiet_ms, max_ms;
	uint64_t first, last;   /* the burst waiting: its first and last change; 0 none */
	int down;               /* the connection is lost: opening it again */
	uint64_t down_since, retry_at;
	int backoff_ms;
	int last_rc;            /* the last sync's */
	int syncs;
	uint32_t ping_id;
	uint64_t ping_at;
	uint64_t lock_retry_at; /* another gpurun holds the sync lock: try again then */
	int lock_said;
	struct sync_ask_srv *srv; /* where the project's other syncs ask (or NULL) */
	char *fp;                 /* sync_ask_fingerprint of this watch's config */
	/* What changed since the last sync's scan, so a sync need not walk
	 * the tree (sync_incr.h): only with inotify, only after a sync of
	 * this watch succeeded on this connection. */
	struct sync_incr incr;
	int walk_always;          /* GPURUN_WATCH_WALK=1: every sync walks (to compare) */
	uint64_t walked_at;       /* the last sync that walked */
};

static void say(struct watch *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct watch *w, const char *fmt, ...)
{
	char buf[1400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (w->o->state)
		w->o->state(w->o->arg, buf);
}

static void set_busy(struct watch *w, int on)
{
	if (w->o->busy)
		*w->o->busy = on;
}

/* Errors that opening the connection again can mend. */
static int conn_trouble(int rc)
{
	return rc == GR_ESSH || rc == GR_ETIMEOUT || rc == GR_EAGENT || rc == GR_EPROTO;
}

/* Errors no retry mends: the watch ends. */
static int fatal(int rc)
{
	return rc == GR_ECONFIG || rc == GR_EHOSTKEY || rc == GR_EAUTH || rc == GR_EUNSUPP ||
	       rc == GR_EUSAGE;
}

static void drop_conn(struct watch *w)
{
	conn_close(w->ctx->conn);
	w->ctx->conn = NULL;
	w->ping_id = 0;
}

static void lost(struct watch *w, int rc)
{
	drop_conn(w);
	sync_incr_forget(&w->incr); /* connected again: a full sync */
	w->last_rc = rc;
	if (w->down)
		return;
	w->down = 1;
	w->down_since = now_ms();
	w->backoff_ms = BACKOFF_MIN_MS;
	w->retry_at = w->down_since + (uint64_t)w->backoff_ms;
	say(w, "connection lost (%s); connecting again, then a full sync", w->ctx->err.msg);
}

/* Down: try to connect again; 0 when up (the sync follows). */
static int reconnect(struct watch *w)
{
	struct gr_ctx *ctx = w->ctx;
	int rc;

	set_busy(w, 2);
	rc = ctx_connect(ctx);
	set_busy(w, 0);
	if (rc == 0) {
		say(w, "connected again after %llu s",
		    (unsigned long long)((now_ms() - w->down_since + 500) / 1000));
		w->down = 0;
		return 0;
	}
	if (ctx->conn)
		drop_conn(w);
	w->last_rc = rc;
	if (fatal(rc))
		return rc;
	w->backoff_ms = w->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : w->backoff_ms * 2;
	w->retry_at = now_ms() + (uint64_t)w->backoff_ms;
	if (ctx->verbose)
		say(w, "still cannot connect (%s); next try in %d s", ctx->err.msg,
		    w->backoff_ms / 1000);
	return rc;
}

/* What a sync of the watch left: a fatal code, else 0 (what failed was
 * said, and the watch goes on). */
static int after_sync(struct watch *w, int rc)
{
	struct gr_ctx *ctx = w->ctx;

	w->syncs++;
	w->last_rc = rc;
	if (w->incr.walked)
		w->walked_at = now_ms();
	if (rc == 0)
		return 0;
	/* (A size question refused in a pipe would be refused again.) */
	if (fatal(rc) || (rc == GR_ECANCEL && w->syncs == 1))
		return rc;
	if (conn_trouble(rc)) {
		lost(w, rc);
		return 0;
	}
	/* The sync's own failure (a file unreadable, no space on the host, a
	 * question refused): said, and the next edit tries again on a fresh
	 * connection (this one's session may have been left half done). */
	if (w->o->failed)
		w->o->failed(w->o->arg, rc);
	if (ctx->conn)
		drop_conn(w);
	sync_incr_forget(&w->incr);
	return 0;
}

/* Before a sync: place new watches, say what fell back. */
static void before_sync(struct watch *w)
{
	char *notice;

	w->first = w->last = 0;
	w->lock_retry_at = 0;
	w->lock_said = 0;
	sync_notify_prepare(w->n);
	if ((notice = sync_notify_notice(w->n))) {
		say(w, "%s", notice);
		free(notice);
	}
	/* What this sync looks at instead of walking; the events from here
	 * on are the next one's (its scan starts after this). */
	const struct strvec *dirty = sync_notify_dirty(w->n);
	sv_clear(&w->incr.paths);
	w->incr.usable = dirty != NULL && !w->walk_always &&
			 now_ms() - w->walked_at < WALK_EVERY_MS;
	for (size_t i = 0; dirty && i < dirty->n; i++)
		sv_push(&w->incr.paths, dirty->v[i]);
	sync_notify_mark(w->n);
	w->ping_id = 0; /* a sync drops other answers; it proves the link itself */
}

/* One sync of the whole tree. Returns a fatal code, else 0. The lock is
 * only tried: while another gpurun holds it, the watch goes on answering
 * (that gpurun may be asking it to flush) and tries again soon. */
static int sync_once(struct watch *w)
{
	struct gr_ctx *ctx = w->ctx;
	struct sync_opts so = w->o->sync;
	struct sync_stats st;
	struct gr_err e = { 0 };
	int rc;

	if (sync_lock_take(ctx->cfg->root, 0, NULL, NULL, &e) == GR_ECONFLICT) {
		w->lock_retry_at = now_ms() + LOCK_RETRY_MS;
		if (!w->lock_said && ctx->verbose)
			say(w, "another gpurun syncs this project; this sync waits for it");
		w->lock_said = 1;
		return 0;
	}
	/* (Any other failure to lock: the sync's own take reports it.) */
	before_sync(w);
	so.say_ignored = w->syncs == 0 && w->o->sync.say_ignored;
	so.walk = 1;
	so.incr = &w->incr;
	set_busy(w, 1);
	rc = sync_project(ctx, &so, &st);
	set_busy(w, 0);
	sync_lock_release();
	return after_sync(w, rc);
}

/* ---- answering the project's other syncs (sync_ask.h) ---- */

struct relay {
	struct watch *w;
	struct sync_ask_req *req;
	const struct sync_show *own; /* the watch's */
	void *own_arg;
};

static void relay_say(void *arg, const char *msg)
{
	struct relay *rl = arg;

	rl->own->say(rl->own_arg, msg);
	sync_ask_reply_say(rl->req, msg);
}

/* A size question here would be asked on the watcher's terminal: the
 * asker asks it on its own (it walks) unless it said --yes. */
static int relay_too_big(void *arg, const struct sync_plan *p, const struct sm_list *local,
			 uint64_t limit, struct gr_err *err)
{
	(void)arg;
	(void)p;
	(void)local;
	return gr_errf(err, GR_ECANCEL, "it would send more than [sync] warn_size (%llu bytes)",
		       (unsigned long long)limit);
}

static void relay_listing(void *arg, const char *text, size_t len)
{
	(void)arg;
	(void)text;
	(void)len;
}

static void relay_done(void *arg, const struct sync_opts *o, const struct sync_stats *st,
		       const struct scan_ignored *ig)
{
	struct relay *rl = arg;

	rl->own->done(rl->own_arg, o, st, ig);
}

static const struct sync_show relay_show = { relay_say, relay_too_big, relay_listing,
					     relay_done };

/* Why this watch cannot answer req for its sync, or NULL. */
static const char *refusal(struct watch *w, const struct sync_ask_req *req)
{
	if (strcmp(req->fp, w->fp))
		return "it syncs with other settings (gpurun.ini, -o, host or path differ)";
	if (w->down)
		return "its connection to the host is lost";
	if (sync_notify_fd(w->n) < 0)
		return "it scans the tree (no inotify)";
	if (w->syncs == 0 || w->last_rc != 0)
		return "its last sync failed";
	if (!sync_ask_lock_held_by(w->ctx->cfg->root, req->pid))
		return "the asker does not hold the project's sync lock";
	return NULL;
}

/* One asker: what changed before its request is on the host when the
 * answer goes. inotify queued the events of every write that returned
 * before the request was sent; reading it dry now sees them all. */
static int answer(struct watch *w)
{
	struct gr_ctx *ctx = w->ctx;
	struct sync_ask_req req;
	struct sync_stats st = { 0 };
	const char *why;
	int rc;

	if (!sync_ask_accept(w->srv, ASK_READ_MS, &req))
		return 0;
	if ((why = refusal(w, &req))) {
		if (ctx->verbose)
			say(w, "a sync (pid %ld) asked; it walks: %s", (long)req.pid, why);
		sync_ask_reply_no(&req, why);
		return 0;
	}
	uint64_t now = now_ms();
	if (sync_notify_check(w->n, 0)) {
		if (!w->first)
			w->first = now;
		w->last = now;
	}
	if (!w->first) {
		st.up_to_date = 1;
		if (ctx->verbose)
			say(w, "a sync (pid %ld) asked: up to date", (long)req.pid);
		sync_ask_reply_ok(&req, &st);
		return 0;
	}
	/* Something waits: sync it now, under the asker's lock. */
	struct relay rl = { w, &req, w->o->sync.show ? w->o->sync.show : &sync_show_default,
			    w->o->sync.show && w->o->sync.show_arg ? w->o->sync.show_arg : ctx };
	struct sync_opts so = w->o->sync;
	uint64_t first = w->first, last = w->last;
	so.show = &relay_show;
	so.show_arg = &rl;
	so.say_ignored = 0;
	so.yes = req.yes;
	so.walk = 1;
	so.lock_held = 1;
	so.incr = &w->incr;
	before_sync(w);
	set_busy(w, 1);
	rc = sync_project(ctx, &so, &st);
	set_busy(w, 0);
	if (rc == 0) {
		if (ctx->verbose)
			say(w, "a sync (pid %ld) asked: synced what changed", (long)req.pid);
		sync_ask_reply_ok(&req, &st);
	} else {
		char msg[1200];
		snprintf(msg, sizeof(msg), "its sync failed: %s", ctx->err.msg);
		sync_ask_reply_no(&req, msg);
	}
	if (rc == GR_ECANCEL) { /* the size question, left to the asker */
		gr_err_clear(&ctx->err);
		w->first = first;
		w->last = last;
		return 0;
	}
	return after_sync(w, rc);
}

/* Idle on the connection: a PING now and then; no answer in time, or the
 * connection closing, is a loss. */
static void keep_alive(struct watch *w, uint64_t now)
{
	struct gr_conn *c = w->ctx->conn;

	if (!c || w->down)
		return;
	if (w->ping_id && now - w->ping_at >= PING_WAIT_MS) {
		gr_errf(&w->ctx->err, GR_ETIMEOUT, "the host did not answer for %d s",
			PING_WAIT_MS / 1000);
		lost(w, GR_ETIMEOUT);
	} else if (!w->ping_id && now - conn_last_io(c) >= PING_IDLE_MS) {
		w->ping_id = conn_next_id(c);
		w->ping_at = now;
		conn_send(c, GR_MSG_PING, 0, w->ping_id, NULL, 0);
	}
}

static int min_ms(int a, int64_t b)
{
	if (b < 0)
		b = 0;
	if (b > 3600000)
		b = 3600000;
	return a < 0 || b < a ? (int)b : a;
}

/* How long the loop may sleep. */
static int wait_ms(struct watch *w, uint64_t now)
{
	int t = -1, d;

	int soon = w->first && !w->down;

	if (w->down)
		t = min_ms(t, (int64_t)w->retry_at - (int64_t)now);
	if (soon && w->lock_retry_at)
		t = min_ms(t, (int64_t)w->lock_retry_at - (int64_t)now);
	else if (soon) {
		t = min_ms(t, (int64_t)(w->last + (uint64_t)w->quiet_ms) - (int64_t)now);
		t = min_ms(t, (int64_t)(w->first + (uint64_t)w->max_ms) - (int64_t)now);
	}
	if ((d = sync_notify_due_ms(w->n, soon ? w->quiet_ms : 0)) >= 0)
		t = min_ms(t, d);
	if (w->ctx->conn && !w->down)
		t = min_ms(t, w->ping_id ? (int64_t)(w->ping_at + PING_WAIT_MS) - (int64_t)now
					 : (int64_t)(conn_last_io(w->ctx->conn) + PING_IDLE_MS) -
						   (int64_t)now);
	return t;
}

static int due(const struct watch *w, uint64_t now)
{
	if (w->down)
		return now >= w->retry_at;
	if (w->first && w->lock_retry_at)
		return now >= w->lock_retry_at;
	return w->first && (now - w->last >= (uint64_t)w->quiet_ms ||
			    now - w->first >= (uint64_t)w->max_ms);
}

int sync_watch(struct gr_ctx *ctx, const struct sync_watch_opts *o, int *stopped)
{
	const struct gr_config *cfg = ctx->cfg;
	struct scan_opts so = { (const char *const *)cfg->sync.exclude.v, cfg->sync.exclude.n,
				cfg->sync.include_git,
				(const char *const *)cfg->sync.include.v, cfg->sync.include.n,
				(const char *const *)cfg->train.persist.v, cfg->train.persist.n, NULL };
	struct watch w = { .ctx = ctx, .o = o };
	int rc = 0, said_watching = 0;

	*stopped = 0;
	w.quiet_ms = o->quiet_ms > 0 ? o->quiet_ms : QUIET_MS;
	const char *walk = getenv("GPURUN_WATCH_WALK");
	w.walk_always = walk && !strcmp(walk, "1");
	w.max_ms = o->max_ms > 0 ? o->max_ms : MAX_MS;
	if ((rc = sync_check_remote_path(cfg->remote.path, &ctx->err)) < 0)
		return rc;
	/* The watches first: an edit after the first sync's scan is seen. */
	sync_notify_new(&w.n, cfg->root, &so, o->force_scan, o->poll_ms > 0 ? o->poll_ms : POLL_MS,
			&ctx->err);
	/* Where the project's other syncs ask it (only with inotify: a scan
	 * could not say at once what changed). */
	if (sync_notify_fd(w.n) >= 0) {
		char *why = NULL;
		sync_ask_listen(cfg->root, &w.srv, &why);
		if (!w.srv && ctx->verbose)
			say(&w, "other syncs of this project walk the tree: %s", why);
		free(why);
		w.fp = sync_ask_fingerprint(cfg);
	}
	w.first = w.last = now_ms() - (uint64_t)w.max_ms; /* the first sync: at once */
	for (;;) {
		uint64_t now = now_ms();
		if (due(&w, now)) {
			if (w.down && (rc = reconnect(&w)) < 0) {
				if (fatal(rc))
					goto out;
				continue;
			}
			if ((rc = sync_once(&w)) < 0)
				goto out;
			if (!said_watching && !o->sync.quiet) {
				struct strbuf sb = STRBUF_INIT;
				sync_notify_describe(w.n, &sb);
				say(&w, "watching for changes (%s); Ctrl-C stops", sb.buf);
				sb_release(&sb);
				said_watching = 1;
			}
			continue;
		}
		struct pollfd pfd[3] = { { o->stop_fd, POLLIN, 0 }, { sync_notify_fd(w.n), POLLIN, 0 },
					 { sync_ask_srv_fd(w.srv), POLLIN, 0 } };
		int np = 1, t = wait_ms(&w, now);
		if (pfd[1].fd >= 0)
			np = 2;
		if (pfd[2].fd >= 0) /* (a scan's pfd[1] is -1: poll skips it) */
			np = 3;
		if (ctx->conn && !w.down) {
			struct gr_frame f;
			int r = conn_wait(ctx->conn, &f, pfd, np, t, &ctx->err);
			if (r < 0)
				lost(&w, r);
			else if (r == 1 && f.id && f.id == w.ping_id)
				w.ping_id = 0; /* (its OK; any other frame is stale) */
		} else if (poll(pfd, (nfds_t)np, t) < 0 && errno != EINTR) {
			rc = gr_errf(&ctx->err, GR_EIO, "poll: %s", strerror(errno));
			goto out;
		}
		if (pfd[0].revents) {
			*stopped = 1;
			rc = w.last_rc;
			goto out;
		}
		if (np == 3 && pfd[2].revents && (rc = answer(&w)) < 0)
			goto out;
		now = now_ms();
		if (sync_notify_check(w.n, w.first && !w.down ? w.quiet_ms : 0)) {
			if (!w.first)
				w.first = now;
			w.last = now;
		}
		keep_alive(&w, now);
	}
out:
	sync_ask_srv_free(w.srv);
	sync_incr_release(&w.incr);
	free(w.fp);
	sync_notify_free(w.n);
	return rc;
}
