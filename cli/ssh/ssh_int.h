/* Inside cli/ssh: the libssh2 session layer behind transport_libssh2 (a
 * chain of hops: ProxyJump, ProxyCommand; host keys; authentication) and
 * the three transport kinds the dispatcher (transport.c) picks from. The
 * rest of the client sees only transport.h. Layers, top down: transport.c;
 * ssh.c (session setup, the exec channel) and transport_proc.c; ssh_fwd.c,
 * ssh_auth.c, ssh_knownhosts.c, ssh_net.c; ssh_hop.c, ssh_blob.c, ssh_ctr.c,
 * transport_cmd.c. Everything is non-blocking and waits in poll(). */
#ifndef GR_SSH_INT_H
#define GR_SSH_INT_H

#include <libssh2.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "sshconfig.h"
#include "transport.h"
#include "util.h"

/* Used when neither ssh_config nor [remote] sets ConnectTimeout: OpenSSH
 * would wait for the kernel (minutes) or forever for a silent server. */
#define SSH_DEFAULT_TIMEOUT_S 30
/* Used when ServerAliveInterval is 0: a job's log stream may sit idle for
 * hours, and a dead peer must end it rather than hang it. */
#define SSH_DEFAULT_ALIVE_S 30

/* Channel window: one window per round trip bounds a download; 8 MiB is
 * ~160 MB/s at 50 ms (16 MiB measured slower on loopback). */
#define SSH_WINDOW (8u << 20)

/* ---- the chain ---- */

struct ssh_opts {
	int accept_new;          /* --accept-new-host-key */
	int verbose;
	int timeout_s;           /* [remote] connect_timeout; 0 = ssh_config's */
	const char *identity;    /* [remote] identity, or NULL */
	const char *known_hosts; /* [remote] known_hosts, or NULL */
	tr_say_fn say;           /* notices for the user (NULL: none) */
	void *say_arg;
};

struct ssh_pump;

struct ssh_hop {
	char *spec;              /* as written: "jump", "user@host:2222" */
	int is_target;
	struct ssh_target t;
	char *khname;            /* known_hosts name: "host" or "[host]:port" */
	char *desc;              /* "user@host port N" for messages */
	int fd;                  /* TCP socket or our end of a socketpair */
	pid_t proxy_pid;         /* ProxyCommand child, or 0 */
	char *proxy_cmd;         /* ProxyCommand, for messages */
	LIBSSH2_SESSION *s;
	int up;                  /* handshake done: worth a polite DISCONNECT */
	struct ssh_pump *pump;   /* carries the next hop over a channel of this one */
	struct ssh_hop *via;     /* the hop this one is tunnelled through */
	/* What libssh2 sent that the socket has not taken yet. libssh2 1.10
	 * cannot interleave calls when one of them left a packet half sent
	 * (a window adjust or keepalive then fails with "bad use"), so its
	 * sends never block: they land here and go out as poll() allows. */
	struct strbuf out;
	size_t out_off;
	int out_err;             /* errno of a failed send, 0 if none */
	int timeout_ms;          /* connect / handshake / auth */
	int alive_ms, alive_max; /* keepalive interval and count */
	uint64_t last_recv;      /* now_ms() of the last byte from the peer */
};

struct ssh_chain {
	struct ssh_hop **hops;   /* hops[n-1] is the target */
	size_t n;
};

/* Resolve spec through ssh_config, connect every hop, check host keys and
 * authenticate. *out is the caller's to ssh_chain_free(). Errors: GR_ECONFIG,
 * GR_ESSH, GR_ETIMEOUT, GR_EHOSTKEY, GR_EAUTH. */
int ssh_chain_open(struct ssh_chain **out, const char *spec, const struct ssh_opts *o,
		   struct gr_err *err);
void ssh_chain_free(struct ssh_chain *c);

/* ---- ssh_hop.c: what the files above call back ---- */

/* Tell the observer (and -v) about a step. */
void ssh_report(const struct ssh_hop *h, enum ssh_step step, int rc, const char *detail,
		const char *methods, const struct gr_err *err);
int ssh_verbose(void);
/* The -v level of the chain being opened and where its notices go (set
 * by ssh_chain_open; say NULL: nowhere). */
void ssh_set_voice(int level, tr_say_fn say, void *say_arg);
/* A notice for the user, one line (no "gpurun: "). */
void ssh_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether libssh2's AES-CTR runs through the batched keystream of
 * ssh_ctr.c (libssh2 1.10.x, unless GPURUN_SSH_CTR_BATCH=0). */
int ssh_ctr_batching(void);
/* An observer is set: doctor prints the steps, so notices stay quiet. */
int ssh_observed(void);

/* Wait in poll() for h's socket in the direction libssh2 last asked for
 * (and for writability while bytes are queued), then flush the queue.
 * deadline: now_ms() value, 0 = none. 0 when ready (or interrupted), or
 * GR_ETIMEOUT (err set to a generic message the caller should replace). */
int ssh_hop_wait(struct ssh_hop *h, uint64_t deadline, struct gr_err *err);
/* Send what is queued for h's socket without blocking: 0, or -1 with
 * h->out_err set. ssh_hop_queued: bytes still waiting. */
int ssh_hop_flush(struct ssh_hop *h);
size_t ssh_hop_queued(const struct ssh_hop *h);
/* libssh2's last error text for s ("" if none). */
const char *ssh_lasterr(LIBSSH2_SESSION *s);
/* libssh2_session_method_pref with the names of `wanted` (comma list, in
 * our order) that this libssh2 supports; GR_ESSH if none. */
int ssh_method_pref(struct ssh_hop *h, int method, const char *wanted, struct gr_err *err);
/* A new LIBSSH2_SESSION for h (non-blocking, counts received bytes). */
LIBSSH2_SESSION *ssh_session_new(struct ssh_hop *h);
/* Keepalive for a connected hop: send one when due, and fail when the peer
 * has been silent for interval * (count + 1). *next_ms: when to call again. */
int ssh_hop_keepalive(struct ssh_hop *h, int *next_ms, struct gr_err *err);
/* 1 when libssh2 already holds bytes for ch (data or stderr), read from
 * the socket while another call ran: no poll() will report them. (Not
 * libssh2_poll_channel_read: in 1.10 it gives up at the first queued
 * packet shorter than 5 bytes, and the 1-byte answer to every keepalive
 * is one, queued for good, so after the first keepalive it said "nothing"
 * for every channel.) */
int ssh_channel_held(LIBSSH2_CHANNEL *ch);

/* ---- the libssh2 transport (ssh.c; its tunnels in ssh_fwd.c) ---- */

struct ssh_transport {
	struct gr_transport base;
	struct ssh_chain *c;
	struct ssh_hop *h;       /* the target */
	LIBSSH2_CHANNEL *ch;     /* the agent's exec channel */
	char *cmd;               /* the exec request */
	int exec_pending;        /* sent; its reply not seen yet */
	int eof_sent;
};

/* Port forwarding over the same session: direct-tcpip channels
 * (ssh_fwd.c). */
extern const struct tr_tunnel_ops ssh_tunnel_ops;

/* ---- ssh_net.c: getting a byte stream to the hop's sshd ---- */

/* Name resolution and a non-blocking TCP connect within h->timeout_ms
 * per address; sets h->fd. */
int ssh_net_tcp(struct ssh_hop *h, struct gr_err *err);
/* Run ProxyCommand with a socketpair as its stdin/stdout; sets h->fd. */
int ssh_net_proxy_command(struct ssh_hop *h, struct gr_err *err);
/* Open a direct-tcpip channel on via (connected and authenticated) to
 * next's host and port, and start a thread pumping it to a socketpair
 * whose other end becomes next->fd. From here on, the thread owns via's
 * session until ssh_pump_stop(). */
int ssh_pump_start(struct ssh_hop *via, struct ssh_hop *next, struct gr_err *err);
/* Stop and join via's pump; frees the channel. Idempotent. */
void ssh_pump_stop(struct ssh_hop *via);
/* Why the pump carrying hop `via`'s tunnel stopped, or NULL. */
const char *ssh_pump_error(const struct ssh_hop *via);
/* Stop a ProxyCommand child (SIGTERM after a moment) and reap it. */
void ssh_net_reap_proxy(struct ssh_hop *h);

/* ---- ssh_knownhosts.c ---- */

struct kh_entry {
	char *file;
	int line;
	char *type;              /* "ssh-ed25519" */
	unsigned char *blob;
	size_t bloblen;
	int revoked;             /* @revoked line */
};

struct kh_list {
	struct kh_entry *v;
	size_t n;
};

enum kh_verdict { KH_UNKNOWN, KH_MATCH, KH_CHANGED, KH_OTHER_TYPE, KH_REVOKED };

/* "host" for port 22, else "[host]:port"; lowercased as OpenSSH does. */
char *kh_name(const char *host, int port);
/* Append to out the entries of known_hosts file path that name `name`,
 * reading it line by line: comments, @cert-authority lines, unknown key
 * types and lines that do not parse are skipped; hashed names (|1|) are
 * matched through libssh2_knownhost_checkp (s: any session, for libssh2's
 * allocator). A missing file is not an error; an unreadable one is. */
int kh_scan_file(LIBSSH2_SESSION *s, const char *path, const char *name,
		 struct kh_list *out, struct gr_err *err);
/* One line: 1 if it names `name` (e filled, caller frees with
 * kh_entry_release), 0 if not or if it cannot be used. */
int kh_parse_line(LIBSSH2_SESSION *s, const char *line, size_t len, const char *name,
		  struct kh_entry *e);
void kh_entry_release(struct kh_entry *e);
void kh_list_release(struct kh_list *l);
/* Judge a key the host offered; *which gets the deciding entry (MATCH,
 * CHANGED, OTHER_TYPE, REVOKED) or NULL. */
enum kh_verdict kh_judge(const struct kh_list *l, const char *type,
			 const unsigned char *blob, size_t len, const struct kh_entry **which);
/* "SHA256:..." for a raw 32-byte digest. */
char *kh_fingerprint(const unsigned char *sha256);
/* "ED25519", "ECDSA", "RSA" for a type name, as ssh-keygen -l prints it. */
const char *ssh_type_label(const char *type);
/* Host key algorithms for libssh2_session_method_pref: the types known for
 * this host first (as OpenSSH orders them), then the rest. Caller frees. */
char *kh_hostkey_prefs(const struct kh_list *l);
/* Add "name type base64" to path (created with ~/.ssh if needed), under a
 * lock, unless an identical entry is already there. */
int kh_append(const char *path, const char *name, const char *type,
	      const unsigned char *blob, size_t len, struct gr_err *err);

/* Collect known_hosts for h, set the host key preference (before the
 * handshake). Then, after it, check the key the host offered. */
int ssh_hostkey_prepare(struct ssh_hop *h, const struct ssh_opts *o, struct kh_list *known,
			struct gr_err *err);
int ssh_hostkey_check(struct ssh_hop *h, const struct ssh_opts *o, const struct kh_list *known,
		      struct gr_err *err);

/* ---- ssh_blob.c ---- */

/* base64 (RFC 4648), as OpenSSH writes keys; pad = 0 drops the '='s (as in
 * SHA256 fingerprints). Returns a new string. */
char *b64_encode(const unsigned char *p, size_t n, int pad);
/* Decode n chars (whitespace not allowed); 0, or -1 on bad input. */
int b64_decode(const char *s, size_t n, struct strbuf *out);
/* The key type a blob starts with ("ssh-ed25519"), or NULL. Caller frees. */
char *ssh_blob_type(const unsigned char *blob, size_t len);

/* ---- ssh_auth.c ---- */

/* Authenticate h: ssh-agent first, then identity files (o->identity first,
 * then IdentityFile). Encrypted keys ask for their passphrase on the
 * terminal. GR_EAUTH says what was tried. */
int ssh_authenticate(struct ssh_hop *h, const struct ssh_opts *o, struct gr_err *err);

/* ---- the three kinds, for the dispatcher (transport.c) ---- */

/* A local `sh` and an `ssh` subprocess (transport_proc.c). */
int transport_proc_local(struct gr_transport **out, const struct tr_cmd *cmd,
			 struct gr_err *err);
int transport_proc_openssh(struct gr_transport **out, const struct gr_config *cfg,
			   const struct tr_cmd *cmd, int accept_new, struct gr_err *err);
/* libssh2 (ssh.c). */
int transport_libssh2(struct gr_transport **out, const struct gr_config *cfg,
		      const struct tr_cmd *cmd, const struct tr_opts *opts, struct gr_err *err);
/* Through a connection holder ([remote] persist; transport_mux.c, the
 * holder in ssh_hold.c): 0 with *out set, a GR_E* code with err set (the
 * holder started for this command could not connect: the same error a
 * direct connection would give), or 1: no holder can serve (why said at
 * -v), connect directly. cmd->late is asked at most once. */
int transport_mux(struct gr_transport **out, const struct gr_config *cfg,
		  const struct tr_cmd *cmd, const struct tr_opts *opts, struct gr_err *err);

#endif
