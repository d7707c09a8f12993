/* Safe extraction of the artifacts a pull brings (pull_extract.c):
 * libarchive's secure flags, no links, devices, absolute or `..` names,
 * each file fsynced and renamed into place only once it is complete; a
 * file cut short (1 MiB or more) keeps its part for the next pull to
 * resume. The folder's own header (pull.h is cli/pull's face). */
#ifndef GR_PULL_EXTRACT_H
#define GR_PULL_EXTRACT_H

#include <stdint.h>

#include "err.h"

struct art_limits;
/* Extract the tar.zst read from fd into dest (an existing folder), within
 * lim (art_limits.h: what the host announced, min_free). On a hostile
 * entry it stops with GR_EINVAL or GR_EPROTO and err naming the entry,
 * on a full disk with GR_EIO (files before it are in place). Changes the
 * working directory while it runs and restores it: call it from one
 * thread. *files: files extracted. */
int art_extract_fd(int fd, const char *dest, struct art_limits *lim, uint32_t *files,
		   struct gr_err *err);
/* The same for ART_PULL's stream: the announcement first (PROTOCOL.md),
 * then a pre-flight check that what it announces fits (min_free_pct;
 * with the sizes of the files delta may bring as deltas counted whole),
 * then the archive within it. delta: the files this pull sent signatures
 * for (NULL: none; a delta entry is then refused). */
struct art_delta;
int art_extract_announced(int fd, const char *dest, int min_free_pct, struct art_delta *delta,
			  uint32_t *files, struct gr_err *err);

#endif
