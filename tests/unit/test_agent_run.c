/* The agent's one runner of host tools (remote/agent/run.c): output and
 * exit codes as a shell gives them, and the time limit kept whatever the
 * tool does with its streams. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#include "agent.h"

static uint64_t ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_output_and_codes(void)
{
	const char *ok[] = { "sh", "-c", "echo out; echo err >&2; exit 3", NULL };
	const char *sig[] = { "sh", "-c", "kill -TERM $$", NULL };
	const char *none[] = { "gpurun-no-such-tool-here", NULL };
	struct strbuf out = STRBUF_INIT, err = STRBUF_INIT;

	CHECK_EQ_INT(run_capture(ok, NULL, 5000, 0, &out, &err), 3);
	CHECK_STR(out.buf, "out\n");
	CHECK_STR(err.buf, "err\n");
	CHECK_EQ_INT(run_capture(sig, NULL, 5000, 0, NULL, NULL), 128 + SIGTERM);
	CHECK_EQ_INT(run_capture(none, NULL, 5000, 0, NULL, NULL), 127);
	sb_release(&out);
	sb_release(&err);
}

/* A tool that closes its streams and goes on (or leaves a child holding
 * nothing): the wait for its end has the same limit as its output. */
static void test_limit_after_streams_close(void)
{
	const char *quiet[] = { "sh", "-c", "exec >/dev/null 2>&1; sleep 30", NULL };
	const char *loud[] = { "sh", "-c", "while :; do echo x; sleep 0.01; done", NULL };
	uint64_t t0 = ms();

	CHECK_EQ_INT(run_capture(quiet, NULL, 300, 0, NULL, NULL), RUN_TIMEOUT);
	CHECK(ms() - t0 < 5000);
	t0 = ms();
	CHECK_EQ_INT(run_capture(loud, NULL, 300, 0, NULL, NULL), RUN_TIMEOUT);
	CHECK(ms() - t0 < 5000);
}

/* pid has ended (reaped, or a zombie its new parent has not reaped). */
static int gone(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "r")))
		return 1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *paren = strrchr(buf, ')');
	return paren && paren[1] == ' ' && paren[2] == 'Z';
}

/* run_capture_how: the folder, one stream in the order written, and a
 * group of its own that the timeout kills whole (a child left behind
 * holding the pipe included). */
static void test_how(void)
{
	const char *both[] = { "sh", "-c", "pwd; echo err >&2; echo out", NULL };
	const char *kids[] = { "sh", "-c", "sleep 30 & echo $!; wait", NULL };
	const char *alone[] = { "sh", "-c", "cut -d' ' -f6 /proc/$$/stat /proc/$PPID/stat", NULL };
	struct run_how in_tmp = { .cwd = "/tmp", .merge = 1 }, grouped = { .own_group = 1 };
	struct run_how nowhere = { .cwd = "/gpurun-no-such-folder" };
	struct strbuf out = STRBUF_INIT, err = STRBUF_INIT;

	CHECK_EQ_INT(run_capture_how(both, NULL, 5000, 0, &out, &err, &in_tmp), 0);
	CHECK_STR(out.buf, "/tmp\nerr\nout\n");
	CHECK_EQ_INT((int)err.len, 0);
	sb_reset(&out);
	CHECK_EQ_INT(run_capture_how(both, NULL, 5000, 0, &out, &err, &nowhere), 127);
	CHECK(strstr(err.buf, "cannot enter '/gpurun-no-such-folder'") != NULL);
	sb_reset(&out);
	uint64_t t0 = ms();
	CHECK_EQ_INT(run_capture_how(kids, NULL, 300, 0, &out, NULL, &grouped), RUN_TIMEOUT);
	CHECK(ms() - t0 < 5000);
	long kid = strtol(out.buf, NULL, 10);
	CHECK(kid > 0);
	usleep(100000);
	CHECK(kid > 0 && gone((pid_t)kid)); /* the sleep went with the group */
	sb_reset(&out);
	CHECK_EQ_INT(run_capture_how(alone, NULL, 5000, 0, &out, NULL, &grouped), 0);
	long sid_child = strtol(out.buf, NULL, 10), sid_parent = strtol(strchr(out.buf, '\n') + 1, NULL, 10);
	CHECK(sid_child > 0 && sid_child != sid_parent);
	sb_release(&out);
	sb_release(&err);
}

int main(void)
{
	RUN(test_output_and_codes);
	RUN(test_limit_after_streams_close);
	RUN(test_how);
	return T_DONE();
}
