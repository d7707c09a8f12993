/* gpurun logs [-f] [--tail N] [JOB|GROUP]: a job's log (default: the
 * latest job), from the start or its last N lines; -f follows it until the
 * job ends (surviving dropped connections) and exits with the job's
 * status. A sweep's GROUP: each job's log after a header line, oldest
 * first; -f is refused there (one status to exit with, one log to follow:
 * interleaved lines of several trainings, their progress bars included,
 * are unreadable), and names the jobs to follow one by one. --json: the
 * log as NDJSON `log` events on stdout, and with -f the job's `queued`,
 * `started` and `ended` (or `detached`) too (job_attach.h). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gpurun.h"
#include "job.h"

enum { O_FOLLOW = 1, O_TAIL, O_RAW, O_JSON };

const struct gr_opt cmd_logs_opts[] = {
	{ O_FOLLOW, "follow", 'f', OPT_FLAG, NULL, "keep printing as the job writes, until it ends", NULL, 0, 0, 0 },
	{ O_TAIL, "tail", 'n', OPT_INT, "N", "start with the last N lines", NULL, 0, 100000000, 0 },
	{ O_RAW, "raw", 0, OPT_FLAG, NULL, "on a terminal too, pass every byte (escape sequences included)", NULL, 0, 0, 0 },
	{ O_JSON, "json", 0, OPT_FLAG, NULL, "events as JSON lines on stdout: log lines (with -f: queued, started, ended)", NULL, 0, 0, 0 },
	{ 0 },
};

/* Each job of a group, oldest first, its log after "==> NAME (ID) <==". */
static int logs_group(struct gr_ctx *ctx, const struct job_pick *p, uint32_t tail, int raw)
{
	int rc = 0;

	for (size_t k = p->n; k-- > 0;) {
		const struct job_rec *r = &p->recs[k];
		struct attach_result res = { 0 };
		char who[JOB_SHOWN_MAX];
		printf("%s==> %s <==\n", k + 1 == p->n ? "" : "\n", job_shown(r, who, sizeof(who)));
		fflush(stdout);
		struct attach_opts ao = {
			.id = r->id, .tail = tail, .follow = 0, .out_fd = 1,
			.filter = !raw && isatty(1), .on_interrupt = ATTACH_INT_LEAVE,
		};
		int one = job_attach(ctx, &ao, &res);
		if (res.rec.id)
			job_cache_update(ctx->cfg->root, &res.rec, 1);
		job_rec_clear(&res.rec);
		if (one < 0) {
			gr_report(ctx);
			gr_err_clear(&ctx->err);
			rc = GR_EXIT_FAILURE;
		}
	}
	return rc;
}

int cmd_logs(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct job_rec r = { 0 };
	struct job_pick p = { 0 };
	struct attach_result res = { 0 };
	int follow = 0, raw = 0, json = 0, opt, rc;
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
		if (opt == O_JSON)
			json = 1;
	}
	if (opt == 0 && st.args.n > 1)
		opt = gr_errf(&ctx->err, GR_EUSAGE, "logs takes at most one job");
	if (opt < 0) {
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	rc = job_pick(ctx, st.args.n ? st.args.v[0] : "", &p);
	gr_getopt_release(&st);
	if (rc < 0)
		return rc;
	job_cache_update(ctx->cfg->root, p.recs, p.n);
	if (p.group && follow) {
		struct strbuf names = STRBUF_INIT;
		char who[JOB_SHOWN_MAX];
		for (size_t k = p.n; k-- > 0;)
			sb_addf(&names, "%s%s", k + 1 == p.n ? "" : ", ", job_shown(&p.recs[k], who, sizeof(who)));
		rc = gr_errf(&ctx->err, GR_EUSAGE, "logs -f follows one job; group %s has %zu: %s",
			     p.group, p.n, names.buf);
		gr_hintf(&ctx->err, "follow one with 'gpurun logs -f %s', or see them all "
			 "without -f: 'gpurun logs %s'", p.recs[p.n - 1].name && *p.recs[p.n - 1].name ?
			 p.recs[p.n - 1].name : p.recs[p.n - 1].id, p.group);
		sb_release(&names);
		job_pick_free(&p);
		return rc;
	}
	if (p.group && json) {
		rc = gr_errf(&ctx->err, GR_EUSAGE, "logs --json shows one job; %s is a group of %zu",
			     p.group, p.n);
		gr_hintf(&ctx->err, "name one of its jobs ('gpurun status %s' lists them)", p.group);
		job_pick_free(&p);
		return rc;
	}
	if (p.group) {
		rc = logs_group(ctx, &p, (uint32_t)tail, raw);
		job_pick_free(&p);
		return rc;
	}
	r = p.recs[0];
	p.recs[0] = (struct job_rec){ 0 };
	job_pick_free(&p);
	job_cache_update(ctx->cfg->root, &r, 1);
	struct attach_opts ao = {
		.id = r.id, .tail = (uint32_t)tail, .follow = follow, .out_fd = 1,
		.filter = !raw && isatty(1),
		.on_interrupt = ATTACH_INT_LEAVE,
		.notify_end = follow && !job_rec_ended(&r), .json = json,
	};
	rc = job_attach(ctx, &ao, &res);
	if (res.rec.id)
		job_cache_update(ctx->cfg->root, &res.rec, 1);
	if (rc == 0 && follow && json)
		res.ended ? job_event_ended(&res.rec) : job_event_detached(r.id);
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
