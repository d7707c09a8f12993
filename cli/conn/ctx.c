/* The session every command hands the engines (see ctx.h): opening the
 * connection with the ports it forwards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctx.h"
#include "forward.h"

void ctx_say(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "gpurun: %s\n", msg);
}

void ctx_conn_opts(struct gr_ctx *ctx, struct conn_opts *o)
{
	*o = (struct conn_opts){ .accept_new = ctx->accept_new, .verbose = ctx->verbose,
				 .fwd = ctx->fwd, .say = ctx_say, .say_arg = ctx };
}

int ctx_connect(struct gr_ctx *ctx)
{
	struct conn_opts o;

	if (ctx->conn)
		return 0;
	ctx_conn_opts(ctx, &o);
	return conn_open(&ctx->conn, ctx->cfg, &o, &ctx->err);
}

int ctx_connect_early(struct gr_ctx *ctx, void (*early)(void *, struct gr_conn *, struct strbuf *),
		      void *arg)
{
	struct conn_opts o;

	if (ctx->conn)
		return 0;
	ctx_conn_opts(ctx, &o);
	o.early = early;
	o.early_arg = arg;
	return conn_open(&ctx->conn, ctx->cfg, &o, &ctx->err);
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
	fwd_set_notify(ctx->fwd, ctx_say, ctx, ctx->verbose);
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
