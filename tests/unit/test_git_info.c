/* git_info_read against real git repositories made here: the commit and
 * branch git itself names, clean vs dirty (tracked edits, new files; not
 * gpurun's runs/ and .gpurun/), a diff hash that follows the content, a
 * detached HEAD, and no repository at all. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"
#include "git_info.h"
#include "util.h"

static char *dir;

static int sh(const char *fmt, const char *arg)
{
	char *cmd = xasprintf(fmt, dir, arg ? arg : "");
	int rc = system(cmd);

	free(cmd);
	return rc;
}

static char *out_of(const char *fmt)
{
	char *cmd = xasprintf(fmt, dir);
	FILE *p = popen(cmd, "r");
	char buf[256] = "";

	if (p && !fgets(buf, sizeof(buf), p))
		buf[0] = 0;
	if (p)
		pclose(p);
	free(cmd);
	buf[strcspn(buf, "\n")] = 0;
	return xstrdup(buf);
}

static void no_repository(void)
{
	struct git_info gi;
	struct gr_err err = { 0 };

	CHECK_EQ_INT(git_info_read(dir, &gi, &err), 0);
	CHECK_EQ_INT(gi.have, 0);
}

static void clean_commit_and_branch(void)
{
	struct git_info gi;
	struct gr_err err = { 0 };
	char *head;

	CHECK_EQ_INT(sh("cd %s && git init -q -b trunk && git config user.email t@t && git config user.name t"
			" && echo a >a.py && git add a.py && git commit -q -m one", NULL), 0);
	head = out_of("git -C %s rev-parse HEAD");
	CHECK_EQ_INT(git_info_read(dir, &gi, &err), 0);
	CHECK_EQ_INT(gi.have, 1);
	CHECK_STR(gi.commit, head);
	CHECK_STR(gi.branch, "trunk");
	CHECK_EQ_INT(gi.dirty, 0);
	CHECK_STR(gi.diff_hash, "");
	free(head);
}

static void gpurun_outputs_are_not_changes(void)
{
	struct git_info gi;
	struct gr_err err = { 0 };

	CHECK_EQ_INT(sh("cd %s && mkdir -p runs/x .gpurun && echo 1 >runs/x/m.csv && echo 2 >.gpurun/jobs",
			NULL), 0);
	CHECK_EQ_INT(git_info_read(dir, &gi, &err), 0);
	CHECK_EQ_INT(gi.dirty, 0);
}

static void edits_and_new_files_make_it_dirty(void)
{
	struct git_info a, b, c, d;
	struct gr_err err = { 0 };

	CHECK_EQ_INT(sh("cd %s && echo b >>a.py", NULL), 0);
	CHECK_EQ_INT(git_info_read(dir, &a, &err), 0);
	CHECK_EQ_INT(a.dirty, 1);
	CHECK_EQ_INT((int)strlen(a.diff_hash), 64);
	/* the same difference, the same hash */
	CHECK_EQ_INT(git_info_read(dir, &b, &err), 0);
	CHECK_STR(a.diff_hash, b.diff_hash);
	/* another edit, another hash */
	CHECK_EQ_INT(sh("cd %s && echo c >>a.py", NULL), 0);
	CHECK_EQ_INT(git_info_read(dir, &c, &err), 0);
	CHECK(strcmp(a.diff_hash, c.diff_hash) != 0);
	/* a new file's content counts too */
	CHECK_EQ_INT(sh("cd %s && git checkout -q a.py && echo new >new.py", NULL), 0);
	CHECK_EQ_INT(git_info_read(dir, &d, &err), 0);
	CHECK_EQ_INT(d.dirty, 1);
	CHECK_EQ_INT(sh("cd %s && echo other >new.py", NULL), 0);
	CHECK_EQ_INT(git_info_read(dir, &c, &err), 0);
	CHECK(strcmp(c.diff_hash, d.diff_hash) != 0);
	/* an ignored file does not */
	CHECK_EQ_INT(sh("cd %s && rm new.py && echo data/ >.git/info/exclude && mkdir -p data && echo x >data/big",
			NULL), 0);
	CHECK_EQ_INT(git_info_read(dir, &c, &err), 0);
	CHECK_EQ_INT(c.dirty, 0);
}

static void detached_head_has_no_branch(void)
{
	struct git_info gi;
	struct gr_err err = { 0 };

	CHECK_EQ_INT(sh("cd %s && git checkout -q --detach", NULL), 0);
	CHECK_EQ_INT(git_info_read(dir, &gi, &err), 0);
	CHECK_EQ_INT(gi.have, 1);
	CHECK_STR(gi.branch, "");
}

/* git's status (and a hook's) as the shell shows it: the same rule as
 * an end the agent reports (exit_code_from). */
static void exit_codes(void)
{
	int st;
	pid_t pid = fork();

	if (pid == 0)
		_exit(3);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK_EQ_INT(exit_code_of(st), 3);
	pid = fork();
	if (pid == 0) {
		pause();
		_exit(0);
	}
	kill(pid, SIGKILL);
	CHECK(waitpid(pid, &st, 0) == pid);
	CHECK_EQ_INT(exit_code_of(st), 137);
	CHECK_EQ_INT(exit_code_from(1, SIGKILL), 137);
	CHECK_EQ_INT(exit_code_from(0, 256 + 7), 7);
	CHECK_EQ_INT(exit_code_from(1, 0xffffffffu), 255);
}

int main(void)
{
	char tmpl[] = "/tmp/gpurun-gitinfo.XXXXXX";

	if (!mkdtemp(tmpl))
		return 1;
	dir = tmpl;
	if (system("git --version >/dev/null 2>&1") != 0) {
		printf("skip - git_info (skipped: git is not installed)\n");
		return 0;
	}
	RUN(exit_codes);
	RUN(no_repository);
	RUN(clean_commit_and_branch);
	RUN(gpurun_outputs_are_not_changes);
	RUN(edits_and_new_files_make_it_dirty);
	RUN(detached_head_has_no_branch);
	sh("rm -rf %s", NULL);
	return T_DONE();
}
