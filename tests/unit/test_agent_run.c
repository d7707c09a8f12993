/* The agent's one runner of host tools (remote/agent/run.c): output and
 * exit codes as a shell gives them, and the time limit kept whatever the
 * tool does with its streams. */
#include <signal.h>
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

int main(void)
{
	RUN(test_output_and_codes);
	RUN(test_limit_after_streams_close);
	return T_DONE();
}
