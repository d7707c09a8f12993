/* A job's processes, as the local backend's stop finds them (the stop
 * itself is in job_backend_local.c). A job runs in a
 * session of its own, but a child that calls setsid() leaves it, so a
 * process belongs to the job if it is in the job's session or process
 * group, OR carries GPURUN_JOB_ID=<id> in its environment, OR descends
 * from one that does (found through /proc). Blocking: runs in a helper
 * process the agent forks, never in its loop. */
#ifndef GR_JOB_PROC_H
#define GR_JOB_PROC_H

#include <sys/types.h>

#include "util.h"

struct job_proc {
	pid_t pid;
	char comm[64];
};

/* The live (non-zombie) processes of job id, whose session leader was
 * sid (0 if it never started). *out is the caller's to free. */
size_t job_procs(const char *id, pid_t sid, struct job_proc **out);

/* What of job id still lives, for deciding whether it may be removed
 * (issue 29): job_procs(), but the recorded pid counts as the job's
 * session only while that process still carries the job's id (a pid is
 * reused once it has ended); else what carries the id and descends from
 * it. The count; desc (may be NULL) gets "pid 12 sleep, pid 13 sh" (the
 * first few, then ", ..."). */
size_t job_procs_alive(const char *id, uint32_t pid, struct strbuf *desc);

/* JOB_STOP for job id whose folder is gone (rm -rf ~/.cache during a
 * job): stop what carries its id (job_backend_local.c), answering as
 * the local backend's stop does, with a record that says so.
 * GR_ENOTFOUND when nothing does. */
int job_stop_orphan(const char *id, int grace_s, struct strbuf *payload, struct gr_err *err);

/* The ids of jobs of jobs root `root` whose folder is gone while a
 * process of theirs lives (GPURUN_JOB_DIR=root/ID in its environment,
 * with GPURUN_JOB_ID=ID), each once, appended to ids. */
void job_orphan_ids(const char *root, struct strvec *ids);

/* A record (state lost, the reason saying what runs) for each of them,
 * appended to recs, *n counting them: what JOB_LIST adds, so status
 * shows such a job (job_backend_local.c). */
void job_orphans_put(const char *root, struct strbuf *recs, uint32_t *n);

/* That record for the one job id (a full id): 1 and r filled while a
 * process carries it, else 0 (r empty; job_rec_clear either way). */
struct job_rec;
int job_orphan_rec(const char *id, struct job_rec *r);

#endif
