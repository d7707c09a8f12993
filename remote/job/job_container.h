/* Jobs inside a container ([container] image): not a backend but a
 * wrapper either backend uses (job_backend.h). A step's command line
 * becomes the host's podman's or docker's
 *
 *   RUNTIME run --rm [-t] --init --name=gpurun-ID[-setup|-build]
 *       --label=gpurun.job=ID --network=host --ipc=host (or --shm-size)
 *       --security-opt=label=disable --user=UID:GID [--userns=keep-id]
 *       --workdir=CWD --mount=type=bind,source=P,target=P (job folder,
 *       project folder, [container] mounts) --env=... GPUS
 *       [container] options... IMAGE /bin/sh -c CMD   (or IMAGE ARGS...
 *       for train -- CMD ARGS)
 *
 * argv all the way: nothing is spliced into a shell string but the user's
 * own command, as on the host. The job folder and the project folder are
 * mounted at the same path, so the working directory, $GPURUN_JOB_DIR and
 * the persistent paths' links mean the same inside. -t gives the step a
 * terminal (a program that block-buffers a pipe still writes each line as
 * it is done), except with [train] output = pipe (then the sh -c
 * script starts with `exec 2>&1`, so stdout and stderr keep their order
 * through the runtime's one relay); --init puts an init in front that
 * passes the stop signal on (a program as PID 1 ignores SIGTERM unless
 * it handles it). GPUS:
 * CDI (--device=nvidia.com/gpu=N, or =all) where the host has a CDI spec
 * for nvidia.com/gpu and the runtime reads it, docker's --gpus where the
 * NVIDIA container toolkit is installed, else none; inside, the assigned
 * GPUs are numbered from 0, and CUDA_VISIBLE_DEVICES says so.
 *
 * The runtime is resolved when the job starts (job_ctr_prepare, at
 * JOB_START: a missing runtime fails the start, not the job) and recorded
 * in .gpurun/container; every later use reads it back (job_ctr_load).
 * Containers are found by their label, so a stop reaches each of the
 * job's containers whatever step made it. Blocking: runs in the agent's
 * helpers and in the supervisor, never in the agent's loop.
 *
 * Under a scheduler (the Slurm backend): the record is made at JOB_START
 * on the login node, like any job's; on the compute node the step runner
 * (best: a mode of the agent binary, which knows the GPUs only then)
 * calls job_ctr_load() and job_ctr_run_argv() with .gpus = the host
 * indices Slurm gave the job (SLURM_JOB_GPUS: CUDA_VISIBLE_DEVICES may be
 * renumbered inside Slurm's device cgroup, CDI names the host's), .env =
 * the spec's "env" list (its values must be in the runtime client's own
 * environment: they go in by name) and, for the run step, .args = the
 * spec's "argv" list when it has one (train -- CMD ARGS), and the
 * batch script traps TERM with job_ctr_stop_sh(), since scancel does not
 * reach a container (its client, under proctrack/linuxproc, survives
 * too). A script that runs a step itself quotes job_ctr_run_argv()'s
 * words with job_ctr_sh_quote(). */
#ifndef GR_JOB_CONTAINER_H
#define GR_JOB_CONTAINER_H

#include "job_steps.h"
#include "job_store.h"

#define CTR_LABEL "gpurun.job"  /* its value: the job id */
#define CTR_ASK_MS 30000        /* a runtime's answer to ps, version, info, rm */
#define CTR_GRACE 10            /* seconds a reaped or interrupted container gets */

struct job_ctr {
	char *runtime;          /* "podman" or "docker" */
	char *path;             /* its client, as found on PATH */
	char *image;
	char *user;             /* --user: "UID:GID" unless [container] user */
	char *gpu;              /* "cdi", "toolkit" or "none" */
	char *project;          /* the project folder, mounted at its path */
	char *shm_size;         /* bytes of /dev/shm instead of --ipc=host; "" */
	int keep_id;            /* rootless podman: --userns=keep-id */
	struct strvec options;  /* [container] options, one word each */
	struct strvec mounts;   /* [container] mounts as --mount values */
};

/* One step's part of the command line. */
struct job_ctr_step {
	const char *job_id, *job_dir;
	enum job_step step;
	const char *cwd;
	const char *shell;      /* JOB_SPEC "shell": "sh" or "login" */
	const char *cmd;
	const struct strvec *args; /* train -- CMD ARGS (the run step): run
				      as these words, not sh -c cmd; NULL */
	const char *gpus;       /* host indices "0,2"; NULL: not restricted */
	const struct strvec *env; /* the spec's K=V: passed by name (their
				     values stay out of the process table) */
	int no_tty;             /* output = pipe: no -t, the container's
				   stdout and stderr are the client's pipe */
};

/* 1 if the spec asks for a container. */
int job_ctr_wanted(const struct job_spec *s);

/* Check the spec's container keys (JOB_START): an image that cannot be
 * read as an option, a known runtime, mounts of the form SRC[:DST[:ro]]
 * with an absolute DST, no control characters. 0 or GR_EINVAL. */
int job_ctr_spec_check(const struct job_spec *s, struct gr_err *err);

/* Resolve the runtime for the job in dir (its spec read from there; the
 * project folder, absolute) on this host, decide how GPUs go in, and
 * write .gpurun/container. *warning (the caller's; NULL if none): the
 * host has GPUs (nvidia-smi) that cannot go into a container. GR_ENOTFOUND
 * when no runtime can be used, GR_EINVAL for a mount that does not exist,
 * with err set. Nothing to do (0) when the spec names no image. */
int job_ctr_prepare(const char *dir, const char *project, char **warning, struct gr_err *err);

/* How GPUs go into kind's containers on this host ("cdi", "toolkit" or
 * "none"), as job_ctr_prepare decides it: a scheduler's job decides again
 * where it runs (the login node may have no CDI spec, the compute node
 * one). */
const char *job_ctr_gpu_way(const char *kind, const char *path);

/* Read the job's container from dir; GR_ENOTFOUND when it has none. */
int job_ctr_load(const char *dir, struct job_ctr *c, struct gr_err *err);
void job_ctr_free(struct job_ctr *c);

/* The container's name for a step: gpurun-ID, gpurun-ID-setup, ... */
void job_ctr_name(const char *job_id, enum job_step step, char *buf, size_t n);

/* The argv that runs st in c (RUNTIME run ... IMAGE /bin/sh -c CMD, or
 * IMAGE ARGS... when st->args; with shell "login", IMAGE /bin/sh -l -c
 * 'exec "$@"' gpurun ARGS...), appended to out. */
void job_ctr_run_argv(const struct job_ctr *c, const struct job_ctr_step *st, struct strvec *out);

/* RUNTIME stop --time=GRACE NAME / RUNTIME rm --force NAME. */
void job_ctr_stop_argv(const struct job_ctr *c, const char *name, int grace_s, struct strvec *out);
void job_ctr_rm_argv(const struct job_ctr *c, const char *name, struct strvec *out);

/* Names of the job's containers, running or not (by label), into names.
 * 0, or GR_EREMOTE when the runtime did not answer (err set). */
int job_ctr_list(const struct job_ctr *c, const char *job_id, struct strvec *names,
		 struct gr_err *err);

/* Stop every container of the job: SIGTERM through the runtime, SIGKILL
 * after grace_s, remove it, then check none is left. Names stopped go to
 * stopped, names still there to left (either may be NULL). 0, or
 * GR_EREMOTE when the runtime did not answer. */
int job_ctr_stop_all(const struct job_ctr *c, const char *job_id, int grace_s,
		     struct strvec *stopped, struct strvec *left, struct gr_err *err);

/* A shell command that does what job_ctr_stop_all does, for a batch
 * script's trap (the Slurm backend): every word quoted. */
void job_ctr_stop_sh(const struct job_ctr *c, const char *job_id, int grace_s, struct strbuf *out);

/* argv as one shell command line, each word single-quoted as needed. */
void job_ctr_sh_quote(const struct strvec *argv, struct strbuf *out);

/* What `gpurun doctor` shows (CONTAINER_CHECK): for runtime want ("auto",
 * "podman", "docker") and image, key/value pairs in kv: runtime, path,
 * version, error, image (present, absent, or ""), gpu (cdi, toolkit,
 * none), cdi (spec files naming nvidia.com/gpu), toolkit (what was found),
 * nvidia_smi (its path or ""). */
void job_ctr_check(const char *want, const char *image, struct strvec *kv);

/* Run argv (run_capture, run.h), stdout into out and stderr into errs
 * (either may be NULL: discarded), at most timeout_ms (then SIGKILL:
 * 137). Returns the exit status (0-255, 128+N for a signal), or -1 if it
 * could not run. */
int job_ctr_exec(const char *const *argv, int timeout_ms, struct strbuf *out, struct strbuf *errs);
/* The last non-empty line of a runtime's output (trimmed in place). */
const char *job_ctr_last_line(struct strbuf *sb);

/* Split a [container] mounts entry SRC[:DST[:ro|rw]] (new strings in
 * *src and *dst, "" when no DST): -1 when it is malformed (no SRC, a
 * relative DST, a comma, another mode). */
int job_ctr_split_mount(const char *m, char **src, char **dst, int *ro);

/* `gpurun-agent container-reap DIR`, started by the supervisor of a job
 * with a container: waits until the supervisor lets go of the job's lock
 * (it ended, or died), then removes the job's containers that are left,
 * so a job whose supervisor is killed takes its container with it. */
int job_ctr_reap_main(int argc, char **argv);
/* Start it for the job in dir (double-forked, a session of its own). */
void job_ctr_reap_spawn(const char *dir);

#endif
