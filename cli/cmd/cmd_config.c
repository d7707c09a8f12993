/* gpurun config: the effective configuration and where each value came
 * from (default, gpurun.ini:LINE, environment, flag), or one key's value. */
#include <stdio.h>

#include "gpurun.h"

enum { O_JSON = 1 };

const struct gr_opt cmd_config_opts[] = {
	{ O_JSON, "json", 0, OPT_FLAG, NULL, "print every key as JSON (value and origin)", NULL, 0, 0, 0 },
	{ 0 },
};

int cmd_config(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct strbuf out = STRBUF_INIT;
	int id, json = 0, rc = 0;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_config_opts, &ctx->err)) > 0) {
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			goto out;
		}
		if (id == O_JSON)
			json = 1;
	}
	if (id < 0) {
		rc = gr_usage_error(ctx);
		goto out;
	}
	if (st.args.n > 1 || (st.args.n == 1 && json)) {
		gr_errf(&ctx->err, GR_EUSAGE, st.args.n > 1 ? "config takes at most one KEY"
					: "--json lists every key; leave out KEY");
		rc = gr_usage_error(ctx);
		goto out;
	}
	if (st.args.n == 1) {
		const char *origin;
		if ((rc = config_get(ctx->cfg, st.args.v[0], &out, &origin, &ctx->err)) < 0)
			goto out;
		printf("%s\n", out.buf ? out.buf : "");
		if (ctx->verbose)
			fprintf(stderr, "(from %s)\n", origin);
		goto out;
	}
	config_dump(ctx->cfg, &out, json);
	fputs(out.buf ? out.buf : "", stdout);
out:
	sb_release(&out);
	gr_getopt_release(&st);
	return rc;
}
