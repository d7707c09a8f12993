/* What a job's snapshot held when it started, kept in its folder, so the
 * snapshot can be told apart from what the job wrote later: `gpurun
 * rerun` makes a new job from exactly that snapshot, `gpurun diff`
 * compares two of them (PROTOCOL.md, "Snapshots").
 *
 * The record is .gpurun/snapshot, written once the snapshot is made and
 * before anything runs in the folder (agent_job.c's start): "GRS1\0",
 * then one entry per folder, file and symlink below the job's folder
 * (its .gpurun/ aside), parents before what they hold:
 *     "T MODE SIZE MTIME_NS INO PATH\0"
 * T is d, f or l; MODE octal; the rest decimal; PATH relative, last, so
 * it may hold spaces (never a NUL). A job started before the record
 * existed has none, and can be neither rerun nor diffed. */
#ifndef GR_JOB_SNAPLIST_H
#define GR_JOB_SNAPLIST_H

#include <stdint.h>

#include "err.h"
#include "job_store.h"
#include "util.h"

#define JOB_SNAP_RECORD "snapshot"

struct snap_rec {
	char type; /* 'd', 'f' or 'l' */
	uint32_t mode;
	uint64_t size, ino;
	int64_t mtime_ns;
	char *path;
};

struct snap_recs {
	struct snap_rec *v;
	size_t n;
};

/* Walk the job folder dir (its snapshot just made) and write its record.
 * 0 or GR_EIO. */
int job_snap_record(const char *dir, struct gr_err *err);

/* Read dir's record into l (the caller's: job_snap_recs_free). A missing
 * one: GR_ENOTFOUND; a damaged one (a bad entry, a path that is not
 * relative and clean or that lies in .gpurun/): GR_EINVAL. */
int job_snap_recs_read(const char *dir, struct snap_recs *l, struct gr_err *err);
void job_snap_recs_free(struct snap_recs *l);

/* Make the snapshot of the job folder from (its record) in dst, an empty
 * new job folder, as job_snapshot makes one: a file shared with the
 * store or the project (hard-linked there) or larger than SNAP_COPY_MAX
 * is linked, any other copied; folders and symlinks made again. A file
 * the job changed or removed since its start is taken as it is now, or
 * left out; *warn (NULL: none; the caller frees) then says which. */
int job_snap_rerun(const char *from, const char *dst, char **warn, struct gr_err *err);

/* The spec as diff shows it, one "key = value" line per pair, env as
 * "env NAME" (never a value: it may be a secret), without the keys that
 * name the job rather than say what it ran (name, group, after,
 * rerun_of, term; argv, which command shows). */
void job_snap_conf(const struct job_spec *spec, struct strvec *lines);

/* JOB_SNAP_LIST's entries for the job folders a and b (both records
 * read), written to fd as they are made: for each, str id, the conf
 * lines, then its entries (PROTOCOL.md). A file of a at the same path
 * and host identity as one of b is hashed once. */
int job_snap_list_write(const char *ida, const char *dira, const char *idb,
			const char *dirb, int fd, struct gr_err *err);

/* JOB_SNAP_READ's answer for paths of job folder dir into pl. */
int job_snap_read_put(const char *dir, const struct strvec *paths, struct strbuf *pl,
		      struct gr_err *err);

#endif
