/* git's wildmatch semantics, written for gpurun so the ignore rules hold
 * without git. Every quirk is deliberate and checked against git itself
 * (tests/unit/test_ignore.c): character classes are ASCII only and locale
 * independent, an unterminated '[' makes the whole pattern fail, '**' is
 * special only as a whole path component, and under WM_CASEFOLD only the
 * text and the plain pattern characters are folded (not class members). */
#include <stdlib.h>
#include <string.h>

#include "wildmatch.h"

typedef unsigned char uchar;

/* Backtracking over several stars is exponential in the worst case (a
 * hostile .gitignore such as "*a*a*a*...b" could hang a sync). A call's
 * result depends only on where it starts in the pattern and the text, so
 * once a match has made many calls, results are remembered in a table:
 * every (pattern, text) position pair is then solved at most once. */
struct wm {
	const uchar *p0, *t0;
	size_t plen, tlen;
	unsigned long calls;
	uchar *memo; /* (plen+1) x (tlen+1) results + 3; 0 = not known */
	int no_memo; /* table would be too large */
};

#define WM_MEMO_AFTER 512
#define WM_MEMO_MAX (8u << 20)

static int wm_upper(uchar c) { return c >= 'A' && c <= 'Z'; }
static int wm_lower(uchar c) { return c >= 'a' && c <= 'z'; }
static int wm_alpha(uchar c) { return wm_upper(c) || wm_lower(c); }
static int wm_digit(uchar c) { return c >= '0' && c <= '9'; }
static uchar wm_fold(uchar c) { return wm_upper(c) ? (uchar)(c + 32) : c; }
static uchar wm_unfold(uchar c) { return wm_lower(c) ? (uchar)(c - 32) : c; }

/* The characters that stop a literal run: git's glob specials. */
static int wm_special(uchar c)
{
	return c == '*' || c == '?' || c == '[' || c == '\\';
}

/* POSIX class named by name[0..len) against c; -1 for an unknown name.
 * git uses its own ASCII table: space is only " \t\n\r", cntrl is
 * 0x00-0x1f and 0x7f, punct is every printable that is not alnum. */
static int wm_class(const uchar *name, int len, uchar c, unsigned flags)
{
	static const char *const names[] = {
		"alnum", "alpha", "blank", "cntrl", "digit", "graph",
		"lower", "print", "punct", "space", "upper", "xdigit",
	};
	int which = -1;

	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if ((int)strlen(names[i]) == len && !memcmp(name, names[i], (size_t)len)) {
			which = i;
			break;
		}
	switch (which) {
	case 0: return wm_alpha(c) || wm_digit(c);
	case 1: return wm_alpha(c);
	case 2: return c == ' ' || c == '\t';
	case 3: return c < 0x20 || c == 0x7f;
	case 4: return wm_digit(c);
	case 5: return c > 0x20 && c < 0x7f;
	case 6: return wm_lower(c);
	case 7: return c >= 0x20 && c < 0x7f;
	case 8: return c > 0x20 && c < 0x7f && !wm_alpha(c) && !wm_digit(c);
	case 9: return c == ' ' || c == '\t' || c == '\n' || c == '\r';
	case 10: return wm_upper(c) || ((flags & WM_CASEFOLD) && wm_lower(c));
	case 11: return wm_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
	default: return -1;
	}
}

/* A bracket expression starting just after '['. On return *pp points at its
 * closing ']'. Returns 1 if t is in the set (after negation), 0 if not,
 * WM_ABORT_ALL when the expression is malformed. */
static int wm_bracket(const uchar **pp, uchar t, unsigned flags)
{
	const uchar *p = *pp;
	uchar c = *p, prev = 0;
	int negated = 0, in = 0;

	if (c == '!' || c == '^') {
		negated = 1;
		c = *++p;
	}
	/* The first member is taken literally even when it is ']'. */
	for (;;) {
		if (!c)
			return WM_ABORT_ALL;
		if (c == '\\') {
			c = *++p;
			if (!c)
				return WM_ABORT_ALL;
			if (t == c)
				in = 1;
		} else if (c == '-' && prev && p[1] && p[1] != ']') {
			uchar hi = *++p;

			if (hi == '\\') {
				hi = *++p;
				if (!hi)
					return WM_ABORT_ALL;
			}
			if (t >= prev && t <= hi)
				in = 1;
			else if ((flags & WM_CASEFOLD) && wm_lower(t) &&
				 wm_unfold(t) >= prev && wm_unfold(t) <= hi)
				in = 1;
			c = 0; /* a range cannot start a range */
		} else if (c == '[' && p[1] == ':') {
			const uchar *name = p + 2, *q = name;
			int len, r;

			while (*q && *q != ']')
				q++;
			if (!*q)
				return WM_ABORT_ALL;
			len = (int)(q - name) - 1;
			if (len < 0 || q[-1] != ':') {
				/* No ":]": the '[' is an ordinary member. */
				if (t == '[')
					in = 1;
				/* c stays '[' so it may start a range */
			} else {
				r = wm_class(name, len, t, flags);
				if (r < 0)
					return WM_ABORT_ALL;
				if (r)
					in = 1;
				p = q;
				c = 0;
			}
		} else if (t == c) {
			in = 1;
		}
		prev = c;
		c = *++p;
		if (c == ']')
			break;
	}
	*pp = p;
	return in != negated;
}

static int wm_run(struct wm *w, const uchar *p, const uchar *text, unsigned flags);

static int wm_call(struct wm *w, const uchar *p, const uchar *text, unsigned flags)
{
	size_t at;
	int r;

	if (!w->memo && !w->no_memo && ++w->calls > WM_MEMO_AFTER) {
		if (w->plen + 1 > WM_MEMO_MAX / (w->tlen + 1) ||
		    !(w->memo = calloc((w->plen + 1) * (w->tlen + 1), 1)))
			w->no_memo = 1;
	}
	if (!w->memo)
		return wm_run(w, p, text, flags);
	at = (size_t)(p - w->p0) * (w->tlen + 1) + (size_t)(text - w->t0);
	if (w->memo[at])
		return w->memo[at] - 3;
	r = wm_run(w, p, text, flags);
	w->memo[at] = (uchar)(r + 3);
	return r;
}

static int wm_run(struct wm *w, const uchar *p, const uchar *text, unsigned flags)
{
	const uchar *start = p;

	for (; *p; text++, p++) {
		uchar pc = *p, tc = *text;
		int match_slash, r;

		if (!tc && pc != '*')
			return WM_ABORT_ALL;
		if (flags & WM_CASEFOLD) {
			tc = wm_fold(tc);
			pc = wm_fold(pc);
		}
		switch (pc) {
		case '\\':
			/* The escaped character is compared unfolded, as git does;
			 * a trailing backslash matches nothing. */
			pc = *++p;
			if (tc != pc)
				return WM_NOMATCH;
			continue;
		case '?':
			if ((flags & WM_PATHNAME) && tc == '/')
				return WM_NOMATCH;
			continue;
		case '[':
			p++;
			r = wm_bracket(&p, tc, flags);
			if (r == WM_ABORT_ALL)
				return r;
			if (!r || ((flags & WM_PATHNAME) && tc == '/'))
				return WM_NOMATCH;
			continue;
		case '*':
			break;
		default:
			if (tc != pc)
				return WM_NOMATCH;
			continue;
		}

		/* One or more stars. */
		if (p[1] == '*') {
			int at_component = p == start || p[-1] == '/';

			while (*++p == '*')
				;
			if (!(flags & WM_PATHNAME)) {
				match_slash = 1;
			} else if (at_component &&
				   (!*p || *p == '/' || (p[0] == '\\' && p[1] == '/'))) {
				/* "**" + "/" may match no folder at all. */
				if (*p == '/' && wm_call(w, p + 1, text, flags) == WM_MATCH)
					return WM_MATCH;
				match_slash = 1;
			} else {
				match_slash = 0;
			}
		} else {
			p++;
			match_slash = !(flags & WM_PATHNAME);
		}

		if (!*p) {
			if (!match_slash && strchr((const char *)text, '/'))
				return WM_NOMATCH;
			return WM_MATCH;
		}
		if (!match_slash && *p == '/') {
			/* "*" then "/": the star takes the rest of this component. */
			const char *slash = strchr((const char *)text, '/');

			if (!slash)
				return WM_NOMATCH;
			text = (const uchar *)slash;
			continue; /* the loop steps over both slashes */
		}
		for (;;) {
			if (!tc)
				return WM_ABORT_ALL;
			if (!wm_special(*p)) {
				/* Skip ahead to the next place the literal can match. */
				uchar want = *p;

				if (flags & WM_CASEFOLD)
					want = wm_fold(want);
				while ((tc = *text) && (match_slash || tc != '/')) {
					if (flags & WM_CASEFOLD)
						tc = wm_fold(tc);
					if (tc == want)
						break;
					text++;
				}
				if (tc != want)
					return WM_NOMATCH;
			}
			r = wm_call(w, p, text, flags);
			if (r != WM_NOMATCH) {
				if (!match_slash || r != WM_ABORT_TO_STARSTAR)
					return r;
			} else if (!match_slash && tc == '/') {
				return WM_ABORT_TO_STARSTAR;
			}
			tc = *++text;
		}
	}
	return *text ? WM_NOMATCH : WM_MATCH;
}

int wildmatch(const char *pattern, const char *text, unsigned flags)
{
	struct wm w = { (const uchar *)pattern, (const uchar *)text,
			strlen(pattern), strlen(text), 0, NULL, 0 };
	int r = wm_run(&w, w.p0, w.t0, flags);

	free(w.memo);
	return r;
}
