/* A command's side of the connection holder (ssh_hold.c): find the
 * holder for this host and connection settings, or start one under a
 * lock (two commands racing get one holder), then hand it the bootstrap
 * command and use the stream it gives back as the transport. Anything
 * wrong with a holder that was already there (gone, refusing, another
 * gpurun's protocol, too slow) makes the command connect on its own, as
 * without persist; a holder started for this command that cannot connect
 * gives its error, which is the one a direct connection would give.
 *
 * The folder: $XDG_RUNTIME_DIR/gpurun, else /tmp/gpurun-UID; made 0700,
 * and used only while it is a folder of ours that nobody else may enter
 * (else we say why and connect directly). Each holder: KEY.sock, KEY.lock
 * (taken to start one), KEY.pid; KEY hashes what the connection depends
 * on. Both ends check the other's uid. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compat.h"
#include "ssh_int.h"
#include "transport.h"

#ifndef MSG_NOSIGNAL
#define MSG_NOSIGNAL 0 /* SIGPIPE is ignored while connected (conn_open) */
#endif

#define MUX_LOCK_MS 120000     /* waiting for another command's holder to start */
#define MUX_START_MS 600000    /* a holder connecting (a passphrase typed included) */

struct mux_transport {
	struct gr_transport base;
	int fd, efd;
};

/* ---- where ---- */

/* The holders' folder into dir: 0, or -1 with why set (not to be used). */
static int hold_dir(struct strbuf *dir, struct strbuf *why)
{
	const char *x = getenv("XDG_RUNTIME_DIR");
	struct stat st;

	if (x && x[0] == '/')
		sb_addf(dir, "%s/gpurun", x);
	else
		sb_addf(dir, "/tmp/gpurun-%u", (unsigned)geteuid());
	if (mkdir(dir->buf, 0700) < 0 && errno != EEXIST) {
		sb_addf(why, "cannot make %s: %s", dir->buf, strerror(errno));
		return -1;
	}
	if (lstat(dir->buf, &st) < 0) {
		sb_addf(why, "%s: %s", dir->buf, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		sb_addf(why, "%s is not a folder", dir->buf);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		sb_addf(why, "%s belongs to uid %u, not to us", dir->buf, (unsigned)st.st_uid);
		return -1;
	}
	if (st.st_mode & 077) {
		sb_addf(why, "others may enter %s (mode %04o; it must be 0700)", dir->buf,
			(unsigned)(st.st_mode & 07777));
		return -1;
	}
	return 0;
}

/* Each field with its NUL, so "ab","c" differs from "a","bc". */
static void hash_str(uint64_t *h, const char *s)
{
	*h = fnv1a64(*h, s, strlen(s) + 1);
}

/* What the session depends on: the host as written (ssh_config resolves
 * it), the identity, known_hosts and the timeout. */
static void hold_key(const struct gr_config *cfg, char out[17])
{
	uint64_t h = FNV1A64_INIT;
	char t[32];

	hash_str(&h, "gpurun-hold-1");
	hash_str(&h, cfg->remote.host);
	hash_str(&h, cfg->remote.identity ? cfg->remote.identity : "");
	hash_str(&h, cfg->remote.known_hosts ? cfg->remote.known_hosts : "");
	snprintf(t, sizeof(t), "%d", cfg->remote.connect_timeout);
	hash_str(&h, t);
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* "DIR/KEY", the name of cfg's holder files without their ending (.sock,
 * .lock, .pid): 0, or -1 with why set (the folder is not to be used). */
static int hold_base(const struct gr_config *cfg, struct strbuf *base, struct strbuf *why)
{
	char key[17];

	if (hold_dir(base, why) < 0)
		return -1;
	hold_key(cfg, key);
	sb_addf(base, "/%s", key);
	return 0;
}

/* ---- reaching a holder ---- */

/* Connect to sock: the fd (non-blocking), or -1 with errno. */
static int dial(const char *sock)
{
	struct sockaddr_un a = { 0 };
	uid_t uid = (uid_t)-1;
	pid_t pid;
	int fd;

	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, sock, strlen(sock) + 1);
	if ((fd = compat_socket_cloexec(AF_UNIX, SOCK_STREAM, 0, 0)) < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (compat_peer_cred(fd, &uid, &pid) < 0 || uid != geteuid()) {
		close(fd);
		errno = EPERM;
		return -1;
	}
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

/* Wait until fd is readable (or writable): 1, 0 after ms, -1 on error. */
static int wait_fd(int fd, short ev, int ms)
{
	struct pollfd p = { fd, ev, 0 };
	uint64_t end = now_ms() + (uint64_t)ms;

	for (;;) {
		uint64_t now = now_ms();
		int r;
		if (now >= end)
			return 0;
		r = poll(&p, 1, (int)(end - now));
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return -1;
	}
}

/* fork() in a child of fork() that may have had threads: glibc's
 * _Fork runs no atfork handlers (the portable build's take a lock that
 * a thread of the parent may have held: the child waited for it
 * forever). */
static pid_t fork_in_child(void)
{
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
	return _Fork();
#else
	return fork();
#endif
}

/* Start `gpurun __hold` (a grandchild, so nobody has to reap it) and read
 * its report: 0 (*pid set), a GR_E* code with err set (it could not
 * connect), or 1 (it died without a word). */
static int start_holder(const struct gr_config *cfg, const struct tr_opts *o, const char *sock,
			pid_t *pid, struct gr_err *err)
{
	char timeout[16], persist[32], accept_new[4], verbose[8];
	const char *argv[] = { "gpurun", "__hold", sock, cfg->remote.host,
			       cfg->remote.identity ? cfg->remote.identity : "",
			       cfg->remote.known_hosts ? cfg->remote.known_hosts : "",
			       timeout, persist, accept_new, verbose, NULL };
	const char *exe = compat_exec_self();
	struct strbuf rep = STRBUF_INIT;
	int sp[2], null, rc = 1;
	pid_t child;

	snprintf(timeout, sizeof(timeout), "%d", cfg->remote.connect_timeout);
	snprintf(persist, sizeof(persist), "%llu", (unsigned long long)cfg->remote.persist);
	snprintf(accept_new, sizeof(accept_new), "%d", o->accept_new ? 1 : 0);
	snprintf(verbose, sizeof(verbose), "%d", o->verbose);
	if (compat_socketpair_cloexec(AF_UNIX, SOCK_STREAM, 0, sp) < 0)
		return 1;
	null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	if ((child = fork()) < 0) {
		close(sp[0]);
		close(sp[1]);
		if (null >= 0)
			close(null);
		return 1;
	}
	if (child == 0) {
		/* Only async-signal-safe calls from here: we may have threads. */
		int rep;

		if (fork_in_child() != 0)
			_exit(0);
		/* The report's socket to fd 3, whatever fds these are now. */
		if ((rep = fcntl(sp[1], F_DUPFD, 10)) < 0 || (null >= 0 && dup2(null, 1) < 0) ||
		    dup2(rep, 3) < 0)
			_exit(127);
#if defined(SYS_close_range)
		if (syscall(SYS_close_range, 4u, ~0u, 0u) < 0)
#endif
			for (int fd = 4; fd < 4096; fd++)
				close(fd);
		execv(exe, (char *const *)argv);
		_exit(127);
	}
	close(sp[1]);
	if (null >= 0)
		close(null);
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	/* The report: "K<pid>\n", or "E<code>\n<m>\n<h>\n" and the message
	 * and hint; EOF ends it. */
	for (;;) {
		char buf[2048];
		ssize_t r;
		if (wait_fd(sp[0], POLLIN, MUX_START_MS) <= 0 || rep.len > 8192)
			break;
		if ((r = read(sp[0], buf, sizeof(buf))) < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		sb_add(&rep, buf, (size_t)r);
	}
	close(sp[0]);
	sb_add(&rep, "", 1);
	if (rep.buf[0] == 'K') {
		*pid = (pid_t)strtol(rep.buf + 1, NULL, 10);
		rc = *pid > 0 ? 0 : 1;
	} else if (rep.buf[0] == 'E') {
		int code = (int)strtol(rep.buf + 1, NULL, 10);
		const char *p = strchr(rep.buf, '\n');
		size_t m = p ? strtoul(p + 1, (char **)&p, 10) : 0, h = p ? strtoul(p + 1, (char **)&p, 10) : 0;
		if (p && *p == '\n' && code < 0 && m < 1024 && h < 512 &&
		    (size_t)(p + 1 - rep.buf) + m + h + 1 == rep.len) {
			gr_errf(err, code, "%.*s", (int)m, p + 1);
			if (h)
				gr_hintf(err, "%.*s", (int)h, p + 1 + m);
			rc = code;
		}
	}
	sb_release(&rep);
	return rc;
}

static int lock_take(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	uint64_t end = now_ms() + MUX_LOCK_MS;

	if (fd < 0)
		return -1;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if ((errno != EWOULDBLOCK && errno != EINTR) || now_ms() >= end) {
			close(fd);
			return -1;
		}
		usleep(10000);
	}
	return fd;
}

/* ---- the request ---- */

/* Send the command line with the stderr socket; wait for the holder's
 * answer byte. 0, or 1 with why set. */
static int ask(int fd, int efd, const char *line, int ms, struct strbuf *why)
{
	size_t n = strlen(line), off = 0;
	struct strbuf req = STRBUF_INIT;
	unsigned char hdr[8] = { 'G', 'R', 'H', '1', (unsigned char)(n >> 24),
				 (unsigned char)(n >> 16), (unsigned char)(n >> 8), (unsigned char)n };
	unsigned char st = 0xff;
	int rc = 1;

	sb_add(&req, hdr, sizeof(hdr));
	sb_add(&req, line, n);
	{
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(sizeof(int))];
		} cm;
		struct iovec iov = { req.buf, req.len };
		struct msghdr m = { 0 };
		struct cmsghdr *c;
		ssize_t w;

		memset(&cm, 0, sizeof(cm));
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = cm.b;
		m.msg_controllen = sizeof(cm.b);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &efd, sizeof(int));
		while ((w = sendmsg(fd, &m, MSG_NOSIGNAL)) < 0 &&
		       (errno == EINTR || (errno == EAGAIN && wait_fd(fd, POLLOUT, ms) > 0)))
			;
		if (w <= 0) {
			sb_addf(why, "it did not take the command: %s", w < 0 ? strerror(errno) : "closed");
			goto out;
		}
		off = (size_t)w;
	}
	while (off < req.len) {
		ssize_t w;
		if (wait_fd(fd, POLLOUT, ms) <= 0) {
			sb_addf(why, "it did not take the command within %d s", ms / 1000);
			goto out;
		}
		w = compat_send_nosignal(fd, req.buf + off, req.len - off, MSG_DONTWAIT);
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			sb_addf(why, "it did not take the command: %s", strerror(errno));
			goto out;
		}
		if (w > 0)
			off += (size_t)w;
	}
	for (;;) {
		ssize_t r;
		if (wait_fd(fd, POLLIN, ms) <= 0) {
			sb_addf(why, "no answer within %d s", ms / 1000);
			goto out;
		}
		r = recv(fd, &st, 1, MSG_DONTWAIT);
		if (r == 1)
			break;
		if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
			sb_addf(why, "it closed the stream");
			goto out;
		}
	}
	if (st == 0) {
		rc = 0;
	} else {
		/* 1, a u32 length, the message (read what is there now). */
		unsigned char b[4 + 512];
		ssize_t r = wait_fd(fd, POLLIN, 1000) > 0 ? recv(fd, b, sizeof(b), MSG_DONTWAIT) : -1;
		if (r > 4)
			sb_addf(why, "%.*s", (int)(r - 4), (const char *)b + 4);
		else
			sb_addf(why, "it refused");
		for (size_t i = 0; i < why->len; i++)
			if ((unsigned char)why->buf[i] < 0x20)
				why->buf[i] = '?';
	}
out:
	sb_release(&req);
	return rc;
}

/* ---- the transport ---- */

static void drain_err(struct mux_transport *t)
{
	char buf[8192];
	ssize_t r;

	while (t->efd >= 0 && (r = recv(t->efd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		if (write_full(2, buf, (size_t)r) < 0)
			break;
}

static ssize_t mux_read(struct gr_transport *gt, void *buf, size_t n, struct gr_err *err)
{
	struct mux_transport *t = (struct mux_transport *)gt;
	ssize_t r = recv(t->fd, buf, n, MSG_DONTWAIT);

	if (r > 0)
		return r;
	drain_err(t);
	if (r == 0)
		return 0;
	if (errno == EAGAIN || errno == EINTR)
		return GR_TR_AGAIN;
	return gr_errf(err, GR_ESSH, "connection to %s lost: %s", gt->desc, strerror(errno));
}

static ssize_t mux_write(struct gr_transport *gt, const void *buf, size_t n, struct gr_err *err)
{
	struct mux_transport *t = (struct mux_transport *)gt;
	ssize_t w = compat_send_nosignal(t->fd, buf, n, MSG_DONTWAIT);

	if (w >= 0)
		return w;
	if (errno == EAGAIN || errno == EINTR)
		return GR_TR_AGAIN;
	drain_err(t);
	return gr_errf(err, GR_ESSH, "connection to %s lost: %s", gt->desc, strerror(errno));
}

static int mux_pollfds(struct gr_transport *gt, struct pollfd *pfd, int want_read, int want_write)
{
	struct mux_transport *t = (struct mux_transport *)gt;
	int n = 0;

	pfd[n++] = (struct pollfd){ t->fd, (short)((want_read ? POLLIN : 0) |
						   (want_write ? POLLOUT : 0)), 0 };
	if (t->efd >= 0)
		pfd[n++] = (struct pollfd){ t->efd, POLLIN, 0 };
	return n;
}

static int mux_tick(struct gr_transport *gt, int *timeout_ms, struct gr_err *err)
{
	(void)err;
	drain_err((struct mux_transport *)gt);
	*timeout_ms = -1;
	return 0;
}

static int mux_close_write(struct gr_transport *gt, struct gr_err *err)
{
	(void)err;
	shutdown(((struct mux_transport *)gt)->fd, SHUT_WR);
	return 0;
}

static void mux_free(struct gr_transport *gt)
{
	struct mux_transport *t = (struct mux_transport *)gt;

	if (!gt)
		return;
	drain_err(t);
	close(t->fd);
	if (t->efd >= 0)
		close(t->efd);
	free(gt->desc);
	free(t);
}

static const struct gr_transport_ops mux_ops = {
	.name = "libssh2 (held)",
	.read = mux_read,
	.write = mux_write,
	.pollfds = mux_pollfds,
	.tick = mux_tick,
	.close_write = mux_close_write,
	.free = mux_free,
	.tunnels = NULL,
};

static void say(const struct tr_opts *o, int always, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(const struct tr_opts *o, int always, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	if (!o->say || (!always && !o->verbose))
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	o->say(o->say_arg, buf);
}

int transport_mux(struct gr_transport **out, const struct gr_config *cfg,
		  const struct tr_cmd *cmd, const struct tr_opts *o, struct gr_err *err)
{
	struct strbuf base = STRBUF_INIT, why = STRBUF_INIT, sock = STRBUF_INIT,
		      lock = STRBUF_INIT;
	struct mux_transport *t;
	char *line = NULL;
	int fd = -1, lfd = -1, es[2] = { -1, -1 }, rc = 1, started = 0;
	pid_t pid = 0;
	int ms = (cfg->remote.connect_timeout > 0 ? cfg->remote.connect_timeout
						  : SSH_DEFAULT_TIMEOUT_S) * 1000 + 5000;

	if (hold_base(cfg, &base, &why) < 0) {
		/* Worth seeing each time: the folder is not safe to share. */
		say(o, 1, "not keeping the connection open: %s", why.buf);
		goto out;
	}
	sb_addf(&sock, "%s.sock", base.buf);
	sb_addf(&lock, "%s.lock", base.buf);
	if (sock.len >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
		say(o, 0, "not keeping the connection open: %s is too long a socket path", sock.buf);
		goto out;
	}
	if ((fd = dial(sock.buf)) < 0) {
		/* None there: start one, unless another command just did. */
		if ((lfd = lock_take(lock.buf)) < 0) {
			say(o, 0, "not keeping the connection open: cannot lock %s", lock.buf);
			goto out;
		}
		if ((fd = dial(sock.buf)) < 0) {
			rc = start_holder(cfg, o, sock.buf, &pid, err);
			if (rc < 0)
				goto out;
			if (rc == 0 && (fd = dial(sock.buf)) < 0)
				rc = 1;
			if (rc) {
				say(o, 0, "the connection holder did not start; connecting directly");
				goto out;
			}
			started = 1;
			rc = 1;
		}
		close(lfd);
		lfd = -1;
	}
	if (compat_socketpair_cloexec(AF_UNIX, SOCK_STREAM, 0, es) < 0)
		goto out;
	line = tr_command_line(cmd);
	if (ask(fd, es[1], line, ms, &why)) {
		say(o, 0, "the connection holder (%s) could not serve: %s; connecting directly",
		    sock.buf, why.buf);
		goto out;
	}
	close(es[1]);
	es[1] = -1;
	(void)fcntl(es[0], F_SETFL, fcntl(es[0], F_GETFL) | O_NONBLOCK);
	if (started)
		say(o, 0, "keeping the connection to %s open (pid %d, until %llus idle)",
		    cfg->remote.host, (int)pid, (unsigned long long)cfg->remote.persist);
	else
		say(o, 0, "using the open connection to %s (%s)", cfg->remote.host, sock.buf);
	t = xcalloc(1, sizeof(*t));
	t->base.ops = &mux_ops;
	t->base.desc = xstrdup(cfg->remote.host);
	t->fd = fd;
	t->efd = es[0];
	fd = es[0] = -1;
	*out = &t->base;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (lfd >= 0)
		close(lfd);
	if (es[0] >= 0)
		close(es[0]);
	if (es[1] >= 0)
		close(es[1]);
	free(line);
	sb_release(&base);
	sb_release(&why);
	sb_release(&sock);
	sb_release(&lock);
	return rc;
}

int transport_hold_find(const struct gr_config *cfg, long *pid, struct strbuf *why)
{
	struct strbuf base = STRBUF_INIT, path = STRBUF_INIT;
	char buf[32];
	struct stat st;
	int rc = 0, fd;
	ssize_t r;

	*pid = 0;
	if (hold_base(cfg, &base, why) < 0) {
		rc = -1;
		goto out;
	}
	sb_addf(&path, "%s.sock", base.buf);
	if (lstat(path.buf, &st) < 0 || !S_ISSOCK(st.st_mode))
		goto out;
	sb_reset(&path);
	sb_addf(&path, "%s.pid", base.buf);
	fd = open(path.buf, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		goto out;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		goto out;
	buf[r] = 0;
	char *end;
	long p = strtol(buf, &end, 10);
	if (p > 1 && (*end == '\n' || !*end) && (kill((pid_t)p, 0) == 0 || errno == EPERM)) {
		*pid = p;
		rc = 1;
	}
out:
	sb_release(&base);
	sb_release(&path);
	return rc;
}

int transport_hold_stop(const struct gr_config *cfg, long *pid, struct gr_err *err)
{
	struct strbuf base = STRBUF_INIT, why = STRBUF_INIT, sock = STRBUF_INIT;
	char buf[32];
	int fd = -1, rc = 0;
	ssize_t r = 0;

	*pid = 0;
	if (hold_base(cfg, &base, &why) < 0) {
		rc = gr_errf(err, GR_EIO, "%s", why.buf);
		goto out;
	}
	sb_addf(&sock, "%s.sock", base.buf);
	if (sock.len >= sizeof(((struct sockaddr_un *)0)->sun_path) || (fd = dial(sock.buf)) < 0)
		goto out; /* none there (a stale socket is no holder either) */
	if (compat_send_nosignal(fd, "GRX1", 4, 0) != 4 || wait_fd(fd, POLLIN, 5000) <= 0 ||
	    (r = recv(fd, buf, sizeof(buf) - 1, 0)) <= 0) {
		rc = gr_errf(err, GR_EIO, "the connection holder (%s) did not answer", sock.buf);
		goto out;
	}
	buf[r] = 0;
	*pid = strtol(buf, NULL, 10);
	rc = 1;
out:
	if (fd >= 0)
		close(fd);
	sb_release(&base);
	sb_release(&why);
	sb_release(&sock);
	return rc;
}
