/* A transport is a byte stream to a shell on the host (where the bootstrap
 * script runs and then execs the agent). Three kinds carry the same bytes:
 * a libssh2 exec channel, an `ssh` subprocess, and a local `sh`.
 * All calls are non-blocking; conn.c drives them with poll(). This is
 * cli/ssh's one face; the rest of the folder is its own (ssh_int.h). */
#ifndef GR_TRANSPORT_H
#define GR_TRANSPORT_H

#include <poll.h>
#include <sys/types.h>

#include "config.h"
#include "err.h"
#include "util.h"

#define GR_TR_AGAIN (-1000) /* would block: poll and retry */

struct gr_transport;
struct tr_tunnel;
/* A port to forward (ssh -L's parts): what the transport carries for
 * `forward` and -L; parsed and served by cli/conn/forward.h. */
struct fwd_spec {
	char *bind;   /* local address to listen on: "localhost" (127.0.0.1 and ::1) */
	int lport;
	char *host;   /* where the host connects: "localhost" */
	int hport;
};

/* Streams to HOST:PORT opened from the host's side, for port forwarding
 * (forward.c): libssh2's direct-tcpip channels on the agent's session,
 * or plain TCP for the local transport. All calls are non-blocking. */
struct tr_tunnel_ops {
	/* 0 with *out set, GR_TR_AGAIN (call again with the same arguments,
	 * and open no other stream meanwhile), or a GR_E* code with err set
	 * (the host could not connect: the stream is refused). */
	int (*open)(struct gr_transport *t, const char *host, int port, struct tr_tunnel **out,
		    struct gr_err *err);
	/* > 0 bytes, 0 at EOF, GR_TR_AGAIN, or a GR_E* code with err set. */
	ssize_t (*read)(struct gr_transport *t, struct tr_tunnel *tu, void *buf, size_t n,
			struct gr_err *err);
	ssize_t (*write)(struct gr_transport *t, struct tr_tunnel *tu, const void *buf, size_t n,
			 struct gr_err *err);
	/* EOF on the way to the host: 0, or GR_TR_AGAIN. */
	int (*send_eof)(struct gr_transport *t, struct tr_tunnel *tu);
	/* Close and free: 0, or GR_TR_AGAIN (call again later). */
	int (*close)(struct gr_transport *t, struct tr_tunnel *tu);
	/* Forget it without waiting for anything (the transport is going away). */
	void (*drop)(struct gr_transport *t, struct tr_tunnel *tu);
	/* An fd to poll for it (-1: the transport's own pollfds cover it). */
	int (*fd)(struct gr_transport *t, struct tr_tunnel *tu);
	/* 1 when a read (want_read) or write (want_write) would make progress
	 * now though no poll would say so (data or window held inside). */
	int (*ready)(struct gr_transport *t, struct tr_tunnel *tu, int want_read, int want_write);
};

struct gr_transport_ops {
	const char *name;
	/* > 0 bytes, 0 at EOF, GR_TR_AGAIN, or a GR_E* code with err set. */
	ssize_t (*read)(struct gr_transport *t, void *buf, size_t n, struct gr_err *err);
	ssize_t (*write)(struct gr_transport *t, const void *buf, size_t n, struct gr_err *err);
	/* Fill up to 4 pollfds for what the caller wants (the transport may
	 * ask for other directions, as libssh2 does); returns how many. */
	int (*pollfds)(struct gr_transport *t, struct pollfd *pfd, int want_read,
		       int want_write);
	/* Called after every poll (and at least every *timeout_ms the
	 * transport asks for, -1 = none): keepalives, draining stderr. */
	int (*tick)(struct gr_transport *t, int *timeout_ms, struct gr_err *err);
	/* Send EOF on the outgoing direction. */
	int (*close_write)(struct gr_transport *t, struct gr_err *err);
	/* Tear down; frees t. */
	void (*free)(struct gr_transport *t);
	/* Port forwarding over this transport; NULL when it has none of its
	 * own (openssh: ssh's -L, from tr_cmd, does it). */
	const struct tr_tunnel_ops *tunnels;
};

struct gr_transport {
	const struct gr_transport_ops *ops;
	char *desc; /* "user@host:port" for messages */
};

/* What runs on the host: `sh -c script gpurun ARG`, ARG ($1 to the
 * script) asked of late() at the last moment before the command leaves
 * (after the connection and login), so it can carry what was not known
 * when connecting began. late may be NULL or leave ARG empty (no $1). */
struct tr_cmd {
	const char *script;
	void (*late)(void *arg, struct strbuf *out);
	void *late_arg;
	/* Ports to forward: openssh passes them to ssh as -L (the others
	 * serve them through their tunnel ops). */
	const struct fwd_spec *fwd;
	size_t nfwd;
};

/* A notice for the user while a transport opens or runs (a host key
 * recorded, -v steps): one line, without the "gpurun: " that the
 * caller's printer puts before it. The transport never prints. */
typedef void (*tr_say_fn)(void *arg, const char *msg);

struct tr_opts {
	int accept_new;          /* record an unknown host key */
	int verbose;             /* -v count */
	tr_say_fn say;           /* NULL: nothing is said */
	void *say_arg;
};

/* The command line for a remote login shell: "exec /bin/sh -c 'script'
 * gpurun 'ARG'" (the shell gets one string, whatever the user's shell). */
char *tr_command_line(const struct tr_cmd *cmd);

/* Open a transport running cmd on the host described by cfg
 * (remote.host / remote.transport). The caller owns *out. */
int transport_open(struct gr_transport **out, const struct gr_config *cfg,
		   const struct tr_cmd *cmd, const struct tr_opts *o, struct gr_err *err);

/* ---- the libssh2 kind's steps, for an observer (gpurun doctor) ---- */

enum ssh_step {
	SSH_STEP_SSHCONFIG, /* alias resolved through ssh_config */
	SSH_STEP_RESOLVE,   /* name resolution (skipped for tunnelled hops) */
	SSH_STEP_TCP,       /* TCP connect, ProxyCommand started, or tunnel opened */
	SSH_STEP_HANDSHAKE, /* SSH handshake; detail names the negotiated methods */
	SSH_STEP_HOSTKEY,
	SSH_STEP_AUTH,
	SSH_STEP_CHANNEL,   /* exec channel to the target opened */
};

struct ssh_step_report {
	enum ssh_step step;
	const char *hop;       /* the host this is about, as written ("jump") */
	int is_target;         /* 1 for the final host, 0 for a jump host */
	int rc;                /* 0: passed; else its GR_E* code, message in err */
	const char *detail;    /* one line */
	const struct gr_err *err;
	const char *methods;   /* SSH_STEP_HANDSHAKE: "kex K, host key H, cipher C, mac M" */
	const struct strvec *warnings; /* SSH_STEP_SSHCONFIG: what the resolver ignored */
};
typedef void (*ssh_observer_fn)(const struct ssh_step_report *r, void *arg);

/* Process-wide, set by doctor around conn_open(); NULL clears it. Not
 * thread-safe: set it before connecting. */
void ssh_set_observer(ssh_observer_fn fn, void *arg);

/* gpurun __hold ...: the connection holder's process (ssh_hold.c),
 * started by a command (transport_mux.c), never by hand. Exit status. */
int transport_hold_main(int argc, char **argv);
/* Tell the holder of cfg's connection (cfg->remote.host) to end: new
 * commands connect afresh at once, running ones finish on it. 1 (*pid:
 * its pid), 0 when there is none, or a GR_E* code with err set. */
int transport_hold_stop(const struct gr_config *cfg, long *pid, struct gr_err *err);
/* Is a holder of cfg's connection there (for doctor)? 1 (*pid: its pid,
 * named by its pid file and alive, beside its socket), 0 when there is
 * none, -1 when the holders' folder cannot be used (why says so). Asks
 * the holder nothing. */
int transport_hold_find(const struct gr_config *cfg, long *pid, struct strbuf *why);

/* Quote s for a POSIX shell (single quotes). Returns a new string. */
char *sh_quote(const char *s);

#endif
