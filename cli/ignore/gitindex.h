/* The list of paths git tracks, read straight from .git/index (versions
 * 2, 3 and 4), because git never ignores a tracked file and gpurun must
 * agree without running git. */
#ifndef GR_GITINDEX_H
#define GR_GITINDEX_H

#include <stddef.h>

#include "err.h"

struct gitindex {
	char *names;   /* all names, NUL-separated */
	size_t *off;   /* offset of each name in names, sorted, no duplicates */
	size_t n;
};

/* Read the index at path. hashlen is 20 (SHA-1) or 32 (SHA-256 repos).
 * Returns 0; GR_ENOTFOUND if there is none; GR_EUNSUPP for a split index
 * (its entries live in another file); GR_EIO or GR_EINVAL (malformed) with
 * err set. Entries of every stage count; a sparse-index folder entry is
 * kept with its trailing '/'. gitindex_free accepts NULL and zeroes ix. */
int gitindex_read(struct gitindex *ix, const char *path, int hashlen, struct gr_err *err);
void gitindex_free(struct gitindex *ix);

/* 1 if path (no trailing '/') is an entry. */
int gitindex_has(const struct gitindex *ix, const char *path, size_t len);
/* 1 if some entry lies inside folder dir (dir without trailing '/'). */
int gitindex_has_under(const struct gitindex *ix, const char *dir, size_t len);

#endif
