/* Placeholder until the sync engine lands: sends nothing. */
#include "sync.h"

int sync_project(struct gr_ctx *ctx, const struct sync_opts *o, struct sync_stats *st)
{
	(void)o;
	if (st)
		*st = (struct sync_stats){ 0 };
	return ctx_connect(ctx);
}
