/* gpurun hook install|uninstall: the git pre-push hook that syncs the
 * project and runs [hooks] pre_push on the host before each push, chaining
 * a hook already there; and the hidden `gpurun hook run` the hook calls. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compat.h"
#include "completion.h"
#include "gpurun.h"
#include "job.h"
#include "sync.h"
#include "transport.h"

const struct gr_opt cmd_hook_opts[] = { { 0 } };

/* The line that marks a hook as ours (install refuses twice, uninstall
 * touches nothing else). */
#define HOOK_MARK "# gpurun pre-push hook, written by 'gpurun hook install'"
#define ORIG_SUFFIX ".gpurun-orig"

struct hook_paths {
	char *hooks;  /* the hooks folder (core.hooksPath honoured) */
	char *top;    /* the work tree's top folder, canonical */
	char *hook;   /* hooks/pre-push */
	char *orig;   /* hooks/pre-push.gpurun-orig: the hook we chained */
};

static void hook_paths_release(struct hook_paths *p)
{
	free(p->hooks);
	free(p->top);
	free(p->hook);
	free(p->orig);
}

/* Run git with stdout captured (stderr discarded). Returns its exit status,
 * or GR_ENOTFOUND when there is no git to run. */
static int run_git(char *const argv[], struct strbuf *out)
{
	posix_spawn_file_actions_t fa;
	int fds[2], status, rc;
	pid_t pid;
	char buf[4096];
	ssize_t r;

	if (pipe(fds) < 0)
		return GR_EIO;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	posix_spawn_file_actions_addclose(&fa, fds[1]);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (rc != 0) {
		close(fds[0]);
		return rc == ENOENT ? GR_ENOTFOUND : GR_EIO;
	}
	while ((r = read(fds[0], buf, sizeof(buf))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		sb_add(out, buf, (size_t)r);
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return GR_EIO;
	return exit_code_of(status);
}

static char *absolute(const char *path)
{
	char cwd[PATH_MAX], real[PATH_MAX];

	if (realpath(path, real))
		return xstrdup(real);
	if (path[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		return xstrdup(path);
	return xasprintf("%s/%s", cwd, path);
}

/* Without git: walk up to .git (a folder, or a file "gitdir: X" as in
 * linked worktrees, whose hooks live in the common folder). */
static int locate_without_git(struct hook_paths *p, struct gr_err *err)
{
	char dir[PATH_MAX];
	struct strbuf sb = STRBUF_INIT, data = STRBUF_INIT;
	struct stat st;
	int rc = 0;

	if (!getcwd(dir, sizeof(dir)))
		return gr_errf(err, GR_EIO, "cannot find the current folder: %s", strerror(errno));
	for (;;) {
		sb_reset(&sb);
		sb_addf(&sb, "%s/.git", strcmp(dir, "/") ? dir : "");
		if (stat(sb.buf, &st) == 0)
			break;
		char *slash = strrchr(dir, '/');
		if (!slash || slash == dir) {
			rc = gr_errf(err, GR_ENOTFOUND, "not inside a git repository");
			gr_hintf(err, "run 'gpurun hook install' in the project's git work tree");
			goto out;
		}
		*slash = 0;
	}
	p->top = xstrdup(dir);
	if (S_ISDIR(st.st_mode)) {
		p->hooks = xasprintf("%s/hooks", sb.buf);
		goto out;
	}
	if ((rc = read_file(sb.buf, &data, err)) < 0)
		goto out;
	if (strncmp(data.buf ? data.buf : "", "gitdir: ", 8)) {
		rc = gr_errf(err, GR_ENOTFOUND, "'%s' is not a git folder or gitdir file", sb.buf);
		goto out;
	}
	data.buf[strcspn(data.buf, "\r\n")] = 0;
	char *gitdir = data.buf[8] == '/' ? xstrdup(data.buf + 8) : xasprintf("%s/%s", dir, data.buf + 8);
	struct strbuf common = STRBUF_INIT;
	sb_reset(&sb);
	sb_addf(&sb, "%s/commondir", gitdir);
	if (read_file(sb.buf, &common, NULL) == 0 && common.buf) {
		common.buf[strcspn(common.buf, "\r\n")] = 0;
		p->hooks = common.buf[0] == '/' ? xasprintf("%s/hooks", common.buf)
						: xasprintf("%s/%s/hooks", gitdir, common.buf);
	} else {
		p->hooks = xasprintf("%s/hooks", gitdir);
	}
	sb_release(&common);
	free(gitdir);
out:
	sb_release(&sb);
	sb_release(&data);
	return rc;
}

/* The hooks folder as git itself reports it (core.hooksPath, worktrees),
 * or found by hand when git is not installed. */
static int locate(struct hook_paths *p, struct gr_err *err)
{
	char *argv[] = { "git", "rev-parse", "--show-toplevel", "--git-path", "hooks", NULL };
	struct strbuf out = STRBUF_INIT;
	int rc = run_git(argv, &out);

	if (rc == GR_ENOTFOUND) {
		rc = locate_without_git(p, err);
	} else if (rc != 0) {
		rc = gr_errf(err, GR_ENOTFOUND, "not inside a git work tree (git rev-parse failed)");
		gr_hintf(err, "run 'gpurun hook install' in the project's git work tree");
	} else {
		char *nl = out.buf ? strchr(out.buf, '\n') : NULL;
		if (!nl || !nl[1]) {
			rc = gr_errf(err, GR_EIO, "cannot make sense of 'git rev-parse' output");
		} else {
			*nl = 0;
			nl[1 + strcspn(nl + 1, "\n")] = 0;
			p->top = xstrdup(out.buf);
			p->hooks = xstrdup(nl + 1);
		}
	}
	sb_release(&out);
	if (rc < 0)
		return rc;
	char *top = absolute(p->top);
	free(p->top);
	p->top = top;
	p->hook = xasprintf("%s/pre-push", p->hooks);
	p->orig = xasprintf("%s/pre-push" ORIG_SUFFIX, p->hooks);
	return 0;
}

static int is_ours(const char *path)
{
	struct strbuf sb = STRBUF_INIT;
	int ours = read_file(path, &sb, NULL) == 0 && sb.buf && strstr(sb.buf, HOOK_MARK);

	sb_release(&sb);
	return ours;
}

static void add_quoted(struct strbuf *sb, const char *s)
{
	char *q = sh_quote(s);

	sb_adds(sb, q);
	free(q);
}

/* path relative to the work tree's top when inside it (so every worktree
 * of the repository finds its own project), else absolute. */
static char *from_top(const char *top, const char *path)
{
	char *abs = absolute(path), *rel;
	size_t n = strlen(top);

	if (!strcmp(abs, top))
		rel = xstrdup(".");
	else if (!strncmp(abs, top, n) && abs[n] == '/')
		rel = xstrdup(abs + n + 1);
	else
		return abs;
	free(abs);
	return rel;
}

/* The hook: runs a chained hook first with the same arguments and input,
 * then 'gpurun hook run' in the project, with the gpurun that installed it
 * (or the one on PATH if that one is gone). */
static void hook_script(struct strbuf *sb, const char *gpurun, const char *where_opt,
			const char *where)
{
	sb_adds(sb, "#!/bin/sh\n" HOOK_MARK "\n"
		"# ('gpurun hook uninstall' removes it and puts back the hook that was\n"
		"# here before). Before a push it runs 'gpurun sync', then [hooks] pre_push\n"
		"# on the host if set, and blocks the push when either fails. Skip it:\n"
		"#   GPURUN_SKIP_HOOK=1 git push   (a hook that was here before still runs)\n"
		"#   git push --no-verify          (skips every hook)\n"
		"gpurun=");
	add_quoted(sb, gpurun);
	sb_adds(sb, "\norig=\"$(dirname \"$0\")/pre-push" ORIG_SUFFIX "\"\n"
		"refs=$(cat)\n"
		"if [ -x \"$orig\" ]; then\n"
		"\tif [ -n \"$refs\" ]; then printf '%s\\n' \"$refs\"; fi | \"$orig\" \"$@\" || exit $?\n"
		"fi\n"
		"case ${GPURUN_SKIP_HOOK:-0} in\n"
		"0|'') ;;\n"
		"*) echo 'gpurun: pre-push hook skipped (GPURUN_SKIP_HOOK is set)' >&2; exit 0 ;;\n"
		"esac\n"
		"[ -x \"$gpurun\" ] || gpurun=gpurun\n"
		"if [ -n \"$refs\" ]; then printf '%s\\n' \"$refs\"; fi |\n"
		"\t\"$gpurun\" ");
	sb_adds(sb, where_opt);
	sb_adds(sb, " ");
	add_quoted(sb, where);
	sb_adds(sb, " hook run \"$@\"\n");
}

static int hook_install(struct gr_ctx *ctx)
{
	struct hook_paths p = { 0 };
	struct strbuf script = STRBUF_INIT;
	char self[PATH_MAX], *root = NULL, *where = NULL;
	struct stat st;
	int rc, chained = 0;

	if ((rc = locate(&p, &ctx->err)) < 0)
		goto out;
	/* The project the hook syncs: where gpurun.ini is (or -c FILE). */
	if (ctx->config_file) {
		if (access(ctx->config_file, R_OK) < 0) {
			rc = gr_errf(&ctx->err, GR_ENOTFOUND, "cannot read '%s': %s",
				     ctx->config_file, strerror(errno));
			goto out;
		}
		where = from_top(p.top, ctx->config_file);
	} else {
		if ((rc = find_project_root(NULL, &root, &ctx->err)) < 0)
			goto out;
		where = from_top(p.top, root);
	}
	if (lstat(p.hook, &st) == 0 && is_ours(p.hook)) {
		rc = gr_errf(&ctx->err, GR_EEXIST, "gpurun's pre-push hook is already installed in '%s'",
			     p.hook);
		gr_hintf(&ctx->err, "to reinstall it, run 'gpurun hook uninstall' first");
		goto out;
	}
	if (lstat(p.orig, &st) == 0) {
		rc = gr_errf(&ctx->err, GR_EEXIST, "'%s' is in the way (a hook kept by an earlier install)",
			     p.orig);
		gr_hintf(&ctx->err, "move it back to 'pre-push' or out of the hooks folder, then try again");
		goto out;
	}
	if (!compat_self_exe(self, sizeof(self)))
		snprintf(self, sizeof(self), "gpurun");
	hook_script(&script, self, ctx->config_file ? "-c" : "-C", where);
	if ((rc = mkdir_p(p.hooks, 0755, &ctx->err)) < 0)
		goto out;
	if (lstat(p.hook, &st) == 0) {
		if (rename(p.hook, p.orig) < 0) {
			rc = gr_errf(&ctx->err, GR_EIO, "cannot move '%s' aside: %s", p.hook,
				     strerror(errno));
			goto out;
		}
		chained = 1;
	}
	if ((rc = write_file_atomic(p.hook, script.buf, script.len, 0755, &ctx->err)) < 0) {
		if (chained)
			rename(p.orig, p.hook);
		goto out;
	}
	if (!ctx->quiet) {
		fprintf(stderr, "installed gpurun's pre-push hook in '%s'\n", p.hook);
		if (chained)
			fprintf(stderr, "the hook that was there runs first (kept as '%s')\n", p.orig);
	}
out:
	free(root);
	free(where);
	sb_release(&script);
	hook_paths_release(&p);
	return rc;
}

static int hook_uninstall(struct gr_ctx *ctx)
{
	struct hook_paths p = { 0 };
	struct stat st;
	int rc;

	if ((rc = locate(&p, &ctx->err)) < 0)
		goto out;
	if (lstat(p.hook, &st) < 0 || !is_ours(p.hook)) {
		rc = gr_errf(&ctx->err, GR_ENOTFOUND, "gpurun's pre-push hook is not installed in '%s'",
			     p.hooks);
		if (lstat(p.hook, &st) == 0)
			gr_hintf(&ctx->err, "'%s' is another hook; it was left alone", p.hook);
		goto out;
	}
	/* rename, not copy: the hook that was there comes back exactly. */
	if (lstat(p.orig, &st) == 0) {
		if (rename(p.orig, p.hook) < 0) {
			rc = gr_errf(&ctx->err, GR_EIO, "cannot put '%s' back: %s", p.orig,
				     strerror(errno));
			goto out;
		}
		if (!ctx->quiet)
			fprintf(stderr, "removed gpurun's pre-push hook; '%s' is the hook that was there before\n",
				p.hook);
		goto out;
	}
	if (unlink(p.hook) < 0) {
		rc = gr_errf(&ctx->err, GR_EIO, "cannot remove '%s': %s", p.hook, strerror(errno));
		goto out;
	}
	if (!ctx->quiet)
		fprintf(stderr, "removed gpurun's pre-push hook from '%s'\n", p.hooks);
out:
	hook_paths_release(&p);
	return rc;
}

/* git feeds pre-push "<local ref> <local sha> <remote ref> <remote sha>"
 * lines; a push that only deletes remote refs sends nothing to test. */
static int only_deletions(void)
{
	struct strbuf in = STRBUF_INIT;
	char buf[4096];
	ssize_t r;
	int lines = 0, deletes = 0;

	if (isatty(0))
		return 0;
	while ((r = read(0, buf, sizeof(buf))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		sb_add(&in, buf, (size_t)r);
	}
	for (char *l = in.buf, *save = NULL, *t; l && (t = strtok_r(l, "\n", &save)); l = NULL) {
		char lref[256], lsha[128];
		lines++;
		if (sscanf(t, "%255s %127s", lref, lsha) == 2 && strspn(lsha, "0") == strlen(lsha))
			deletes++;
	}
	sb_release(&in);
	return lines > 0 && deletes == lines;
}

static void skip_hint(struct gr_err *err)
{
	if (!err->hint[0])
		gr_hintf(err, "push anyway with GPURUN_SKIP_HOOK=1 git push (or git push --no-verify)");
}

static int hook_run(struct gr_ctx *ctx)
{
	const char *skip = getenv("GPURUN_SKIP_HOOK");
	struct sync_opts so = { 0 };
	struct sync_stats stats = { 0 };
	const char *host;
	char size[32];
	int rc;

	if (skip && *skip && strcmp(skip, "0")) {
		if (!ctx->quiet)
			fprintf(stderr, "gpurun: pre-push hook skipped (GPURUN_SKIP_HOOK is set)\n");
		return 0;
	}
	if (only_deletions())
		return 0;
	if (!ctx->cfg && (rc = config_load(&ctx->cfg, ctx->config_file, 0, &ctx->err)) < 0)
		return rc;
	for (size_t i = 0; i < ctx->overrides.n; i++) {
		const char *kv = ctx->overrides.v[i], *eq = strchr(kv, '=');
		if (!eq)
			return gr_errf(&ctx->err, GR_EUSAGE, "-o needs KEY=VALUE, not '%s'", kv);
		char *key = xstrndup(kv, (size_t)(eq - kv));
		rc = config_set(ctx->cfg, key, eq + 1, "-o", &ctx->err);
		free(key);
		if (rc < 0)
			return rc;
	}
	host = ctx->cfg->remote.host ? ctx->cfg->remote.host : "?";
	so.quiet = ctx->quiet;
	if (!ctx->quiet)
		fprintf(stderr, "gpurun pre-push: syncing to %s:%s\n", host, ctx->cfg->remote.path);
	if ((rc = sync_project(ctx, &so, &stats)) < 0) {
		gr_err_prefix(&ctx->err, "pre-push sync to '%s' failed", host);
		skip_hint(&ctx->err);
		return rc;
	}
	if (!ctx->quiet)
		fprintf(stderr, "gpurun pre-push: synced (%llu files sent, %s on the wire)\n",
			(unsigned long long)stats.files_sent, fmt_size(stats.bytes_wire, size, sizeof(size)));
	const char *check = ctx->cfg->hooks.pre_push;
	if (!check || !*check)
		return 0;
	if (!ctx->quiet)
		fprintf(stderr, "gpurun pre-push: running on %s: %s\n", host, check);
	const char *argv[] = { "sh", "-c", check, NULL };
	struct remote_exec_opts o = { 0 };
	o.cwd = ctx->cfg->remote.path;
	o.argv = argv;
	o.out_fd = 1;
	o.err_fd = 2;
	o.filter_out = isatty(1);
	o.filter_err = isatty(2);
	rc = remote_exec(ctx->conn, &o, &ctx->err);
	if (rc < 0) {
		gr_err_prefix(&ctx->err, "pre-push check on '%s'", host);
		skip_hint(&ctx->err);
		return rc;
	}
	if (rc > 0) {
		/* The check's own status passes through, as exec's does. */
		gr_errf(&ctx->err, GR_EREMOTE, "pre-push check failed on '%s' (exit %d): %s",
			host, rc, check);
		skip_hint(&ctx->err);
		gr_report(ctx);
		return rc;
	}
	if (!ctx->quiet)
		fprintf(stderr, "gpurun pre-push: check passed\n");
	return 0;
}

int cmd_hook(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	const char *sub;
	int id, rc = 0;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_hook_opts, &ctx->err)) > 0)
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			goto out;
		}
	if (id < 0) {
		rc = gr_usage_error(ctx);
		goto out;
	}
	sub = st.args.n ? st.args.v[0] : "";
	if (st.args.n == 1 && !strcmp(sub, "install"))
		rc = hook_install(ctx);
	else if (st.args.n == 1 && !strcmp(sub, "uninstall"))
		rc = hook_uninstall(ctx);
	else if (!strcmp(sub, "run")) /* what the hook runs; not for people */
		rc = hook_run(ctx);
	else {
		if (*sub && st.args.n == 1)
			gr_errf(&ctx->err, GR_EUSAGE, "unknown hook action '%s'", sub);
		else
			gr_errf(&ctx->err, GR_EUSAGE, "hook needs one action: install or uninstall");
		rc = gr_usage_error(ctx);
	}
out:
	gr_getopt_release(&st);
	return rc;
}
