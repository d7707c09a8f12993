/* What the host may put on the user's terminal (see term_filter.h). The
 * filter is ECMA-48's parser cut down to what it must recognise: it keeps
 * the few sequences it allows and drops everything else, so a sequence
 * it does not know can only vanish, never reach the terminal. */
#include <string.h>
#include <unistd.h>

#include "term_filter.h"

enum {
	TF_GROUND,
	TF_UTF8,     /* inside a multibyte character (seq holds it) */
	TF_ESC,      /* after ESC */
	TF_ESC_INT,  /* ESC + intermediates: dropped up to the final byte */
	TF_CSI,      /* ESC [ ... (seq holds it) */
	TF_CSI_DROP, /* a CSI too long to keep: dropped up to the final byte */
	TF_STR,      /* OSC, DCS, SOS, PM, APC: dropped up to BEL or ST */
	TF_STR_ESC,  /* ESC inside a string: ST if '\' follows */
};

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

/* Continuation bytes a UTF-8 lead byte wants (0: not a lead byte). */
static int u8_need(unsigned char lead)
{
	if (lead >= 0xc2 && lead <= 0xdf)
		return 1;
	if (lead >= 0xe0 && lead <= 0xef)
		return 2;
	if (lead >= 0xf0 && lead <= 0xf4)
		return 3;
	return 0;
}

/* May b be the continuation byte at index i (1..3) after lead? Refuses
 * overlong forms, surrogates and code points past U+10FFFF. */
static int u8_cont_ok(unsigned char lead, size_t i, unsigned char b)
{
	if (i == 1) {
		if (lead == 0xe0)
			return b >= 0xa0 && b <= 0xbf;
		if (lead == 0xed)
			return b >= 0x80 && b <= 0x9f;
		if (lead == 0xf0)
			return b >= 0x90 && b <= 0xbf;
		if (lead == 0xf4)
			return b >= 0x80 && b <= 0x8f;
	}
	return b >= 0x80 && b <= 0xbf;
}

size_t u8_char_len(const char *s)
{
	return utf8_len(s, strnlen(s, 4)); /* util.c: the one UTF-8 reader */
}

/* U+0080..U+009F: C1 controls; xterm obeys them in UTF-8 too. */
static int u8_is_c1(const unsigned char *s, size_t len)
{
	return len == 2 && s[0] == 0xc2 && s[1] <= 0x9f;
}

void tf_init(struct term_filter *f)
{
	memset(f, 0, sizeof(*f));
	f->state = TF_GROUND;
}

/* A complete CSI in f->seq (ESC [ params final): may it pass? Only SGR
 * and the cursor-movement / erase-line finals, with plain numeric
 * parameters (no private marker such as '?', no intermediates). */
static int csi_allowed(const struct term_filter *f)
{
	unsigned char fin = f->seq[f->nseq - 1];

	if (!strchr("mABCDEFGK", fin))
		return 0;
	for (size_t i = 2; i + 1 < f->nseq; i++) {
		unsigned char c = f->seq[i];
		if ((c >= '0' && c <= '9') || c == ';' || (c == ':' && fin == 'm'))
			continue;
		return 0;
	}
	return 1;
}

/* Printable ASCII and the four controls text keeps. */
static inline int plain(unsigned char c)
{
	return (c >= 0x20 && c < 0x7f) || c == '\t' || c == '\n' || c == '\r' || c == '\b';
}

static void ground(struct term_filter *f, unsigned char c, struct strbuf *out)
{
	if (c == 0x1b) {
		f->state = TF_ESC;
	} else if (c == '\t' || c == '\n' || c == '\r' || c == '\b' || (c >= 0x20 && c < 0x7f)) {
		sb_add(out, &c, 1);
	} else if (c >= 0x80) {
		f->need = u8_need(c);
		if (!f->need) {
			sb_adds(out, replacement);
			return;
		}
		f->seq[0] = c;
		f->nseq = 1;
		f->state = TF_UTF8;
	}
	/* any other control byte, and DEL: dropped */
}

void tf_feed(struct term_filter *f, const void *p, size_t n, struct strbuf *out)
{
	const unsigned char *s = p;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		if (f->state == TF_GROUND && plain(c)) {
			/* The common case, text: the whole run at once. */
			size_t j = i + 1;
			while (j < n && plain(s[j]))
				j++;
			sb_add(out, s + i, j - i);
			i = j - 1;
			continue;
		}
	again:
		switch (f->state) {
		case TF_GROUND:
			ground(f, c, out);
			break;
		case TF_UTF8:
			if (!u8_cont_ok(f->seq[0], f->nseq, c)) {
				sb_adds(out, replacement);
				f->state = TF_GROUND;
				goto again;
			}
			f->seq[f->nseq++] = c;
			if (--f->need == 0) {
				if (!u8_is_c1(f->seq, f->nseq))
					sb_add(out, f->seq, f->nseq);
				f->nseq = 0;
				f->state = TF_GROUND;
			}
			break;
		case TF_ESC:
			if (c == '[') {
				f->seq[0] = 0x1b;
				f->seq[1] = '[';
				f->nseq = 2;
				f->state = TF_CSI;
			} else if (c == ']' || c == 'P' || c == 'X' || c == '^' || c == '_') {
				f->state = TF_STR;
			} else if (c >= 0x20 && c <= 0x2f) {
				f->state = TF_ESC_INT;
			} else if (c >= 0x30 && c <= 0x7e) {
				f->state = TF_GROUND; /* ESC 7, ESC c, ESC M, ...: dropped */
			} else {
				/* A control or a non-ASCII byte ends the escape; a
				 * terminal would act on it: judge it afresh. */
				f->state = TF_GROUND;
				goto again;
			}
			break;
		case TF_ESC_INT:
			if (c >= 0x20 && c <= 0x2f)
				break;
			f->state = TF_GROUND;
			if (c < 0x30 || c > 0x7e)
				goto again;
			break;
		case TF_CSI:
		case TF_CSI_DROP:
			if (c >= 0x40 && c <= 0x7e) {
				if (f->state == TF_CSI && f->nseq < TF_SEQ_MAX) {
					f->seq[f->nseq++] = c;
					if (csi_allowed(f))
						sb_add(out, f->seq, f->nseq);
				}
				f->nseq = 0;
				f->state = TF_GROUND;
			} else if (c >= 0x20 && c <= 0x3f) {
				if (f->state == TF_CSI && f->nseq < TF_SEQ_MAX - 1)
					f->seq[f->nseq++] = c;
				else
					f->state = TF_CSI_DROP;
			} else {
				/* Not part of a CSI: the sequence is dropped and the
				 * byte judged on its own (no ESC [ went out, so the
				 * terminal never saw a sequence begin). */
				f->nseq = 0;
				f->state = TF_GROUND;
				goto again;
			}
			break;
		case TF_STR:
			if (c == 0x07 || c == 0x18 || c == 0x1a)
				f->state = TF_GROUND;
			else if (c == 0x1b)
				f->state = TF_STR_ESC;
			break;
		case TF_STR_ESC:
			if (c == '\\') {
				f->state = TF_GROUND;
			} else {
				f->state = TF_ESC;
				goto again;
			}
			break;
		}
	}
}

void tf_finish(struct term_filter *f, struct strbuf *out)
{
	if (f->state == TF_UTF8)
		sb_adds(out, replacement);
	tf_init(f);
}

int tf_write(struct term_filter *f, int fd, const void *p, size_t n)
{
	struct strbuf sb = STRBUF_INIT;
	int rc;

	if (!f)
		return write_full(fd, p, n);
	tf_feed(f, p, n, &sb);
	rc = sb.len ? write_full(fd, sb.buf, sb.len) : 0;
	sb_release(&sb);
	return rc;
}

/* Bidi controls that reorder what follows them (U+202A..U+202E,
 * U+2066..U+2069): shown escaped, as compilers warn of them in source. */
static int u8_is_bidi(const unsigned char *s, size_t len)
{
	return len == 3 && s[0] == 0xe2 &&
	       ((s[1] == 0x80 && s[2] >= 0xaa && s[2] <= 0xae) ||
		(s[1] == 0x81 && s[2] >= 0xa6 && s[2] <= 0xa9));
}

static int needs_escape(const unsigned char *s)
{
	while (*s) {
		if (*s < 0x80) {
			if (*s < 0x20 || *s == 0x7f)
				return 1;
			s++;
			continue;
		}
		size_t len = utf8_len(s, strnlen((const char *)s, 4));
		if (!len || u8_is_c1(s, len) || u8_is_bidi(s, len))
			return 1;
		s += len;
	}
	return 0;
}

void ts_add(struct strbuf *sb, const char *str)
{
	const unsigned char *s = (const unsigned char *)(str ? str : "");

	while (*s) {
		size_t len = 1;
		int esc;
		if (*s < 0x80) {
			esc = *s < 0x20 || *s == 0x7f;
		} else {
			len = utf8_len(s, strnlen((const char *)s, 4));
			esc = !len || u8_is_c1(s, len) || u8_is_bidi(s, len);
			if (!len)
				len = 1;
		}
		if (esc)
			for (size_t i = 0; i < len; i++)
				sb_addf(sb, "\\x%02x", s[i]);
		else
			sb_add(sb, s, len);
		s += len;
	}
}

const char *ts(const char *s)
{
	static struct strbuf ring[8];
	static unsigned next;

	if (!s || !needs_escape((const unsigned char *)s))
		return s ? s : "";
	struct strbuf *sb = &ring[next++ % GR_ARRAY_SIZE(ring)];
	sb_reset(sb);
	ts_add(sb, s);
	return sb->buf;
}
