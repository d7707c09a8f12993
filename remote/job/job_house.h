/* Housekeeping of a project's jobs on the host: what each job costs on
 * disk, removing jobs (`gpurun rm`, `prune`, [jobs] keep) and the shared
 * store's garbage. A job that has not ended is never removed. Works on
 * the jobs root's folders alone (no agent state), so the model-based unit
 * test drives exactly this code.
 *
 * Disk use: a job's cost is the space of what its folder holds alone:
 * every file, folder and link in it whose inode has no other name (files
 * shared with the store or the project folder are not its cost), in
 * allocated blocks (as du counts). Measured again while the job runs,
 * once (and kept in .gpurun/du) after it ended. The total of a project
 * is the jobs' cost plus the store's. */
#ifndef GR_JOB_HOUSE_H
#define GR_JOB_HOUSE_H

/* A job folder being removed is renamed to this prefix first, so no
 * half-removed job is ever read as one. */
#define TRASH_PREFIX ".trash-"

#include <stdint.h>

#include "err.h"
#include "job_record.h"
#include "util.h"

/* A job's own cost: job_du (job_record.h). */
/* Bytes of the shared store (each object once). */
uint64_t job_store_du(const char *root);
/* Every job's cost plus the store's. */
uint64_t job_root_du(const char *root);

/* Remove store objects no job uses any more (and what an interrupted
 * removal left). Returns the bytes freed. */
uint64_t job_store_gc(const char *root);

struct job_removed {
	char *id;
	uint64_t bytes;
};
struct job_house_result {
	struct job_removed *v;  /* what was (or, dry run, would be) removed */
	size_t n;
	uint32_t kept;          /* jobs left */
	uint64_t freed;         /* in all, the store's garbage included */
};
void job_house_result_free(struct job_house_result *r);

/* Remove job id (a full id) from root. GR_ENOTFOUND, or GR_EINVAL when it
 * has not ended (err says its state) or when any of it still lives: a
 * process carrying its id, its session, its container (a job whose
 * supervisor was killed). *bytes: its cost. job_house_prune skips such
 * jobs too. */
int job_house_remove(const char *root, const char *id, uint64_t *bytes, struct gr_err *err);

/* Remove every job under root that has ended, is not among the `keep`
 * newest (keep 0: no such limit) and was created more than older_ms
 * before now_ms (older_ms 0: no such limit). dry_run: only list them. */
void job_house_prune(const char *root, uint32_t keep, uint64_t older_ms, uint64_t now_ms,
		     int dry_run, struct job_house_result *res);

#endif
