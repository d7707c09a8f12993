/* The libssh2 transport: resolve the host through ssh_config, connect every
 * ProxyJump hop (or run ProxyCommand), check host keys, authenticate, then
 * run `exec /bin/sh -c SCRIPT` on an exec channel whose stdout/stdin carry
 * the agent's frames. Non-blocking throughout; stderr of the remote shell is
 * drained to ours so it never stalls the channel window.
 * What it has to say (-v steps; ssh_knownhosts.c's two security notices, a
 * host key recorded and an unknown key accepted by configuration, worded
 * as ssh words them) goes to the caller's tr_opts.say, never to stderr.
 * What blocks, on purpose: getaddrinfo (as in ssh; ConnectTimeout starts
 * after it), the local ssh-agent socket (libssh2_agent_*), the passphrase
 * prompt, known_hosts file I/O, and copying the remote stderr to ours.
 * ProxyJump hops run in pump threads (ssh_net.c), one session per thread. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ssh_int.h"
#include "transport.h"

/* ---- building and connecting the chain ---- */

static void hop_free(struct ssh_hop *h)
{
	if (!h)
		return;
	free(h->spec);
	ssh_target_release(&h->t);
	free(h->khname);
	free(h->desc);
	free(h->proxy_cmd);
	sb_release(&h->out);
	free(h);
}

static int add_hop(struct ssh_chain *c, const char *spec, const struct ssh_opts *o, int depth,
		   struct gr_err *err)
{
	struct ssh_hop *h = xcalloc(1, sizeof(*h));
	const char *sp = spec;
	int rc, timeout;

	if (!strncmp(sp, "ssh://", 6))
		sp += 6;
	h->fd = -1;
	h->spec = xstrdup(sp);
	h->is_target = depth == 0;
	if ((rc = sshcfg_resolve(sp, NULL, NULL, &h->t, err)) < 0) {
		ssh_report(h, SSH_STEP_SSHCONFIG, rc, NULL, NULL, err);
		hop_free(h);
		return rc;
	}
	/* OpenSSH: the first jump host's own ProxyJump applies (it is reached
	 * by a nested ssh); later hops are reached through the tunnel. */
	if (h->t.proxy_jump && (c->n == 0 || depth > 0)) {
		char *list = xstrdup(h->t.proxy_jump), *save = NULL;
		int first = 1;
		if (depth >= 8) {
			rc = gr_errf(err, GR_ECONFIG, "ProxyJump for '%s' nests too deep (a loop?)", sp);
			free(list);
			hop_free(h);
			return rc;
		}
		for (char *j = strtok_r(list, ",", &save); j; j = strtok_r(NULL, ",", &save)) {
			while (*j == ' ')
				j++;
			rc = add_hop(c, j, o, first ? depth + 1 : -1, err);
			first = 0;
			if (rc < 0) {
				free(list);
				hop_free(h);
				return rc;
			}
		}
		free(list);
	}
	timeout = o->timeout_s > 0 ? o->timeout_s : h->t.connect_timeout > 0 ? h->t.connect_timeout
									: SSH_DEFAULT_TIMEOUT_S;
	h->timeout_ms = timeout * 1000;
	h->alive_ms = (h->t.server_alive_interval > 0 ? h->t.server_alive_interval
						       : SSH_DEFAULT_ALIVE_S) * 1000;
	h->alive_max = h->t.server_alive_count_max > 0 ? h->t.server_alive_count_max : 3;
	/* HostKeyAlias names the key as written, without a port (as ssh). */
	h->khname = h->t.host_key_alias ? xstrdup(h->t.host_key_alias)
					: kh_name(h->t.hostname, h->t.port);
	if (o->verbose)
		for (size_t i = 0; i < h->t.warnings.n; i++)
			ssh_say("ssh_config: %s", h->t.warnings.v[i]);
	h->desc = h->t.port == 22 ? xasprintf("%s@%s", h->t.user, h->t.hostname)
				  : xasprintf("%s@%s port %d", h->t.user, h->t.hostname, h->t.port);
	c->hops = xrealloc(c->hops, (c->n + 1) * sizeof(*c->hops));
	c->hops[c->n++] = h;
	{
		struct strbuf d = STRBUF_INIT;
		sb_addf(&d, "%s is %s", sp, h->desc);
		if (h->t.proxy_jump && depth >= 0)
			sb_addf(&d, ", ProxyJump %s", h->t.proxy_jump);
		else if (h->t.proxy_command && c->n == 1)
			sb_addf(&d, ", ProxyCommand %s", h->t.proxy_command);
		ssh_report(h, SSH_STEP_SSHCONFIG, 0, d.buf, NULL, NULL);
		sb_release(&d);
	}
	return 0;
}

static void methods_string(LIBSSH2_SESSION *s, struct strbuf *sb)
{
	const char *kex = libssh2_session_methods(s, LIBSSH2_METHOD_KEX);
	const char *hk = libssh2_session_methods(s, LIBSSH2_METHOD_HOSTKEY);
	const char *cs = libssh2_session_methods(s, LIBSSH2_METHOD_CRYPT_CS);
	const char *mac = libssh2_session_methods(s, LIBSSH2_METHOD_MAC_CS);

	sb_addf(sb, "kex %s, host key %s, cipher %s%s, mac %s", kex ? kex : "?", hk ? hk : "?",
		cs ? cs : "?", cs && strstr(cs, "-ctr") && ssh_ctr_batching() ? " (batched)" : "",
		mac ? mac : "?");
}

/* Terrapin (CVE-2023-48795) needs ChaCha20-Poly1305 or an EtM MAC, and
 * libssh2 1.10 has no strict kex: allow only CTR/GCM ciphers and plain
 * (non-EtM) SHA-2 MACs (GCM arrives with libssh2 1.11), and no SHA-1 kex. */
static int set_prefs(struct ssh_hop *h, struct gr_err *err)
{
	static const struct { int m; const char *v; } prefs[] = {
		{ LIBSSH2_METHOD_KEX, "curve25519-sha256,curve25519-sha256@libssh.org,"
		  "ecdh-sha2-nistp256,ecdh-sha2-nistp384,ecdh-sha2-nistp521,"
		  "diffie-hellman-group-exchange-sha256,diffie-hellman-group16-sha512,"
		  "diffie-hellman-group18-sha512,diffie-hellman-group14-sha256" },
		{ LIBSSH2_METHOD_CRYPT_CS, "aes128-gcm@openssh.com,aes256-gcm@openssh.com,"
		  "aes128-ctr,aes192-ctr,aes256-ctr" },
		{ LIBSSH2_METHOD_CRYPT_SC, "aes128-gcm@openssh.com,aes256-gcm@openssh.com,"
		  "aes128-ctr,aes192-ctr,aes256-ctr" },
		{ LIBSSH2_METHOD_MAC_CS, "hmac-sha2-256,hmac-sha2-512" },
		{ LIBSSH2_METHOD_MAC_SC, "hmac-sha2-256,hmac-sha2-512" },
	};

	int rc = 0;

	for (size_t i = 0; i < GR_ARRAY_SIZE(prefs) && rc == 0; i++)
		rc = ssh_method_pref(h, prefs[i].m, prefs[i].v, err);
	return rc;
}

static int handshake_error(struct ssh_hop *h, int lrc, struct gr_err *err)
{
	int st = -1;

	/* Its EOF can arrive just before its exit status does. */
	for (int i = 0; h->proxy_pid > 0 && i < 20; i++) {
		if (waitpid(h->proxy_pid, &st, WNOHANG) == h->proxy_pid)
			break;
		usleep(10000);
		st = -1;
	}
	if (h->proxy_pid > 0 && st != -1) {
		h->proxy_pid = 0;
		gr_errf(err, GR_ESSH, "ProxyCommand '%s' for %s exited (%s %d) before the SSH handshake",
			h->proxy_cmd, h->spec, WIFEXITED(st) ? "status" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
		gr_hintf(err, "run it by hand to see why; it must connect its stdin/stdout to sshd");
		return GR_ESSH;
	}
	if (h->via && ssh_pump_error(h->via)) {
		gr_errf(err, GR_ESSH, "%s", ssh_pump_error(h->via));
		return GR_ESSH;
	}
	gr_errf(err, GR_ESSH, "SSH handshake with %s failed: %s", h->desc, ssh_lasterr(h->s));
	if (lrc == LIBSSH2_ERROR_KEX_FAILURE || lrc == LIBSSH2_ERROR_METHOD_NOT_SUPPORTED)
		gr_hintf(err, "the host offers no key exchange, cipher, MAC or host key type that "
			 "libssh2 1.10 supports safely; 'transport = openssh' uses your ssh client");
	else if (lrc == LIBSSH2_ERROR_SOCKET_DISCONNECT || lrc == LIBSSH2_ERROR_SOCKET_RECV)
		gr_hintf(err, "is it an SSH server? its log may say why it closed the connection");
	return GR_ESSH;
}

static int connect_hop(struct ssh_chain *c, size_t i, const struct ssh_opts *o,
		       struct gr_err *err)
{
	struct ssh_hop *h = c->hops[i];
	struct kh_list known = { 0 };
	struct strbuf methods = STRBUF_INIT;
	uint64_t deadline, t0;
	char *detail = NULL;
	int rc, lrc;

	if (i > 0)
		rc = ssh_pump_start(c->hops[i - 1], h, err);
	else if (h->t.proxy_command)
		rc = ssh_net_proxy_command(h, err);
	else
		rc = ssh_net_tcp(h, err);
	if (rc < 0)
		return rc;
	gr_trace("ssh %s: connected", h->desc);
	if (!(h->s = ssh_session_new(h)))
		return gr_errf(err, GR_ENOMEM, "cannot start an SSH session");
	if ((rc = set_prefs(h, err)) < 0 || (rc = ssh_hostkey_prepare(h, o, &known, err)) < 0)
		goto out;

	t0 = now_ns();
	deadline = now_ms() + (uint64_t)h->timeout_ms;
	h->last_recv = now_ms();
	while ((lrc = libssh2_session_handshake(h->s, h->fd)) == LIBSSH2_ERROR_EAGAIN) {
		if (ssh_hop_wait(h, deadline, NULL) < 0) {
			rc = gr_errf(err, GR_ETIMEOUT, "%s did not complete the SSH handshake within %d s",
				     h->desc, h->timeout_ms / 1000);
			gr_hintf(err, "something answers there but does not speak SSH in time; "
				 "ConnectTimeout or [remote] connect_timeout sets the limit");
			ssh_report(h, SSH_STEP_HANDSHAKE, rc, NULL, NULL, err);
			goto out;
		}
	}
	if (lrc < 0) {
		rc = handshake_error(h, lrc, err);
		ssh_report(h, SSH_STEP_HANDSHAKE, rc, NULL, NULL, err);
		goto out;
	}
	h->up = 1;
	methods_string(h->s, &methods);
	{
		const char *banner = libssh2_session_banner_get(h->s);
		detail = xasprintf("%s in %.1f ms", banner ? banner : "SSH-2.0",
				   (double)(now_ns() - t0) / 1e6);
	}
	ssh_report(h, SSH_STEP_HANDSHAKE, 0, detail, methods.buf, NULL);
	gr_trace("ssh %s: handshake done", h->desc);
	if ((rc = ssh_hostkey_check(h, o, &known, err)) < 0)
		goto out;
	if ((rc = ssh_authenticate(h, o, err)) < 0)
		goto out;
	gr_trace("ssh %s: authenticated", h->desc);
	libssh2_keepalive_config(h->s, 1, (unsigned)(h->alive_ms / 1000));
out:
	kh_list_release(&known);
	sb_release(&methods);
	free(detail);
	return rc;
}

/* Say bye without waiting for answers: each wait would cost a round trip
 * (libssh2 waits for the peer's CHANNEL_CLOSE when freeing a channel). The
 * socket is shut down first, so libssh2 sees a dead peer and frees at once;
 * what was sent is still delivered. */
static void hop_disconnect(struct ssh_hop *h)
{
	if (h->s) {
		uint64_t deadline = now_ms() + 500;
		if (h->up)
			libssh2_session_disconnect(h->s, "bye");
		while (h->fd >= 0 && ssh_hop_queued(h) && !h->out_err) {
			struct pollfd p = { h->fd, POLLOUT, 0 };
			uint64_t now = now_ms();
			if (now >= deadline || poll(&p, 1, (int)(deadline - now)) == 0)
				break;
			ssh_hop_flush(h);
		}
		if (h->fd >= 0)
			shutdown(h->fd, SHUT_RDWR);
		for (int i = 0; i < 100 && libssh2_session_free(h->s) == LIBSSH2_ERROR_EAGAIN; i++)
			;
		h->s = NULL;
	}
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	ssh_net_reap_proxy(h);
}

void ssh_chain_free(struct ssh_chain *c)
{
	if (!c)
		return;
	/* Innermost first: each hop's session runs over the previous hop's
	 * pump, which must keep running until that session has said bye. */
	for (size_t i = c->n; i-- > 0;) {
		hop_disconnect(c->hops[i]);
		if (i > 0)
			ssh_pump_stop(c->hops[i - 1]);
	}
	for (size_t i = 0; i < c->n; i++)
		hop_free(c->hops[i]);
	free(c->hops);
	free(c);
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc;
static void init_libssh2(void)
{
	init_rc = libssh2_init(0);
	ssh_ctr_batching(); /* decided once, before any session keys a cipher */
}

int ssh_chain_open(struct ssh_chain **out, const char *spec, const struct ssh_opts *o,
		   struct gr_err *err)
{
	struct ssh_chain *c = xcalloc(1, sizeof(*c));
	int rc;

	ssh_set_voice(o->verbose, o->say, o->say_arg);
	pthread_once(&init_once, init_libssh2);
	if (init_rc != 0) {
		free(c);
		return gr_errf(err, GR_ESSH, "libssh2 failed to initialise");
	}
	if ((rc = add_hop(c, spec, o, 0, err)) < 0)
		goto fail;
	c->hops[c->n - 1]->is_target = 1;
	for (size_t i = 0; i < c->n; i++)
		if ((rc = connect_hop(c, i, o, err)) < 0)
			goto fail;
	*out = c;
	return 0;
fail:
	ssh_chain_free(c);
	return rc;
}

/* ---- the transport over an exec channel ---- */

/* The exec request's answer arrives while we already read the channel:
 * waiting for it would cost a round trip, as OpenSSH knows. */
static int exec_check(struct ssh_transport *t, struct gr_err *err)
{
	int rc;

	if (!t->exec_pending)
		return 0;
	rc = libssh2_channel_exec(t->ch, t->cmd);
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return 0;
	t->exec_pending = 0;
	if (rc == 0)
		return 0;
	gr_errf(err, GR_ESSH, "%s refused to run a command: %s", t->h->desc, ssh_lasterr(t->h->s));
	gr_hintf(err, "a ForceCommand or a restricted shell on the host would do this");
	return GR_ESSH;
}

/* Bytes the remote shell wrote to stderr go to ours, as ssh does. */
static int drain_stderr(struct ssh_transport *t)
{
	char buf[8192];
	ssize_t r;

	while ((r = libssh2_channel_read_stderr(t->ch, buf, sizeof(buf))) > 0)
		if (write_full(2, buf, (size_t)r) < 0)
			break;
	return 0;
}

static int lost(struct ssh_transport *t, ssize_t lrc, struct gr_err *err)
{
	const char *why = t->h->via ? ssh_pump_error(t->h->via) : NULL;

	if (why)
		return gr_errf(err, GR_ESSH, "%s", why);
	if (lrc == LIBSSH2_ERROR_SOCKET_DISCONNECT || lrc == LIBSSH2_ERROR_SOCKET_RECV ||
	    lrc == LIBSSH2_ERROR_SOCKET_SEND || lrc == LIBSSH2_ERROR_CHANNEL_CLOSED ||
	    lrc == LIBSSH2_ERROR_CHANNEL_EOF_SENT)
		return gr_errf(err, GR_ESSH, "connection to %s lost: %s", t->h->desc,
			       ssh_lasterr(t->h->s));
	return gr_errf(err, GR_ESSH, "ssh error with %s: %s", t->h->desc, ssh_lasterr(t->h->s));
}

static ssize_t tr_read(struct gr_transport *gt, void *buf, size_t n, struct gr_err *err)
{
	struct ssh_transport *t = (struct ssh_transport *)gt;
	ssize_t r;

	if (exec_check(t, err) < 0)
		return GR_ESSH;
	drain_stderr(t);
	r = libssh2_channel_read(t->ch, buf, n);
	ssh_hop_flush(t->h);
	if (r > 0)
		return r;
	if (r == 0 || r == LIBSSH2_ERROR_EAGAIN) {
		if (libssh2_channel_eof(t->ch)) {
			drain_stderr(t);
			return 0;
		}
		return GR_TR_AGAIN;
	}
	return lost(t, r, err);
}

static ssize_t tr_write(struct gr_transport *gt, const void *buf, size_t n, struct gr_err *err)
{
	struct ssh_transport *t = (struct ssh_transport *)gt;
	ssize_t w;

	if (t->eof_sent)
		return gr_errf(err, GR_EIO, "writing to %s: already closed", gt->desc);
	w = libssh2_channel_write(t->ch, buf, n);
	if (w > 0)
		return w;
	if (w == 0 || w == LIBSSH2_ERROR_EAGAIN)
		return GR_TR_AGAIN;
	return lost(t, w, err);
}

static int tr_pollfds(struct gr_transport *gt, struct pollfd *pfd, int want_read, int want_write)
{
	struct ssh_transport *t = (struct ssh_transport *)gt;
	int dir = libssh2_session_block_directions(t->h->s);

	(void)want_read;
	pfd[0].fd = t->h->fd;
	pfd[0].events = POLLIN;
	pfd[0].revents = 0;
	(void)dir;
	if (ssh_hop_queued(t->h))
		pfd[0].events |= POLLOUT;
	/* libssh2 may already hold what the caller waits for: data it read
	 * while writing, or a window adjust it took in while reading. Then the
	 * socket has nothing to wake us: ask for writability, which is there,
	 * so the caller comes straight back. */
	else if (ssh_channel_held(t->ch) ||
		 (want_write && libssh2_channel_window_write(t->ch) > 0))
		pfd[0].events |= POLLOUT;
	return 1;
}

static int tr_tick(struct gr_transport *gt, int *timeout_ms, struct gr_err *err)
{
	struct ssh_transport *t = (struct ssh_transport *)gt;

	if (exec_check(t, err) < 0)
		return GR_ESSH;
	drain_stderr(t);
	return ssh_hop_keepalive(t->h, timeout_ms, err);
}

static int tr_close_write(struct gr_transport *gt, struct gr_err *err)
{
	struct ssh_transport *t = (struct ssh_transport *)gt;
	uint64_t deadline = now_ms() + 2000;
	int rc;

	if (t->eof_sent)
		return 0;
	t->eof_sent = 1;
	while ((rc = libssh2_channel_send_eof(t->ch)) == LIBSSH2_ERROR_EAGAIN)
		if (ssh_hop_wait(t->h, deadline, NULL) < 0)
			return gr_errf(err, GR_ETIMEOUT, "could not send EOF to %s", gt->desc);
	return rc < 0 ? lost(t, rc, err) : 0;
}

static void tr_free(struct gr_transport *gt)
{
	struct ssh_transport *t = (struct ssh_transport *)gt;

	if (!gt)
		return;
	/* Send EOF and CLOSE; the session's free releases the channel. */
	if (t->ch)
		libssh2_channel_close(t->ch);
	ssh_chain_free(t->c);
	free(t->cmd);
	free(gt->desc);
	free(t);
}

static const struct gr_transport_ops ssh_ops = {
	.name = "libssh2",
	.read = tr_read,
	.write = tr_write,
	.pollfds = tr_pollfds,
	.tick = tr_tick,
	.close_write = tr_close_write,
	.free = tr_free,
	.tunnels = &ssh_tunnel_ops,
};

int transport_libssh2(struct gr_transport **out, const struct gr_config *cfg,
		      const struct tr_cmd *cmd, const struct tr_opts *opts, struct gr_err *err)
{
	struct ssh_opts o = { 0 };
	struct ssh_transport *t = NULL;
	struct ssh_chain *c = NULL;
	uint64_t deadline;
	int rc;

	o.accept_new = opts->accept_new;
	o.verbose = opts->verbose;
	o.say = opts->say;
	o.say_arg = opts->say_arg;
	o.timeout_s = cfg->remote.connect_timeout;
	o.identity = cfg->remote.identity;
	o.known_hosts = cfg->remote.known_hosts;
	if ((rc = ssh_chain_open(&c, cfg->remote.host, &o, err)) < 0)
		return rc;

	t = xcalloc(1, sizeof(*t));
	t->base.ops = &ssh_ops;
	t->c = c;
	t->h = c->hops[c->n - 1];
	t->base.desc = xstrdup(cfg->remote.host);
	deadline = now_ms() + (uint64_t)t->h->timeout_ms;
	while (!(t->ch = libssh2_channel_open_ex(t->h->s, "session", 7, SSH_WINDOW,
						 LIBSSH2_CHANNEL_PACKET_DEFAULT, NULL, 0))) {
		if (libssh2_session_last_errno(t->h->s) != LIBSSH2_ERROR_EAGAIN) {
			rc = gr_errf(err, GR_ESSH, "%s refused a session channel: %s", t->h->desc,
				     ssh_lasterr(t->h->s));
			goto fail;
		}
		if (ssh_hop_wait(t->h, deadline, NULL) < 0) {
			rc = gr_errf(err, GR_ETIMEOUT, "%s did not open a session channel within %d s",
				     t->h->desc, t->h->timeout_ms / 1000);
			goto fail;
		}
	}
	gr_trace("ssh: channel open");
	/* Built now, not before connecting: its argument may carry what the
	 * caller learnt meanwhile (conn.c: the first requests). */
	t->cmd = tr_command_line(cmd);
	/* Wait until the request is sent, not for its answer (exec_check). */
	while ((rc = libssh2_channel_exec(t->ch, t->cmd)) == LIBSSH2_ERROR_EAGAIN) {
		if (!(libssh2_session_block_directions(t->h->s) & LIBSSH2_SESSION_BLOCK_OUTBOUND)) {
			/* Sent (queued for the socket): its answer comes later. */
			t->exec_pending = 1;
			rc = 0;
			break;
		}
		if (ssh_hop_wait(t->h, deadline, NULL) < 0) {
			rc = gr_errf(err, GR_ETIMEOUT, "%s did not take a command within %d s",
				     t->h->desc, t->h->timeout_ms / 1000);
			goto fail;
		}
	}
	if (rc < 0) {
		rc = gr_errf(err, GR_ESSH, "%s refused to run a command: %s", t->h->desc,
			     ssh_lasterr(t->h->s));
		gr_hintf(err, "a ForceCommand or a restricted shell on the host would do this");
		goto fail;
	}
	ssh_report(t->h, SSH_STEP_CHANNEL, 0, "exec channel open", NULL, NULL);
	*out = &t->base;
	return 0;
fail:
	ssh_report(t->h, SSH_STEP_CHANNEL, rc, NULL, NULL, err);
	tr_free(&t->base);
	return rc;
}
