/* The Slurm backend in the job's allocation (job_backend_slurm.c starts
 * it): the batch script runs the agent as `slurm-run DIR`, which runs the
 * job's steps with the supervisor (job_super.h), passes [slurm]
 * signal_before's SIGUSR1 on, resubmits at the time limit when asked,
 * and ends as the command did; `slurm-task` is one of several tasks
 * under srun, with its ranks for torch.distributed and JAX, which says
 * how its command ended (.gpurun/rank-N): the job ends as the rank that
 * failed first. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_container.h"
#include "job_slurm.h"
#include "job_steps.h"
#include "job_store.h"
#include "job_super.h"
#include "agent.h"

static volatile sig_atomic_t slurm_got_term, slurm_got_usr1;

static void slurm_on_signal(int sig)
{
	if (sig == SIGTERM)
		slurm_got_term = 1;
	else if (sig == SIGUSR1)
		slurm_got_usr1 = 1;
}

/* SIGUSR1 ([slurm] signal_before) goes to the command's process group. */
static void pass_usr1(const char *dir, uint64_t since_ms, int log_fd)
{
	struct strvec run = STRVEC_INIT;
	char *p = job_meta(dir, "run");

	job_kv_read(p, &run, NULL);
	free(p);
	uint64_t pid = job_kv_u64(&run, "pid");
	if (pid > 1 && job_kv_u64(&run, "start_ms") >= since_ms && kill(-(pid_t)pid, SIGUSR1) == 0)
		slurm_lognote(log_fd, "the time limit is near: SIGUSR1 sent to the job");
	else
		slurm_lognote(log_fd, "the time limit is near (the command has not started)");
	sv_clear(&run);
}

/* A SIGTERM from Slurm: say why in the log (Slurm marks the job before
 * it signals it: a TERM at the time limit reads TIMEOUT, scancel's
 * CANCELLED), and at the time limit, with [slurm] resubmit, submit the
 * job again, to start after this one, so the next run resumes from the
 * persistent paths. */
static void on_term(const char *dir, const struct job_spec *spec, const char *self, int log_fd)
{
	struct strvec ids = STRVEC_INIT;
	struct slurm_info si;
	struct gr_err err = { 0 };
	long long max;
	char *id = NULL;

	if (slurm_stop_asked(dir) || slurm_query(self, &si, &err) < 0)
		return;
	int timeout = !strcmp(si.state, "TIMEOUT") || !strcmp(si.state, "DEADLINE") ||
		      !strcmp(si.reason, "TimeLimit");
	if (timeout)
		slurm_lognote(log_fd, "Slurm job %s reached its time limit: SIGTERM now, SIGKILL after "
			"the cluster's KillWait", self);
	else if (!strcmp(si.state, "CANCELLED"))
		slurm_lognote(log_fd, "Slurm job %s was cancelled (scancel): SIGTERM now", self);
	if (!timeout || parse_ll(job_spec_get(spec, "slurm_resubmit", ""), 1, 1000, &max) < 0)
		return;
	slurm_ids(dir, &ids);
	if (!ids.n || strcmp(ids.v[ids.n - 1], self))
		goto out; /* done already, or not the current job */
	if ((long long)ids.n - 1 >= max) {
		slurm_lognote(log_fd, "not submitted again: [slurm] max_resubmits (%lld) reached", max);
		goto out;
	}
	if (slurm_submit(dir, spec, self, &id, &err) < 0) {
		slurm_lognote(log_fd, "cannot submit the job again: %s", err.msg);
		goto out;
	}
	slurm_lognote(log_fd, "submitted again as Slurm job %s (resubmission %zu of %lld), to start "
		"when this one has ended", id, ids.n, max);
out:
	free(id);
	sv_clear(&ids);
}

static int env_num(const char *name, long long max, long long *out)
{
	const char *v = getenv(name);

	return v && parse_ll(v, 0, max, out) == 0 ? 0 : -1;
}

/* A free TCP port on this node, for MASTER_PORT. */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = 29500;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* 1 when the job's shell takes SLURM_CMD_TRAPS (sh, bash, zsh, ksh:
 * not fish or csh as a login shell). */
static int traps_fit(const struct job_spec *spec)
{
	const char *sh, *base;

	if (strcmp(job_spec_get(spec, "shell", "sh"), "login"))
		return 1;
	sh = job_login_shell();
	base = strrchr(sh, '/');
	base = base ? base + 1 : sh;
	return strcmp(base, "fish") && strcmp(base, "csh") && strcmp(base, "tcsh");
}

/* 1 once this run's command started (its `run` file). */
static int command_started(const char *dir, uint64_t since_ms)
{
	struct strvec run = STRVEC_INIT;
	char *p = job_meta(dir, "run");
	int started;

	job_kv_read(p, &run, NULL);
	free(p);
	started = job_kv_u64(&run, "pid") > 1 && job_kv_u64(&run, "start_ms") >= since_ms;
	sv_clear(&run);
	return started;
}

/* ---- each task's end (several tasks): .gpurun/rank-N ---- */

static char *rank_file(const char *dir, long long rank)
{
	char name[40];

	snprintf(name, sizeof(name), "rank-%lld", rank);
	return job_meta(dir, name);
}

/* A run's rank files are its own (not those of the run before a
 * requeue). */
static void ranks_clear(const char *dir, long long ntasks)
{
	for (long long i = 0; i < ntasks && i < 100000; i++) {
		char *p = rank_file(dir, i);
		unlink(p);
		free(p);
	}
}

/* The job's end from its ranks' ends, once srun is back: a rank that
 * failed on its own (not after a SIGTERM to the job) is the job's end,
 * the first one to fail when several did, and its rank and node go into
 * the status and the log; after a SIGTERM (stop, time limit) the ranks
 * exit 0 to srun, so it does not kill the others in their grace: what
 * they really did is the job's end. */
static void ranks_settle(const char *dir, long long ntasks, int log_fd)
{
	struct strvec st = STRVEC_INIT, out = STRVEC_INIT;
	char *sp = job_meta(dir, "status");
	long long pick = -1, pick_termed = -1;
	uint64_t pick_end = UINT64_MAX, pick_exit = 0, pick_sig = 0;
	char pick_node[128] = "";

	if (job_kv_read(sp, &st, NULL) < 0 || strcmp(job_kv_get(&st, "phase") ?
						      job_kv_get(&st, "phase") : "", "run"))
		goto out;
	for (long long i = 0; i < ntasks && i < 100000; i++) {
		struct strvec rk = STRVEC_INIT;
		char *p = rank_file(dir, i);
		if (job_kv_read(p, &rk, NULL) == 0) {
			uint64_t ex = job_kv_u64(&rk, "exit"), sig = job_kv_u64(&rk, "signal");
			uint64_t end = job_kv_u64(&rk, "end_ms");
			int termed = job_kv_u64(&rk, "term") != 0;
			if ((ex || sig) && (pick < 0 || (pick_termed && !termed) ||
					    (pick_termed == termed && end < pick_end))) {
				pick = i;
				pick_termed = termed;
				pick_end = end;
				pick_exit = ex;
				pick_sig = sig;
				snprintf(pick_node, sizeof(pick_node), "%s",
					 job_kv_get(&rk, "node") ? job_kv_get(&rk, "node") : "?");
			}
		}
		free(p);
		sv_clear(&rk);
	}
	if (pick < 0)
		goto out;
	for (size_t i = 0; i < st.n; i++)
		if (strncmp(st.v[i], "exit=", 5) && strncmp(st.v[i], "signal=", 7) &&
		    strncmp(st.v[i], "failed_rank=", 12) && strncmp(st.v[i], "failed_node=", 12))
			sv_push(&out, st.v[i]);
	sv_pushf(&out, "exit=%llu", (unsigned long long)(pick_sig ? 0 : pick_exit));
	sv_pushf(&out, "signal=%llu", (unsigned long long)pick_sig);
	if (!pick_termed) {
		sv_pushf(&out, "failed_rank=%lld", pick);
		sv_pushf(&out, "failed_node=%s", pick_node);
		if (pick_sig)
			slurm_lognote(log_fd, "rank %lld on %s was killed by signal %llu first: the job "
				      "ends so", pick, pick_node, (unsigned long long)pick_sig);
		else
			slurm_lognote(log_fd, "rank %lld on %s exited with status %llu first: the job "
				      "ends so", pick, pick_node, (unsigned long long)pick_exit);
	}
	struct strbuf t = STRBUF_INIT;
	for (size_t i = 0; i < out.n; i++)
		sb_addf(&t, "%s\n", out.v[i]);
	job_meta_write(dir, "status", t.buf, NULL);
	sb_release(&t);
out:
	free(sp);
	sv_clear(&st);
	sv_clear(&out);
}

/* A container job's GPU mode, decided again here, on the compute node:
 * the login node decided it at JOB_START, where there may be no CDI spec
 * (or one the compute node lacks). The record says what holds here. */
static void ctr_gpu_here(const char *dir, const char *host, int log_fd)
{
	struct strvec kv = STRVEC_INIT;
	struct strbuf t = STRBUF_INIT;
	char *p = job_meta(dir, "container");
	const char *kind, *path, *was;

	if (job_kv_read(p, &kv, NULL) < 0 || !(kind = job_kv_get(&kv, "runtime")) ||
	    !(path = job_kv_get(&kv, "path")) || !(was = job_kv_get(&kv, "gpu")))
		goto out;
	const char *way = job_ctr_gpu_way(kind, path);
	if (!strcmp(way, was))
		goto out;
	slurm_lognote(log_fd, "GPUs go into the container on %s by %s (the login node: %s)", host,
		      way, was);
	for (size_t i = 0; i < kv.n; i++)
		if (strncmp(kv.v[i], "gpu=", 4))
			sb_addf(&t, "%s\n", kv.v[i]);
	sb_addf(&t, "gpu=%s\n", way);
	job_meta_write(dir, "container", t.buf, NULL);
out:
	sb_release(&t);
	sv_clear(&kv);
	free(p);
}

/* `slurm-run DIR`: the batch script's command. */
int slurm_run_main(const char *dir)
{
	struct job_spec spec = { STRVEC_INIT };
	struct strvec launcher = STRVEC_INIT, ctr_env = STRVEC_INIT;
	struct gr_err err = { 0 };
	const char *jid = getenv("SLURM_JOB_ID");
	char host[256] = "", agent[4096], *extra = NULL;
	long long restarts = 0, ntasks;
	uint64_t since = slurm_now_ms();
	int log_fd = slurm_open_log(dir), status = 1, rc;
	pid_t child;

	if (!jid || !slurm_id_ok(jid) || job_spec_read(dir, &spec, &err) < 0 || log_fd < 0) {
		fprintf(stderr, "gpurun-agent slurm-run: %s\n",
			log_fd < 0 ? "cannot open the job's log" :
			err.msg[0] ? err.msg : "not in a Slurm job (no SLURM_JOB_ID)");
		goto out;
	}
	env_num("SLURM_RESTART_COUNT", 1000000, &restarts);
	if (env_num("SLURM_NTASKS", 1000000, &ntasks) < 0)
		ntasks = slurm_ntasks(&spec);
	gethostname(host, sizeof(host) - 1);
	/* torch.distributed, JAX and MPI-free launchers find each other by
	 * these: rank 0 runs here, on the batch host. */
	setenv("MASTER_ADDR", host, 1);
	char port[16];
	snprintf(port, sizeof(port), "%d", free_port());
	setenv("MASTER_PORT", port, 1);
	/* One task sees what it would on one box (no RANK, WORLD_SIZE,
	 * LOCAL_RANK: trainers switch to DDP when RANK is set); NODE_RANK
	 * and the master's address stay for torchrun's command line. With
	 * several tasks, slurm-task sets the ranks of each. */
	unsetenv("RANK");
	unsetenv("LOCAL_RANK");
	unsetenv("WORLD_SIZE");
	setenv("NODE_RANK", "0", 1);
	ranks_clear(dir, ntasks);
	if (ntasks > 1) {
		ssize_t n = readlink("/proc/self/exe", agent, sizeof(agent) - 1);
		agent[n > 0 ? n : 0] = '\0';
		/* Each task sets its own RANK, LOCAL_RANK, NODE_RANK. */
		sv_push(&launcher, "srun");
		sv_push(&launcher, "--kill-on-bad-exit=1");
		sv_push(&launcher, "--unbuffered");
		sv_push(&launcher, agent);
		sv_push(&launcher, "slurm-task");
	}
	if (restarts > 0) {
		/* The status of the run Slurm requeued is not this run's. */
		char *p = job_meta(dir, "status");
		unlink(p);
		free(p);
		slurm_lognote(log_fd, "Slurm requeued job %s: run %lld starts", jid, restarts + 1);
	}
	slurm_lognote(log_fd, "running as Slurm job %s on %s (%lld task%s%s%s)", jid,
		getenv("SLURM_JOB_NODELIST") ? getenv("SLURM_JOB_NODELIST") : host, ntasks,
		ntasks == 1 ? "" : "s", getenv("CUDA_VISIBLE_DEVICES") ? ", GPUs " : "",
		getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "");
	extra = xasprintf("slurm_id=%s\nslurm_restarts=%lld\n", jid, restarts);
	if (job_ctr_wanted(&spec))
		ctr_gpu_here(dir, host, log_fd);
	/* A container sees what the command would see outside: Slurm's
	 * variables and the ranks (with several tasks slurm-task sets them
	 * per task, but a container is refused there). */
	extern char **environ;
	for (char **e = environ; *e; e++) {
		static const char *const names[] = { "MASTER_ADDR=", "MASTER_PORT=", "WORLD_SIZE=",
						     "RANK=", "LOCAL_RANK=", "NODE_RANK=" };
		int take = !strncmp(*e, "SLURM_", 6);
		for (size_t i = 0; !take && i < GR_ARRAY_SIZE(names); i++)
			take = !strncmp(*e, names[i], strlen(names[i]));
		if (take)
			sv_push(&ctr_env, *e);
	}
	/* The host's indices of the GPUs Slurm gave the job, for a container
	 * (CUDA_VISIBLE_DEVICES may be renumbered inside Slurm's cgroup). */
	const char *jg = getenv("SLURM_JOB_GPUS");
	if (jg && (!*jg || strspn(jg, "0123456789,") != strlen(jg) || strlen(jg) > 256))
		jg = NULL;
	struct job_sup_mode mode = {
		.setup_build = !strcmp(job_spec_get(&spec, "slurm_build_on", "login"), "compute"),
		.run = 1,
		.take_gpus = 0,
		.launcher = launcher.n ? &launcher : NULL,
		.gpus_shown = getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "",
		.ctr_gpus = jg,
		.ctr_env = &ctr_env,
		.status_extra = extra,
		.cmd_prefix = traps_fit(&spec) ? SLURM_CMD_TRAPS : NULL,
	};

	struct sigaction sa = { 0 };
	sa.sa_handler = slurm_on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	child = fork();
	if (child < 0) {
		slurm_lognote(log_fd, "cannot start the job's supervisor: %s", strerror(errno));
		goto out;
	}
	if (child == 0) {
		signal(SIGUSR1, SIG_IGN); /* the parent passes it on */
		signal(SIGTERM, SIG_DFL);
		_exit(job_supervise_mode(dir, -1, -1, &mode));
	}
	for (int term_seen = 0;;) {
		rc = waitpid(child, &status, 0);
		int e = errno;
		if (slurm_got_usr1) {
			slurm_got_usr1 = 0;
			pass_usr1(dir, since, log_fd);
		}
		if (slurm_got_term && !term_seen) {
			term_seen = 1;
			on_term(dir, &spec, jid, log_fd);
			/* A stop of a job of several tasks signals the tasks'
			 * steps and this shell (job_backend_slurm.c): before the
			 * command started, the supervisor is what there is to
			 * stop. */
			if (ntasks > 1 && !command_started(dir, since))
				kill(child, SIGTERM);
		}
		if (rc == child)
			break;
		if (rc < 0 && e != EINTR) {
			status = 1 << 8;
			break;
		}
	}
	status = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	if (ntasks > 1)
		ranks_settle(dir, ntasks, log_fd);
	if (job_ctr_wanted(&spec)) {
		/* The supervisor removes its containers; should it have been
		 * killed first, none may outlive the job (scancel does not
		 * reach a container). */
		struct job_ctr c = { 0 };
		struct strvec stopped = STRVEC_INIT;
		const char *base = strrchr(dir, '/');
		if (job_ctr_load(dir, &c, &err) == 0) {
			job_ctr_stop_all(&c, base ? base + 1 : dir, 1, &stopped, NULL, &err);
			if (stopped.n)
				slurm_lognote(log_fd, "removed %zu container%s the job left", stopped.n,
					      stopped.n == 1 ? "" : "s");
			job_ctr_free(&c);
		}
		sv_clear(&stopped);
	}
	if (status == 0) {
		/* The batch step ends as the command did, so Slurm's own
		 * accounting (sacct, emails) tells a failed job from a done
		 * one: exit N, or 128+S for a signal. */
		struct strvec st = STRVEC_INIT;
		char *p = job_meta(dir, "status");
		if (job_kv_read(p, &st, NULL) == 0) {
			uint64_t sig = job_kv_u64(&st, "signal");
			status = sig ? 128 + (int)(sig & 0x7f) : (int)(job_kv_u64(&st, "exit") & 0xff);
		}
		free(p);
		sv_clear(&st);
	}
out:
	if (log_fd >= 0)
		close(log_fd);
	free(extra);
	sv_clear(&launcher);
	sv_clear(&ctr_env);
	job_spec_free(&spec);
	return status;
}

static volatile sig_atomic_t task_got_term;

static void task_on_signal(int sig)
{
	if (sig == SIGTERM)
		task_got_term = 1;
}

/* `slurm-task CMD...`: one task of several (under srun): its rank from
 * Slurm's, then the command in a child, so this task can say how the
 * command ended (.gpurun/rank-N) and outlive the signals Slurm sends
 * every process of the step (the command gets them too). */
int slurm_task_main(int argc, char **argv)
{
	static const struct {
		const char *from, *to;
	} ranks[] = {
		{ "SLURM_PROCID", "RANK" }, { "SLURM_LOCALID", "LOCAL_RANK" },
		{ "SLURM_NODEID", "NODE_RANK" }, { "SLURM_NTASKS", "WORLD_SIZE" },
	};
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM };
	const char *dir = getenv("GPURUN_JOB_DIR");
	long long n, rank = 0;
	int status = 1 << 8;
	pid_t pid;

	if (argc < 3) {
		fprintf(stderr, "usage: gpurun-agent slurm-task CMD...\n");
		return 2;
	}
	for (size_t i = 0; i < GR_ARRAY_SIZE(ranks); i++) {
		if (env_num(ranks[i].from, 1000000000, &n) < 0) {
			fprintf(stderr, "gpurun-agent slurm-task: no %s (not under srun?)\n", ranks[i].from);
			return 127;
		}
		setenv(ranks[i].to, getenv(ranks[i].from), 1);
	}
	env_num("SLURM_PROCID", 1000000000, &rank);
	struct sigaction sa = { 0 };
	sa.sa_handler = task_on_signal;
	for (size_t i = 0; i < GR_ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &sa, NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "gpurun: cannot run %s: fork: %s\n", argv[2], strerror(errno));
		return 127;
	}
	if (pid == 0) {
		for (size_t i = 0; i < GR_ARRAY_SIZE(sigs); i++)
			signal(sigs[i], SIG_DFL);
		execvp(argv[2], argv + 2);
		fprintf(stderr, "gpurun: cannot run %s: %s\n", argv[2], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			status = 1 << 8;
			break;
		}
	if (dir && *dir == '/') {
		char host[256] = "", name[40];
		gethostname(host, sizeof(host) - 1);
		char *t = xasprintf("rank=%lld\nnode=%s\nexit=%d\nsignal=%d\nend_ms=%llu\nterm=%d\n",
				    rank, host, WIFEXITED(status) ? WEXITSTATUS(status) : 0,
				    WIFSIGNALED(status) ? WTERMSIG(status) : 0,
				    (unsigned long long)slurm_now_ms(), task_got_term ? 1 : 0);
		snprintf(name, sizeof(name), "rank-%lld", rank);
		job_meta_write(dir, name, t, NULL);
		free(t);
	}
	/* After a SIGTERM to the job (stop, the time limit) the others are
	 * in their grace too: a bad exit here would make srun kill them
	 * (--kill-on-bad-exit); the rank file says how this one ended. */
	if (task_got_term)
		return 0;
	if (WIFSIGNALED(status)) {
		signal(WTERMSIG(status), SIG_DFL);
		raise(WTERMSIG(status));
		return exit_code_of(status);
	}
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
