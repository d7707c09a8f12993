/* Glob matching for [artifacts] pull (see job_glob.h). */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "job_glob.h"

static size_t seg_len(const char *s)
{
	const char *e = strchr(s, '/');
	return e ? (size_t)(e - s) : strlen(s);
}

static const char *seg_next(const char *s)
{
	const char *e = strchr(s, '/');
	return e ? e + 1 : s + strlen(s);
}

/* The segments of a pattern or a path: where each starts, how long. */
struct segs {
	const char **at;
	size_t *len, n;
};

static void segs_split(const char *s, struct segs *g)
{
	size_t n = 0;

	for (const char *q = s; *q; q = seg_next(q))
		n++;
	g->at = xcalloc(n + 1, sizeof(*g->at));
	g->len = xcalloc(n + 1, sizeof(*g->len));
	g->n = 0;
	for (const char *q = s; *q; q = seg_next(q)) {
		g->at[g->n] = q;
		g->len[g->n++] = seg_len(q);
	}
}

static void segs_free(struct segs *g)
{
	free(g->at);
	free(g->len);
}

unsigned long job_glob_steps;

/* Pattern segments from i on against path segments from j on. Each
 * (i, j) is decided once and remembered (memo: 0 unknown, 1 no, 2 yes),
 * so `**` costs at most one step per pair: a pattern of P segments
 * against a path of S takes at most (P+1)(S+1) steps, where trying
 * every way to split the path among the `**`s took C(S+k, k) for k of
 * them (seconds a file for six `**` segments and a path 60 deep).
 * prefix_ok: a path that runs out first still matches (may_descend). */
struct glob_m {
	struct segs p, s;
	int prefix_ok;
	unsigned char *memo;
};

static int seg_is_dstar(const struct segs *g, size_t i)
{
	return g->len[i] == 2 && g->at[i][0] == '*' && g->at[i][1] == '*';
}

static int m_at(struct glob_m *m, size_t i, size_t j)
{
	unsigned char *c = &m->memo[i * (m->s.n + 1) + j];
	char pseg[1024], sseg[1024];
	int r;

	if (*c)
		return *c - 1;
	job_glob_steps++;
	if (i == m->p.n) {
		r = j == m->s.n;
	} else if (j == m->s.n) {
		r = m->prefix_ok;
		for (size_t k = i; !r && k < m->p.n && seg_is_dstar(&m->p, k); k++)
			r = k + 1 == m->p.n;
	} else if (seg_is_dstar(&m->p, i)) {
		r = m_at(m, i + 1, j) || m_at(m, i, j + 1);
	} else if (m->p.len[i] >= sizeof(pseg) || m->s.len[j] >= sizeof(sseg)) {
		r = 0;
	} else {
		memcpy(pseg, m->p.at[i], m->p.len[i]);
		pseg[m->p.len[i]] = '\0';
		memcpy(sseg, m->s.at[j], m->s.len[j]);
		sseg[m->s.len[j]] = '\0';
		r = fnmatch(pseg, sseg, FNM_PERIOD) == 0 && m_at(m, i + 1, j + 1);
	}
	*c = (unsigned char)(r + 1);
	return r;
}

static int match(const char *p, const char *s, int prefix_ok)
{
	struct glob_m m = { .prefix_ok = prefix_ok };
	int r;

	segs_split(p, &m.p);
	segs_split(s, &m.s);
	m.memo = xcalloc((m.p.n + 1) * (m.s.n + 1), 1);
	r = m_at(&m, 0, 0);
	free(m.memo);
	segs_free(&m.p);
	segs_free(&m.s);
	return r;
}

static const char *skip_dot_slash(const char *p)
{
	while (p[0] == '.' && p[1] == '/')
		p += 2;
	return p;
}

int job_glob_match(const char *pat, const char *path)
{
	pat = skip_dot_slash(pat);
	if (!*pat || !*path)
		return 0;
	return match(pat, path, 0);
}

int job_glob_may_descend(const char *pat, const char *dir)
{
	pat = skip_dot_slash(pat);
	if (!*pat || !*dir)
		return 0;
	return match(pat, dir, 1);
}

/* ---- persistent paths ---- */

/* The entry without its trailing '/'s. */
static size_t persist_len(const char *e)
{
	size_t n = strlen(e);
	while (n && e[n - 1] == '/')
		n--;
	return n;
}

int job_persist_ok(const char *entry)
{
	size_t n = persist_len(entry);

	if (!n || entry[0] == '/')
		return 0;
	for (size_t i = 0; i < n;) {
		size_t c = i;
		while (c < n && entry[c] != '/')
			c++;
		size_t len = c - i;
		if (!len || (len == 1 && entry[i] == '.') ||
		    (len == 2 && entry[i] == '.' && entry[i + 1] == '.') ||
		    (i == 0 && len == 7 && !memcmp(entry, ".gpurun", 7)))
			return 0;
		i = c + 1;
	}
	return 1;
}

int job_persist_is(const struct strvec *persist, const char *rel)
{
	for (size_t i = 0; persist && i < persist->n; i++) {
		size_t n = persist_len(persist->v[i]);
		if (n && strlen(rel) == n && !memcmp(rel, persist->v[i], n))
			return 1;
	}
	return 0;
}
