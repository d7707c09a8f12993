/* The Slurm backend in the job's allocation (job_backend_slurm.c starts
 * it): the batch script runs the agent as `slurm-run DIR`, which runs the
 * job's steps with the supervisor (job_super.h), passes [slurm]
 * signal_before's SIGUSR1 on, resubmits at the time limit when asked,
 * and ends as the command did; `slurm-task` is one of several tasks
 * under srun, with its ranks for torch.distributed and JAX. */
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
#include "job_store.h"
#include "job_super.h"

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
	char nt[24];
	snprintf(nt, sizeof(nt), "%lld", ntasks);
	setenv("WORLD_SIZE", nt, 1);
	if (ntasks <= 1) {
		setenv("RANK", "0", 1);
		setenv("LOCAL_RANK", "0", 1);
		setenv("NODE_RANK", "0", 1);
	} else {
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
		}
		if (rc == child)
			break;
		if (rc < 0 && e != EINTR) {
			status = 1 << 8;
			break;
		}
	}
	status = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
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

/* `slurm-task CMD...`: one task of several (under srun): its rank from
 * Slurm's, then the command. */
int slurm_task_main(int argc, char **argv)
{
	static const struct {
		const char *from, *to;
	} ranks[] = {
		{ "SLURM_PROCID", "RANK" }, { "SLURM_LOCALID", "LOCAL_RANK" },
		{ "SLURM_NODEID", "NODE_RANK" }, { "SLURM_NTASKS", "WORLD_SIZE" },
	};
	long long n;

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
	execvp(argv[2], argv + 2);
	fprintf(stderr, "gpurun: cannot run %s: %s\n", argv[2], strerror(errno));
	return 127;
}
