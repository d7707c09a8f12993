/* gpurun shell: the user's login shell on the host, in the project folder,
 * under a pty when this is a terminal (else it reads commands from stdin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpurun.h"
#include "job.h"

enum { O_FORWARD = 1 };

const struct gr_opt cmd_shell_opts[] = {
	{ O_FORWARD, "forward", 'L', OPT_STRING, "PORT[:HOST]:HOSTPORT", "forward a local port to the host while it runs (as ssh -L; repeatable)", NULL, 0, 0, 0 },
	{ 0 },
};

int cmd_shell(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct remote_exec_opts o = { 0 };
	struct strvec fwd = STRVEC_INIT;
	int id, rc;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_shell_opts, &ctx->err)) > 0) {
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			rc = 0;
			goto out;
		}
		if (id == O_FORWARD)
			sv_push(&fwd, st.arg);
	}
	if (id == 0 && st.args.n)
		id = gr_errf(&ctx->err, GR_EUSAGE, "shell takes no arguments");
	if (id < 0) {
		if (st.args.n)
			gr_hintf(&ctx->err, "to run a command: gpurun exec -t -- CMD [ARGS...]");
		rc = gr_usage_error(ctx);
		goto out;
	}
	if (fwd.n && (rc = ctx_forward(ctx, fwd.v, fwd.n)) < 0)
		goto out;
	if ((rc = ctx_connect(ctx)) < 0)
		goto out;
	o.cwd = ctx->cfg->remote.path;
	o.login_shell = 1;
	o.pty = isatty(0);
	o.forward_stdin = 1;
	o.out_fd = 1;
	o.err_fd = 2;
	rc = remote_exec(ctx->conn, &o, &ctx->err);
out:
	sv_clear(&fwd);
	gr_getopt_release(&st);
	return rc;
}
