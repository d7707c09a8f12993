/* GPUs on the host: nvidia-smi's view (utilisation, memory, compute
 * processes), advisory per-GPU locks that keep two gpurun jobs off one
 * GPU whoever's they are (shared by every account: GPURUN_LOCK_DIR or
 * /tmp, see job_gpu.c), and the choice behind [train] gpus = all | N | 0,2.
 * GPURUN_NVIDIA_SMI names another program to ask (tests point it at a
 * recorded output). Blocking: called by the supervisor and by the agent's
 * forked helpers, never in the agent's loop. */
#ifndef GR_JOB_GPU_H
#define GR_JOB_GPU_H

#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "util.h"

struct gpu_info {
	uint32_t index;
	char *uuid, *name;
	uint32_t util;            /* percent */
	uint64_t mem_used, mem_total; /* MiB */
	char *locked_by;          /* gpurun job holding its lock ("ID", or "USER:ID"
				     for another user's), or NULL */
	int busy;                 /* gpu_acquire: a process (any user's) is on it */
};

struct gpu_app {
	uint32_t pid;
	char *gpu_uuid;
	uint64_t mem;             /* MiB */
	char *name;
	char *job;                /* gpurun job id found in its environment, or NULL */
};

struct gpu_report {
	int have_smi;             /* nvidia-smi found and answered */
	char *error;              /* why not, when it was found but failed */
	struct gpu_info *gpus;
	size_t ngpus;
	struct gpu_app *apps;
	size_t napps;
};

/* Run argv (run_capture, run.h), stdout into out (up to 4 MiB), stderr
 * dropped, at most timeout_ms (then SIGKILL: 137). Returns the exit
 * status (0-255, 128+N), or -1 if it could not be run. */
int gpu_run_capture(const char *const *argv, int timeout_ms, struct strbuf *out);

/* nvidia-smi's path (GPURUN_NVIDIA_SMI, else run_which's: PROBE finds the
 * same one), or NULL; the caller frees it. */
char *gpu_smi_path(void);

/* Ask nvidia-smi; a host without it gives have_smi = 0 and no error. */
void gpu_report_load(struct gpu_report *r, int with_apps);
void gpu_report_free(struct gpu_report *r);

/* Parse nvidia-smi csv,noheader,nounits output (exposed for tests). */
void gpu_parse_gpus(const char *csv, struct gpu_report *r);
void gpu_parse_apps(const char *csv, struct gpu_report *r);

/* Pick GPUs for job_id per spec. Returns 0 with *assigned ("0,1", or ""
 * for no restriction: CUDA_VISIBLE_DEVICES stays unset when *restrict_ is
 * 0) and the lock fds (which the job should inherit) in fds; 1 when the
 * job must wait (why in *why); or a GR_E* code (bad spec, more GPUs asked
 * than the host has). */
int gpu_acquire(const char *spec, const char *job_id, const uint32_t *avoid, size_t navoid,
		char **assigned, int *restrict_, int **fds, size_t *nfds, char **why,
		struct gr_err *err);
/* (avoid: GPU indices a count leaves alone: earlier jobs in the queue
 * wait for them, job_queue.h.) */

/* The lock folders (for the queue, job_queue.c, which keeps its tickets
 * beside the locks): their base (GPURUN_LOCK_DIR or /tmp; new string);
 * this user's folder, made and checked if need be (an fd, or -1 with
 * err); the uid a base entry's name says it is the lock folder of, or
 * -1; who holds GPU index ("ID", "USER:ID", or NULL). */
char *gpu_lock_base(void);
int gpu_lock_own_dir(struct gr_err *err);
long long gpu_lock_dir_uid(const char *name);
char *gpu_lock_holder(uint32_t index);
/* fn(path, fd, uid, arg) for every user's lock folder that is in the
 * hands of the uid it is named after and closed to others (the rest are
 * nobody's locks), until fn returns non-zero. */
void gpu_lock_each_folder(int (*fn)(const char *path, int fd, uid_t uid, void *arg), void *arg);
/* Is name in dfd a regular file of uid's (no link followed, no FIFO
 * opened) that someone holds flock'ed? 1, and its first line in buf (up
 * to len; buf may be NULL), else 0. */
int gpu_lock_file_held(int dfd, const char *name, uid_t uid, char *buf, size_t len);

/* The gpurun job id in pid's environment (GPURUN_JOB_ID), or NULL. */
char *gpu_pid_job(uint32_t pid);

#endif
