/* A byte stream to each hop's sshd: TCP with a connect timeout, a
 * ProxyCommand on a socketpair, or (ProxyJump) a direct-tcpip channel of
 * the previous hop pumped to a socketpair by a thread, so that every
 * session, tunnelled or not, runs over a plain fd that poll() can watch. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compat.h"
#include "ssh_int.h"

static void tcp_tune(int fd)
{
	int one = 1;

	/* Our frames are request/answer: Nagle would hold small ones back. */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
}

/* Connect fd to ai within timeout_ms; 0, or an errno value (ETIMEDOUT). */
static int connect_one(int fd, const struct addrinfo *ai, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	int e = 0;
	socklen_t el = sizeof(e);

	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return 0;
	if (errno != EINPROGRESS && errno != EINTR)
		return errno;
	for (;;) {
		uint64_t now = now_ms();
		if (now >= deadline)
			return ETIMEDOUT;
		struct pollfd p = { fd, POLLOUT, 0 };
		int r = poll(&p, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno;
		if (r == 0)
			return ETIMEDOUT;
		break;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
		return errno;
	return e;
}

int ssh_net_tcp(struct ssh_hop *h, struct gr_err *err)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	struct strbuf addrs = STRBUF_INIT;
	char port[16], host[NI_MAXHOST], *detail = NULL;
	int rc, fd = -1, last = 0;
	uint64_t t0;

	hints.ai_socktype = SOCK_STREAM;
	hints.ai_family = AF_UNSPEC;
	snprintf(port, sizeof(port), "%d", h->t.port);
	/* getaddrinfo blocks (as in OpenSSH); ConnectTimeout starts after it. */
	rc = getaddrinfo(h->t.hostname, port, &hints, &res);
	if (rc != 0) {
		rc = gr_errf(err, GR_ESSH, "cannot resolve '%s': %s", h->t.hostname,
			     rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
		if (strcmp(h->t.hostname, h->spec))
			gr_hintf(err, "'%s' is HostName '%s' in ssh_config; check it there",
				 h->t.alias, h->t.hostname);
		else
			gr_hintf(err, "check the name, or add a 'Host %s' entry with its HostName to ~/.ssh/config",
				 h->t.alias);
		ssh_report(h, SSH_STEP_RESOLVE, rc, NULL, NULL, err);
		return rc;
	}
	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		if (getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof(host), NULL, 0,
				NI_NUMERICHOST) == 0)
			sb_addf(&addrs, "%s%s", addrs.len ? ", " : "", host);
	}
	detail = xasprintf("%s is %s", h->t.hostname, addrs.buf ? addrs.buf : "?");
	ssh_report(h, SSH_STEP_RESOLVE, 0, detail, NULL, NULL);
	free(detail);
	detail = NULL;

	for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
		fd = compat_socket_cloexec(ai->ai_family, ai->ai_socktype, ai->ai_protocol, 1);
		if (fd < 0) {
			last = errno;
			continue;
		}
		getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof(host), NULL, 0, NI_NUMERICHOST);
		t0 = now_ns();
		last = connect_one(fd, ai, h->timeout_ms);
		if (last == 0) {
			tcp_tune(fd);
			h->fd = fd;
			detail = xasprintf("connected to %s port %d in %.1f ms", host, h->t.port,
					   (double)(now_ns() - t0) / 1e6);
			ssh_report(h, SSH_STEP_TCP, 0, detail, NULL, NULL);
			rc = 0;
			goto out;
		}
		close(fd);
		fd = -1;
		if (ssh_verbose())
			ssh_say("ssh: %s port %d: %s", host, h->t.port,
				last == ETIMEDOUT ? "timed out" : strerror(last));
	}
	if (last == ETIMEDOUT) {
		rc = gr_errf(err, GR_ETIMEOUT, "cannot connect to %s port %d: no answer within %d s",
			     h->t.hostname, h->t.port, h->timeout_ms / 1000);
		gr_hintf(err, "is the host up and reachable from here? ConnectTimeout (ssh_config) "
			 "or [remote] connect_timeout sets how long to wait");
	} else {
		rc = gr_errf(err, GR_ESSH, "cannot connect to %s port %d: %s", h->t.hostname,
			     h->t.port, strerror(last));
		if (last == ECONNREFUSED)
			gr_hintf(err, "nothing listens there: is sshd running, and is the Port right?");
	}
	ssh_report(h, SSH_STEP_TCP, rc, NULL, NULL, err);
out:
	freeaddrinfo(res);
	sb_release(&addrs);
	free(detail);
	return rc;
}

int ssh_net_proxy_command(struct ssh_hop *h, struct gr_err *err)
{
	int sv[2], rc;
	pid_t pid;
	char *detail;

	if (compat_socketpair_cloexec(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		return gr_errf(err, GR_EIO, "socketpair: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		rc = gr_errf(err, GR_EIO, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return rc;
	}
	if (pid == 0) {
		char *cmd = xasprintf("exec %s", h->t.proxy_command);
		dup2(sv[1], 0);
		dup2(sv[1], 1);
		/* gpurun decides what Ctrl-C means; keep the proxy out of it. */
		setpgid(0, 0);
		signal(SIGPIPE, SIG_DFL);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	set_nonblock(sv[0], 1);
	h->fd = sv[0];
	h->proxy_pid = pid;
	h->proxy_cmd = xstrdup(h->t.proxy_command);
	detail = xasprintf("ProxyCommand '%s' started", h->t.proxy_command);
	ssh_report(h, SSH_STEP_TCP, 0, detail, NULL, NULL);
	free(detail);
	return 0;
}

void ssh_net_reap_proxy(struct ssh_hop *h)
{
	int status;

	if (h->proxy_pid <= 0)
		return;
	for (int i = 0; i < 50; i++) {
		if (waitpid(h->proxy_pid, &status, WNOHANG) != 0)
			goto done;
		usleep(10000);
	}
	kill(h->proxy_pid, SIGTERM);
	waitpid(h->proxy_pid, &status, 0);
done:
	h->proxy_pid = 0;
}

/* ---- ProxyJump: a channel of one hop pumped to the next hop's fd ---- */

struct ssh_pump {
	pthread_t th;
	struct ssh_hop *via;     /* owned by the thread while it runs */
	LIBSSH2_CHANNEL *ch;
	int local;               /* the pump's end of the socketpair */
	int wake[2];             /* main -> pump: stop */
	atomic_int failed;
	char why[512];
};

static void pump_fail(struct ssh_pump *p, const char *what)
{
	if (atomic_load(&p->failed))
		return;
	size_t n = strnlen(what, sizeof(p->why) - 1);

	memcpy(p->why, what, n); /* truncation is fine for a message */
	p->why[n] = '\0';
	atomic_store(&p->failed, 1);
}

/* Shuttle bytes both ways until either side ends or we are told to stop. */
static void *pump_main(void *arg)
{
	struct ssh_pump *p = arg;
	struct ssh_hop *h = p->via;
	static const size_t bufsz = 64 * 1024;
	char *up = xmalloc(bufsz), *down = xmalloc(bufsz);
	size_t up_off = 0, up_len = 0, down_off = 0, down_len = 0;
	int local_eof = 0, chan_eof = 0, eof_sent = 0;
	struct gr_err err = { 0 };
	char msg[600];

	for (;;) {
		int progress = 0, next_ms = -1;
		ssize_t r;

		/* channel -> next hop */
		if (down_off == down_len && !chan_eof) {
			r = libssh2_channel_read(p->ch, down, bufsz);
			if (r > 0) {
				down_off = 0;
				down_len = (size_t)r;
				progress = 1;
			} else if ((r == 0 && libssh2_channel_eof(p->ch)) ||
				   (r < 0 && r != LIBSSH2_ERROR_EAGAIN)) {
				if (r < 0) {
					snprintf(msg, sizeof(msg), "connection to jump host %s lost: %s",
						 h->desc, ssh_lasterr(h->s));
					pump_fail(p, msg);
				}
				chan_eof = 1;
				shutdown(p->local, SHUT_WR);
				progress = 1;
			}
		}
		if (down_off < down_len) {
			r = compat_send_nosignal(p->local, down + down_off, down_len - down_off, 0);
			if (r > 0) {
				down_off += (size_t)r;
				progress = 1;
			} else if (r < 0 && errno != EAGAIN && errno != EINTR) {
				break; /* the next hop's session is gone */
			}
		}
		/* next hop -> channel */
		if (up_off == up_len && !local_eof) {
			r = recv(p->local, up, bufsz, 0);
			if (r > 0) {
				up_off = 0;
				up_len = (size_t)r;
				progress = 1;
			} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
				local_eof = 1;
				progress = 1;
			}
		}
		if (up_off < up_len) {
			r = libssh2_channel_write(p->ch, up + up_off, up_len - up_off);
			if (r > 0) {
				up_off += (size_t)r;
				progress = 1;
			} else if (r == LIBSSH2_ERROR_EAGAIN) {
				/* no window: an adjust will come in */
			} else if (r < 0) {
				snprintf(msg, sizeof(msg), "connection to jump host %s lost: %s",
					 h->desc, ssh_lasterr(h->s));
				pump_fail(p, msg);
				break;
			}
		}
		if (local_eof && up_off == up_len && !eof_sent) {
			int e = libssh2_channel_send_eof(p->ch);
			if (e != LIBSSH2_ERROR_EAGAIN)
				eof_sent = 1;
		}
		if (local_eof && (eof_sent || chan_eof))
			break;
		if (ssh_hop_flush(h) < 0) {
			snprintf(msg, sizeof(msg), "connection to jump host %s lost: %s", h->desc,
				 strerror(h->out_err));
			pump_fail(p, msg);
			break;
		}
		if (ssh_hop_keepalive(h, &next_ms, &err) < 0) {
			pump_fail(p, err.msg);
			break;
		}
		if (progress)
			continue;
		/* What libssh2 already holds wakes no poll: data read while we
		 * wrote, or a window that opened while we read. */
		if ((down_off == down_len && !chan_eof && ssh_channel_held(p->ch)) ||
		    (up_off < up_len && libssh2_channel_window_write(p->ch) > 0))
			continue;

		struct pollfd pfd[3] = {
			{ h->fd, POLLIN, 0 },
			{ p->local, 0, 0 },
			{ p->wake[0], POLLIN, 0 },
		};
		if (ssh_hop_queued(h))
			pfd[0].events |= POLLOUT;
		if (up_off == up_len && !local_eof)
			pfd[1].events |= POLLIN;
		if (down_off < down_len)
			pfd[1].events |= POLLOUT;
		if (poll(pfd, 3, next_ms) < 0 && errno != EINTR) {
			snprintf(msg, sizeof(msg), "poll: %s", strerror(errno));
			pump_fail(p, msg);
			break;
		}
		if (pfd[2].revents)
			break;
	}
	/* The next hop sees EOF and reports its own error. */
	shutdown(p->local, SHUT_RDWR);
	free(up);
	free(down);
	return NULL;
}

int ssh_pump_start(struct ssh_hop *via, struct ssh_hop *next, struct gr_err *err)
{
	struct ssh_pump *p;
	LIBSSH2_CHANNEL *ch;
	uint64_t deadline = now_ms() + (uint64_t)via->timeout_ms;
	int sv[2], rc;
	char *detail;

	/* The jump host resolves and connects; its own sshd says if it can't. */
	while (!(ch = libssh2_channel_direct_tcpip_ex(via->s, next->t.hostname, next->t.port,
						      "127.0.0.1", 0))) {
		if (libssh2_session_last_errno(via->s) != LIBSSH2_ERROR_EAGAIN) {
			rc = gr_errf(err, GR_ESSH, "jump host %s could not open a tunnel to %s port %d: %s",
				     via->spec, next->t.hostname, next->t.port, ssh_lasterr(via->s));
			gr_hintf(err, "check that '%s' can reach that address and allows TCP forwarding "
				 "(AllowTcpForwarding in its sshd_config)", via->spec);
			ssh_report(next, SSH_STEP_TCP, rc, NULL, NULL, err);
			return rc;
		}
		if ((rc = ssh_hop_wait(via, deadline, err)) < 0) {
			gr_errf(err, GR_ETIMEOUT, "jump host %s did not open a tunnel to %s port %d within %d s",
				via->spec, next->t.hostname, next->t.port, via->timeout_ms / 1000);
			ssh_report(next, SSH_STEP_TCP, rc, NULL, NULL, err);
			return rc;
		}
	}
	if (compat_socketpair_cloexec(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		rc = gr_errf(err, GR_EIO, "socketpair: %s", strerror(errno));
		libssh2_channel_free(ch);
		return rc;
	}
	p = xcalloc(1, sizeof(*p));
	p->via = via;
	p->ch = ch;
	p->local = sv[1];
	set_nonblock(sv[0], 1);
	set_nonblock(sv[1], 1);
	if (compat_pipe_cloexec(p->wake, 1) < 0) {
		rc = gr_errf(err, GR_EIO, "pipe: %s", strerror(errno));
		goto fail;
	}
	if ((rc = pthread_create(&p->th, NULL, pump_main, p)) != 0) {
		close(p->wake[0]);
		close(p->wake[1]);
		rc = gr_errf(err, GR_EIO, "cannot start a thread: %s", strerror(rc));
		goto fail;
	}
	via->pump = p;
	next->fd = sv[0];
	next->via = via;
	detail = xasprintf("tunnel through %s to %s port %d", via->spec, next->t.hostname,
			   next->t.port);
	ssh_report(next, SSH_STEP_TCP, 0, detail, NULL, NULL);
	free(detail);
	return 0;
fail:
	close(sv[0]);
	close(sv[1]);
	libssh2_channel_free(ch);
	free(p);
	return rc;
}

void ssh_pump_stop(struct ssh_hop *via)
{
	struct ssh_pump *p = via ? via->pump : NULL;

	if (!p)
		return;
	if (write(p->wake[1], "x", 1) < 0) {
		/* The pipe is ours and empty: cannot fail short of memory corruption. */
	}
	pthread_join(p->th, NULL);
	close(p->wake[0]);
	close(p->wake[1]);
	close(p->local);
	/* The session is ours again: send CLOSE, but do not wait for the
	 * answer (a round trip); freeing the session frees the channel. */
	libssh2_channel_close(p->ch);
	free(p);
	via->pump = NULL;
}

const char *ssh_pump_error(const struct ssh_hop *via)
{
	if (!via || !via->pump || !atomic_load(&via->pump->failed))
		return NULL;
	return via->pump->why;
}
