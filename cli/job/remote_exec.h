/* Run one command through the agent's EXEC request and relay it: stdout
 * and stderr to two fds as they arrive, stdin forwarded, Ctrl-C passed on
 * as SIGINT (a second one gives up); or under a pty with our terminal raw.
 * Shared by exec, shell, the build step of train, and the pre-push hook. */
#ifndef GR_REMOTE_EXEC_H
#define GR_REMOTE_EXEC_H

#include "ctx.h"

struct remote_exec_opts {
	const char *cwd;              /* folder on the host (remote ~ allowed) */
	const char *const *argv;      /* NULL-terminated */
	const char *const *env;       /* "K=V" strings, NULL-terminated; may be NULL */
	int forward_stdin;            /* relay our stdin to the command */
	int out_fd, err_fd;           /* where its stdout / stderr go */
	int filter_out, filter_err;   /* that fd is a terminal: only safe bytes (term_filter.h) */
	/* Under a pty on the host (exec -t, shell): one output stream (to
	 * out_fd), TERM and the window size passed on and kept up to date
	 * (SIGWINCH), our terminal raw meanwhile when stdin is one. The
	 * host then drives this terminal, as with ssh -t: no filter. */
	int pty;
	int login_shell;              /* the user's login shell; argv is empty */
	/* Set by remote_exec_early: the EXEC went in the bootstrap command
	 * under this id (0: remote_exec sends it). */
	uint32_t early_id;
};

/* conn_opts.early for a connection opened just to run this command (arg:
 * its struct remote_exec_opts, complete but for the fds): the EXEC rides
 * in the bootstrap command, so the command starts as the agent does, a
 * round trip sooner. Not with env (it would show in the host's process
 * list for a moment): then remote_exec sends it as usual. */
void remote_exec_early(void *arg, struct gr_conn *c, struct strbuf *frames);

/* Returns the command's exit status (0-255, 128+N for signal N), or a
 * negative GR_E* code with err set (the connection dropped before the
 * status arrived: never reported as success). */
int remote_exec(struct gr_conn *c, const struct remote_exec_opts *o, struct gr_err *err);

#endif
