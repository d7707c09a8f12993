/* gpurun exec: run a command on the host in the project folder, stdout and
 * stderr streamed separately, exit status passed through. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpurun.h"
#include "remote_exec.h"

enum { O_NO_STDIN = 1, O_RAW };

const struct gr_opt cmd_exec_opts[] = {
	{ O_NO_STDIN, NULL, 'n', OPT_FLAG, NULL, "do not forward standard input (like ssh -n)", NULL, 0, 0, 0 },
	{ O_RAW, "raw", 0, OPT_FLAG, NULL, "on a terminal too, pass the output's bytes unfiltered", NULL, 0, 0, 0 },
	{ 0 },
};

int cmd_exec(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct remote_exec_opts o = { 0 };
	int id, raw = 0, rc;

	gr_getopt_init(&st, argc, argv);
	st.stop_at_positional = 1;
	o.forward_stdin = 1;
	while ((id = gr_getopt(&st, cmd_exec_opts, &ctx->err)) > 0) {
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
		if (id == O_NO_STDIN)
			o.forward_stdin = 0;
		if (id == O_RAW)
			raw = 1;
	}
	if (id < 0) {
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	if (!st.args.n) {
		gr_errf(&ctx->err, GR_EUSAGE, "exec needs a command to run");
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	if ((rc = ctx_connect(ctx)) < 0) {
		gr_getopt_release(&st);
		return rc;
	}
	o.cwd = ctx->cfg->remote.path;
	o.argv = (const char *const *)st.args.v;
	o.out_fd = 1;
	o.err_fd = 2;
	/* On a terminal the output is for eyes: without a pty on the host
	 * nothing full-screen can run, so the filter takes only what could
	 * hurt (OSC 52, title, DCS, screen clears). In a pipe or file the
	 * command's bytes are its data and pass exactly. */
	o.filter_out = !raw && isatty(1);
	o.filter_err = !raw && isatty(2);
	rc = remote_exec(ctx->conn, &o, &ctx->err);
	gr_getopt_release(&st);
	return rc;
}
