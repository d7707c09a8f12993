/* gpurun status [JOB] [--json]: the project's jobs (id, state, name,
 * start, duration, exit status, disk use, GPUs, the commit and command
 * they ran) with the disk they use on the host in all, and, where the
 * host has nvidia-smi, each GPU's utilisation, memory and processes; with
 * JOB, everything its record holds; with a sweep's GROUP, its jobs. One
 * round trip: the job list and the GPU report are asked for together (a
 * name or a group is looked up here in the whole list). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurun.h"
#include "job.h"

enum { O_JSON = 1, O_ALL };

const struct gr_opt cmd_status_opts[] = {
	{ O_JSON, "json", 0, OPT_FLAG, NULL, "print JSON (for scripts)", NULL, 0, 0, 0 },
	{ O_ALL, "all", 'a', OPT_FLAG, NULL, "every job, not only the 20 most recent", NULL, 0, 0, 0 },
	{ 0 },
};

int cmd_status(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct strbuf o = STRBUF_INIT;
	struct job_rec *recs = NULL;
	struct job_gpus g = { 0 };
	struct job_pick pick = { 0 };
	uint64_t disk_total = 0;
	size_t n = 0;
	int json = 0, all = 0, opt, rc;
	const char *want = "";

	gr_getopt_init(&st, argc, argv);
	while ((opt = gr_getopt(&st, cmd_status_opts, &ctx->err)) > 0) {
		if (opt == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
		if (opt == O_JSON)
			json = 1;
		if (opt == O_ALL)
			all = 1;
	}
	if (opt == 0 && st.args.n > 1)
		opt = gr_errf(&ctx->err, GR_EUSAGE, "status takes at most one job");
	if (opt < 0) {
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	if (st.args.n)
		want = st.args.v[0];
	/* A name or a group: picked on this side from the whole list. */
	int by_name = job_name_ok(want);
	struct job_list_ask ask = { ctx->cfg->remote.path, by_name ? "" : want,
				    all || *want ? 0 : 20, 0, 0 };
	/* The two requests go with the command that starts the agent. */
	if ((rc = ctx_connect_early(ctx, job_list_ask_early, &ask)) < 0)
		goto out;
	if ((rc = job_list_gpus(ctx->conn, &ask, &recs, &n, &disk_total, &g, &ctx->err)) < 0)
		goto out;
	job_cache_update(ctx->cfg->root, recs, n);
	if (by_name && (rc = job_pick_in(recs, n, want, &pick, &ctx->err)) < 0)
		goto out;
	const struct job_rec *shown = by_name ? pick.recs : recs;
	size_t nshown = by_name ? pick.n : n;
	if (json) {
		job_show_json(shown, nshown, disk_total, &g, &o);
	} else {
		job_show_table(shown, nshown, disk_total, &o);
		if (*want && nshown == 1 && !pick.group)
			job_show_detail(&shown[0], &o);
		job_show_gpus(&g, &o);
	}
	fwrite(o.buf, 1, o.len, stdout);
	rc = 0;
out:
	gr_getopt_release(&st);
	job_recs_free(recs, n);
	job_pick_free(&pick);
	job_gpus_free(&g);
	sb_release(&o);
	return rc;
}
