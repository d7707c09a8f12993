/* How a job is started, watched and stopped on the host: one interface,
 * one file per implementation (DESIGN.md, "Job backends"). The client's
 * job protocol is the same whatever the backend; a job's spec names its
 * backend ("backend" key, default "local"), and job_record.c asks that
 * backend for the live part of the record.
 *
 *   local   job_backend_local.c: the agent's own supervisor, a process in
 *           a session of its own that runs setup, build and the command
 *           under a pty and records the exit status.
 *   slurm   job_backend_slurm.c (job_slurm.h): sbatch, squeue, scontrol,
 *           sacct and scancel run by the agent on a cluster's login node.
 *           start runs the supervisor in a mode that does setup and build
 *           there (or leaves them to the job) and submits a batch script
 *           written into the job folder; the script runs the agent again
 *           in the allocation (`slurm-run`), which runs the same steps
 *           (job_super.h) there, the command through srun for several
 *           tasks. state maps scontrol/sacct to gpurun's states, with the
 *           queue reason in `reason`; stop is scancel.
 *   containers are not a backend but a wrapper either backend uses
 *           (job_container.h): the runtime is resolved at JOB_START for
 *           any backend (.gpurun/container); whoever runs a step builds
 *           its argv with job_ctr_run_argv() instead of job_step_argv(),
 *           and a stop stops the job's containers by label
 *           (job_ctr_stop_all(), or job_ctr_stop_sh() in a batch
 *           script's trap).
 *
 * Common ground: the job folder and its meta files (job_store.h). Output
 * goes to .gpurun/log (the log streamer reads it from there, whichever
 * backend wrote it), and a backend either writes .gpurun/status when the
 * job ends or says how it ended in state().
 *
 * Every function may block; none runs in the agent's poll loop except
 * state(), which must be quick (a few small files, one flock; a
 * scheduler backend caches what its tools said, see refresh). */
#ifndef GR_JOB_BACKEND_H
#define GR_JOB_BACKEND_H

#include "err.h"
#include "job_proto.h"
#include "job_store.h" /* JOB_BACKEND_DEFAULT */
#include "util.h"

struct job_backend {
	const char *name;
	/* Start the job whose folder dir is prepared (meta files, spec,
	 * snapshot). Returns once the backend has taken it: the local
	 * supervisor is running, or the scheduler accepted it. Runs in a
	 * helper the agent forks. 0, or GR_E* with err set (the caller then
	 * removes the folder). */
	int (*start)(const char *dir, struct gr_err *err);
	/* The live part of the record: state, phase, reason, pid, start_ms,
	 * end_ms, has_status/signalled/code, gpus. r holds the common meta
	 * already (id, created_ms, command, dir, workdir, backend). */
	void (*state)(const char *dir, struct job_rec *r);
	/* Optional (NULL: none): called once before a listing of the jobs
	 * under root, so a scheduler backend asks its tools once for all of
	 * them instead of once per job. */
	void (*refresh)(const char *root);
	/* Stop the job: TERM, KILL after grace_s, then check nothing is
	 * left. Appends JOB_STOP's reply payload (job_proto.h) to reply.
	 * Runs in a helper the agent forks. */
	int (*stop)(const char *dir, int grace_s, struct strbuf *reply, struct gr_err *err);
	/* 1 when a job's .gpurun/status is its end for sure (local); 0 when
	 * state() must confirm it (a scheduler may requeue or resubmit). */
	int status_final;
	/* A mode of the agent binary this backend runs on the host
	 * (`gpurun-agent supervise DIR ...` for local). Returns the exit
	 * code, or -1 when argv[1] is not one of its modes. */
	int (*main)(int argc, char **argv);
};

extern const struct job_backend job_backend_local;
extern const struct job_backend job_backend_slurm;

/* The supervisor's start (job_backend.c), for any backend: take the job's
 * lock and start `gpurun-agent MODE DIR LOCKFD READYFD` in a session of
 * its own, double-forked, handing it the lock; returns once it said
 * "ok" (job_super.h). */
int job_start_supervisor(const char *dir, const char *mode, struct gr_err *err);
/* 1 while a supervisor holds the job's .gpurun/lock. */
int job_supervisor_alive(const char *dir);

/* The backend called name, or NULL. */
const struct job_backend *job_backend_find(const char *name);
/* The backend of the job in dir (its spec's "backend"; local if unset). */
const struct job_backend *job_backend_of(const char *dir);

/* Call every backend's refresh (before a listing of root's jobs). */
void job_backends_refresh(const char *root);

/* Offer argv to every backend's main (agent.c's other modes). */
int job_backend_main(int argc, char **argv);

#endif
