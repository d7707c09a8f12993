/* Reading one config file into a layer (see config.c): our own line
 * reader feeds inih, so every key knows its line and inih's multi-line
 * and inline-comment rules never apply (comments after a value are git
 * config's, value_of); [pools] entries and section headers are checked
 * here, each error with FILE:LINE. */
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_priv.h"

struct pctx {
	struct gr_config *cfg;
	const char *disp;    /* the file as messages name it */
	int layer;           /* LAYER_USER or LAYER_FILE */
	const char *buf;
	size_t len, pos;
	int lineno;          /* the line last handed to inih */
	const char *raw;     /* that line, leading whitespace and '\r' dropped */
	size_t rawlen;
	int err_line;        /* first error found by us, 0 if none */
	struct gr_err err;
};

static int perr(struct pctx *pc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(struct pctx *pc, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	if (pc->err_line)
		return 1;
	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	gr_errf(&pc->err, GR_ECONFIG, "%s:%d: %s", pc->disp, pc->lineno, sb.buf);
	sb_release(&sb);
	pc->err_line = pc->lineno;
	return 1;
}

static char *trimmed(const char *s, size_t n)
{
	while (n && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	return xstrndup(s, n);
}

/* Section headers are checked here: inih does not tell the handler about
 * them, and ignores text after the ']'. */
static void check_header(struct pctx *pc)
{
	const char *close = memchr(pc->raw, ']', pc->rawlen);
	struct strbuf hint = STRBUF_INIT;
	char *name, *rest;

	if (!close)
		return;   /* inih reports it as malformed */
	name = trimmed(pc->raw + 1, (size_t)(close - pc->raw - 1));
	rest = trimmed(close + 1, pc->rawlen - (size_t)(close + 1 - pc->raw));
	if (!cfgk_section_known(name) && strcmp(name, "pools")) {
		perr(pc, "unknown section [%s]", name);
		cfgk_hint_section(name, &hint);
	} else if (*rest && *rest != '#' && *rest != ';') {
		perr(pc, "unexpected text after [%s]", name);
		sb_adds(&hint, "put each key on its own line below the section header");
	}
	if (hint.len && pc->err_line == pc->lineno)
		gr_hintf(&pc->err, "%s", hint.buf);
	sb_release(&hint);
	free(name);
	free(rest);
}

/* inih's reader: one physical line per call, so inih's line numbers are
 * ours. Leading whitespace is dropped (no continuation lines); a line too
 * long for inih's buffer is cut: the handler reads the value from the
 * full line anyway. */
static char *reader(char *str, int num, void *stream)
{
	struct pctx *pc = stream;
	const char *line, *nl;
	size_t n, give;

	if (pc->pos >= pc->len || num < 4)
		return NULL;
	line = pc->buf + pc->pos;
	nl = memchr(line, '\n', pc->len - pc->pos);
	n = nl ? (size_t)(nl - line) : pc->len - pc->pos;
	pc->pos += n + (nl ? 1 : 0);
	pc->lineno++;
	if (pc->lineno == 1 && n >= 3 && !memcmp(line, "\xEF\xBB\xBF", 3)) {
		line += 3;
		n -= 3;
	}
	while (n && (*line == ' ' || *line == '\t')) {
		line++;
		n--;
	}
	while (n && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	pc->raw = line;
	pc->rawlen = n;
	if (memchr(line, '\0', n)) {
		perr(pc, "malformed line: contains a NUL byte");
		n = 0;
	} else if (n && line[0] == '[') {
		check_header(pc);
	}
	give = n < (size_t)num - 2 ? n : (size_t)num - 2;
	memcpy(str, line, give);
	str[give] = '\n';
	str[give + 1] = '\0';
	return str;
}

/* A value as written after '=', without its comment: as git config
 * reads a value, a '#' or ';' after a blank starts a comment, which goes
 * with the blanks before it; inside '...' or "..." (where \" does not
 * close) and after a \ they are part of the value. Blanks around are
 * trimmed. */
static char *value_of(const char *s, size_t n)
{
	char q = 0;
	int blank = 1; /* right after the '=' counts as after a blank */

	while (n && (*s == ' ' || *s == '\t')) {
		s++;
		n--;
	}
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (q) {
			if (c == q)
				q = 0;
			else if (q == '"' && c == '\\' && i + 1 < n)
				i++;
		} else if ((c == '#' || c == ';') && blank) {
			n = i;
			break;
		} else if (c == '\'' || c == '"') {
			q = c;
		} else if (c == '\\' && i + 1 < n) {
			i++;
		}
		blank = !q && (c == ' ' || c == '\t');
	}
	return trimmed(s, n);
}

/* "NAME = hosts" in [pools]: checked like [remote] host; the project's
 * NAME replaces the user config's. */
static void define_pool(struct pctx *pc, const char *name, const char *val)
{
	struct priv *p = pc->cfg->origins;
	struct strbuf norm = STRBUF_INIT, why = STRBUF_INIT;
	struct pool *q = cfg_pool_find(p, name);
	const char *bad = cfgk_check_pool_name(name);

	if (bad) {
		perr(pc, "invalid pool name '%s': %s", name, bad);
	} else if (q && q->layer == pc->layer) {
		perr(pc, "duplicate pool '%s' in [pools] (already defined on line %d)", name, q->line);
		gr_hintf(&pc->err, "define each pool once, with all its hosts on one line");
	} else if (cfgk_normalize(cfg_key_at(cfgk_find_dotted("remote.host")), val, &norm, &why) < 0) {
		perr(pc, "invalid hosts '%s' for pool '%s': %s", val, name, why.buf);
	} else if (!norm.len) {
		perr(pc, "pool '%s' is empty", name);
		gr_hintf(&pc->err, "list its hosts: %s = box1 box2", name);
	} else {
		if (!q) {
			p->pools = xrealloc(p->pools, (p->npools + 1) * sizeof(*p->pools));
			q = &p->pools[p->npools++];
			q->name = xstrdup(name);
		} else {
			free(q->text);
			free(q->origin);
		}
		q->text = xstrdup(norm.buf);
		q->origin = xasprintf("%s:%d", pc->disp, pc->lineno);
		q->layer = pc->layer;
		q->line = pc->lineno;
	}
	sb_release(&norm);
	sb_release(&why);
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct pctx *pc = user;
	struct priv *p = pc->cfg->origins;
	struct strbuf norm = STRBUF_INIT, why = STRBUF_INIT, hint = STRBUF_INIT;
	const char *eq = memchr(pc->raw, '=', pc->rawlen);
	const char *colon = memchr(pc->raw, ':', pc->rawlen);
	char *key = NULL, *val = NULL, *origin = NULL;
	int i;

	(void)value;  /* ours comes from the whole line: inih truncates names, */
	/* and its inline comments (" ;" only, quotes or not, as it was built)
	 * are not git's: value_of strips ours. A build with
	 * INI_CALL_HANDLER_ON_NEW_SECTION calls us for headers too (name
	 * NULL): check_header has seen those. */
	if (!name || pc->err_line)
		return 1;
	if (!eq || (colon && colon < eq)) {
		perr(pc, "malformed line '%.*s': expected 'key = value'", (int)pc->rawlen, pc->raw);
		gr_hintf(&pc->err, "use '=' between a key and its value");
		return 1;
	}
	key = trimmed(pc->raw, (size_t)(eq - pc->raw));
	val = value_of(eq + 1, pc->rawlen - (size_t)(eq + 1 - pc->raw));
	if (!*key) {
		perr(pc, "malformed line '%.*s': no key before '='", (int)pc->rawlen, pc->raw);
		goto out;
	}
	if (!*section) {
		size_t n;
		const struct gr_config_key *k = config_keys(&n);

		perr(pc, "key '%s' is outside any section", key);
		for (size_t j = 0; j < n && !hint.len; j++)
			if (!strcmp(k[j].name, key))
				sb_addf(&hint, "put it under [%s]", k[j].section);
		gr_hintf(&pc->err, "%s",
			 hint.len ? hint.buf : "put it under a section header such as [remote]");
		goto out;
	}
	if (!strcmp(section, "pools")) {
		define_pool(pc, key, val);
		goto out;
	}
	if (!cfgk_section_known(section))
		goto out;   /* reported at the section header */
	if ((i = cfgk_find(section, key)) < 0) {
		perr(pc, "unknown key '%s' in [%s]", key, section);
		cfgk_hint_key(section, key, &hint);
		if (hint.len)
			gr_hintf(&pc->err, "%s", hint.buf);
		goto out;
	}
	if (pc->layer == LAYER_USER && cfg_key_at(i)->project_only) {
		perr(pc, "'%s' in [%s] names one project's own folder: it belongs in that project's "
		     "gpurun.ini, not in the user config", key, section);
		struct strbuf env = STRBUF_INIT;
		cfgk_env_name(cfg_key_at(i), &env);
		gr_hintf(&pc->err, "every project would share it; remove it here (%s or -o %s.%s "
			 "still set it for one command)", env.buf, section, key);
		sb_release(&env);
		goto out;
	}
	if (p->v[i].layer == pc->layer && cfg_key_at(i)->type != GR_KEY_LIST) {
		perr(pc, "duplicate key '%s' in [%s] (already set on line %d)", key, section,
		     p->v[i].line);
		gr_hintf(&pc->err, "a key may be set once; only list keys add up");
		goto out;
	}
	if (cfgk_normalize(cfg_key_at(i), val, &norm, &why) < 0) {
		perr(pc, "invalid value '%s' for '%s' in [%s]: %s", val, key, section, why.buf);
		goto out;
	}
	origin = xasprintf("%s:%d", pc->disp, pc->lineno);
	cfg_store(p, i, norm.buf, pc->layer, origin, pc->lineno);
out:
	free(key);
	free(val);
	free(origin);
	sb_release(&norm);
	sb_release(&why);
	sb_release(&hint);
	return 1;
}

int cfg_load_file(struct gr_config *c, const char *path, const char *disp, int layer,
		  struct gr_err *err)
{
	struct strbuf buf = STRBUF_INIT;
	struct pctx pc;
	int r, rc = 0;

	if (read_file(path, &buf, err) < 0) {
		err->code = GR_ECONFIG;
		return GR_ECONFIG;
	}
	memset(&pc, 0, sizeof(pc));
	pc.cfg = c;
	pc.disp = disp;
	pc.layer = layer;
	pc.buf = buf.buf ? buf.buf : "";
	pc.len = buf.len;
	r = ini_parse_stream(reader, &pc, handler, &pc);
	if (r < 0) {
		rc = gr_errf(err, GR_ECONFIG, "cannot parse '%s': out of memory", disp);
	} else if (r > 0 && (!pc.err_line || r < pc.err_line)) {
		/* a line inih could not read: find it again for the message */
		const char *s = pc.buf, *end = pc.buf + pc.len, *nl;
		for (int l = 1; l < r && s < end; l++)
			s = (nl = memchr(s, '\n', (size_t)(end - s))) ? nl + 1 : end;
		s += strspn(s, " \t");
		nl = memchr(s, '\n', (size_t)(end - s));
		size_t n = (size_t)((nl ? nl : end) - s);
		if (n && s[n - 1] == '\r')
			n--;
		rc = gr_errf(err, GR_ECONFIG,
			     "%s:%d: malformed line '%.*s': expected '[section]' or 'key = value'",
			     disp, r, (int)(n > 80 ? 80 : n), s);
		gr_hintf(err, "%s", *s == '[' ? "a section header looks like [remote]"
				: "comments start with '#' or ';' (after a value: with a blank before)");
	} else if (pc.err_line) {
		*err = pc.err;
		rc = GR_ECONFIG;
	}
	sb_release(&buf);
	return rc;
}
