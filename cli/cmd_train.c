/* gpurun train: sync, build (streamed; a failed build starts nothing), start
 * [train] command as a detached job on the host, follow its log, pull its
 * artifacts when it ends, and exit with its status. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpurun.h"
#include "job_art.h"
#include "job_attach.h"
#include "job_client.h"
#include "remote_exec.h"
#include "sync.h"

enum { O_DETACH = 1, O_STOP_INT, O_RAW };

const struct gr_opt cmd_train_opts[] = {
	{ O_DETACH, "detach", 'd', OPT_FLAG, NULL, "return once the job has started; print its id", NULL, 0, 0, 0 },
	{ O_STOP_INT, "stop-on-interrupt", 0, OPT_FLAG, NULL, "Ctrl-C stops the job instead of asking", NULL, 0, 0, 0 },
	{ O_RAW, "raw", 0, OPT_FLAG, NULL, "on a terminal too, pass the build's and the log's bytes unfiltered", NULL, 0, 0, 0 },
	{ 0 },
};

static int build(struct gr_ctx *ctx, int raw, uint32_t *fresh_ms)
{
	const char *cmd = ctx->cfg->build.command;
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	struct remote_exec_opts o = { 0 };
	uint64_t t0 = now_ms();
	int rc;

	*fresh_ms = 0;
	if (!cmd || !*cmd)
		return 0;
	if (!ctx->quiet)
		fprintf(stderr, "gpurun: building: %s\n", cmd);
	o.cwd = ctx->cfg->remote.path;
	o.argv = argv;
	o.out_fd = 2; /* stdout is the job's log */
	o.err_fd = 2;
	o.filter_out = o.filter_err = !raw && isatty(2);
	rc = remote_exec(ctx->conn, &o, &ctx->err);
	if (rc < 0) {
		gr_err_prefix(&ctx->err, "build");
		return rc;
	}
	if (rc != 0) {
		fprintf(stderr, "gpurun: build failed with status %d; no job started\n", rc);
		return rc;
	}
	/* What the build wrote since it started is copied into the job's
	 * snapshot, not linked (a later build may rewrite it in place). */
	*fresh_ms = (uint32_t)(now_ms() - t0) + 2000;
	return 0;
}

int cmd_train(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct sync_opts so = { 0 };
	struct sync_stats ss;
	struct attach_result res = { 0 };
	int detach = 0, stop_int = 0, raw = 0, id_opt, rc;
	uint32_t fresh_ms = 0;
	char *id = NULL, *dest = NULL;

	gr_getopt_init(&st, argc, argv);
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
	}
	if (id_opt == 0 && st.args.n > 0)
		id_opt = gr_errf(&ctx->err, GR_EUSAGE, "train takes no arguments");
	gr_getopt_release(&st);
	if (id_opt < 0)
		return gr_usage_error(ctx);
	if (!ctx->cfg->train.command || !*ctx->cfg->train.command) {
		gr_errf(&ctx->err, GR_ECONFIG, "no [train] command to run");
		gr_hintf(&ctx->err, "set it in gpurun.ini, e.g. 'command = python train.py'");
		return GR_ECONFIG;
	}

	so.quiet = ctx->quiet;
	if ((rc = sync_project(ctx, &so, &ss)) < 0) {
		gr_err_prefix(&ctx->err, "sync failed");
		if (rc == GR_EHOSTKEY || rc == GR_EAUTH || rc == GR_ECONFIG || rc == GR_ESSH ||
		    rc == GR_ETIMEOUT || rc == GR_EAGENT || rc == GR_EUNSUPP)
			return rc; /* not the sync's fault: its own code */
		gr_report(ctx);
		return GR_EXIT_SYNC;
	}
	if ((rc = ctx_connect(ctx)) < 0)
		return rc;
	if ((rc = build(ctx, raw, &fresh_ms)) != 0)
		return rc;
	/* From here a Ctrl-C waits for job_attach to say what it means (it
	 * unblocks these once its handlers are in place): dying between the
	 * start and the attach would leave the user no word about the job. */
	sigset_t block;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGHUP);
	sigprocmask(SIG_BLOCK, &block, NULL);
	rc = job_start(ctx->conn, ctx->cfg->remote.path, ctx->cfg->train.command,
		       ctx->cfg->train.gpus, fresh_ms, &id, &ctx->err);
	if (rc < 0) {
		if (rc == GR_ENOTFOUND && strstr(ctx->err.msg, "remote folder"))
			gr_hintf(&ctx->err, "run 'gpurun sync' first, or check [remote] path");
		gr_err_prefix(&ctx->err, "cannot start the job");
		return rc;
	}
	struct job_rec rec = { .id = id, .state = (char *)"running",
			       .created_ms = (uint64_t)time(NULL) * 1000 };
	job_cache_update(ctx->cfg->root, &rec, 1);
	if (detach) {
		printf("%s\n", id);
		if (!ctx->quiet)
			fprintf(stderr, "gpurun: started job %s\nhint: follow it with 'gpurun logs -f %s'\n",
				id, id);
		free(id);
		return 0;
	}
	if (!ctx->quiet)
		fprintf(stderr, "gpurun: started job %s\n", id);

	dest = xasprintf("%s/runs/%s", ctx->cfg->root, id);
	struct attach_opts ao = {
		.id = id, .follow = 1, .out_fd = 1, .filter = !raw && isatty(1),
		.on_interrupt = ATTACH_INT_ASK,
		.stop_on_interrupt = stop_int, .pull = &ctx->cfg->artifacts.pull,
		.pull_interval = ctx->cfg->artifacts.interval, .pull_dest = dest,
	};
	rc = job_attach(ctx, &ao, &res);
	if (res.rec.id)
		job_cache_update(ctx->cfg->root, &res.rec, 1);
	if (rc < 0) {
		gr_hintf(&ctx->err, "the job may still be running: 'gpurun logs -f %s'", id);
		goto out;
	}
	if (res.detached) {
		job_print_detached(ctx, id);
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
		fprintf(stderr, "gpurun: job %s %s\n", id, end.buf);
	sb_release(&end);
	rc = job_rec_exit_code(&res.rec);
	if (ctx->cfg->artifacts.pull.n && job_pull_artifacts(ctx, id, 0) < 0) {
		gr_report(ctx);
		if (rc == 0)
			rc = GR_EXIT_SYNC;
	}
	if (res.stop_asked)
		rc = GR_EXIT_INTERRUPTED;
out:
	job_rec_clear(&res.rec);
	free(dest);
	free(id);
	return rc;
}
