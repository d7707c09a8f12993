/* Port forwarding (see forward.h): listening sockets, and for each
 * accepted connection a pair of fixed-size buffers between the local
 * socket and a stream the transport opens on the host's side. Streams are
 * opened one at a time (libssh2 keeps one channel-open state per
 * session), in the order the connections came; data moves as poll allows,
 * 64 KiB at most per direction held per connection. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "compat.h"
#include "forward.h"
#include "transport.h"

#define FWD_BUF (64 * 1024)
#define FWD_MAX_CONNS 512   /* beyond this, new connections wait in the backlog */

enum tun_state { TUN_OPENING, TUN_OPEN, TUN_CLOSING };

struct tunnel {
	enum tun_state state;
	int lfd;                 /* the accepted local connection; -1 once closed */
	size_t spec;
	struct tr_tunnel *rt;    /* the host's side; NULL while opening */
	char *up, *down;         /* local -> host, host -> local */
	size_t up_off, up_len, down_off, down_len;
	int l_eof, r_eof, eof_sent, l_shut;
};

struct listener {
	int fd;
	size_t spec;
};

struct fwd {
	struct fwd_spec *specs;
	size_t nspecs;
	struct listener *ls;
	size_t nls;
	struct tunnel **tun;
	size_t ntun;
	struct gr_transport *t;
	const struct tr_tunnel_ops *ops;
	void (*notify)(void *arg, const char *msg);
	void *notify_arg;
	int verbose;
	uint64_t last_refusal;   /* when the last "refused" notice went out */
	size_t refused_quiet;    /* refusals not told since */
};

/* ---- specs ---- */

static int parse_port(const char *s, int *out)
{
	long long v;

	if (parse_ll(s, 1, 65535, &v) < 0)
		return -1;
	*out = (int)v;
	return 0;
}

int fwd_spec_parse(const char *arg, struct fwd_spec *out, struct gr_err *err)
{
	char *dup = xstrdup(arg), *f[5] = { 0 };
	size_t n = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	for (char *p = dup; p && n < 5; n++) {
		f[n] = p;
		if ((p = strchr(p, ':')))
			*p++ = 0;
	}
	const char *bind = "localhost", *host = "localhost", *lp = NULL, *hp = NULL;
	switch (n) {
	case 1: lp = hp = f[0]; break;
	case 2: lp = f[0]; hp = f[1]; break;
	case 3: lp = f[0]; host = f[1]; hp = f[2]; break;
	case 4: bind = f[0]; lp = f[1]; host = f[2]; hp = f[3]; break;
	default: lp = NULL;
	}
	if (!lp || parse_port(lp, &out->lport) < 0 || parse_port(hp, &out->hport) < 0 ||
	    !*host || !*bind || strpbrk(host, " \t\n[]") || strpbrk(bind, " \t\n[]")) {
		rc = gr_errf(err, GR_EUSAGE, "bad forward '%s'", arg);
		gr_hintf(err, "write PORT, PORT:HOSTPORT, PORT:HOST:HOSTPORT or "
			 "BIND:PORT:HOST:HOSTPORT (as ssh -L), ports 1-65535");
		goto out;
	}
	out->bind = xstrdup(bind);
	out->host = xstrdup(host);
out:
	free(dup);
	return rc;
}

void fwd_spec_release(struct fwd_spec *s)
{
	free(s->bind);
	free(s->host);
	s->bind = s->host = NULL;
}

void fwd_spec_describe(const struct fwd_spec *s, char *buf, size_t n)
{
	snprintf(buf, n, "%s:%d -> %s:%d on the host", s->bind, s->lport, s->host, s->hport);
}

const struct fwd_spec *fwd_specs(const struct fwd *f, size_t *n)
{
	*n = f->nspecs;
	return f->specs;
}

/* ---- listening ---- */

/* Bind every address bind names (localhost: 127.0.0.1 and ::1, as ssh
 * does, so a browser trying either finds us); keep_open = 0 only checks
 * that the port is free. */
static int listen_spec(struct fwd *f, size_t si, int keep_open, struct gr_err *err)
{
	const struct fwd_spec *s = &f->specs[si];
	struct addrinfo hints = { 0 }, *res = NULL;
	char port[16];
	int rc, bound = 0, last = 0;

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(port, sizeof(port), "%d", s->lport);
	/* localhost is every loopback address, whatever /etc/hosts lists
	 * and whether or not the host has other IPv6 addresses (which
	 * AI_ADDRCONFIG asks): no node and no AI_PASSIVE give 127.0.0.1 and
	 * ::1, as OpenSSH binds them. Else another account holding [::1]:PORT
	 * would get what a browser sends to localhost:PORT (issue 29). */
	if (!strcmp(s->bind, "localhost"))
		rc = getaddrinfo(NULL, port, &hints, &res);
	else {
		hints.ai_flags = AI_PASSIVE | AI_ADDRCONFIG;
		rc = getaddrinfo(s->bind, port, &hints, &res);
	}
	if (rc != 0)
		return gr_errf(err, GR_EUSAGE, "cannot listen on %s port %d: %s", s->bind, s->lport,
			       gai_strerror(rc));
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		int fd = compat_socket_cloexec(ai->ai_family, ai->ai_socktype, 0, 1), one = 1;
		if (fd < 0) {
			last = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 128) < 0) {
			last = errno;
			close(fd);
			/* ::1 may be missing (no IPv6): fine if another address works. */
			if (last == EADDRNOTAVAIL || last == EAFNOSUPPORT)
				continue;
			break;
		}
		bound++;
		if (!keep_open) {
			close(fd);
			continue;
		}
		f->ls = xrealloc(f->ls, (f->nls + 1) * sizeof(*f->ls));
		f->ls[f->nls++] = (struct listener){ fd, si };
	}
	freeaddrinfo(res);
	if (last && (last != EADDRNOTAVAIL && last != EAFNOSUPPORT))
		bound = 0;
	if (!bound) {
		rc = gr_errf(err, GR_EUSAGE, "cannot listen on %s port %d: %s", s->bind, s->lport,
			     strerror(last ? last : EADDRNOTAVAIL));
		if (last == EADDRINUSE)
			gr_hintf(err, "something here uses port %d already; pick another local port "
				 "(%d:%d forwards local %d to the host's %d)", s->lport, s->lport + 1,
				 s->hport, s->lport + 1, s->hport);
		return rc;
	}
	return 0;
}

int fwd_new(struct fwd **out, const struct fwd_spec *specs, size_t n, int listen,
	    struct gr_err *err)
{
	struct fwd *f = xcalloc(1, sizeof(*f));
	int rc = 0;

	f->specs = xcalloc(n ? n : 1, sizeof(*f->specs));
	for (size_t i = 0; i < n; i++) {
		f->specs[i] = specs[i];
		f->specs[i].bind = xstrdup(specs[i].bind);
		f->specs[i].host = xstrdup(specs[i].host);
	}
	f->nspecs = n;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = listen_spec(f, i, listen, err);
	if (rc < 0) {
		fwd_free(f);
		return rc;
	}
	*out = f;
	return 0;
}

void fwd_set_notify(struct fwd *f, void (*fn)(void *arg, const char *msg), void *arg,
		    int verbose)
{
	f->notify = fn;
	f->notify_arg = arg;
	f->verbose = verbose;
}

void fwd_swap_notify(struct fwd *f, void (**fn)(void *arg, const char *msg), void **arg)
{
	void (*ofn)(void *, const char *) = f->notify;
	void *oarg = f->notify_arg;

	f->notify = *fn;
	f->notify_arg = *arg;
	*fn = ofn;
	*arg = oarg;
}

static void notify(struct fwd *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void notify(struct fwd *f, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	if (!f->notify)
		return;
	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	f->notify(f->notify_arg, sb.buf);
	sb_release(&sb);
}

/* ---- connections ---- */

static void tun_free(struct fwd *f, size_t i)
{
	struct tunnel *tu = f->tun[i];

	if (tu->lfd >= 0)
		close(tu->lfd);
	free(tu->up);
	free(tu->down);
	free(tu);
	memmove(f->tun + i, f->tun + i + 1, (f->ntun - i - 1) * sizeof(*f->tun));
	f->ntun--;
}

/* Done with it: the host's side is closed politely (maybe later). */
static void tun_end(struct tunnel *tu)
{
	if (tu->lfd >= 0) {
		close(tu->lfd);
		tu->lfd = -1;
	}
	tu->state = TUN_CLOSING;
}

void fwd_detach(struct fwd *f)
{
	if (!f)
		return;
	while (f->ntun) {
		struct tunnel *tu = f->tun[f->ntun - 1];
		if (tu->rt && f->ops)
			f->ops->drop(f->t, tu->rt);
		tun_free(f, f->ntun - 1);
	}
	f->t = NULL;
	f->ops = NULL;
}

void fwd_attach(struct fwd *f, struct gr_transport *t)
{
	fwd_detach(f);
	f->t = t;
	f->ops = t ? t->ops->tunnels : NULL;
}

void fwd_free(struct fwd *f)
{
	if (!f)
		return;
	fwd_detach(f);
	free(f->tun);
	for (size_t i = 0; i < f->nls; i++)
		close(f->ls[i].fd);
	free(f->ls);
	for (size_t i = 0; i < f->nspecs; i++)
		fwd_spec_release(&f->specs[i]);
	free(f->specs);
	free(f);
}

static void accept_all(struct fwd *f, const struct listener *l)
{
	while (f->ntun < FWD_MAX_CONNS) {
		int fd = compat_accept_cloexec(l->fd, NULL, NULL, 1);
		if (fd < 0)
			return; /* EAGAIN, or a connection that went away */
		if (!f->ops) {
			close(fd);
			continue;
		}
		struct tunnel *tu = xcalloc(1, sizeof(*tu));
		tu->lfd = fd;
		tu->spec = l->spec;
		tu->state = TUN_OPENING;
		f->tun = xrealloc(f->tun, (f->ntun + 1) * sizeof(*f->tun));
		f->tun[f->ntun++] = tu;
	}
}

/* Open the host's side of the oldest connection waiting: one at a time. */
static int open_next(struct fwd *f)
{
	struct gr_err e = { 0 };

	for (size_t i = 0; i < f->ntun; i++) {
		struct tunnel *tu = f->tun[i];
		if (tu->state != TUN_OPENING)
			continue;
		const struct fwd_spec *s = &f->specs[tu->spec];
		int rc = f->ops->open(f->t, s->host, s->hport, &tu->rt, &e);
		if (rc == GR_TR_AGAIN)
			return 0;
		if (rc < 0) {
			/* Say it once in a while, not for each of a browser's
			 * many connections. */
			uint64_t now = now_ms();
			if (now - f->last_refusal > 5000) {
				notify(f, "forward %d: the host could not connect to %s:%d: %s%s", s->lport,
				       s->host, s->hport, e.msg,
				       f->refused_quiet ? " (and earlier connections)" : "");
				f->last_refusal = now;
				f->refused_quiet = 0;
			} else {
				f->refused_quiet++;
			}
			tu->rt = NULL;
			tun_free(f, i);
			return 1;
		}
		tu->state = TUN_OPEN;
		tu->up = xmalloc(FWD_BUF);
		tu->down = xmalloc(FWD_BUF);
		if (f->verbose)
			notify(f, "forward %d: connection opened to %s:%d on the host", s->lport,
			       s->host, s->hport);
		return 1;
	}
	return 0;
}

/* Move what can be moved for one open connection. Returns 1 if anything
 * happened; ends the connection when both directions are done or either
 * side failed. */
static int pump(struct fwd *f, struct tunnel *tu)
{
	struct gr_err e = { 0 };
	int progress = 0;
	ssize_t r;

	/* local -> host */
	if (tu->up_off == tu->up_len && !tu->l_eof) {
		r = recv(tu->lfd, tu->up, FWD_BUF, 0);
		if (r > 0) {
			tu->up_off = 0;
			tu->up_len = (size_t)r;
			progress = 1;
		} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
			tu->l_eof = 1;
			progress = 1;
		}
	}
	if (tu->up_off < tu->up_len) {
		r = f->ops->write(f->t, tu->rt, tu->up + tu->up_off, tu->up_len - tu->up_off, &e);
		if (r > 0) {
			tu->up_off += (size_t)r;
			progress = 1;
		} else if (r != GR_TR_AGAIN) {
			tun_end(tu);
			return 1;
		}
	}
	if (tu->l_eof && tu->up_off == tu->up_len && !tu->eof_sent) {
		if (f->ops->send_eof(f->t, tu->rt) == 0) {
			tu->eof_sent = 1;
			progress = 1;
		}
	}
	/* host -> local */
	if (tu->down_off == tu->down_len && !tu->r_eof) {
		r = f->ops->read(f->t, tu->rt, tu->down, FWD_BUF, &e);
		if (r > 0) {
			tu->down_off = 0;
			tu->down_len = (size_t)r;
			progress = 1;
		} else if (r == 0) {
			tu->r_eof = 1;
			progress = 1;
		} else if (r != GR_TR_AGAIN) {
			tun_end(tu);
			return 1;
		}
	}
	if (tu->down_off < tu->down_len) {
		r = compat_send_nosignal(tu->lfd, tu->down + tu->down_off, tu->down_len - tu->down_off, 0);
		if (r > 0) {
			tu->down_off += (size_t)r;
			progress = 1;
		} else if (r < 0 && errno != EAGAIN && errno != EINTR) {
			tun_end(tu); /* the local program went away */
			return 1;
		}
	}
	if (tu->r_eof && tu->down_off == tu->down_len && !tu->l_shut) {
		shutdown(tu->lfd, SHUT_WR);
		tu->l_shut = 1;
		progress = 1;
	}
	if (tu->l_shut && tu->eof_sent) {
		tun_end(tu);
		progress = 1;
	}
	return progress;
}

void fwd_pollfds(struct fwd *f, struct pollfd **pfd, size_t *cap, size_t *n,
		 int *timeout_ms)
{
	size_t need;

	if (!f)
		return;
	need = *n + f->nls + 2 * f->ntun;
	if (need > *cap) {
		*cap = need + 16;
		*pfd = xrealloc(*pfd, *cap * sizeof(**pfd));
	}
	for (size_t i = 0; i < f->nls; i++)
		(*pfd)[(*n)++] = (struct pollfd){ f->ls[i].fd,
						  f->ops && f->ntun < FWD_MAX_CONNS ? POLLIN : 0, 0 };
	for (size_t i = 0; i < f->ntun; i++) {
		struct tunnel *tu = f->tun[i];
		if (tu->state == TUN_OPENING || tu->state == TUN_CLOSING) {
			/* Waiting on the host: the transport's fds wake us. */
			int fd = tu->rt ? f->ops->fd(f->t, tu->rt) : -1;
			if (fd >= 0)
				(*pfd)[(*n)++] = (struct pollfd){ fd, POLLIN | POLLOUT, 0 };
			continue;
		}
		short lev = 0, rev = 0;
		int want_r = tu->down_off == tu->down_len && !tu->r_eof;
		int want_w = tu->up_off < tu->up_len || (tu->l_eof && !tu->eof_sent);
		if (tu->up_off == tu->up_len && !tu->l_eof)
			lev |= POLLIN;
		if (tu->down_off < tu->down_len)
			lev |= POLLOUT;
		if (lev)
			(*pfd)[(*n)++] = (struct pollfd){ tu->lfd, lev, 0 };
		int fd = f->ops->fd(f->t, tu->rt);
		if (want_r)
			rev |= POLLIN;
		if (want_w)
			rev |= POLLOUT;
		if (fd >= 0 && rev)
			(*pfd)[(*n)++] = (struct pollfd){ fd, rev, 0 };
		if ((want_r || want_w) && f->ops->ready(f->t, tu->rt, want_r, want_w))
			*timeout_ms = 0;
	}
}

void fwd_service(struct fwd *f, const struct pollfd *pfd, size_t n)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->nls; i++)
		for (size_t k = 0; k < n; k++)
			if (pfd[k].fd == f->ls[i].fd && pfd[k].revents)
				accept_all(f, &f->ls[i]);
	if (!f->ops)
		return;
	/* A few rounds while things move, so a small exchange finishes in
	 * one wake-up; bounded, so the agent's own stream is not starved. */
	for (int round = 0; round < 8; round++) {
		int progress = open_next(f);
		for (size_t i = 0; i < f->ntun;) {
			struct tunnel *tu = f->tun[i];
			if (tu->state == TUN_OPEN)
				progress |= pump(f, tu);
			if (tu->state == TUN_CLOSING) {
				if (!tu->rt || f->ops->close(f->t, tu->rt) == 0) {
					tu->rt = NULL;
					tun_free(f, i);
					progress = 1;
					continue;
				}
			}
			i++;
		}
		if (!progress)
			break;
	}
}
