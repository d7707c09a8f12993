/* The connection holder ([remote] persist, like ssh's ControlPersist): a
 * `gpurun __hold` process that owns one authenticated libssh2 session to a
 * host and runs each later command's bootstrap on a channel of it, so a
 * command pays no handshake. It listens on a private socket (the folder
 * 0700 and ours, the peer's uid checked on every connection; mux.h) and
 * ends after `persist` seconds with no client, when the session is lost,
 * or on SIGTERM/SIGINT/SIGHUP. It keeps one channel open ahead (the
 * spare), so a command's exec goes out at once: the agent's HELLO comes
 * back one round trip after the command asked.
 *
 * A client's stream (transport_mux.c): it sends "GRH1", the command line's
 * length (u32, big-endian) and the line, with a socket for the remote
 * stderr passed alongside (SCM_RIGHTS); we answer one byte, 0 once the
 * exec has left (then the channel's stdout follows, raw, both ways), or 1,
 * a u32 length and a message, and close (the client then connects on its
 * own). EOF either way is passed on; a client that goes away closes its
 * channel (the agent sees EOF, as when a direct connection drops).
 *
 * One thread, everything non-blocking in one poll(); libssh2 opens one
 * channel at a time (its open state is the session's). Memory: ~150 KiB a
 * client, at most HOLD_CLIENTS of them. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "compat.h"
#include "sig_wake.h"
#include "ssh_int.h"
#include "transport.h"

#ifndef MSG_CMSG_CLOEXEC
#define MSG_CMSG_CLOEXEC 0 /* then set below */
#endif

#define HOLD_BUF (64u << 10)
#define HOLD_ERRBUF (16u << 10)
#define HOLD_CLIENTS 64
#define HOLD_REQ_MAX (1u << 20)
#define HOLD_FREE_MS 10000    /* a closed channel's CLOSE waited for, at most */

enum { C_REQ, C_WAIT, C_RUN, C_GONE };

struct hclient {
	int fd, efd;
	int stage;
	uint64_t since;             /* now_ms() when it connected */
	struct strbuf req;
	LIBSSH2_CHANNEL *ch;
	int exec_pending;
	char up[HOLD_BUF];          /* client -> channel */
	size_t up_len, up_off;
	int up_eof, eof_sent;
	char down[HOLD_BUF];        /* channel stdout -> client */
	size_t down_len, down_off;
	int down_eof, shut;
	char err[HOLD_ERRBUF];      /* channel stderr -> the client's stderr socket */
	size_t err_len;
	struct hclient *next;
};

struct closing {
	LIBSSH2_CHANNEL *ch;
	uint64_t until;
	struct closing *next;
};

struct hold {
	struct ssh_chain *chain;
	struct ssh_hop *h;
	int lfd;
	char *sock;
	ino_t sock_ino;
	char *pidfile;
	uint64_t persist_ms;
	uint64_t idle_since;        /* no client since then (0: there are some) */
	struct hclient *clients;
	size_t nclients;
	LIBSSH2_CHANNEL *spare;
	int opening;
	uint64_t open_since, spare_retry;
	struct closing *closing;
	struct gr_err lost;         /* why the session ended (code 0: it has not) */
	uint64_t sock_checked;      /* now_ms() when the socket was last seen */
	int draining;               /* told to end (`gpurun disconnect`): no new
				       client; ends once the running ones have */
};

/* ---- answering a client ---- */

static void client_fail(struct hclient *cl, const char *msg)
{
	unsigned char hdr[5];
	size_t n = strlen(msg);

	hdr[0] = 1;
	hdr[1] = (unsigned char)(n >> 24);
	hdr[2] = (unsigned char)(n >> 16);
	hdr[3] = (unsigned char)(n >> 8);
	hdr[4] = (unsigned char)n;
	/* Tiny, on an empty socket: it fits, or the client is gone. */
	if (compat_send_nosignal(cl->fd, hdr, sizeof(hdr), MSG_DONTWAIT) == (ssize_t)sizeof(hdr))
		(void)compat_send_nosignal(cl->fd, msg, n, MSG_DONTWAIT);
	cl->stage = C_GONE;
}

/* Tell a running client's stderr why its stream ends (best effort), as
 * the command itself would: the message, then its hint. */
static void client_say(struct hclient *cl, const char *msg, const char *hint)
{
	if (cl->efd >= 0) {
		char *line = hint && *hint ? xasprintf("gpurun: %s\nhint: %s\n", msg, hint)
					   : xasprintf("gpurun: %s\n", msg);
		(void)compat_send_nosignal(cl->efd, line, strlen(line), MSG_DONTWAIT);
		free(line);
	}
}

static void channel_retire(struct hold *H, LIBSSH2_CHANNEL *ch)
{
	struct closing *k;

	if (!ch)
		return;
	libssh2_channel_close(ch); /* CLOSE goes out now (send_cb never blocks) */
	k = xcalloc(1, sizeof(*k));
	k->ch = ch;
	k->until = now_ms() + HOLD_FREE_MS;
	k->next = H->closing;
	H->closing = k;
}

static void client_free(struct hold *H, struct hclient *cl)
{
	channel_retire(H, cl->ch);
	if (cl->fd >= 0)
		close(cl->fd);
	if (cl->efd >= 0)
		close(cl->efd);
	sb_release(&cl->req);
	free(cl);
}

/* ---- the session ---- */

static int session_lost(struct hold *H, int lrc)
{
	if (H->lost.code)
		return 1;
	if (H->h->out_err || lrc == LIBSSH2_ERROR_SOCKET_DISCONNECT ||
	    lrc == LIBSSH2_ERROR_SOCKET_RECV || lrc == LIBSSH2_ERROR_SOCKET_SEND ||
	    lrc == LIBSSH2_ERROR_SOCKET_TIMEOUT || lrc == LIBSSH2_ERROR_TIMEOUT) {
		gr_errf(&H->lost, GR_ESSH, "connection to %s lost: %s", H->h->desc,
			H->h->out_err ? strerror(H->h->out_err) : ssh_lasterr(H->h->s));
		return 1;
	}
	return 0;
}

static struct hclient *first_waiting(struct hold *H)
{
	for (struct hclient *cl = H->clients; cl; cl = cl->next)
		if (cl->stage == C_WAIT)
			return cl;
	return NULL;
}

static int start_exec(struct hold *H, struct hclient *cl, LIBSSH2_CHANNEL *ch)
{
	static const unsigned char ok = 0;
	int rc;

	cl->ch = ch;
	sb_add(&cl->req, "", 1); /* NUL-terminate the command line */
	rc = libssh2_channel_exec(ch, cl->req.buf + 8);
	if (rc == LIBSSH2_ERROR_EAGAIN) {
		cl->exec_pending = 1;
	} else if (rc < 0) {
		char *m = xasprintf("%s refused to run a command: %s", H->h->desc,
				    ssh_lasterr(H->h->s));
		session_lost(H, rc);
		client_fail(cl, m);
		free(m);
		return -1;
	}
	sb_release(&cl->req);
	if (compat_send_nosignal(cl->fd, &ok, 1, MSG_DONTWAIT) != 1) {
		cl->stage = C_GONE;
		return -1;
	}
	cl->stage = C_RUN;
	return 0;
}

/* Open channels: one for the first client waiting, else the spare. */
static void open_step(struct hold *H)
{
	struct hclient *w = first_waiting(H);
	LIBSSH2_CHANNEL *ch;
	uint64_t now = now_ms();

	if (H->spare && w) {
		ch = H->spare;
		H->spare = NULL;
		start_exec(H, w, ch);
		return;
	}
	if (H->spare || (!w && !H->opening && now < H->spare_retry))
		return;
	if (!H->opening)
		H->open_since = now;
	ch = libssh2_channel_open_ex(H->h->s, "session", 7, SSH_WINDOW,
				     LIBSSH2_CHANNEL_PACKET_DEFAULT, NULL, 0);
	if (!ch) {
		int e = libssh2_session_last_errno(H->h->s);
		if (e == LIBSSH2_ERROR_EAGAIN && now - H->open_since < (uint64_t)H->h->timeout_ms) {
			H->opening = 1;
			return;
		}
		H->opening = 0;
		if (session_lost(H, e))
			return;
		/* Refused (MaxSessions, say): the client connects on its own. */
		if (w) {
			char *m = xasprintf("%s refused a session channel: %s", H->h->desc,
					    e == LIBSSH2_ERROR_EAGAIN ? "no answer in time"
								      : ssh_lasterr(H->h->s));
			client_fail(w, m);
			free(m);
		}
		H->spare_retry = now + 2000;
		return;
	}
	H->opening = 0;
	if (w)
		start_exec(H, w, ch);
	else
		H->spare = ch;
}

/* ---- a running client ---- */

static void drain_stderr(struct hclient *cl)
{
	ssize_t r;

	while (cl->err_len < sizeof(cl->err) &&
	       (r = libssh2_channel_read_stderr(cl->ch, cl->err + cl->err_len,
						sizeof(cl->err) - cl->err_len)) > 0)
		cl->err_len += (size_t)r;
	if (cl->err_len && cl->efd >= 0) {
		ssize_t w = compat_send_nosignal(cl->efd, cl->err, cl->err_len, MSG_DONTWAIT);
		if (w > 0) {
			memmove(cl->err, cl->err + w, cl->err_len - (size_t)w);
			cl->err_len -= (size_t)w;
		} else if (w < 0 && errno != EAGAIN && errno != EINTR) {
			close(cl->efd); /* nobody reads it: what comes is dropped */
			cl->efd = -1;
		}
	}
	if (cl->efd < 0)
		cl->err_len = 0;
}

static void client_run(struct hold *H, struct hclient *cl)
{
	ssize_t r;

	if (cl->exec_pending) {
		int rc = libssh2_channel_exec(cl->ch, "");
		if (rc != LIBSSH2_ERROR_EAGAIN) {
			cl->exec_pending = 0;
			if (rc < 0) {
				char *m = xasprintf("%s refused to run a command: %s", H->h->desc,
						    ssh_lasterr(H->h->s));
				if (!session_lost(H, rc))
					client_say(cl, m, NULL);
				free(m);
				cl->stage = C_GONE;
				return;
			}
		}
	}
	drain_stderr(cl);
	/* channel -> client */
	for (int i = 0; i < 16 && cl->stage == C_RUN; i++) {
		if (cl->down_off == cl->down_len && !cl->down_eof) {
			cl->down_off = cl->down_len = 0;
			r = libssh2_channel_read(cl->ch, cl->down, sizeof(cl->down));
			if (r > 0) {
				cl->down_len = (size_t)r;
			} else if (r == 0 || r == LIBSSH2_ERROR_EAGAIN) {
				if (libssh2_channel_eof(cl->ch))
					cl->down_eof = 1;
			} else if (session_lost(H, (int)r)) {
				return;
			} else {
				cl->down_eof = 1; /* the channel closed */
			}
		}
		if (cl->down_off < cl->down_len) {
			ssize_t w = compat_send_nosignal(cl->fd, cl->down + cl->down_off,
							 cl->down_len - cl->down_off, MSG_DONTWAIT);
			if (w > 0)
				cl->down_off += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EINTR)
				cl->stage = C_GONE; /* the client went away */
			if (cl->down_off < cl->down_len)
				break;
		} else {
			break;
		}
	}
	if (cl->stage != C_RUN)
		return;
	if (cl->down_eof && cl->down_off == cl->down_len && !cl->shut) {
		drain_stderr(cl);
		shutdown(cl->fd, SHUT_WR);
		cl->shut = 1;
	}
	/* client -> channel. libssh2 takes one packet (32 KiB) a call: write
	 * until it takes nothing (the host's window is used up), not one
	 * packet per turn of the loop (a poll() and its company for each). */
	for (int i = 0; i < 64; i++) {
		ssize_t w;

		if (cl->up_off == cl->up_len && !cl->up_eof) {
			cl->up_off = cl->up_len = 0;
			r = recv(cl->fd, cl->up, sizeof(cl->up), MSG_DONTWAIT);
			if (r > 0)
				cl->up_len = (size_t)r;
			else if (r == 0)
				cl->up_eof = 1;
			else if (errno != EAGAIN && errno != EINTR)
				cl->up_eof = 1; /* reset: as EOF, and the send below fails */
		}
		if (cl->up_off == cl->up_len)
			break;
		w = libssh2_channel_write(cl->ch, cl->up + cl->up_off, cl->up_len - cl->up_off);
		if (w > 0) {
			cl->up_off += (size_t)w;
		} else if (w == 0 || w == LIBSSH2_ERROR_EAGAIN) {
			break;
		} else {
			if (!session_lost(H, (int)w))
				cl->up_off = cl->up_len; /* the channel is gone: drop it */
			return;
		}
	}
	if (cl->up_eof && cl->up_off == cl->up_len && !cl->eof_sent && !cl->exec_pending) {
		int rc = libssh2_channel_send_eof(cl->ch);
		if (rc == 0 || (rc != LIBSSH2_ERROR_EAGAIN && !session_lost(H, rc)))
			cl->eof_sent = 1;
	}
	/* Over when both ways are done. */
	if (cl->shut && cl->eof_sent)
		cl->stage = C_GONE;
}

/* The request: "GRH1", u32 length, the command line; the stderr socket
 * comes with its first bytes. */
static void client_req(struct hold *H, struct hclient *cl)
{
	char buf[16384];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr m = { 0 };
	ssize_t r;
	size_t need = 8;

	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cm.b;
	m.msg_controllen = sizeof(cm.b);
	r = recvmsg(cl->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			(void)fcntl(fd, F_SETFD, FD_CLOEXEC);
			if (cl->efd < 0)
				cl->efd = fd;
			else
				close(fd);
		}
	}
	if (r <= 0) {
		cl->stage = C_GONE;
		return;
	}
	sb_add(&cl->req, buf, (size_t)r);
	if (cl->req.len == 4 && !memcmp(cl->req.buf, "GRX1", 4)) {
		/* `gpurun disconnect`: new commands connect afresh (the socket
		 * goes now), running ones finish; the answer is our pid. */
		char pid[16];
		snprintf(pid, sizeof(pid), "%u\n", (unsigned)getpid());
		(void)compat_send_nosignal(cl->fd, pid, strlen(pid), MSG_DONTWAIT);
		H->draining = 1;
		cl->stage = C_GONE;
		return;
	}
	if (cl->req.len >= 4 && memcmp(cl->req.buf, "GRH1", 4) && memcmp(cl->req.buf, "GRX1", 4)) {
		cl->stage = C_GONE; /* another gpurun's protocol: it falls back */
		return;
	}
	if (cl->req.len >= 8) {
		const unsigned char *p = (const unsigned char *)cl->req.buf + 4;
		uint32_t n = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
		if (n == 0 || n > HOLD_REQ_MAX) {
			cl->stage = C_GONE;
			return;
		}
		need = 8 + n;
	}
	if (cl->req.len > need || (cl->req.len == need && cl->efd < 0) ||
	    (cl->req.len == need && memchr(cl->req.buf + 8, 0, need - 8))) {
		cl->stage = C_GONE; /* more than asked, no stderr socket, or a NUL */
		return;
	}
	if (cl->req.len == need)
		cl->stage = C_WAIT;
}

/* ---- the listening socket ---- */

static void accept_clients(struct hold *H)
{
	while (H->lfd >= 0) {
		int fd = compat_accept_cloexec(H->lfd, NULL, NULL, 1);
		uid_t uid = (uid_t)-1;
		pid_t pid;
		struct hclient *cl;

		if (fd < 0)
			return;
		if (compat_peer_cred(fd, &uid, &pid) < 0 || uid != geteuid() || H->nclients >= HOLD_CLIENTS) {
			close(fd); /* not ours (the folder should have stopped it), or too many */
			continue;
		}
		cl = xcalloc(1, sizeof(*cl));
		cl->fd = fd;
		cl->efd = -1;
		cl->since = now_ms();
		cl->next = H->clients;
		H->clients = cl;
		H->nclients++;
	}
}

static int listen_on(struct hold *H, struct gr_err *err)
{
	struct sockaddr_un a = { 0 };
	struct stat st;
	int fd;

	if (strlen(H->sock) >= sizeof(a.sun_path))
		return gr_errf(err, GR_EIO, "socket path too long: %s", H->sock);
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, H->sock, strlen(H->sock) + 1);
	if ((fd = compat_socket_cloexec(AF_UNIX, SOCK_STREAM, 0, 1)) < 0)
		return gr_errf(err, GR_EIO, "socket: %s", strerror(errno));
	/* The client that started us holds the folder's lock: what is there
	 * is a dead holder's. */
	unlink(H->sock);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || chmod(H->sock, 0600) < 0 ||
	    listen(fd, 64) < 0 || stat(H->sock, &st) < 0) {
		int e = errno;
		close(fd);
		return gr_errf(err, GR_EIO, "cannot listen on %s: %s", H->sock, strerror(e));
	}
	H->lfd = fd;
	H->sock_ino = st.st_ino;
	return 0;
}

/* Remove our socket, unless another holder has replaced it meanwhile. */
static void unlisten(struct hold *H)
{
	struct stat st;

	if (H->lfd >= 0)
		close(H->lfd);
	H->lfd = -1;
	if (stat(H->sock, &st) == 0 && st.st_ino == H->sock_ino)
		unlink(H->sock);
	/* The pid file, while it still names us (a new holder's is its own). */
	{
		char buf[32] = "";
		int fd = open(H->pidfile, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		ssize_t r = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (r > 0 && strtol(buf, NULL, 10) == (long)getpid())
			unlink(H->pidfile);
	}
}

/* ---- the loop ---- */

static int hold_loop(struct hold *H, struct sig_wake *sw)
{
	struct pollfd *pfd = xcalloc(2 * HOLD_CLIENTS + 3, sizeof(*pfd));
	struct hclient **map = xcalloc(2 * HOLD_CLIENTS + 3, sizeof(*map));
	char scratch[256];

	H->idle_since = now_ms();
	for (;;) {
		int timeout = 1000, n = 0, alive = -1, busy = 0;
		uint64_t now;

		if (sig_wake_next(sw))
			break;
		accept_clients(H);
		for (struct hclient *cl = H->clients; cl; cl = cl->next) {
			if (cl->stage == C_REQ)
				client_req(H, cl);
			if (cl->stage == C_REQ && now_ms() - cl->since > 30000)
				cl->stage = C_GONE; /* a request that never finishes */
		}
		open_step(H);
		for (struct hclient *cl = H->clients; cl; cl = cl->next)
			if (cl->stage == C_RUN)
				client_run(H, cl);
		/* What comes for no client (an idle session's keepalive answers,
		 * the host closing): read through the spare. */
		if (H->spare) {
			ssize_t r = libssh2_channel_read(H->spare, scratch, sizeof(scratch));
			if (r < 0 && r != LIBSSH2_ERROR_EAGAIN && !session_lost(H, (int)r)) {
				channel_retire(H, H->spare); /* the host closed it: open another */
				H->spare = NULL;
			}
		}
		for (struct closing **k = &H->closing; *k;) {
			int rc = libssh2_channel_free((*k)->ch);
			if (rc == LIBSSH2_ERROR_EAGAIN && now_ms() < (*k)->until) {
				k = &(*k)->next;
			} else {
				struct closing *d = *k;
				*k = d->next;
				free(d); /* a channel given up on is freed with the session */
			}
		}
		for (struct hclient **p = &H->clients; *p;) {
			if ((*p)->stage == C_GONE) {
				struct hclient *d = *p;
				*p = d->next;
				H->nclients--;
				client_free(H, d);
			} else {
				p = &(*p)->next;
			}
		}
		if (!H->lost.code && ssh_hop_keepalive(H->h, &alive, &H->lost) < 0 && !H->lost.code)
			H->lost.code = GR_ESSH;
		if (H->lost.code)
			break;
		/* No holder without its socket: one removed or replaced (the
		 * runtime folder cleaned at logout, another holder's) ends us,
		 * as a disconnect does, so none is left unfindable. */
		if (!H->draining && now_ms() - H->sock_checked >= 1000) {
			struct stat st;
			H->sock_checked = now_ms();
			if (stat(H->sock, &st) < 0 || st.st_ino != H->sock_ino)
				H->draining = 1;
		}
		if (H->draining) {
			if (H->lfd >= 0)
				unlisten(H);
			if (!H->nclients)
				break;
		}
		now = now_ms();
		if (H->nclients) {
			H->idle_since = 0;
		} else if (!H->idle_since) {
			H->idle_since = now;
		} else if (now - H->idle_since >= H->persist_ms) {
			break;
		}

		/* What to wait for. */
		pfd[n] = (struct pollfd){ sw->fd[0], POLLIN, 0 };
		map[n++] = NULL;
		pfd[n] = (struct pollfd){ H->lfd, H->lfd >= 0 ? POLLIN : 0, 0 };
		map[n++] = NULL;
		pfd[n] = (struct pollfd){ H->h->fd, POLLIN, 0 };
		if (ssh_hop_queued(H->h))
			pfd[n].events |= POLLOUT;
		map[n++] = NULL;
		for (struct hclient *cl = H->clients; cl; cl = cl->next) {
			short ev = 0;
			if (cl->stage == C_REQ || (cl->stage == C_RUN && cl->up_off == cl->up_len && !cl->up_eof))
				ev |= POLLIN;
			if (cl->stage == C_RUN && cl->down_off < cl->down_len)
				ev |= POLLOUT;
			/* Something to do at once: bytes libssh2 holds for a
			 * client that has room for them (one that has not:
			 * its POLLOUT wakes us; spinning here took CPU from
			 * the slow client), or bytes to write and window. */
			if (cl->stage == C_RUN &&
			    ((cl->down_off == cl->down_len && ssh_channel_held(cl->ch)) ||
			     (cl->up_off < cl->up_len && libssh2_channel_window_write(cl->ch) > 0)))
				busy = 1;
			pfd[n] = (struct pollfd){ cl->fd, ev, 0 };
			map[n++] = cl;
			if (cl->stage == C_RUN && cl->err_len && cl->efd >= 0) {
				pfd[n] = (struct pollfd){ cl->efd, POLLOUT, 0 };
				map[n++] = NULL;
			}
		}
		if (H->opening || H->closing)
			timeout = 50;
		if (alive >= 0 && alive < timeout)
			timeout = alive;
		if (!H->nclients && H->idle_since) {
			uint64_t left = H->idle_since + H->persist_ms - now;
			if (left < (uint64_t)timeout)
				timeout = (int)left + 1;
		}
		if (busy)
			timeout = 0;
		compat_tcp_quickack(H->h->fd);
		if (poll(pfd, (nfds_t)n, timeout) < 0 && errno != EINTR)
			break;
		ssh_hop_flush(H->h);
		for (int i = 3; i < n; i++)
			if (map[i] && (pfd[i].revents & (POLLERR | POLLNVAL)))
				map[i]->stage = C_GONE;
	}
	free(pfd);
	free(map);
	return H->lost.code ? 1 : 0;
}

/* ---- starting ---- */

static void say_stderr(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "gpurun: %s\n", msg);
}

/* To the client that started us, on fd 3: 'K' and our pid, or 'E', the
 * code and the message and hint (each a u16 length and its bytes). */
static void report(int fd, const struct gr_err *err)
{
	struct strbuf b = STRBUF_INIT;

	if (!err) {
		sb_addf(&b, "K%u\n", (unsigned)getpid());
	} else {
		size_t m = strlen(err->msg), h = strlen(err->hint);
		sb_addf(&b, "E%d\n%zu\n%zu\n", err->code, m, h);
		sb_add(&b, err->msg, m);
		sb_add(&b, err->hint, h);
	}
	(void)write_full(fd, b.buf, b.len);
	sb_release(&b);
}

/* gpurun __hold SOCK HOST IDENTITY KNOWN_HOSTS TIMEOUT PERSIST ACCEPT_NEW
 * VERBOSE, with fd 3 the report's socket (transport_mux.c starts it). */
int transport_hold_main(int argc, char **argv)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	struct hold H = { 0 };
	struct ssh_opts o = { 0 };
	struct sig_wake sw;
	struct gr_err err = { 0 };
	int rc, null;

	if (argc != 9 || fcntl(3, F_GETFD) < 0) {
		fprintf(stderr, "gpurun: __hold is started by gpurun itself\n");
		return 2;
	}
	(void)fcntl(3, F_SETFD, FD_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);
	H.lfd = -1;
	H.sock = argv[1];
	o.identity = *argv[3] ? argv[3] : NULL;
	o.known_hosts = *argv[4] ? argv[4] : NULL;
	o.timeout_s = (int)strtol(argv[5], NULL, 10);
	H.persist_ms = strtoull(argv[6], NULL, 10) * 1000;
	o.accept_new = (int)strtol(argv[7], NULL, 10);
	o.verbose = (int)strtol(argv[8], NULL, 10);
	o.say = say_stderr;
	if (!H.persist_ms)
		H.persist_ms = 1000;
	/* Until we answer, a Ctrl-C ends us with the command that waits. */
	if ((rc = ssh_chain_open(&H.chain, argv[2], &o, &err)) < 0) {
		report(3, &err);
		return 1;
	}
	H.h = H.chain->hops[H.chain->n - 1];
	H.pidfile = xasprintf("%.*s.pid", (int)(strlen(H.sock) - 5), H.sock);
	if ((rc = listen_on(&H, &err)) < 0 || sig_wake_start(&sw, sigs, 3, 0) < 0) {
		if (!rc)
			gr_errf(&err, GR_EIO, "cannot catch signals: %s", strerror(errno));
		report(3, &err);
		unlisten(&H);
		ssh_chain_free(H.chain);
		free(H.pidfile);
		return 1;
	}
	{
		char pid[32];
		int fd = open(H.pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		snprintf(pid, sizeof(pid), "%u\n", (unsigned)getpid());
		if (fd >= 0) {
			(void)write_full(fd, pid, strlen(pid));
			close(fd);
		}
	}
	/* From here on we outlive the command: no terminal, no stdio of its
	 * (GPURUN_HOLD_LOG: stderr to that file, for tests and debugging). */
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
		const char *log = getenv("GPURUN_HOLD_LOG");
		int lfd = log && *log ? open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;
		dup2(null, 0);
		dup2(null, 1);
		dup2(lfd >= 0 ? lfd : null, 2);
		if (lfd >= 0)
			close(lfd);
		if (null > 2)
			close(null);
	}
	setsid();
	report(3, NULL);
	close(3);
	gr_trace("hold %s: serving %s", argv[2], H.sock);
	rc = hold_loop(&H, &sw);
	/* Nobody new may come while we say goodbye. */
	unlisten(&H);
	for (struct hclient *cl = H.clients, *next; cl; cl = next) {
		next = cl->next;
		if (H.lost.code && cl->stage == C_RUN)
			client_say(cl, H.lost.msg, H.lost.hint);
		client_free(&H, cl);
	}
	H.clients = NULL;
	while (H.closing) {
		struct closing *d = H.closing;
		H.closing = d->next;
		free(d);
	}
	sig_wake_stop(&sw);
	ssh_chain_free(H.chain);
	free(H.pidfile);
	return rc;
}
