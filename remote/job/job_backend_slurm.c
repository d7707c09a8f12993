/* The Slurm backend (job_backend.h): gpurun's agent on a cluster's login
 * node hands jobs to Slurm, and nothing else schedules them.
 *
 *   start   the supervisor runs in `slurm-submit` mode on the login node:
 *           [setup] and [build] there (unless [slurm] build_on = compute),
 *           then sbatch of the batch script in the job's folder, and it
 *           ends: no process waits with a pending job.
 *   in the allocation (job_slurm_run.c), the batch script runs the agent
 *           as `slurm-run`: the same supervisor (job_super.h), without
 *           gpurun's GPU locks
 *           (Slurm chose the GPUs), the command through `srun ... agent
 *           slurm-task` when the job has several tasks; MASTER_ADDR,
 *           MASTER_PORT, NODE_RANK, and with several tasks WORLD_SIZE,
 *           RANK and LOCAL_RANK, for torch.distributed. It passes [slurm] signal_before's SIGUSR1
 *           to the command, and at the time limit submits the job again
 *           when [slurm] resubmit says so.
 *   state   from the job's files and what Slurm says (one squeue for all
 *           of a project's jobs in refresh; scontrol, then sacct, for one
 *           job), decided from Slurm's state, never its raw ExitCode; the
 *           queue's reason goes into the log as it changes.
 *   stop    scancel --signal=TERM, then scancel after the grace period.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job_backend.h"
#include "job_record.h"
#include "job_slurm.h"
#include "job_store.h"
#include "job_super.h"

/* A job's state is asked of Slurm at most this often (per job). */
#define CACHE_MS 2000
/* ... or this often once its status is written (the end is near). */
#define CACHE_END_MS 300
/* A job whose status is written is "running" until Slurm says how it
 * ended, for at most this long (a batch step that does not end). */
#define SETTLE_MS 60000

/* ---- state ---- */

static void set_str(char **f, const char *v)
{
	free(*f);
	*f = xstrdup(v ? v : "");
}


/* The status file's end into r. */
static void from_status(const struct strvec *st, struct job_rec *r)
{
	uint64_t sig = job_kv_u64(st, "signal");

	r->has_status = 1;
	r->signalled = sig != 0;
	r->code = (uint32_t)(sig ? sig : job_kv_u64(st, "exit"));
	r->end_ms = job_kv_u64(st, "end_ms");
	set_str(&r->phase, job_kv_get(st, "phase") ? job_kv_get(st, "phase") : "run");
	r->tries = (uint32_t)job_kv_u64(st, "tries");
}

static void ended_by_signal(struct job_rec *r, int sig)
{
	r->has_status = 1;
	r->signalled = 1;
	r->code = (uint32_t)sig;
}

/* Before the job reached Slurm: the login node's supervisor, as local. */
static void state_before_submit(const char *dir, struct job_rec *r, int has_status,
				const struct strvec *st)
{
	int alive = job_supervisor_alive(dir);
	char *phase = job_meta_text(dir, "phase");

	if (has_status) {
		from_status(st, r);
		set_str(&r->state, job_meta_exists(dir, "stopped") ? "stopped" : job_status_state(st, r));
	} else if (alive) {
		char *queued = job_meta_text(dir, "queued");
		set_str(&r->state, *queued ? "queued" : !strcmp(phase, "setup") ? "setup" :
				   !strcmp(phase, "build") ? "building" : "starting");
		set_str(&r->reason, queued);
		set_str(&r->phase, phase);
		free(queued);
	} else {
		set_str(&r->state, "lost");
	}
	free(phase);
}

/* "rank 1 on node2 failed first (exit 3)", from the status of a job of
 * several tasks (job_slurm_run.c). */
static void failed_rank_why(const struct strvec *st, struct strbuf *why)
{
	const char *rank = job_kv_get(st, "failed_rank"), *node = job_kv_get(st, "failed_node");
	uint64_t sig = job_kv_u64(st, "signal");

	if (!rank || !node)
		return;
	sb_addf(why, "rank %s on %s failed first (%s %llu)", rank, node,
		sig ? "signal" : "exit", (unsigned long long)(sig ? sig : job_kv_u64(st, "exit")));
}

void slurm_map(const struct slurm_info *si, int status_valid, const struct strvec *st,
	       int stopped, const char *phase, const char *slurm_id, struct job_rec *r)
{
	const char *s = si->state;
	struct strbuf why = STRBUF_INIT;

	set_str(&r->slurm_state, s);
	set_str(&r->partition, si->partition);
	set_str(&r->nodes, si->nodes);
	if (!r->start_ms && si->start_s)
		r->start_ms = si->start_s * 1000;
	if (status_valid)
		from_status(st, r);
	else
		set_str(&r->phase, phase);
	if (!si->known) {
		if (status_valid) {
			set_str(&r->state, stopped ? "stopped" : job_status_state(st, r));
		} else {
			set_str(&r->state, "lost");
			sb_addf(&why, "Slurm no longer knows job %s and the job left no exit status", slurm_id);
		}
		goto out;
	}
	if (!strcmp(s, "PENDING") || !strcmp(s, "REQUEUED") || !strcmp(s, "REQUEUE_HOLD") ||
	    !strcmp(s, "REQUEUE_FED") || !strcmp(s, "RESV_DEL_HOLD") || !strcmp(s, "CONFIGURING")) {
		if (status_valid && !stopped) {
			/* A status from a run Slurm then requeued is stale:
			 * the caller passes status_valid only for this run. */
		}
		r->has_status = r->signalled = 0;
		r->code = 0;
		r->end_ms = 0;
		set_str(&r->state, "queued");
		if (!strcmp(s, "CONFIGURING"))
			sb_addf(&why, "Slurm job %s: its nodes are being set up", slurm_id);
		else
			sb_addf(&why, "Slurm job %s is %s%s%s", slurm_id,
				!strcmp(s, "PENDING") ? "pending" : "requeued",
				slurm_reason_given(si->reason) ? ": " : "", slurm_reason_given(si->reason) ? si->reason : "");
		goto out;
	}
	if (status_valid && !slurm_state_final(s, 0) && r->end_ms + SETTLE_MS > r->now_ms) {
		/* The command ended; Slurm says why (time limit, scancel) once
		 * the batch step is over: moments later, as a rule. */
		r->has_status = r->signalled = 0;
		r->code = 0;
		r->end_ms = 0;
		set_str(&r->state, "running");
		sb_addf(&why, "ending (Slurm: %s)", s);
		goto out;
	}
	if (status_valid) {
		/* The command ended and said how; Slurm's state says why. */
		if (stopped)
			set_str(&r->state, "stopped");
		else if (!strcmp(s, "TIMEOUT") || !strcmp(s, "DEADLINE"))
			set_str(&r->state, "timeout");
		else if (!strcmp(s, "CANCELLED") || !strcmp(s, "REVOKED"))
			set_str(&r->state, "cancelled");
		else if (!strcmp(s, "PREEMPTED"))
			set_str(&r->state, "preempted");
		else if (!strcmp(s, "NODE_FAIL") || !strcmp(s, "BOOT_FAIL"))
			set_str(&r->state, "node_fail");
		else
			set_str(&r->state, job_status_state(st, r));
		if (!strcmp(s, "OUT_OF_MEMORY"))
			sb_adds(&why, "out of memory (Slurm: OUT_OF_MEMORY)");
		else if (!stopped)
			failed_rank_why(st, &why);
		goto out;
	}
	if (!strcmp(s, "RUNNING") || !strcmp(s, "COMPLETING") || !strcmp(s, "SIGNALING") ||
	    !strcmp(s, "STAGE_OUT") || !strcmp(s, "RESIZING") || !strcmp(s, "SUSPENDED")) {
		set_str(&r->state, !strcmp(phase, "setup") ? "setup" :
				   !strcmp(phase, "build") ? "building" : "running");
		if (!strcmp(s, "SUSPENDED"))
			sb_addf(&why, "Slurm suspended job %s", slurm_id);
		goto out;
	}
	if (stopped && (!strcmp(s, "CANCELLED") || !strcmp(s, "COMPLETED") || !strcmp(s, "FAILED"))) {
		set_str(&r->state, "stopped");
		ended_by_signal(r, SIGTERM);
	} else if (!strcmp(s, "CANCELLED") || !strcmp(s, "REVOKED")) {
		set_str(&r->state, "cancelled");
		ended_by_signal(r, SIGTERM);
		sb_addf(&why, "Slurm job %s was cancelled outside gpurun%s%s", slurm_id,
			strncmp(si->reason, "CANCELLED by ", 13) ? "" : " (",
			strncmp(si->reason, "CANCELLED by ", 13) ? "" : si->reason);
		if (!strncmp(si->reason, "CANCELLED by ", 13))
			sb_adds(&why, ")");
	} else if (!strcmp(s, "TIMEOUT") || !strcmp(s, "DEADLINE")) {
		set_str(&r->state, "timeout");
		ended_by_signal(r, SIGTERM);
	} else if (!strcmp(s, "NODE_FAIL") || !strcmp(s, "BOOT_FAIL")) {
		set_str(&r->state, "node_fail");
	} else if (!strcmp(s, "PREEMPTED")) {
		set_str(&r->state, "preempted");
		ended_by_signal(r, SIGTERM);
	} else if (!strcmp(s, "OUT_OF_MEMORY")) {
		set_str(&r->state, "failed");
		ended_by_signal(r, SIGKILL);
		sb_adds(&why, "out of memory (Slurm: OUT_OF_MEMORY)");
	} else if (!strcmp(s, "FAILED") || !strcmp(s, "SPECIAL_EXIT")) {
		set_str(&r->state, "failed");
		r->has_status = 1;
		r->signalled = si->exit_signal != 0;
		r->code = (uint32_t)(si->exit_signal ? si->exit_signal : si->exit_code ? si->exit_code : 1);
		sb_addf(&why, "the batch script of Slurm job %s failed before the job's command "
			"ended; see .gpurun/slurm-%s.out", slurm_id, slurm_id);
	} else if (!strcmp(s, "COMPLETED")) {
		set_str(&r->state, "lost");
		sb_addf(&why, "Slurm job %s completed, but the job left no exit status; see "
			".gpurun/slurm-%s.out", slurm_id, slurm_id);
	} else {
		set_str(&r->state, "unknown");
		sb_addf(&why, "Slurm says %s", s);
	}
	if (!r->end_ms && si->end_s && job_rec_ended(r))
		r->end_ms = si->end_s * 1000;
out:
	if (why.len)
		set_str(&r->reason, why.buf);
	sb_release(&why);
}

/* A job whose submitting supervisor died between sbatch and recording
 * the id (killed, or its answer lost) may run all the same: when the
 * supervisor is gone in the run phase with no id and no status, ask
 * Slurm for the job by its name (at most every LOOKUP_MS) and record
 * what it has. 1 when an id was recorded. */
#define LOOKUP_MS 30000
static int adopt_by_name(const char *dir, const char *job_id)
{
	char found[32], *phase, *p;
	struct strvec kv = STRVEC_INIT;
	int rc = 0, fd;

	if (!job_id || job_supervisor_alive(dir))
		return 0;
	phase = job_meta_text(dir, "phase");
	p = job_meta(dir, "slurm-lookup");
	job_kv_read(p, &kv, NULL);
	if (strcmp(phase, "run") || slurm_now_ms() - job_kv_u64(&kv, "queried_ms") < LOOKUP_MS)
		goto out;
	char *t = xasprintf("queried_ms=%llu\n", (unsigned long long)slurm_now_ms());
	job_meta_write(dir, "slurm-lookup", t, NULL);
	free(t);
	if (slurm_find_by_name(dir, job_id, found, sizeof(found)) != 1)
		goto out;
	char *meta = job_meta(dir, "slurm");
	fd = open(meta, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0 && dprintf(fd, "id=%s\n", found) > 0) {
		int log_fd = slurm_open_log(dir);
		slurm_lognote(log_fd, "the job's submitter ended before it recorded the Slurm job; "
			      "Slurm has it by its name: Slurm job %s", found);
		if (log_fd >= 0)
			close(log_fd);
		rc = 1;
	}
	if (fd >= 0)
		close(fd);
	free(meta);
out:
	free(phase);
	free(p);
	sv_clear(&kv);
	return rc;
}

/* A job Slurm killed for memory: its words from slurm-ID.out (the tail),
 * not only "see .gpurun/slurm-ID.out". */
static void quote_oom(const char *dir, const char *id, struct job_rec *r)
{
	char name[48], line[240];
	struct strbuf sb = STRBUF_INIT;
	int fd;

	snprintf(name, sizeof(name), "slurm-%s.out", id);
	char *p = job_meta(dir, name);
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	free(p);
	if (fd < 0)
		return;
	off_t end = lseek(fd, 0, SEEK_END);
	if (end > 65536)
		lseek(fd, end - 65536, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	char buf[8192];
	ssize_t got;
	while (sb.len < 65536 && (got = read(fd, buf, sizeof(buf))) > 0)
		sb_add(&sb, buf, (size_t)got);
	close(fd);
	if (sb.len && slurm_oom_line(sb.buf, sb.len, line, sizeof(line))) {
		free(r->reason);
		r->reason = xasprintf("killed for memory: %s", line);
	}
	sb_release(&sb);
}

/* A batch step that ended without the job's status and left no
 * slurm-ID.out here ran where this folder is not (compute nodes that do
 * not share the home folder): say so, not "see .gpurun/slurm-ID.out". */
static void no_output_why(const char *dir, const char *id, const struct slurm_info *si,
			  struct job_rec *r)
{
	char name[48];

	snprintf(name, sizeof(name), "slurm-%s.out", id);
	if (job_meta_exists(dir, name))
		return;
	free(r->reason);
	r->reason = xasprintf("Slurm job %s ended (%s) before gpurun's agent ran%s%s, and Slurm "
			      "wrote no .gpurun/%s here: do the compute nodes see '%s' (a home "
			      "folder they share)?", id, si->state, *si->nodes ? " on " : "",
			      si->nodes, name, dir);
}

static void slurm_state(const char *dir, struct job_rec *r)
{
	struct strvec ids = STRVEC_INIT, st = STRVEC_INIT, run = STRVEC_INIT;
	struct job_spec spec = { STRVEC_INIT };
	struct slurm_info si;
	char *p, *phase = NULL, *error = NULL;
	int has_status;

	slurm_ids(dir, &ids);
	p = job_meta(dir, "status");
	has_status = job_kv_read(p, &st, NULL) == 0;
	free(p);
	p = job_meta(dir, "run");
	job_kv_read(p, &run, NULL);
	free(p);
	r->start_ms = job_kv_u64(&run, "start_ms");
	set_str(&r->gpus, job_kv_get(&run, "gpus"));
	if (!ids.n && !has_status && adopt_by_name(dir, r->id))
		slurm_ids(dir, &ids);
	if (!ids.n) {
		state_before_submit(dir, r, has_status, &st);
		goto out;
	}
	const char *cur = ids.v[ids.n - 1];
	set_str(&r->slurm_id, cur);
	r->submits = (uint32_t)ids.n;
	/* A status counts when this run of this Slurm job wrote it (not
	 * the run before a requeue, not the job before a resubmission). */
	const char *sid = job_kv_get(&st, "slurm_id");
	int for_cur = has_status && ((sid && !strcmp(sid, cur)) || (!sid && ids.n == 1));
	job_spec_read(dir, &spec, NULL);
	int requeue = !strcmp(job_spec_get(&spec, "slurm_requeue", ""), "1");
	if (slurm_info_get(dir, cur, requeue, for_cur ? CACHE_END_MS : CACHE_MS, &si, &error) < 0) {
		/* Slurm cannot be asked now: what the files say. */
		if (for_cur) {
			from_status(&st, r);
			set_str(&r->state, job_meta_exists(dir, "stopped") ? "stopped" :
					   !r->signalled && !r->code ? "done" : "failed");
		} else {
			set_str(&r->state, "unknown");
		}
		free(r->reason);
		r->reason = xasprintf("cannot ask Slurm about job %s: %s", cur, error);
		goto out;
	}
	if (for_cur && si.known && job_kv_u64(&st, "slurm_restarts") < si.restarts)
		for_cur = 0; /* written before Slurm requeued it */
	phase = job_meta_text(dir, "phase");
	slurm_map(&si, for_cur, &st, job_meta_exists(dir, "stopped"), phase, cur, r);
	if (si.known && job_rec_ended(r) && strcmp(r->state, "done") && strcmp(r->state, "stopped"))
		quote_oom(dir, cur, r);
	if (si.known && !for_cur && (!strcmp(si.state, "FAILED") || !strcmp(si.state, "COMPLETED")))
		no_output_why(dir, cur, &si, r);
	if (*error && !job_rec_ended(r)) {
		free(r->reason);
		r->reason = xasprintf("cannot ask Slurm about job %s now: %s", cur, error);
	}
out:
	free(phase);
	free(error);
	job_spec_free(&spec);
	sv_clear(&ids);
	sv_clear(&st);
	sv_clear(&run);
}

/* ---- start: on the login node ---- */

static int slurm_start(const char *dir, struct gr_err *err)
{
	return job_start_supervisor(dir, "slurm-submit", err);
}


static void scancel(const char *id, const char *signal_opt, struct strbuf *said)
{
	const char *with[] = { "scancel", "--full", signal_opt, id, NULL };
	const char *plain[] = { "scancel", id, NULL };
	struct strbuf e = STRBUF_INIT;

	slurm_tool(signal_opt ? with : plain, SLURM_TOOL_MS, NULL, &e);
	if (said && e.len)
		sb_add(said, e.buf, e.len);
	sb_release(&e);
}

/* The supervisor hands the job to Slurm and ends: no process waits
 * with a pending job (whoever asks about the job asks Slurm, and the
 * project's jobs are asked about in one squeue, slurm_refresh). */
static int submit_and_watch(const char *dir, const struct job_spec *spec, int log_fd)
{
	struct gr_err err = { 0 };
	char *id = NULL;

	if (slurm_submit(dir, spec, NULL, &id, &err) < 0) {
		slurm_lognote(log_fd, "sbatch failed: %s", err.msg);
		if (err.hint[0])
			slurm_lognote(log_fd, "hint: %s", err.hint);
		return 1 << 8;
	}
	slurm_lognote(log_fd, "submitted to Slurm as job %s%s%s", id,
		*job_spec_get(spec, "slurm_partition", "") ? " in partition " : "",
		job_spec_get(spec, "slurm_partition", ""));
	/* The controller answers (again): no job waits out a back-off from
	 * a moment it did not. */
	if (slurm_queue_down(dir, 0, NULL, 0))
		slurm_queue_mark(dir, 0, NULL);
	/* A stop that came while sbatch ran found no id to cancel. */
	if (slurm_stop_asked(dir))
		scancel(id, NULL, NULL);
	free(id);
	return 0;
}

/* `slurm-submit DIR LOCKFD READYFD`: the login node's supervisor. */
static int slurm_submit_main(int argc, char **argv)
{
	struct job_spec spec = { STRVEC_INIT };
	long long lockfd, readyfd;
	int rc;

	if (argc != 5 || parse_ll(argv[3], 0, 1 << 20, &lockfd) < 0 ||
	    parse_ll(argv[4], 0, 1 << 20, &readyfd) < 0) {
		fprintf(stderr, "usage: gpurun-agent slurm-submit DIR LOCKFD READYFD\n");
		return 2;
	}
	job_spec_read(argv[2], &spec, NULL);
	struct job_sup_mode mode = {
		.setup_build = strcmp(job_spec_get(&spec, "slurm_build_on", "login"), "compute") != 0,
		.run = 0,
		.hand_on = submit_and_watch,
	};
	rc = job_supervise_mode(argv[2], (int)lockfd, (int)readyfd, &mode);
	job_spec_free(&spec);
	return rc;
}

static int slurm_main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "slurm-submit"))
		return slurm_submit_main(argc, argv);
	if (argc == 3 && !strcmp(argv[1], "slurm-run"))
		return slurm_run_main(argv[2]);
	if (argc >= 2 && !strcmp(argv[1], "slurm-task"))
		return slurm_task_main(argc, argv);
	return -1;
}

/* ---- stop ---- */

/* Wait until the job has ended, up to ms; reload r. 1 if it ended. */
static int wait_end(const char *dir, struct job_rec *r, uint64_t ms)
{
	for (uint64_t until = now_ms() + ms;; usleep(200 * 1000)) {
		job_rec_clear(r);
		if (job_load(dir, r, 0, NULL) < 0)
			return 0;
		if (job_rec_ended(r))
			return 1;
		if (now_ms() >= until)
			return 0;
	}
}

/* SIGTERM to the running job. One task: every process of the job (the
 * batch step's supervisor passes it on). Several: srun answers a SIGTERM
 * with a SIGKILL to every task ("forcing job termination"), so the tasks
 * get it in their steps and the batch shell alone beside them (it passes
 * it to the supervisor while the command has not started). */
static void stop_signal(const char *dir, const char *id, struct strbuf *said)
{
	struct job_spec spec = { STRVEC_INIT };
	uint32_t ntasks = job_spec_read(dir, &spec, NULL) == 0 ? slurm_ntasks(&spec) : 1;

	job_spec_free(&spec);
	if (ntasks <= 1) {
		scancel(id, "--signal=TERM", said);
		return;
	}
	const char *steps[] = { "scancel", "--signal=TERM", id, NULL };
	const char *batch[] = { "scancel", "--batch", "--signal=TERM", id, NULL };
	struct strbuf e = STRBUF_INIT;
	slurm_tool(steps, SLURM_TOOL_MS, NULL, &e);
	slurm_tool(batch, SLURM_TOOL_MS, NULL, &e);
	if (said && e.len)
		sb_add(said, e.buf, e.len);
	sb_release(&e);
}

static int slurm_stop(const char *dir, int grace_s, struct strbuf *payload, struct gr_err *err)
{
	struct strvec ids = STRVEC_INIT;
	struct strbuf said = STRBUF_INIT;
	struct job_rec r;
	uint32_t nterm = 0;
	int killed = 0, rc;

	if ((rc = job_load(dir, &r, 0, err)) < 0)
		return rc;
	if (!job_rec_ended(&r)) {
		char *p = job_meta(dir, "stopped");
		write_file_atomic(p, "", 0, 0644, NULL);
		free(p);
	}
	slurm_ids(dir, &ids);
	if (!ids.n && !job_rec_ended(&r)) {
		/* Still in setup or build on the login node (or about to
		 * submit: it cancels what it submits once it sees the stop). */
		job_rec_clear(&r);
		sv_clear(&ids);
		return job_backend_find("local")->stop(dir, grace_s, payload, err);
	}
	const char *id = ids.n ? ids.v[ids.n - 1] : "";
	/* Pending or not, as Slurm says now (the record may be a cached
	 * answer from before the job started). */
	struct slurm_info si = { 0 };
	struct gr_err qe = { 0 };
	int pending = !strcmp(r.state, "queued");
	if (*id && slurm_query(id, &si, &qe) == 0 && si.known)
		pending = !strcmp(si.state, "PENDING") || !strcmp(si.state, "REQUEUED") ||
			  !strcmp(si.state, "REQUEUE_HOLD");
	if (!job_rec_ended(&r)) {
		int log_fd = slurm_open_log(dir);
		slurm_lognote(log_fd, "stop: Slurm job %s is %s: %s", id,
			      si.known && !qe.code ? si.state : r.state,
			      pending ? "scancel" : "SIGTERM to its processes, scancel after the grace period");
		if (log_fd >= 0)
			close(log_fd);
		if (pending) {
			scancel(id, NULL, &said);
			wait_end(dir, &r, 30000);
		} else {
			/* The grace period as a signal first, to every process
			 * of the job (the batch shell too: it passes it on). */
			stop_signal(dir, id, &said);
			nterm = 1;
			if (!wait_end(dir, &r, (uint64_t)grace_s * 1000)) {
				scancel(id, NULL, &said);
				killed = 1;
				wait_end(dir, &r, 120000);
			}
		}
	}
	/* What Slurm says now, and what scancel said. */
	struct strbuf why = STRBUF_INIT;
	if (*id)
		sb_addf(&why, "Slurm job %s: %s", id, *r.slurm_state ? r.slurm_state : "unknown");
	/* scancel's complaint matters when the job did not end (a signal
	 * to a job that ends meanwhile draws "Invalid job id"). */
	if (said.len && !job_rec_ended(&r)) {
		char line[256];
		size_t n = strcspn(said.buf, "\n");
		snprintf(line, sizeof(line), "%.*s", (int)(n < 200 ? n : 200), said.buf);
		sb_addf(&why, "; %s", line);
	}
	if (why.len) {
		free(r.reason);
		r.reason = sb_detach(&why, NULL);
	}
	sb_release(&why);
	job_rec_put(payload, &r);
	put_u32(payload, nterm);
	put_u8(payload, (uint8_t)killed);
	put_u32(payload, 0); /* survivors: Slurm's to clean up */
	put_u32(payload, 0); /* GPU holders */
	put_u32(payload, 0); /* containers: on the compute node, the batch step's */
	put_str(payload, "");
	job_rec_clear(&r);
	sv_clear(&ids);
	sb_release(&said);
	return 0;
}

const struct job_backend job_backend_slurm = {
	.name = "slurm",
	.start = slurm_start,
	.state = slurm_state,
	.refresh = slurm_refresh,
	.stop = slurm_stop,
	.status_final = 0,
	.main = slurm_main,
};
