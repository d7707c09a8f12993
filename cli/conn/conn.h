/* A framed connection to gpurun-agent over any transport: bootstrap (use
 * the cached agent, or upload it once per version), HELLO, then requests
 * that pipeline by id. Single-threaded; everything waits in poll(). */
#ifndef GR_CONN_H
#define GR_CONN_H

#include <poll.h>
#include <stdint.h>

#include "config.h"
#include "proto.h"
#include "transport.h"

struct gr_conn;

struct conn_opts {
	int accept_new;   /* record an unknown host key */
	int verbose;      /* -v count: 1 shows bootstrap steps on stderr */
	/* The first requests, asked for once the connection is up, just
	 * before the bootstrap command is sent: they travel inside that
	 * command (as its argument, hex), so the agent has them the moment it
	 * starts and their answers follow HELLO with no round trip of their
	 * own (OpenSSH's sshd opens a session's window only once the command
	 * runs: bytes on the channel could not go sooner). Called from the
	 * thread that runs conn_open; takes ids with conn_next_id(c) and
	 * appends frames (proto_frame_append), or nothing. At most
	 * CONN_EARLY_MAX bytes go that way; more are sent after HELLO. The
	 * frames show in the host's process list for a moment (the agent
	 * wipes its copy): no secrets in them. */
	void (*early)(void *arg, struct gr_conn *c, struct strbuf *frames);
	void *early_arg;
	/* Ports forwarded while the connection is up (forward.h): served by
	 * its waits (conn_wait, conn_flush_idle), or by ssh itself for openssh. The
	 * caller keeps it and frees it after conn_close. */
	struct fwd *fwd;
	/* Where notices for the user go (host key recorded, -v steps), one
	 * line each without "gpurun: "; NULL: nowhere. ctx_conn_opts sets
	 * the printer every command uses. */
	tr_say_fn say;
	void *say_arg;
};

#define CONN_EARLY_MAX GR_EARLY_MAX

struct gr_hello {
	uint32_t version;
	char *hash;   /* the agent's build hash */
	char *arch;   /* uname -m on the host */
	char *home;   /* the agent's $HOME */
	uint32_t pid;
	int uploaded; /* this connection uploaded the agent */
};

/* Connect, bootstrap the agent, exchange HELLO. *out is the caller's to
 * conn_close(). Errors: GR_ESSH, GR_EHOSTKEY, GR_EAUTH, GR_EAGENT,
 * GR_EUNSUPP (remote OS/architecture), GR_ETIMEOUT, GR_EPROTO. */
int conn_open(struct gr_conn **out, const struct gr_config *cfg,
	      const struct conn_opts *o, struct gr_err *err);
void conn_close(struct gr_conn *c);

const struct gr_hello *conn_hello(const struct gr_conn *c);

/* A fresh request id (never 0). */
uint32_t conn_next_id(struct gr_conn *c);
/* The id conn_next_id gave last (the last request's, after conn_request). */
uint32_t conn_last_id(const struct gr_conn *c);
/* Queue a frame; written by conn_flush_idle / while waiting in conn_recv. */
void conn_send(struct gr_conn *c, uint16_t type, uint16_t flags, uint32_t id,
	       const void *payload, size_t n);
/* Bytes queued and not yet written (for producers that pace themselves). */
size_t conn_pending(const struct gr_conn *c);
/* Write what can be written now without blocking. */
int conn_pump(struct gr_conn *c, struct gr_err *err);

/* Wait for the next frame, writing queued bytes meanwhile. Returns 1 with
 * *f filled (payload valid until the next conn_recv/conn_wait call), 0 on
 * timeout (timeout_ms >= 0), or a GR_E* code (GR_ESSH when the connection
 * closed). extra/nextra: local fds to watch too (e.g. stdin, a signal
 * pipe); when one is ready, returns 2 with revents set in extra[]. */
int conn_wait(struct gr_conn *c, struct gr_frame *f, struct pollfd *extra,
	      int nextra, int timeout_ms, struct gr_err *err);
int conn_recv(struct gr_conn *c, struct gr_frame *f, int timeout_ms, struct gr_err *err);

/* The one bound on waiting for the agent (issue 29): GPURUN_IO_TIMEOUT
 * seconds (1-86400; 120 when unset or bad) in which no byte moved
 * either way. A busy agent sends KEEPALIVE meanwhile, so only a silent
 * one (stuck, or the network gone) runs into it. Every request waits
 * under it: conn_request, conn_recv_idle, conn_idle_check. */
int conn_idle_ms(void);
/* 0 while the connection has moved a byte within idle_ms, else
 * GR_ETIMEOUT with err saying so (for loops that wait on conn_wait). */
int conn_idle_check(struct gr_conn *c, int idle_ms, struct gr_err *err);

/* Like conn_recv, but waits only while the connection is alive: fails
 * with GR_ETIMEOUT (err says so) once no byte has moved either way for
 * idle_ms (queued output is written meanwhile; the agent sends KEEPALIVE
 * frames, which this layer swallows, while it is busy with local work). */
int conn_recv_idle(struct gr_conn *c, struct gr_frame *f, int idle_ms, struct gr_err *err);
/* Write everything queued (blocking in poll, reading meanwhile; frames
 * that arrive stay queued), failing like conn_recv_idle after idle_ms of
 * silence; idle_ms < 0: no bound. */
int conn_flush_idle(struct gr_conn *c, int idle_ms, struct gr_err *err);
/* now_ms() when a byte last moved either way. */
uint64_t conn_last_io(const struct gr_conn *c);

/* One request, one answer: send type+payload under a new id and wait for
 * its OK (payload appended to reply if non-NULL) or ERROR (returned as its
 * code with err set to the agent's message). Frames for other ids that
 * arrive meanwhile are kept for later conn_recv calls. */
/* conn_request that also watches intr_fd (-1: none): readable, it returns
 * GR_ECANCEL at once, the request left unanswered. */
int conn_request_intr(struct gr_conn *c, uint16_t type, const void *payload, size_t n,
		      struct strbuf *reply, int intr_fd, struct gr_err *err);
int conn_request(struct gr_conn *c, uint16_t type, const void *payload, size_t n,
		 struct strbuf *reply, struct gr_err *err);

/* Turn an ERROR frame into err; returns its code (GR_EREMOTE if it is 0). */
int conn_error_from_frame(const struct gr_frame *f, struct gr_err *err);

#endif
