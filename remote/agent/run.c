/* Finding and running the host's tools (see run.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

char *run_which(const char *prog)
{
	const char *path = getenv("PATH");
	struct strbuf dirs = STRBUF_INIT;
	char *found = NULL;
	struct stat st;

	sb_addf(&dirs, "%s:/usr/local/cuda/bin:/usr/local/nvidia/bin:/usr/bin:/bin",
		path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
	for (char *d = dirs.buf, *end; d && !found; d = end ? end + 1 : NULL) {
		end = strchr(d, ':');
		if (end)
			*end = '\0';
		if (d[0] != '/')
			continue;
		char *cand = xasprintf("%s/%s", d, prog);
		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
			found = cand;
		else
			free(cand);
	}
	sb_release(&dirs);
	return found;
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++)
		if (p[i] >= 0)
			close(p[i]);
	p[0] = p[1] = -1;
}

/* In the child: never returns. */
static void run_child(const char *const *argv, const char *const *env, int out_w, int err_w,
		      const struct run_how *how)
{
	int nul = open("/dev/null", O_RDWR);

	dup2(nul, 0);
	dup2(out_w, 1);
	dup2(how->merge ? out_w : err_w, 2);
	if (how->own_group)
		setsid();
	for (int sg = 1; sg < NSIG; sg++)
		signal(sg, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (size_t i = 0; env && env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		if (eq) {
			char *name = xstrndup(env[i], (size_t)(eq - env[i]));
			setenv(name, eq + 1, 1);
			free(name);
		} else {
			unsetenv(env[i]);
		}
	}
	if (how->cwd && chdir(how->cwd) < 0) {
		dprintf(2, "cannot enter '%s': %s\n", how->cwd, strerror(errno));
		_exit(127);
	}
	execvp(argv[0], (char *const *)argv);
	dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* SIGKILL to target (a pid, or -group); a group not made yet (the
 * child has not reached its setsid) is the child alone. */
static void kill_target(pid_t target, pid_t pid)
{
	if (kill(target, SIGKILL) < 0 && target != pid)
		kill(pid, SIGKILL);
}

int run_capture(const char *const *argv, const char *const *env, int timeout_ms, size_t keep,
		struct strbuf *out, struct strbuf *errs)
{
	return run_capture_how(argv, env, timeout_ms, keep, out, errs, NULL);
}

int run_capture_how(const char *const *argv, const char *const *env, int timeout_ms, size_t keep,
		    struct strbuf *out, struct strbuf *errs, const struct run_how *how)
{
	static const struct run_how plain = { 0 };
	int po[2] = { -1, -1 }, pe[2] = { -1, -1 }, status, timed_out = 0, e;
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	pid_t pid, target;

	if (!how)
		how = &plain;
	if (!keep)
		keep = RUN_KEEP_DEFAULT;
	/* Both streams through pipes, even one the caller drops: the timeout
	 * is kept by the wait on them. */
	if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
		e = errno;
		if (errs)
			sb_addf(errs, "pipe: %s", strerror(e));
		goto fail;
	}
	pid = fork();
	if (pid < 0) {
		e = errno;
		if (errs)
			sb_addf(errs, "fork: %s", strerror(e));
		goto fail;
	}
	if (pid == 0)
		run_child(argv, env, po[1], pe[1], how);
	target = how->own_group ? -pid : pid;
	close(po[1]);
	close(pe[1]);
	po[1] = pe[1] = -1;
	struct pollfd pfd[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };
	while (pfd[0].fd >= 0 || pfd[1].fd >= 0) {
		uint64_t now = now_ms();
		if (now >= deadline) {
			kill_target(target, pid);
			timed_out = 1;
			break;
		}
		int r = poll(pfd, 2, (int)(deadline - now));
		if (r < 0 && errno != EINTR)
			break;
		for (int i = 0; r > 0 && i < 2; i++) {
			char buf[8192];
			if (pfd[i].fd < 0 || !pfd[i].revents)
				continue;
			ssize_t n = read(pfd[i].fd, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
				continue;
			}
			struct strbuf *to = i ? errs : out;
			if (to && to->len < keep)
				sb_add(to, buf, (size_t)n);
		}
	}
	for (int i = 0; i < 2; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	/* Its streams closed, it may still run (a child kept them, or it
	 * daemonized): the same deadline holds for its end. */
	for (useconds_t nap = 1000;;) {
		pid_t w = waitpid(pid, &status, timed_out ? 0 : WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			return -1;
		if (w == 0 && now_ms() >= deadline) {
			kill_target(target, pid);
			timed_out = 1;
		} else if (w == 0) {
			usleep(nap);
			nap = nap < 50000 ? nap * 2 : nap;
		}
	}
	return timed_out ? RUN_TIMEOUT : exit_code_of(status);
fail:
	close_pair(po);
	close_pair(pe);
	errno = e;
	return -1;
}
