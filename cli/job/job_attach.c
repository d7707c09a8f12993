/* Following a job (see job_attach.h). One loop waits on the connection,
 * a signal pipe and (while asking) the terminal; the log, a periodic
 * artifact pull, a stop and a keepalive ping share the connection, told
 * apart by request id. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctx.h"
#include "pull.h"
#include "job_attach.h"
#include "job_client.h"
#include "job_notify_local.h"
#include "job_show.h"
#include "sig_wake.h"
#include "term.h"

#define PING_AFTER_MS 15000    /* silence before we ask the agent */
#define DEAD_AFTER_MS 20000    /* an unanswered ping this old: reconnect */
#define GIVE_UP_MS (10 * 60 * 1000) /* reconnecting this long: fail */
#define STATUS_EVERY_MS 1000   /* --json: asking whether a job left the line */

/* Ctrl-C, SIGTERM and SIGHUP while attached (one attach at a time). */
static struct sig_wake wake;

void job_print_detached(const struct gr_ctx *ctx, const char *id, const char *name)
{
	const char *ref = name && *name ? name : id;

	fprintf(stderr, "gpurun: detached from job %s%s%s%s; it keeps running on %s\n", id,
		ref != id ? " (" : "", ref != id ? ref : "", ref != id ? ")" : "",
		ctx->cfg->remote.host && *ctx->cfg->remote.host ? ctx->cfg->remote.host : "the host");
	fprintf(stderr, "hint: reattach with 'gpurun logs -f %s'; stop it with 'gpurun stop %s'\n",
		ref, ref);
}

struct att {
	struct gr_ctx *ctx;
	const struct attach_opts *o;
	struct attach_result *res;
	uint32_t log_id, stop_id, ping_id;
	int log_done, asking, ints, first, stop_sent, stop_resend;
	uint64_t last_rx, ping_at, next_pull, lost_since;
	uint64_t conn_at;         /* this connection came up (or the attach began) */
	int conn_rx;              /* a frame came on it since */
	struct art_pull *pull;
	struct log_out lo;        /* the log, and our status lines beside it */
	int keys;                 /* the terminal gives us single keys while we ask */
	struct term_filter tf;    /* o->filter: what the terminal may see */
	struct strbuf safe;       /* the filter's output */
	/* o->json */
	struct json_log jl;       /* the log as events */
	uint32_t st_id;           /* a JOB_STATUS in flight */
	uint64_t st_at;           /* when to ask next */
	int said_started, said_queued;
	uint32_t said_pos;        /* the queued event said this place ... */
	char *said_why;           /* ... and this reason */
};

static int out(struct att *t, const void *p, size_t n)
{
	if (t->o->json) {
		if (json_log_feed(&t->jl, p, n) < 0)
			return gr_errf(&t->ctx->err, GR_EIO, "cannot write the log: %s", strerror(errno));
		return 0;
	}
	if (t->o->filter) {
		sb_reset(&t->safe);
		tf_feed(&t->tf, p, n, &t->safe);
		p = t->safe.buf;
		n = t->safe.len;
	}
	/* The log goes on while we ask a question (below it). */
	if (log_out_write(&t->lo, p, n) < 0)
		return gr_errf(&t->ctx->err, GR_EIO, "cannot write the log: %s", strerror(errno));
	return 0;
}

/* The log ended: a partial character or sequence held by the filter. */
static void out_finish(struct att *t)
{
	if (t->o->json)
		(void)json_log_finish(&t->jl); /* stdout is gone: nothing left to tell it */
	if (!t->o->filter)
		return;
	sb_reset(&t->safe);
	tf_finish(&t->tf, &t->safe);
	if (t->safe.len && log_out_write(&t->lo, t->safe.buf, t->safe.len) < 0) {
		/* stdout is gone: nothing left to tell it */
	}
}

static void send_log(struct att *t)
{
	struct strbuf pl = STRBUF_INIT;

	t->log_id = conn_next_id(t->ctx->conn);
	put_str(&pl, t->ctx->cfg->remote.path);
	put_str(&pl, t->o->id);
	put_u64(&pl, t->res->offset);
	put_u32(&pl, t->first ? t->o->tail : 0);
	put_u8(&pl, (uint8_t)!!t->o->follow);
	conn_send(t->ctx->conn, GR_MSG_JOB_LOG, 0, t->log_id, pl.buf, pl.len);
	gr_trace("job: JOB_LOG from byte %llu", (unsigned long long)t->res->offset);
	sb_release(&pl);
}

/* --json, following: is the job still in the line? */
static void send_status(struct att *t)
{
	struct strbuf pl = STRBUF_INIT;

	t->st_id = conn_next_id(t->ctx->conn);
	put_str(&pl, t->ctx->cfg->remote.path);
	put_str(&pl, t->o->id);
	conn_send(t->ctx->conn, GR_MSG_JOB_STATUS, 0, t->st_id, pl.buf, pl.len);
	sb_release(&pl);
}

/* What a record says, as events: `queued` each time its place or reason
 * changes while it waits, `started` once it left the line. 0, or -1 with
 * errno (stdout is gone). */
static int say_rec(struct att *t, const struct job_rec *r)
{
	if (t->said_started)
		return 0;
	if (!strcmp(r->state, "queued") || !strcmp(r->state, "starting")) {
		const char *why = r->reason ? r->reason : "";
		if (!strcmp(r->state, "queued") &&
		    (!t->said_queued || r->queue_pos != t->said_pos || strcmp(why, t->said_why))) {
			t->said_queued = 1;
			t->said_pos = r->queue_pos;
			free(t->said_why);
			t->said_why = xstrdup(why);
			return job_event_queued(r);
		}
		return 0;
	}
	if (job_rec_ended(r) && !r->start_ms)
		return 0; /* it never left the line (stopped while it waited) */
	t->said_started = 1;
	return job_event_started(r, t->ctx->cfg->remote.host);
}

static int on_status_frame(struct att *t, const struct gr_frame *f)
{
	struct job_rec r = { 0 };
	struct gr_rd rd;
	struct gr_err e = { 0 };
	int rc = 0;

	t->st_id = 0;
	t->st_at = now_ms() + STATUS_EVERY_MS;
	if (f->type != GR_MSG_OK)
		return 0; /* the log's end says the rest */
	rd_init(&rd, f->payload, f->len);
	job_rec_get(&rd, &r);
	if (rd_done(&rd, &e, "JOB_STATUS") == 0 && job_rec_check(&r, &e) == 0 && say_rec(t, &r) < 0)
		rc = gr_errf(&t->ctx->err, GR_EIO, "cannot write the log: %s", strerror(errno));
	job_rec_clear(&r);
	return rc;
}

static void send_stop(struct att *t)
{
	struct strbuf pl = STRBUF_INIT;

	t->stop_id = conn_next_id(t->ctx->conn);
	job_stop_payload(&pl, t->ctx->cfg->remote.path, t->o->id, t->ctx->cfg->train.stop_grace);
	conn_send(t->ctx->conn, GR_MSG_JOB_STOP, 0, t->stop_id, pl.buf, pl.len);
	sb_release(&pl);
}

static void ask_stop(struct att *t)
{
	t->stop_sent = 1;
	t->res->stop_asked = 1;
	/* The answer to a key: said at once, on a line of its own. */
	log_out_break(&t->lo);
	if (!t->ctx->quiet)
		fprintf(stderr, "gpurun: stopping job %s (Ctrl-C again to leave at once)\n", t->o->id);
	if (t->ctx->conn)
		send_stop(t);
	else
		t->stop_resend = 1;
}

/* The question is answered: the terminal as it was, without the keys
 * typed meanwhile (none may reach the shell), and no "^C" echo while the
 * log goes on. */
static void end_asking(struct att *t)
{
	if (!t->asking)
		return;
	t->asking = 0;
	if (t->keys) {
		term_restore(1);
		term_set(0, TERM_NO_ECHOCTL);
		t->keys = 0;
	}
}

/* A second Ctrl-C: leave at once, the job as it is. Returns 1. */
static int leave_now(struct att *t)
{
	end_asking(t);
	t->res->interrupted = 1;
	log_out_break(&t->lo);
	fprintf(stderr, "gpurun: left job %s %s\n", t->o->id,
		t->stop_sent ? "while it is being stopped" : "running");
	fprintf(stderr, "hint: see it with 'gpurun status %s'\n", t->o->id);
	return 1;
}

/* Returns 1 when we leave the job now. */
static int on_sig(struct att *t, int sig)
{
	if (sig != SIGINT) {
		t->res->detached = 1;
		return 1;
	}
	if (++t->ints >= 2)
		return leave_now(t);
	if (t->o->on_interrupt == ATTACH_INT_LEAVE) {
		t->res->detached = 1;
		return 1;
	}
	if (t->o->stop_on_interrupt) {
		ask_stop(t);
		return 0;
	}
	if (!t->ctx->interactive) {
		t->res->detached = 1;
		return 1;
	}
	/* One key, no Enter: s, d, or Ctrl-C again (arriving as a byte, so
	 * no "^C" lands in the log). The log goes on below the question. */
	t->asking = 1;
	t->keys = term_set(0, TERM_KEY) == 0;
	log_out_break(&t->lo);
	fprintf(stderr, "gpurun: stop the job or detach? [s/d] (%s; Ctrl-C again leaves it running)\n",
		t->keys ? "one key" : "then Enter");
	return 0;
}

/* The answer to "stop or detach?": the first key that means something.
 * 1: leave now. */
static int on_answer(struct att *t)
{
	char buf[256];
	ssize_t n = read(0, buf, sizeof(buf));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0) {
		end_asking(t);
		t->res->detached = 1;
		return 1;
	}
	for (ssize_t i = 0; i < n; i++) {
		char c = buf[i];
		if (c == 's' || c == 'S') {
			end_asking(t);
			ask_stop(t);
			return 0;
		}
		if (c == 'd' || c == 'D') {
			end_asking(t);
			t->res->detached = 1;
			return 1;
		}
		if (c == 3) /* Ctrl-C, as a key */
			return leave_now(t);
	}
	if (!t->keys)
		fprintf(stderr, "gpurun: please answer s (stop the job) or d (detach): ");
	return 0;
}

static void fwd_notice(void *arg, const char *msg)
{
	struct att *t = arg;

	log_out_notice(&t->lo, "%s", msg);
}

/* A folder as the user would type it from here: relative when it is
 * below the current folder. */
static const char *shown_path(const char *path)
{
	char cwd[4096];
	size_t n;

	if (!getcwd(cwd, sizeof(cwd)))
		return path;
	n = strlen(cwd);
	if (!strncmp(path, cwd, n) && path[n] == '/' && path[n + 1])
		return path + n + 1;
	return path;
}

static void pull_done(struct att *t)
{
	struct art_stats st;
	struct gr_err e = { 0 };

	if (art_pull_finish(t->pull, &st, &e) < 0) {
		log_out_notice(&t->lo, "warning: artifact pull failed: %s", ts(e.msg));
	} else {
		if (st.extracted && !t->ctx->quiet)
			log_out_notice(&t->lo, "pulled %u file%s to %s/", st.extracted,
				       st.extracted == 1 ? "" : "s", shown_path(t->o->pull_dest));
		/* A closed stdout is told by the log's next write. */
		if (st.extracted && t->o->json)
			(void)job_event_pulled(t->o->id, &st);
	}
	art_stats_release(&st);
	t->pull = NULL;
	t->next_pull = now_ms() + (uint64_t)t->o->pull_interval * 1000;
}

static int on_log_frame(struct att *t, const struct gr_frame *f)
{
	struct gr_rd rd;
	struct gr_err *err = &t->ctx->err;

	rd_init(&rd, f->payload, f->len);
	if (f->type == GR_MSG_JOB_LOG_INFO) {
		char *id = get_str(&rd);
		uint64_t start = get_u64(&rd);
		free(id);
		if (rd_done(&rd, err, "JOB_LOG_INFO") < 0)
			return GR_EPROTO;
		if (t->first)
			t->res->offset = start;
		else if (start != t->res->offset)
			return gr_errf(err, GR_EPROTO, "the host resumed the log at byte %llu, not %llu",
				       (unsigned long long)start, (unsigned long long)t->res->offset);
		t->first = 0;
		return 0;
	}
	if (f->type == GR_MSG_JOB_LOG_DATA) {
		uint64_t at = get_u64(&rd), off = t->res->offset;
		if (rd.bad)
			return gr_errf(err, GR_EPROTO, "protocol error: malformed JOB_LOG_DATA");
		if (at > off)
			return gr_errf(err, GR_EPROTO, "the log skipped from byte %llu to %llu",
				       (unsigned long long)off, (unsigned long long)at);
		if (!off && rd.n)
			gr_trace("job: first log bytes");
		/* Bytes we showed already (a resend after a reconnect) are skipped. */
		if (at + rd.n > off) {
			size_t skip = (size_t)(off - at);
			int rc = out(t, rd.p + skip, rd.n - skip);
			if (rc < 0)
				return rc;
			t->res->offset = at + rd.n;
		}
		return 0;
	}
	if (f->type == GR_MSG_JOB_LOG_END) {
		uint64_t end = get_u64(&rd);
		job_rec_clear(&t->res->rec);
		job_rec_get(&rd, &t->res->rec);
		if (rd_done(&rd, err, "JOB_LOG_END") < 0)
			return GR_EPROTO;
		if (job_rec_check(&t->res->rec, err) < 0) {
			job_rec_clear(&t->res->rec);
			return GR_EPROTO;
		}
		(void)end;
		t->log_done = 1;
		t->res->ended = job_rec_ended(&t->res->rec);
		if (t->o->json && t->o->follow && say_rec(t, &t->res->rec) < 0)
			return gr_errf(err, GR_EIO, "cannot write the log: %s", strerror(errno));
		return 0;
	}
	if (f->type == GR_MSG_ERROR)
		return conn_error_from_frame(f, err);
	return 0;
}

static void on_stop_frame(struct att *t, const struct gr_frame *f)
{
	struct job_stop_report s;
	struct gr_err e = { 0 };

	t->stop_id = 0;
	if (f->type == GR_MSG_ERROR) {
		conn_error_from_frame(f, &e);
		fprintf(stderr, "gpurun: cannot stop job %s: %s\n", t->o->id, ts(e.msg));
		return;
	}
	if (job_stop_parse(f->payload, f->len, &s, &e) < 0) {
		fprintf(stderr, "gpurun: %s\n", ts(e.msg));
		return;
	}
	job_stop_print(&s, t->ctx->quiet);
	job_stop_report_free(&s);
}

static void lose_conn(struct att *t, const char *why)
{
	if (!t->lost_since) {
		t->lost_since = now_ms();
		if (!t->ctx->quiet)
			log_out_notice(&t->lo, "connection lost (%s); reconnecting", ts(why));
	}
	if (t->pull) {
		art_pull_abort(t->pull);
		t->pull = NULL;
		t->next_pull = now_ms() + 1000;
	}
	conn_close(t->ctx->conn);
	t->ctx->conn = NULL;
	t->log_id = t->ping_id = t->st_id = 0;
	if (t->stop_id) {
		t->stop_id = 0;
		t->stop_resend = 1; /* its answer is lost: ask again after reconnecting */
	}
}

/* Wait ms for a signal. Returns the signal or 0. */
static int sleep_sig(int ms)
{
	struct pollfd p = { wake.fd[0], POLLIN, 0 };

	return poll(&p, 1, ms) > 0 ? sig_wake_next(&wake) : 0;
}

static int reconnect(struct att *t)
{
	int backoff = 250, rc;

	for (;;) {
		gr_err_clear(&t->ctx->err);
		rc = ctx_connect(t->ctx);
		if (rc == 0)
			break;
		if (rc == GR_EHOSTKEY || rc == GR_EAUTH || rc == GR_ECONFIG)
			return rc; /* retrying will not help */
		if (now_ms() - t->lost_since > GIVE_UP_MS) {
			gr_err_prefix(&t->ctx->err, "gave up reconnecting");
			return rc;
		}
		if (t->ctx->verbose)
			log_out_notice(&t->lo, "reconnect failed (%s); next try in %d ms",
				       ts(t->ctx->err.msg), backoff);
		int sig = sleep_sig(backoff);
		if (sig) {
			/* No connection to ask a stop on: leave it running. */
			t->res->detached = 1;
			return 1;
		}
		backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
	}
	if (!t->ctx->quiet)
		log_out_notice(&t->lo, "reconnected");
	t->lost_since = 0;
	t->last_rx = t->conn_at = now_ms();
	t->conn_rx = 0;
	if (t->stop_resend && !t->res->ended) {
		t->stop_resend = 0;
		send_stop(t);
	}
	return 0;
}

static int loop(struct att *t)
{
	const struct attach_opts *o = t->o;
	struct gr_frame f;
	int rc;

	for (;;) {
		if (t->log_done && !t->pull)
			return 0;
		if (!t->ctx->conn) {
			if ((rc = reconnect(t)) != 0)
				return rc < 0 ? rc : 0;
		}
		if (!t->log_done && !t->log_id)
			send_log(t);
		uint64_t now = now_ms();
		int timeout = conn_idle_ms() < 5000 ? conn_idle_ms() : 5000;
		if (o->json && o->follow && !t->said_started && !t->log_done && !t->st_id) {
			if (now >= t->st_at)
				send_status(t);
			else if (t->st_at - now < (uint64_t)timeout)
				timeout = (int)(t->st_at - now);
		}
		if (o->pull && o->pull->n && o->pull_interval > 0 && !t->pull && !t->log_done) {
			if (now >= t->next_pull) {
				struct gr_err e = { 0 };
				if (art_pull_start(t->ctx->conn, t->ctx->cfg->remote.path, o->id, o->pull,
						   o->pull_dest, t->ctx->cfg->artifacts.min_free,
						   &t->pull, &e) < 0) {
					log_out_notice(&t->lo, "warning: artifact pull failed: %s", ts(e.msg));
					t->next_pull = now + (uint64_t)o->pull_interval * 1000;
				}
			} else if (t->next_pull - now < (uint64_t)timeout) {
				timeout = (int)(t->next_pull - now);
			}
		}
		struct pollfd extra[2] = { { wake.fd[0], POLLIN, 0 }, { 0, POLLIN, 0 } };
		rc = conn_wait(t->ctx->conn, &f, extra, t->asking ? 2 : 1, timeout, &t->ctx->err);
		if (rc < 0) {
			if (rc == GR_EPROTO)
				return rc;
			lose_conn(t, t->ctx->err.msg);
			continue;
		}
		if (rc == 2) {
			int c;
			if (extra[0].revents && (c = sig_wake_next(&wake)) && on_sig(t, c))
				return 0;
			if (t->asking && extra[1].revents && on_answer(t))
				return 0;
			continue;
		}
		now = now_ms();
		if (rc == 0) {
			/* A connection that is up but on which the agent has
			 * answered nothing, not even a keepalive, in
			 * GPURUN_IO_TIMEOUT: reconnecting to it will not help
			 * (a dropped connection is tried again, for up to
			 * GIVE_UP_MS). */
			int idle = conn_idle_ms();
			if (!t->conn_rx && now - t->conn_at >= (uint64_t)idle) {
				gr_errf(&t->ctx->err, GR_ETIMEOUT, "the agent on the host answered "
					"nothing for %d s", idle / 1000);
				gr_hintf(&t->ctx->err, "it may be stuck; GPURUN_IO_TIMEOUT sets how "
					 "long gpurun waits");
				return GR_ETIMEOUT;
			}
			if (t->ping_id && now - t->ping_at > DEAD_AFTER_MS) {
				lose_conn(t, "the host stopped answering");
			} else if (!t->ping_id && now - t->last_rx > PING_AFTER_MS) {
				t->ping_id = conn_next_id(t->ctx->conn);
				t->ping_at = now;
				conn_send(t->ctx->conn, GR_MSG_PING, 0, t->ping_id, NULL, 0);
			}
			continue;
		}
		t->last_rx = now;
		t->conn_rx = 1;
		if (f.id == t->log_id && t->log_id) {
			if ((rc = on_log_frame(t, &f)) < 0)
				return rc;
		} else if (t->pull && f.id == art_pull_id(t->pull)) {
			if (art_pull_frame(t->pull, &f))
				pull_done(t);
		} else if (t->stop_id && f.id == t->stop_id) {
			on_stop_frame(t, &f);
		} else if (t->st_id && f.id == t->st_id) {
			if ((rc = on_status_frame(t, &f)) < 0)
				return rc;
		} else if (t->ping_id && f.id == t->ping_id) {
			t->ping_id = 0;
		}
	}
}

int job_attach(struct gr_ctx *ctx, const struct attach_opts *o, struct attach_result *res)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct att t = { 0 };
	int rc;

	*res = (struct attach_result){ 0 };
	res->offset = o->offset;
	t.ctx = ctx;
	t.o = o;
	t.res = res;
	t.first = 1;
	t.log_id = o->log_id;
	t.last_rx = t.conn_at = now_ms();
	t.next_pull = now_ms() + (uint64_t)o->pull_interval * 1000;
	tf_init(&t.tf);
	if (sig_wake_start(&wake, sigs, GR_ARRAY_SIZE(sigs), 0) < 0)
		return gr_errf(&ctx->err, GR_EIO, "pipe: %s", strerror(errno));
	sigset_t ours;
	sigemptyset(&ours);
	sigaddset(&ours, SIGINT);
	sigaddset(&ours, SIGTERM);
	sigaddset(&ours, SIGHUP);
	sigprocmask(SIG_UNBLOCK, &ours, NULL); /* train blocks them until now */
	log_out_init(&t.lo, o->out_fd);
	/* What the forwarded ports have to say waits for a line boundary too. */
	void (*fwd_fn)(void *, const char *) = fwd_notice;
	void *fwd_arg = &t;
	if (ctx->fwd)
		fwd_swap_notify(ctx->fwd, &fwd_fn, &fwd_arg);
	/* A Ctrl-C echoed as "^C" would land in the middle of a log line. */
	if (o->follow && ctx->interactive)
		term_set(0, TERM_NO_ECHOCTL);
	if ((rc = ctx_connect(ctx)) == 0)
		rc = loop(&t);
	if (t.pull)
		art_pull_abort(t.pull);
	end_asking(&t);
	/* After a Ctrl-C, keys typed were answers, never for the shell. */
	term_restore(t.ints > 0);
	out_finish(&t);
	log_out_flush(&t.lo);
	if (ctx->fwd)
		fwd_swap_notify(ctx->fwd, &fwd_fn, &fwd_arg);
	sig_wake_stop(&wake);
	log_out_release(&t.lo);
	sb_release(&t.safe);
	json_log_release(&t.jl);
	free(t.said_why);
	/* The user's own stop ended it: they are watching already. */
	if (rc == 0 && o->notify_end && res->ended && !res->stop_asked)
		job_notify_local(ctx, &res->rec);
	return rc;
}
