/* gpurun pull [JOB]: the files matching [artifacts] pull in the job's
 * folder on the host come back into runs/<job>/; only new or changed ones
 * travel. */
#include <stdio.h>
#include <stdlib.h>

#include "gpurun.h"
#include "job_art.h"
#include "job_client.h"

const struct gr_opt cmd_pull_opts[] = { { 0 } };

int cmd_pull(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct job_rec r = { 0 };
	int opt, rc;

	gr_getopt_init(&st, argc, argv);
	while ((opt = gr_getopt(&st, cmd_pull_opts, &ctx->err)) > 0) {
		if (opt == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
	}
	if (opt == 0 && st.args.n > 2)
		opt = gr_errf(&ctx->err, GR_EUSAGE, "pull takes at most one job");
	if (opt < 0) {
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	if (!ctx->cfg->artifacts.pull.n) {
		gr_getopt_release(&st);
		gr_errf(&ctx->err, GR_ECONFIG, "no artifacts to pull: [artifacts] pull is empty");
		gr_hintf(&ctx->err, "list globs relative to the job's folder, e.g. 'pull = *.csv ckpt.bin'");
		return GR_ECONFIG;
	}
	rc = job_ctx_status(ctx, st.args.n > 1 ? st.args.v[1] : "", &r);
	gr_getopt_release(&st);
	if (rc < 0)
		return rc;
	job_cache_update(ctx->cfg->root, &r, 1);
	rc = job_pull_artifacts(ctx, r.id, 1);
	if (rc < 0) {
		gr_report(ctx);
		rc = GR_EXIT_SYNC;
	}
	job_rec_clear(&r);
	return rc;
}
