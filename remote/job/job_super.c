/* The local backend's supervisor (job_backend_local.c): `gpurun-agent
 * supervise DIR LOCKFD READYFD`, started double-forked in a session of its
 * own, so it outlives the connection, the agent and gpurun. It runs the
 * job's steps (job_steps.h) one after the other, each under a pty (a
 * program that block-buffers a pipe still writes each line as it is
 * done; with [train] output = pipe, stdout and stderr are a pipe
 * instead, job_steps.h): setup in the project folder when it must run
 * (under the project's setup lock), build in the job's folder, then,
 * once the job's GPUs are free (the job is "queued" meanwhile), the
 * command. Everything
 * they write is appended to the job's log, and the exit status is
 * recorded when the job ends, whether or not anyone is attached. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "job_container.h"
#include "job_gpu.h"
#include "job_notify.h"
#include "job_proc.h"
#include "job_pyhook.h"
#include "job_snap.h"
#include "job_steps.h"
#include "job_store.h"
#include "job_super.h"
#include "job_super_int.h"
#include "sig_wake.h"

static void set_phase(struct sup *s, enum job_step step)
{
	job_meta_write(s->dir, "phase", job_step_names[step], NULL);
}

/* The environment gpurun gives a step (in its child, after the spec's):
 * the terminal type of the user's terminal (JOB_SPEC "term"; programs
 * then draw bars and colour as on a console, and the client filters
 * what reaches a terminal), and for build and run the snapshot hook
 * (job_pyhook.h) first on PYTHONPATH. */
static void job_step_env(struct sup *s, enum job_step step)
{
	const char *term = job_spec_get(&s->spec, "term", "");

	setenv("TERM", *term ? term : "xterm-256color", 1);
	if (step != JOB_STEP_SETUP) {
		char *py = job_pyhook_dir(s->dir);
		const char *old = getenv("PYTHONPATH");
		char *path = old && *old ? xasprintf("%s:%s", py, old) : xstrdup(py);
		setenv("PYTHONPATH", path, 1);
		setenv("GPURUN_PROJECT_DIR", s->project, 1);
		free(py);
		free(path);
	}
}

/* In the child of forkpty (the pty is its terminal, stdout and stderr):
 * out_fd >= 0 (output = pipe) becomes stdout and stderr instead. */
static void spawn_child(struct sup *s, enum job_step step, const char *cwd,
			const struct strvec *argv, const char *gpus, const int *fds, size_t nfds,
			int out_fd)
{
	struct strvec env = STRVEC_INIT, more = STRVEC_INIT;
	int nul = open("/dev/null", O_RDONLY);
	sigset_t none;

	if (nul >= 0)
		dup2(nul, 0);
	if (out_fd >= 0) {
		dup2(out_fd, 1);
		dup2(out_fd, 2);
		if (out_fd > 2)
			close(out_fd);
	}
	for (size_t i = 0; i < nfds; i++)
		fcntl(fds[i], F_SETFD, 0); /* the job holds its GPUs' locks too */
	for (int sg = 1; sg < NSIG; sg++)
		signal(sg, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	job_spec_list(&s->spec, "env", &env);
	for (size_t i = 0; i < env.n; i++)
		if (strchr(env.v[i], '='))
			putenv(env.v[i]); /* env lives until exec */
	/* PYTHONUNBUFFERED=1 for a pipe, unless set here already (in a
	 * container, the runtime's client passes it on by name). */
	job_output_env(job_spec_get(&s->spec, "output", "pty"), &env, &more);
	for (size_t i = 0; i < more.n; i++) {
		char *eq = strchr(more.v[i], '=');
		*eq = '\0';
		setenv(more.v[i], eq + 1, 0);
	}
	/* The marker `gpurun stop` finds every process of the job by. */
	setenv("GPURUN_JOB_ID", s->id, 1);
	setenv("GPURUN_JOB_DIR", s->dir, 1);
	if (gpus)
		setenv("CUDA_VISIBLE_DEVICES", gpus, 1);
	job_step_env(s, step);
	if (chdir(cwd) < 0) {
		printf("gpurun: cannot enter '%s': %s\n", cwd, strerror(errno));
		_exit(127);
	}
	execvp(argv->v[0], argv->v);
	printf("gpurun: cannot run %s: %s\n", argv->v[0], strerror(errno));
	_exit(127);
}

/* `RUNTIME stop NAME` in a child of ours (reaped by run_step). */
static pid_t spawn_stop(struct sup *s, const char *name)
{
	struct strvec argv = STRVEC_INIT;
	pid_t pid;

	job_ctr_stop_argv(&s->ctr, name, CTR_GRACE, &argv);
	pid = fork();
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(nul, 1);
		for (int sg = 1; sg < NSIG; sg++)
			signal(sg, SIG_DFL);
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(argv.v[0], argv.v);
		_exit(127);
	}
	sv_clear(&argv);
	return pid;
}

/* secs as "1h30m", "90s", "2d": the time limit as the user reads it. */
static void fmt_duration(uint64_t secs, char *buf, size_t len)
{
	static const struct { char unit; uint64_t s; } u[] = {
		{ 'd', 86400 }, { 'h', 3600 }, { 'm', 60 }, { 's', 1 } };
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < 4 && o < len; i++)
		if (secs >= u[i].s) {
			int w = snprintf(buf + o, len - o, "%llu%c", (unsigned long long)(secs / u[i].s),
					 u[i].unit);
			o += w > 0 ? (size_t)w : 0;
			secs %= u[i].s;
		}
}

/* The command's time limit ([train] time_limit), for run_step. */
struct step_limit {
	uint64_t deadline_ms;   /* sup_wall_ms() past which it is stopped; 0: none */
	int grace_s;            /* from SIGTERM to SIGKILL */
	char shown[32];         /* the limit as the user reads it */
	int hit;                /* run_step stopped it there */
};

/* sig to every process of the job: its process group, and what left it
 * but carries its id (job_proc.h); never this supervisor. */
static void kill_job(struct sup *s, pid_t pid, int sig)
{
	struct job_proc *ps = NULL;
	size_t n = job_procs(s->id, pid, &ps);

	kill(-pid, sig);
	for (size_t i = 0; i < n; i++)
		if (ps[i].pid != getpid() && getpgid(ps[i].pid) != pid)
			kill(ps[i].pid, sig); /* it left the group: once, too */
	free(ps);
}

/* Run cmd as step in cwd under a pty (its stdout and stderr a pipe with
 * output = pipe), its output into the log; returns
 * its wait status (a failure to start is status 127 or 1). For the run
 * step, gpus (CUDA_VISIBLE_DEVICES, NULL: unset) and the GPU lock fds
 * the job inherits, and the `run` meta file once it started. */
static int run_step(struct sup *s, enum job_step step, const char *cwd, const char *cmd,
		    const char *gpus, const char *gpus_shown, const int *fds, size_t nfds,
		    struct step_limit *lim)
{
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	struct termios tio = { 0 };
	struct winsize ws = { .ws_row = 50, .ws_col = 200 };
	int master = -1, slave = -1, status = 1 << 8, cr = 0, out[2] = { -1, -1 };
	int use_pipe = job_output_pipe(job_spec_get(&s->spec, "output", "pty"));
	/* Only a container's terminal turns \n into \r\n. */
	int *crp = s->has_ctr && !use_pipe ? &cr : NULL;
	pid_t pid, stopper = -1;
	char name[64] = "";
	uint64_t kill_at = 0;

	/* A launcher goes first (srun ... for a job of several tasks). */
	for (size_t i = 0; step == JOB_STEP_RUN && s->mode->launcher && i < s->mode->launcher->n; i++)
		sv_push(&argv, s->mode->launcher->v[i]);
	/* train -- CMD ARGS: the words as given, never through sh -c. */
	struct strvec args = STRVEC_INIT;
	if (step == JOB_STEP_RUN)
		job_spec_list(&s->spec, "argv", &args);
	if (s->has_ctr) {
		/* The step in the job's image: the runtime's client runs under
		 * the pty, the container gets a terminal of its own (-t). */
		struct job_ctr_step cs = {
			.job_id = s->id, .job_dir = s->dir, .step = step, .cwd = cwd,
			.shell = job_spec_get(&s->spec, "shell", "sh"), .cmd = cmd,
			.args = args.n ? &args : NULL, .env = &env,
			/* Under a scheduler, the GPUs it gave the job. */
			.gpus = gpus ? gpus : s->mode->ctr_gpus,
			.no_tty = use_pipe,
		};
		job_spec_list(&s->spec, "env", &env);
		/* What job_step_env sets, passed on by name. */
		sv_push(&env, "TERM=");
		if (step != JOB_STEP_SETUP) {
			sv_push(&env, "PYTHONPATH=");
			sv_push(&env, "GPURUN_PROJECT_DIR=");
		}
		for (size_t i = 0; s->mode->ctr_env && i < s->mode->ctr_env->n; i++)
			sv_push(&env, s->mode->ctr_env->v[i]);
		job_output_env(job_spec_get(&s->spec, "output", "pty"), &env, &env);
		job_ctr_run_argv(&s->ctr, &cs, &argv);
		job_ctr_name(s->id, step, name, sizeof(name));
	} else if (args.n) {
		job_step_exec_argv(job_spec_get(&s->spec, "shell", "sh"), &args, &argv);
	} else {
		char *full = step == JOB_STEP_RUN && s->mode->cmd_prefix ?
			     xasprintf("%s%s", s->mode->cmd_prefix, cmd) : NULL;
		job_step_argv(job_spec_get(&s->spec, "shell", "sh"), full ? full : cmd, &argv);
		free(full);
	}
	sv_clear(&args);
	tio.c_cflag = CS8 | CREAD; /* raw: no \r added, no echo */
	tio.c_cc[VMIN] = 1;
	cfsetispeed(&tio, B38400);
	cfsetospeed(&tio, B38400);
	if (use_pipe && pipe2(out, O_CLOEXEC) < 0) {
		sup_note(s, "cannot start the %s step: pipe: %s", job_step_names[step], strerror(errno));
		sv_clear(&argv);
		sv_clear(&env);
		return status;
	}
	pid = forkpty(&master, NULL, &tio, &ws);
	if (pid < 0) {
		sup_note(s, "cannot start the %s step: forkpty: %s", job_step_names[step], strerror(errno));
		sv_clear(&argv);
		sv_clear(&env);
		if (use_pipe) {
			close(out[0]);
			close(out[1]);
		}
		return status;
	}
	if (pid == 0)
		spawn_child(s, step, cwd, &argv, gpus, fds, nfds, out[1]);
	sv_clear(&argv);
	sv_clear(&env);
	fcntl(master, F_SETFD, FD_CLOEXEC);
	set_nonblock(master, 1);
	if (use_pipe) {
		/* The step holds no fd of its terminal now: hold one here, or
		 * the master reads EIO at once and what the step writes to
		 * /dev/tty (a password prompt, a library that writes there)
		 * is lost. Closed when the step's main process is gone. */
		const char *tty = ptsname(master);
		slave = tty ? open(tty, O_RDWR | O_NOCTTY | O_CLOEXEC) : -1;
		close(out[1]);
		set_nonblock(out[0], 1);
	}
	if (step == JOB_STEP_RUN) {
		char *run = xasprintf("pid=%d\nstart_ms=%llu\ngpus=%s\n", (int)pid,
				      (unsigned long long)sup_wall_ms(), gpus_shown);
		job_meta_write(s->dir, "run", run, NULL);
		free(run);
		sup_set_queued(s, NULL);
	}

	/* The pty, and with output = pipe the pipe: what is still open. */
	int pty_done = 0, pipe_done = !use_pipe, exited = 0, forwarded = 0;
	while (!exited) {
		struct pollfd pfd[3] = { { sup_wake.fd[0], POLLIN, 0 }, { pty_done ? -1 : master, POLLIN, 0 },
					 { pipe_done ? -1 : out[0], POLLIN, 0 } };
		int wait_ms = 1000;
		if (lim && lim->deadline_ms && !lim->hit && sup_wall_ms() >= lim->deadline_ms) {
			/* The time limit: SIGTERM as a stop does, SIGKILL after
			 * the grace to whatever of the job is left. */
			lim->hit = 1;
			sup_note(s, "time limit reached (%s): SIGTERM, then SIGKILL after %d s",
				 lim->shown, lim->grace_s);
			kill_job(s, pid, SIGTERM);
			kill_job(s, pid, SIGCONT); /* a stopped process must see it */
			if (s->has_ctr && stopper < 0)
				stopper = spawn_stop(s, name);
			kill_at = now_ms() + (uint64_t)lim->grace_s * 1000;
		}
		if (kill_at && now_ms() >= kill_at) {
			kill_job(s, pid, SIGKILL);
			kill_at = now_ms() + 1000; /* again, while it lives */
		}
		if (lim && lim->deadline_ms && !lim->hit) {
			uint64_t left = lim->deadline_ms - sup_wall_ms();
			if (left < (uint64_t)wait_ms)
				wait_ms = (int)left + 1;
		}
		int r = poll(pfd, 3, wait_ms);
		if (r < 0 && errno != EINTR)
			break;
		if (r == 0)
			sup_flush_cr(crp, s->log_fd);
		if (!pipe_done && pfd[2].revents)
			pipe_done = sup_pump_pipe(out[0], s->log_fd);
		if (!pty_done && pfd[1].revents)
			pty_done = sup_pump(master, s->log_fd, crp);
		if (pfd[0].revents)
			sig_wake_drain(&sup_wake);
		if (sig_wake_caught(&sup_wake, SIGTERM) && !forwarded) {
			kill(-pid, SIGTERM); /* pass it on, once (the flag stays: no next step) */
			forwarded = 1;
			/* The client may pass it on, or not (docker documents its
			 * signal proxy for non-TTY mode only): stop the container
			 * through the runtime, without waiting here, so its output
			 * still reaches the log. */
			if (s->has_ctr)
				stopper = spawn_stop(s, name);
		}
		if (waitpid(pid, &status, WNOHANG) == pid)
			exited = 1;
	}
	/* The step's main process is gone: take what is still in the pty and
	 * the pipe (a background child may write a little longer). */
	if (slave >= 0)
		close(slave);
	for (uint64_t until = now_ms() + 2000; !(pty_done && pipe_done) && now_ms() < until;) {
		struct pollfd pfd[2] = { { pty_done ? -1 : master, POLLIN, 0 },
					 { pipe_done ? -1 : out[0], POLLIN, 0 } };
		if (poll(pfd, 2, 100) <= 0)
			break;
		if (!pipe_done && pfd[1].revents)
			pipe_done = sup_pump_pipe(out[0], s->log_fd);
		if (!pty_done && pfd[0].revents)
			pty_done = sup_pump(master, s->log_fd, crp);
	}
	sup_flush_cr(crp, s->log_fd);
	close(master);
	if (use_pipe)
		close(out[0]);
	if (s->has_ctr) {
		/* The client is gone; its container goes too (a client killed
		 * from outside leaves it running). */
		struct strvec rm = STRVEC_INIT;
		if (stopper > 0)
			while (waitpid(stopper, NULL, 0) < 0 && errno == EINTR)
				;
		job_ctr_rm_argv(&s->ctr, name, &rm);
		job_ctr_exec((const char *const *)rm.v, CTR_ASK_MS, NULL, NULL);
		sv_clear(&rm);
		/* 125: the runtime's own failure, not the command's (126 and
		 * 127 may be the command's shell's too). */
		if (WIFEXITED(status) && WEXITSTATUS(status) == 125)
			sup_note(s, "%s could not run the %s step in %s (exit 125): see the lines above",
			     s->ctr.runtime, job_step_names[step], s->ctr.image);
	}
	return status;
}

static int step_failed(int status)
{
	return !WIFEXITED(status) || WEXITSTATUS(status) != 0;
}

/* The command, with [train] time_limit on each run and [train] retries
 * after a failure (not after a stop or the time limit): the GPUs stay
 * the job's between runs. Its wait status. */
static int run_command(struct sup *s, const char *gpus, const char *gpus_shown, const int *fds,
		       size_t nfds)
{
	long long limit = 0, retries = 0, grace = 10;
	int status;

	parse_ll(job_spec_get(&s->spec, "time_limit", "0"), 0, 366ll * 86400, &limit);
	parse_ll(job_spec_get(&s->spec, "retries", "0"), 0, 100, &retries);
	parse_ll(job_spec_get(&s->spec, "stop_grace", "10"), 0, 3600, &grace);
	for (;;) {
		struct step_limit lim = { .grace_s = (int)grace };
		char n[16];
		s->tries++;
		/* The count while it runs, for status: only where there can
		 * be more than one run (a file is a block of the host's disk
		 * per job); the status says it at the end either way. */
		snprintf(n, sizeof(n), "%u", s->tries);
		if (retries)
			job_meta_write(s->dir, "tries", n, NULL);
		if (limit) {
			lim.deadline_ms = sup_wall_ms() + (uint64_t)limit * 1000;
			fmt_duration((uint64_t)limit, lim.shown, sizeof(lim.shown));
		}
		status = run_step(s, JOB_STEP_RUN, s->dir, job_spec_get(&s->spec, "command", ""),
				  gpus, gpus_shown, fds, nfds, &lim);
		if (lim.hit) {
			s->end = "timeout";
			s->end_reason = xasprintf("[train] time_limit = %s", lim.shown);
			break;
		}
		if (!step_failed(status) || sup_stop_asked(s) || s->tries > (unsigned)retries)
			break;
		sup_note(s, "the command %s; running it again (retry %u of %lld)",
			 WIFSIGNALED(status) ? "was killed by a signal" : "failed", s->tries,
			 retries);
		sup_nap(1000);
		if (sup_stop_asked(s))
			break;
	}
	return status;
}

static void on_setup_wait(void *arg, const char *holder)
{
	struct sup *s = arg;
	char *why = *holder ? xasprintf("waiting for job %s's setup to finish", holder)
			    : xstrdup("waiting for another job's setup to finish");

	sup_set_queued(s, why);
	sup_note(s, "%s", why);
	free(why);
}

static int setup_stopped(void *arg)
{
	return sup_stop_asked(arg);
}

/* Setup, when its key changed. 0 to go on, else the status to end with. */
static int do_setup(struct sup *s)
{
	const char *cmd = job_spec_get(&s->spec, "setup", "");
	struct gr_err err = { 0 };
	char key[65], *stamp = NULL;
	int status = 0, fd;

	if (!*cmd)
		return 0;
	set_phase(s, JOB_STEP_SETUP);
	fd = job_setup_lock(s->project, s->id, on_setup_wait, setup_stopped, s, &err);
	sup_set_queued(s, NULL);
	if (fd == -2) {
		sup_note(s, "stopped before it started");
		return SIGTERM;
	}
	if (fd < 0) {
		sup_note(s, "setup: %s", err.msg);
		return 1 << 8;
	}
	if (sup_stop_asked(s)) {
		status = SIGTERM;
		goto out;
	}
	job_setup_key(s->project, &s->spec, key);
	stamp = job_setup_stamp(s->project);
	if (!strcmp(stamp, key) && strcmp(job_spec_get(&s->spec, "setup_force", ""), "1")) {
		sup_note(s, "setup: up to date (its command and inputs did not change)");
		goto out;
	}
	sup_note(s, "setup: %s", cmd);
	status = run_step(s, JOB_STEP_SETUP, s->project, cmd, NULL, "", NULL, 0, NULL);
	if (step_failed(status)) {
		sup_note(s, "setup failed; it runs again with the next job");
		goto out;
	}
	s->setup_ran = 1;
	if (job_setup_stamp_write(s->project, key, &err) < 0)
		sup_note(s, "cannot record the setup: %s", err.msg);
out:
	job_setup_unlock(fd);
	free(stamp);
	return status;
}

/* What setup made is there for the job that ran it (job_snap.h): after
 * a setup that ran here, or that another job finished after this job's
 * snapshot, add it to the snapshot. Then write the snapshot hook
 * (job_pyhook.h) and say which editable installs it covers, or cannot.
 * 0 to go on, else the status to end with. */
static int setup_made(struct sup *s)
{
	struct strvec persist = STRVEC_INIT, mapped = STRVEC_INIT, unmapped = STRVEC_INIT;
	struct gr_err err = { 0 };
	struct snap_stats ss = { .env_names = STRVEC_INIT };
	char *stamp = xasprintf("%s/.gpurun/setup-stamp", s->project);
	struct stat st;
	int rc = 0;

	job_spec_list(&s->spec, "persist", &persist);
	int newer = stat(stamp, &st) == 0 &&
		    (uint64_t)st.st_mtim.tv_sec * 1000 + (uint64_t)st.st_mtim.tv_nsec / 1000000 >=
			    s->created_ms;
	if (*job_spec_get(&s->spec, "setup", "") && (s->setup_ran || newer)) {
		char *root = xstrdup(s->dir), *slash = strrchr(root, '/');
		if (slash)
			*slash = '\0';
		rc = job_snapshot_add_made(s->project, s->dir, root, &persist, &ss, &err);
		free(root);
		if (rc < 0) {
			sup_note(s, "cannot add what setup made to the job's folder: %s", err.msg);
			rc = 1 << 8;
			goto out;
		}
		if (ss.copied + ss.linked + ss.envs) {
			char sz[32];
			sup_note(s, "setup made %llu file%s (%s)%s%s: in this job's folder too",
			     (unsigned long long)(ss.copied + ss.linked),
			     ss.copied + ss.linked == 1 ? "" : "s",
			     fmt_size(ss.bytes_copied, sz, sizeof(sz)),
			     ss.envs ? ", and the environment " : "",
			     ss.envs ? ss.env_names.v[0] : "");
		}
	}
	if (job_pyhook_write(s->dir, &err) < 0) {
		sup_note(s, "%s", err.msg); /* imports may see the project's copy: say so, go on */
		goto out;
	}
	job_pyhook_report(s->project, &persist, &mapped, &unmapped);
	for (size_t i = 0; i < mapped.n; i++)
		sup_note(s, "editable install of %s: imported from this job's snapshot", mapped.v[i]);
	for (size_t i = 0; i < unmapped.n; i++)
		sup_note(s, "warning: %s", unmapped.v[i]);
out:
	sv_clear(&persist);
	sv_clear(&mapped);
	sv_clear(&unmapped);
	sv_clear(&ss.env_names);
	free(stamp);
	return rc;
}

int job_supervise(int argc, char **argv)
{
	static const struct job_sup_mode local = { .setup_build = 1, .run = 1, .take_gpus = 1 };
	long long lockfd, readyfd;

	if (argc != 5 || parse_ll(argv[3], 0, 1 << 20, &lockfd) < 0 ||
	    parse_ll(argv[4], 0, 1 << 20, &readyfd) < 0) {
		fprintf(stderr, "usage: gpurun-agent supervise DIR LOCKFD READYFD\n");
		return 2;
	}
	return job_supervise_mode(argv[2], (int)lockfd, (int)readyfd, &local);
}

int job_supervise_mode(const char *dir, int lockfd, int readyfd, const struct job_sup_mode *mode)
{
	struct sup s = { 0 };
	struct strvec job = STRVEC_INIT;
	char *p, *gpus = NULL;
	int *fds = NULL, restrict_ = 0, status = 0, rc, ended = 0;
	size_t nfds = 0;
	struct gr_err err = { 0 };
	enum job_step step = JOB_STEP_SETUP;

	s.dir = dir;
	s.mode = mode;
	s.status_extra = mode->status_extra;
	s.log_fd = -1;
	p = job_meta(s.dir, "job");
	rc = job_kv_read(p, &job, &err);
	free(p);
	if (rc == 0)
		rc = job_spec_read(s.dir, &s.spec, &err);
	/* A job meant for a container never runs on the host instead. */
	if (rc == 0 && job_ctr_wanted(&s.spec))
		rc = job_ctr_load(s.dir, &s.ctr, &err);
	s.has_ctr = rc == 0 && job_ctr_wanted(&s.spec);
	p = job_meta(s.dir, "log");
	s.log_fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (rc == 0 && s.log_fd < 0)
		rc = gr_errf(&err, GR_EIO, "cannot open '%s': %s", p, strerror(errno));
	free(p);
	s.id = job_kv_get(&job, "id");
	s.project = job_kv_get(&job, "project");
	s.created_ms = job_kv_u64(&job, "created_ms");
	static const int sup_sigs[] = { SIGCHLD, SIGTERM };
	if (rc < 0 || !s.id || !s.project || sig_wake_start(&sup_wake, sup_sigs, 2, SA_RESTART) < 0) {
		const char *msg = err.msg[0] ? err.msg : "the job's folder is incomplete";
		if (readyfd >= 0)
			dprintf(readyfd, "%s\n", msg);
		else
			fprintf(stderr, "gpurun-agent: %s\n", msg);
		return 1;
	}
	const char *spec_gpus = job_spec_get(&s.spec, "gpus", "");
	const char *build = job_spec_get(&s.spec, "build", "");

	signal(SIGHUP, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (readyfd >= 0) {
		if (write_full(readyfd, "ok\n", 3) < 0)
			return 1;
		close(readyfd);
	}
	sup_status_room_take(s.dir);
	/* The job lock (inherited, flock'ed) is held until we exit, and only
	 * by us: a job that outlives its supervisor must read as "lost". */
	if (lockfd >= 0)
		fcntl(lockfd, F_SETFD, FD_CLOEXEC);
	if (s.has_ctr) {
		/* Removes the job's containers should we die without doing so
		 * (a supervisor that holds the job's lock and runs the job;
		 * not the one that hands it to Slurm, whose end is not the
		 * job's: there the batch step does it, job_slurm_run.c). */
		if (lockfd >= 0 && mode->run)
			job_ctr_reap_spawn(s.dir);
		sup_note(&s, "in a container: %s (%s)", s.ctr.image, s.ctr.runtime);
	}

	/* --after: the first supervisor waits (here, or on a login node
	 * before the job is handed on), not a Slurm batch step. */
	if ((!mode->run || mode->take_gpus) && (status = sup_wait_after(&s)) != 0)
		goto end;
	if (mode->setup_build) {
		if ((status = do_setup(&s)) != 0)
			goto end;
		if ((status = setup_made(&s)) != 0)
			goto end;
		step = JOB_STEP_BUILD;
		if (*build) {
			if (sup_stop_asked(&s)) {
				status = SIGTERM;
				goto end;
			}
			set_phase(&s, JOB_STEP_BUILD);
			sup_note(&s, "build: %s", build);
			status = run_step(&s, JOB_STEP_BUILD, s.dir, build, NULL, "", NULL, 0, NULL);
			if (step_failed(status)) {
				sup_note(&s, "build failed; the command did not run");
				goto end;
			}
		}
	}
	step = JOB_STEP_RUN;
	if (!mode->run) {
		/* Handed on (to a scheduler): no status here unless that failed. */
		if (sup_stop_asked(&s)) {
			sup_note(&s, "stopped before it started");
			status = SIGTERM;
			goto end;
		}
		set_phase(&s, JOB_STEP_RUN);
		status = mode->hand_on(s.dir, &s.spec, s.log_fd);
		if (status == 0)
			goto out;
		goto end;
	}

	/* Wait for GPUs, in the box's line (job_super_wait.c). */
	set_phase(&s, JOB_STEP_RUN);
	if (mode->take_gpus &&
	    (status = sup_take_gpus(&s, spec_gpus, &gpus, &restrict_, &fds, &nfds)) != 0)
		goto end;
	if (!mode->take_gpus && sup_stop_asked(&s)) {
		sup_note(&s, "stopped before it started");
		status = SIGTERM;
		goto end;
	}
	status = run_command(&s, restrict_ ? gpus : NULL,
			     restrict_ ? gpus : mode->gpus_shown ? mode->gpus_shown : "", fds, nfds);
end:
	/* The status goes last, so a reader that sees it has every byte. */
	sup_write_status(&s, status, step);
	ended = 1;
out:
	for (size_t i = 0; i < nfds; i++)
		close(fds[i]);
	if (ended) /* its GPUs let go first: a slow command holds none */
		job_notify_end(s.dir);
	free(fds);
	free(gpus);
	free(s.end_reason);
	if (s.log_fd >= 0)
		close(s.log_fd);
	sv_clear(&job);
	job_spec_free(&s.spec);
	if (s.has_ctr)
		job_ctr_free(&s.ctr);
	return 0;
}
