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
#include "sig_wake.h"

int job_start_train(struct gr_ctx *ctx, const struct strvec *spec, char **id,
		    struct job_rec **others, size_t *nothers, char **warn, uint32_t *follow_id)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	struct sig_wake wake;
	sigset_t set;
	int rc, sig;

	sigemptyset(&set);
	for (size_t i = 0; i < GR_ARRAY_SIZE(sigs); i++)
		sigaddset(&set, sigs[i]);
	if (sig_wake_start(&wake, sigs, GR_ARRAY_SIZE(sigs), 0) < 0) {
		/* No pipe: the old way, signals held until the attach. */
		sigprocmask(SIG_BLOCK, &set, NULL);
		return job_start_intr(ctx->conn, ctx->cfg->remote.path, spec, id, others,
				      nothers, -1, warn, follow_id, &ctx->err);
	}
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	rc = job_start_intr(ctx->conn, ctx->cfg->remote.path, spec, id, others, nothers,
			    wake.fd[0], warn, follow_id, &ctx->err);
	/* From here signals wait for job_attach's handlers (dying between the
	 * start and the attach would leave the user no word about the job). */
	sigprocmask(SIG_BLOCK, &set, NULL);
	sig = sig_wake_next(&wake); /* the first one caught */
	sig_wake_stop(&wake);
	if (rc == GR_ECANCEL) {
		gr_errf(&ctx->err, GR_ECANCEL, "%s while the host was starting the job: detached; "
			"the host goes on starting it", strsignal(sig ? sig : SIGINT));
		gr_hintf(&ctx->err, "'gpurun status' lists it, 'gpurun logs -f' follows it, "
			 "'gpurun stop JOB' stops it");
	} else if (sig) {
		raise(sig); /* pending now, for job_attach */
	}
	return rc;
}
