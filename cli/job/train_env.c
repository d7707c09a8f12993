/* train's --env NAME (the value from this environment, as docker run -e
 * NAME) and --env-file FILE (dotenv lines), see train_spec.h. The values
 * these give are secrets (API tokens, keys): they go into the job's spec
 * and nowhere else that gpurun shows or the host lets others read. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train_spec.h"

/* An env file bigger than this is not an env file. */
#define ENV_FILE_MAX (1u << 20)

static int name_ok(const char *s, size_t n)
{
	if (!n || isdigit((unsigned char)s[0]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '_')
			return 0;
	return 1;
}

/* NAME=<NAME's value here> onto env; GR_EUSAGE when NAME is unset. */
static int copy_local(const char *name, size_t n, struct strvec *env, const char *where,
		      struct gr_err *err)
{
	char *nm = xstrndup(name, n);
	const char *v = getenv(nm);
	int rc = 0;

	if (!v) {
		rc = gr_errf(err, GR_EUSAGE, "%s: %s is not set in this environment", where, nm);
		gr_hintf(err, "export %s first, or give its value: NAME=VALUE", nm);
	} else {
		sv_pushf(env, "%s=%s", nm, v);
	}
	free(nm);
	return rc;
}

int train_env_arg(const char *word, struct strvec *env, struct gr_err *err)
{
	struct strbuf why = STRBUF_INIT;
	int rc = 0;

	if (!strchr(word, '=')) {
		if (!name_ok(word, strlen(word))) {
			rc = gr_errf(err, GR_EUSAGE, "--env '%s' is not a variable name (letters, "
				     "digits, _; not a digit first)", word);
			gr_hintf(err, "write --env NAME=VALUE, or --env NAME to pass NAME's value from here");
			return rc;
		}
		return copy_local(word, strlen(word), env, "--env", err);
	}
	if (config_env_word_ok(word, &why) < 0) {
		rc = gr_errf(err, GR_EUSAGE, "--env %s", why.buf);
		gr_hintf(err, "write --env NAME=VALUE, or --env NAME to pass NAME's value from here");
	} else {
		sv_push(env, word);
	}
	sb_release(&why);
	return rc;
}

/* ---- dotenv ---- */

struct envp {
	const char *file, *p, *end;
	unsigned line;       /* of p */
	struct gr_err *err;
};

static int bad(struct envp *e, unsigned line, const char *what)
{
	gr_errf(e->err, GR_EUSAGE, "%s:%u: %s", e->file, line, what);
	gr_hintf(e->err, "each line: NAME=VALUE, 'VALUE' or \"VALUE\" (export and # comments "
		 "allowed)");
	return GR_EUSAGE;
}

static void skip_blank(struct envp *e)
{
	while (e->p < e->end && (*e->p == ' ' || *e->p == '\t'))
		e->p++;
}

/* To the start of the next line. */
static void skip_line(struct envp *e)
{
	while (e->p < e->end && *e->p != '\n')
		e->p++;
	if (e->p < e->end) {
		e->p++;
		e->line++;
	}
}

static int at_eol(const struct envp *e)
{
	return e->p == e->end || *e->p == '\n' || (*e->p == '\r' && (e->p + 1 == e->end ||
								     e->p[1] == '\n'));
}

/* After a closing quote: blanks, then the end of the line or a comment. */
static int after_quote(struct envp *e, unsigned line)
{
	skip_blank(e);
	if (!at_eol(e) && *e->p != '#')
		return bad(e, line, "text after the closing quote");
	skip_line(e);
	return 0;
}

/* 'VALUE': every byte as it is, lines too, up to the next '. */
static int single_quoted(struct envp *e, struct strbuf *v)
{
	unsigned line = e->line;

	for (e->p++; e->p < e->end && *e->p != '\''; e->p++) {
		if (*e->p == '\n')
			e->line++;
		sb_add(v, e->p, 1);
	}
	if (e->p == e->end)
		return bad(e, line, "a ' is not closed");
	e->p++;
	return after_quote(e, line);
}

/* "VALUE": lines too, and dotenv's escapes: \n \r \t \\ \" \' \$; any
 * other backslash stays as it is. No ${VAR} expansion: the value is what
 * the file says. */
static int double_quoted(struct envp *e, struct strbuf *v)
{
	unsigned line = e->line;

	for (e->p++; e->p < e->end && *e->p != '"'; e->p++) {
		char c = *e->p;
		if (c == '\\' && e->p + 1 < e->end) {
			static const char from[] = "nrt\\\"'$", to[] = "\n\r\t\\\"'$";
			const char *esc = e->p[1] ? strchr(from, e->p[1]) : NULL;
			if (esc) {
				sb_add(v, &to[esc - from], 1);
				e->p++;
				continue;
			}
		}
		if (c == '\n')
			e->line++;
		sb_add(v, &c, 1);
	}
	if (e->p == e->end)
		return bad(e, line, "a \" is not closed");
	e->p++;
	return after_quote(e, line);
}

/* VALUE: to the end of the line, less a comment (a # after a blank)
 * and the blanks around it. */
static void unquoted(struct envp *e, struct strbuf *v)
{
	const char *s = e->p;

	while (!at_eol(e) && !(*e->p == '#' && e->p > s && (e->p[-1] == ' ' || e->p[-1] == '\t')))
		e->p++;
	const char *t = e->p;
	while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
		t--;
	sb_add(v, s, (size_t)(t - s));
	skip_line(e);
}

int train_env_parse(const char *file, const char *text, size_t len, struct strvec *env,
		    struct gr_err *err)
{
	struct envp e = { file, text, text + len, 1, err };
	struct strbuf v = STRBUF_INIT;
	const char *nul = memchr(text, '\0', len);
	int rc = 0;

	if (nul) {
		unsigned line = 1;
		for (const char *p = text; p < nul; p++)
			line += *p == '\n';
		return bad(&e, line, "a NUL byte: not a text file");
	}
	while (rc == 0 && e.p < e.end) {
		unsigned line = e.line;
		skip_blank(&e);
		if (at_eol(&e) || *e.p == '#') {
			skip_line(&e);
			continue;
		}
		if (e.end - e.p > 7 && !strncmp(e.p, "export", 6) && (e.p[6] == ' ' || e.p[6] == '\t')) {
			e.p += 7;
			skip_blank(&e);
		}
		const char *name = e.p;
		while (e.p < e.end && (isalnum((unsigned char)*e.p) || *e.p == '_'))
			e.p++;
		size_t nlen = (size_t)(e.p - name);
		skip_blank(&e);
		if (!name_ok(name, nlen) || (!at_eol(&e) && *e.p != '=' && *e.p != '#')) {
			rc = bad(&e, line, "not NAME=VALUE (NAME: letters, digits, _; not a digit "
				 "first)");
			break;
		}
		if (*e.p != '=') { /* NAME alone: its value here, as docker's --env-file */
			char where[64];
			snprintf(where, sizeof(where), "%s:%u", file, line);
			if ((rc = copy_local(name, nlen, env, where, err)) < 0) {
				/* the message names the file; the hint is copy_local's */
				break;
			}
			skip_line(&e);
			continue;
		}
		e.p++;
		skip_blank(&e);
		sb_reset(&v);
		if (e.p < e.end && *e.p == '\'')
			rc = single_quoted(&e, &v);
		else if (e.p < e.end && *e.p == '"')
			rc = double_quoted(&e, &v);
		else
			unquoted(&e, &v);
		if (rc == 0)
			sv_pushf(env, "%.*s=%s", (int)nlen, name, v.buf ? v.buf : "");
	}
	sb_release(&v);
	return rc;
}

int train_env_file(const char *path, struct strvec *env, struct gr_err *err)
{
	struct strbuf sb = STRBUF_INIT;
	char buf[65536];
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	ssize_t n;

	if (fd < 0) {
		rc = gr_errf(err, GR_EUSAGE, "--env-file: cannot open '%s': %s", path, strerror(errno));
		return rc;
	}
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = gr_errf(err, GR_EUSAGE, "--env-file: cannot read '%s': %s", path,
				     strerror(errno));
			break;
		}
		if (sb.len + (size_t)n > ENV_FILE_MAX) {
			rc = gr_errf(err, GR_EUSAGE, "--env-file: '%s' is larger than %u KiB: not an "
				     "env file", path, ENV_FILE_MAX >> 10);
			break;
		}
		sb_add(&sb, buf, (size_t)n);
	}
	close(fd);
	if (rc == 0)
		rc = train_env_parse(path, sb.buf ? sb.buf : "", sb.len, env, err);
	/* What the file held is a secret: not left in freed memory. */
	if (sb.buf)
		explicit_bzero(sb.buf, sb.len);
	explicit_bzero(buf, sizeof(buf));
	sb_release(&sb);
	return rc;
}
