/* The bottom of the libssh2 transport, what every file above it calls
 * back: one hop's send queue and waits in poll(), keepalives, libssh2's
 * session with our socket callbacks, method lists, the last error, and
 * where a step's report goes (the observer, or -v). Session setup
 * (ssh.c), known_hosts, auth and the network (ssh_net.c) sit above it. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include "compat.h"
#include "ssh_int.h"

static ssh_observer_fn observer;
static void *observer_arg;
static int verbose_level;
static tr_say_fn say_fn;
static void *say_arg;

void ssh_set_observer(ssh_observer_fn fn, void *arg)
{
	observer = fn;
	observer_arg = arg;
}

void ssh_set_voice(int level, tr_say_fn say, void *arg)
{
	verbose_level = level;
	say_fn = say;
	say_arg = arg;
}

void ssh_say(const char *fmt, ...)
{
	va_list ap;
	char *msg;

	if (!say_fn)
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (msg)
		say_fn(say_arg, msg);
	free(msg);
}

int ssh_verbose(void) { return verbose_level; }
int ssh_observed(void) { return observer != NULL; }

static const char *const step_names[] = {
	"ssh_config", "resolve", "tcp", "handshake", "hostkey", "auth", "channel",
};

void ssh_report(const struct ssh_hop *h, enum ssh_step step, int rc, const char *detail,
		const char *methods, const struct gr_err *err)
{
	struct ssh_step_report r = { step, h->spec, h->is_target, rc, detail, err, methods,
				     step == SSH_STEP_SSHCONFIG ? &h->t.warnings : NULL };

	if (observer)
		observer(&r, observer_arg);
	else if (verbose_level && rc == 0 && detail)
		ssh_say("ssh %s: %s %s", h->spec, step_names[step], detail);
}

const char *ssh_lasterr(LIBSSH2_SESSION *s)
{
	char *msg = NULL;

	if (!s)
		return "";
	libssh2_session_last_error(s, &msg, NULL, 0);
	return msg ? msg : "";
}

size_t ssh_hop_queued(const struct ssh_hop *h)
{
	return h->out.len - h->out_off;
}

int ssh_hop_flush(struct ssh_hop *h)
{
	while (ssh_hop_queued(h) && !h->out_err) {
		ssize_t w = compat_send_nosignal(h->fd, h->out.buf + h->out_off, ssh_hop_queued(h), 0);
		if (w > 0)
			h->out_off += (size_t)w;
		else if (w < 0 && errno == EINTR)
			continue;
		else if (w < 0 && errno == EAGAIN)
			break;
		else
			h->out_err = w < 0 ? errno : EPIPE;
	}
	if (h->out_off == h->out.len) {
		h->out.len = h->out_off = 0;
	} else if (h->out_off > (1u << 20)) {
		memmove(h->out.buf, h->out.buf + h->out_off, ssh_hop_queued(h));
		h->out.len -= h->out_off;
		h->out_off = 0;
	}
	return h->out_err ? -1 : 0;
}

int ssh_hop_wait(struct ssh_hop *h, uint64_t deadline, struct gr_err *err)
{
	int dir = libssh2_session_block_directions(h->s);
	struct pollfd p = { h->fd, POLLIN, 0 };
	int ms = -1;

	/* Sends never block (send_cb): libssh2 only ever waits to read. */
	(void)dir;
	/* Acknowledge at once what comes while we wait (set again each time:
	 * Linux leaves quick-ack mode by itself). sshd has no TCP_NODELAY
	 * before a session starts, so with our delayed ACK its next small
	 * packet (the channel's confirmation, right after its host-keys
	 * notice) waited 40 ms in Nagle's algorithm. Not a TCP socket
	 * (ProxyCommand, ProxyJump): harmless failure. */
	compat_tcp_quickack(h->fd);
	if (ssh_hop_queued(h))
		p.events |= POLLOUT;
	if (deadline) {
		uint64_t now = now_ms();
		if (now >= deadline)
			return gr_errf(err, GR_ETIMEOUT, "timed out");
		ms = (int)(deadline - now);
	}
	if (poll(&p, 1, ms) < 0 && errno != EINTR)
		return gr_errf(err, GR_EIO, "poll: %s", strerror(errno));
	ssh_hop_flush(h); /* a failure shows up in libssh2's next send */
	return 0;
}

/* libssh2's recv, noting when the peer last said anything (keepalive). */
static ssize_t recv_cb(libssh2_socket_t fd, void *buf, size_t len, int flags, void **abstract)
{
	struct ssh_hop *h = *abstract;
	ssize_t r = recv(fd, buf, len, flags);

	if (r > 0)
		h->last_recv = now_ms();
	if (r < 0)
		return errno == ENOENT ? -EAGAIN : -errno;
	return r;
}

/* libssh2's send: whatever the socket does not take now is queued, so a
 * packet is never left half sent inside libssh2 (see struct ssh_hop). The
 * queue is bounded by the peer's channel windows. */
static ssize_t send_cb(libssh2_socket_t fd, const void *buf, size_t len, int flags,
		       void **abstract)
{
	struct ssh_hop *h = *abstract;
	size_t done = 0;

	if (ssh_hop_flush(h) < 0)
		return -h->out_err;
	if (!ssh_hop_queued(h)) {
		ssize_t w = compat_send_nosignal(fd, buf, len, flags);
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			h->out_err = errno;
			return -h->out_err;
		}
		if (w > 0)
			done = (size_t)w;
	}
	if (done < len)
		sb_add(&h->out, (const char *)buf + done, len - done);
	return (ssize_t)len;
}

LIBSSH2_SESSION *ssh_session_new(struct ssh_hop *h)
{
	LIBSSH2_SESSION *s = libssh2_session_init_ex(NULL, NULL, NULL, h);

	if (!s)
		return NULL;
	libssh2_session_callback_set(s, LIBSSH2_CALLBACK_RECV, (void *)recv_cb);
	libssh2_session_callback_set(s, LIBSSH2_CALLBACK_SEND, (void *)send_cb);
	libssh2_session_set_blocking(s, 0);
	return s;
}

int ssh_hop_keepalive(struct ssh_hop *h, int *next_ms, struct gr_err *err)
{
	uint64_t now = now_ms(), dead_ms;
	int next_s = 0;

	*next_ms = -1;
	if (ssh_hop_flush(h) < 0)
		return gr_errf(err, GR_ESSH, "connection to %s lost: %s", h->desc, strerror(h->out_err));
	if (!h->alive_ms)
		return 0;
	if (libssh2_keepalive_send(h->s, &next_s) < 0)
		return gr_errf(err, GR_ESSH, "connection to %s lost: %s", h->desc, ssh_lasterr(h->s));
	dead_ms = (uint64_t)h->alive_ms * (uint64_t)(h->alive_max + 1);
	if (now - h->last_recv >= dead_ms) {
		/* Bytes may be waiting that nobody has read yet: not dead then. */
		struct pollfd p = { h->fd, POLLIN, 0 };
		if (poll(&p, 1, 0) == 0) {
			gr_errf(err, GR_ESSH, "%s stopped answering (silent for %d s)", h->desc,
				(int)((now - h->last_recv) / 1000));
			gr_hintf(err, "the host or the network went away; ServerAliveInterval and "
				 "ServerAliveCountMax set how long gpurun waits");
			return GR_ESSH;
		}
	}
	*next_ms = next_s > 0 ? next_s * 1000 : h->alive_ms;
	if (h->last_recv + dead_ms > now && (int)(h->last_recv + dead_ms - now) < *next_ms)
		*next_ms = (int)(h->last_recv + dead_ms - now) + 1;
	return 0;
}

int ssh_method_pref(struct ssh_hop *h, int method, const char *wanted, struct gr_err *err)
{
	const char **algs = NULL;
	struct strbuf list = STRBUF_INIT;
	char *w = xstrdup(wanted), *save = NULL;
	int n = libssh2_session_supported_algs(h->s, method, &algs), rc = 0;

	/* libssh2 1.10 strips unknown names itself, but with an overlapping
	 * memcpy: hand it only names it has. */
	for (char *a = strtok_r(w, ",", &save); a; a = strtok_r(NULL, ",", &save))
		for (int i = 0; i < n; i++)
			if (!strcmp(a, algs[i]))
				sb_addf(&list, "%s%s", list.len ? "," : "", a);
	if (n > 0)
		libssh2_free(h->s, algs);
	if (!list.len)
		rc = gr_errf(err, GR_ESSH, "this libssh2 supports none of %s", wanted);
	else if (libssh2_session_method_pref(h->s, method, list.buf) < 0)
		rc = gr_errf(err, GR_ESSH, "libssh2 refuses method list '%s': %s", list.buf,
			     ssh_lasterr(h->s));
	sb_release(&list);
	free(w);
	return rc;
}

int ssh_channel_held(LIBSSH2_CHANNEL *ch)
{
	unsigned long avail = 0;

	libssh2_channel_window_read_ex(ch, &avail, NULL);
	return avail > 0;
}
