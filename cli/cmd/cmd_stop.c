/* gpurun stop [JOB|GROUP]: SIGTERM to the job's whole process tree
 * (default: the latest job), SIGKILL after [train] stop_grace, then a
 * check that none of its processes remain or hold a GPU; survivors are
 * reported (exit 1). A sweep's GROUP: each of its jobs not ended yet,
 * newest first (those still waiting go before a running one frees the
 * GPU they wait for). */
#include <stdio.h>
#include <stdlib.h>

#include "gpurun.h"
#include "job.h"

const struct gr_opt cmd_stop_opts[] = { { 0 } };

static int stop_one(struct gr_ctx *ctx, const struct job_rec *r)
{
	struct job_stop_report rep = { 0 };
	int rc;

	if (!ctx->quiet && !job_rec_ended(r) && ctx->cfg->train.stop_grace > 0)
		fprintf(stderr, "gpurun: stopping job %s (SIGKILL after %d s)\n", r->id,
			ctx->cfg->train.stop_grace);
	rc = job_stop(ctx->conn, ctx->cfg->remote.path, r->id, ctx->cfg->train.stop_grace, &rep,
		      &ctx->err);
	if (rc == 0) {
		rc = job_stop_print(&rep, ctx->quiet) ? GR_EXIT_FAILURE : 0;
		job_cache_update(ctx->cfg->root, &rep.rec, 1);
	}
	job_stop_report_free(&rep);
	return rc;
}

static int stop_group(struct gr_ctx *ctx, const struct job_pick *p)
{
	size_t ended = 0;
	int rc = 0;

	for (size_t k = 0; k < p->n; k++) {
		if (job_rec_ended(&p->recs[k])) {
			ended++;
			continue;
		}
		int one = stop_one(ctx, &p->recs[k]);
		if (one < 0) {
			gr_report(ctx);
			gr_err_clear(&ctx->err);
		}
		if (one != 0)
			rc = GR_EXIT_FAILURE;
	}
	if (!ctx->quiet)
		fprintf(stderr, "gpurun: group %s: %zu job%s stopped, %zu had ended already\n",
			p->group, p->n - ended, p->n - ended == 1 ? "" : "s", ended);
	return rc;
}

int cmd_stop(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct job_pick p = { 0 };
	struct job_rec r = { 0 };
	int opt, rc;

	gr_getopt_init(&st, argc, argv);
	while ((opt = gr_getopt(&st, cmd_stop_opts, &ctx->err)) > 0) {
		if (opt == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
	}
	if (opt == 0 && st.args.n > 1)
		opt = gr_errf(&ctx->err, GR_EUSAGE, "stop takes at most one job");
	if (opt < 0) {
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	/* Resolve first, so "the latest" cannot change under us. */
	rc = job_pick(ctx, st.args.n ? st.args.v[0] : "", &p);
	if (rc == 0 && p.group) {
		gr_getopt_release(&st);
		rc = stop_group(ctx, &p);
		job_pick_free(&p);
		return rc;
	}
	if (rc == 0) {
		r = p.recs[0];
		p.recs[0] = (struct job_rec){ 0 };
	}
	job_pick_free(&p);
	if (rc == GR_ENOTFOUND && st.args.n && job_id_ok(st.args.v[0])) {
		/* A full id whose folder is gone (rm -rf ~/.cache during a
		 * job): the agent still stops what carries it (issue 29). */
		job_rec_clear(&r);
		r.id = xstrdup(st.args.v[0]);
		r.state = xstrdup("lost");
		rc = 0;
	}
	gr_getopt_release(&st);
	if (rc < 0)
		return rc;
	rc = stop_one(ctx, &r);
	job_rec_clear(&r);
	return rc;
}
