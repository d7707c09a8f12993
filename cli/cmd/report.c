/* The one place an error becomes what the user reads: "gpurun: MSG" and
 * "hint: HINT", as git does, and a usage error with the command's
 * synopsis (see gpurun.h). Modules return errors; commands and main
 * report them here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurun.h"
#include "term.h"

void gr_report(const struct gr_ctx *ctx)
{
	const char *msg = ctx->err.msg[0] ? ctx->err.msg : gr_strcode(ctx->err.code);
	const char *red = ctx->color ? "\033[1;31m" : "", *yellow = ctx->color ? "\033[33m" : "";
	const char *reset = ctx->color ? "\033[m" : "";

	/* Messages quote the host's words (names, paths, its errors): no
	 * control byte of theirs reaches the terminal (term_filter.h). */
	fprintf(stderr, "%sgpurun:%s %s\n", red, reset, ts(msg));
	if (ctx->err.hint[0])
		fprintf(stderr, "%shint:%s %s\n", yellow, reset, ts(ctx->err.hint));
}

int gr_usage_error(struct gr_ctx *ctx)
{
	if (ctx->cmd && !ctx->err.hint[0]) {
		struct strbuf sb = STRBUF_INIT;
		help_usage_line(ctx->cmd, &sb);
		gr_hintf(&ctx->err, "%s (see 'gpurun %s --help')", sb.buf, ctx->cmd->name);
		sb_release(&sb);
	}
	ctx->err.code = GR_EUSAGE;
	return GR_EUSAGE;
}

int sync_failed(struct gr_ctx *ctx, int rc)
{
	int x = gr_exit_code(rc);

	if (rc == GR_ECANCEL || rc == GR_EUSAGE || x == GR_EXIT_CONFIG || x == GR_EXIT_CONNECT ||
	    x == GR_EXIT_AUTH)
		return rc;
	gr_report(ctx);
	return GR_EXIT_SYNC;
}
