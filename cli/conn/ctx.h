/* The session every command hands the engines (sync, pull, jobs): the
 * loaded config, the connection, the error slot, and how the user runs
 * us (verbosity, colour, a terminal to ask on). The command table is the
 * commands' own (gpurun.h); engines see only this. */
#ifndef GR_CTX_H
#define GR_CTX_H

#include "config.h"
#include "conn.h"
#include "err.h"
#include "util.h"
#include "forward.h"

struct gr_cmd;

struct gr_ctx {
	struct gr_config *cfg;     /* loaded before the command if it needs it */
	struct gr_conn *conn;      /* opened by ctx_connect() */
	struct gr_err err;         /* what went wrong, for main to print */
	int verbose;               /* -v count */
	int quiet;                 /* -q */
	int color;                 /* colour on stderr (terminal, no NO_COLOR) */
	int progress;              /* progress bars allowed (stderr a terminal, not CI) */
	int interactive;           /* stdin and stderr are terminals: may ask */
	const char *config_file;   /* -c FILE */
	struct strvec overrides;   /* -o section.key=value, in order */
	int accept_new;            /* --accept-new-host-key */
	const char *color_arg;     /* --color's value as given, or NULL */
	const struct gr_cmd *cmd;  /* the command running */
	struct fwd *fwd;           /* ports forwarded while connected (-L), or NULL */
};

/* Open ctx->conn if it is not open (uses ctx->cfg), with ctx->fwd's
 * ports forwarded over it. */
int ctx_connect(struct gr_ctx *ctx);
/* The same, with early (conn_opts.early) adding requests to the command
 * that starts the agent; not called when ctx->conn was open already. */
int ctx_connect_early(struct gr_ctx *ctx, void (*early)(void *, struct gr_conn *, struct strbuf *),
		      void *arg);
/* The options every connection of a command opens with: the host key
 * flag, -v, the forwarded ports, and ctx_say for its notices. */
void ctx_conn_opts(struct gr_ctx *ctx, struct conn_opts *o);
/* The printer of the modules' notices (a say callback, arg unused):
 * "gpurun: MSG" on stderr. */
void ctx_say(void *arg, const char *msg);
/* Set up ctx->fwd for forward specs (-L arguments, `gpurun forward`'s
 * ports): the local ports are taken now (checked only, for openssh, whose
 * ssh takes them), and what the forwarding has to say goes to stderr. 0,
 * or GR_EUSAGE with ctx->err set. */
int ctx_forward(struct gr_ctx *ctx, char *const *specs, size_t n);
/* Say on stderr what ctx->fwd forwards, one "gpurun: forwarding ..." line
 * each (nothing with -q). */
void ctx_forward_say(const struct gr_ctx *ctx);

#endif
