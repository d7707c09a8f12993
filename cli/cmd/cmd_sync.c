/* gpurun sync: bring the host's copy of the project up to date (the work
 * is sync_project in sync.c, shared with train and the pre-push hook);
 * --why PATH explains whether a path is synced and which rule decided. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurun.h"
#include "ignore.h"
#include "sync.h"

enum { O_DRY_RUN = 1, O_WHY, O_YES, O_STATS };

const struct gr_opt cmd_sync_opts[] = {
	{ O_DRY_RUN, "dry-run", 'n', OPT_FLAG, NULL, "list what would be sent and deleted, change nothing", NULL, 0, 0, 0 },
	{ O_WHY, "why", 0, OPT_STRING, "PATH", "say whether PATH is synced and which rule decided", NULL, 0, 0, COMPLETE_FILE },
	{ O_YES, "yes", 'y', OPT_FLAG, NULL, "send even above [sync] warn_size without asking", NULL, 0, 0, 0 },
	{ O_STATS, "stats", 0, OPT_FLAG, NULL, "print detailed numbers (files, bytes, bytes on the wire)", NULL, 0, 0, 0 },
	{ 0 },
};

/* An ignored path that the last sync left on the host: say why it is
 * still there. */
static void note_kept(const struct gr_config *cfg, const char *path, struct strbuf *out)
{
	char *key = sync_remote_key(cfg->remote.host ? cfg->remote.host : "", cfg->remote.path);
	struct sm_list known = { 0 };
	uint8_t digest[SM_HASH_LEN];
	size_t n = strlen(path), root = strlen(cfg->root);

	if (!strncmp(path, cfg->root, root) && path[root] == '/')
		path += root + 1;
	while (n && path[n - 1] == '/')
		n--;
	char *rel = xstrndup(path, n);
	if (sync_rstate_load(cfg->root, key, &known, digest) && sm_find(&known, rel))
		sb_adds(out, "note: the copy an earlier sync sent stays on the host: a sync never "
			"deletes there what is ignored here\n");
	sm_list_free(&known);
	free(rel);
	free(key);
}

static int why(struct gr_ctx *ctx, const char *path)
{
	const struct gr_config *cfg = ctx->cfg;
	struct scan_opts so = { (const char *const *)cfg->sync.exclude.v, cfg->sync.exclude.n,
				cfg->sync.include_git,
				(const char *const *)cfg->sync.include.v, cfg->sync.include.n,
				(const char *const *)cfg->train.persist.v, cfg->train.persist.n, NULL };
	struct strbuf out = STRBUF_INIT;
	int rc;

	rc = ignore_explain(cfg->root, &so, path, &out, &ctx->err);
	if (rc == 1)
		note_kept(cfg, path, &out);
	if (rc >= 0) {
		fwrite(out.buf ? out.buf : "", 1, out.len, stdout);
		if (out.len && out.buf[out.len - 1] != '\n')
			putchar('\n');
		rc = 0;
	}
	sb_release(&out);
	return rc;
}

int cmd_sync(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct sync_opts o = { 0 };
	const char *why_path = NULL;
	int id, rc;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_sync_opts, &ctx->err)) > 0) {
		switch (id) {
		case OPT_HELP:
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		case O_DRY_RUN: o.dry_run = 1; break;
		case O_WHY: why_path = st.arg; break;
		case O_YES: o.yes = 1; break;
		case O_STATS: o.stats = 1; break;
		}
	}
	if (id < 0 || st.args.n > 0) {
		if (id >= 0)
			gr_errf(&ctx->err, GR_EUSAGE, "sync takes no arguments");
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	if (why_path) {
		rc = why(ctx, why_path);
		gr_getopt_release(&st);
		return rc;
	}
	o.quiet = ctx->quiet;
	o.say_ignored = 1;
	o.show = &sync_show_default;
	o.show_arg = ctx;
	rc = sync_project(ctx, &o, NULL);
	gr_getopt_release(&st);
	return rc < 0 ? sync_failed(ctx, rc) : rc;
}
