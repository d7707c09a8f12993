/* Glob matching for [artifacts] pull (see job_glob.h). */
#include <fnmatch.h>
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

static int is_dstar(const char *p)
{
	return seg_len(p) == 2 && p[0] == '*' && p[1] == '*';
}

static int all_dstar(const char *p)
{
	for (; *p; p = seg_next(p))
		if (!is_dstar(p))
			return 0;
	return 1;
}

/* p and s are the remaining '/'-separated segments of pattern and path.
 * prefix_ok: a path that runs out first still matches (may_descend). */
static int match(const char *p, const char *s, int prefix_ok)
{
	char pseg[1024], sseg[1024];
	size_t pl, sl;

	if (!*p)
		return !*s;
	if (!*s)
		return prefix_ok || all_dstar(p);
	if (is_dstar(p))
		return match(seg_next(p), s, prefix_ok) || match(p, seg_next(s), prefix_ok);
	pl = seg_len(p);
	sl = seg_len(s);
	if (pl >= sizeof(pseg) || sl >= sizeof(sseg))
		return 0;
	memcpy(pseg, p, pl);
	pseg[pl] = '\0';
	memcpy(sseg, s, sl);
	sseg[sl] = '\0';
	if (fnmatch(pseg, sseg, FNM_PERIOD) != 0)
		return 0;
	return match(seg_next(p), seg_next(s), prefix_ok);
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
