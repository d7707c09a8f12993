/* The table of job backends (job_backend.h): one line per backend; and
 * the supervisor's start, which the local backend and Slurm's login-node
 * part both use, so neither backend depends on the other's file. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_backend.h"
#include "job_store.h"

static const struct job_backend *const backends[] = {
	&job_backend_local,
	&job_backend_slurm,
};

const struct job_backend *job_backend_find(const char *name)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(backends); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

const struct job_backend *job_backend_of(const char *dir)
{
	struct strvec kv = STRVEC_INIT;
	char *p = job_meta(dir, "job");
	const struct job_backend *b = NULL;

	if (job_kv_read(p, &kv, NULL) == 0)
		b = job_backend_find(job_kv_get(&kv, "backend") ? job_kv_get(&kv, "backend")
							       : JOB_BACKEND_DEFAULT);
	sv_clear(&kv);
	free(p);
	return b;
}

void job_backends_refresh(const char *root)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(backends); i++)
		if (backends[i]->refresh)
			backends[i]->refresh(root);
}

int job_backend_main(int argc, char **argv)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(backends); i++) {
		int rc = backends[i]->main ? backends[i]->main(argc, argv) : -1;
		if (rc >= 0)
			return rc;
	}
	return -1;
}

/* ---- the supervisor ---- */

/* Put the supervisor in a session of its own, twice forked (so it is no
 * child of ours and init reaps it), holding lock_fd's flock. */
static int spawn_supervisor(const char *dir, const char *mode, int lock_fd, int ready_w,
			    struct gr_err *err)
{
	pid_t pid = fork();

	if (pid < 0)
		return gr_errf(err, GR_EIO, "fork: %s", strerror(errno));
	if (pid > 0) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return 0;
	}
	setsid();
	if (fork() != 0)
		_exit(0);
	int nul = open("/dev/null", O_RDWR);
	char *elog = job_meta(dir, "supervisor.log");
	int efd = open(elog, O_WRONLY | O_CREAT | O_APPEND, 0644);
	dup2(nul, 0);
	dup2(nul, 1);
	if (efd >= 0)
		dup2(efd, 2);
	for (int fd = 3; fd < 1024; fd++)
		if (fd != lock_fd && fd != ready_w)
			close(fd);
	fcntl(lock_fd, F_SETFD, 0);
	fcntl(ready_w, F_SETFD, 0);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	char lfd[16], rfd[16];
	snprintf(lfd, sizeof(lfd), "%d", lock_fd);
	snprintf(rfd, sizeof(rfd), "%d", ready_w);
	execl("/proc/self/exe", "gpurun-agent", mode, dir, lfd, rfd, (char *)NULL);
	dprintf(ready_w, "cannot run the agent again (/proc/self/exe): %s\n", strerror(errno));
	_exit(127);
}

int job_start_supervisor(const char *dir, const char *mode, struct gr_err *err)
{
	char *p = job_meta(dir, "lock"), msg[1024];
	int lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600), ready[2] = { -1, -1 }, rc;
	size_t got = 0;

	free(p);
	if (lock_fd < 0 || flock(lock_fd, LOCK_EX) < 0 || pipe2(ready, O_CLOEXEC) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot prepare the job's lock: %s", strerror(errno));
		goto out;
	}
	/* The lock passes to the supervisor by inheritance, so there is no
	 * moment when the job exists and nobody holds it ("lost"). */
	if ((rc = spawn_supervisor(dir, mode, lock_fd, ready[1], err)) < 0)
		goto out;
	close(ready[1]);
	ready[1] = -1;
	/* It says "ok\n" once it has read the job's files. */
	for (uint64_t until = now_ms() + 30000; got < sizeof(msg) - 1 && !memchr(msg, '\n', got);) {
		struct pollfd pfd = { ready[0], POLLIN, 0 };
		uint64_t now = now_ms();
		if (now >= until || poll(&pfd, 1, (int)(until - now)) == 0)
			break;
		ssize_t n = read(ready[0], msg + got, sizeof(msg) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	msg[got] = '\0';
	if (strcmp(msg, "ok\n")) {
		msg[strcspn(msg, "\n")] = '\0';
		rc = gr_errf(err, GR_EAGENT, "the job's supervisor did not start: %s",
			     got ? msg : "it exited at once");
	}
out:
	if (lock_fd >= 0)
		close(lock_fd);
	for (int i = 0; i < 2; i++)
		if (ready[i] >= 0)
			close(ready[i]);
	return rc;
}

int job_supervisor_alive(const char *dir)
{
	char *p = job_meta(dir, "lock");
	int fd = open(p, O_RDONLY | O_CLOEXEC), alive = 0;

	free(p);
	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK)
		alive = 1;
	close(fd);
	return alive;
}
