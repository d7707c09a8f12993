/* A job's snapshot of the project: the code it was started with, which a
 * later sync must not change, made in the job's folder at start, so that
 * a job costs the host what it writes and the synced files that changed
 * since the last job, never a copy of the environment:
 *  - A file the last sync wrote and nobody changed since (the sync
 *    manifest's inode, size, mtime and ctime still match) is hard-linked
 *    from the project's store (<jobs root>/.objects/<content hash>-<mode>-
 *    <mtime>), which holds one copy of each version any job uses. Sync
 *    replaces files by rename, so the project folder's own files are
 *    never linked (their ctime stays what the sync saw) and no later sync
 *    reaches a job's files. A job that writes into such a file in place
 *    changes the store's copy for the jobs sharing it; the next snapshot
 *    notices the changed size or mtime, sets that copy aside and makes a
 *    fresh one.
 *  - Other files in the project folder (made on the host) are copied, or
 *    hard-linked from the project folder when larger than SNAP_COPY_MAX
 *    (datasets downloaded there); symlinks are copied as links.
 *  - Persistent paths ([train] persist) are not copied: each is a link to
 *    the same path in the project folder (made there if missing, as a
 *    folder for an entry ending in '/'), so every job of the project
 *    sees, and writes, the same checkpoints, caches and environments.
 *  - The project folder's .gpurun/ (sync state) is left out.
 * The snapshot is made under the project's sync lock, so it holds one
 * sync's result, never half of one. */
#ifndef GR_JOB_SNAP_H
#define GR_JOB_SNAP_H

#include <stdint.h>

#include "err.h"
#include "util.h"

#define SNAP_COPY_MAX (1u << 20)

struct snap_stats {
	uint64_t shared;        /* files linked from the store */
	uint64_t objects_made;  /* of those, copies the store did not have */
	uint64_t bytes_objects; /* their size */
	uint64_t linked;        /* large host files linked from the project */
	uint64_t copied, bytes_copied;
	uint64_t persistent;    /* persistent paths linked */
};

/* Make the snapshot of project (an absolute path) in dst, an existing job
 * folder, with the store under root. persist: the [train] persist
 * entries (already checked: relative, no '..', not .gpurun). */
int job_snapshot(const char *project, const char *dst, const char *root,
		 const struct strvec *persist, struct snap_stats *st, struct gr_err *err);

#endif
