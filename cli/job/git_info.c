/* The git side of a job's record (see git_info.h): git rev-parse,
 * symbolic-ref, status and diff, run as child processes without a shell,
 * their output streamed (the diff into a hash, never held whole). */
#include <blake2.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compat.h"
#include "git_info.h"
#include "util.h"

#define HASH_LEN 32

/* gpurun's own outputs in the project: not a change to the code. */
#define PATHSPEC_EXCLUDES ":/", ":(top,exclude)runs", ":(top,exclude).gpurun"

typedef void (*git_sink)(void *arg, const char *p, size_t n);

/* Run `git -C root ARGS...` with stdout to sink; its exit status (127
 * when git cannot be run), or -1 with errno set. */
static int git_run(const char *root, const char *const *args, git_sink sink, void *arg)
{
	struct strvec av = STRVEC_INIT, env = STRVEC_INIT;
	int out[2], st;
	char buf[65536];
	ssize_t r;
	pid_t pid;

	sv_push(&av, "git");
	sv_push(&av, "-C");
	sv_push(&av, root);
	for (; *args; args++)
		sv_push(&av, *args);
	/* Made before the fork: the child of a threaded process only execs.
	 * Read only (no index refresh written behind the user's back), and
	 * git's messages in one language. */
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "GIT_OPTIONAL_LOCKS=", 19) && strncmp(*e, "LC_ALL=", 7))
			sv_push(&env, *e);
	sv_push(&env, "GIT_OPTIONAL_LOCKS=0");
	sv_push(&env, "LC_ALL=C");
	if (compat_pipe_cloexec(out, 0) < 0) {
		sv_clear(&av);
		sv_clear(&env);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		close(out[0]);
		close(out[1]);
		sv_clear(&av);
		sv_clear(&env);
		return -1;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(out[1], 1);
		dup2(null, 2);
		signal(SIGPIPE, SIG_DFL);
		compat_execvpe("git", av.v, env.v);
		_exit(127);
	}
	close(out[1]);
	while ((r = read(out[0], buf, sizeof(buf))) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		sink(arg, buf, (size_t)r);
	}
	close(out[0]);
	sv_clear(&av);
	sv_clear(&env);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return exit_code_of(st);
}

/* A small answer (a line): kept, at most 4 KiB of it. */
static void to_sb(void *arg, const char *p, size_t n)
{
	struct strbuf *sb = arg;

	if (sb->len + n <= 4096)
		sb_add(sb, p, n);
}

static void hash_add(blake2b_state *h, const void *p, size_t n)
{
	blake2b_update(h, (const uint8_t *)p, n);
}

static void to_hash(void *arg, const char *p, size_t n)
{
	hash_add(arg, p, n);
}

/* Just whether anything came. */
static void to_flag(void *arg, const char *p, size_t n)
{
	(void)p;
	if (n)
		*(int *)arg = 1;
}

static void trim(struct strbuf *sb)
{
	while (sb->len && (sb->buf[sb->len - 1] == '\n' || sb->buf[sb->len - 1] == '\r'))
		sb->buf[--sb->len] = '\0';
}

/* Untracked files' names and contents into the hash (the diff does not
 * show them). Names come NUL-separated; a name split across reads is
 * carried over. */
struct untracked {
	const char *root;
	blake2b_state *h;
	struct strbuf name;
};

static void hash_file(struct untracked *u, const char *name)
{
	char *path = xasprintf("%s/%s", u->root, name), buf[65536];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t r;

	hash_add(u->h, name, strlen(name) + 1);
	if (fd >= 0) {
		while ((r = read(fd, buf, sizeof(buf))) > 0)
			hash_add(u->h, buf, (size_t)r);
		close(fd);
	}
	free(path);
}

static void to_untracked(void *arg, const char *p, size_t n)
{
	struct untracked *u = arg;

	for (size_t i = 0; i < n; i++) {
		if (p[i]) {
			sb_add(&u->name, p + i, 1);
			continue;
		}
		if (u->name.len)
			hash_file(u, u->name.buf);
		sb_reset(&u->name);
	}
}

int git_info_read(const char *root, struct git_info *gi, struct gr_err *err)
{
	static const char *const a_head[] = { "rev-parse", "--verify", "-q", "HEAD^{commit}", NULL };
	static const char *const a_branch[] = { "symbolic-ref", "-q", "--short", "HEAD", NULL };
	static const char *const a_status[] = { "status", "--porcelain", "-z",
		"--untracked-files=all", "--", PATHSPEC_EXCLUDES, NULL };
	static const char *const a_diff[] = { "diff", "--binary", "--no-ext-diff",
		"--no-textconv", "--no-color", "HEAD", "--", PATHSPEC_EXCLUDES, NULL };
	static const char *const a_untracked[] = { "ls-files", "-z", "--others",
		"--exclude-standard", "--", PATHSPEC_EXCLUDES, NULL };
	struct strbuf sb = STRBUF_INIT;
	int rc;

	memset(gi, 0, sizeof(*gi));
	rc = git_run(root, a_head, to_sb, &sb);
	trim(&sb);
	if (rc != 0 || sb.len < 40 || sb.len > 64 || strspn(sb.buf, "0123456789abcdef") != sb.len) {
		sb_release(&sb);
		return 0; /* no git, no repository, or no commit yet */
	}
	memcpy(gi->commit, sb.buf, sb.len + 1);
	sb_reset(&sb);
	if (git_run(root, a_branch, to_sb, &sb) == 0) {
		trim(&sb);
		if (sb.len < sizeof(gi->branch))
			memcpy(gi->branch, sb.buf, sb.len + 1);
	}
	sb_release(&sb);
	if (git_run(root, a_status, to_flag, &gi->dirty) != 0) {
		memset(gi, 0, sizeof(*gi));
		return gr_errf(err, GR_EIO, "git status failed in '%s'", root);
	}
	if (gi->dirty) {
		blake2b_state h;
		uint8_t out[HASH_LEN];
		struct untracked u = { root, &h, STRBUF_INIT };

		blake2b_init(&h, HASH_LEN);
		hash_add(&h, "diff", 5);
		rc = git_run(root, a_diff, to_hash, &h);
		hash_add(&h, "untracked", 10);
		if (rc == 0)
			rc = git_run(root, a_untracked, to_untracked, &u);
		sb_release(&u.name);
		if (rc != 0) {
			memset(gi, 0, sizeof(*gi));
			return gr_errf(err, GR_EIO, "git diff failed in '%s'", root);
		}
		blake2b_final(&h, out, HASH_LEN);
		for (size_t i = 0; i < HASH_LEN; i++)
			snprintf(gi->diff_hash + 2 * i, 3, "%02x", out[i]);
	}
	gi->have = 1;
	return 0;
}
