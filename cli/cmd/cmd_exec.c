/* gpurun exec: run a command on the host in the project folder, stdout and
 * stderr streamed separately, exit status passed through; with -t under a
 * pty on the host, our terminal raw meanwhile (python3, htop, pdb). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpurun.h"
#include "job.h"
#include "sync.h"

enum { O_NO_STDIN = 1, O_RAW, O_TTY, O_FORWARD, O_SYNC };

const struct gr_opt cmd_exec_opts[] = {
	{ O_NO_STDIN, NULL, 'n', OPT_FLAG, NULL, "do not forward standard input (like ssh -n)", NULL, 0, 0, 0 },
	{ O_RAW, "raw", 0, OPT_FLAG, NULL, "on a terminal too, pass the output's bytes unfiltered", NULL, 0, 0, 0 },
	{ O_TTY, "tty", 't', OPT_FLAG, NULL, "run under a terminal on the host (python3, htop, pdb); -tt: even when stdin is not one", NULL, 0, 0, 0 },
	{ O_FORWARD, "forward", 'L', OPT_STRING, "PORT[:HOST]:HOSTPORT", "forward a local port to the host while it runs (as ssh -L; repeatable)", NULL, 0, 0, 0 },
	{ O_SYNC, "sync", 's', OPT_FLAG, NULL, "sync the project first (else it runs the host's copy as last synced)", NULL, 0, 0, 0 },
	{ 0 },
};

int cmd_exec(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct remote_exec_opts o = { 0 };
	struct strvec fwd = STRVEC_INIT;
	int id, rc, tty = 0, raw = 0, sync = 0;

	gr_getopt_init(&st, argc, argv);
	st.stop_at_positional = 1;
	o.forward_stdin = 1;
	while ((id = gr_getopt(&st, cmd_exec_opts, &ctx->err)) > 0) {
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			rc = 0;
			goto out;
		}
		if (id == O_NO_STDIN)
			o.forward_stdin = 0;
		if (id == O_RAW)
			raw = 1;
		if (id == O_TTY)
			tty++;
		if (id == O_FORWARD)
			sv_push(&fwd, st.arg);
		if (id == O_SYNC)
			sync = 1;
	}
	if (id < 0) {
		rc = gr_usage_error(ctx);
		goto out;
	}
	if (!st.args.n) {
		gr_errf(&ctx->err, GR_EUSAGE, "exec needs a command to run");
		rc = gr_usage_error(ctx);
		goto out;
	}
	/* As ssh: -t wants a terminal here to be useful; -tt insists. */
	o.pty = tty >= 2 || (tty == 1 && isatty(0));
	if (tty == 1 && !o.pty && !ctx->quiet)
		fprintf(stderr, "gpurun: stdin is not a terminal: running without one on the host "
			"(-tt forces it)\n");
	if (fwd.n && (rc = ctx_forward(ctx, fwd.v, fwd.n)) < 0)
		goto out;
	if (sync) {
		struct sync_opts so = { .quiet = ctx->quiet, .show = &sync_show_default,
					.show_arg = ctx };
		if ((rc = sync_project(ctx, &so, NULL)) < 0) {
			if (rc != GR_ECANCEL)
				gr_err_prefix(&ctx->err, "sync failed");
			rc = sync_failed(ctx, rc);
			goto out;
		}
	}
	o.cwd = ctx->cfg->remote.path;
	o.argv = (const char *const *)st.args.v;
	/* Opened for this command alone (not after --sync): the EXEC rides
	 * in the bootstrap command. */
	if ((rc = ctx_connect_early(ctx, remote_exec_early, &o)) < 0)
		goto out;
	o.out_fd = 1;
	o.err_fd = 2;
	/* On a terminal the output is for eyes: without a pty on the host
	 * nothing full-screen can run, so the filter takes only what could
	 * hurt (OSC 52, title, DCS, screen clears). In a pipe or file the
	 * command's bytes are its data and pass exactly. With -t the host
	 * drives this terminal, as with ssh -t: the user asked for it. */
	o.filter_out = !raw && !o.pty && isatty(1);
	o.filter_err = !raw && !o.pty && isatty(2);
	rc = remote_exec(ctx->conn, &o, &ctx->err);
out:
	sv_clear(&fwd);
	gr_getopt_release(&st);
	return rc;
}
