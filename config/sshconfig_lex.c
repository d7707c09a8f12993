/* The lexical side of OpenSSH 9.2's ssh_config, reimplemented so that
 * gpurun tokenises, matches and expands exactly as `ssh -G` does: quoting
 * quirks included, because a config that ssh reads one way must not mean
 * something else to gpurun. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sshconfig_int.h"

void sshc_lowercase(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

char *sshc_strdelim(char **s, int split_equals)
{
	const char *delims = split_equals ? SSHC_WS "\"=" : SSHC_WS "\"";
	char *old, *p;
	int saw_equals = 0;

	if (!*s)
		return NULL;
	old = *s;
	p = strpbrk(old, delims);
	if (!p) {
		*s = NULL;
		return old;
	}
	if (*p == '"') {
		/* Drop the opening quote and end the token at the closing one. */
		memmove(p, p + 1, strlen(p));
		p = strchr(p, '"');
		if (!p) {
			*s = NULL;
			return NULL;
		}
		*p = '\0';
		*s = p + strspn(p + 1, SSHC_WS) + 1;
		return old;
	}
	if (split_equals && *p == '=')
		saw_equals = 1;
	*p = '\0';
	p += strspn(p + 1, SSHC_WS) + 1;
	/* Allow exactly one '=' between keyword and value. */
	if (split_equals && *p == '=' && !saw_equals)
		p += strspn(p + 1, SSHC_WS) + 1;
	*s = p;
	return old;
}

int sshc_argv_split(const char *s, struct strvec *out)
{
	size_t i = 0, n = strlen(s);
	struct strbuf w = STRBUF_INIT;

	while (i < n) {
		char quote = 0;

		if (s[i] == ' ' || s[i] == '\t') {
			i++;
			continue;
		}
		if (s[i] == '#')
			break;
		sb_reset(&w);
		sb_add(&w, "", 0);   /* an empty word ("") is still a word */
		for (; i < n; i++) {
			char c = s[i];
			if (c == '\\' && (s[i + 1] == '\'' || s[i + 1] == '"' || s[i + 1] == '\\' ||
					  (!quote && s[i + 1] == ' '))) {
				sb_add(&w, &s[++i], 1);
			} else if (!quote && (c == ' ' || c == '\t')) {
				break;
			} else if (!quote && (c == '"' || c == '\'')) {
				quote = c;
			} else if (quote && c == quote) {
				quote = 0;
			} else {
				sb_add(&w, &c, 1);
			}
		}
		if (quote) {
			sb_release(&w);
			return -1;
		}
		sv_push(out, w.buf);
	}
	sb_release(&w);
	return 0;
}

/* Iterative wildcard match: on a mismatch, retry from the last '*' one
 * character further on. Same results as ssh's recursive match_pattern,
 * without its exponential worst case. */
int sshc_match_pattern(const char *s, const char *p)
{
	const char *star = NULL, *resume = NULL;

	while (*s) {
		if (*p == '*') {
			while (*p == '*')
				p++;
			if (!*p)
				return 1;
			star = p;
			resume = s;
		} else if (*p && (*p == '?' || *p == *s)) {
			p++;
			s++;
		} else if (star) {
			p = star;
			s = ++resume;
		} else {
			return 0;
		}
	}
	while (*p == '*')
		p++;
	return !*p;
}

int sshc_match_pattern_list(const char *s, const char *list, int dolower)
{
	int positive = 0;
	const char *p = list;

	while (*p) {
		int negated = 0;
		const char *end;
		char *sub;

		if (*p == '!') {
			negated = 1;
			p++;
		}
		end = strchr(p, ',');
		if (!end)
			end = p + strlen(p);
		if (end - p >= 1023)    /* ssh gives up on overlong entries */
			return 0;
		sub = xstrndup(p, (size_t)(end - p));
		if (dolower)
			sshc_lowercase(sub);
		if (sshc_match_pattern(s, sub)) {
			free(sub);
			if (negated)
				return -1;
			positive = 1;
		} else {
			free(sub);
		}
		p = *end ? end + 1 : end;
	}
	return positive;
}

/* OpenBSD's strtonum: the whole string, in range, or an error. */
static int strtonum_ok(const char *s, long long lo, long long hi, long long *out,
		       const char **why)
{
	char *end;
	long long v;

	errno = 0;
	if (!s || !*s) {
		*why = "invalid";
		return -1;
	}
	v = strtoll(s, &end, 10);
	if (end == s || *end) {
		*why = "invalid";
		return -1;
	}
	if ((errno == ERANGE && v == LLONG_MIN) || v < lo) {
		*why = "too small";
		return -1;
	}
	if ((errno == ERANGE && v == LLONG_MAX) || v > hi) {
		*why = "too large";
		return -1;
	}
	*out = v;
	return 0;
}

int sshc_a2port(const char *s)
{
	long long v;
	const char *why;
	struct servent *se;

	if (strtonum_ok(s, 0, 65535, &v, &why) == 0)
		return (int)v;
	se = getservbyname(s, "tcp");
	return se ? ntohs((uint16_t)se->s_port) : -1;
}

int sshc_atoi(const char *s, const char **why)
{
	long long v;

	if (!s || !*s) {
		*why = "missing";
		return -1;
	}
	if (strtonum_ok(s, 0, INT_MAX, &v, why) < 0)
		return -1;
	return (int)v;
}

int sshc_convtime(const char *s)
{
	long total = 0;

	if (!s || !*s)
		return -1;
	while (*s) {
		char *end;
		long secs, mult = 1;

		errno = 0;
		secs = strtol(s, &end, 10);
		if (end == s || (errno == ERANGE && (secs == LONG_MIN || secs == LONG_MAX)) ||
		    secs < 0)
			return -1;
		switch (*end) {
		case '\0': break;
		case 's': case 'S': end++; break;
		case 'm': case 'M': mult = 60; end++; break;
		case 'h': case 'H': mult = 3600; end++; break;
		case 'd': case 'D': mult = 86400; end++; break;
		case 'w': case 'W': mult = 604800; end++; break;
		default: return -1;
		}
		if (secs > INT_MAX / mult)
			return -1;
		secs *= mult;
		if (total > INT_MAX - secs)
			return -1;
		total += secs;
		s = end;
	}
	return (int)total;
}

/* ssh's hpdelim2: split "host:port", "[v6]:port" or "host/port". */
static char *hpdelim2(char **cp, char *delim)
{
	char *s, *old;

	if (!cp || !*cp)
		return NULL;
	old = s = *cp;
	if (*s == '[') {
		if (!(s = strchr(s, ']')))
			return NULL;
		s++;
	} else if (!(s = strpbrk(s, ":/"))) {
		s = *cp + strlen(*cp);
	}
	switch (*s) {
	case '\0':
		*cp = NULL;
		break;
	case ':':
	case '/':
		if (delim)
			*delim = *s;
		*s = '\0';
		*cp = s + 1;
		break;
	default:
		return NULL;
	}
	return old;
}

static char *cleanhostname(char *host)
{
	size_t n = strlen(host);

	if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
		host[n - 1] = '\0';
		return host + 1;
	}
	return host;
}

int sshc_parse_user_host_port(const char *s, char **userp, char **hostp, int *portp)
{
	char *dup = xstrdup(s), *tmp = dup, *cp, *user = NULL, *host = NULL;
	char delim = 0;
	int port = -1, ret = -1;

	if (userp)
		*userp = NULL;
	if (hostp)
		*hostp = NULL;
	if (portp)
		*portp = -1;
	if ((cp = strrchr(tmp, '@'))) {
		*cp = '\0';
		if (!*tmp)
			goto out;
		user = xstrdup(tmp);
		tmp = cp + 1;
	}
	if (!(cp = hpdelim2(&tmp, &delim)) || !*cp || delim == '/')
		goto out;
	host = xstrdup(cleanhostname(cp));
	if (tmp && *tmp && (port = sshc_a2port(tmp)) <= 0)
		goto out;
	if (userp) {
		*userp = user;
		user = NULL;
	}
	if (hostp) {
		*hostp = host;
		host = NULL;
	}
	if (portp)
		*portp = port;
	ret = 0;
out:
	free(dup);
	free(user);
	free(host);
	return ret;
}

static int valid_domain(const char *name)
{
	unsigned char last = 0;

	if (!*name || !isalnum((unsigned char)name[0]))
		return 0;
	for (const char *p = name; *p; p++) {
		unsigned char c = (unsigned char)tolower((unsigned char)*p);
		if ((last == '.' && c == '.') || (c != '.' && c != '-' && c != '_' && !isalnum(c)))
			return 0;
		last = c;
	}
	return 1;
}

static char *urldecode(const char *src)
{
	struct strbuf out = STRBUF_INIT;

	sb_grow(&out, strlen(src) + 1);
	for (; *src; src++) {
		char c = *src;
		if (c == '+') {
			c = ' ';
		} else if (c == '%') {
			char hex[3] = { src[1], src[1] ? src[2] : 0, 0 };
			char *end;
			if (!isxdigit((unsigned char)hex[0]) || !isxdigit((unsigned char)hex[1])) {
				sb_release(&out);
				return NULL;
			}
			c = (char)strtol(hex, &end, 16);
			src += 2;
		}
		sb_add(&out, &c, 1);
	}
	return sb_detach(&out, NULL);
}

int sshc_parse_ssh_uri(const char *uri, char **userp, char **hostp, int *portp)
{
	char *dup, *tmp, *cp, *user = NULL, *host = NULL, delim = 0;
	int port = -1, ret = -1;

	if (strncmp(uri, "ssh://", 6) != 0)
		return 1;
	dup = tmp = xstrdup(uri + 6);
	if ((cp = strchr(tmp, '@'))) {
		char *semi;
		*cp = '\0';
		if ((semi = strchr(tmp, ';')))
			*semi = '\0';   /* connection parameters are ignored */
		if (!*tmp || !(user = urldecode(tmp)))
			goto out;
		tmp = cp + 1;
	}
	if (!(cp = hpdelim2(&tmp, &delim)) || !*cp)
		goto out;
	host = xstrdup(cleanhostname(cp));
	if (!valid_domain(host))
		goto out;
	if (tmp && *tmp) {
		if (delim == ':') {
			char *slash = strchr(tmp, '/');
			if (slash)
				*slash = '\0';
			if ((port = sshc_a2port(tmp)) <= 0)
				goto out;
			tmp = slash ? slash + 1 : NULL;
		}
		if (tmp && *tmp)
			goto out;   /* a path is not allowed in an ssh:// destination */
	}
	if (userp) {
		*userp = user;
		user = NULL;
	}
	if (hostp) {
		*hostp = host;
		host = NULL;
	}
	if (portp)
		*portp = port;
	ret = 0;
out:
	free(dup);
	free(user);
	free(host);
	return ret;
}

int sshc_expand(const char *s, int dollar, const char *keys, const char *const *vals,
		struct strbuf *out, struct strbuf *why)
{
	for (; *s; s++) {
		if (dollar && s[0] == '$' && s[1] == '{') {
			const char *end = strchr(s + 2, '}');
			char *var;
			const char *val;

			if (!end) {
				sb_addf(why, "environment variable '%s' is missing its closing '}'", s + 2);
				return -1;
			}
			if (end == s + 2) {
				sb_adds(why, "empty environment variable name '${}'");
				return -1;
			}
			var = xstrndup(s + 2, (size_t)(end - s - 2));
			val = getenv(var);
			if (!val) {
				sb_addf(why, "environment variable '%s' is not set", var);
				free(var);
				return -1;
			}
			free(var);
			sb_adds(out, val);
			s = end;
			continue;
		}
		if (*s != '%') {
			sb_add(out, s, 1);
			continue;
		}
		s++;
		if (*s == '%') {
			sb_add(out, "%", 1);
			continue;
		}
		if (!*s) {
			sb_adds(why, "'%' at the end of the value");
			return -1;
		}
		const char *k = strchr(keys, *s);
		if (!k) {
			sb_addf(why, "unknown token '%%%c'", *s);
			return -1;
		}
		sb_adds(out, vals[k - keys]);
	}
	return 0;
}

/* SHA-1, only for ssh's %C connection hash (not for anything secret). */
struct sha1 {
	uint32_t h[5];
	uint64_t len;
	unsigned char buf[64];
	size_t fill;
};

static uint32_t rol(uint32_t v, int n)
{
	return (v << n) | (v >> (32 - n));
}

static void sha1_block(struct sha1 *st, const unsigned char *p)
{
	uint32_t w[80], a = st->h[0], b = st->h[1], c = st->h[2], d = st->h[3], e = st->h[4];

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	for (int i = 0; i < 80; i++) {
		uint32_t f, k, t;
		if (i < 20) {
			f = (b & c) | (~b & d);
			k = 0x5a827999;
		} else if (i < 40) {
			f = b ^ c ^ d;
			k = 0x6ed9eba1;
		} else if (i < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8f1bbcdc;
		} else {
			f = b ^ c ^ d;
			k = 0xca62c1d6;
		}
		t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol(b, 30);
		b = a;
		a = t;
	}
	st->h[0] += a;
	st->h[1] += b;
	st->h[2] += c;
	st->h[3] += d;
	st->h[4] += e;
}

static void sha1_add(struct sha1 *c, const unsigned char *p, size_t n)
{
	c->len += n;
	while (n--) {
		c->buf[c->fill++] = *p++;
		if (c->fill == 64) {
			sha1_block(c, c->buf);
			c->fill = 0;
		}
	}
}

void sshc_sha1_hex(const void *data, size_t n, char out[41])
{
	struct sha1 c = { { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0 }, 0, { 0 }, 0 };
	uint64_t bits;
	unsigned char pad = 0x80, zero = 0, lenb[8];

	sha1_add(&c, data, n);
	bits = c.len * 8;
	sha1_add(&c, &pad, 1);
	while (c.fill != 56)
		sha1_add(&c, &zero, 1);
	for (int i = 0; i < 8; i++)
		lenb[i] = (unsigned char)(bits >> (56 - 8 * i));
	sha1_add(&c, lenb, 8);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 4; j++) {
			unsigned v = (c.h[i] >> (24 - 8 * j)) & 0xff;
			out[8 * i + 2 * j] = "0123456789abcdef"[v >> 4];
			out[8 * i + 2 * j + 1] = "0123456789abcdef"[v & 15];
		}
	out[40] = '\0';
}
