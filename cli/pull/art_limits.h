/* How much the host may make a pull write on the laptop. The agent
 * announces a pull's size before its archive (PROTOCOL.md, ART_PULL:
 * files and bytes); a pull that would leave less than [artifacts]
 * min_free of the filesystem free is refused before anything is written,
 * and during extraction no entry may take the pull past what was
 * announced, nor its data past its own header's size, nor the free space
 * below min_free. Kept apart from the pull itself (pull.c) so any
 * transfer scheme calls the same checks: art_announce_parse and
 * art_space_check before the first byte lands, art_admit before each
 * entry is written, art_data_ok for each block of it. */
#ifndef GR_ART_LIMITS_H
#define GR_ART_LIMITS_H

#include <stdint.h>

#include "err.h"

struct art_limits {
	uint32_t files;     /* announced entries (regular files) */
	uint64_t bytes;     /* announced total of their sizes */
	int min_free_pct;   /* [artifacts] min_free */
	struct art_delta *delta; /* files that may come as deltas (NULL: none) */
	/* consumed so far, by art_admit */
	uint32_t files_seen;
	uint64_t bytes_seen;
};

/* Parse the announcement (GR_ART_ANNOUNCE_LEN bytes) into lim's files and
 * bytes. GR_EPROTO when it is not one. */
int art_announce_parse(const unsigned char *hdr, struct art_limits *lim, struct gr_err *err);

/* Would writing need bytes (in files new files) into dir leave at least
 * min_free_pct of its filesystem free? 0, or GR_EIO with err giving the
 * numbers and a hint. */
int art_space_check(const char *dir, uint64_t need, uint32_t files, int min_free_pct,
		    struct gr_err *err);

/* Before writing an entry named name whose header says size bytes into
 * dir: within what was announced, and room on the disk? Counts it. */
int art_admit(struct art_limits *lim, const char *dir, const char *name, int64_t size,
	      struct gr_err *err);

/* A data block at off, len bytes, of an entry of size bytes: 1 if it stays
 * inside the entry, else 0. */
int art_data_ok(int64_t off, uint64_t len, int64_t size);

#endif
