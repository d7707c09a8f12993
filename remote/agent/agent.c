/* gpurun-agent: the only program that touches the host's filesystem and
 * processes on gpurun's behalf. It speaks the framed protocol (proto.h) on
 * stdin/stdout and answers the fixed request tables of its modules. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"

#include "agent_hash.h"
#include "sig_wake.h"

#define OUT_HIGH_WATER (8u << 20)
#define KEEPALIVE_MS 5000
/* agent_out_drain gives up on a client that took nothing for this long
 * (the client's own bound on silence, GPURUN_IO_TIMEOUT, is 120 s) */
#define DRAIN_IDLE_MS 120000

struct stream {
	uint32_t id;
	const struct agent_stream_ops *ops;
	void *st;
};

struct watch {
	int fd;
	short events;
	agent_fd_cb cb;
	void *arg;
};

struct childw {
	pid_t pid;
	agent_child_cb cb;
	void *arg;
};

struct timer {
	int period_ms;
	uint64_t next;
	agent_timer_cb cb;
	void *arg;
};

struct agent {
	struct strbuf in;
	size_t in_off;
	struct strbuf out;
	size_t out_off;
	int in_eof, out_broken;
	struct stream *streams;
	size_t nstreams;
	struct watch *watches;
	size_t nwatches;
	struct childw *children;
	size_t nchildren;
	struct timer *timers;
	size_t ntimers;
	uint64_t last_alive;
};

/* The agent serving this process, for agent_keepalive (one per process). */
static struct agent *serving;
static pthread_t serving_thread;


/* The request tables this agent answers (agent_serve's argument). */
static const struct agent_handler *const *handler_tables;

const char *agent_home(void)
{
	const char *h = getenv("HOME");
	return h && *h ? h : "/";
}

const char *agent_cache_dir(void)
{
	static char *dir;
	const char *x = getenv("XDG_CACHE_HOME");

	if (!dir)
		dir = x && x[0] == '/' ? xasprintf("%s/gpurun", x)
				       : xasprintf("%s/.cache/gpurun", agent_home());
	return dir;
}

static char *jobs_dir_conf;

const char *agent_jobs_dir_conf(void)
{
	return jobs_dir_conf ? jobs_dir_conf : "";
}

void agent_jobs_dir_set(const char *dir)
{
	free(jobs_dir_conf);
	jobs_dir_conf = xstrdup(dir ? dir : "");
}

char *agent_path(const char *p)
{
	if (p[0] == '~' && (p[1] == '\0' || p[1] == '/'))
		return xasprintf("%s%s", agent_home(), p + 1);
	if (p[0] == '/')
		return xstrdup(p);
	return xasprintf("%s/%s", agent_home(), p);
}

void agent_send(struct agent *a, uint16_t type, uint16_t flags, uint32_t id,
		const void *payload, size_t n)
{
	if (a->out_broken)
		return;
	proto_frame_append(&a->out, type, flags, id, payload, n);
}

ssize_t agent_send_read(struct agent *a, uint16_t type, uint32_t id, int fd, size_t max)
{
	if (max > GR_FRAME_MAX)
		max = GR_FRAME_MAX;
	sb_grow(&a->out, GR_FRAME_HDR + max);
	ssize_t r = read(fd, a->out.buf + a->out.len + GR_FRAME_HDR, max);
	if (r > 0 && !a->out_broken) {
		proto_hdr_encode((uint8_t *)a->out.buf + a->out.len, (uint32_t)r, type, 0, id);
		a->out.len += GR_FRAME_HDR + (size_t)r;
	}
	return r;
}

void agent_ok(struct agent *a, uint32_t id, const void *payload, size_t n)
{
	agent_send(a, GR_MSG_OK, GR_F_END, id, payload, n);
}

void agent_fail(struct agent *a, uint32_t id, int code, const char *fmt, ...)
{
	struct strbuf msg = STRBUF_INIT, pl = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	sb_vaddf(&msg, fmt, ap);
	va_end(ap);
	proto_error_payload(&pl, code, msg.buf);
	agent_send(a, GR_MSG_ERROR, GR_F_END, id, pl.buf, pl.len);
	sb_release(&msg);
	sb_release(&pl);
}

static void write_output(struct agent *a);

void agent_keepalive(void)
{
	struct agent *a = serving;
	uint64_t now = now_ms();

	if (!a || !pthread_equal(pthread_self(), serving_thread) ||
	    now - a->last_alive < KEEPALIVE_MS)
		return;
	a->last_alive = now;
	if (!agent_out_pending(a)) /* else those bytes say it as well */
		agent_send(a, GR_MSG_KEEPALIVE, 0, 0, NULL, 0);
	write_output(a);
}

size_t agent_out_pending(struct agent *a)
{
	return a->out.len - a->out_off;
}

int agent_out_full(struct agent *a)
{
	return agent_out_pending(a) >= OUT_HIGH_WATER;
}

static void write_output(struct agent *a);

int agent_out_drain(struct agent *a)
{
	uint64_t since = now_ms();

	while (agent_out_full(a) && !a->out_broken) {
		size_t before = agent_out_pending(a);
		struct pollfd p = { 1, POLLOUT, 0 };
		if (poll(&p, 1, 1000) < 0 && errno != EINTR)
			a->out_broken = 1;
		write_output(a);
		if (agent_out_pending(a) < before)
			since = now_ms();
		else if (now_ms() - since > DRAIN_IDLE_MS)
			return -1;
	}
	return a->out_broken ? -1 : 0;
}

static struct stream *find_stream(struct agent *a, uint32_t id)
{
	for (size_t i = 0; i < a->nstreams; i++)
		if (a->streams[i].id == id)
			return &a->streams[i];
	return NULL;
}

void agent_stream_open(struct agent *a, uint32_t id,
		       const struct agent_stream_ops *ops, void *st)
{
	a->streams = xrealloc(a->streams, (a->nstreams + 1) * sizeof(*a->streams));
	a->streams[a->nstreams++] = (struct stream){ id, ops, st };
}

void agent_stream_close(struct agent *a, uint32_t id)
{
	for (size_t i = 0; i < a->nstreams; i++) {
		if (a->streams[i].id != id)
			continue;
		struct stream s = a->streams[i];
		a->streams[i] = a->streams[--a->nstreams];
		if (s.ops->on_close)
			s.ops->on_close(a, id, s.st);
		return;
	}
}

void agent_watch_fd(struct agent *a, int fd, short events, agent_fd_cb cb, void *arg)
{
	for (size_t i = 0; i < a->nwatches; i++)
		if (a->watches[i].fd == fd) {
			a->watches[i] = (struct watch){ fd, events, cb, arg };
			return;
		}
	a->watches = xrealloc(a->watches, (a->nwatches + 1) * sizeof(*a->watches));
	a->watches[a->nwatches++] = (struct watch){ fd, events, cb, arg };
}

void agent_unwatch_fd(struct agent *a, int fd)
{
	for (size_t i = 0; i < a->nwatches; i++)
		if (a->watches[i].fd == fd) {
			a->watches[i].fd = -1; /* compacted by the loop */
			return;
		}
}

void agent_watch_child(struct agent *a, pid_t pid, agent_child_cb cb, void *arg)
{
	a->children = xrealloc(a->children, (a->nchildren + 1) * sizeof(*a->children));
	a->children[a->nchildren++] = (struct childw){ pid, cb, arg };
}

void agent_add_timer(struct agent *a, int period_ms, agent_timer_cb cb, void *arg)
{
	a->timers = xrealloc(a->timers, (a->ntimers + 1) * sizeof(*a->timers));
	a->timers[a->ntimers++] = (struct timer){ period_ms, now_ms() + (uint64_t)period_ms, cb, arg };
}

void agent_del_timer(struct agent *a, agent_timer_cb cb, void *arg)
{
	for (size_t i = 0; i < a->ntimers; i++)
		if (a->timers[i].cb == cb && a->timers[i].arg == arg) {
			a->timers[i].cb = NULL; /* compacted by the loop */
			return;
		}
}

static const struct agent_handler *find_handler(uint16_t type)
{
	for (size_t t = 0; handler_tables && handler_tables[t]; t++)
		for (const struct agent_handler *h = handler_tables[t]; h->type; h++)
			if (h->type == type)
				return h;
	return NULL;
}

static void dispatch(struct agent *a, const struct gr_frame *f)
{
	struct stream *s = find_stream(a, f->id);
	struct gr_err err = { 0 };
	int rc;

	if (s && f->id) {
		if (f->type == GR_MSG_CANCEL) {
			agent_stream_close(a, f->id);
			return;
		}
		if (f->type == GR_MSG_DATA && s->ops->on_data)
			rc = s->ops->on_data(a, f->id, s->st, f->payload, f->len,
					     !!(f->flags & GR_F_END), &err);
		else if (s->ops->on_frame)
			rc = s->ops->on_frame(a, f->id, s->st, f, &err);
		else
			rc = gr_errf(&err, GR_EPROTO, "unexpected %s frame for request %u",
				     proto_msg_name(f->type), f->id);
		if (rc < 0) {
			agent_fail(a, f->id, err.code ? err.code : rc, "%s", err.msg);
			agent_stream_close(a, f->id);
		}
		return;
	}
	if (f->type == GR_MSG_DATA || f->type == GR_MSG_CANCEL ||
	    f->type == GR_MSG_STDIN || f->type == GR_MSG_SIGNAL)
		return; /* late frames for a request that already ended */

	const struct agent_handler *h = find_handler(f->type);
	if (!h) {
		agent_fail(a, f->id, GR_EPROTO, "unknown request type 0x%02x", f->type);
		return;
	}
	struct gr_rd rd;
	rd_init(&rd, f->payload, f->len);
	rc = h->start(a, f->id, &rd, &err);
	if (rc < 0)
		agent_fail(a, f->id, err.code ? err.code : rc, "%s",
			   err.msg[0] ? err.msg : gr_strcode(rc));
}

/* SIGCHLD wakes the loop (sig_wake.h). One agent a process. */
static struct sig_wake chld_wake = { .fd = { -1, -1 } };

static void reap_children(struct agent *a)
{
	int status;
	pid_t pid;

	sig_wake_drain(&chld_wake);
	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (size_t i = 0; i < a->nchildren; i++) {
			if (a->children[i].pid != pid)
				continue;
			struct childw c = a->children[i];
			a->children[i] = a->children[--a->nchildren];
			c.cb(a, pid, status, c.arg);
			break;
		}
	}
}

static void parse_input(struct agent *a);

static void read_input(struct agent *a)
{
	sb_grow(&a->in, 256 * 1024);
	ssize_t r = read(0, a->in.buf + a->in.len, a->in.alloc - a->in.len - 1);
	if (r < 0) {
		if (errno == EINTR || errno == EAGAIN)
			return;
		a->in_eof = 1;
		return;
	}
	if (r == 0) {
		a->in_eof = 1;
		return;
	}
	a->in.len += (size_t)r;
	parse_input(a);
}

/* Dispatch every whole frame in a->in. */
static void parse_input(struct agent *a)
{
	struct gr_err err = { 0 };

	for (;;) {
		struct gr_frame f;
		size_t used;
		int rc = proto_parse((uint8_t *)a->in.buf + a->in_off,
				     a->in.len - a->in_off, &f, &used, &err);
		if (rc < 0) {
			/* The stream is out of step: nothing after this can be
			 * trusted. Say why and stop reading. */
			agent_fail(a, 0, rc, "%s", err.msg);
			a->in_eof = 1;
			return;
		}
		if (rc == 0)
			break;
		a->in_off += used;
		dispatch(a, &f);
	}
	if (a->in_off == a->in.len) {
		a->in.len = a->in_off = 0;
	} else if (a->in_off > (1u << 20) && a->in_off >= a->in.len - a->in_off) {
		/* Never move more than was consumed: each byte moves at most
		 * once, whatever the backlog. */
		memmove(a->in.buf, a->in.buf + a->in_off, a->in.len - a->in_off);
		a->in.len -= a->in_off;
		a->in_off = 0;
	}
}

static void write_output(struct agent *a)
{
	while (agent_out_pending(a)) {
		ssize_t w = write(1, a->out.buf + a->out_off, agent_out_pending(a));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				a->out_broken = 1;
			break;
		}
		a->out_off += (size_t)w;
	}
	if (a->out_broken || a->out_off == a->out.len) {
		a->out.len = a->out_off = 0;
	} else if (a->out_off > (1u << 20) && a->out_off >= agent_out_pending(a)) {
		/* Only when the move is no larger than what was written since
		 * the last one: an 8 MiB backlog drained 64 KiB at a time
		 * (sshd's pipe) was moved whole every 1 MiB, 7 copies of
		 * every byte sent (issue 13's pull profile). */
		memmove(a->out.buf, a->out.buf + a->out_off, agent_out_pending(a));
		a->out.len -= a->out_off;
		a->out_off = 0;
	}
}

static int run_timers(struct agent *a)
{
	uint64_t now = now_ms();
	int wait = -1;

	for (size_t i = 0; i < a->ntimers; i++) {
		if (a->timers[i].cb && a->timers[i].next <= now) {
			a->timers[i].next = now + (uint64_t)a->timers[i].period_ms;
			a->timers[i].cb(a, a->timers[i].arg);
		}
	}
	for (size_t i = 0; i < a->ntimers;) {
		if (!a->timers[i].cb) {
			a->timers[i] = a->timers[--a->ntimers];
			continue;
		}
		int left = (int)(a->timers[i].next > now ? a->timers[i].next - now : 0);
		if (wait < 0 || left < wait)
			wait = left;
		i++;
	}
	return wait;
}

static void send_hello(struct agent *a, uint32_t id);

/* The requests that came inside the bootstrap command (hex, see
 * conn_opts.early), taken as if they were the first bytes on stdin. */
static int hex_val(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	return -1;
}

static int take_early(struct agent *a, char *hex)
{
	size_t n = strlen(hex);

	if (n % 2 || n > 2 * GR_EARLY_MAX)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (hex_val(hex[i]) < 0)
			return -1;
	for (size_t i = 0; i < n; i += 2) {
		unsigned char b = (unsigned char)(hex_val(hex[i]) << 4 | hex_val(hex[i + 1]));
		sb_add(&a->in, &b, 1);
	}
	memset(hex, 0, n); /* out of the process list */
	parse_input(a);
	return 0;
}

int agent_serve(const struct agent_handler *const *tables, char *early)
{
	struct agent a = { 0 };
	struct pollfd *pfd = NULL;
	size_t pfd_alloc = 0;

	static const int chld[] = { SIGCHLD };
	if (sig_wake_start(&chld_wake, chld, 1, SA_RESTART | SA_NOCLDSTOP) < 0) {
		perror("gpurun-agent: pipe");
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	set_nonblock(0, 1);
	set_nonblock(1, 1);
	handler_tables = tables;
	serving = &a;
	serving_thread = pthread_self();
	a.last_alive = now_ms();
	/* Unasked, so the client learns who we are without a round trip. */
	send_hello(&a, 0);
	/* Out now: an early request can take long (SYNC_PREPARE walks the
	 * tree), and the client's wait for HELLO is bounded. */
	write_output(&a);
	if (early && take_early(&a, early) < 0)
		agent_fail(&a, 0, GR_EPROTO, "the requests in the command line are not hex frames");

	while (!(a.in_eof && (!agent_out_pending(&a) || a.out_broken))) {
		int timeout = run_timers(&a);
		size_t n = 0, nw;

		/* A request still open (a helper at work, a command, a log
		 * followed): say so every KEEPALIVE_MS, so the client's bound on
		 * silence (GPURUN_IO_TIMEOUT) waits for it however long it takes. */
		if (a.nchildren || a.nstreams) {
			agent_keepalive();
			if (timeout < 0 || timeout > KEEPALIVE_MS)
				timeout = KEEPALIVE_MS;
		}

		/* compact watch list */
		for (size_t i = 0; i < a.nwatches;)
			if (a.watches[i].fd < 0)
				a.watches[i] = a.watches[--a.nwatches];
			else
				i++;
		nw = a.nwatches;
		if (pfd_alloc < nw + 3) {
			pfd_alloc = nw + 3;
			pfd = xrealloc(pfd, pfd_alloc * sizeof(*pfd));
		}
		pfd[n++] = (struct pollfd){ chld_wake.fd[0], POLLIN, 0 };
		/* Backpressure: while replies pile up, read neither requests nor
		 * watched producers. */
		int full = agent_out_full(&a);
		pfd[n++] = (struct pollfd){ a.in_eof || full ? -1 : 0, POLLIN, 0 };
		pfd[n++] = (struct pollfd){ agent_out_pending(&a) && !a.out_broken ? 1 : -1,
					    POLLOUT, 0 };
		for (size_t i = 0; i < nw; i++) {
			short ev = a.watches[i].events;
			if (full)
				ev &= (short)~POLLIN;
			pfd[n++] = (struct pollfd){ ev ? a.watches[i].fd : -1, ev, 0 };
		}
		if (poll(pfd, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			perror("gpurun-agent: poll");
			break;
		}
		if (pfd[0].revents)
			reap_children(&a);
		if (pfd[1].revents)
			read_input(&a);
		if (pfd[2].revents & (POLLOUT | POLLERR | POLLHUP))
			write_output(&a);
		for (size_t i = 0; i < nw; i++) {
			if (!pfd[3 + i].revents || i >= a.nwatches)
				continue;
			struct watch w = a.watches[i];
			if (w.fd >= 0 && w.fd == pfd[3 + i].fd)
				w.cb(&a, w.fd, pfd[3 + i].revents, w.arg);
		}
		if (agent_out_pending(&a))
			write_output(&a);
		if (a.in_eof) {
			/* The client is gone: abandon every open request. */
			while (a.nstreams)
				agent_stream_close(&a, a.streams[0].id);
		}
	}
	while (a.nstreams)
		agent_stream_close(&a, a.streams[0].id);
	serving = NULL;
	free(pfd);
	free(a.streams);
	free(a.watches);
	free(a.children);
	free(a.timers);
	sb_release(&a.in);
	sb_release(&a.out);
	return 0;
}

/* core handlers */

static void send_hello(struct agent *a, uint32_t id)
{
	struct strbuf pl = STRBUF_INIT;
	struct utsname u;

	if (uname(&u) < 0)
		snprintf(u.machine, sizeof(u.machine), "unknown");
	put_u32(&pl, GR_PROTO_VERSION);
	put_str(&pl, GR_AGENT_HASH);
	put_str(&pl, u.machine);
	put_str(&pl, agent_home());
	put_u32(&pl, (uint32_t)getpid());
	agent_send(a, GR_MSG_HELLO, GR_F_END, id, pl.buf, pl.len);
	sb_release(&pl);
}

/* The client's HELLO: its version and what the agent must know before any
 * request (PROTOCOL.md). Sent with id 0, first, it is a notice: the
 * agent's own HELLO already said who it is, so nothing answers it. */
static int h_hello(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	uint32_t v = get_u32(rd);
	char *jobs_dir = get_str(rd);
	int rc = rd_done(rd, err, "HELLO");

	if (rc == 0 && v != GR_PROTO_VERSION)
		rc = gr_errf(err, GR_EPROTO, "protocol version %u is not supported (agent speaks %u)",
			     v, GR_PROTO_VERSION);
	if (rc == 0 && jobs_dir)
		agent_jobs_dir_set(jobs_dir);
	if (rc == 0 && id)
		send_hello(a, id);
	free(jobs_dir);
	return rc;
}

static int h_ping(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	(void)rd;
	(void)err;
	agent_ok(a, id, NULL, 0);
	return 0;
}

const struct agent_handler agent_core_handlers[] = {
	{ GR_MSG_HELLO, "hello", h_hello },
	{ GR_MSG_PING, "ping", h_ping },
	{ 0, NULL, NULL },
};
