/* gpurun completion SHELL: print the completion script for bash, zsh or
 * fish, so it installs in one line (see 'gpurun help completion'). */
#include <stdio.h>

#include "completion.h"

const struct gr_opt cmd_completion_opts[] = { { 0 } };

int cmd_completion(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	const char *script;
	int id, rc = 0;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_completion_opts, &ctx->err)) > 0)
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			goto out;
		}
	if (id < 0) {
		rc = gr_usage_error(ctx);
		goto out;
	}
	if (st.args.n != 1) {
		gr_errf(&ctx->err, GR_EUSAGE, "completion needs one shell: bash, zsh or fish");
		rc = gr_usage_error(ctx);
		goto out;
	}
	if (!(script = completion_script(st.args.v[0]))) {
		rc = gr_errf(&ctx->err, GR_EUSAGE, "no completion for shell '%s'", st.args.v[0]);
		gr_hintf(&ctx->err, "gpurun completes in bash, zsh and fish");
		goto out;
	}
	fputs(script, stdout);
	if (fflush(stdout) != 0 || ferror(stdout))
		rc = gr_errf(&ctx->err, GR_EIO, "cannot write the completion script");
out:
	gr_getopt_release(&st);
	return rc;
}
