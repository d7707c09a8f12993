/* Jobs on the host as folders: their ids and the small files that record
 * them. The record built from those files is job_record.h's; the store
 * below it knows no backend and no house-keeping. Used by the agent's job
 * handlers, the record, the backends (job_backend.h) and housekeeping
 * (job_house.h). Nothing here needs the agent's loop, so the unit tests
 * compile it in.
 *
 * Layout: a project's jobs live in its jobs root,
 * <jobs base>/<project key>/ (agent_job_find.c: job_root), the base being
 * [remote] jobs_dir or ${XDG_CACHE_HOME:-$HOME/.cache}/gpurun/jobs:
 *   <id>/      a job's folder: its working directory and GPURUN_JOB_DIR.
 *              It holds the job's snapshot of the project (job_snap.h),
 *              the persistent paths as links into the project folder, and
 *              whatever the job writes. gpurun's own files are in .gpurun/:
 *     job        key=value: id, project, created_ms, backend
 *     spec       the JOB_START spec as "key\0value\0" pairs
 *     command    the [train] command, as given
 *     lock       flock'ed by the local supervisor while it lives
 *     phase      setup, build or run: the step under way (text)
 *     queued     exists while the job waits (text: why)
 *     run        key=value: pid, start_ms, gpus (assigned); written at spawn
 *     log        the job's output (setup and build too), append-only
 *     status     key=value: exit, signal, end_ms, phase (and end, reason,
 *                tries: issue 33); written last, atomically
 *     tries      the command's runs so far, while it may run again (retries)
 *     stopped    exists once `gpurun stop` was asked for this job
 *     notify.log what [notify] command said at the job's end (job_notify.h)
 *     du         key=value: bytes, written once the job has ended
 *     container  key=value: the runtime and image a job in a container
 *                uses, resolved at start (job_container.h)
 *   .objects/  the snapshots' shared store (job_snap.h)
 * The jobs root is outside the synced tree, so sync never deletes it. */
#ifndef GR_JOB_STORE_H
#define GR_JOB_STORE_H

#include <stdint.h>

#include "job_proto.h"
#include "util.h"

#define JOB_OBJECTS ".objects"

/* The backend a job runs on when its spec names none (job_backend.h). */
#define JOB_BACKEND_DEFAULT "local"

/* "YYYYMMDD-HHMMSS-xxxx" for Unix ms time now_ms (host local time, 4
 * random hex digits). */
char *job_new_id(uint64_t now_ms);
/* 1 if id has exactly the shape job_new_id makes (so it is safe in paths). */
int job_id_valid(const char *id);
/* <dir>/.gpurun/<name>. Returns a new string. */
char *job_meta(const char *dir, const char *name);
/* The meta file's text without its trailing newlines (new string; ""
 * when it is missing or empty). */
char *job_meta_text(const char *dir, const char *name);

/* Parse key=value lines of a meta file into kv ("key=value" strings).
 * Missing file: GR_ENOTFOUND. */
int job_kv_read(const char *path, struct strvec *kv, struct gr_err *err);
const char *job_kv_get(const struct strvec *kv, const char *key);
uint64_t job_kv_u64(const struct strvec *kv, const char *key);

/* A job's spec (JOB_SPEC_KEYS): pairs in order, v[2i] key, v[2i+1] value. */
struct job_spec {
	struct strvec kv;
};
/* Validate pairs read from the wire (known keys, ONE keys once, no NUL
 * in values is guaranteed by the reader). GR_EINVAL with err set. */
int job_spec_check(const struct job_spec *s, struct gr_err *err);
/* The value of a ONE key, or def when absent. */
const char *job_spec_get(const struct job_spec *s, const char *key, const char *def);
/* Every value of a LIST key, in order, appended to out. */
void job_spec_list(const struct job_spec *s, const char *key, struct strvec *out);
int job_spec_write(const char *dir, const struct job_spec *s, struct gr_err *err);
int job_spec_read(const char *dir, struct job_spec *s, struct gr_err *err);
void job_spec_free(struct job_spec *s);

/* Make the folder of a new job under root (created if missing) with its
 * .gpurun/ and the meta files job, spec, command and an empty log.
 * created_ms: the creation time (also the id's time). *id and *dir are
 * new strings. The folder counts as a job once `job` exists: it is
 * written last. */
int job_create(const char *root, const char *project, const struct job_spec *spec,
	       uint64_t created_ms, char **id, char **dir, struct gr_err *err);

/* Write a small meta file atomically. */
int job_meta_write(const char *dir, const char *name, const char *text, struct gr_err *err);
int job_meta_exists(const char *dir, const char *name);

/* Remove a folder tree, never following links, making read-only folders
 * writable on the way (a job may leave some). 0 or -1 (errno). */
int job_rm_tree(const char *path);

/* Offset where the last n lines of the file at path start (0 if it holds
 * fewer). */
uint64_t job_tail_offset(const char *path, uint32_t n);

#endif
