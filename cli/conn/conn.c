/* Framed connection to the agent, and its bootstrap: one round trip runs
 * the cached agent, or says it needs one; then the gzip-compressed agent
 * for the host's architecture (gpurun embeds one per architecture at build
 * time) is written to a temp name and renamed, so two first connections at
 * once cannot corrupt it. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conn.h"
#include "forward.h"
#include "term.h"

#include "agent_hash.h"
#include "agent_sum.h"

/* The agents this gpurun carries (the Makefile's agent_blob.o and
 * agent_sum.h), named as `uname -m` names their architecture on Linux. */
extern const unsigned char gr_agent_blob_x86_64[], gr_agent_blob_x86_64_end[];
extern const unsigned char gr_agent_blob_aarch64[], gr_agent_blob_aarch64_end[];

static const struct agent_build {
	const char *arch;
	const unsigned char *blob, *end;
	const char *cksum; /* POSIX cksum of the agent file: CRC and size */
} agent_builds[] = {
	{ "x86_64", gr_agent_blob_x86_64, gr_agent_blob_x86_64_end, GR_AGENT_CKSUM_x86_64 },
	{ "aarch64", gr_agent_blob_aarch64, gr_agent_blob_aarch64_end, GR_AGENT_CKSUM_aarch64 },
};
#define NBUILDS (sizeof(agent_builds) / sizeof(agent_builds[0]))

static size_t blob_size(const struct agent_build *b) { return (size_t)(b->end - b->blob); }

/* The agent for a host that says `uname -s` OS and `uname -m` ARCH, or
 * NULL. Linux only; arm64 is another name for aarch64. */
static const struct agent_build *agent_for(const char *os, const char *arch)
{
	if (strcmp(os, "Linux"))
		return NULL;
	if (!strcmp(arch, "arm64"))
		arch = "aarch64";
	for (size_t i = 0; i < NBUILDS; i++)
		if (!strcmp(agent_builds[i].arch, arch))
			return &agent_builds[i];
	return NULL;
}

/* What the host can make us hold. Unparsed input: one whole frame and a
 * little more while we read frames (conn_wait then has a frame to hand
 * out, so reading stops until it is taken); while we are busy writing
 * (conn_flush_idle) we must keep reading so the agent never blocks on us, up to
 * CONN_HELD_MAX. Frames for other requests kept by conn_request: at most
 * CONN_HELD_MAX bytes too. Past that, the host is not an agent. */
#define CONN_IN_SOFT (GR_FRAME_HDR + GR_FRAME_MAX + (256u << 10))
#define CONN_HELD_MAX (256u << 20)

struct pending {
	uint16_t type, flags;
	uint32_t id;
	struct strbuf payload;
};

struct gr_conn {
	struct gr_transport *t;
	struct strbuf in;
	size_t in_off;
	struct strbuf out;
	size_t out_off;
	int eof;
	uint32_t next_id;
	struct gr_hello hello;
	struct pending *pend;
	size_t npend;
	size_t npend_bytes; /* bytes in pend (payloads and headers) */
	struct strbuf held; /* payload of the last pending frame handed out */
	int verbose;
	char boot_arch[32];           /* the architecture the boot script chose */
	tr_say_fn say;                /* notices (conn_opts.say) */
	void *say_arg;
	const struct conn_opts *opts; /* during conn_open only */
	struct strbuf later;          /* early frames too many for the command */
	char *jobs_dir;               /* [remote] jobs_dir, for our HELLO (during conn_open) */
	struct fwd *fwd;              /* forwarded ports, served while waiting */
	uint64_t fwd_at;              /* now_ms() when they were last served */
	struct pollfd *pfd;           /* wait_io's array */
	size_t pfd_cap;
	uint64_t last_io;             /* now_ms() when a byte last moved either way */
};

static char *conn_bootstrap_script(const char *hash)
{
	/* GPURUN_AGENT_UNCHECKED=1: run the file there as it is (an agent
	 * wrapped in strace or time on the host, as the tests do); the
	 * permission check stays. */
	const char *unchecked = getenv("GPURUN_AGENT_UNCHECKED");
	int check = !(unchecked && !strcmp(unchecked, "1"));
	struct strbuf arches = STRBUF_INIT;
	char *script;

	/* One case per agent carried: its cksum and its gzip'd size. */
	for (size_t i = 0; i < NBUILDS; i++)
		sb_addf(&arches, "'Linux %s') k='%s' n=%zu;; ", agent_builds[i].arch,
			agent_builds[i].cksum, blob_size(&agent_builds[i]));

	/* POSIX sh only: nothing may be assumed on the host but sshd. A
	 * login banner or noisy rc file may print before us, so the client
	 * looks for the GPURUN- lines and skips anything else.
	 * The host's `uname -m` chooses the agent, cached under a name with
	 * the architecture in it: a home shared by x86_64 and aarch64 hosts
	 * keeps one of each. A platform this gpurun has no agent for says
	 * so at once ("need"), and the client refuses it.
	 * The cache is ${XDG_CACHE_HOME:-$HOME/.cache}/gpurun (XDG: a
	 * relative XDG_CACHE_HOME is ignored). The agent runs as the user:
	 * the file and every folder down to it from the home folder (from /
	 * for a cache outside it) must be the user's (or root's) and
	 * writable by nobody else (OpenSSH's StrictModes; a folder above
	 * the cache may be a sticky one like /tmp, where others can add
	 * names but not take over ours, as the agent's safe_dir.c allows),
	 * or another account could have put its own program there (issue
	 * 29); ck lists
	 * those folders, in a function so its `set --` leaves the script's
	 * "$@" alone. And its content must be what this gpurun uploads
	 * (POSIX cksum, 4 ms for the agent: a file damaged since, or left
	 * by another build under the same name, is sent again, atomically,
	 * never run). find -H looks through a symlinked folder it is given
	 * (~/.cache, say) to what it names. */
	script = xasprintf(
		"s=$(uname -s); m=$(uname -m); case $m in arm64) m=aarch64;; esac; "
		"case \"$s $m\" in %s*) echo; echo \"GPURUN-BOOT need $s $m\"; exit 3;; esac; "
		"c=${XDG_CACHE_HOME:-}; case $c in /*) ;; *) c=\"$HOME/.cache\";; esac; "
		"d=\"$c/gpurun\"; a=\"$d/agent-%s-$m\"; "
		"ck() { r=${c#\"$HOME\"/}; if [ \"$r\" = \"$c\" ]; then p=; r=${c#/}; set -- /; "
		"else p=$HOME; set -- \"$HOME\"; fi; "
		"while [ -n \"$r\" ]; do p=\"$p/${r%%%%/*}\"; set -- \"$@\" \"$p\"; "
		"case $r in */*) r=${r#*/};; *) r=;; esac; done; "
		"{ find -H \"$@\" -prune \\( ! -user \"$(id -u)\" ! -user 0 "
		"-o \\( -perm -020 -o -perm -002 \\) ! -perm -1000 \\) -print; "
		"find -H \"$d\" \"$a\" -prune \\( ! -user \"$(id -u)\" ! -user 0 "
		"-o -perm -020 -o -perm -002 \\) -print; } 2>/dev/null | head -n 1; }; "
		"w=$(ck); "
		"if [ -n \"$w\" ]; then echo; echo \"GPURUN-BOOT unsafe $w\"; exit 6; fi; "
		"if [ -x \"$a\" ] && %s; then "
		"echo; echo \"GPURUN-BOOT have $m\"; exec \"$a\" serve \"$@\"; fi; "
		"echo; echo \"GPURUN-BOOT need $s $m\"; "
		"read -r ans || exit 3; [ \"$ans\" = send ] || exit 3; "
		"(umask 077 && mkdir -p \"$d\") || exit 4; t=\"$a.tmp.$$\"; "
		"if head -c $n | gzip -dc > \"$t\" && chmod 755 \"$t\" && mv -f \"$t\" \"$a\"; "
		"then exec \"$a\" serve \"$@\"; fi; rm -f \"$t\"; echo \"GPURUN-BOOT failed $d\"; exit 5",
		arches.buf, hash,
		check ? "[ \"$(cksum < \"$a\" | cut -d' ' -f1,2)\" = \"$k\" ]" : "true");
	sb_release(&arches);
	return script;
}

const struct gr_hello *conn_hello(const struct gr_conn *c) { return &c->hello; }

uint32_t conn_next_id(struct gr_conn *c)
{
	if (++c->next_id == 0)
		c->next_id = 1;
	return c->next_id;
}

void conn_send(struct gr_conn *c, uint16_t type, uint16_t flags, uint32_t id,
	       const void *payload, size_t n)
{
	proto_frame_append(&c->out, type, flags, id, payload, n);
}

size_t conn_pending(const struct gr_conn *c)
{
	return c->out.len - c->out_off;
}

static void raw_send(struct gr_conn *c, const void *p, size_t n)
{
	sb_add(&c->out, p, n);
}

int conn_pump(struct gr_conn *c, struct gr_err *err)
{
	while (conn_pending(c)) {
		size_t n = conn_pending(c);
		ssize_t w = c->t->ops->write(c->t, c->out.buf + c->out_off,
					     n > (1u << 20) ? (1u << 20) : n, err);
		if (w == GR_TR_AGAIN)
			break;
		if (w < 0)
			return (int)w;
		if (w > 0)
			c->last_io = now_ms();
		c->out_off += (size_t)w;
	}
	if (c->out_off == c->out.len) {
		c->out.len = c->out_off = 0;
	} else if (c->out_off > (4u << 20)) {
		memmove(c->out.buf, c->out.buf + c->out_off, conn_pending(c));
		c->out.len -= c->out_off;
		c->out_off = 0;
	}
	return 0;
}

/* Bytes taken from the transport in one read: the unparsed input may
 * exceed its limit by at most this much. */
#define CONN_READ_CHUNK (256u << 10)

/* Read what is there now into c->in, until limit bytes wait unparsed:
 * backpressure. Past that we stop reading the transport, so its window
 * (ssh's, or the pipe's) fills and the agent stops sending, and what we
 * hold stays bounded by limit whatever the stream's length: parsed bytes
 * are dropped from the front as we go, so the buffer never holds more
 * than about twice limit. Returns 1 if bytes came, 0 if none, or an
 * error. EOF sets c->eof. */
static int fill(struct gr_conn *c, size_t limit, struct gr_err *err)
{
	int got = 0;

	for (;;) {
		size_t held = c->in.len - c->in_off;
		/* Drop what was parsed (a frame handed out is no longer
		 * needed: its payload lives until the next receive, which is
		 * this one). Moving at most what is freed keeps it cheap. */
		if (c->in_off && (!held || c->in_off >= held)) {
			memmove(c->in.buf, c->in.buf + c->in_off, held);
			c->in.len = held;
			c->in_off = 0;
			c->in.buf[c->in.len] = '\0';
		}
		if (held >= limit)
			return got;
		size_t want = limit - held < CONN_READ_CHUNK ? limit - held : CONN_READ_CHUNK;
		sb_grow(&c->in, want);
		ssize_t r = c->t->ops->read(c->t, c->in.buf + c->in.len, want, err);
		if (r == GR_TR_AGAIN)
			return got;
		if (r < 0)
			return (int)r;
		if (r == 0) {
			c->eof = 1;
			return got;
		}
		c->in.len += (size_t)r;
		c->in.buf[c->in.len] = '\0';
		c->last_io = now_ms();
		got = 1;
	}
}

/* One poll over the transport and extra fds. Returns 2 if an extra fd is
 * ready, 0 on timeout, 1 otherwise (transport progressed), or an error. */
static int wait_io(struct gr_conn *c, struct pollfd *extra, int nextra,
		   int timeout_ms, struct gr_err *err)
{
	struct pollfd *pfd;
	int tick_ms = -1, n, rc;
	size_t nall;

	if ((rc = c->t->ops->tick(c->t, &tick_ms, err)) < 0)
		return rc;
	/* Forwarded connections first: what the last reads took in for them
	 * (an open's confirmation, data, a close) wakes no poll. Their reads
	 * may take in the agent's bytes in turn: the transport's pollfds,
	 * asked next, sees those. */
	if (c->fwd)
		fwd_service(c->fwd, NULL, 0);
	if (c->pfd_cap < 16) {
		c->pfd_cap = 32;
		c->pfd = xrealloc(c->pfd, c->pfd_cap * sizeof(*c->pfd));
	}
	pfd = c->pfd;
	n = c->t->ops->pollfds(c->t, pfd, 1, conn_pending(c) > 0);
	if (nextra > 16 - n)
		nextra = 16 - n;
	for (int i = 0; i < nextra; i++) {
		extra[i].revents = 0;
		pfd[n + i] = extra[i];
	}
	if (tick_ms >= 0 && (timeout_ms < 0 || tick_ms < timeout_ms))
		timeout_ms = tick_ms;
	/* Forwarded connections wait in the same poll: one loop, one thread
	 * for the whole session (libssh2 allows nothing else). */
	nall = (size_t)(n + nextra);
	fwd_pollfds(c->fwd, &c->pfd, &c->pfd_cap, &nall, &timeout_ms);
	pfd = c->pfd;
	rc = poll(pfd, (nfds_t)nall, timeout_ms);
	if (rc < 0) {
		if (errno == EINTR)
			return 2 * (nextra > 0); /* let the caller check its signal pipe */
		return gr_errf(err, GR_EIO, "poll: %s", strerror(errno));
	}
	if (c->fwd) {
		fwd_service(c->fwd, pfd + n + nextra, nall - (size_t)(n + nextra));
		c->fwd_at = now_ms();
	}
	if (rc == 0)
		return 0;
	int extra_ready = 0;
	for (int i = 0; i < nextra; i++) {
		extra[i].revents = pfd[n + i].revents;
		if (extra[i].revents)
			extra_ready = 1;
	}
	return extra_ready ? 2 : 1;
}

int conn_error_from_frame(const struct gr_frame *f, struct gr_err *err)
{
	struct gr_rd rd;
	int code;
	char *msg;

	rd_init(&rd, f->payload, f->len);
	code = (int)get_u32(&rd);
	msg = get_str(&rd);
	if (rd.bad || code >= 0 || code < -99)
		code = GR_EREMOTE;
	/* The host's words, shown on a terminal: escaped (term_filter.h). */
	gr_errf(err, code, "%s", msg ? ts(msg) : "the agent reported an error");
	free(msg);
	return code;
}

static int try_parse(struct gr_conn *c, struct gr_frame *f, struct gr_err *err)
{
	size_t used;
	int rc;

	do { /* a KEEPALIVE only says the agent is busy: it moved bytes, that is all */
		rc = proto_parse((uint8_t *)c->in.buf + c->in_off, c->in.len - c->in_off, f,
				 &used, err);
		if (rc == 1)
			c->in_off += used;
	} while (rc == 1 && f->type == GR_MSG_KEEPALIVE && f->id == 0);
	return rc;
}

/* While frames keep coming, wait_io may not run for a long time: serve
 * the forwarded ports now and then anyway (a chatty log must not starve
 * a browser). */
static void fwd_tick(struct gr_conn *c)
{
	size_t n = 0;
	int timeout = 0;
	uint64_t now;

	if (!c->fwd || (now = now_ms()) - c->fwd_at < 20)
		return;
	c->fwd_at = now;
	fwd_pollfds(c->fwd, &c->pfd, &c->pfd_cap, &n, &timeout);
	if (n && poll(c->pfd, (nfds_t)n, 0) < 0)
		return;
	fwd_service(c->fwd, c->pfd, n);
}

int conn_wait(struct gr_conn *c, struct gr_frame *f, struct pollfd *extra,
	      int nextra, int timeout_ms, struct gr_err *err)
{
	uint64_t deadline = timeout_ms >= 0 ? now_ms() + (uint64_t)timeout_ms : 0;
	int rc;

	if (c->npend) {
		/* Hand out a frame kept by conn_request. */
		sb_release(&c->held);
		c->held = c->pend[0].payload;
		f->type = c->pend[0].type;
		f->flags = c->pend[0].flags;
		f->id = c->pend[0].id;
		f->len = (uint32_t)c->held.len;
		f->payload = (const uint8_t *)c->held.buf;
		memmove(c->pend, c->pend + 1, --c->npend * sizeof(*c->pend));
		c->npend_bytes -= c->held.len + GR_FRAME_HDR;
		return 1;
	}
	fwd_tick(c);
	for (;;) {
		if ((rc = try_parse(c, f, err)) != 0)
			return rc;
		if ((rc = conn_pump(c, err)) < 0)
			return rc;
		if ((rc = fill(c, CONN_IN_SOFT, err)) < 0)
			return rc;
		if ((rc = try_parse(c, f, err)) != 0)
			return rc;
		if (c->eof)
			return gr_errf(err, GR_ESSH, "connection to %s closed", c->t->desc);
		int left = -1;
		if (timeout_ms >= 0) {
			uint64_t now = now_ms();
			if (now >= deadline)
				return 0;
			left = (int)(deadline - now);
		}
		rc = wait_io(c, extra, nextra, left, err);
		if (rc < 0 || rc == 2)
			return rc;
	}
}

int conn_recv(struct gr_conn *c, struct gr_frame *f, int timeout_ms, struct gr_err *err)
{
	return conn_wait(c, f, NULL, 0, timeout_ms, err);
}

uint64_t conn_last_io(const struct gr_conn *c)
{
	return c->last_io;
}

#define IDLE_DEFAULT_S 120

int conn_idle_ms(void)
{
	const char *v = getenv("GPURUN_IO_TIMEOUT");
	char *end;
	long s = v && *v ? strtol(v, &end, 10) : 0;

	if (!v || !*v || *end || s <= 0 || s > 86400)
		s = IDLE_DEFAULT_S;
	return (int)s * 1000;
}

int conn_idle_check(struct gr_conn *c, int idle_ms, struct gr_err *err)
{
	uint64_t now = now_ms(), since = c->last_io > now ? now : c->last_io;

	if (now - since < (uint64_t)idle_ms)
		return 0;
	gr_errf(err, GR_ETIMEOUT, "%s sent and took nothing for %d s", c->t->desc, idle_ms / 1000);
	gr_hintf(err, "the agent on the host may be stuck, or the network gone; "
		 "GPURUN_IO_TIMEOUT sets how long gpurun waits");
	return GR_ETIMEOUT;
}

int conn_recv_idle(struct gr_conn *c, struct gr_frame *f, int idle_ms, struct gr_err *err)
{
	for (;;) {
		uint64_t now = now_ms(), since = c->last_io > now ? now : c->last_io;
		int rc = conn_idle_check(c, idle_ms, err);
		if (rc < 0)
			return rc;
		uint64_t left = (uint64_t)idle_ms - (now - since);
		rc = conn_recv(c, f, left > 1000 ? 1000 : (int)left, err);
		if (rc != 0)
			return rc;
	}
}

int conn_flush_idle(struct gr_conn *c, int idle_ms, struct gr_err *err)
{
	int rc;

	while (conn_pending(c)) {
		if ((rc = conn_pump(c, err)) < 0)
			return rc;
		if (!conn_pending(c))
			break;
		/* Keep reading while we write, so a chatty agent can't block us. */
		if ((rc = fill(c, CONN_HELD_MAX, err)) < 0)
			return rc;
		if (c->in.len - c->in_off >= CONN_HELD_MAX)
			return gr_errf(err, GR_EPROTO, "the host sent %zu MiB without reading what we sent",
				       (c->in.len - c->in_off) >> 20);
		if (c->eof)
			return gr_errf(err, GR_ESSH, "connection to %s closed", c->t->desc);
		if (idle_ms >= 0 && now_ms() - c->last_io >= (uint64_t)idle_ms) {
			gr_errf(err, GR_ETIMEOUT, "%s took nothing for %d s", c->t->desc,
				idle_ms / 1000);
			return GR_ETIMEOUT;
		}
		if ((rc = wait_io(c, NULL, 0, idle_ms >= 0 ? 1000 : -1, err)) < 0)
			return rc;
	}
	return 0;
}

uint32_t conn_last_id(const struct gr_conn *c)
{
	return c->next_id;
}

int conn_request(struct gr_conn *c, uint16_t type, const void *payload, size_t n,
		 struct strbuf *reply, struct gr_err *err)
{
	return conn_request_intr(c, type, payload, n, reply, -1, err);
}

int conn_request_intr(struct gr_conn *c, uint16_t type, const void *payload, size_t n,
		      struct strbuf *reply, int intr_fd, struct gr_err *err)
{
	uint32_t id = conn_next_id(c);
	struct gr_frame f;
	int rc, idle_ms = conn_idle_ms();

	conn_send(c, type, 0, id, payload, n);
	for (;;) {
		/* Look only at the wire here: pending frames belong to others. */
		size_t saved = c->npend;
		struct pollfd intr = { intr_fd, POLLIN, 0 };
		c->npend = 0;
		rc = conn_wait(c, &f, intr_fd >= 0 ? &intr : NULL, intr_fd >= 0, 1000, err);
		c->npend = saved;
		/* (a poll that a signal broke, with nothing in the pipe: again) */
		if (rc == 2 && intr.revents)
			return gr_errf(err, GR_ECANCEL, "interrupted");
		if (rc == 2)
			continue;
		if (rc == 0)
			rc = conn_idle_check(c, idle_ms, err);
		if (rc == 0)
			continue;
		if (rc < 0)
			return rc;
		if (f.id != id) {
			if (c->npend_bytes + f.len + GR_FRAME_HDR > CONN_HELD_MAX)
				return gr_errf(err, GR_EPROTO, "the host sent more than %u MiB of "
					       "answers to requests still waiting their turn",
					       CONN_HELD_MAX >> 20);
			c->npend_bytes += f.len + GR_FRAME_HDR;
			c->pend = xrealloc(c->pend, (c->npend + 1) * sizeof(*c->pend));
			struct pending *p = &c->pend[c->npend++];
			p->type = f.type;
			p->flags = f.flags;
			p->id = f.id;
			memset(&p->payload, 0, sizeof(p->payload));
			sb_add(&p->payload, f.payload, f.len);
			continue;
		}
		if (f.type == GR_MSG_ERROR)
			return conn_error_from_frame(&f, err);
		if (reply)
			sb_add(reply, f.payload, f.len);
		return 0;
	}
}

/* Read one line from the transport during bootstrap (before frames):
 * by deadline, and with no silence of idle_ms either way (a stopped
 * agent, a host that says nothing). */
static int read_line(struct gr_conn *c, struct strbuf *line, uint64_t deadline, int idle_ms,
		     struct gr_err *err)
{
	int rc;

	for (;;) {
		char *start = c->in.buf ? c->in.buf + c->in_off : NULL;
		char *nl = start ? memchr(start, '\n', c->in.len - c->in_off) : NULL;
		if (nl) {
			sb_reset(line);
			sb_add(line, start, (size_t)(nl - start));
			c->in_off += (size_t)(nl - start) + 1;
			return 0;
		}
		if (c->in.len - c->in_off > 65536)
			return gr_errf(err, GR_EAGENT, "the host sent a line too long to be gpurun's bootstrap");
		if ((rc = conn_pump(c, err)) < 0)
			return rc;
		if ((rc = fill(c, CONN_IN_SOFT, err)) < 0)
			return rc;
		if (rc == 1)
			continue;
		if (c->eof)
			return gr_errf(err, GR_EAGENT, "the host closed the connection before the agent started");
		uint64_t now = now_ms(), since = c->last_io > now ? now : c->last_io;
		if (now >= deadline)
			return gr_errf(err, GR_ETIMEOUT, "timed out waiting for the agent to start");
		if ((rc = conn_idle_check(c, idle_ms, err)) < 0)
			return rc;
		uint64_t left = deadline - now, quiet = (uint64_t)idle_ms - (now - since);
		if ((rc = wait_io(c, NULL, 0, (int)(quiet < left ? quiet : left), err)) < 0)
			return rc;
	}
}

/* The bootstrap's own bound, whatever moves meanwhile (a host whose
 * rc files talk on and on): a minute, or GPURUN_IO_TIMEOUT's silence if
 * that is longer. */
#define BOOT_MS 60000

/* A notice for the user, through the caller's conn_opts.say. */
static void say(struct gr_conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(struct gr_conn *c, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (!c->say)
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (msg)
		c->say(c->say_arg, msg);
	free(msg);
}

/* The silence the bootstrap waits out: GPURUN_IO_TIMEOUT, the one bound
 * on the agent (a stopped one fails in it, not in a minute), and over
 * ssh the handshake it may still be making ([remote] connect_timeout). */
static int boot_idle_ms(const struct gr_config *cfg)
{
	int ms = conn_idle_ms();

	if (cfg && cfg->remote.connect_timeout > 0 && cfg->remote.connect_timeout <= 86400)
		ms += cfg->remote.connect_timeout * 1000;
	return ms;
}

static int bootstrap(struct gr_conn *c, int idle_ms, struct gr_err *err)
{
	struct strbuf line = STRBUF_INIT;
	int boot_ms = idle_ms > BOOT_MS ? idle_ms : BOOT_MS;
	uint64_t deadline = now_ms() + (uint64_t)boot_ms;
	int rc = 0;

	for (;;) {
		if ((rc = read_line(c, &line, deadline, idle_ms, err)) < 0)
			goto out;
		if (!strncmp(line.buf, "GPURUN-AGENT ", 13))
			break;
		if (!line.len)
			continue;
		if (!strncmp(line.buf, "GPURUN-BOOT have ", 17)) {
			snprintf(c->boot_arch, sizeof(c->boot_arch), "%s", line.buf + 17);
			continue;
		}
		if (!strncmp(line.buf, "GPURUN-BOOT need ", 17)) {
			/* "need OS ARCH": the host's uname -s and uname -m. */
			char *os = line.buf + 17, *arch = strchr(os, ' ');
			const struct agent_build *b = NULL;
			if (arch) {
				*arch++ = '\0';
				b = agent_for(os, arch);
			}
			if (!b) {
				struct strbuf have = STRBUF_INIT;
				for (size_t i = 0; i < NBUILDS; i++)
					sb_addf(&have, "%s'Linux %s'", !i ? "" : i + 1 < NBUILDS ? ", " : " and ",
						agent_builds[i].arch);
				raw_send(c, "abort\n", 6);
				conn_flush_idle(c, idle_ms, NULL);
				rc = gr_errf(err, GR_EUNSUPP,
					     "the host is '%s%s%s'; this gpurun carries agents for %s only",
					     ts(os), arch ? " " : "", arch ? ts(arch) : "", have.buf);
				gr_hintf(err, "gpurun runs jobs on Linux hosts, x86_64 or aarch64");
				sb_release(&have);
				goto out;
			}
			snprintf(c->boot_arch, sizeof(c->boot_arch), "%s", b->arch);
			if (c->verbose)
				say(c, "uploading agent %s for %s (%zu bytes) to %s", GR_AGENT_HASH,
				    b->arch, blob_size(b), c->t->desc);
			raw_send(c, "send\n", 5);
			raw_send(c, b->blob, blob_size(b));
			/* Bounded too: a host that stops taking the upload fails it. */
			if ((rc = conn_flush_idle(c, idle_ms, err)) < 0)
				goto out;
			c->hello.uploaded = 1;
			/* (an upload on a slow link may take the minute: the
			 * agent's start has its own from here) */
			deadline = now_ms() + (uint64_t)boot_ms;
			continue;
		}
		if (!strncmp(line.buf, "GPURUN-BOOT unsafe ", 19)) {
			rc = gr_errf(err, GR_EAGENT, "refusing to run the agent on %s: '%s' can be "
				     "written by another user", c->t->desc, ts(line.buf + 19));
			gr_hintf(err, "check what is in it, then 'chmod go-w' it on the host (and make it yours)");
			goto out;
		}
		if (!strncmp(line.buf, "GPURUN-BOOT failed", 18)) {
			rc = gr_errf(err, GR_EAGENT, "could not install the agent in '%s' on %s",
				     line.buf[18] == ' ' ? ts(line.buf + 19) : "~/.cache/gpurun",
				     c->t->desc);
			gr_hintf(err, "check free space and permissions there; 'gpurun doctor' checks both");
			goto out;
		}
		/* A banner or an rc file talking: not ours, skip it. */
		if (c->verbose >= 2)
			say(c, "remote said: %s", ts(line.buf));
	}
	if (strcmp(line.buf + 13, GR_AGENT_HASH)) {
		rc = gr_errf(err, GR_EAGENT, "the host started agent %s, expected %s",
			     ts(line.buf + 13), GR_AGENT_HASH);
		goto out;
	}
out:
	sb_release(&line);
	return rc;
}

static int hello(struct gr_conn *c, struct gr_err *err)
{
	struct gr_frame f;
	struct gr_rd rd;
	int rc, ms = conn_idle_ms();

	/* The agent sends HELLO (id 0) unasked right after its ready line:
	 * no round trip is spent on it, and nothing comes between. */
	ms = ms < BOOT_MS ? ms : BOOT_MS;
	rc = conn_recv(c, &f, ms, err);
	if (rc == 0) {
		rc = gr_errf(err, GR_ETIMEOUT, "the agent started, then sent nothing for %d s "
			     "(no HELLO)", ms / 1000);
		gr_hintf(err, "the agent on the host may be stuck; GPURUN_IO_TIMEOUT sets how long "
			 "gpurun waits");
	}
	if (rc < 0)
		goto out;
	if (f.type == GR_MSG_ERROR) {
		rc = conn_error_from_frame(&f, err);
		goto out;
	}
	rd_init(&rd, f.payload, f.len);
	c->hello.version = get_u32(&rd);
	c->hello.hash = get_str(&rd);
	c->hello.arch = get_str(&rd);
	c->hello.home = get_str(&rd);
	c->hello.pid = get_u32(&rd);
	if (f.type != GR_MSG_HELLO || f.id != 0) {
		rc = gr_errf(err, GR_EPROTO, "protocol error: expected HELLO, got %s",
			     proto_msg_name(f.type));
		goto out;
	}
	if ((rc = rd_done(&rd, err, "HELLO")) < 0)
		goto out;
	gr_trace("agent: HELLO");
	if (c->hello.version != GR_PROTO_VERSION)
		rc = gr_errf(err, GR_EPROTO, "the agent speaks protocol %u, this gpurun %u",
			     c->hello.version, GR_PROTO_VERSION);
out:
	return rc;
}

/* The agent must run as the architecture the boot script chose for it
 * (HELLO's arch is its own uname -m): else the host runs another file
 * than the one gpurun sent for it, or lied about what it is. */
static int check_arch(struct gr_conn *c, struct gr_err *err)
{
	const char *arch = c->hello.arch ? c->hello.arch : "";

	if (!c->boot_arch[0])
		return 0;
	if (!strcmp(arch, "arm64"))
		arch = "aarch64";
	if (!strcmp(arch, c->boot_arch))
		return 0;
	return gr_errf(err, GR_EAGENT, "the agent on %s runs as '%s', but the host said it is '%s'",
		       c->t->desc, ts(arch), ts(c->boot_arch));
}

/* Our HELLO: the version and what the agent must know before any request
 * ([remote] jobs_dir). Id 0: a notice, not answered (PROTOCOL.md). It is
 * the first frame of the command's argument, so the agent has it before
 * the caller's first requests, wherever those travel. */
static void client_hello(struct gr_conn *c, struct strbuf *frames)
{
	struct strbuf pl = STRBUF_INIT;

	put_u32(&pl, GR_PROTO_VERSION);
	put_str(&pl, c->jobs_dir ? c->jobs_dir : "");
	proto_frame_append(frames, GR_MSG_HELLO, GR_F_END, 0, pl.buf, pl.len);
	sb_release(&pl);
}

/* The bootstrap command's argument: our HELLO and the caller's first
 * frames, in hex (the agent's `serve HEX`). Too many go the usual way,
 * after the agent's HELLO. */
static void early_arg(void *arg, struct strbuf *out)
{
	static const char hex[] = "0123456789abcdef";
	struct gr_conn *c = arg;
	struct strbuf frames = STRBUF_INIT, theirs = STRBUF_INIT;

	client_hello(c, &frames);
	if (c->opts && c->opts->early)
		c->opts->early(c->opts->early_arg, c, &theirs);
	if (theirs.len && frames.len + theirs.len > CONN_EARLY_MAX)
		sb_add(&c->later, theirs.buf, theirs.len);
	else if (theirs.len)
		sb_add(&frames, theirs.buf, theirs.len);
	sb_release(&theirs);
	sb_grow(out, 2 * frames.len);
	for (size_t i = 0; i < frames.len; i++) {
		unsigned char b = (unsigned char)frames.buf[i];
		sb_add(out, &hex[b >> 4], 1);
		sb_add(out, &hex[b & 15], 1);
	}
	gr_trace("conn: %zu bytes of requests in the command", frames.len);
	sb_release(&frames);
}

int conn_open(struct gr_conn **out, const struct gr_config *cfg,
	      const struct conn_opts *o, struct gr_err *err)
{
	struct gr_conn *c = xcalloc(1, sizeof(*c));
	char *script = conn_bootstrap_script(GR_AGENT_HASH);
	struct tr_cmd cmd = { script, NULL, c, NULL, 0 };
	struct tr_opts to = { 0 };
	int rc;

	signal(SIGPIPE, SIG_IGN);
	c->verbose = o ? o->verbose : 0;
	c->say = o ? o->say : NULL;
	c->say_arg = o ? o->say_arg : NULL;
	to = (struct tr_opts){ o ? o->accept_new : 0, c->verbose, c->say, c->say_arg };
	c->opts = o;
	c->jobs_dir = xstrdup(cfg && cfg->remote.jobs_dir ? cfg->remote.jobs_dir : "");
	cmd.late = early_arg;
	if (o && o->fwd)
		cmd.fwd = fwd_specs(o->fwd, &cmd.nfwd);
	rc = transport_open(&c->t, cfg, &cmd, &to, err);
	c->opts = NULL;
	free(script);
	if (rc < 0) {
		sb_release(&c->later);
		free(c->jobs_dir);
		free(c);
		return rc;
	}
	c->last_io = now_ms();
	if ((rc = bootstrap(c, boot_idle_ms(cfg), err)) < 0 || (rc = hello(c, err)) < 0 ||
	    (rc = check_arch(c, err)) < 0) {
		conn_close(c);
		return rc;
	}
	if (c->later.len)
		sb_add(&c->out, c->later.buf, c->later.len);
	c->last_io = now_ms();
	sb_release(&c->later);
	if (o && o->fwd) {
		c->fwd = o->fwd;
		fwd_attach(c->fwd, c->t);
	}
	*out = c;
	return 0;
}

void conn_close(struct gr_conn *c)
{
	if (!c)
		return;
	if (c->fwd)
		fwd_detach(c->fwd);
	if (c->t) {
		conn_pump(c, NULL);
		c->t->ops->close_write(c->t, NULL);
		c->t->ops->free(c->t);
	}
	for (size_t i = 0; i < c->npend; i++)
		sb_release(&c->pend[i].payload);
	free(c->pend);
	sb_release(&c->held);
	sb_release(&c->later);
	free(c->pfd);
	sb_release(&c->in);
	sb_release(&c->out);
	free(c->hello.hash);
	free(c->hello.arch);
	free(c->hello.home);
	free(c->jobs_dir);
	free(c);
}
