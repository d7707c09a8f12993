/* The one JSON string writer (util.c, json_str) and its UTF-8 check:
 * control bytes escaped, bytes that are not UTF-8 as U+FFFD, so what
 * `status --json` and `config --json` print is valid JSON whatever the
 * host or gpurun.ini hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "json_out.h"
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

/* RFC 3339 in UTC with milliseconds, whatever the local zone. */
static void test_json_time(void)
{
	char b[JSON_TIME_MAX];

	setenv("TZ", "America/New_York", 1);
	tzset();
	CHECK_STR(json_time(1795808957561ULL, b, sizeof(b)), "2026-11-27T19:49:17.561Z");
	CHECK_STR(json_time(1000, b, sizeof(b)), "1970-01-01T00:00:01.000Z");
	unsetenv("TZ");
	tzset();
}

/* Feed the log to json_log in pieces of step bytes; the lines and ends
 * of the events it wrote, "LINE|END" each, into got. */
static void log_events(const char *log, size_t n, size_t step, struct strbuf *got)
{
	char path[] = "/tmp/gr-test-jlog-XXXXXX";
	int fd = mkstemp(path), saved = dup(1);
	struct json_log l = { STRBUF_INIT, 0, STRBUF_INIT };
	char line[1 << 16];

	CHECK(fd >= 0 && saved >= 0);
	fflush(stdout);
	dup2(fd, 1);
	for (size_t i = 0; i < n; i += step)
		CHECK(json_log_feed(&l, log + i, n - i < step ? n - i : step) == 0);
	CHECK(json_log_finish(&l) == 0);
	json_log_release(&l);
	dup2(saved, 1);
	close(saved);
	FILE *f = fdopen(fd, "r");
	rewind(f);
	while (fgets(line, sizeof(line), f)) {
		static const char ev[] = "{\"event\": \"log\", \"time\": \"", k[] = "\"line\": ",
				  en[] = ", \"end\": \"";
		char *a = strstr(line, k), *e = strstr(line, en);
		CHECK(a && e && !strncmp(line, ev, strlen(ev)));
		if (!a || !e)
			break;
		a += strlen(k);
		e += strlen(en);
		sb_add(got, a, (size_t)(e - strlen(en) - a));
		sb_addf(got, "|%.*s\n", (int)strcspn(e, "\""), e);
	}
	fclose(f);
	unlink(path);
}

/* Lines end at \n and \r\n ("lf"), at a lone \r ("cr"), and at the log's
 * end ("eof"), split anywhere between reads. */
static void test_json_log_lines(void)
{
	static const char log[] = "a\nb\r\nc 10%\rc 100%\n\xff\x01\r\rtail";
	for (size_t step = 1; step <= sizeof(log); step++) {
		struct strbuf got = STRBUF_INIT;
		log_events(log, sizeof(log) - 1, step, &got);
		CHECK_STR(got.buf, "\"a\"|lf\n\"b\"|lf\n\"c 10%\"|cr\n\"c 100%\"|lf\n"
			  "\"\\ufffd\\u0001\"|cr\n\"\"|cr\n\"tail\"|eof\n");
		sb_release(&got);
	}
}

/* A long line is cut into JSON_LOG_MAX pieces, never inside a UTF-8
 * character (the é across the cut goes to the next piece whole). */
static void test_json_log_cut(void)
{
	size_t n = JSON_LOG_MAX - 1 + 2 + JSON_LOG_MAX + 10 + 1;
	char *log = xmalloc(n);
	struct strbuf got = STRBUF_INIT, want = STRBUF_INIT;

	memset(log, 'x', JSON_LOG_MAX - 1);
	memcpy(log + JSON_LOG_MAX - 1, "\xc3\xa9", 2);
	memset(log + JSON_LOG_MAX + 1, 'y', JSON_LOG_MAX + 10);
	log[n - 1] = '\n';
	for (size_t step = 1000; step <= n; step += 7000) {
		sb_reset(&got);
		log_events(log, n, step, &got);
		sb_reset(&want);
		sb_addf(&want, "\"%.*s\"|cut\n", JSON_LOG_MAX - 1, log);
		sb_addf(&want, "\"\xc3\xa9%.*s\"|cut\n", JSON_LOG_MAX - 2, log + JSON_LOG_MAX + 1);
		sb_addf(&want, "\"%.*s\"|lf\n", 12, log + JSON_LOG_MAX + 1);
		CHECK_STR(got.buf, want.buf);
	}
	free(log);
	sb_release(&got);
	sb_release(&want);
}

int main(void)
{
	RUN(test_json_escape);
	RUN(test_utf8_len);
	RUN(test_config_json_invalid_utf8);
	RUN(test_json_time);
	RUN(test_json_log_lines);
	RUN(test_json_log_cut);
	return T_DONE();
}
