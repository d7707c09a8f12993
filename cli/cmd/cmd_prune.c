/* gpurun prune [--keep N] [--older-than AGE] [--dry-run]: remove the
 * project's ended jobs from the host, all but the N newest and/or those
 * created more than AGE ago (both given: both must hold). Without
 * either, [jobs] keep decides. A job that has not ended is never
 * removed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurun.h"
#include "job.h"

enum { O_KEEP = 1, O_OLDER, O_DRY };

const struct gr_opt cmd_prune_opts[] = {
	{ O_KEEP, "keep", 'k', OPT_INT, "N", "keep the N newest jobs", NULL, 0, 1000000, 0 },
	{ O_OLDER, "older-than", 0, OPT_STRING, "AGE", "only jobs created more than AGE ago (90m, 12h, 7d, 2w)", NULL, 0, 0, 0 },
	{ O_DRY, "dry-run", 'n', OPT_FLAG, NULL, "list what would be removed, remove nothing", NULL, 0, 0, 0 },
	{ 0 },
};

/* "90m", "12h", "7d", "2w", "3600s" or seconds. -1 if malformed. */
static long long parse_age(const char *s)
{
	static const struct { char unit; long long secs; } units[] = {
		{ 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 }, { 'w', 7 * 86400 },
	};
	size_t n = strlen(s);
	long long v, mul = 1;
	char *num;

	if (!n)
		return -1;
	for (size_t i = 0; i < GR_ARRAY_SIZE(units); i++)
		if (s[n - 1] == units[i].unit) {
			mul = units[i].secs;
			n--;
			break;
		}
	num = xstrndup(s, n);
	int bad = parse_ll(num, 0, (1LL << 40) / mul, &v) < 0;
	free(num);
	return bad ? -1 : v * mul;
}

int cmd_prune(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct job_rm_report rep = { 0 };
	struct strvec gone = STRVEC_INIT;
	long long keep = -1, older = 0;
	int opt, rc, dry = 0;
	char sz[32];

	gr_getopt_init(&st, argc, argv);
	while ((opt = gr_getopt(&st, cmd_prune_opts, &ctx->err)) > 0) {
		if (opt == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
		if (opt == O_KEEP)
			keep = st.num;
		if (opt == O_DRY)
			dry = 1;
		if (opt == O_OLDER && (older = parse_age(st.arg)) <= 0) {
			opt = gr_errf(&ctx->err, GR_EUSAGE, "--older-than: '%s' is not an age like 90m, "
				      "12h, 7d or 2w", st.arg);
			break;
		}
	}
	if (opt == 0 && st.args.n)
		opt = gr_errf(&ctx->err, GR_EUSAGE, "prune takes no arguments");
	if (opt == 0 && keep < 0 && !older) {
		if (ctx->cfg->jobs.keep > 0)
			keep = ctx->cfg->jobs.keep;
		else
			opt = gr_errf(&ctx->err, GR_EUSAGE, "say which jobs to remove: --keep N, "
				      "--older-than AGE, or set [jobs] keep");
	}
	gr_getopt_release(&st);
	if (opt < 0)
		return gr_usage_error(ctx);
	if ((rc = ctx_connect(ctx)) < 0 ||
	    (rc = job_prune(ctx->conn, ctx->cfg->remote.path, keep < 0 ? 0 : (uint32_t)keep,
			    (uint64_t)older, dry, &rep, &ctx->err)) < 0)
		goto out;
	for (size_t i = 0; i < rep.n; i++) {
		if (dry)
			printf("would remove %s (%s)\n", rep.v[i].id, fmt_size(rep.v[i].bytes, sz, sizeof(sz)));
		else
			sv_push(&gone, rep.v[i].id);
	}
	if (!ctx->quiet && !dry)
		fprintf(stderr, "gpurun: removed %zu job%s (%s freed); %u left\n", rep.n,
			rep.n == 1 ? "" : "s", fmt_size(rep.freed, sz, sizeof(sz)), rep.kept);
	job_cache_forget(ctx->cfg->root, &gone);
	rc = 0;
out:
	job_rm_report_free(&rep);
	sv_clear(&gone);
	return rc;
}
