/* gpurun rm JOB...: remove jobs from the host (their folders: snapshot,
 * outputs, log), each given by id, a unique prefix, a name, or a sweep's
 * group (every job of it). A job that has not ended is refused (stop it
 * first). runs/<job>/ here is left alone. */
#include <stdio.h>
#include <stdlib.h>

#include "gpurun.h"
#include "job.h"
#include "sync.h"

const struct gr_opt cmd_rm_opts[] = { { 0 } };

int cmd_rm(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct job_rm_report rep = { 0 };
	struct strvec gone = STRVEC_INIT, ids = STRVEC_INIT, asked = STRVEC_INIT;
	struct job_rec *all = NULL;
	size_t nall = 0;
	int opt, rc, failed = 0, names = 0;
	char sz[32];

	gr_getopt_init(&st, argc, argv);
	while ((opt = gr_getopt(&st, cmd_rm_opts, &ctx->err)) > 0) {
		if (opt == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
	}
	if (opt == 0 && !st.args.n)
		opt = gr_errf(&ctx->err, GR_EUSAGE, "rm needs at least one job");
	for (size_t i = 0; opt == 0 && i < st.args.n; i++)
		if (!*st.args.v[i])
			opt = gr_errf(&ctx->err, GR_EUSAGE, "an empty job id would name the latest job; "
				      "give ids or prefixes");
	if (opt < 0) {
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	if ((rc = ctx_connect(ctx)) < 0)
		goto out;
	/* Names and groups are looked up here, in one list (an exact name
	 * wins over a group); ids and prefixes go to the agent as they are. */
	for (size_t i = 0; i < st.args.n; i++)
		names |= job_name_ok(st.args.v[i]);
	if (names && (rc = job_list_all(ctx->conn, ctx->cfg->remote.path, &all, &nall,
					&ctx->err)) < 0)
		goto out;
	for (size_t i = 0; i < st.args.n; i++) {
		struct job_pick p;
		struct gr_err perr = { 0 };
		if (!job_name_ok(st.args.v[i])) {
			sv_push(&ids, st.args.v[i]);
			sv_push(&asked, st.args.v[i]);
			continue;
		}
		if (job_pick_in(all, nall, st.args.v[i], &p, &perr) < 0) {
			fprintf(stderr, "gpurun: cannot remove '%s': %s\n", st.args.v[i], perr.msg);
			failed = 1;
		}
		for (size_t k = p.n; k-- > 0;) {
			sv_push(&ids, p.recs[k].id);
			sv_push(&asked, p.recs[k].id);
		}
		job_pick_free(&p);
	}
	if (ids.n && (rc = job_rm(ctx->conn, ctx->cfg->remote.path, &ids, &rep, &ctx->err)) < 0)
		goto out;
	for (size_t i = 0; i < rep.n; i++) {
		const struct job_rm_item *it = &rep.v[i];
		char *asked_q = sync_quote(asked.v[i]);
		if (it->removed && job_id_ok(it->why)) {
			if (!ctx->quiet)
				fprintf(stderr, "gpurun: removed job %s (%s)\n", it->why,
					fmt_size(it->bytes, sz, sizeof(sz)));
			sv_push(&gone, it->why);
		} else {
			char *why = sync_quote(it->why ? it->why : "");
			fprintf(stderr, "gpurun: cannot remove %s: %s\n", asked_q, why);
			free(why);
			failed = 1;
		}
		free(asked_q);
	}
	if (!ctx->quiet && gone.n)
		fprintf(stderr, "gpurun: %s freed on the host\n", fmt_size(rep.freed, sz, sizeof(sz)));
	job_cache_forget(ctx->cfg->root, &gone);
	rc = failed ? GR_EXIT_FAILURE : 0;
out:
	gr_getopt_release(&st);
	job_rm_report_free(&rep);
	sv_clear(&gone);
	sv_clear(&ids);
	sv_clear(&asked);
	job_recs_free(all, nall);
	return rc;
}
