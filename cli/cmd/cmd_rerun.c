/* gpurun rerun [JOB]: a new job from JOB's snapshot on the host, exactly
 * as JOB ran (its command, environment, limits, image, backend): the
 * agent copies the old snapshot and takes the old spec (JOB_START with
 * rerun_of, agent_job_snap.c), so neither the local tree nor a value of
 * the job's environment crosses the network. Nothing is synced. Then
 * train's path: follow the log, or --detach. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpurun.h"
#include "job.h"
#include "term.h"

enum { O_DETACH = 1, O_STOP_INT, O_RAW, O_NAME };

const struct gr_opt cmd_rerun_opts[] = {
	{ O_DETACH, "detach", 'd', OPT_FLAG, NULL, "return once the job has started; print its id", NULL, 0, 0, 0 },
	{ O_STOP_INT, "stop-on-interrupt", 0, OPT_FLAG, NULL, "Ctrl-C stops the job instead of asking", NULL, 0, 0, 0 },
	{ O_RAW, "raw", 0, OPT_FLAG, NULL, "on a terminal too, pass the log's bytes unfiltered", NULL, 0, 0, 0 },
	{ O_NAME, "name", 0, OPT_STRING, "NAME", "name the new job (default: JOB's name)", NULL, 0, 0, 0 },
	{ 0 },
};

int cmd_rerun(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct job_pick p = { 0 };
	struct strvec spec = STRVEC_INIT;
	struct job_rec *others = NULL;
	size_t nothers = 0;
	int detach = 0, stop_int = 0, raw = 0, opt, rc;
	const char *name = NULL;
	char *want = NULL, *id = NULL, *warn = NULL, *new_name = NULL;

	gr_getopt_init(&st, argc, argv);
	while ((opt = gr_getopt(&st, cmd_rerun_opts, &ctx->err)) > 0) {
		if (opt == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
		if (opt == O_DETACH)
			detach = 1;
		if (opt == O_STOP_INT)
			stop_int = 1;
		if (opt == O_RAW)
			raw = 1;
		if (opt == O_NAME)
			name = st.arg;
	}
	if (opt == 0 && st.args.n > 1)
		opt = gr_errf(&ctx->err, GR_EUSAGE, "rerun takes one job: it runs what that job ran, "
			      "with nothing changed but --name");
	if (opt == 0 && name && !job_name_ok(name))
		opt = gr_errf(&ctx->err, GR_EUSAGE, "bad --name '%s': a letter, then letters, digits, "
			      "'.', '_' or '-', at most %d", ts(name), GR_JOB_NAME_MAX);
	if (opt < 0) {
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	want = xstrdup(st.args.n ? st.args.v[0] : "");
	name = name ? (new_name = xstrdup(name)) : NULL;
	gr_getopt_release(&st);

	if ((rc = job_pick(ctx, want, &p)) < 0) {
		if (rc == GR_ENOTFOUND)
			gr_hintf(&ctx->err, "a job removed from the host (gpurun rm, prune, [jobs] keep) "
				 "took its snapshot with it; 'gpurun status --all' lists the jobs left");
		goto out;
	}
	if (p.group) {
		rc = gr_errf(&ctx->err, GR_EUSAGE, "'%s' is a sweep of %zu jobs; rerun takes one",
			     want, p.n);
		gr_hintf(&ctx->err, "name one of them (gpurun status %s lists them)", want);
		goto out;
	}
	const struct job_rec *old = &p.recs[0];
	char who[JOB_SHOWN_MAX];
	job_shown(old, who, sizeof(who));
	if (!name && old->name && *old->name)
		name = old->name;
	sv_push(&spec, "rerun_of");
	sv_push(&spec, old->id);
	if (name) {
		sv_push(&spec, "name");
		sv_push(&spec, name);
	}
	if (!ctx->quiet) {
		fprintf(stderr, "gpurun: rerunning job %s: its snapshot, command and environment on "
			"the host (the local tree is not synced)\n", who);
		if (old->after && *old->after)
			fprintf(stderr, "gpurun: note: job %s waited for job %.*s (--after); the rerun "
				"does not wait: it starts now\n", old->id, GR_JOB_ID_LEN, old->after);
	}
	uint32_t log_id = 0;
	rc = job_start_train(ctx, &spec, &id, &others, &nothers, &warn, detach ? NULL : &log_id);
	if (warn) {
		fprintf(stderr, "gpurun: warning: %s\n", ts(warn));
		free(warn);
	}
	job_recs_free(others, nothers);
	if (rc == GR_ECANCEL)
		goto out;
	if (rc < 0) {
		if (rc == GR_EEXIST && name) {
			gr_hintf(&ctx->err, "give the rerun a name of its own (--name), or stop that "
				 "job first: gpurun stop %s", name);
			rc = ctx->err.code = GR_EREMOTE; /* the agent refused: 251 */
		}
		gr_err_prefix(&ctx->err, "cannot rerun job %s", who);
		goto out;
	}
	struct job_rec rec = { .id = id, .state = (char *)"starting",
			       .created_ms = (uint64_t)time(NULL) * 1000, .name = (char *)name };
	job_cache_update(ctx->cfg->root, &rec, 1);
	rc = train_follow(ctx, id, log_id, name, detach, stop_int, raw, 0);
out:
	job_pick_free(&p);
	sv_clear(&spec);
	free(want);
	free(new_name);
	free(id);
	return rc;
}
