/* gpurun pull [JOB|GROUP]: the files matching [artifacts] pull in the
 * job's folder on the host (where its command ran) come back into
 * runs/<job>/ (a sweep's GROUP: each job's into its own runs/<id>/);
 * only new or changed ones travel. When nothing matches, it says so and
 * lists what the job wrote. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpurun.h"
#include "pull.h"
#include "term.h"
#include "job.h"
#include "sync.h"

/* Nothing matched: say so, and what the job did write. */
static void say_none(struct gr_ctx *ctx, const char *id, const struct art_stats *st)
{
	const struct strvec *pull = &ctx->cfg->artifacts.pull;
	struct strbuf pats = STRBUF_INIT;
	char sz[32];

	for (size_t i = 0; i < pull->n; i++)
		sb_addf(&pats, "%s%s", i ? " " : "", pull->v[i]);
	fprintf(stderr, "gpurun: no file of job %s matches [artifacts] pull (%s)\n", id, pats.buf);
	sb_release(&pats);
	if (!st->written) {
		fprintf(stderr, "gpurun: the job wrote no file in its folder\n");
		return;
	}
	fprintf(stderr, "gpurun: the job wrote %u file%s in its folder:\n", st->written,
		st->written == 1 ? "" : "s");
	const char *first = NULL;
	for (size_t i = 0; i < st->names.n; i++) {
		char *name = xstrdup(st->names.v[i]), *tab = strrchr(name, '\t');
		long long size = 0;
		if (tab) {
			*tab = '\0';
			parse_ll(tab + 1, 0, (long long)(~0ULL >> 1), &size);
		}
		char *q = sync_quote(name);
		fprintf(stderr, "  %s (%s)\n", q, fmt_size((uint64_t)size, sz, sizeof(sz)));
		free(q);
		if (!first)
			first = st->names.v[i];
		free(name);
	}
	if (st->written > st->names.n)
		fprintf(stderr, "  ... and %zu more\n", (size_t)st->written - st->names.n);
	if (first) {
		size_t n = strcspn(first, "/\t");
		int dir = first[n] == '/';
		char *top = xstrndup(first, n); /* the host's text: escaped */
		fprintf(stderr, "hint: [artifacts] pull names files as the job sees them, relative to "
			"its working folder: e.g. 'pull = %s%s'\n", ts(top), dir ? "/" : "");
		free(top);
	}
}

const struct gr_opt cmd_pull_opts[] = { { 0 } };

int job_pull_artifacts(struct gr_ctx *ctx, const char *id, struct art_stats *got)
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
		if (st.extracted && st.deltas)
			fprintf(stderr, "gpurun: pulled %u artifact%s (%s sent, %u as %s) into "
				"runs/%s/; %u unchanged\n", st.extracted, st.extracted == 1 ? "" : "s",
				fmt_size(st.bytes, sz, sizeof(sz)), st.deltas,
				st.deltas == 1 ? "a delta" : "deltas", id, st.matched - st.sent);
		else if (st.extracted)
			fprintf(stderr, "gpurun: pulled %u artifact%s (%s) into runs/%s/; %u unchanged\n",
				st.extracted, st.extracted == 1 ? "" : "s",
				fmt_size(st.bytes, sz, sizeof(sz)), id, st.matched - st.sent);
		else if (st.matched)
			fprintf(stderr, "gpurun: artifacts in runs/%s/ are up to date (%u file%s)\n",
				id, st.matched, st.matched == 1 ? "" : "s");
		else
			say_none(ctx, id, &st);
	}
	for (size_t i = 0; rc == 0 && ctx->verbose && i < st.whole.n; i++) {
		char *tab = strchr(st.whole.v[i], '\t');
		if (tab)
			*tab = '\0';
		fprintf(stderr, "gpurun: '%s' came whole: %s\n", ts(st.whole.v[i]), tab ? ts(tab + 1) : "");
	}
	if (got)
		*got = st;
	else
		art_stats_release(&st);
	if (rc < 0)
		gr_err_prefix(&ctx->err, "cannot pull the artifacts of job %s", id);
	/* A job that brought nothing back leaves no empty runs/JOB/ (rmdir
	 * removes only an empty folder: a cut pull's part stays). */
	rmdir(dest);
	free(dest);
	return rc;
}


int cmd_pull(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct job_pick p = { 0 };
	int opt, rc, failed = 0;

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
		gr_hintf(&ctx->err, "list globs relative to the job's folder, where its command runs, "
			 "e.g. 'pull = checkpoints/ *.csv'");
		return GR_ECONFIG;
	}
	rc = job_pick(ctx, st.args.n ? st.args.v[0] : "", &p);
	gr_getopt_release(&st);
	if (rc < 0)
		return rc;
	job_cache_update(ctx->cfg->root, p.recs, p.n);
	/* A group: every job, oldest first; one that fails does not keep
	 * the others' artifacts back. */
	for (size_t k = p.n; k-- > 0;) {
		if (job_pull_artifacts(ctx, p.recs[k].id, NULL) < 0) {
			gr_report(ctx);
			gr_err_clear(&ctx->err);
			failed = 1;
		}
	}
	job_pick_free(&p);
	return failed ? GR_EXIT_SYNC : 0;
}
