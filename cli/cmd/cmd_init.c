/* gpurun init: write the commented gpurun.ini template here, and say
 * what git's rules will leave out of every sync (data a user may expect
 * on the host). */
#include <stdio.h>
#include <stdlib.h>

#include "gpurun.h"
#include "ignore.h"
#include "sync.h"

static int count_none(void *arg, const struct scan_entry *e)
{
	(void)arg;
	(void)e;
	return 0;
}

/* The project folder of path (its folder), scanned as a sync with the
 * default [sync] exclude would: a note when the rules leave files out. */
static void say_left_out(const char *path)
{
	static const char *const exclude[] = { "runs/" };
	struct scan_ignored ig = { .names = STRVEC_INIT };
	struct scan_opts so = { exclude, 1, 0, NULL, 0, NULL, 0, &ig };
	char *dir = xstrdup(path), *slash = strrchr(dir, '/'), sz[32];

	if (slash)
		*slash = '\0';
	if (scan_tree_each(slash ? (*dir ? dir : "/") : ".", &so, count_none, NULL, NULL) == 0 &&
	    ig.files + ig.dirs) {
		struct strbuf names = STRBUF_INIT;
		for (size_t i = 0; i < ig.names.n; i++) {
			char *q = sync_quote(ig.names.v[i]);
			sb_addf(&names, "%s%s", i ? ", " : "", q);
			free(q);
		}
		fprintf(stderr, "note: git's rules leave out %llu file%s (%s)%s%s%s%s of every sync; "
			"'[sync] include = PATTERN' sends what the host needs of them\n",
			(unsigned long long)ig.files, ig.files == 1 ? "" : "s",
			fmt_size(ig.bytes, sz, sizeof(sz)), ig.dirs ? " and folders (" : "",
			names.buf ? names.buf : "", ig.dirs > ig.names.n ? ", ..." : "", ig.dirs ? ")" : "");
		sb_release(&names);
	}
	sv_clear(&ig.names);
	free(dir);
}

const struct gr_opt cmd_init_opts[] = { { 0 } };

int cmd_init(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	int id, rc;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_init_opts, &ctx->err)) > 0)
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
	gr_getopt_release(&st);
	if (id < 0)
		return gr_usage_error(ctx);
	const char *path = ctx->config_file ? ctx->config_file : "gpurun.ini";
	if ((rc = config_write_template(path, &ctx->err)) < 0)
		return rc;
	if (!ctx->quiet) {
		fprintf(stderr, "wrote %s; set [remote] host, then run 'gpurun doctor'\n", path);
		say_left_out(path);
	}
	return 0;
}
