/* gpurun disconnect: end the connection [remote] persist keeps open to
 * the host (each host of a list or pool): the next command connects
 * afresh (after a change to ~/.ssh/config or known_hosts, say); commands
 * running on it finish first. */
#include <stdio.h>
#include <string.h>

#include "gpurun.h"
#include "transport.h"

const struct gr_opt cmd_disconnect_opts[] = {
	{ 0 },
};

int cmd_disconnect(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	int id, rc = 0;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_disconnect_opts, &ctx->err)) > 0)
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			goto out;
		}
	if (id < 0 || st.args.n) {
		if (id >= 0)
			gr_errf(&ctx->err, GR_EUSAGE, "disconnect takes no arguments");
		rc = gr_usage_error(ctx);
		goto out;
	}
	for (size_t i = 0; i < ctx->cfg->remote.nhosts; i++) {
		struct gr_config one = *ctx->cfg;
		long pid = 0;
		int r;

		one.remote.host = ctx->cfg->remote.hosts[i];
		if (!strcmp(one.remote.host, "local"))
			continue;
		if ((r = transport_hold_stop(&one, &pid, &ctx->err)) < 0) {
			rc = r;
			goto out;
		}
		if (!ctx->quiet)
			fprintf(stderr, r ? "gpurun: closed the connection to %s (pid %ld)\n"
					  : "gpurun: no open connection to %s\n", one.remote.host, pid);
	}
	if (!ctx->cfg->remote.nhosts) {
		gr_errf(&ctx->err, GR_ECONFIG, "no host configured ([remote] host)");
		rc = GR_ECONFIG;
	}
out:
	gr_getopt_release(&st);
	return rc;
}
