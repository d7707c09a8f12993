/* Small shared helpers (see util.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static void die_oom(size_t n)
{
	fprintf(stderr, "gpurun: out of memory (allocating %zu bytes)\n", n);
	abort();
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die_oom(n);
	return p;
}

void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		die_oom(n * size);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		die_oom(n);
	return q;
}

char *xstrdup(const char *s)
{
	return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
	char *p = xmalloc(n + 1);
	if (n) /* (an empty strbuf's buf is NULL) */
		memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *xasprintf(const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	return sb_detach(&sb, NULL);
}

void sb_grow(struct strbuf *sb, size_t extra)
{
	size_t need = sb->len + extra + 1;

	if (need < sb->len)
		die_oom(SIZE_MAX);
	if (need <= sb->alloc)
		return;
	sb->alloc = sb->alloc ? sb->alloc : 64;
	while (sb->alloc < need)
		sb->alloc = sb->alloc * 3 / 2 + 16;
	sb->buf = xrealloc(sb->buf, sb->alloc);
}

void sb_add(struct strbuf *sb, const void *data, size_t n)
{
	sb_grow(sb, n);
	if (n)
		memcpy(sb->buf + sb->len, data, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void sb_adds(struct strbuf *sb, const char *s)
{
	sb_add(sb, s, strlen(s));
}

void sb_vaddf(struct strbuf *sb, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	sb_grow(sb, 64);
	va_copy(cp, ap);
	n = vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, cp);
	va_end(cp);
	if (n < 0)
		return;
	if ((size_t)n >= sb->alloc - sb->len) {
		sb_grow(sb, (size_t)n);
		vsnprintf(sb->buf + sb->len, sb->alloc - sb->len, fmt, ap);
	}
	sb->len += (size_t)n;
}

void sb_addf(struct strbuf *sb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	sb_vaddf(sb, fmt, ap);
	va_end(ap);
}

void sb_reset(struct strbuf *sb)
{
	sb->len = 0;
	if (sb->buf)
		sb->buf[0] = '\0';
}

void sb_release(struct strbuf *sb)
{
	free(sb->buf);
	sb->buf = NULL;
	sb->len = sb->alloc = 0;
}

size_t utf8_len(const void *s, size_t n)
{
	const unsigned char *p = s;
	size_t need;

	if (!n)
		return 0;
	need = p[0] >= 0xc2 && p[0] <= 0xdf ? 1 : p[0] >= 0xe0 && p[0] <= 0xef ? 2
		: p[0] >= 0xf0 && p[0] <= 0xf4 ? 3 : 0;
	if (!need || n < need + 1)
		return 0;
	for (size_t i = 1; i <= need; i++) {
		/* The second byte's range refuses overlong forms (e0, f0),
		 * surrogates (ed) and code points past U+10FFFF (f4). */
		unsigned char lo = 0x80, hi = 0xbf;
		if (i == 1 && p[0] == 0xe0)
			lo = 0xa0;
		else if (i == 1 && p[0] == 0xed)
			hi = 0x9f;
		else if (i == 1 && p[0] == 0xf0)
			lo = 0x90;
		else if (i == 1 && p[0] == 0xf4)
			hi = 0x8f;
		if (p[i] < lo || p[i] > hi)
			return 0;
	}
	return need + 1;
}

void json_strn(struct strbuf *sb, const void *s, size_t n)
{
	const unsigned char *p = s, *end = p + n;

	sb_add(sb, "\"", 1);
	for (; p < end; p++) {
		if (*p == '"' || *p == '\\')
			sb_addf(sb, "\\%c", *p);
		else if (*p == '\n')
			sb_adds(sb, "\\n");
		else if (*p == '\t')
			sb_adds(sb, "\\t");
		else if (*p < 0x20 || *p == 0x7f)
			sb_addf(sb, "\\u%04x", *p);
		else if (*p < 0x80)
			sb_add(sb, p, 1);
		else {
			/* JSON is UTF-8: a byte that is not, is U+FFFD; a C1
			 * control is escaped like the C0 ones. */
			size_t left = (size_t)(end - p);
			size_t len = utf8_len(p, left < 4 ? left : 4);
			if (!len)
				sb_adds(sb, "\\ufffd");
			else if (len == 2 && p[0] == 0xc2 && p[1] <= 0x9f)
				sb_addf(sb, "\\u%04x", p[1]);
			else
				sb_add(sb, p, len);
			p += len ? len - 1 : 0;
		}
	}
	sb_add(sb, "\"", 1);
}

void json_str(struct strbuf *sb, const char *s)
{
	json_strn(sb, s ? s : "", s ? strlen(s) : 0);
}

char *sb_detach(struct strbuf *sb, size_t *len)
{
	char *p;

	sb_grow(sb, 0);
	sb->buf[sb->len] = '\0';   /* also when nothing was ever added */
	p = sb->buf;
	if (len)
		*len = sb->len;
	sb->buf = NULL;
	sb->len = sb->alloc = 0;
	return p;
}

void sv_push(struct strvec *sv, const char *s)
{
	if (sv->n + 2 > sv->alloc) {
		sv->alloc = sv->alloc ? sv->alloc * 2 : 8;
		sv->v = xrealloc(sv->v, sv->alloc * sizeof(*sv->v));
	}
	sv->v[sv->n++] = xstrdup(s);
	sv->v[sv->n] = NULL;
}

void sv_pushf(struct strvec *sv, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	sv_push(sv, sb.buf);
	sb_release(&sb);
}

void sv_clear(struct strvec *sv)
{
	for (size_t i = 0; i < sv->n; i++)
		free(sv->v[i]);
	free(sv->v);
	sv->v = NULL;
	sv->n = sv->alloc = 0;
}

int write_full(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int pwrite_full(int fd, const void *buf, size_t n, uint64_t off)
{
	const char *p = buf;

	while (n) {
		ssize_t w = pwrite(fd, p, n, (off_t)off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (w == 0)
				errno = EIO;
			return -1;
		}
		p += w;
		n -= (size_t)w;
		off += (uint64_t)w;
	}
	return 0;
}

ssize_t read_full(int fd, void *buf, size_t n)
{
	char *p = buf;
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, p + got, n - got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

int read_file(const char *path, struct strbuf *sb, struct gr_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return gr_errf(err, errno == ENOENT ? GR_ENOTFOUND : GR_EIO,
			       "cannot open '%s': %s", path, strerror(errno));
	for (;;) {
		ssize_t r;

		sb_grow(sb, 65536);
		r = read(fd, sb->buf + sb->len, sb->alloc - sb->len - 1);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			int e = errno;
			close(fd);
			return gr_errf(err, GR_EIO, "cannot read '%s': %s", path, strerror(e));
		}
		if (r == 0)
			break;
		sb->len += (size_t)r;
		sb->buf[sb->len] = '\0';
	}
	close(fd);
	return 0;
}

struct atomic_buf {
	const void *data;
	size_t n;
};

static int fill_buf(void *arg, int fd)
{
	const struct atomic_buf *b = arg;

	return write_full(fd, b->data, b->n);
}

int write_file_atomic(const char *path, const void *data, size_t n, int mode,
		      struct gr_err *err)
{
	struct atomic_buf b = { data, n };

	return write_file_atomic_with(path, fill_buf, &b, mode, err);
}

int write_file_atomic_with(const char *path, int (*fill)(void *arg, int fd), void *arg,
			   int mode, struct gr_err *err)
{
	char *tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
	int fd, rc = 0;

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0) {
		rc = gr_errf(err, GR_EIO, "cannot create '%s': %s", tmp, strerror(errno));
		goto out;
	}
	if (fill(arg, fd) < 0 || fsync(fd) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot write '%s': %s", tmp, strerror(errno));
		close(fd);
		unlink(tmp);
		goto out;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot write '%s': %s", path, strerror(errno));
		unlink(tmp);
	}
out:
	free(tmp);
	return rc;
}

#define FWIN_CHUNK (256u << 10)

ssize_t fwin_need(struct fwin *w, size_t want)
{
	size_t have = w->b.len - w->pos;

	if (have >= want || w->eof)
		return (ssize_t)have;
	if (w->pos) { /* keep only what is unread */
		memmove(w->b.buf, w->b.buf + w->pos, have);
		w->b.len = have;
		w->pos = 0;
	}
	sb_grow(&w->b, (want > FWIN_CHUNK ? want : FWIN_CHUNK) - have);
	while (w->b.len < want && !w->eof) {
		ssize_t r = read(w->fd, w->b.buf + w->b.len, w->b.alloc - 1 - w->b.len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -1;
		w->eof = r == 0;
		w->b.len += (size_t)r;
	}
	return (ssize_t)w->b.len;
}

void fwin_release(struct fwin *w)
{
	sb_release(&w->b);
	w->pos = 0;
}

int mkdir_p(const char *path, int mode, struct gr_err *err)
{
	char *p = xstrdup(path);
	int rc = 0;

	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;
			*s = '\0';
			if (mkdir(p, (mode_t)mode) < 0 && errno != EEXIST) {
				rc = gr_errf(err, GR_EIO, "cannot create folder '%s': %s",
					     p, strerror(errno));
				break;
			}
			*s = c;
			if (!c)
				break;
		}
	}
	free(p);
	return rc;
}

char *expand_home(const char *path)
{
	const char *home = getenv("HOME");

	if (!home || !*home)
		home = "/";
	if (path[0] == '~' && (path[1] == '\0' || path[1] == '/'))
		return xasprintf("%s%s", home, path + 1);
	return xstrdup(path);
}

int parse_ll(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return GR_EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return GR_EINVAL;
	*out = v;
	return 0;
}

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	double v;
	uint64_t mult = 1;

	if (!s || !*s || *s == '-')
		return GR_EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return GR_EINVAL;
	while (*end == ' ')
		end++;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': mult = 1ULL << 10; end++; break;
	case 'm': case 'M': mult = 1ULL << 20; end++; break;
	case 'g': case 'G': mult = 1ULL << 30; end++; break;
	case 't': case 'T': mult = 1ULL << 40; end++; break;
	default: return GR_EINVAL;
	}
	if (mult > 1 && (!strcmp(end, "iB") || !strcmp(end, "B") || !strcmp(end, "b")))
		end += strlen(end);
	else if (mult == 1 && (!strcmp(end, "B") || !strcmp(end, "b")))
		end++;
	if (*end)
		return GR_EINVAL;
	if (v * (double)mult > 1.8e19)
		return GR_EINVAL;
	*out = (uint64_t)(v * (double)mult);
	return 0;
}

const char *fmt_ordinal(size_t n, char *buf, size_t bufsz)
{
	const char *suf = "th";

	if (n % 100 < 11 || n % 100 > 13)
		suf = n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
	snprintf(buf, bufsz, "%zu%s", n, suf);
	return buf;
}

const char *fmt_size(uint64_t n, char *buf, size_t bufsz)
{
	static const char *unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)n;
	size_t u = 0;

	while (v >= 1024 && u + 1 < GR_ARRAY_SIZE(unit)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, bufsz, "%llu B", (unsigned long long)n);
	else
		snprintf(buf, bufsz, "%.1f %s", v, unit[u]);
	return buf;
}

uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t now_ms(void)
{
	return now_ns() / 1000000ULL;
}

int gr_trace_on;
static uint64_t trace_t0;

void gr_trace_init(void)
{
	const char *v = getenv("GPURUN_TRACE");

	gr_trace_on = v && *v && strcmp(v, "0") != 0;
	trace_t0 = now_ns();
}

void gr_trace_(const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;
	uint64_t t = now_ns() - trace_t0;

	sb_addf(&sb, "trace: %llu.%03llu ", (unsigned long long)(t / 1000000),
		(unsigned long long)(t / 1000 % 1000));
	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	sb_add(&sb, "\n", 1);
	write_full(2, sb.buf, sb.len); /* one write: lines from threads stay whole */
	sb_release(&sb);
}

int set_nonblock(int fd, int on)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -1;
	fl = on ? (fl | O_NONBLOCK) : (fl & ~O_NONBLOCK);
	return fcntl(fd, F_SETFL, fl);
}

int set_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);

	return fl < 0 ? -1 : fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

void uid_name(uid_t uid, char *buf, size_t n)
{
	struct strbuf pw = STRBUF_INIT;
	char *save = NULL;

	snprintf(buf, n, "uid %lu", (unsigned long)uid);
	if (read_file("/etc/passwd", &pw, NULL) < 0 || !pw.buf)
		goto out;
	for (char *l = strtok_r(pw.buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(l, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		char *c3 = c2 ? strchr(c2 + 1, ':') : NULL;
		long long v;
		if (!c3)
			continue;
		*c1 = *c3 = '\0';
		if (parse_ll(c2 + 1, 0, UINT32_MAX, &v) == 0 && (uid_t)v == uid) {
			snprintf(buf, n, "%s", l);
			break;
		}
	}
out:
	sb_release(&pw);
}

int rm_tree_at(int pfd, const char *name)
{
	struct stat st;

	if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(pfd, name, 0) < 0 && errno != ENOENT ? -1 : 0;
	/* A job may leave folders without write or search permission
	 * (module caches do): we own them, so open them up. (Used by job
	 * housekeeping and by sync, for staged folders.) */
	if ((st.st_mode & 0700) != 0700)
		fchmodat(pfd, name, 0700, 0);
	int fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    rm_tree_at(dirfd(d), e->d_name) < 0)
			rc = -1;
	closedir(d);
	if (unlinkat(pfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = -1;
	return rc;
}

int walk_below(int dirfd, const char *rel, size_t len, int make)
{
	const char *part = rel, *end = rel + len;
	int cur = dirfd;

	while (part < end) {
		const char *slash = memchr(part, '/', (size_t)(end - part));
		size_t n = slash ? (size_t)(slash - part) : (size_t)(end - part);
		if (n) {
			char *name = xstrndup(part, n);
			int next = make && mkdirat(cur, name, 0755) < 0 && errno != EEXIST
					   ? -1
					   : openat(cur, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int e = errno;
			free(name);
			if (cur != dirfd)
				close(cur);
			if (next < 0) {
				errno = e;
				return -1;
			}
			cur = next;
		}
		part += n + 1;
	}
	return cur;
}

int exit_code_from(int signalled, uint32_t code)
{
	return signalled ? 128 + (int)(code & 0x7f) : (int)(code & 0xff);
}

int exit_code_of(int wait_status)
{
	if (WIFEXITED(wait_status))
		return exit_code_from(0, (uint32_t)WEXITSTATUS(wait_status));
	return exit_code_from(1, (uint32_t)WTERMSIG(wait_status));
}

uint64_t fnv1a64(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}
