/* Opening the project's files for a sync without ever leaving the project:
 * the project folder is opened once, and every path below it one
 * component at a time with openat(O_NOFOLLOW), so a folder swapped for a
 * symlink while gpurun runs is refused, never followed; the file opened
 * must be the one the scan saw (same device and inode, a regular file).
 * Single-threaded: one per sync. */
#ifndef GR_SYNC_OPEN_H
#define GR_SYNC_OPEN_H

#include <stdint.h>

#include "err.h"

struct sync_tree;

/* Open root (following a symlink there: it is the project as configured).
 * NULL with err set (GR_EIO) if it cannot be opened. */
struct sync_tree *sync_tree_open(const char *root, struct gr_err *err);
void sync_tree_close(struct sync_tree *t);

/* Open the regular file at relpath for reading. If ino is not 0, the file
 * must have that device and inode (what the scan saw). Returns the fd, or
 * GR_ENOTFOUND (gone, or a folder on the way is gone), GR_ECONFLICT (a
 * symlink or something else than a folder on the way, or not the file the
 * scan saw: err says which) or GR_EIO, with err naming relpath. */
int sync_tree_open_file(struct sync_tree *t, const char *relpath, uint64_t dev, uint64_t ino,
			struct gr_err *err);

#endif
