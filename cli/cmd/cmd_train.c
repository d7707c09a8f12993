/* gpurun train: sync, then start a job on the host that runs setup (when
 * it must), build and [train] command in its own folder, detached; follow
 * its log (setup and build output included), pull its artifacts when it
 * ends, remove jobs beyond [jobs] keep, and exit with its status. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpurun.h"
#include "pull.h"
#include "job.h"
#include "sync.h"
#include "term.h"

enum { O_DETACH = 1, O_STOP_INT, O_RAW, O_SETUP, O_FORWARD, O_ENV, O_NAME, O_YES };

const struct gr_opt cmd_train_opts[] = {
	{ O_DETACH, "detach", 'd', OPT_FLAG, NULL, "return once the job has started; print its id", NULL, 0, 0, 0 },
	{ O_STOP_INT, "stop-on-interrupt", 0, OPT_FLAG, NULL, "Ctrl-C stops the job instead of asking", NULL, 0, 0, 0 },
	{ O_RAW, "raw", 0, OPT_FLAG, NULL, "on a terminal too, pass the log's bytes (setup and build included) unfiltered", NULL, 0, 0, 0 },
	{ O_SETUP, "setup", 0, OPT_FLAG, NULL, "run [setup] command even if it and its inputs did not change", NULL, 0, 0, 0 },
	{ O_FORWARD, "forward", 'L', OPT_STRING, "PORT[:HOST]:HOSTPORT", "forward a local port to the host while attached (as ssh -L; repeatable)", NULL, 0, 0, 0 },
	{ O_ENV, "env", 'e', OPT_STRING, "NAME=VALUE", "set a variable in the job's environment (repeatable; after [train] env)", NULL, 0, 0, 0 },
	{ O_NAME, "name", 0, OPT_STRING, "NAME", "name the job; the name works wherever a job id does", NULL, 0, 0, 0 },
	{ O_YES, "yes", 'y', OPT_FLAG, NULL, "sync even above [sync] warn_size without asking", NULL, 0, 0, 0 },
	{ 0 },
};

/* Another job of the project is under way: say so (this one has a
 * folder, and so a build, of its own), and name what they share: the
 * [train] persist paths, where both write the same checkpoints. */
static void say_others(const struct gr_ctx *ctx, const struct job_rec *others, size_t n)
{
	const struct strvec *persist = &ctx->cfg->train.persist;
	struct strbuf shared = STRBUF_INIT;
	char d[32];

	for (size_t i = 0; i < persist->n; i++)
		sb_addf(&shared, "%s%s", i ? " " : "", persist->v[i]);

	for (size_t i = 0; i < n && !ctx->quiet; i++) {
		const struct job_rec *r = &others[i];
		uint64_t from = r->start_ms ? r->start_ms : r->created_ms;
		if (!job_id_ok(r->id))
			continue;
		fprintf(stderr, "gpurun: note: job %s of this project is %s too (for %s); "
			"this one builds and runs in its own folder\n", r->id,
			!strcmp(r->state, "running") ? "running" : !strcmp(r->state, "building") ? "building" :
			!strcmp(r->state, "setup") ? "in its setup" : !strcmp(r->state, "queued") ? "queued" : "starting",
			job_fmt_duration(r->now_ms > from ? r->now_ms - from : 0, d, sizeof(d)));
		if (shared.len)
			fprintf(stderr, "gpurun: note: both see the same [train] persist paths (%s): "
				"what one writes there, the other sees and may overwrite\n", shared.buf);
		sb_release(&shared); /* said once */
	}
	sb_release(&shared);
}

/* [jobs] keep: remove the oldest ended jobs beyond it, once the job has
 * ended or been left to run (deleting a large folder must not hold its
 * log back). A failure only warns. */
static void keep_jobs(struct gr_ctx *ctx)
{
	struct job_rm_report rep;
	struct gr_err e = { 0 };
	char sz[32];

	if (ctx->cfg->jobs.keep <= 0)
		return;
	if (job_prune(ctx->conn, ctx->cfg->remote.path, (uint32_t)ctx->cfg->jobs.keep, 0, 0, &rep, &e) < 0) {
		fprintf(stderr, "gpurun: warning: cannot remove old jobs: %s\n", e.msg);
		return;
	}
	if (rep.n && !ctx->quiet)
		fprintf(stderr, "gpurun: removed %zu old job%s from the host (%s; [jobs] keep = %d)\n",
			rep.n, rep.n == 1 ? "" : "s", fmt_size(rep.freed, sz, sizeof(sz)),
			ctx->cfg->jobs.keep);
	job_rm_report_free(&rep);
}

int cmd_train(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct sync_opts so = { 0 };
	struct sync_stats ss;
	struct attach_result res = { 0 };
	struct strvec spec = STRVEC_INIT, fwd = STRVEC_INIT;
	struct train_run tr = { STRVEC_INIT, STRVEC_INIT, NULL };
	struct job_rec *others = NULL;
	size_t nothers = 0;
	int detach = 0, stop_int = 0, force_setup = 0, raw = 0, yes = 0, id_opt, rc;
	char *id = NULL, *dest = NULL, *warn = NULL;

	gr_getopt_init(&st, argc, argv);
	st.stop_at_positional = 1; /* train [OPTIONS] [--] CMD [ARGS...]: ARGS are CMD's */
	while ((id_opt = gr_getopt(&st, cmd_train_opts, &ctx->err)) > 0) {
		if (id_opt == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
		if (id_opt == O_DETACH)
			detach = 1;
		if (id_opt == O_STOP_INT)
			stop_int = 1;
		if (id_opt == O_RAW)
			raw = 1;
		if (id_opt == O_SETUP)
			force_setup = 1;
		if (id_opt == O_FORWARD)
			sv_push(&fwd, st.arg);
		if (id_opt == O_ENV)
			sv_push(&tr.env, st.arg);
		if (id_opt == O_NAME)
			tr.name = st.arg;
		if (id_opt == O_YES)
			yes = 1;
	}
	/* The command's words, exactly as given: never joined and split again. */
	for (size_t i = 0; i < st.args.n; i++)
		sv_push(&tr.argv, st.args.v[i]);
	gr_getopt_release(&st);
	if (id_opt == 0)
		id_opt = train_run_check(&tr, &ctx->err);
	if (id_opt < 0) {
		sv_clear(&fwd);
		rc = gr_usage_error(ctx);
		goto out;
	}
	/* The local ports are taken before anything else happens. */
	rc = fwd.n ? ctx_forward(ctx, fwd.v, fwd.n) : 0;
	sv_clear(&fwd);
	if (rc < 0)
		goto out;
	if (!tr.argv.n && (!ctx->cfg->train.command || !*ctx->cfg->train.command)) {
		gr_errf(&ctx->err, GR_ECONFIG, "no [train] command to run");
		gr_hintf(&ctx->err, "set it in gpurun.ini, e.g. 'command = python3 train.py', "
			 "or give it: gpurun train -- python3 train.py");
		rc = GR_ECONFIG;
		goto out;
	}

	so.quiet = ctx->quiet;
	so.yes = yes;
	so.show = &sync_show_default;
	so.show_arg = ctx;
	if ((rc = sync_project(ctx, &so, &ss)) < 0) {
		if (rc != GR_ECANCEL) /* not sent without a yes: as `gpurun sync` says it */
			gr_err_prefix(&ctx->err, "sync failed");
		rc = sync_failed(ctx, rc);
		goto out;
	}
	if ((rc = ctx_connect(ctx)) < 0)
		goto out;
	job_spec_from_config(ctx->cfg, force_setup, &spec);
	if ((rc = train_spec_add(ctx->cfg, &tr, &spec, &ctx->err)) < 0) {
		sv_clear(&spec);
		goto out;
	}
	/* A signal during the start answers at once (detached); from the
	 * host's answer on, it waits for job_attach to say what it means. */
	rc = job_start_train(ctx, &spec, &id, &others, &nothers, &warn);
	sv_clear(&spec);
	if (warn) {
		fprintf(stderr, "gpurun: warning: %s\n", ts(warn));
		free(warn);
	}
	if (rc == GR_ECANCEL)
		goto out;
	if (rc < 0) {
		if (rc == GR_ENOTFOUND && strstr(ctx->err.msg, "remote folder"))
			gr_hintf(&ctx->err, "run 'gpurun sync' first, or check [remote] path");
		if (rc == GR_EEXIST && tr.name) {
			gr_hintf(&ctx->err, "choose another --name, or stop that job first: "
				 "gpurun stop %s", tr.name);
			rc = ctx->err.code = GR_EREMOTE; /* the agent refused: 251 */
		}
		gr_err_prefix(&ctx->err, "cannot start the job");
		goto out;
	}
	struct job_rec rec = { .id = id, .state = (char *)"starting",
			       .created_ms = (uint64_t)time(NULL) * 1000, .name = (char *)tr.name };
	job_cache_update(ctx->cfg->root, &rec, 1);
	say_others(ctx, others, nothers);
	job_recs_free(others, nothers);
	char named[GR_JOB_NAME_MAX + 8] = "";
	if (tr.name)
		snprintf(named, sizeof(named), " (%s)", tr.name);
	if (detach) {
		keep_jobs(ctx);
		printf("%s\n", id);
		if (!ctx->quiet)
			fprintf(stderr, "gpurun: started job %s%s\nhint: follow it with 'gpurun logs -f %s'\n",
				id, named, tr.name ? tr.name : id);
		rc = 0;
		goto out;
	}
	if (!ctx->quiet)
		fprintf(stderr, "gpurun: started job %s%s\n", id, named);
	ctx_forward_say(ctx);

	dest = xasprintf("%s/runs/%s", ctx->cfg->root, id);
	struct attach_opts ao = {
		.id = id, .follow = 1, .out_fd = 1, .filter = !raw && isatty(1),
		.on_interrupt = ATTACH_INT_ASK,
		.stop_on_interrupt = stop_int, .pull = &ctx->cfg->artifacts.pull,
		.pull_interval = ctx->cfg->artifacts.interval, .pull_dest = dest,
		.notify_end = 1,
	};
	rc = job_attach(ctx, &ao, &res);
	if (res.rec.id)
		job_cache_update(ctx->cfg->root, &res.rec, 1);
	if (rc < 0) {
		gr_hintf(&ctx->err, "the job may still be running: 'gpurun logs -f %s'", id);
		goto out;
	}
	if (res.detached) {
		job_print_detached(ctx, id, tr.name);
		keep_jobs(ctx);
		rc = GR_EXIT_DETACHED;
		goto out;
	}
	if (res.interrupted) {
		rc = GR_EXIT_INTERRUPTED;
		goto out;
	}
	struct strbuf end = STRBUF_INIT;
	job_describe_end(&res.rec, &end);
	if (!ctx->quiet || job_rec_exit_code(&res.rec) != 0)
		fprintf(stderr, "gpurun: job %s%s %s\n", id, named, end.buf);
	sb_release(&end);
	rc = job_rec_exit_code(&res.rec);
	if (ctx->cfg->artifacts.pull.n && job_pull_artifacts(ctx, id) < 0) {
		gr_report(ctx);
		if (rc == 0)
			rc = GR_EXIT_SYNC;
	}
	if (res.stop_asked)
		rc = GR_EXIT_INTERRUPTED;
	keep_jobs(ctx);
out:
	job_rec_clear(&res.rec);
	sv_clear(&tr.argv);
	sv_clear(&tr.env);
	free(dest);
	free(id);
	return rc;
}
