/* Jobs on the host as folders: where they live, their ids, the small
 * files that record them, and the state derived from those files. Used by
 * the agent's job handlers and by the supervisor (agent_job_main).
 *
 * Layout: $HOME/.cache/gpurun/jobs/<project key>/<id>/ is the job's folder
 * (GPURUN_JOB_DIR: the job writes its artifacts there). gpurun's own files
 * sit in its .gpurun/ subfolder:
 *   job       key=value: id, project, gpus (request), created_ms
 *   command   the [train] command, as given
 *   env       extra environment, NUL-separated K=V
 *   lock      flock'ed by the supervisor while it lives
 *   queued    exists while the job waits for GPUs (text: why)
 *   run       key=value: pid, start_ms, gpus (assigned); written at spawn
 *   log       the job's stdout+stderr, append-only
 *   status    key=value: exit, signal, end_ms; written last, atomically
 *   stopped   exists once `gpurun stop` was asked for this job
 *   src/      the snapshot of the project the job runs in (its cwd)
 * The job folder is outside the synced tree, so sync never deletes it. */
#ifndef GR_JOB_STORE_H
#define GR_JOB_STORE_H

#include <stdint.h>

#include "job_proto.h"
#include "util.h"

/* The folder holding a project's jobs. Returns a new string. */
char *job_root(const char *project);
/* "YYYYMMDD-HHMMSS-xxxx" (host local time, 4 random hex digits). */
char *job_new_id(void);
/* 1 if id has exactly the shape job_new_id makes (so it is safe in paths). */
int job_id_valid(const char *id);
/* <dir>/.gpurun/<name>. Returns a new string. */
char *job_meta(const char *dir, const char *name);

/* Parse key=value lines of a meta file into kv ("key=value" strings).
 * Missing file: GR_ENOTFOUND. */
int job_kv_read(const char *path, struct strvec *kv, struct gr_err *err);
const char *job_kv_get(const struct strvec *kv, const char *key);
uint64_t job_kv_u64(const struct strvec *kv, const char *key);

/* 1 while the job's supervisor holds .gpurun/lock. */
int job_supervisor_alive(const char *dir);

/* Fill r from the job folder dir (id = its name). GR_ENOTFOUND when it is
 * not a job. r's strings are the caller's (job_rec_clear). */
int job_load(const char *dir, struct job_rec *r, struct gr_err *err);

/* Ids of the jobs under root, newest first. */
void job_list_ids(const char *root, struct strvec *ids);

/* Resolve want ("" = latest, an id, or a unique prefix of one) to an id.
 * *id is the caller's. GR_ENOTFOUND / GR_EINVAL (ambiguous) with err set. */
int job_resolve(const char *root, const char *want, char **id, struct gr_err *err);

/* Offset where the last n lines of the file at path start (0 if it holds
 * fewer). */
uint64_t job_tail_offset(const char *path, uint32_t n);

#endif
