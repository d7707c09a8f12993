/* Internals of the ignore engine shared by ignore.c, ignore_explain.c and
 * scan.c: length-based variants that skip normalisation, for the hot path. */
#ifndef GR_IGNORE_INT_H
#define GR_IGNORE_INT_H

#include <stddef.h>

#include "ignore.h"

/* Load the ignore files of folder dir[0..len) (and of its parents first).
 * dirfd is an open descriptor of that folder, or -1 to open it by path. */
int ig_load(struct ignore *ig, int dirfd, const char *dir, size_t len, struct gr_err *err);
/* ignore_check for a normalised path[0..len), NUL at len. */
int ig_check_len(struct ignore *ig, const char *path, size_t len, int is_dir,
		 struct ignore_match *why);
/* ignore_path for a normalised path[0..len); *decided_len is len, or the
 * length of the parent folder whose exclusion decided. */
int ig_path_len(struct ignore *ig, const char *path, size_t len, int is_dir,
		struct ignore_match *why, size_t *decided_len, struct gr_err *err);
/* The root the ignore engine was made for. */
const char *ig_root(const struct ignore *ig);
int ig_include_git(const struct ignore *ig);

#endif
