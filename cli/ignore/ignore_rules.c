/* One list of gitignore patterns (one file, or [sync] exclude): parsing
 * as git's dir.c does (escapes, trailing spaces, '!', '/' anchors) and the
 * match of one path against it, with git's literal-prefix shortcut. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ignore_int.h"
#include "util.h"
#include "wildmatch.h"

/* ---- parsing (dir.c: add_patterns_from_buffer, parse_path_pattern) ---- */

struct ig_list *ig_list_new(const char *source, const char *base, size_t baselen)
{
	struct ig_list *l = xcalloc(1, sizeof(*l));

	l->source = xstrdup(source);
	l->base = xstrndup(base, baselen);
	l->baselen = (int)baselen;
	return l;
}

void ig_list_free(struct ig_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].pat);
		free(l->v[i].text);
	}
	free(l->v);
	free(l->source);
	free(l->base);
	free(l);
}

/* Trailing spaces go unless escaped with a backslash (tabs stay). */
static void ig_trim_trailing_spaces(char *s)
{
	char *last_space = NULL;

	for (char *p = s; *p; p++) {
		if (*p == ' ') {
			if (!last_space)
				last_space = p;
			continue;
		}
		if (*p == '\\' && !*++p)
			return;
		last_space = NULL;
	}
	if (last_space)
		*last_space = '\0';
}

static size_t ig_simple_length(const char *s)
{
	return strcspn(s, "*?[\\");
}

/* Takes ownership of line. */
static void ig_add_pattern(struct ig_list *l, char *line, int lineno)
{
	struct ig_pattern *x;
	const char *p = line;
	unsigned flags = 0;
	size_t len, i, nowild;

	if (*p == '!') {
		flags |= IG_NEGATIVE;
		p++;
	}
	len = strlen(p);
	if (len && p[len - 1] == '/') {
		len--;
		flags |= IG_MUSTBEDIR;
	}
	for (i = 0; i < len && p[i] != '/'; i++)
		;
	if (i == len)
		flags |= IG_NODIR;
	nowild = ig_simple_length(p);
	if (nowild > len)
		nowild = len;
	if (*p == '*' && !p[1 + ig_simple_length(p + 1)])
		flags |= IG_ENDSWITH;
	if (l->n == l->alloc) {
		l->alloc = l->alloc ? l->alloc * 2 : 16;
		l->v = xrealloc(l->v, l->alloc * sizeof(*l->v));
	}
	x = &l->v[l->n++];
	x->pat = xstrndup(p, len);
	x->text = line;
	x->patlen = (int)len;
	x->nowild = (int)nowild;
	x->line = lineno;
	x->flags = flags;
}

/* One line: a "\r" before the newline goes, then unescaped trailing
 * spaces; empty lines and lines starting with '#' are no patterns. */
void ig_parse_line(struct ig_list *l, const char *p, size_t len, int lineno)
{
	char *line;

	if (!len || p[0] == '#')
		return;
	line = xstrndup(p, len);
	if (line[len - 1] == '\r')
		line[len - 1] = '\0';
	ig_trim_trailing_spaces(line);
	ig_add_pattern(l, line, lineno);
}

/* Lines end at '\n'; a UTF-8 byte order mark at the start is skipped. */
void ig_parse_buffer(struct ig_list *l, const char *data, size_t size)
{
	const char *p = data, *end = data + size;
	int lineno = 1;

	if (size >= 3 && !memcmp(p, "\xef\xbb\xbf", 3))
		p += 3;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

		ig_parse_line(l, p, len, lineno++);
		if (!nl)
			break;
		p = nl + 1;
	}
}

/* Read an ignore file from an open fd into a new list (NULL when it is
 * not a regular file: git reads nothing from those either). */
int ig_read_fd(int fd, const char *shown, const char *base, size_t baselen,
		      struct ig_list **out, struct gr_err *err)
{
	struct strbuf sb = STRBUF_INIT;
	struct stat st;
	int ret = 0;

	*out = NULL;
	if (fstat(fd, &st) < 0)
		return gr_errf(err, GR_EIO, "cannot read '%s': %s", shown, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return 0;
	for (;;) {
		ssize_t r;

		sb_grow(&sb, st.st_size > 0 ? (size_t)st.st_size + 1 : 4096);
		r = read(fd, sb.buf + sb.len, sb.alloc - sb.len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			ret = gr_errf(err, GR_EIO, "cannot read '%s': %s", shown, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		sb.len += (size_t)r;
	}
	*out = ig_list_new(shown, base, baselen);
	ig_parse_buffer(*out, sb.buf ? sb.buf : "", sb.len);
out:
	sb_release(&sb);
	return ret;
}

/* An ignore file outside the tree (info/exclude, the global file): a
 * missing one is fine; one we may not read is an error, so a secret is
 * never sent because its rule could not be read. */
int ig_read_path(const char *path, const char *shown, struct ig_list **out,
			struct gr_err *err)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), ret;

	*out = NULL;
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		ret = gr_errf(err, GR_EIO, "cannot read '%s': %s", shown, strerror(errno));
		gr_hintf(err, "make it readable or remove it; gpurun will not guess which files it ignores");
		return ret;
	}
	ret = ig_read_fd(fd, shown, "", 0, out, err);
	close(fd);
	return ret;
}

/* ---- matching (dir.c: match_basename, match_pathname) ---- */

static int ig_ncmp(unsigned wmflags, const char *a, const char *b, size_t n)
{
	return (wmflags & WM_CASEFOLD) ? strncasecmp(a, b, n) : memcmp(a, b, n);
}

static int ig_match_basename(unsigned wmflags, const struct ig_pattern *x,
			     const char *name, int namelen)
{
	if (x->nowild == x->patlen)
		return x->patlen == namelen && !ig_ncmp(wmflags, x->pat, name, (size_t)namelen);
	if (x->flags & IG_ENDSWITH)
		return x->patlen - 1 <= namelen &&
		       !ig_ncmp(wmflags, x->pat + 1, name + namelen - (x->patlen - 1),
				(size_t)(x->patlen - 1));
	return wildmatch(x->pat, name, wmflags) == WM_MATCH;
}

/* path is relative to the root; the pattern to its list's folder. The
 * literal prefix is compared first and cut off before wildmatch sees the
 * rest, exactly as git does (it changes what a "**" there means). */
static int ig_match_pathname(unsigned wmflags, const struct ig_list *l,
			     const struct ig_pattern *x, const char *path, int pathlen)
{
	const char *pat = x->pat, *name;
	int patlen = x->patlen, prefix = x->nowild, namelen;

	if (*pat == '/') {
		pat++;
		patlen--;
		prefix--;
	}
	if (pathlen < l->baselen + 1 || (l->baselen && path[l->baselen] != '/') ||
	    ig_ncmp(wmflags, path, l->base, (size_t)l->baselen))
		return 0;
	namelen = l->baselen ? pathlen - l->baselen - 1 : pathlen;
	name = path + pathlen - namelen;
	if (prefix) {
		if (prefix > namelen || ig_ncmp(wmflags, pat, name, (size_t)prefix))
			return 0;
		pat += prefix;
		patlen -= prefix;
		name += prefix;
		namelen -= prefix;
		if (!patlen && !namelen)
			return 1;
	}
	return wildmatch(pat, name, wmflags | WM_PATHNAME) == WM_MATCH;
}

/* The last pattern of l that matches decides for l. */
const struct ig_pattern *ig_list_match(unsigned wmflags, const struct ig_list *l,
					      const char *path, int pathlen,
					      const char *base, int is_dir)
{
	if (!l)
		return NULL;
	for (size_t k = l->n; k-- > 0;) {
		const struct ig_pattern *x = &l->v[k];

		if ((x->flags & IG_MUSTBEDIR) && !is_dir)
			continue;
		if (x->flags & IG_NODIR) {
			if (ig_match_basename(wmflags, x, base, pathlen - (int)(base - path)))
				return x;
		} else if (ig_match_pathname(wmflags, l, x, path, pathlen)) {
			return x;
		}
	}
	return NULL;
}

/* Could pattern x (anchored: with a '/' before its end) match something
 * below dir? */
int ig_pattern_may_descend(unsigned wmflags, const struct ig_pattern *x, const char *dir,
			       size_t len)
{
	const char *p = x->pat, *d = dir, *dend = dir + len;

	while (d < dend) {
		const char *pe = strchr(p, '/'), *de = memchr(d, '/', (size_t)(dend - d));
		size_t pl = pe ? (size_t)(pe - p) : strlen(p), dl = de ? (size_t)(de - d) : (size_t)(dend - d);
		if (pl == 2 && p[0] == '*' && p[1] == '*')
			return 1;
		if (!pe)
			return 0; /* the pattern ends at or above dir: it names dir or a parent */
		char *pc = xstrndup(p, pl), *dc = xstrndup(d, dl);
		int ok = wildmatch(pc, dc, wmflags) == WM_MATCH;
		free(pc);
		free(dc);
		if (!ok)
			return 0;
		p = pe + 1;
		d = de ? de + 1 : dend;
	}
	return 1;
}
