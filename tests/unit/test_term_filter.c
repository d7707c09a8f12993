/* The terminal filter for the host's bytes (cli/term/term_filter.c): what
 * progress bars and colour need passes, every way to command the terminal
 * (OSC 52, titles, DCS, screen clears, C1) is dropped, the result does not
 * depend on how the stream was cut into chunks, and the one-line escape
 * leaves nothing a terminal would act on. A seeded randomized case checks
 * those invariants on generated streams; the seed is printed, and a
 * failing input is shrunk before it is shown. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "t.h"
#include "term_filter.h"

static char *filt(const char *in, size_t n)
{
	struct term_filter f;
	struct strbuf sb = STRBUF_INIT;

	tf_init(&f);
	tf_feed(&f, in, n, &sb);
	tf_finish(&f, &sb);
	return sb.buf ? sb_detach(&sb, NULL) : xstrdup("");
}

static char *filt_s(const char *in)
{
	struct term_filter f;
	struct strbuf sb = STRBUF_INIT;

	tf_init(&f);
	tf_feed(&f, in, strlen(in), &sb);
	tf_finish(&f, &sb);
	if (!sb.buf)
		return xstrdup("");
	return sb_detach(&sb, NULL);
}

#define FILT_EQ(in, want) do { char *got_ = filt_s(in); CHECK_STR(got_, want); free(got_); } while (0)

static void test_passes_text_and_progress_bars(void)
{
	FILT_EQ("step 1 loss 0.5\n", "step 1 loss 0.5\n");
	FILT_EQ("a\tb\r\bc\n", "a\tb\r\bc\n");
	FILT_EQ("héllo wörld — 日本語 🚀\n", "héllo wörld — 日本語 🚀\n");
	/* SGR, 256 colours and truecolour (both ; and : forms) */
	FILT_EQ("\033[1;31mred\033[0m \033[m", "\033[1;31mred\033[0m \033[m");
	FILT_EQ("\033[38;5;208mx\033[38:2::255:0:0my", "\033[38;5;208mx\033[38:2::255:0:0my");
	/* tqdm: \r and cursor up; rich: erase line, cursor up, column */
	FILT_EQ("\r 50%|#####     |\033[A\033[2K\033[1A\033[G\033[10C\033[K",
		"\r 50%|#####     |\033[A\033[2K\033[1A\033[G\033[10C\033[K");
}

static void test_drops_what_commands_the_terminal(void)
{
	/* OSC 52 (clipboard), with BEL and with ST */
	FILT_EQ("a\033]52;c;ZXZpbA==\007b", "ab");
	FILT_EQ("a\033]52;c;ZXZpbA==\033\\b", "ab");
	/* window title, hyperlink */
	FILT_EQ("\033]0;pwned\007ok", "ok");
	FILT_EQ("\033]8;;http://x\033\\link\033]8;;\033\\", "link");
	/* DCS, SOS, PM, APC with their content */
	FILT_EQ("\033P+q544e\033\\x", "x");
	FILT_EQ("\033Xsos\033\\\033^pm\033\\\033_apc\033\\y", "y");
	/* screen clear, home, alternate screen, cursor hide, mode changes */
	FILT_EQ("\033[2J\033[H\033[?1049h\033[?25l\033[4h\033[6n.", ".");
	/* reset, charset switch, save/restore cursor, keypad */
	FILT_EQ("\033c\033(0\033)B\0337\0338\033=\033>z", "z");
	/* C0 controls except \t \n \r \b, DEL */
	FILT_EQ("\a\001\002\016\017\177\033", "");
	/* C1 controls: raw bytes (not UTF-8) and UTF-8-encoded */
	FILT_EQ("\x9b" "2J", "\xef\xbf\xbd" "2J");
	FILT_EQ("\xc2\x9b" "2J|\xc2\x9d" "0;t\a", "2J|0;t");
	/* a CSI with a private marker or intermediate is not SGR */
	FILT_EQ("\033[?1m\033[1 q\033[>4;1m.", ".");
	/* bad UTF-8: overlong, surrogate, past U+10FFFF, truncated */
	FILT_EQ("\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82",
		"\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|"
		"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|\xef\xbf\xbd");
	/* a control inside a CSI aborts it; what follows is text */
	FILT_EQ("\033[2\nJ", "\nJ");
	/* an overlong CSI is dropped whole, however long */
	char big[400];
	memset(big, '1', sizeof(big));
	memcpy(big, "\033[", 2);
	big[sizeof(big) - 2] = 'm';
	big[sizeof(big) - 1] = '\0';
	FILT_EQ(big, "");
}

/* Feed s cut at every position and byte by byte: always the same output. */
static int chunk_invariant(const char *s, size_t n, char **whole_out)
{
	char *whole = filt(s, n);
	int ok = 1;

	for (size_t cut = 0; cut <= n && ok; cut++) {
		struct term_filter f;
		struct strbuf sb = STRBUF_INIT;
		tf_init(&f);
		tf_feed(&f, s, cut, &sb);
		tf_feed(&f, s + cut, n - cut, &sb);
		tf_finish(&f, &sb);
		ok = sb.len == strlen(whole) && !memcmp(sb.buf ? sb.buf : "", whole, sb.len);
		sb_release(&sb);
	}
	struct term_filter f;
	struct strbuf sb = STRBUF_INIT;
	tf_init(&f);
	for (size_t i = 0; i < n; i++)
		tf_feed(&f, s + i, 1, &sb);
	tf_finish(&f, &sb);
	ok = ok && sb.len == strlen(whole) && !memcmp(sb.buf ? sb.buf : "", whole, sb.len);
	sb_release(&sb);
	if (whole_out)
		*whole_out = whole;
	else
		free(whole);
	return ok;
}

static void test_split_across_chunks(void)
{
	const char *s = "ok \033]52;c;QUJD\033\\ \033[1;32mgreen\033[0m 日本 \xc2\x9b" "x\033[2J\r\033[2K";
	CHECK(chunk_invariant(s, strlen(s), NULL));
}

/* Is out safe for a terminal? Valid UTF-8 without C1; the only ESC bytes
 * start an allowed CSI; no C0 but \t \n \r \b; no DEL. */
static const char *unsafe_reason(const char *out)
{
	const unsigned char *p = (const unsigned char *)out;

	while (*p) {
		if (*p == 0x1b) {
			if (p[1] != '[')
				return "ESC not starting a CSI";
			const unsigned char *q = p + 2;
			while ((*q >= '0' && *q <= '9') || *q == ';' || *q == ':')
				q++;
			if (!*q || !strchr("mABCDEFGK", *q))
				return "a CSI that is not allowed";
			if (*q != 'm' && memchr(p + 2, ':', (size_t)(q - p - 2)))
				return "':' outside SGR";
			p = q + 1;
			continue;
		}
		if (*p < 0x20 && !strchr("\t\n\r\b", *p))
			return "a C0 control";
		if (*p == 0x7f)
			return "DEL";
		if (*p >= 0x80) {
			size_t len = u8_char_len((const char *)p);
			if (!len)
				return "not UTF-8";
			if (len == 2 && p[0] == 0xc2 && p[1] <= 0x9f)
				return "a C1 control";
			p += len;
			continue;
		}
		p++;
	}
	return NULL;
}

/* Random streams built from the pieces hostile and honest logs are made
 * of. */
static size_t gen(uint64_t *st, char *buf, size_t cap)
{
	static const char *const pieces[] = {
		"\033", "[", "]", "P", "_", "^", "X", "\\", "\a", "\r", "\n", "\t", "\b", "?",
		";", ":", "0", "1", "25", "m", "K", "A", "J", "H", "h", "l", "52;c;", "\xc2",
		"\x9b", "\xe2\x82\xac", "\xf0\x9f\x9a\x80", "\xed\xa0\x80", "\x80", "\xff", "\x7f",
		"\x18", "\x1a", "a", "bc ", "\033[", "\033]", "\033[0m", "\033[2K", "(", " ",
	};
	size_t n = 0;
	for (;;) {
		*st ^= *st << 13;
		*st ^= *st >> 7;
		*st ^= *st << 17;
		const char *p = pieces[*st % GR_ARRAY_SIZE(pieces)];
		size_t l = strlen(p);
		if (n + l >= cap || (*st >> 40) % 23 == 0)
			break;
		memcpy(buf + n, p, l);
		n += l;
	}
	return n;
}

static int case_ok(const char *s, size_t n)
{
	char *out = NULL;
	int ok = chunk_invariant(s, n, &out) && !unsafe_reason(out);
	free(out);
	return ok;
}

static void one_seed(uint64_t seed, int rounds)
{
	char buf[256];

	printf("# seed %llu (GPURUN_SEED=%llu to replay)\n", (unsigned long long)seed,
	       (unsigned long long)seed);
	uint64_t st = seed | 1;
	for (int r = 0; r < rounds; r++) {
		size_t n = gen(&st, buf, sizeof(buf));
		if (case_ok(buf, n))
			continue;
		/* Shrink: drop bytes while it still fails. */
		for (size_t i = 0; i < n;) {
			char tmp[256];
			memcpy(tmp, buf, i);
			memcpy(tmp + i, buf + i + 1, n - i - 1);
			if (!case_ok(tmp, n - 1)) {
				memcpy(buf, tmp, n - 1);
				n--;
			} else {
				i++;
			}
		}
		char *out = filt(buf, n);
		fprintf(stderr, "  seed %llu round %d: failing input (shrunk):", (unsigned long long)seed, r);
		for (size_t i = 0; i < n; i++)
			fprintf(stderr, " %02x", (unsigned char)buf[i]);
		fprintf(stderr, "\n  %s\n", unsafe_reason(out) ? unsafe_reason(out) : "depends on chunking");
		free(out);
		t_case_failed = 1;
		return;
	}
}

/* Fixed seeds in `make test`; GPURUN_SEED=N replays one; GPURUN_SOAK=1
 * runs many more (time-seeded). */
static void test_randomized(void)
{
	static const uint64_t seeds[] = { 1, 2, 3, 20261122, 0x5eed5eedULL };
	const char *env = getenv("GPURUN_SEED");

	if (env) {
		one_seed(strtoull(env, NULL, 0), 20000);
	} else if (getenv("GPURUN_SOAK")) {
		for (uint64_t i = 0; i < 50 && !t_case_failed; i++)
			one_seed((uint64_t)time(NULL) * 1000 + i, 20000);
	} else {
		for (size_t i = 0; i < GR_ARRAY_SIZE(seeds) && !t_case_failed; i++)
			one_seed(seeds[i], 1000);
	}
}

static void test_one_line_escape(void)
{
	struct strbuf sb = STRBUF_INIT;

	CHECK_STR(ts("running"), "running");
	CHECK_STR(ts("NVIDIA H100 80GB HBM3 — ü"), "NVIDIA H100 80GB HBM3 — ü");
	CHECK_STR(ts("run\033]52;c;QQ==\aning"), "run\\x1b]52;c;QQ==\\x07ning");
	CHECK_STR(ts("a\nb\tc\r"), "a\\x0ab\\x09c\\x0d");
	CHECK_STR(ts("\xc2\x9b" "2J"), "\\xc2\\x9b2J");
	CHECK_STR(ts("\xff"), "\\xff");
	/* right-to-left override (Trojan Source) */
	CHECK_STR(ts("abc\xe2\x80\xaexyz"), "abc\\xe2\\x80\\xaexyz");
	CHECK_STR(ts(NULL), "");
	/* the ring: 8 results live at once */
	const char *r[8];
	for (int i = 0; i < 8; i++)
		r[i] = ts(i % 2 ? "\033x" : "\ay");
	for (int i = 0; i < 8; i++)
		CHECK_STR(r[i], i % 2 ? "\\x1bx" : "\\x07y");
	ts_add(&sb, "ok\001");
	CHECK_STR(sb.buf, "ok\\x01");
	sb_release(&sb);
}

int main(void)
{
	RUN(test_passes_text_and_progress_bars);
	RUN(test_drops_what_commands_the_terminal);
	RUN(test_split_across_chunks);
	RUN(test_randomized);
	RUN(test_one_line_escape);
	return T_DONE();
}
