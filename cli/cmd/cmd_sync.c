/* gpurun sync: bring the host's copy of the project up to date (the work
 * is sync_project in sync.c, shared with train and the pre-push hook);
 * --why PATH explains whether a path is synced and which rule decided;
 * --watch keeps it up to date (sync_watch.c) until Ctrl-C. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "gpurun.h"
#include "ignore.h"
#include "sync.h"

enum { O_DRY_RUN = 1, O_WHY, O_YES, O_STATS, O_WATCH };

const struct gr_opt cmd_sync_opts[] = {
	{ O_DRY_RUN, "dry-run", 'n', OPT_FLAG, NULL, "list what would be sent and deleted, change nothing", NULL, 0, 0, 0 },
	{ O_WHY, "why", 0, OPT_STRING, "PATH", "say whether PATH is synced and which rule decided", NULL, 0, 0, COMPLETE_FILE },
	{ O_YES, "yes", 'y', OPT_FLAG, NULL, "send even above [sync] warn_size without asking", NULL, 0, 0, 0 },
	{ O_STATS, "stats", 0, OPT_FLAG, NULL, "print detailed numbers (files, bytes, bytes on the wire)", NULL, 0, 0, 0 },
	{ O_WATCH, "watch", 'w', OPT_FLAG, NULL, "sync, then sync each burst of edits until Ctrl-C (one connection)", NULL, 0, 0, 0 },
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

/* --watch: Ctrl-C (or TERM, HUP) between syncs ends the watch through
 * the pipe; during a sync it ends the process at once, as it ends a plain
 * sync: the host keeps each file old or new (the sync is staged and
 * committed by renames), and the next sync completes it. */
static volatile sig_atomic_t watch_busy;
static int watch_pipe[2] = { -1, -1 };

static void on_watch_signal(int sig)
{
	static const char msg[] = "\ngpurun: interrupted during a sync: each file on the host is "
				  "its old or its new version; the next sync completes it\n";
	int e = errno;

	(void)sig;
	if (watch_busy == 2) /* connecting again: the last sync failed so */
		_exit(GR_EXIT_CONNECT);
	if (watch_busy) {
		ssize_t r = write(STDERR_FILENO, msg, sizeof(msg) - 1);
		(void)r;
		_exit(GR_EXIT_INTERRUPTED);
	}
	ssize_t r = write(watch_pipe[1], "x", 1);
	(void)r;
	errno = e;
}

/* Each sync of the watch: the first says all that gpurun sync says; the
 * rest say one line when they changed something, nothing when not. */
static void watch_done(void *arg, const struct sync_opts *o, const struct sync_stats *st,
		       const struct scan_ignored *ig)
{
	if (!o->say_ignored && (st->up_to_date ||
				!(st->files_sent + st->files_deleted + st->files_updated)))
		return;
	sync_show_default.done(arg, o, st, ig);
}

static void watch_state(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "gpurun: %s\n", msg);
}

static void watch_failed(void *arg, int rc)
{
	struct gr_ctx *ctx = arg;

	(void)rc;
	gr_report(ctx);
	gr_err_clear(&ctx->err);
}

/* The exit code of a failure already reported (as sync_failed's). */
static int watch_exit(int rc)
{
	int x = gr_exit_code(rc);

	if (rc == GR_ECANCEL || x == GR_EXIT_CONFIG || x == GR_EXIT_CONNECT || x == GR_EXIT_AUTH)
		return x;
	return GR_EXIT_SYNC;
}

/* Ctrl-C after a good last sync exits 0: it is how a watch is meant to
 * end (as watch(1), tail -f), and the host then holds the tree as the
 * last sync saw it; after a failed one, that failure's code. */
static int watch(struct gr_ctx *ctx, const struct sync_opts *o)
{
	struct sync_show sh = sync_show_default;
	struct sync_watch_opts wo = { 0 };
	struct sigaction sa = { 0 }, old_int, old_term, old_hup;
	int rc, stopped = 0;

	sh.done = watch_done;
	wo.sync = *o;
	wo.sync.show = &sh;
	wo.sync.show_arg = ctx;
	wo.state = watch_state;
	wo.failed = watch_failed;
	wo.arg = ctx;
	wo.busy = &watch_busy;
	if (compat_pipe_cloexec(watch_pipe, 1) < 0) {
		gr_errf(&ctx->err, GR_EIO, "pipe: %s", strerror(errno));
		return GR_EIO;
	}
	wo.stop_fd = watch_pipe[0];
	sa.sa_handler = on_watch_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	rc = sync_watch(ctx, &wo, &stopped);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	close(watch_pipe[0]);
	close(watch_pipe[1]);
	watch_pipe[0] = watch_pipe[1] = -1;
	if (stopped)
		return rc < 0 ? watch_exit(rc) : 0;
	return rc < 0 ? sync_failed(ctx, rc) : rc;
}

int cmd_sync(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct sync_opts o = { 0 };
	const char *why_path = NULL;
	int id, rc, watching = 0;

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
		case O_WATCH: watching = 1; break;
		}
	}
	if (id >= 0 && watching && (o.dry_run || why_path))
		id = gr_errf(&ctx->err, GR_EUSAGE, "--watch cannot be combined with %s",
			     o.dry_run ? "--dry-run" : "--why");
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
	if (watching) {
		rc = watch(ctx, &o);
		gr_getopt_release(&st);
		return rc;
	}
	rc = sync_project(ctx, &o, NULL);
	gr_getopt_release(&st);
	return rc < 0 ? sync_failed(ctx, rc) : rc;
}
