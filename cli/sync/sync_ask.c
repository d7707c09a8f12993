/* The project's other syncs ask a running watcher (sync_ask.h): a unix
 * socket in .gpurun/, one request a connection, text lines both ways.
 *
 *   asker:   "gpurun-watch 1 flush yes=0|1 fp=HEX\n"
 *   watcher: "say TEXT\n"... then "ok up=.. sent=.. ...\n" or "no WHY\n"
 *
 * Trust goes by who, not by where: the asker checks that the socket is
 * its own uid's and reachable by nobody else before connecting, and both
 * sides check the other's credentials (SO_PEERCRED / getpeereid). Every
 * line is bounded and parsed strictly; whatever does not parse makes the
 * asker walk, never believe. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "compat.h"
#include "sync_ask.h"
#include "sync_index.h"

#define REQ_MAGIC "gpurun-watch 1 flush"

struct sync_ask_srv {
	int fd;
	char *path;
	dev_t dev;   /* the socket made here, to remove only that one */
	ino_t ino;
};

/* ---- both sides ---- */


struct fp {
	uint64_t a, b;
};

/* Each field with its length, so "ab","c" and "a","bc" differ. */
static void fp_str(struct fp *f, const char *s)
{
	uint64_t n = s ? strlen(s) + 1 : 0;

	f->a = fnv1a64(f->a, &n, sizeof(n));
	f->b = fnv1a64(f->b, &n, sizeof(n));
	if (s) {
		f->a = fnv1a64(f->a, s, (size_t)n);
		f->b = fnv1a64(f->b, s, (size_t)n);
	}
}

static void fp_u64(struct fp *f, uint64_t v)
{
	f->a = fnv1a64(f->a, &v, sizeof(v));
	f->b = fnv1a64(f->b, &v, sizeof(v));
}

static void fp_sv(struct fp *f, const struct strvec *sv)
{
	fp_u64(f, sv->n);
	for (size_t i = 0; i < sv->n; i++)
		fp_str(f, sv->v[i]);
}

char *sync_ask_fingerprint(const struct gr_config *cfg)
{
	struct fp f = { FNV1A64_INIT, 0x84222325cbf29ce4ULL };

	fp_str(&f, cfg->root);
	fp_str(&f, cfg->remote.host);
	fp_u64(&f, cfg->remote.nhosts);
	for (size_t i = 0; i < cfg->remote.nhosts; i++)
		fp_str(&f, cfg->remote.hosts[i]);
	fp_str(&f, cfg->remote.pool);
	fp_str(&f, cfg->remote.path);
	fp_u64(&f, (uint64_t)cfg->remote.transport);
	fp_str(&f, cfg->remote.identity);
	fp_str(&f, cfg->remote.known_hosts);
	fp_sv(&f, &cfg->sync.exclude);
	fp_sv(&f, &cfg->sync.include);
	fp_u64(&f, cfg->sync.warn_size);
	fp_u64(&f, cfg->sync.delta_min);
	fp_u64(&f, (uint64_t)cfg->sync.include_git);
	fp_u64(&f, (uint64_t)cfg->sync.preserve_perms);
	fp_sv(&f, &cfg->train.persist);
	return xasprintf("%016llx%016llx", (unsigned long long)f.a, (unsigned long long)f.b);
}

/* The socket's path, or NULL when it does not fit in sun_path. */
static char *sock_path(const char *root, struct sockaddr_un *sa)
{
	char *p = xasprintf("%s/.gpurun/%s", root, SYNC_ASK_SOCK);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(p) >= sizeof(sa->sun_path)) {
		free(p);
		return NULL;
	}
	memcpy(sa->sun_path, p, strlen(p) + 1);
	return p;
}

/* Write all of buf within deadline; 0 or -1. */
static int write_all(int fd, const char *buf, size_t n, uint64_t deadline)
{
	while (n) {
		ssize_t w = compat_send_nosignal(fd, buf, n, 0);
		if (w > 0) {
			buf += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			uint64_t now = now_ms();
			struct pollfd p = { fd, POLLOUT, 0 };
			if (now >= deadline)
				return -1;
			if (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)
				return -1;
			continue;
		}
		return -1;
	}
	return 0;
}

/* Read one line (without its '\n') into buf within deadline: its length,
 * or -1 (closed, too long, timed out). r keeps what was read ahead. */
struct reader {
	int fd;
	char buf[SYNC_ASK_LINE_MAX * 2];
	size_t have;
};

static int read_line(struct reader *r, char *line, size_t max, uint64_t deadline)
{
	for (;;) {
		char *nl = memchr(r->buf, '\n', r->have);
		if (nl) {
			size_t len = (size_t)(nl - r->buf);
			if (len >= max)
				return -1;
			memcpy(line, r->buf, len);
			line[len] = 0;
			memmove(r->buf, nl + 1, r->have - len - 1);
			r->have -= len + 1;
			return (int)len;
		}
		if (r->have >= max)
			return -1;
		uint64_t now = now_ms();
		if (now >= deadline)
			return -1;
		struct pollfd p = { r->fd, POLLIN, 0 };
		int t = (int)(deadline - now);
		if (poll(&p, 1, t) < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (!p.revents)
			continue;
		ssize_t n = read(r->fd, r->buf + r->have, sizeof(r->buf) - r->have);
		if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (n <= 0)
			return -1;
		r->have += (size_t)n;
	}
}

/* ---- the watcher's side ---- */

/* Is anyone answering on sa? */
static int answers(const struct sockaddr_un *sa)
{
	int fd = compat_socket_cloexec(AF_UNIX, SOCK_STREAM, 0, 0);
	int r;

	if (fd < 0)
		return 0;
	r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0;
	close(fd);
	return r;
}

void sync_ask_listen(const char *root, struct sync_ask_srv **out, char **why)
{
	struct sockaddr_un sa;
	struct gr_err e = { 0 };
	struct stat st;
	char *path = NULL;
	int fd = -1;

	*out = NULL;
	*why = NULL;
	if (sync_state_dir(root, "", &e) < 0) {
		*why = xasprintf("%s", e.msg);
		return;
	}
	if (!(path = sock_path(root, &sa))) {
		*why = xstrdup("the path of .gpurun/" SYNC_ASK_SOCK " is too long for a unix socket");
		return;
	}
	if (lstat(path, &st) == 0) {
		if (S_ISSOCK(st.st_mode) && answers(&sa)) {
			*why = xstrdup("another watcher of this project answers there");
			goto fail;
		}
		/* Stale (its watcher died), or something else in the way. */
		if (unlink(path) < 0 && errno != ENOENT) {
			*why = xasprintf("cannot remove '.gpurun/%s': %s", SYNC_ASK_SOCK, strerror(errno));
			goto fail;
		}
	}
	if ((fd = compat_socket_cloexec(AF_UNIX, SOCK_STREAM, 0, 1)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		*why = xasprintf("cannot make '.gpurun/%s': %s", SYNC_ASK_SOCK, strerror(errno));
		goto fail;
	}
	/* Only this user may connect (the credentials are checked anyway);
	 * the asker refuses a socket others could reach. */
	if (chmod(path, 0600) < 0 || lstat(path, &st) < 0 || listen(fd, 8) < 0) {
		*why = xasprintf("cannot listen on '.gpurun/%s': %s", SYNC_ASK_SOCK, strerror(errno));
		unlink(path);
		goto fail;
	}
	struct sync_ask_srv *s = xcalloc(1, sizeof(*s));
	s->fd = fd;
	s->path = path;
	s->dev = st.st_dev;
	s->ino = st.st_ino;
	*out = s;
	return;
fail:
	if (fd >= 0)
		close(fd);
	free(path);
}

void sync_ask_srv_free(struct sync_ask_srv *s)
{
	struct stat st;

	if (!s)
		return;
	if (lstat(s->path, &st) == 0 && st.st_dev == s->dev && st.st_ino == s->ino)
		unlink(s->path);
	close(s->fd);
	free(s->path);
	free(s);
}

int sync_ask_srv_fd(const struct sync_ask_srv *s)
{
	return s ? s->fd : -1;
}

/* "yes=0|1 fp=HEX" after the magic. */
static int parse_req(const char *line, struct sync_ask_req *req)
{
	size_t m = strlen(REQ_MAGIC), n;
	const char *p;

	if (strncmp(line, REQ_MAGIC " yes=", m + 5))
		return -1;
	p = line + m + 5;
	if ((*p != '0' && *p != '1') || strncmp(p + 1, " fp=", 4))
		return -1;
	req->yes = *p == '1';
	p += 5;
	n = strspn(p, "0123456789abcdef");
	if (n == 0 || n >= sizeof(req->fp) || p[n])
		return -1;
	memcpy(req->fp, p, n + 1);
	return 0;
}

int sync_ask_accept(struct sync_ask_srv *s, int wait_ms, struct sync_ask_req *req)
{
	struct reader *r = NULL;
	char line[SYNC_ASK_LINE_MAX];
	uid_t uid;
	pid_t pid;
	int fd;

	memset(req, 0, sizeof(*req));
	req->fd = -1;
	if ((fd = compat_accept_cloexec(s->fd, NULL, NULL, 1)) < 0)
		return 0;
	if (compat_peer_cred(fd, &uid, &pid) < 0 || uid != getuid())
		goto no;
	r = xcalloc(1, sizeof(*r));
	r->fd = fd;
	if (read_line(r, line, sizeof(line), now_ms() + (uint64_t)wait_ms) < 0 ||
	    parse_req(line, req) < 0)
		goto no;
	free(r);
	req->fd = fd;
	req->pid = pid;
	return 1;
no:
	free(r);
	close(fd);
	return 0;
}

#define REPLY_WAIT_MS 2000 /* an asker that reads nothing for this long is dropped */

static void reply_line(struct sync_ask_req *req, const char *kind, const char *msg)
{
	char buf[SYNC_ASK_LINE_MAX];
	size_t n, k;

	if (req->fd < 0)
		return;
	n = (size_t)snprintf(buf, sizeof(buf) - 1, "%s ", kind);
	for (k = 0; msg[k] && n < sizeof(buf) - 2; k++) /* one line, printable */
		buf[n++] = (unsigned char)msg[k] < 0x20 || msg[k] == 0x7f ? ' ' : msg[k];
	buf[n++] = '\n';
	if (write_all(req->fd, buf, n, now_ms() + REPLY_WAIT_MS) < 0) {
		close(req->fd);
		req->fd = -1;
	}
}

void sync_ask_reply_say(struct sync_ask_req *req, const char *msg)
{
	reply_line(req, "say", msg);
}

void sync_ask_reply_no(struct sync_ask_req *req, const char *why)
{
	reply_line(req, "no", why);
	if (req->fd >= 0)
		close(req->fd);
	req->fd = -1;
}

/* The stats that travel, by name: both sides use this one table. */
#define STAT_FIELDS(X) \
	X(sent, files_sent) X(deleted, files_deleted) X(wire, bytes_wire) X(total, bytes_total) \
	X(tar, files_tar) X(delta, files_delta) X(whole, files_whole) \
	X(updated, files_updated) X(sigs, sigs_asked) X(literal, bytes_literal) \
	X(matched, bytes_matched) X(out, wire_out) X(in, wire_in) X(hashed, files_hashed) \
	X(bhashed, bytes_hashed) X(cached, files_cached) X(entries, entries) \
	X(reused, bytes_reused)

void sync_ask_reply_ok(struct sync_ask_req *req, const struct sync_stats *st)
{
	struct strbuf sb = STRBUF_INIT;

	sb_addf(&sb, "up=%d us=%llu", st->up_to_date ? 1 : 0,
		(unsigned long long)(st->seconds * 1e6));
#define X(name, field) sb_addf(&sb, " " #name "=%llu", (unsigned long long)st->field);
	STAT_FIELDS(X)
#undef X
	reply_line(req, "ok", sb.buf);
	sb_release(&sb);
	if (req->fd >= 0)
		close(req->fd);
	req->fd = -1;
}

int sync_ask_lock_held_by(const char *root, pid_t pid)
{
	char *path = xasprintf("%s/.gpurun/sync.lock", root);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK), held = 0;
	char buf[32];

	free(path);
	if (fd < 0 || pid <= 0)
		goto out;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0) /* free: nobody holds it */
		goto out;
	if (errno != EWOULDBLOCK)
		goto out;
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n > 0) {
		char *end;
		buf[n] = 0;
		errno = 0;
		long p = strtol(buf, &end, 10);
		held = !errno && end != buf && (*end == '\n' || !*end) && p == (long)pid;
	}
out:
	if (fd >= 0)
		close(fd); /* (drops the flock taken when it was free) */
	return held;
}

/* ---- the asker's side ---- */

static int parse_ok(const char *s, struct sync_stats *st)
{
	unsigned long long us = 0;
	int up = -1;

	memset(st, 0, sizeof(*st));
	while (*s) {
		const char *eq = strchr(s, '='), *sp;
		char *end;
		if (!eq)
			return -1;
		size_t klen = (size_t)(eq - s);
		if (eq[1] < '0' || eq[1] > '9')
			return -1;
		errno = 0;
		unsigned long long v = strtoull(eq + 1, &end, 10);
		if (errno || (*end && *end != ' '))
			return -1;
		sp = end;
#define KEY(k) (klen == strlen(k) && !memcmp(s, k, klen))
		if (KEY("up"))
			up = v == 1 ? 1 : v == 0 ? 0 : -2;
		else if (KEY("us"))
			us = v;
#define X(name, field) else if (KEY(#name)) st->field = v;
		STAT_FIELDS(X)
#undef X
		/* (an unknown key: a newer watcher's; ignored) */
#undef KEY
		s = *sp ? sp + 1 : sp;
	}
	if (up < 0)
		return -1;
	st->up_to_date = up;
	st->seconds = (double)us / 1e6;
	return 0;
}

int sync_ask_flush(const struct gr_config *cfg, int yes, int wait_ms,
		   void (*say)(void *arg, const char *msg), void *arg,
		   struct sync_stats *st, long *pid, char **why)
{
	struct sockaddr_un sa;
	struct stat sst;
	struct reader *r = NULL;
	char *path = NULL, *fp = NULL, *req = NULL;
	char line[SYNC_ASK_LINE_MAX];
	uint64_t deadline = now_ms() + (uint64_t)wait_ms;
	uid_t uid;
	pid_t wpid = 0;
	int fd = -1, ok = 0, says = 0;

	*pid = 0;
	*why = NULL;
	if (!(path = sock_path(cfg->root, &sa))) {
		*why = xstrdup("no watcher's socket: its path is too long");
		goto out;
	}
	if (lstat(path, &sst) < 0) {
		*why = xstrdup("no watcher runs");
		goto out;
	}
	if (!S_ISSOCK(sst.st_mode) || sst.st_uid != getuid() || (sst.st_mode & 077)) {
		*why = xasprintf("'.gpurun/%s' is not trusted (not a socket of this user's, "
				 "or others may use it)", SYNC_ASK_SOCK);
		goto out;
	}
	if ((fd = compat_socket_cloexec(AF_UNIX, SOCK_STREAM, 0, 1)) < 0) {
		*why = xasprintf("socket: %s", strerror(errno));
		goto out;
	}
	/* A unix socket connects at once or not at all (a full backlog:
	 * EAGAIN, the watcher is too busy to wait for). */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		*why = errno == ECONNREFUSED ? xstrdup("no watcher runs (a stale socket)")
					     : xasprintf("cannot reach the watcher: %s", strerror(errno));
		goto out;
	}
	if (compat_peer_cred(fd, &uid, &wpid) < 0 || uid != getuid()) {
		*why = xstrdup("the watcher's socket is not this user's");
		goto out;
	}
	fp = sync_ask_fingerprint(cfg);
	req = xasprintf(REQ_MAGIC " yes=%d fp=%s\n", yes ? 1 : 0, fp);
	if (write_all(fd, req, strlen(req), deadline) < 0) {
		*why = xasprintf("the watcher (pid %ld) did not take the request", (long)wpid);
		goto out;
	}
	r = xcalloc(1, sizeof(*r));
	r->fd = fd;
	for (;;) {
		if (read_line(r, line, sizeof(line), deadline) < 0) {
			*why = xasprintf("the watcher (pid %ld) did not answer%s", (long)wpid,
					 now_ms() >= deadline ? " in time" : "");
			goto out;
		}
		if (!strncmp(line, "say ", 4)) {
			if (say && says++ < SYNC_ASK_SAYS_MAX)
				say(arg, line + 4);
			continue;
		}
		if (!strncmp(line, "no ", 3)) {
			*why = xasprintf("the watcher (pid %ld) says: %s", (long)wpid, line + 3);
			goto out;
		}
		if (!strncmp(line, "ok ", 3) && parse_ok(line + 3, st) == 0) {
			ok = 1;
			*pid = wpid;
			goto out;
		}
		*why = xasprintf("the watcher (pid %ld) answered what gpurun cannot read", (long)wpid);
		goto out;
	}
out:
	if (fd >= 0)
		close(fd);
	free(r);
	free(req);
	free(fp);
	free(path);
	return ok;
}
