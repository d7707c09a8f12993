/* gpurun's entry point: global options, then dispatch to the command
 * named in the table (commands.c), with what it needs set up. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent_hash.h"
#include "compat.h"
#include "ctx.h"
#include "gpurun.h"
#include "pool.h"

#ifndef GR_VERSION
#define GR_VERSION "0.1.0"
#endif

static int is_tty(int fd)
{
	return isatty(fd) == 1;
}

/* NO_COLOR counts when set and not empty (no-color.org). */
static int env_set(const char *name)
{
	const char *v = getenv(name);
	return v && *v;
}

/* Look at the command's options before the config loads, with the
 * command's own table: -h/--help prints help even outside a project, and a
 * bad option is a usage error rather than "no gpurun.ini". Only the words
 * before the first positional count: after it a command may pass words on
 * ("exec ls --help" runs ls --help on the host). Returns 1 for help, 0, or
 * GR_EUSAGE with ctx->err set. */
static int precheck(struct gr_ctx *ctx, int argc, char **argv)
{
	struct gr_getopt st;
	int id, rc = 0;

	gr_getopt_init(&st, argc, argv);
	st.stop_at_positional = 1;
	while ((id = gr_getopt(&st, ctx->cmd->opts, &ctx->err)) > 0)
		if (id == OPT_HELP) {
			rc = 1;
			break;
		}
	if (id < 0)
		rc = gr_usage_error(ctx);
	gr_getopt_release(&st);
	return rc;
}

static int apply_overrides(struct gr_ctx *ctx)
{
	for (size_t i = 0; i < ctx->overrides.n; i++) {
		const char *kv = ctx->overrides.v[i];
		const char *eq = strchr(kv, '=');
		if (!eq) {
			gr_errf(&ctx->err, GR_EUSAGE, "-o needs KEY=VALUE, not '%s'", kv);
			return GR_EUSAGE;
		}
		char *key = xstrndup(kv, (size_t)(eq - kv));
		int rc = config_set(ctx->cfg, key, eq + 1, "-o", &ctx->err);
		free(key);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct gr_ctx ctx = { 0 };
	struct gr_getopt st;
	const char *host = NULL, *color = "auto", *near;
	int rc, id;

	compat_set_argv0(argv[0]);
	gr_trace_init();

	/* The shells' completion scripts ask here; nothing else runs. */
	if (argc > 1 && !strcmp(argv[1], "__complete"))
		return complete_main(argc - 1, argv + 1);
	/* The man pages (make man writes cli/cmd/gpurun.1 and gpurun.ini.5). */
	if (argc == 2 && !strcmp(argv[1], "__man")) {
		help_man(stdout);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "__man") && !strcmp(argv[2], "5")) {
		help_man_ini(stdout);
		return 0;
	}
	gr_getopt_init(&st, argc, argv);
	st.stop_at_positional = 1; /* options after the command are the command's */
	while ((id = gr_getopt(&st, gr_global_opts, &ctx.err)) > 0) {
		switch (id) {
		case G_CONFIG: ctx.config_file = st.arg; break;
		case G_CHDIR:
			if (chdir(st.arg) < 0) {
				gr_errf(&ctx.err, GR_EUSAGE, "cannot change to '%s': %s", st.arg,
					strerror(errno));
				goto fail;
			}
			break;
		case G_SET: sv_push(&ctx.overrides, st.arg); break;
		case G_HOST: host = st.arg; break;
		case G_ACCEPT_NEW: ctx.accept_new = 1; break;
		case G_VERBOSE: ctx.verbose++; break;
		case G_QUIET: ctx.quiet = 1; break;
		case G_COLOR: color = ctx.color_arg = st.arg; break;
		case G_VERSION:
			printf("gpurun %s (agent %s, protocol %d)\n", GR_VERSION, GR_AGENT_HASH,
			       GR_PROTO_VERSION);
			rc = 0;
			goto out;
		case OPT_HELP:
			help_overview(stdout);
			rc = 0;
			goto out;
		}
	}
	/* Colour and progress only on a terminal, never under NO_COLOR or a
	 * dumb terminal; --color=always|never overrides. */
	if (!strcmp(color, "always"))
		ctx.color = 1;
	else if (!strcmp(color, "auto"))
		ctx.color = is_tty(2) && !env_set("NO_COLOR") &&
			    !(getenv("TERM") && !strcmp(getenv("TERM"), "dumb"));
	ctx.interactive = is_tty(0) && is_tty(2);
	ctx.progress = is_tty(2) && !getenv("CI") && !env_set("NO_COLOR") && !ctx.quiet;
	if (id < 0) {
		gr_hintf(&ctx.err, "usage: gpurun [GLOBAL OPTIONS] COMMAND [OPTIONS] [ARGS] (see 'gpurun help')");
		goto fail;
	}
	if (!st.args.n) {
		help_overview(stderr);
		rc = GR_EXIT_USAGE;
		goto out;
	}
	ctx.cmd = gr_find_command(st.args.v[0]);
	if (!ctx.cmd && !strcmp(st.args.v[0], pool_probe_cmd.name))
		ctx.cmd = &pool_probe_cmd;
	if (!ctx.cmd) {
		gr_errf(&ctx.err, GR_EUSAGE, "'%s' is not a gpurun command", st.args.v[0]);
		if ((near = help_suggest(st.args.v[0])) && gr_find_command(near))
			gr_hintf(&ctx.err, "did you mean 'gpurun %s'?", near);
		else
			gr_hintf(&ctx.err, "see 'gpurun help' for the list");
		goto fail;
	}
	if ((rc = precheck(&ctx, (int)st.args.n, st.args.v)) != 0) {
		if (rc == 1) {
			help_command(ctx.cmd, stdout);
			rc = 0;
		}
		goto out;
	}

	if (ctx.cmd->needs & (CMD_CONFIG | CMD_CONFIG_OPT)) {
		rc = config_load(&ctx.cfg, ctx.config_file,
				 !(ctx.cmd->needs & CMD_CONFIG), &ctx.err);
		if (rc < 0)
			goto fail;
		if (host && (rc = config_set(ctx.cfg, "remote.host", host, "--host", &ctx.err)) < 0)
			goto fail;
		if ((rc = apply_overrides(&ctx)) < 0)
			goto fail;
		for (size_t i = 0; i < ctx.cfg->warnings.n && !ctx.quiet; i++)
			fprintf(stderr, "gpurun: warning: %s\n", ctx.cfg->warnings.v[i]);
	}
	/* The command sees argv from its own name on; on a pool, through the
	 * pool (pool.h), which runs it on the boxes it concerns. */
	if (pool_wants(&ctx))
		rc = pool_main(&ctx, (int)st.args.n, st.args.v);
	else
		rc = ctx.cmd->fn((int)st.args.n, st.args.v, &ctx);
	gr_trace("%s: done", ctx.cmd->name);
	goto out;
fail:
	rc = -1;
out:
	if (rc < 0) {
		if (!ctx.err.code)
			ctx.err.code = rc;
		gr_report(&ctx);
		rc = gr_exit_code(ctx.err.code);
	}
	conn_close(ctx.conn);
	fwd_free(ctx.fwd);
	gr_trace("connection closed");
	config_free(ctx.cfg);
	sv_clear(&ctx.overrides);
	gr_getopt_release(&st);
	return rc;
}
