/* gpurun's entry point: global options, then dispatch to the command
 * named in the table (commands.c), with what it needs set up. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "ctx.h"
#include "gpurun.h"
#include "pool.h"
#include "transport.h"

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

/* What the global options set, until the command is known. */
struct globals {
	const char *host, *color;
	int verbose_seen, quiet_seen; /* the words, for the -q/-v clash */
};

/* One global option (gr_global_opts' id, arg its value), wherever it was
 * typed. 0, 1 when it answered (--version, --help), or GR_EUSAGE. */
static int global_opt(struct gr_ctx *ctx, struct globals *g, int id, const char *arg)
{
	switch (id) {
	case G_CONFIG: ctx->config_file = arg; break;
	case G_CHDIR:
		/* In order, as git's -C: -C a -C b is a/b. */
		if (chdir(arg) < 0)
			return gr_errf(&ctx->err, GR_EUSAGE, "cannot change to '%s': %s", arg,
				       strerror(errno));
		break;
	case G_SET: sv_push(&ctx->overrides, arg); break;
	case G_HOST: g->host = arg; break;
	case G_ACCEPT_NEW: ctx->accept_new = 1; break;
	case G_VERBOSE: ctx->verbose++; break;
	case G_QUIET: ctx->quiet = 1; break;
	case G_COLOR: g->color = ctx->color_arg = arg; break;
	case G_VERSION:
		gr_print_version(stdout);
		return 1;
	case OPT_HELP:
		help_overview(stdout);
		return 1;
	}
	return 0;
}

/* Colour and progress only on a terminal, never under NO_COLOR or a dumb
 * terminal; --color=always|never overrides. */
static void set_color(struct gr_ctx *ctx, const struct globals *g)
{
	if (!strcmp(g->color, "always"))
		ctx->color = 1;
	else if (!strcmp(g->color, "auto"))
		ctx->color = is_tty(2) && !env_set("NO_COLOR") &&
			     !(getenv("TERM") && !strcmp(getenv("TERM"), "dumb"));
	else
		ctx->color = 0;
	ctx->interactive = is_tty(0) && is_tty(2);
	ctx->progress = is_tty(2) && !getenv("CI") && !env_set("NO_COLOR") && !ctx->quiet;
}

/* Parse st's options with the global table until it stops: 0, 1 when an
 * option answered, or GR_EUSAGE with err set. */
static int parse_globals(struct gr_ctx *ctx, struct globals *g, struct gr_getopt *st)
{
	int id, rc;

	while ((id = gr_getopt(st, gr_global_opts, &ctx->err)) > 0) {
		if (id == G_VERBOSE)
			g->verbose_seen = 1;
		if (id == G_QUIET)
			g->quiet_seen = 1;
		if ((rc = global_opt(ctx, g, id, st->arg)) != 0)
			return rc;
	}
	return id;
}

int main(int argc, char **argv)
{
	struct gr_ctx ctx = { 0 };
	struct gr_getopt st, gst;
	struct globals g = { .color = "auto" };
	struct strvec cmd_argv = STRVEC_INIT, glob = STRVEC_INIT;
	const char *near;
	int rc;

	compat_set_argv0(argv[0]);
	gr_trace_init();
	gr_getopt_init(&gst, 0, NULL);

	/* The shells' completion scripts ask here; nothing else runs. */
	if (argc > 1 && !strcmp(argv[1], "__complete"))
		return complete_main(argc - 1, argv + 1);
	/* A connection holder ([remote] persist), started by a command. */
	if (argc > 1 && !strcmp(argv[1], "__hold"))
		return transport_hold_main(argc - 1, argv + 1);
	/* The man pages (make man writes cli/cmd/gpurun.1 and gpurun.ini.5). */
	if (argc == 2 && !strcmp(argv[1], "__man")) {
		help_man(stdout);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "__man") && !strcmp(argv[2], "5")) {
		help_man_ini(stdout);
		return 0;
	}
	/* The global options before the command; those after it are found
	 * once the command's table says which words are its own. */
	gr_getopt_init(&st, argc, argv);
	st.stop_at_positional = 1;
	rc = parse_globals(&ctx, &g, &st);
	set_color(&ctx, &g);
	if (rc == 1) {
		rc = 0;
		goto out;
	}
	if (rc < 0) {
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
	/* The rest of the global options, wherever they were typed before
	 * "--" (and, for exec and train, before the command they run). */
	sv_push(&glob, "gpurun"); /* gr_getopt's argv[0] */
	gr_opts_split((int)st.args.n, st.args.v, ctx.cmd->opts, gr_global_opts,
		      !!(ctx.cmd->needs & CMD_PASSTHROUGH), &cmd_argv, &glob);
	gr_getopt_init(&gst, (int)glob.n, glob.v);
	rc = parse_globals(&ctx, &g, &gst);
	set_color(&ctx, &g);
	if (rc == 1) {
		rc = 0;
		goto out;
	}
	if (rc < 0) {
		rc = gr_usage_error(&ctx);
		goto out;
	}
	/* -q says nothing but errors, -v more: both at once means one is a
	 * mistake (a script's -q and a user's -v); say so rather than pick. */
	if (g.quiet_seen && g.verbose_seen) {
		gr_errf(&ctx.err, GR_EUSAGE, "-q (--quiet) and -v (--verbose) cannot be used together");
		gr_hintf(&ctx.err, "drop one of them");
		rc = GR_EUSAGE;
		goto out;
	}
	if ((rc = precheck(&ctx, (int)cmd_argv.n, cmd_argv.v)) != 0) {
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
		if (g.host && (rc = config_set(ctx.cfg, "remote.host", g.host, "--host", &ctx.err)) < 0)
			goto fail;
		if ((rc = apply_overrides(&ctx)) < 0)
			goto fail;
		for (size_t i = 0; i < ctx.cfg->warnings.n && !ctx.quiet; i++)
			fprintf(stderr, "gpurun: warning: %s\n", ctx.cfg->warnings.v[i]);
	}
	/* The command sees argv from its own name on; on a pool, through the
	 * pool (pool.h), which runs it on the boxes it concerns. */
	if (pool_wants(&ctx))
		rc = pool_main(&ctx, (int)cmd_argv.n, cmd_argv.v);
	else
		rc = ctx.cmd->fn((int)cmd_argv.n, cmd_argv.v, &ctx);
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
	gr_getopt_release(&gst);
	sv_clear(&cmd_argv);
	sv_clear(&glob);
	return rc;
}
