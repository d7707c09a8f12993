/* train's start of a job (job_client.h, job_start_train): the host may
 * take long to start one (a busy scheduler, a slow disk), and Ctrl-C,
 * SIGTERM and SIGHUP must answer at once meanwhile (issue 29). Until the
 * host answers there is no job id to stop, and the host goes on with the
 * start whether we wait or not: so a signal detaches, and says so and
 * how to find the job. Once the id is known, job_attach says what a
 * signal means (ask, detach or stop). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job_client.h"

static int start_pipe[2] = { -1, -1 };
static volatile sig_atomic_t start_sig;

static void on_start_signal(int sig)
{
	int e = errno;

	if (!start_sig)
		start_sig = sig;
	if (write(start_pipe[1], "s", 1) < 0) {
		/* full: one is enough */
	}
	errno = e;
}

int job_start_train(struct gr_ctx *ctx, const struct strvec *spec, char **id,
		    struct job_rec **others, size_t *nothers)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sigaction sa = { 0 }, old[3];
	sigset_t set;
	int rc;

	sigemptyset(&set);
	for (size_t i = 0; i < GR_ARRAY_SIZE(sigs); i++)
		sigaddset(&set, sigs[i]);
	if (pipe2(start_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		/* No pipe: the old way, signals held until the attach. */
		sigprocmask(SIG_BLOCK, &set, NULL);
		return job_start(ctx->conn, ctx->cfg->remote.path, spec, id, others, nothers,
				 &ctx->err);
	}
	start_sig = 0;
	sa.sa_handler = on_start_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < GR_ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &sa, &old[i]);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	rc = job_start_intr(ctx->conn, ctx->cfg->remote.path, spec, id, others, nothers,
			    start_pipe[0], &ctx->err);
	/* From here signals wait for job_attach's handlers (dying between the
	 * start and the attach would leave the user no word about the job). */
	sigprocmask(SIG_BLOCK, &set, NULL);
	for (size_t i = 0; i < GR_ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &old[i], NULL);
	if (rc == GR_ECANCEL) {
		gr_errf(&ctx->err, GR_ECANCEL, "%s while the host was starting the job: detached; "
			"the host goes on starting it", strsignal(start_sig ? start_sig : SIGINT));
		gr_hintf(&ctx->err, "'gpurun status' lists it, 'gpurun logs -f' follows it, "
			 "'gpurun stop JOB' stops it");
	} else if (start_sig) {
		raise(start_sig); /* pending now, for job_attach */
	}
	close(start_pipe[0]);
	close(start_pipe[1]);
	start_pipe[0] = start_pipe[1] = -1;
	return rc;
}
