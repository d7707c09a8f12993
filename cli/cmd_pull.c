/* gpurun pull [JOB]: the files matching [artifacts] pull in the job's
 * folder on the host come back into runs/<job>/; only new or changed ones
 * travel. */
#include <stdio.h>
#include <stdlib.h>

#include "gpurun.h"
#include "job_art.h"
#include "job_client.h"

const struct gr_opt cmd_pull_opts[] = { { 0 } };

int job_pull_artifacts(struct gr_ctx *ctx, const char *id, int verbose_none)
{
	char *dest = xasprintf("%s/runs/%s", ctx->cfg->root, id);
	struct art_stats st = { 0 };
	char sz[32];
	int rc = 0;

	for (int attempt = 0; attempt < 2; attempt++) {
		gr_err_clear(&ctx->err);
		if ((rc = ctx_connect(ctx)) == 0 &&
		    (rc = art_pull(ctx->conn, ctx->cfg->remote.path, id, &ctx->cfg->artifacts.pull,
				   dest, ctx->cfg->artifacts.min_free, &st, &ctx->err)) == 0)
			break;
		if (rc != GR_ESSH && rc != GR_EIO)
			break;
		conn_close(ctx->conn);
		ctx->conn = NULL;
	}
	if (rc == 0 && !ctx->quiet) {
		if (st.extracted)
			fprintf(stderr, "gpurun: pulled %u artifact%s (%s) into runs/%s/; %u unchanged\n",
				st.extracted, st.extracted == 1 ? "" : "s",
				fmt_size(st.bytes, sz, sizeof(sz)), id, st.matched - st.sent);
		else if (st.matched || verbose_none)
			fprintf(stderr, "gpurun: artifacts in runs/%s/ are up to date (%u file%s)\n",
				id, st.matched, st.matched == 1 ? "" : "s");
	}
	if (rc < 0)
		gr_err_prefix(&ctx->err, "cannot pull the artifacts of job %s", id);
	free(dest);
	return rc;
}


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
	if (opt == 0 && st.args.n > 1)
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
	rc = job_ctx_status(ctx, st.args.n ? st.args.v[0] : "", &r);
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
