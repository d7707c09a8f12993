/* `gpurun sync --why PATH`: the ignore engine's answer for one path in
 * words, like `git check-ignore -v`, including the cases people trip on
 * (a negation that cannot re-include a file inside an ignored folder),
 * the rule a negation overrides, what [sync] include wins over, and what
 * a sync does with an ignored path already on the host. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ignore_int.h"
#include "scan.h"
#include "util.h"

/* 'path' with control characters made visible (names may hold newlines). */
static void ex_quote(struct strbuf *out, const char *s, size_t n)
{
	sb_add(out, "'", 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\n')
			sb_adds(out, "\\n");
		else if (c == '\t')
			sb_adds(out, "\\t");
		else if (c < 0x20 || c == 0x7f)
			sb_addf(out, "\\%03o", c);
		else
			sb_add(out, &s[i], 1);
	}
	sb_add(out, "'", 1);
}

static void ex_rule(struct strbuf *out, const struct ignore_match *m)
{
	sb_addf(out, "%s:%d ", m->source, m->line);
	ex_quote(out, m->pattern, strlen(m->pattern));
}

/* path relative to root: absolute paths inside root are made relative;
 * "." and empty components go; ".." is refused. */
static int ex_relative(const char *root, const char *path, struct strbuf *rel, int *is_dir,
		       struct gr_err *err)
{
	size_t rlen = strlen(root);
	const char *p = path;

	while (rlen > 1 && root[rlen - 1] == '/')
		rlen--;
	if (*p == '/') {
		if (strncmp(p, root, rlen) || (p[rlen] && p[rlen] != '/'))
			return gr_errf(err, GR_EINVAL, "'%s' is outside the project '%s'", path, root);
		p += rlen;
	}
	*is_dir = *p && p[strlen(p) - 1] == '/';
	sb_reset(rel);
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return gr_errf(err, GR_EINVAL, "'%s': '..' is not allowed here", path);
		if (n && !(n == 1 && p[0] == '.')) {
			if (rel->len)
				sb_add(rel, "/", 1);
			sb_add(rel, p, n);
		}
		p += n;
		while (*p == '/')
			p++;
	}
	sb_add(rel, "", 0);
	return 0;
}

int ignore_explain(const char *root, const struct scan_opts *o, const char *path,
		   struct strbuf *out, struct gr_err *err)
{
	static const struct scan_opts defaults;
	struct strbuf rel = STRBUF_INIT, full = STRBUF_INIT;
	struct ignore *ig = NULL;
	struct ignore_match m = { 0 };
	struct stat st;
	size_t decided;
	int is_dir = 0, exists, ret;

	if (!o)
		o = &defaults;
	ret = ex_relative(root, path, &rel, &is_dir, err);
	if (ret < 0)
		goto out;
	if (!rel.len) {
		sb_adds(out, "synced: '.' (the project folder itself)\n");
		goto out;
	}
	sb_addf(&full, "%s/%s", root, rel.buf);
	exists = lstat(full.buf, &st) == 0;
	if (exists)
		is_dir = S_ISDIR(st.st_mode);
	ret = ignore_new(&ig, root, o->extra, o->nextra, err);
	if (ret < 0)
		goto out;
	ignore_set_include_git(ig, o->include_git);
	ignore_set_include(ig, o->include, o->ninclude);
	ignore_set_persist(ig, o->persist, o->npersist);

	/* Names gpurun never sends, whatever the rules say. */
	if (ignore_builtin(rel.buf, o->include_git)) {
		int is_state = !strncmp(rel.buf, ".gpurun", 7) && (!rel.buf[7] || rel.buf[7] == '/');

		sb_adds(out, "ignored: ");
		ex_quote(out, rel.buf, rel.len);
		sb_adds(out, is_state ? " (.gpurun/ is gpurun's local state and is never synced)\n"
				      : " (.git/ is never synced; set [sync] include_git = true to send it)\n");
		ret = 1;
		goto out;
	}
	ret = ig_path_len(ig, rel.buf, rel.len, is_dir, &m, &decided, err);
	if (ret < 0)
		goto out;
	int persist = m.source && !strcmp(m.source, "[train] persist");
	int included = m.source && !strcmp(m.source, "[sync] include");
	sb_adds(out, ret ? "ignored: " : "synced: ");
	ex_quote(out, rel.buf, rel.len);
	if (persist) {
		char *p = xasprintf("%.*s/", (int)decided, rel.buf);
		sb_adds(out, decided < rel.len ? " because folder " : " because ");
		ex_quote(out, p, decided < rel.len || is_dir ? decided + 1 : decided);
		sb_addf(out, " is a persistent path ([train] persist '%s/'): it lives in the project "
			"folder on the host, shared by every job, and is never synced\n", m.pattern);
		free(p);
	} else if (included) {
		if (decided < rel.len) {
			char *p = xasprintf("%.*s/", (int)decided, rel.buf);
			sb_adds(out, " because folder ");
			ex_quote(out, p, decided + 1);
			sb_adds(out, " is included by ");
			free(p);
		} else {
			sb_adds(out, " included by ");
		}
		ex_rule(out, &m);
		sb_adds(out, "\n");
		/* What it wins over. */
		struct ignore_match w = { 0 };
		size_t wd;
		ig_include_enable(ig, 0);
		if (ig_path_len(ig, rel.buf, rel.len, is_dir, &w, &wd, NULL) == 1 && w.source) {
			char *what = wd < rel.len ? xasprintf("folder '%.*s/'", (int)wd, rel.buf) : NULL;
			sb_adds(out, "note: without it, ");
			if (what)
				sb_adds(out, what);
			else
				ex_quote(out, rel.buf, rel.len);
			free(what);
			sb_adds(out, " is ignored by ");
			ex_rule(out, &w);
			sb_adds(out, "\n");
		}
		ig_include_enable(ig, 1);
	} else if (decided < rel.len) {
		struct ignore_match self = { 0 };
		char *parent = xasprintf("%.*s/", (int)decided, rel.buf);

		sb_adds(out, " because folder ");
		ex_quote(out, parent, decided + 1);
		sb_adds(out, " is ignored by ");
		ex_rule(out, &m);
		sb_adds(out, "\n");
		/* Would a rule have re-included the path itself? git never
		 * gets that far; say so, since it is the classic surprise. */
		const char *slash = strrchr(rel.buf, '/');
		if (ig_load(ig, -1, rel.buf, (size_t)(slash - rel.buf), NULL) == 0 &&
		    !ig_check_len(ig, rel.buf, rel.len, is_dir, &self) && self.source &&
		    self.negated && strcmp(self.source, ".git/index")) {
			sb_addf(out, "note: %s:%d ", self.source, self.line);
			ex_quote(out, self.pattern, strlen(self.pattern));
			sb_adds(out, " cannot re-include it: git never looks inside an ignored "
				     "folder (ignore its contents, ");
			char *contents = xasprintf("/%s*", parent);
			ex_quote(out, contents, strlen(contents));
			free(contents);
			sb_adds(out, ", instead of the folder itself; or name it in [sync] include)\n");
		}
		free(parent);
	} else if (m.source && !strcmp(m.source, ".git/index")) {
		sb_adds(out, " (tracked by git, so no ignore rule applies)\n");
	} else if (m.source && !strcmp(m.source, "[sync] include_git")) {
		sb_adds(out, " ([sync] include_git sends .git/)\n");
	} else if (!m.source) {
		sb_adds(out, " (no rule matches)\n");
	} else {
		struct ignore_match o2 = { 0 };
		sb_adds(out, m.negated ? " re-included by " : " by ");
		ex_rule(out, &m);
		sb_adds(out, "\n");
		if (m.negated && ig_overridden(ig, rel.buf, rel.len, is_dir, &m, &o2)) {
			sb_adds(out, "note: it overrides ");
			ex_rule(out, &o2);
			sb_adds(out, "\n");
		}
	}
	if (!exists) {
		sb_adds(out, "note: ");
		ex_quote(out, rel.buf, rel.len);
		sb_adds(out, is_dir ? " does not exist; answered as for a folder\n"
				    : " does not exist; answered as for a file\n");
	}
out:
	ignore_free(ig);
	sb_release(&rel);
	sb_release(&full);
	return ret;
}
