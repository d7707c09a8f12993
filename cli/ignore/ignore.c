/* git's ignore rules without git (dir.c's semantics): where the pattern
 * lists come from (global file, info/exclude, each folder's .gitignore,
 * the index), and the order git consults them in, with gpurun's
 * .gpurunignore and [sync] exclude on top; then [sync] include, which
 * sends a path (and all below it) whatever those say, and [train]
 * persist, whose paths live on the host and are never sent. Which rule
 * decided is kept for --why. One list's parsing and matching is in
 * ignore_rules.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compat.h"
#include "gitconfig.h"
#include "gitindex.h"
#include "ignore.h"
#include "ignore_int.h"
#include "util.h"
#include "wildmatch.h"

/* One loaded folder: its ignore files, and the nearest loaded parent. */
struct ig_dir {
	char *dir;     /* "" for the root, else "a/b" */
	size_t len;
	uint64_t hash;
	struct ig_dir *parent;
	struct ig_list *git, *gpurun;
};

struct ignore {
	char *root;
	unsigned wmflags;          /* WM_CASEFOLD under core.ignoreCase */
	int include_git;
	struct ig_list *extra, *info, *global;
	struct ig_list *include;   /* [sync] include; NULL: none (or switched off) */
	struct ig_list *include_off;
	struct strvec persist;     /* [train] persist, without trailing '/' */
	struct ig_dir **tab;       /* open addressing, power of two */
	size_t tabsize, ndirs;
	struct ig_dir *last;       /* the folder the previous check was in */
	struct gitindex index;
};

static const char *const ig_file_names[2] = { ".gitignore", ".gpurunignore" };

/* ---- loaded folders ---- */

static uint64_t ig_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static struct ig_dir *ig_dir_get(struct ignore *ig, const char *dir, size_t len)
{
	uint64_t h = ig_hash(dir, len);
	size_t mask = ig->tabsize - 1;

	for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
		struct ig_dir *d = ig->tab[i];

		if (!d)
			return NULL;
		if (d->hash == h && d->len == len && !memcmp(d->dir, dir, len))
			return d;
	}
}

static void ig_dir_put(struct ignore *ig, struct ig_dir *d)
{
	if ((ig->ndirs + 1) * 2 > ig->tabsize) {
		struct ig_dir **old = ig->tab;
		size_t oldsize = ig->tabsize;

		ig->tabsize *= 2;
		ig->tab = xcalloc(ig->tabsize, sizeof(*ig->tab));
		ig->ndirs = 0;
		for (size_t i = 0; i < oldsize; i++)
			if (old[i])
				ig_dir_put(ig, old[i]);
		free(old);
	}
	for (size_t i = (size_t)d->hash & (ig->tabsize - 1);; i = (i + 1) & (ig->tabsize - 1))
		if (!ig->tab[i]) {
			ig->tab[i] = d;
			ig->ndirs++;
			return;
		}
}

/* The deepest loaded folder that contains path[0..dirlen) or is it. */
static struct ig_dir *ig_dir_find(struct ignore *ig, const char *path, size_t dirlen)
{
	struct ig_dir *d;

	if (ig->last && ig->last->len == dirlen && !memcmp(ig->last->dir, path, dirlen))
		return ig->last;
	for (;;) {
		d = ig_dir_get(ig, path, dirlen);
		if (d || !dirlen)
			break;
		while (dirlen && path[dirlen - 1] != '/')
			dirlen--;
		if (dirlen)
			dirlen--;
	}
	if (d)
		ig->last = d;
	return d;
}

/* "a/b/" or "./a//b" -> "a/b" in sb. */
static void ig_normalize(struct strbuf *sb, const char *path)
{
	const char *p = path;

	sb_reset(sb);
	while (*p) {
		const char *e = strchr(p, '/');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n && !(n == 1 && p[0] == '.')) {
			if (sb->len)
				sb_add(sb, "/", 1);
			sb_add(sb, p, n);
		}
		p += n;
		if (*p == '/')
			p++;
	}
	sb_add(sb, "", 0);
}

static int ig_load_files(int dirfd, struct ig_dir *d, struct gr_err *err)
{
	for (int k = 0; k < 2; k++) {
		char *shown = d->len ? xasprintf("%s/%s", d->dir, ig_file_names[k])
				     : xstrdup(ig_file_names[k]);
		struct ig_list *l = NULL;
		int fd, ret = 0;

		/* O_NONBLOCK: a FIFO named .gitignore must not hang the scan. */
		fd = openat(dirfd, ig_file_names[k], O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd >= 0) {
			ret = ig_read_fd(fd, shown, d->dir, d->len, &l, err);
			close(fd);
		} else if (errno != ENOENT && errno != ENOTDIR && errno != ELOOP) {
			ret = gr_errf(err, GR_EIO, "cannot read '%s': %s", shown, strerror(errno));
			gr_hintf(err, "make it readable; gpurun will not guess which files it ignores");
		}
		free(shown);
		if (ret < 0)
			return ret;
		if (k == 0)
			d->git = l;
		else
			d->gpurun = l;
	}
	return 0;
}

int ig_load(struct ignore *ig, int dirfd, const char *dir, size_t len, struct gr_err *err)
{
	struct ig_dir *d;
	int fd = dirfd, ret = 0;

	if (ig_dir_get(ig, dir, len))
		return 0;
	if (len) {
		size_t plen = len;

		while (plen && dir[plen - 1] != '/')
			plen--;
		ret = ig_load(ig, -1, dir, plen ? plen - 1 : 0, err);
		if (ret < 0)
			return ret;
	}
	if (fd < 0) {
		char *p = xasprintf("%s/%.*s", ig->root, (int)len, dir);

		/* A symlink in the last place is not a folder to git: no rules. */
		fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		free(p);
		if (fd < 0 && errno != ENOENT && errno != ENOTDIR && errno != ELOOP)
			return gr_errf(err, GR_EIO, "cannot open '%.*s': %s",
				       len ? (int)len : 1, len ? dir : ".", strerror(errno));
	}
	d = xcalloc(1, sizeof(*d));
	d->dir = xstrndup(dir, len);
	d->len = len;
	d->hash = ig_hash(dir, len);
	if (fd >= 0)
		ret = ig_load_files(fd, d, err);
	if (fd >= 0 && fd != dirfd)
		close(fd);
	if (ret < 0) {
		ig_list_free(d->git);
		ig_list_free(d->gpurun);
		free(d->dir);
		free(d);
		return ret;
	}
	/* A missing folder is remembered as having no rules. */
	d->parent = len ? ig_dir_find(ig, dir, len) : NULL;
	ig_dir_put(ig, d);
	ig->last = NULL;
	return 0;
}

int ignore_load_dir_at(struct ignore *ig, int dirfd, const char *dir, struct gr_err *err)
{
	struct strbuf sb = STRBUF_INIT;
	int ret;

	ig_normalize(&sb, dir);
	ret = ig_load(ig, dirfd, sb.buf, sb.len, err);
	sb_release(&sb);
	return ret;
}

int ignore_load_dir(struct ignore *ig, const char *dir, struct gr_err *err)
{
	return ignore_load_dir_at(ig, -1, dir, err);
}

/* ---- deciding ---- */

static void ig_set_why(struct ignore_match *why, const struct ig_list *l,
		       const struct ig_pattern *x)
{
	if (!why)
		return;
	why->source = l ? l->source : NULL;
	why->line = x ? x->line : 0;
	why->pattern = x ? x->text : NULL;
	why->negated = x ? !!(x->flags & IG_NEGATIVE) : 0;
}

static void ig_set_builtin(struct ignore_match *why, const char *source, const char *pattern,
			   int negated)
{
	if (!why)
		return;
	why->source = source;
	why->line = 0;
	why->pattern = pattern;
	why->negated = negated;
}

/* git's order, first list with a match wins: [sync] exclude; then per
 * folder, deepest first, .gpurunignore before .gitignore; then
 * $GIT_DIR/info/exclude; then the global excludes file. */
static int ig_decide(struct ignore *ig, const char *path, size_t len, int is_dir,
		     struct ignore_match *why)
{
	const char *slash = compat_memrchr(path, '/', len);
	const char *base = slash ? slash + 1 : path;
	const struct ig_pattern *x;
	struct ig_dir *d;

	if ((x = ig_list_match(ig->wmflags, ig->extra, path, (int)len, base, is_dir)))
		goto found_extra;
	for (d = ig_dir_find(ig, path, slash ? (size_t)(slash - path) : 0); d; d = d->parent) {
		if ((x = ig_list_match(ig->wmflags, d->gpurun, path, (int)len, base, is_dir))) {
			ig_set_why(why, d->gpurun, x);
			goto found;
		}
		if ((x = ig_list_match(ig->wmflags, d->git, path, (int)len, base, is_dir))) {
			ig_set_why(why, d->git, x);
			goto found;
		}
	}
	if ((x = ig_list_match(ig->wmflags, ig->info, path, (int)len, base, is_dir))) {
		ig_set_why(why, ig->info, x);
		goto found;
	}
	if ((x = ig_list_match(ig->wmflags, ig->global, path, (int)len, base, is_dir))) {
		ig_set_why(why, ig->global, x);
		goto found;
	}
	ig_set_why(why, NULL, NULL);
	return 0;
found_extra:
	ig_set_why(why, ig->extra, x);
found:
	return !(x->flags & IG_NEGATIVE);
}

static int ig_is_git(struct ignore *ig, const char *name, size_t n)
{
	if (n != 4)
		return 0;
	return (ig && (ig->wmflags & WM_CASEFOLD)) ? !strncasecmp(name, ".git", 4)
						   : !memcmp(name, ".git", 4);
}

int ignore_builtin(const char *relpath, int include_git)
{
	const char *p = relpath;
	int first = 1;

	while (*p) {
		size_t n = strcspn(p, "/");

		if (!include_git && ig_is_git(NULL, p, n))
			return 1;
		if (first && n == 7 && !memcmp(p, ".gpurun", 7))
			return 1;
		first = 0;
		p += n;
		while (*p == '/')
			p++;
	}
	return 0;
}

/* ---- [train] persist and [sync] include ---- */

int ig_persist_match(struct ignore *ig, const char *path, size_t len, struct ignore_match *why)
{
	for (size_t i = 0; i < ig->persist.n; i++)
		if (strlen(ig->persist.v[i]) == len && !memcmp(ig->persist.v[i], path, len)) {
			ig_set_builtin(why, "[train] persist", ig->persist.v[i], 0);
			return 1;
		}
	return 0;
}

int ig_include_match(struct ignore *ig, const char *path, size_t len, int is_dir,
		     struct ignore_match *why)
{
	const char *slash = compat_memrchr(path, '/', len);
	const char *base = slash ? slash + 1 : path;
	const struct ig_pattern *x;

	if (!ig->include)
		return 0;
	x = ig_list_match(ig->wmflags, ig->include, path, (int)len, base, is_dir);
	if (!x)
		return 0;
	if (!(x->flags & IG_NEGATIVE))
		ig_set_why(why, ig->include, x);
	return x->flags & IG_NEGATIVE ? -1 : 1;
}

int ig_include_may_descend(struct ignore *ig, const char *dir, size_t len)
{
	for (size_t i = 0; ig->include && i < ig->include->n; i++) {
		const struct ig_pattern *x = &ig->include->v[i];
		/* A pattern without a '/' matches at any depth; the scan does
		 * not look inside every ignored folder (.venv, node_modules)
		 * for it, only at the paths it reaches anyway. */
		if (x->flags & (IG_NEGATIVE | IG_NODIR))
			continue;
		if (ig_pattern_may_descend(ig->wmflags, x, dir, len))
			return 1;
	}
	return 0;
}

void ig_include_enable(struct ignore *ig, int on)
{
	if (on && !ig->include) {
		ig->include = ig->include_off;
		ig->include_off = NULL;
	} else if (!on && ig->include) {
		ig->include_off = ig->include;
		ig->include = NULL;
	}
	ig->last = NULL;
}

const struct ig_pattern *ig_overridden(struct ignore *ig, const char *path, size_t len,
				       int is_dir, const struct ignore_match *m,
				       struct ignore_match *out)
{
	const char *slash = compat_memrchr(path, '/', len);
	const char *base = slash ? slash + 1 : path;
	struct ig_list *lists[64];
	size_t nl = 0;
	struct ig_dir *d;

	if (ig->extra)
		lists[nl++] = ig->extra;
	for (d = ig_dir_find(ig, path, slash ? (size_t)(slash - path) : 0); d && nl < 60; d = d->parent) {
		if (d->gpurun)
			lists[nl++] = d->gpurun;
		if (d->git)
			lists[nl++] = d->git;
	}
	if (ig->info)
		lists[nl++] = ig->info;
	if (ig->global)
		lists[nl++] = ig->global;
	int past = 0;
	for (size_t i = 0; i < nl; i++) {
		const struct ig_list *l = lists[i];
		for (size_t k = l->n; k-- > 0;) {
			const struct ig_pattern *x = &l->v[k];
			if (!past) {
				past = l->source == m->source && x->text == m->pattern;
				continue;
			}
			if ((x->flags & IG_NEGATIVE) || ((x->flags & IG_MUSTBEDIR) && !is_dir))
				continue;
			struct ig_list one = *l;
			one.v = (struct ig_pattern *)x;
			one.n = 1;
			if (ig_list_match(ig->wmflags, &one, path, (int)len, base, is_dir)) {
				ig_set_why(out, l, x);
				return x;
			}
		}
	}
	return NULL;
}

int ig_check_len(struct ignore *ig, const char *path, size_t len, int is_dir,
		 struct ignore_match *why)
{
	const char *slash = compat_memrchr(path, '/', len);
	const char *base = slash ? slash + 1 : path;
	size_t blen = len - (size_t)(base - path);

	if (!ig->include_git && ig_is_git(ig, base, blen)) {
		ig_set_builtin(why, "(built-in)", ".git/", 0);
		return 1;
	}
	if (!slash && blen == 7 && !memcmp(base, ".gpurun", 7)) {
		ig_set_builtin(why, "(built-in)", ".gpurun/", 0);
		return 1;
	}
	if (ig_persist_match(ig, path, len, why))
		return 1;
	if (!is_dir && ig->index.n && gitindex_has(&ig->index, path, len)) {
		ig_set_builtin(why, ".git/index", "(tracked)", 1);
		return 0;
	}
	if (ig->include && ig_include_match(ig, path, len, is_dir, why) > 0)
		return 0;
	return ig_decide(ig, path, len, is_dir, why);
}

int ignore_check(struct ignore *ig, const char *relpath, int is_dir, struct ignore_match *why)
{
	size_t len = strlen(relpath);
	int ret;

	if (len && relpath[len - 1] == '/') {
		char *copy;

		while (len && relpath[len - 1] == '/')
			len--;
		copy = xstrndup(relpath, len);
		ret = ig_check_len(ig, copy, len, 1, why);
		free(copy);
		return ret;
	}
	return ig_check_len(ig, relpath, len, is_dir, why);
}

int ig_path_len(struct ignore *ig, const char *path, size_t len, int is_dir,
		struct ignore_match *why, size_t *decided_len, struct gr_err *err)
{
	char *buf;
	int ret;

	*decided_len = len;
	if (ig->include_git) {
		for (const char *p = path; p < path + len;) {
			size_t n = strcspn(p, "/");

			if (ig_is_git(ig, p, n)) {
				ig_set_builtin(why, "[sync] include_git", ".git/", 1);
				return 0;
			}
			p += n + 1;
		}
	}
	if (!is_dir && ig->index.n && gitindex_has(&ig->index, path, len)) {
		ig_set_builtin(why, ".git/index", "(tracked)", 1);
		return 0;
	}
	/* A persistent path, or inside one: never sent, whatever else. */
	for (size_t i = 0; i <= len; i++)
		if ((i == len || path[i] == '/') && ig_persist_match(ig, path, i, why)) {
			*decided_len = i;
			return 1;
		}
	/* [sync] include: the deepest of the path and its folders that an
	 * include pattern names decides, before any ignore rule; when that is
	 * a '!' pattern, the ignore rules decide, as without include. */
	if (ig->include) {
		int m = 0;
		buf = xstrndup(path, len);
		for (size_t i = len; i > 0 && !m; i--) {
			if (i < len && buf[i] != '/')
				continue;
			buf[i] = '\0';
			m = ig_include_match(ig, buf, i, i < len || is_dir, why);
			if (i < len)
				buf[i] = '/';
			if (m > 0) {
				free(buf);
				*decided_len = i;
				return 0;
			}
		}
		free(buf);
		if (m < 0) {
			ig_include_enable(ig, 0);
			ret = ig_path_len(ig, path, len, is_dir, why, decided_len, err);
			ig_include_enable(ig, 1);
			return ret;
		}
	}
	/* Parents first: git never looks inside an ignored folder, nor reads
	 * the ignore files there. The matcher wants each prefix NUL-ended. */
	ret = ig_load(ig, -1, path, 0, err);
	if (ret < 0)
		return ret;
	buf = xstrndup(path, len);
	for (size_t i = 0; i < len; i++) {
		if (buf[i] != '/')
			continue;
		buf[i] = '\0';
		ret = ig_check_len(ig, buf, i, 1, why);
		buf[i] = '/';
		if (ret) {
			*decided_len = i;
			goto out;
		}
		ret = ig_load(ig, -1, buf, i, err);
		if (ret < 0)
			goto out;
	}
	ret = ig_check_len(ig, buf, len, is_dir, why);
out:
	free(buf);
	return ret;
}

int ignore_path(struct ignore *ig, const char *relpath, int is_dir,
		struct ignore_match *why, struct gr_err *err)
{
	struct strbuf sb = STRBUF_INIT;
	size_t decided;
	int ret;

	if (*relpath && relpath[strlen(relpath) - 1] == '/')
		is_dir = 1;
	ig_normalize(&sb, relpath);
	if (!sb.len) {
		ig_set_why(why, NULL, NULL);
		sb_release(&sb);
		return 0;
	}
	ret = ig_path_len(ig, sb.buf, sb.len, is_dir, why, &decided, err);
	sb_release(&sb);
	return ret;
}

/* ---- setup ---- */

/* root/.git, or the folder a "gitdir: X" file in its place names. */
static char *ig_find_gitdir(const char *root)
{
	char *p = xasprintf("%s/.git", root), *dir = NULL;
	struct strbuf sb = STRBUF_INIT;
	struct stat st;

	if (stat(p, &st) < 0)
		goto out;
	if (S_ISDIR(st.st_mode)) {
		dir = p;
		p = NULL;
		goto out;
	}
	if (read_file(p, &sb, NULL) < 0 || strncmp(sb.buf, "gitdir: ", 8))
		goto out;
	while (sb.len && (sb.buf[sb.len - 1] == '\n' || sb.buf[sb.len - 1] == '\r'))
		sb.buf[--sb.len] = '\0';
	dir = sb.buf[8] == '/' ? xstrdup(sb.buf + 8) : xasprintf("%s/%s", root, sb.buf + 8);
out:
	free(p);
	sb_release(&sb);
	return dir;
}

/* A linked worktree keeps info/exclude in the common folder. */
static char *ig_common_dir(const char *gitdir)
{
	char *p = xasprintf("%s/commondir", gitdir), *dir;
	struct strbuf sb = STRBUF_INIT;

	if (read_file(p, &sb, NULL) < 0 || !sb.len) {
		dir = xstrdup(gitdir);
	} else {
		while (sb.len && (sb.buf[sb.len - 1] == '\n' || sb.buf[sb.len - 1] == '\r'))
			sb.buf[--sb.len] = '\0';
		dir = sb.buf[0] == '/' ? xstrdup(sb.buf) : xasprintf("%s/%s", gitdir, sb.buf);
	}
	free(p);
	sb_release(&sb);
	return dir;
}

void ignore_set_include(struct ignore *ig, const char *const *pats, size_t n)
{
	ig_list_free(ig->include);
	ig->include = NULL;
	if (!n)
		return;
	ig->include = ig_list_new("[sync] include", "", 0);
	for (size_t i = 0; i < n; i++)
		if (pats[i])
			ig_parse_line(ig->include, pats[i], strlen(pats[i]), (int)i + 1);
}

void ignore_set_persist(struct ignore *ig, const char *const *paths, size_t n)
{
	sv_clear(&ig->persist);
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(paths[i]);
		while (len && paths[i][len - 1] == '/')
			len--;
		if (len) {
			char *p = xstrndup(paths[i], len);
			sv_push(&ig->persist, p);
			free(p);
		}
	}
}

int ignore_new(struct ignore **out, const char *root, const char *const *extra,
	       size_t nextra, struct gr_err *err)
{
	struct ignore *ig = xcalloc(1, sizeof(*ig));
	struct gitcfg cfg = { 0 };
	char *gitdir = ig_find_gitdir(root), *common = NULL, *path = NULL;
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	int ret;

	*out = NULL;
	ig->root = xstrdup(root);
	ig->tabsize = 64;
	ig->tab = xcalloc(ig->tabsize, sizeof(*ig->tab));
	gitcfg_load(&cfg, gitdir);
	if (cfg.ignore_case && gitcfg_bool(cfg.ignore_case) == 1)
		ig->wmflags |= WM_CASEFOLD;

	/* core.excludesFile, else $XDG_CONFIG_HOME/git/ignore, else
	 * ~/.config/git/ignore; a relative path is taken from the root, where
	 * git runs. */
	if (cfg.excludes_file)
		path = cfg.excludes_file[0] == '/' ? xstrdup(cfg.excludes_file)
						  : xasprintf("%s/%s", root, cfg.excludes_file);
	else if (xdg && *xdg)
		path = xasprintf("%s/git/ignore", xdg);
	else if (home && *home)
		path = xasprintf("%s/.config/git/ignore", home);
	if (path) {
		ret = ig_read_path(path, cfg.excludes_file ? cfg.excludes_file : path,
				   &ig->global, err);
		if (ret < 0)
			goto out;
	}
	if (gitdir) {
		char *shown;

		common = ig_common_dir(gitdir);
		free(path);
		path = xasprintf("%s/info/exclude", common);
		shown = xasprintf("%s/.git", root);
		if (!strcmp(common, shown)) {
			free(shown);
			shown = xstrdup(".git/info/exclude");
		} else {
			free(shown);
			shown = xstrdup(path);
		}
		ret = ig_read_path(path, shown, &ig->info, err);
		free(shown);
		if (ret < 0)
			goto out;
		free(path);
		path = xasprintf("%s/index", gitdir);
		ret = gitindex_read(&ig->index, path,
				    cfg.object_format && !strcasecmp(cfg.object_format, "sha256") ? 32 : 20,
				    err);
		/* No index, or one we cannot use: every file is untracked. */
		if (ret == GR_ENOTFOUND || ret == GR_EUNSUPP)
			ret = 0;
		if (ret < 0)
			goto out;
		gr_err_clear(err);
	}
	if (nextra) {
		ig->extra = ig_list_new("[sync] exclude", "", 0);
		for (size_t i = 0; i < nextra; i++)
			if (extra[i])
				ig_parse_line(ig->extra, extra[i], strlen(extra[i]), (int)i + 1);
	}
	*out = ig;
	ig = NULL;
	ret = 0;
out:
	ignore_free(ig);
	gitcfg_free(&cfg);
	free(gitdir);
	free(common);
	free(path);
	return ret;
}

void ignore_set_include_git(struct ignore *ig, int on)
{
	ig->include_git = !!on;
}

int ignore_tracked(struct ignore *ig, const char *relpath)
{
	return gitindex_has(&ig->index, relpath, strlen(relpath));
}

int ignore_tracked_under(struct ignore *ig, const char *reldir)
{
	size_t len = strlen(reldir);

	while (len && reldir[len - 1] == '/')
		len--;
	return gitindex_has_under(&ig->index, reldir, len);
}

void ignore_free(struct ignore *ig)
{
	if (!ig)
		return;
	for (size_t i = 0; i < ig->tabsize; i++) {
		struct ig_dir *d = ig->tab[i];

		if (!d)
			continue;
		ig_list_free(d->git);
		ig_list_free(d->gpurun);
		free(d->dir);
		free(d);
	}
	free(ig->tab);
	ig_list_free(ig->extra);
	ig_list_free(ig->include);
	ig_list_free(ig->include_off);
	sv_clear(&ig->persist);
	ig_list_free(ig->info);
	ig_list_free(ig->global);
	gitindex_free(&ig->index);
	free(ig->root);
	free(ig);
}
