/* gpurun forward: local ports forwarded to the host (TensorBoard, Jupyter)
 * until Ctrl-C, over the connection that carries the agent; a dropped
 * connection is made again, the local ports staying open meanwhile. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "ctx.h"
#include "gpurun.h"

const struct gr_opt cmd_forward_opts[] = { { 0 } };

static int sig_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	int e = errno;
	unsigned char c = (unsigned char)sig;
	if (write(sig_pipe[1], &c, 1) < 0) {
		/* full: one is enough */
	}
	errno = e;
}

/* Wait ms for a signal: 1 if one came. */
static int sleep_sig(int ms)
{
	struct pollfd p = { sig_pipe[0], POLLIN, 0 };

	return poll(&p, 1, ms) > 0;
}

static int serve(struct gr_ctx *ctx)
{
	int backoff = 250, rc;

	for (;;) {
		struct pollfd extra[1] = { { sig_pipe[0], POLLIN, 0 } };
		struct gr_frame f;

		if (!ctx->conn) {
			gr_err_clear(&ctx->err);
			rc = ctx_connect(ctx);
			if (rc == GR_EHOSTKEY || rc == GR_EAUTH || rc == GR_ECONFIG)
				return rc;
			if (rc < 0) {
				if (ctx->verbose)
					fprintf(stderr, "gpurun: reconnect failed (%s); next try in %d ms\n",
						ctx->err.msg, backoff);
				if (sleep_sig(backoff))
					return 0;
				backoff = backoff * 2 > 5000 ? 5000 : backoff * 2;
				continue;
			}
			backoff = 250;
			if (!ctx->quiet)
				fprintf(stderr, "gpurun: reconnected\n");
		}
		rc = conn_wait(ctx->conn, &f, extra, 1, -1, &ctx->err);
		if (rc == 2)
			return 0; /* Ctrl-C (or TERM, HUP): the way to stop */
		if (rc < 0) {
			if (!ctx->quiet)
				fprintf(stderr, "gpurun: connection lost (%s); reconnecting\n",
					ctx->err.msg);
			conn_close(ctx->conn);
			ctx->conn = NULL;
		}
		/* A frame: nothing was asked; ignore it. */
	}
}

int cmd_forward(int argc, char **argv, struct gr_ctx *ctx)
{
	struct sigaction sa = { 0 }, old_int, old_term, old_hup;
	struct gr_getopt st;
	int id, rc;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_forward_opts, &ctx->err)) > 0)
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
	if (id == 0 && !st.args.n)
		id = gr_errf(&ctx->err, GR_EUSAGE, "forward needs a port (6006, or 8888:8889)");
	if (id < 0 || (rc = ctx_forward(ctx, st.args.v, st.args.n)) < 0) {
		gr_getopt_release(&st);
		return id < 0 ? gr_usage_error(ctx) : rc;
	}
	gr_getopt_release(&st);
	if ((rc = ctx_connect(ctx)) < 0)
		return rc;
	ctx_forward_say(ctx);
	if (!ctx->quiet)
		fprintf(stderr, "gpurun: press Ctrl-C to stop forwarding\n");

	if (compat_pipe_cloexec(sig_pipe, 1) < 0)
		return gr_errf(&ctx->err, GR_EIO, "pipe: %s", strerror(errno));
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	rc = serve(ctx);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	close(sig_pipe[0]);
	close(sig_pipe[1]);
	sig_pipe[0] = sig_pipe[1] = -1;
	if (rc == 0 && !ctx->quiet)
		fprintf(stderr, "gpurun: stopped forwarding\n");
	return rc;
}
