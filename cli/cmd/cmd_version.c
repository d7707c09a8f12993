/* gpurun version: the same line as --version and -V, for those who type
 * it as a command (docker version, kubectl version, gh version). */
#include <stdio.h>

#include "agent_hash.h"
#include "gpurun.h"
#include "proto.h"

#ifndef GR_VERSION
#define GR_VERSION "0.1.0"
#endif

const struct gr_opt cmd_version_opts[] = {
	{ 0 },
};

void gr_print_version(FILE *out)
{
	fprintf(out, "gpurun %s (agent %s, protocol %d)\n", GR_VERSION, GR_AGENT_HASH,
		GR_PROTO_VERSION);
}

int cmd_version(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	int id, rc = 0;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_version_opts, &ctx->err)) > 0)
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			goto out;
		}
	if (id < 0) {
		rc = gr_usage_error(ctx);
		goto out;
	}
	if (st.args.n) {
		gr_errf(&ctx->err, GR_EUSAGE, "version takes no arguments");
		rc = gr_usage_error(ctx);
		goto out;
	}
	gr_print_version(stdout);
out:
	gr_getopt_release(&st);
	return rc;
}
