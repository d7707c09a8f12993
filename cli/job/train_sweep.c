/* train --sweep / --sweep-file (see train_spec.h): the list of jobs a
 * sweep makes, each one's variable assignments, and the {NAME} words of
 * its argv. Everything is checked here, before anything is synced or
 * started, so that bad input starts nothing. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train_spec.h"

#define SWEEP_FILE_MAX (1024 * 1024)

void train_sweep_free(struct train_sweep *s)
{
	for (size_t i = 0; i < s->n; i++)
		sv_clear(&s->v[i]);
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

/* The length of NAME in "NAME=..." (0: none). */
static size_t var_len(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq ? (size_t)(eq - kv) : 0;
}

static int has_var(const struct strvec *vars, const char *name, size_t n)
{
	for (size_t i = 0; i < vars->n; i++)
		if (var_len(vars->v[i]) == n && !strncmp(vars->v[i], name, n))
			return 1;
	return 0;
}

/* One NAME=VALUE of a sweep: a variable name, a value that is not empty
 * and holds no control character (a tab neither: it would break the
 * one-line listing). what says where it came from. */
static int word_check(const char *kv, const char *what, struct gr_err *err)
{
	struct strbuf why = STRBUF_INIT;
	int rc = 0;

	if (config_env_word_ok(kv, &why) < 0)
		rc = gr_errf(err, GR_EUSAGE, "%s: %s", what, why.buf);
	else if (!strchr(kv, '=')[1])
		rc = gr_errf(err, GR_EUSAGE, "%s: %.*s has an empty value", what, (int)var_len(kv), kv);
	else if (strchr(kv, '\t'))
		rc = gr_errf(err, GR_EUSAGE, "%s: the value of %.*s holds a control character", what,
			     (int)var_len(kv), kv);
	sb_release(&why);
	return rc;
}

/* Every job of s times every value of one --sweep NAME=V1,V2: s grows to
 * s->n * nvalues jobs (checked against the cap before). */
static int product(struct train_sweep *s, const char *flag, struct gr_err *err)
{
	const char *eq = strchr(flag, '=');
	size_t nl = eq ? (size_t)(eq - flag) : 0, nv = 1;
	struct strvec values = STRVEC_INIT;
	int rc = 0;

	if (!eq || !nl) {
		rc = gr_errf(err, GR_EUSAGE, "--sweep '%s' is not NAME=V1,V2,...", flag);
		gr_hintf(err, "e.g. --sweep lr=1e-3,3e-4 --sweep bs=32,64 (4 jobs)");
		return rc;
	}
	for (const char *p = eq + 1; *p; p++)
		nv += *p == ',';
	for (const char *p = eq + 1;; ) {
		size_t l = strcspn(p, ",");
		char *kv = xasprintf("%.*s=%.*s", (int)nl, flag, (int)l, p);
		sv_push(&values, kv);
		if ((rc = word_check(kv, "--sweep", err)) < 0) {
			free(kv);
			goto out;
		}
		free(kv);
		if (!p[l])
			break;
		p += l + 1;
	}
	for (size_t i = 0; i < s->n; i++)
		if (has_var(&s->v[i], flag, nl)) {
			rc = gr_errf(err, GR_EUSAGE, "--sweep: %.*s is swept twice", (int)nl, flag);
			goto out;
		}
	if (s->n * nv > TRAIN_SWEEP_MAX) {
		rc = gr_errf(err, GR_EUSAGE, "the sweep makes %zu jobs or more; at most %d are allowed",
			     s->n * nv, TRAIN_SWEEP_MAX);
		gr_hintf(err, "sweep fewer values, or split it into several sweeps");
		goto out;
	}
	struct strvec *v = xcalloc(s->n * nv, sizeof(*v));
	for (size_t i = 0; i < s->n; i++)
		for (size_t j = 0; j < nv; j++) {
			struct strvec *d = &v[i * nv + j];
			for (size_t k = 0; k < s->v[i].n; k++)
				sv_push(d, s->v[i].v[k]);
			sv_push(d, values.v[j]);
		}
	size_t n = s->n * nv;
	train_sweep_free(s);
	s->v = v;
	s->n = n;
out:
	sv_clear(&values);
	return rc;
}

/* --sweep-file: one job a line, its K=V words quoted as in [train] env;
 * blank lines and lines starting with '#' are skipped. */
static int from_file(struct train_sweep *s, const char *path, struct gr_err *err)
{
	struct strbuf text = STRBUF_INIT, why = STRBUF_INIT;
	struct gr_err ferr = { 0 };
	int rc = 0, line = 0;

	if (read_file(path, &text, &ferr) < 0) {
		rc = gr_errf(err, GR_EUSAGE, "--sweep-file: %s", ferr.msg);
		goto out;
	}
	if (text.len > SWEEP_FILE_MAX || (text.len && memchr(text.buf, '\0', text.len))) {
		rc = gr_errf(err, GR_EUSAGE, "--sweep-file '%s' is not a text file of at most 1 MiB",
			     path);
		goto out;
	}
	for (char *p = text.buf; p && *p && rc == 0; line++) {
		char *nl = strchr(p, '\n'), *next = nl ? nl + 1 : NULL;
		struct strvec words = STRVEC_INIT;
		if (nl)
			*nl = '\0';
		if (nl > p && nl[-1] == '\r')
			nl[-1] = '\0';
		p += strspn(p, " \t");
		if (!*p || *p == '#') {
			p = next;
			continue;
		}
		sb_reset(&why);
		if (config_env_parse(p, &words, &why) < 0) {
			rc = gr_errf(err, GR_EUSAGE, "%s:%d: %s", path, line + 1, why.buf);
			gr_hintf(err, "write each job as NAME=VALUE words on one line, "
				 "quoted as in [train] env");
		}
		for (size_t i = 0; rc == 0 && i < words.n; i++) {
			char *what = xasprintf("%s:%d", path, line + 1);
			struct strvec before = { words.v, i, 0 };
			rc = word_check(words.v[i], what, err);
			if (rc == 0 && has_var(&before, words.v[i], var_len(words.v[i])))
				rc = gr_errf(err, GR_EUSAGE, "%s: %.*s is set twice", what,
					     (int)var_len(words.v[i]), words.v[i]);
			free(what);
		}
		if (rc == 0 && s->n >= TRAIN_SWEEP_MAX) {
			rc = gr_errf(err, GR_EUSAGE, "--sweep-file '%s' makes more than %d jobs", path,
				     TRAIN_SWEEP_MAX);
			gr_hintf(err, "split it into several sweeps");
		}
		if (rc == 0) {
			s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
			s->v[s->n++] = words;
		} else {
			sv_clear(&words);
		}
		p = next;
	}
	if (rc == 0 && !s->n)
		rc = gr_errf(err, GR_EUSAGE, "--sweep-file '%s' names no job", path);
out:
	sb_release(&text);
	sb_release(&why);
	return rc;
}

int train_sweep_build(const struct strvec *flags, const char *file, struct train_sweep *s,
		      struct gr_err *err)
{
	int rc = 0;

	*s = (struct train_sweep){ 0 };
	if (!flags->n && !file)
		return 0;
	if (file)
		rc = from_file(s, file, err);
	else {
		s->v = xcalloc(1, sizeof(*s->v)); /* one job with nothing set, to multiply */
		s->n = 1;
	}
	for (size_t i = 0; rc == 0 && i < flags->n; i++)
		rc = product(s, flags->v[i], err);
	if (rc < 0)
		train_sweep_free(s);
	return rc;
}

char *train_sweep_subst(const char *word, const struct strvec *vars)
{
	struct strbuf sb = STRBUF_INIT;

	for (const char *p = word; *p;) {
		const char *close = *p == '{' ? strchr(p + 1, '}') : NULL;
		size_t n = close ? (size_t)(close - p - 1) : 0;
		size_t i = 0;
		for (; close && n && i < vars->n; i++)
			if (var_len(vars->v[i]) == n && !strncmp(vars->v[i], p + 1, n))
				break;
		if (close && n && i < vars->n) {
			sb_adds(&sb, vars->v[i] + n + 1);
			p = close + 1;
		} else {
			sb_add(&sb, p, 1);
			p++;
		}
	}
	return sb.buf ? sb_detach(&sb, NULL) : xstrdup("");
}
