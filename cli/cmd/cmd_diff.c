/* gpurun diff [--stat] JOB_A [JOB_B]: how JOB_B's code and config differ
 * from JOB_A's, as the host keeps their snapshots (job_snapdiff.h), as a
 * unified diff. One JOB: it against the latest job. Not against the local
 * work tree: both sides are then snapshots that ran, taken by the same
 * rules (files made on the host, persistent paths, ignore rules), and
 * what the local tree changed since a job is git's to tell (`status JOB`
 * names the commit it ran from). Exits 0 whether or not they differ, as
 * git diff does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurun.h"
#include "job.h"

enum { O_STAT = 1 };

const struct gr_opt cmd_diff_opts[] = {
	{ O_STAT, "stat", 0, OPT_FLAG, NULL, "a summary: each changed file and its lines added and removed", NULL, 0, 0, 0 },
	{ 0 },
};

/* JOB (an id, a prefix, a name; not a group) to its record. */
static int pick_one(struct gr_ctx *ctx, const char *want, struct job_rec *r)
{
	struct job_pick p;
	int rc = job_pick(ctx, want, &p);

	if (rc == 0 && p.group) {
		rc = gr_errf(&ctx->err, GR_EUSAGE, "'%s' is a sweep of %zu jobs; diff compares two "
			     "jobs", want, p.n);
		gr_hintf(&ctx->err, "name one of them (gpurun status %s lists them)", want);
	}
	if (rc == 0) {
		*r = p.recs[0];
		p.recs[0] = (struct job_rec){ 0 };
	}
	job_pick_free(&p);
	return rc;
}

int cmd_diff(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct job_rec ra = { 0 }, rb = { 0 };
	struct snap_side a = { .conf = STRVEC_INIT }, b = { .conf = STRVEC_INIT };
	int stat = 0, differ = 0, opt, rc;
	char *wa = NULL, *wb = NULL;

	gr_getopt_init(&st, argc, argv);
	while ((opt = gr_getopt(&st, cmd_diff_opts, &ctx->err)) > 0) {
		if (opt == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
		if (opt == O_STAT)
			stat = 1;
	}
	if (opt == 0 && (st.args.n < 1 || st.args.n > 2))
		opt = gr_errf(&ctx->err, GR_EUSAGE, "diff takes one or two jobs");
	if (opt < 0) {
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	wa = xstrdup(st.args.v[0]);
	wb = xstrdup(st.args.n > 1 ? st.args.v[1] : "");
	gr_getopt_release(&st);

	if ((rc = pick_one(ctx, wa, &ra)) < 0 || (rc = pick_one(ctx, wb, &rb)) < 0)
		goto out;
	char sa[JOB_SHOWN_MAX], sb[JOB_SHOWN_MAX];
	job_shown(&ra, sa, sizeof(sa));
	job_shown(&rb, sb, sizeof(sb));
	if (!strcmp(ra.id, rb.id)) {
		if (!ctx->quiet)
			fprintf(stderr, "gpurun: both name job %s: nothing to compare%s\n", sa,
				*wb ? "" : " (one JOB is compared with the latest job)");
		rc = 0;
		goto out;
	}
	if ((rc = job_snap_list(ctx->conn, ctx->cfg->remote.path, ra.id, rb.id, &a, &b, &ctx->err)) < 0)
		goto out;
	/* The listing must be of the jobs asked for. */
	if (strcmp(a.id, ra.id) || strcmp(b.id, rb.id)) {
		rc = gr_errf(&ctx->err, GR_EPROTO, "the host listed jobs %s and %s, not the ones asked "
			     "for; refusing them", a.id, b.id);
		goto out;
	}
	if (!ctx->quiet)
		fprintf(stderr, "gpurun: from job %s to job %s\n", sa, sb);
	rc = job_snap_diff(ctx->conn, ctx->cfg->remote.path, &a, &b, stat, &differ, &ctx->err);
	if (rc == 0 && !differ && !ctx->quiet)
		fprintf(stderr, "gpurun: same code and config\n");
out:
	job_snap_side_free(&a);
	job_snap_side_free(&b);
	job_rec_clear(&ra);
	job_rec_clear(&rb);
	free(wa);
	free(wb);
	return rc;
}
