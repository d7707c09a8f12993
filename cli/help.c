/* Help text generated from the command and option tables, so help and
 * flags cannot disagree. */
#include <stdio.h>
#include <string.h>

#include "gpurun.h"

static void opt_line(const struct gr_opt *o, FILE *out)
{
	char left[80];
	int n = 0;

	if (o->shrt && o->lng)
		n = snprintf(left, sizeof(left), "-%c, --%s", o->shrt, o->lng);
	else if (o->shrt)
		n = snprintf(left, sizeof(left), "-%c", o->shrt);
	else
		n = snprintf(left, sizeof(left), "    --%s", o->lng);
	if (o->type != OPT_FLAG && n > 0 && (size_t)n < sizeof(left)) {
		if (o->type == OPT_ENUM && o->values) {
			char vals[64] = "";
			size_t used = 0;
			for (const char *const *v = o->values; *v; v++) {
				int w = snprintf(vals + used, sizeof(vals) - used, "%s%s",
						 v == o->values ? "" : "|", *v);
				if (w < 0 || (size_t)w >= sizeof(vals) - used)
					break;
				used += (size_t)w;
			}
			snprintf(left + n, sizeof(left) - (size_t)n, " %s", vals);
		} else {
			snprintf(left + n, sizeof(left) - (size_t)n, " %s",
				 o->argname ? o->argname : "VALUE");
		}
	}
	fprintf(out, "  %-28s %s\n", left, o->help ? o->help : "");
}

void help_command(const struct gr_cmd *c, FILE *out)
{
	fprintf(out, "usage: gpurun %s [OPTIONS]%s%s\n\n%s\n", c->name,
		c->args && *c->args ? " " : "", c->args ? c->args : "", c->summary);
	if (c->help)
		fprintf(out, "\n%s\n", c->help);
	fprintf(out, "\noptions:\n");
	for (const struct gr_opt *o = c->opts; o && o->id; o++)
		opt_line(o, out);
	fprintf(out, "  %-28s %s\n", "-h, --help", "show this help");
}

void help_overview(FILE *out)
{
	fprintf(out, "usage: gpurun [GLOBAL OPTIONS] COMMAND [OPTIONS] [ARGS]\n\n"
		"Sync a project to a GPU host over SSH, train there, bring the results home.\n\n"
		"commands:\n");
	for (const struct gr_cmd *c = gr_commands; c->name; c++)
		fprintf(out, "  %-12s %s\n", c->name, c->summary);
	fprintf(out, "\nglobal options:\n");
	for (const struct gr_opt *o = gr_global_opts; o->id; o++)
		opt_line(o, out);
	fprintf(out, "\nSee 'gpurun help COMMAND' for a command, 'gpurun help exit-codes' for exit codes.\n");
}

void help_exit_codes(FILE *out)
{
	fprintf(out,
		"exit codes:\n"
		"  0        success (also: detached from a job that keeps running)\n"
		"  1-247    exec, train and the pre-push hook pass the remote command's own\n"
		"           status through unchanged (128+N: killed by signal N)\n"
		"  1        a local command (init, config, hook, ...) failed\n"
		"  %d      the job ended without recording an exit status\n"
		"  %d      interrupted (Ctrl-C)\n"
		"  %d      sync or artifact transfer failed\n"
		"  %d      the agent on the host reported an error\n"
		"  %d      bad command line\n"
		"  %d      bad configuration (gpurun.ini or ssh_config)\n"
		"  %d      host key or authentication refused\n"
		"  %d      could not reach the host or start the agent (as ssh's 255)\n",
		GR_EXIT_JOB_LOST, GR_EXIT_INTERRUPTED, GR_EXIT_SYNC, GR_EXIT_REMOTE,
		GR_EXIT_USAGE, GR_EXIT_CONFIG, GR_EXIT_AUTH, GR_EXIT_CONNECT);
}

const struct gr_opt cmd_help_opts[] = { { 0 } };

int cmd_help(int argc, char **argv, struct gr_ctx *ctx)
{
	const struct gr_cmd *c;

	if (argc < 2) {
		help_overview(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "exit-codes")) {
		help_exit_codes(stdout);
		return 0;
	}
	c = gr_find_command(argv[1]);
	if (!c) {
		gr_errf(&ctx->err, GR_EUSAGE, "no help for '%s': not a gpurun command", argv[1]);
		gr_hintf(&ctx->err, "see 'gpurun help' for the list");
		return GR_EUSAGE;
	}
	help_command(c, stdout);
	return 0;
}
