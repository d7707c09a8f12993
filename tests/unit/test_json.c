/* The one JSON string writer (util.c, json_str) and its UTF-8 check:
 * control bytes escaped, bytes that are not UTF-8 as U+FFFD, so what
 * `status --json` and `config --json` print is valid JSON whatever the
 * host or gpurun.ini hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "t.h"
#include "util.h"

/* s is valid UTF-8 with no control byte in it. */
static int clean_utf8(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		if (*p < 0x20 || *p == 0x7f)
			return 0;
		if (*p < 0x80) {
			p++;
			continue;
		}
		size_t n = utf8_len(p, strnlen((const char *)p, 4));
		if (!n)
			return 0;
		p += n;
	}
	return 1;
}

/* Every control byte escaped, C1 too, and bytes that are not UTF-8 as
 * U+FFFD, so the output is valid JSON and a terminal showing it is told
 * nothing. */
static void test_json_escape(void)
{
	struct strbuf sb = STRBUF_INIT;

	json_str(&sb, "a\"b\\c\n\t\033]52;c;QQ==\a\x7f");
	CHECK_STR(sb.buf, "\"a\\\"b\\\\c\\n\\t\\u001b]52;c;QQ==\\u0007\\u007f\"");
	sb_reset(&sb);
	json_str(&sb, "\xc2\x9b" "2J \xff \xe2\x82 \xc3\xa9 \xf0\x9f\x9a\x80");
	CHECK_STR(sb.buf, "\"\\u009b2J \\ufffd \\ufffd\\ufffd \xc3\xa9 \xf0\x9f\x9a\x80\"");
	sb_reset(&sb);
	json_str(&sb, NULL);
	CHECK_STR(sb.buf, "\"\"");
	sb_release(&sb);
}

static void test_utf8_len(void)
{
	CHECK_EQ_INT(utf8_len("\xc3\xa9", 2), 2);
	CHECK_EQ_INT(utf8_len("\xe2\x82\xac", 3), 3);
	CHECK_EQ_INT(utf8_len("\xf0\x9f\x9a\x80", 4), 4);
	CHECK_EQ_INT(utf8_len("\xe2\x82\xac", 2), 0);     /* cut short */
	CHECK_EQ_INT(utf8_len("\xc0\xaf", 2), 0);         /* overlong */
	CHECK_EQ_INT(utf8_len("\xe0\x80\xaf", 3), 0);     /* overlong */
	CHECK_EQ_INT(utf8_len("\xed\xa0\x80", 3), 0);     /* a surrogate */
	CHECK_EQ_INT(utf8_len("\xf4\x90\x80\x80", 4), 0); /* past U+10FFFF */
	CHECK_EQ_INT(utf8_len("\x80", 1), 0);
	CHECK_EQ_INT(utf8_len("a", 1), 0);
	CHECK_EQ_INT(utf8_len("", 0), 0);
}

/* `gpurun config --json` wrote a value's bytes as they were: a 0xff in
 * gpurun.ini (or the environment) made it invalid JSON. */
static void test_config_json_invalid_utf8(void)
{
	char tmpl[] = "/tmp/gr-test-json-XXXXXX", cwd[4096];
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	struct strbuf out = STRBUF_INIT;

	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	CHECK(mkdtemp(tmpl) != NULL);
	CHECK(chdir(tmpl) == 0);
	setenv("GPURUN_TRAIN_COMMAND", "python \xff\xfe train.py \xc3\xa9 \xe2\x82", 1);
	CHECK(config_load(&c, NULL, 1, &err) == 0);
	if (err.code)
		fprintf(stderr, "  %s\n", err.msg);
	if (c) {
		config_dump(c, &out, 1);
		CHECK(out.buf != NULL);
		/* every line of it, with its newline dropped */
		int ok = 1;
		for (char *l = out.buf; l && *l;) {
			char *nl = strchr(l, '\n');
			if (nl)
				*nl = '\0';
			ok &= clean_utf8(l);
			l = nl ? nl + 1 : NULL;
		}
		CHECK(ok);
		sb_reset(&out);
		config_dump(c, &out, 1);
		CHECK(strstr(out.buf, "\"python \\ufffd\\ufffd train.py \xc3\xa9 \\ufffd\\ufffd\"") != NULL);
	}
	unsetenv("GPURUN_TRAIN_COMMAND");
	config_free(c);
	sb_release(&out);
	CHECK(chdir(cwd) == 0);
	rmdir(tmpl);
}

int main(void)
{
	RUN(test_json_escape);
	RUN(test_utf8_len);
	RUN(test_config_json_invalid_utf8);
	return T_DONE();
}
