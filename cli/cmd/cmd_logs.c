/* gpurun logs [-f] [--tail N] [JOB]: a job's log (default: the latest
 * job), from the start or its last N lines; -f follows it until the job
 * ends (surviving dropped connections) and exits with the job's status. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gpurun.h"
#include "job.h"

enum { O_FOLLOW = 1, O_TAIL, O_RAW };

const struct gr_opt cmd_logs_opts[] = {
	{ O_FOLLOW, "follow", 'f', OPT_FLAG, NULL, "keep printing as the job writes, until it ends", NULL, 0, 0, 0 },
	{ O_TAIL, "tail", 'n', OPT_INT, "N", "start with the last N lines", NULL, 0, 100000000, 0 },
	{ O_RAW, "raw", 0, OPT_FLAG, NULL, "on a terminal too, pass every byte (escape sequences included)", NULL, 0, 0, 0 },
	{ 0 },
};

int cmd_logs(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct job_rec r = { 0 };
	struct attach_result res = { 0 };
	int follow = 0, raw = 0, opt, rc;
	long long tail = 0;

	gr_getopt_init(&st, argc, argv);
	while ((opt = gr_getopt(&st, cmd_logs_opts, &ctx->err)) > 0) {
		if (opt == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
		if (opt == O_FOLLOW)
			follow = 1;
		if (opt == O_TAIL)
			tail = st.num;
		if (opt == O_RAW)
			raw = 1;
	}
	if (opt == 0 && st.args.n > 1)
		opt = gr_errf(&ctx->err, GR_EUSAGE, "logs takes at most one job");
	if (opt < 0) {
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	rc = job_ctx_status(ctx, st.args.n ? st.args.v[0] : "", &r);
	gr_getopt_release(&st);
	if (rc < 0)
		return rc;
	job_cache_update(ctx->cfg->root, &r, 1);
	struct attach_opts ao = {
		.id = r.id, .tail = (uint32_t)tail, .follow = follow, .out_fd = 1,
		.filter = !raw && isatty(1),
		.on_interrupt = ATTACH_INT_LEAVE,
		.notify_end = follow && !job_rec_ended(&r),
	};
	rc = job_attach(ctx, &ao, &res);
	if (res.rec.id)
		job_cache_update(ctx->cfg->root, &res.rec, 1);
	if (rc == 0 && follow) {
		if (res.ended) {
			struct strbuf end = STRBUF_INIT;
			char who[JOB_SHOWN_MAX];
			job_describe_end(&res.rec, &end);
			if (!ctx->quiet)
				fprintf(stderr, "gpurun: job %s %s\n",
					job_shown(&r, who, sizeof(who)), end.buf);
			sb_release(&end);
			rc = job_rec_exit_code(&res.rec);
		} else if (res.interrupted) {
			rc = GR_EXIT_INTERRUPTED;
		}
	}
	job_rec_clear(&r);
	job_rec_clear(&res.rec);
	return rc;
}
