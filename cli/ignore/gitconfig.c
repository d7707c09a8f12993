/* A small reader for git's config format (sections, quoting, escapes,
 * comments, continuation lines, include.path), used only to find
 * core.excludesFile and core.ignoreCase the way git would. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gitconfig.h"
#include "util.h"

#define GITCFG_MAX_DEPTH 10

struct cfg_parser {
	const char *p, *end;
	const char *path; /* for include.path relative to this file */
};

static int cfg_peek(struct cfg_parser *ps)
{
	if (ps->p >= ps->end)
		return -1;
	/* "\r\n" reads as "\n", as git's reader does. */
	if (ps->p[0] == '\r' && ps->p + 1 < ps->end && ps->p[1] == '\n')
		return '\n';
	return (unsigned char)ps->p[0];
}

static int cfg_next(struct cfg_parser *ps)
{
	int c = cfg_peek(ps);

	if (c < 0)
		return c;
	ps->p += (ps->p[0] == '\r' && c == '\n') ? 2 : 1;
	return c;
}

static int cfg_space(int c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static void cfg_skip_line(struct cfg_parser *ps)
{
	int c;

	while ((c = cfg_next(ps)) >= 0 && c != '\n')
		;
}

/* "[section]" or "[section "sub"]" or the old "[section.sub]": fills
 * section (lowercased) and sets *has_sub. Returns 0, or -1 if malformed. */
static int cfg_section(struct cfg_parser *ps, struct strbuf *section, int *has_sub)
{
	int c;

	sb_reset(section);
	*has_sub = 0;
	while ((c = cfg_next(ps)) >= 0) {
		if (c == ']')
			return 0;
		if (cfg_space(c) && c != '\n') {
			/* a quoted subsection follows */
			while ((c = cfg_next(ps)) == ' ' || c == '\t')
				;
			if (c != '"')
				return -1;
			while ((c = cfg_next(ps)) >= 0 && c != '"') {
				if (c == '\n')
					return -1;
				if (c == '\\' && (c = cfg_next(ps)) < 0)
					return -1;
			}
			if (c < 0 || cfg_next(ps) != ']')
				return -1;
			*has_sub = 1;
			return 0;
		}
		if (c == '.')
			*has_sub = 1;
		else if (!isalnum(c) && c != '-')
			return -1;
		sb_add(section, &(char){ (char)tolower(c) }, 1);
	}
	return -1;
}

/* A value after '=': quotes, escapes, comments, trailing space dropped,
 * unquoted inner whitespace turned into single spaces per character. */
static int cfg_value(struct cfg_parser *ps, struct strbuf *v)
{
	int quote = 0, comment = 0, space = 0, c;

	sb_reset(v);
	for (;;) {
		c = cfg_next(ps);
		if (c < 0 || c == '\n') {
			if (quote)
				return -1;
			return 0;
		}
		if (comment)
			continue;
		if (cfg_space(c) && !quote) {
			if (v->len)
				space++;
			continue;
		}
		if (!quote && (c == ';' || c == '#')) {
			comment = 1;
			continue;
		}
		for (; space; space--)
			sb_add(v, " ", 1);
		if (c == '\\') {
			c = cfg_next(ps);
			switch (c) {
			case '\n': continue;
			case 't': c = '\t'; break;
			case 'b': c = '\b'; break;
			case 'n': c = '\n'; break;
			case '\\': case '"': break;
			default: return -1;
			}
			sb_add(v, &(char){ (char)c }, 1);
			continue;
		}
		if (c == '"') {
			quote = !quote;
			continue;
		}
		sb_add(v, &(char){ (char)c }, 1);
	}
}

static void cfg_set(char **slot, const char *v)
{
	free(*slot);
	*slot = xstrdup(v);
}

static char *cfg_include_path(const char *including, const char *v)
{
	const char *slash;

	if (v[0] == '~' && (v[1] == '/' || !v[1]))
		return expand_home(v);
	if (v[0] == '/')
		return xstrdup(v);
	slash = strrchr(including, '/');
	if (!slash)
		return xstrdup(v);
	return xasprintf("%.*s/%s", (int)(slash - including), including, v);
}

static void cfg_parse(struct gitcfg *c, struct cfg_parser *ps, int depth)
{
	struct strbuf section = STRBUF_INIT, key = STRBUF_INIT, val = STRBUF_INIT;
	int has_sub = 0, ch;

	/* A UTF-8 byte order mark is allowed at the start. */
	if (ps->end - ps->p >= 3 && !memcmp(ps->p, "\xef\xbb\xbf", 3))
		ps->p += 3;
	while ((ch = cfg_next(ps)) >= 0) {
		int bare;

		if (cfg_space(ch))
			continue;
		if (ch == '#' || ch == ';') {
			cfg_skip_line(ps);
			continue;
		}
		if (ch == '[') {
			if (cfg_section(ps, &section, &has_sub) < 0)
				break;
			continue;
		}
		if (!isalpha(ch))
			break;
		sb_reset(&key);
		sb_add(&key, &(char){ (char)tolower(ch) }, 1);
		while ((ch = cfg_peek(ps)) >= 0 && (isalnum(ch) || ch == '-')) {
			sb_add(&key, &(char){ (char)tolower(ch) }, 1);
			cfg_next(ps);
		}
		while ((ch = cfg_peek(ps)) == ' ' || ch == '\t')
			cfg_next(ps);
		bare = ch < 0 || ch == '\n' || ch == '#' || ch == ';';
		if (bare) {
			cfg_skip_line(ps);
			sb_reset(&val);
		} else if (ch != '=') {
			break;
		} else {
			cfg_next(ps);
			if (cfg_value(ps, &val) < 0)
				break;
		}
		if (has_sub || !section.len)
			continue;
		if (!strcmp(section.buf, "core") && !strcmp(key.buf, "excludesfile")) {
			if (!bare) /* a bare key is an error for a path in git */
				cfg_set(&c->excludes_file, val.buf);
		} else if (!strcmp(section.buf, "core") && !strcmp(key.buf, "ignorecase")) {
			cfg_set(&c->ignore_case, bare ? "true" : val.buf);
		} else if (!strcmp(section.buf, "extensions") && !strcmp(key.buf, "objectformat")) {
			if (!bare)
				cfg_set(&c->object_format, val.buf);
		} else if (!strcmp(section.buf, "include") && !strcmp(key.buf, "path") &&
			   !bare && val.len && depth < GITCFG_MAX_DEPTH) {
			char *inc = cfg_include_path(ps->path, val.buf);

			gitcfg_read_file(c, inc, depth + 1);
			free(inc);
		}
	}
	sb_release(&section);
	sb_release(&key);
	sb_release(&val);
}

int gitcfg_read_file(struct gitcfg *c, const char *path, int depth)
{
	struct strbuf sb = STRBUF_INIT;
	struct cfg_parser ps;

	if (read_file(path, &sb, NULL) < 0) {
		sb_release(&sb);
		return -1;
	}
	ps.p = sb.buf ? sb.buf : "";
	ps.end = ps.p + sb.len;
	ps.path = path;
	cfg_parse(c, &ps, depth);
	sb_release(&sb);
	return 0;
}

static int env_set(const char *name)
{
	const char *v = getenv(name);

	return v && *v;
}

void gitcfg_load(struct gitcfg *c, const char *gitdir)
{
	const char *home = getenv("HOME"), *xdg = getenv("XDG_CONFIG_HOME");
	char *p;

	if (!env_set("GIT_CONFIG_NOSYSTEM") || gitcfg_bool(getenv("GIT_CONFIG_NOSYSTEM")) == 0)
		gitcfg_read_file(c, env_set("GIT_CONFIG_SYSTEM") ? getenv("GIT_CONFIG_SYSTEM") :
				 "/etc/gitconfig", 0);
	if (env_set("GIT_CONFIG_GLOBAL")) {
		gitcfg_read_file(c, getenv("GIT_CONFIG_GLOBAL"), 0);
	} else {
		if (xdg && *xdg) {
			p = xasprintf("%s/git/config", xdg);
			gitcfg_read_file(c, p, 0);
			free(p);
		} else if (home && *home) {
			p = xasprintf("%s/.config/git/config", home);
			gitcfg_read_file(c, p, 0);
			free(p);
		}
		if (home && *home) {
			p = xasprintf("%s/.gitconfig", home);
			gitcfg_read_file(c, p, 0);
			free(p);
		}
	}
	if (gitdir) {
		p = xasprintf("%s/config", gitdir);
		gitcfg_read_file(c, p, 0);
		free(p);
	}
	if (c->excludes_file && c->excludes_file[0] == '~' &&
	    (c->excludes_file[1] == '/' || !c->excludes_file[1])) {
		p = expand_home(c->excludes_file);
		free(c->excludes_file);
		c->excludes_file = p;
	}
}

void gitcfg_free(struct gitcfg *c)
{
	if (!c)
		return;
	free(c->excludes_file);
	free(c->ignore_case);
	free(c->object_format);
	c->excludes_file = c->ignore_case = c->object_format = NULL;
}

int gitcfg_bool(const char *v)
{
	long long n;

	if (!v)
		return 1;
	if (!*v)
		return 0;
	if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on"))
		return 1;
	if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off"))
		return 0;
	if (parse_ll(v, -(1LL << 62), 1LL << 62, &n) == 0)
		return n != 0;
	return -1;
}
