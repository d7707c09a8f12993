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
 *  - An environment made on the host (a folder holding pyvenv.cfg: venv,
 *    virtualenv, uv, poetry in the project; or conda-meta/: a conda
 *    prefix) is linked like a persistent path, never copied: the host
 *    keeps one copy of it per project. (Code it imports from the project
 *    through an editable install is the snapshot's: job_pyhook.h.)
 *  - The project folder's .gpurun/ (sync state) is left out.
 * The snapshot is made under the project's sync lock, so it holds one
 * sync's result, never half of one.
 *
 * Setup runs after the snapshot (in the project folder, where its
 * results stay), so what it made is added afterwards, before the build:
 * job_snapshot_add_made() adds what was made on the host and is missing
 * or changed in the job's folder, and never a synced file (the job's code
 * is the sync it started from). */
#ifndef GR_JOB_SNAP_H
#define GR_JOB_SNAP_H

#include <stdint.h>
#include <sys/types.h>
#include <time.h>

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
	uint64_t envs;          /* environments linked */
	struct strvec env_names; /* their paths (the caller clears it) */
};

/* Make the snapshot of project (an absolute path) in dst, an existing job
 * folder, with the store under root. persist: the [train] persist
 * entries (already checked: relative, no '..', not .gpurun). */
int job_snapshot(const char *project, const char *dst, const char *root,
		 const struct strvec *persist, struct snap_stats *st, struct gr_err *err);

/* After setup: add to the snapshot in dst what the host made in project
 * (no sync wrote it) and dst lacks or holds in another version; synced
 * paths and persistent ones are left as they are. st counts what was
 * added (copied, linked, envs). */
int job_snapshot_add_made(const char *project, const char *dst, const char *root,
			  const struct strvec *persist, struct snap_stats *st, struct gr_err *err);

/* Copy the open file in into a new file name in dfd (never over one),
 * with mode and mtime, as a snapshot copies a file made on the host
 * (rerun: job_snaplist.h). bytes: what was copied is added. rel names it
 * in messages. */
int job_snap_copy_file(int in, int dfd, const char *name, mode_t mode,
		       const struct timespec *mtime, const char *rel, uint64_t *bytes,
		       struct gr_err *err);

/* 1 if the folder name in dfd is a Python environment (pyvenv.cfg, or a
 * conda prefix's conda-meta/). */
int job_snap_is_env(int dfd, const char *name);

#endif
