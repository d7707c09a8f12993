/* gpurun init: write the commented gpurun.ini template here. */
#include <stdio.h>

#include "gpurun.h"

const struct gr_opt cmd_init_opts[] = { { 0 } };

int cmd_init(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	int id, rc;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_init_opts, &ctx->err)) > 0)
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
	gr_getopt_release(&st);
	if (id < 0)
		return gr_usage_error(ctx);
	const char *path = ctx->config_file ? ctx->config_file : "gpurun.ini";
	if ((rc = config_write_template(path, &ctx->err)) < 0)
		return rc;
	if (!ctx->quiet)
		fprintf(stderr, "wrote %s; set [remote] host, then run 'gpurun doctor'\n", path);
	return 0;
}
