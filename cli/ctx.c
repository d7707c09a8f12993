/* What every command shares besides the tables: reporting an error the
 * way git does, a usage error with the synopsis, opening the connection.
 * In libgr (not main.c) so unit tests can link the command table. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forward.h"
#include "gpurun.h"
#include "term_filter.h"

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

/* "unknown option '-v'" for an option that is global: say where it goes. */
static int global_option_hint(struct gr_ctx *ctx)
{
	static const char pre[] = "unknown option '";
	char word[64];
	const char *p = ctx->err.msg, *end;

	if (strncmp(p, pre, sizeof(pre) - 1))
		return 0;
	p += sizeof(pre) - 1;
	if (!(end = strchr(p, '\'')) || (size_t)(end - p) >= sizeof(word))
		return 0;
	memcpy(word, p, (size_t)(end - p));
	word[end - p] = 0;
	if (!gr_opt_lookup(gr_global_opts, word))
		return 0;
	gr_hintf(&ctx->err, "'%s' is a global option: put it before the command (gpurun %s %s ...)",
		 word, word, ctx->cmd->name);
	return 1;
}

int gr_usage_error(struct gr_ctx *ctx)
{
	if (ctx->cmd && !ctx->err.hint[0] && !global_option_hint(ctx)) {
		struct strbuf sb = STRBUF_INIT;
		help_usage_line(ctx->cmd, &sb);
		gr_hintf(&ctx->err, "%s (see 'gpurun %s --help')", sb.buf, ctx->cmd->name);
		sb_release(&sb);
	}
	ctx->err.code = GR_EUSAGE;
	return GR_EUSAGE;
}

int ctx_connect(struct gr_ctx *ctx)
{
	struct conn_opts o = { .accept_new = ctx->accept_new, .verbose = ctx->verbose,
			       .fwd = ctx->fwd };

	if (ctx->conn)
		return 0;
	return conn_open(&ctx->conn, ctx->cfg, &o, &ctx->err);
}

static void fwd_say(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "gpurun: %s\n", msg);
}

int ctx_forward(struct gr_ctx *ctx, char *const *args, size_t n)
{
	struct fwd_spec *specs = xcalloc(n ? n : 1, sizeof(*specs));
	const struct gr_config *cfg = ctx->cfg;
	int listen, rc = 0;
	size_t got = 0;

	for (; got < n; got++)
		if ((rc = fwd_spec_parse(args[got], &specs[got], &ctx->err)) < 0)
			goto out;
	/* ssh -L takes the ports itself with transport = openssh. */
	listen = !(cfg->remote.transport == GR_TRANSPORT_OPENSSH &&
		   !(cfg->remote.host && !strcmp(cfg->remote.host, "local")));
	if ((rc = fwd_new(&ctx->fwd, specs, n, listen, &ctx->err)) < 0)
		goto out;
	fwd_set_notify(ctx->fwd, fwd_say, ctx, ctx->verbose);
out:
	for (size_t i = 0; i < got; i++)
		fwd_spec_release(&specs[i]);
	free(specs);
	return rc;
}

void ctx_forward_say(const struct gr_ctx *ctx)
{
	const struct fwd_spec *specs;
	size_t n;

	if (!ctx->fwd || ctx->quiet)
		return;
	specs = fwd_specs(ctx->fwd, &n);
	for (size_t i = 0; i < n; i++) {
		char d[600];
		fwd_spec_describe(&specs[i], d, sizeof(d));
		fprintf(stderr, "gpurun: forwarding %s (%s)\n", d, ctx->cfg->remote.host);
	}
}
