/* A job's snapshot of the project: the code it was started with, which a
 * later sync must not change. Made at start as a tree of hard links where
 * that is safe and copies where it is not:
 *  - sync writes every file to a temp name and renames it into place, so a
 *    linked file keeps the old content when a later sync replaces it;
 *  - a build may rewrite its outputs in place (cp, >, some linkers), and a
 *    job may write into a file in its folder; so small files (the code:
 *    <= SNAP_COPY_MAX) and files modified in the last fresh_ms (what the
 *    build just produced) are copied, and only large, settled files
 *    (datasets, weights) are linked. */
#ifndef GR_JOB_SNAP_H
#define GR_JOB_SNAP_H

#include <stdint.h>

#include "err.h"

#define SNAP_COPY_MAX (1u << 20)

struct snap_stats {
	uint64_t linked, copied, bytes_copied;
};

/* Make dst (must not exist) a snapshot of src. */
int job_snapshot(const char *src, const char *dst, uint32_t fresh_ms,
		 struct snap_stats *st, struct gr_err *err);

#endif
