/* Artifacts out of a job folder: the files matching [artifacts] pull,
 * less those the client already has (same size and mtime), packed as one
 * tar.zst stream with libarchive. Standalone (no agent state), so the unit
 * tests can pack an archive and feed it to the client's extractor. */
#ifndef GR_JOB_PACK_H
#define GR_JOB_PACK_H

#include <stdint.h>

#include "err.h"

struct pack_have {        /* a file the client holds */
	char *path;
	uint64_t size;
	int64_t mtime_s;
	uint32_t mtime_ns;
};

struct pack_stats {
	uint32_t matched;     /* files the patterns select */
	uint32_t sent;        /* of those, packed (new or changed) */
	uint64_t bytes;       /* their contents, before compression */
};

/* Write the announcement (GR_ART_MAGIC, files, bytes: job_proto.h) and
 * then the archive to out_fd (blocking); the archive holds exactly the
 * files announced, none larger than announced. dir: the job folder; its
 * .gpurun/ is never packed. have need not be sorted. Returns 0 or GR_EIO
 * with err set. */
int job_pack(const char *dir, const char *const *patterns, size_t npat,
	     struct pack_have *have, size_t nhave, int out_fd,
	     struct pack_stats *st, struct gr_err *err);

#endif
