/* The job supervisor: `gpurun-agent supervise DIR LOCKFD READYFD`, started
 * by START_JOB double-forked in a session of its own, so it outlives the
 * connection, the agent and gpurun. It waits for the job's GPUs (the job
 * is "queued" meanwhile), runs the job under a pty (a program that
 * block-buffers a pipe still writes each line as it is done), appends
 * everything the job writes to its log, and records the exit status when
 * the job ends, whether or not anyone is attached. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "job_gpu.h"
#include "job_store.h"

int job_supervise(int argc, char **argv);

static int sig_pipe[2] = { -1, -1 };
static volatile sig_atomic_t got_term;

static void on_signal(int sig)
{
	int e = errno;
	if (sig == SIGTERM)
		got_term = 1;
	if (write(sig_pipe[1], "s", 1) < 0) {
		/* full: a wakeup is pending already */
	}
	errno = e;
}

static uint64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A line of gpurun's own in the job's log. */
static void note(int log_fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(int log_fd, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	sb_adds(&sb, "[gpurun] ");
	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	sb_adds(&sb, "\n");
	if (write_full(log_fd, sb.buf, sb.len) < 0)
		fprintf(stderr, "gpurun-agent: cannot write the log: %s\n", strerror(errno));
	sb_release(&sb);
}

static void write_status(const char *dir, int status)
{
	char *p = job_meta(dir, "status");
	char *s = xasprintf("exit=%d\nsignal=%d\nend_ms=%llu\n",
			    WIFEXITED(status) ? WEXITSTATUS(status) : 0,
			    WIFSIGNALED(status) ? WTERMSIG(status) : 0,
			    (unsigned long long)wall_ms());
	struct gr_err err = { 0 };

	if (write_file_atomic(p, s, strlen(s), 0644, &err) < 0)
		fprintf(stderr, "gpurun-agent: %s\n", err.msg);
	free(p);
	free(s);
}

static int is_stopped(const char *dir)
{
	char *p = job_meta(dir, "stopped");
	int r = access(p, F_OK) == 0;
	free(p);
	return r;
}

/* Sleep up to ms, waking early on a signal. */
static void nap(int ms)
{
	struct pollfd pfd = { sig_pipe[0], POLLIN, 0 };
	char buf[64];

	if (poll(&pfd, 1, ms) > 0)
		while (read(sig_pipe[0], buf, sizeof(buf)) > 0)
			;
}

static void spawn_child(const char *dir, const char *id, const char *cmd,
			const struct strbuf *env, const char *gpus, int restrict_,
			const int *fds, size_t nfds)
{
	char *src = job_meta(dir, "src");
	int nul = open("/dev/null", O_RDONLY);
	sigset_t none;

	if (nul >= 0)
		dup2(nul, 0);
	for (size_t i = 0; i < nfds; i++)
		fcntl(fds[i], F_SETFD, 0); /* the job holds its GPUs' locks too */
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (size_t off = 0; env->len && off < env->len;) {
		const char *e = env->buf + off;
		if (strchr(e, '='))
			putenv((char *)e);
		off += strlen(e) + 1;
	}
	setenv("GPURUN_JOB_ID", id, 1);
	setenv("GPURUN_JOB_DIR", dir, 1);
	if (restrict_)
		setenv("CUDA_VISIBLE_DEVICES", gpus, 1);
	if (!getenv("TERM"))
		setenv("TERM", "dumb", 1);
	if (chdir(src) < 0) {
		printf("gpurun: cannot enter the job's snapshot '%s': %s\n", src, strerror(errno));
		_exit(127);
	}
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	printf("gpurun: cannot run /bin/sh: %s\n", strerror(errno));
	_exit(127);
}

/* Copy what the job wrote from the pty to the log. Returns 0 while the
 * pty is open, 1 once every writer closed it. */
static int pump(int master, int log_fd)
{
	char buf[65536];

	for (;;) {
		ssize_t n = read(master, buf, sizeof(buf));
		if (n > 0) {
			if (write_full(log_fd, buf, (size_t)n) < 0)
				fprintf(stderr, "gpurun-agent: cannot write the log: %s\n", strerror(errno));
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return 0;
		return 1; /* EIO: no writer left */
	}
}

int job_supervise(int argc, char **argv)
{
	const char *dir;
	long long lockfd, readyfd;
	struct strvec job = STRVEC_INIT;
	struct strbuf cmd = STRBUF_INIT, env = STRBUF_INIT;
	char *p, *gpus = NULL, *why = NULL, *last_why = NULL;
	int *fds = NULL, restrict_ = 0, log_fd = -1, master = -1, status = 0, rc;
	size_t nfds = 0;
	struct gr_err err = { 0 };
	pid_t pid;

	if (argc != 5 || parse_ll(argv[3], 0, 1 << 20, &lockfd) < 0 ||
	    parse_ll(argv[4], 0, 1 << 20, &readyfd) < 0) {
		fprintf(stderr, "usage: gpurun-agent supervise DIR LOCKFD READYFD\n");
		return 2;
	}
	dir = argv[2];
	p = job_meta(dir, "job");
	rc = job_kv_read(p, &job, &err);
	free(p);
	p = job_meta(dir, "command");
	if (rc == 0)
		rc = read_file(p, &cmd, &err);
	free(p);
	p = job_meta(dir, "env");
	read_file(p, &env, NULL);
	free(p);
	p = job_meta(dir, "log");
	log_fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (rc == 0 && log_fd < 0)
		rc = gr_errf(&err, GR_EIO, "cannot open '%s': %s", p, strerror(errno));
	free(p);
	if (rc < 0 || !job_kv_get(&job, "id") || pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
		dprintf((int)readyfd, "%s\n", err.msg[0] ? err.msg : "the job's folder is incomplete");
		return 1;
	}
	const char *id = job_kv_get(&job, "id");
	const char *spec = job_kv_get(&job, "gpus") ? job_kv_get(&job, "gpus") : "";

	struct sigaction sa = { 0 };
	sa.sa_handler = on_signal;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGCHLD, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (write_full((int)readyfd, "ok\n", 3) < 0)
		return 1;
	close((int)readyfd);
	/* The job lock (inherited, flock'ed) is held until we exit, and only
	 * by us: a job that outlives its supervisor must read as "lost". */
	fcntl((int)lockfd, F_SETFD, FD_CLOEXEC);

	/* Wait for GPUs: the job is "queued" meanwhile. */
	for (;;) {
		if (got_term || is_stopped(dir)) {
			note(log_fd, "stopped before it started");
			write_status(dir, SIGTERM); /* as if terminated */
			goto out;
		}
		free(gpus);
		free(why);
		rc = gpu_acquire(spec, id, &gpus, &restrict_, &fds, &nfds, &why, &err);
		if (rc < 0) {
			note(log_fd, "cannot start the job: %s", err.msg);
			write_status(dir, 1 << 8);
			goto out;
		}
		if (rc == 0)
			break;
		if (!last_why || strcmp(last_why, why)) {
			p = job_meta(dir, "queued");
			write_file_atomic(p, why, strlen(why), 0644, NULL);
			free(p);
			note(log_fd, "%s", why);
			free(last_why);
			last_why = xstrdup(why);
		}
		nap(2000);
	}
	if (why)
		note(log_fd, "%s", why);

	struct termios tio = { 0 };
	struct winsize ws = { .ws_row = 50, .ws_col = 200 };
	tio.c_cflag = CS8 | CREAD; /* raw: no \r added, no echo */
	tio.c_cc[VMIN] = 1;
	cfsetispeed(&tio, B38400);
	cfsetospeed(&tio, B38400);
	pid = forkpty(&master, NULL, &tio, &ws);
	if (pid < 0) {
		note(log_fd, "cannot start the job: forkpty: %s", strerror(errno));
		write_status(dir, 1 << 8);
		goto out;
	}
	if (pid == 0)
		spawn_child(dir, id, cmd.buf ? cmd.buf : "", &env, gpus, restrict_, fds, nfds);
	fcntl(master, F_SETFD, FD_CLOEXEC);
	set_nonblock(master, 1);
	p = job_meta(dir, "run");
	char *run = xasprintf("pid=%d\nstart_ms=%llu\ngpus=%s\n", (int)pid,
			      (unsigned long long)wall_ms(), restrict_ ? gpus : "");
	write_file_atomic(p, run, strlen(run), 0644, NULL);
	free(run);
	free(p);
	p = job_meta(dir, "queued");
	unlink(p);
	free(p);

	int pty_done = 0, exited = 0;
	while (!exited) {
		struct pollfd pfd[2] = { { sig_pipe[0], POLLIN, 0 }, { pty_done ? -1 : master, POLLIN, 0 } };
		if (poll(pfd, 2, 1000) < 0 && errno != EINTR)
			break;
		if (!pty_done && pfd[1].revents)
			pty_done = pump(master, log_fd);
		if (pfd[0].revents) {
			char buf[64];
			while (read(sig_pipe[0], buf, sizeof(buf)) > 0)
				;
		}
		if (got_term) {
			got_term = 0;
			kill(-pid, SIGTERM); /* pass it on to the job */
		}
		if (waitpid(pid, &status, WNOHANG) == pid)
			exited = 1;
	}
	/* The job's main process is gone: take what is still in the pty (a
	 * background child may write a little longer), then record the end.
	 * The status goes last, so a reader that sees it has every byte. */
	for (uint64_t until = now_ms() + 2000; !pty_done && now_ms() < until;) {
		struct pollfd pfd = { master, POLLIN, 0 };
		if (poll(&pfd, 1, 100) <= 0)
			break;
		pty_done = pump(master, log_fd);
	}
	write_status(dir, status);
out:
	if (master >= 0)
		close(master);
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	free(fds);
	free(gpus);
	free(why);
	free(last_why);
	if (log_fd >= 0)
		close(log_fd);
	sv_clear(&job);
	sb_release(&cmd);
	sb_release(&env);
	return 0;
}
