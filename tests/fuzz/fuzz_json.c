/* libFuzzer target: any bytes through the one JSON string writer
 * (json_strn, common/util.c) must give valid JSON that is valid UTF-8,
 * with no raw control byte, and parse back to exactly the input when the
 * input was valid UTF-8 (else to valid UTF-8 with U+FFFD for each bad
 * byte). The checks use a small parser of their own (RFC 8259, with its
 * own UTF-8 decoder), not the writer's helpers, so the oracle is
 * independent of what it checks. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

/* The code point of the UTF-8 character at p (n bytes there), its length
 * in *len; -1 when it is not a valid, shortest-form, non-surrogate one. */
static long dec_utf8(const unsigned char *p, size_t n, size_t *len)
{
	long cp;
	size_t k;

	if (!n)
		return -1;
	if (p[0] < 0x80) {
		*len = 1;
		return p[0];
	}
	if ((p[0] & 0xe0) == 0xc0)
		k = 2, cp = p[0] & 0x1f;
	else if ((p[0] & 0xf0) == 0xe0)
		k = 3, cp = p[0] & 0x0f;
	else if ((p[0] & 0xf8) == 0xf0)
		k = 4, cp = p[0] & 0x07;
	else
		return -1;
	if (n < k)
		return -1;
	for (size_t i = 1; i < k; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return -1;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800) || (k == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -1;
	*len = k;
	return cp;
}

static int valid_utf8(const unsigned char *p, size_t n)
{
	for (size_t i = 0, l; i < n; i += l)
		if (dec_utf8(p + i, n - i, &l) < 0)
			return 0;
	return 1;
}

static void put_utf8(struct strbuf *o, long cp)
{
	unsigned char b[4];
	size_t n;

	if (cp < 0x80)
		b[0] = (unsigned char)cp, n = 1;
	else if (cp < 0x800)
		b[0] = (unsigned char)(0xc0 | cp >> 6), b[1] = (unsigned char)(0x80 | (cp & 0x3f)), n = 2;
	else if (cp < 0x10000)
		b[0] = (unsigned char)(0xe0 | cp >> 12), b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3f)),
		b[2] = (unsigned char)(0x80 | (cp & 0x3f)), n = 3;
	else
		b[0] = (unsigned char)(0xf0 | cp >> 18), b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3f)),
		b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3f)), b[3] = (unsigned char)(0x80 | (cp & 0x3f)), n = 4;
	sb_add(o, b, n);
}

struct ps {
	const unsigned char *p;
	size_t n, i;
};

static void ws(struct ps *s)
{
	while (s->i < s->n && (s->p[s->i] == ' ' || s->p[s->i] == '\t' || s->p[s->i] == '\n' ||
			       s->p[s->i] == '\r'))
		s->i++;
}

static long hex4(struct ps *s)
{
	long v = 0;

	if (s->n - s->i < 4)
		return -1;
	for (int k = 0; k < 4; k++) {
		unsigned char c = s->p[s->i++];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* A string at s->i (its opening quote); its bytes decoded into o (NULL:
 * only check). 0, or -1 if it is not valid JSON. */
static int str(struct ps *s, struct strbuf *o)
{
	if (s->i >= s->n || s->p[s->i] != '"')
		return -1;
	s->i++;
	while (s->i < s->n) {
		unsigned char c = s->p[s->i];
		size_t l;
		long cp;
		if (c == '"') {
			s->i++;
			return 0;
		}
		if (c < 0x20)
			return -1;
		if (c != '\\') {
			if ((cp = dec_utf8(s->p + s->i, s->n - s->i, &l)) < 0)
				return -1;
			if (o)
				sb_add(o, s->p + s->i, l);
			s->i += l;
			continue;
		}
		if (++s->i >= s->n)
			return -1;
		c = s->p[s->i++];
		switch (c) {
		case '"': case '\\': case '/': cp = c; break;
		case 'b': cp = '\b'; break;
		case 'f': cp = '\f'; break;
		case 'n': cp = '\n'; break;
		case 'r': cp = '\r'; break;
		case 't': cp = '\t'; break;
		case 'u':
			if ((cp = hex4(s)) < 0)
				return -1;
			if (cp >= 0xd800 && cp <= 0xdbff) {
				long lo;
				if (s->n - s->i < 6 || s->p[s->i] != '\\' || s->p[s->i + 1] != 'u')
					return -1;
				s->i += 2;
				if ((lo = hex4(s)) < 0xdc00 || lo > 0xdfff)
					return -1;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			} else if (cp >= 0xdc00 && cp <= 0xdfff) {
				return -1;
			}
			break;
		default:
			return -1;
		}
		if (o)
			put_utf8(o, cp);
	}
	return -1;
}

static int num(struct ps *s)
{
	size_t d;

	if (s->i < s->n && s->p[s->i] == '-')
		s->i++;
	if (s->i < s->n && s->p[s->i] == '0')
		s->i++;
	else if (s->i < s->n && s->p[s->i] >= '1' && s->p[s->i] <= '9')
		while (s->i < s->n && s->p[s->i] >= '0' && s->p[s->i] <= '9')
			s->i++;
	else
		return -1;
	if (s->i < s->n && s->p[s->i] == '.') {
		for (d = ++s->i; s->i < s->n && s->p[s->i] >= '0' && s->p[s->i] <= '9'; s->i++)
			;
		if (s->i == d)
			return -1;
	}
	if (s->i < s->n && (s->p[s->i] == 'e' || s->p[s->i] == 'E')) {
		s->i++;
		if (s->i < s->n && (s->p[s->i] == '+' || s->p[s->i] == '-'))
			s->i++;
		for (d = s->i; s->i < s->n && s->p[s->i] >= '0' && s->p[s->i] <= '9'; s->i++)
			;
		if (s->i == d)
			return -1;
	}
	return 0;
}

static int value(struct ps *s, int depth)
{
	ws(s);
	if (s->i >= s->n || depth > 64)
		return -1;
	unsigned char c = s->p[s->i];
	if (c == '"')
		return str(s, NULL);
	if (c == '{' || c == '[') {
		unsigned char close = c == '{' ? '}' : ']';
		s->i++;
		ws(s);
		if (s->i < s->n && s->p[s->i] == close) {
			s->i++;
			return 0;
		}
		for (;;) {
			if (c == '{') {
				ws(s);
				if (str(s, NULL) < 0)
					return -1;
				ws(s);
				if (s->i >= s->n || s->p[s->i++] != ':')
					return -1;
			}
			if (value(s, depth + 1) < 0)
				return -1;
			ws(s);
			if (s->i >= s->n)
				return -1;
			if (s->p[s->i] == close) {
				s->i++;
				return 0;
			}
			if (s->p[s->i++] != ',')
				return -1;
		}
	}
	for (const char *const *w = (const char *const[]){ "true", "false", "null", NULL }; *w; w++) {
		size_t l = strlen(*w);
		if (s->n - s->i >= l && !memcmp(s->p + s->i, *w, l)) {
			s->i += l;
			return 0;
		}
	}
	return num(s);
}

/* The whole of p is one JSON document. */
static int json_ok(const char *p, size_t n)
{
	struct ps s = { (const unsigned char *)p, n, 0 };

	if (value(&s, 0) < 0)
		return 0;
	ws(&s);
	return s.i == n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct strbuf out = STRBUF_INIT, back = STRBUF_INIT, doc = STRBUF_INIT;

	/* One string: valid JSON, valid UTF-8, no raw control byte (nor
	 * DEL, nor a C1 control: the writer escapes those for terminals). */
	json_strn(&out, data, size);
	if (!valid_utf8((const unsigned char *)out.buf, out.len))
		abort();
	for (size_t i = 0; i < out.len; i++)
		if ((unsigned char)out.buf[i] < 0x20 || out.buf[i] == 0x7f ||
		    ((unsigned char)out.buf[i] == 0xc2 && i + 1 < out.len &&
		     (unsigned char)out.buf[i + 1] < 0xa0))
			abort();
	struct ps s = { (const unsigned char *)out.buf, out.len, 0 };
	if (str(&s, &back) < 0 || s.i != out.len)
		abort();
	/* Round trip: exactly the input when it was UTF-8; else valid UTF-8
	 * in which only bad bytes changed (never more text than input). */
	if (valid_utf8(data, size)) {
		if (back.len != size || (size && memcmp(back.buf, data, size)))
			abort();
	} else if (!valid_utf8((const unsigned char *)back.buf, back.len) || back.len > 3 * size) {
		abort();
	}
	/* json_str stops at the first NUL: the same as json_strn up to it. */
	char *z = xstrndup((const char *)data, size);
	sb_reset(&back);
	json_str(&back, z);
	sb_reset(&doc);
	json_strn(&doc, z, strlen(z));
	if (strcmp(back.buf, doc.buf))
		abort();
	/* Strings inside a document, as the commands build them. */
	sb_reset(&doc);
	size_t cut = size ? data[0] % (size + 1) : 0;
	sb_adds(&doc, "{\"schema\": 1, \"k\": ");
	json_strn(&doc, data, cut);
	sb_adds(&doc, ", \"a\": [");
	json_strn(&doc, data + cut, size - cut);
	sb_adds(&doc, ", ");
	json_str(&doc, z);
	sb_adds(&doc, ", null, -1.5e3]}\n");
	if (!json_ok(doc.buf, doc.len))
		abort();
	free(z);
	sb_release(&out);
	sb_release(&back);
	sb_release(&doc);
	return 0;
}
