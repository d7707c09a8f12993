/* Port forwarding over the libssh2 transport: each forwarded connection
 * is a direct-tcpip channel on the session that carries the agent, driven
 * by the same non-blocking loop. libssh2 1.10 keeps one channel-open state
 * per session, so forward.c opens one at a time; every send goes through
 * the hop's queue (ssh.c's send_cb), so no packet is ever left half sent
 * between calls on different channels. */
#include <stdlib.h>

#include "ssh_int.h"

struct tr_tunnel {
	LIBSSH2_CHANNEL *ch;
};

static struct ssh_transport *st(struct gr_transport *gt)
{
	return (struct ssh_transport *)gt;
}

static int sf_open(struct gr_transport *gt, const char *host, int port, struct tr_tunnel **out,
		   struct gr_err *err)
{
	struct ssh_transport *t = st(gt);
	LIBSSH2_CHANNEL *ch;

	/* The originator is ours to name; sshd only logs it. */
	ch = libssh2_channel_direct_tcpip_ex(t->h->s, host, port, "127.0.0.1", 0);
	ssh_hop_flush(t->h);
	if (!ch) {
		int e = libssh2_session_last_errno(t->h->s);
		if (e == LIBSSH2_ERROR_EAGAIN)
			return GR_TR_AGAIN;
		int rc = gr_errf(err, e == LIBSSH2_ERROR_CHANNEL_FAILURE ? GR_EREMOTE : GR_ESSH,
				 "%s", ssh_lasterr(t->h->s));
		if (e == LIBSSH2_ERROR_CHANNEL_FAILURE)
			gr_hintf(err, "nothing listens there, or sshd forbids it (AllowTcpForwarding)");
		return rc;
	}
	*out = xcalloc(1, sizeof(**out));
	(*out)->ch = ch;
	return 0;
}

static ssize_t sf_read(struct gr_transport *gt, struct tr_tunnel *tu, void *buf, size_t n,
		       struct gr_err *err)
{
	struct ssh_transport *t = st(gt);
	ssize_t r = libssh2_channel_read(tu->ch, buf, n);

	ssh_hop_flush(t->h);
	if (r > 0)
		return r;
	if (r == 0 || r == LIBSSH2_ERROR_EAGAIN)
		return libssh2_channel_eof(tu->ch) ? 0 : GR_TR_AGAIN;
	return gr_errf(err, GR_ESSH, "forwarded connection: %s", ssh_lasterr(t->h->s));
}

static ssize_t sf_write(struct gr_transport *gt, struct tr_tunnel *tu, const void *buf, size_t n,
			struct gr_err *err)
{
	struct ssh_transport *t = st(gt);
	ssize_t w = libssh2_channel_write(tu->ch, buf, n);

	ssh_hop_flush(t->h);
	if (w > 0)
		return w;
	if (w == 0 || w == LIBSSH2_ERROR_EAGAIN)
		return GR_TR_AGAIN;
	return gr_errf(err, GR_ESSH, "forwarded connection: %s", ssh_lasterr(t->h->s));
}

static int sf_send_eof(struct gr_transport *gt, struct tr_tunnel *tu)
{
	int rc = libssh2_channel_send_eof(tu->ch);

	ssh_hop_flush(st(gt)->h);
	return rc == LIBSSH2_ERROR_EAGAIN ? GR_TR_AGAIN : 0;
}

static int sf_close(struct gr_transport *gt, struct tr_tunnel *tu)
{
	/* Sends EOF and CLOSE, and frees once the host's CLOSE is in. */
	int rc = libssh2_channel_free(tu->ch);

	ssh_hop_flush(st(gt)->h);
	if (rc == LIBSSH2_ERROR_EAGAIN)
		return GR_TR_AGAIN;
	free(tu);
	return 0;
}

static void sf_drop(struct gr_transport *gt, struct tr_tunnel *tu)
{
	(void)gt;
	free(tu); /* the session's free releases the channel */
}

static int sf_fd(struct gr_transport *gt, struct tr_tunnel *tu)
{
	(void)gt;
	(void)tu;
	return -1; /* the session's socket, polled by the transport */
}

static int sf_ready(struct gr_transport *gt, struct tr_tunnel *tu, int want_read, int want_write)
{
	(void)gt;
	/* libssh2 takes in every channel's packets whichever channel reads:
	 * data, an EOF or a window for this one may be waiting inside. */
	if (want_read && (ssh_channel_held(tu->ch) || libssh2_channel_eof(tu->ch)))
		return 1;
	if (want_write && libssh2_channel_window_write(tu->ch) > 0)
		return 1;
	return 0;
}

const struct tr_tunnel_ops ssh_tunnel_ops = {
	.open = sf_open,
	.read = sf_read,
	.write = sf_write,
	.send_eof = sf_send_eof,
	.close = sf_close,
	.drop = sf_drop,
	.fd = sf_fd,
	.ready = sf_ready,
};
