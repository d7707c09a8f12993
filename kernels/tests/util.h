/* Helpers shared by the kernels/ tests: random arrays, scratch folders and
 * small file operations. */
#ifndef KERNELS_TESTS_UTIL_H
#define KERNELS_TESTS_UTIL_H

#include <stddef.h>

/* n floats, roughly standard normal, from seed (caller frees). */
float *tu_randn(int n, unsigned long long seed);
/* Creates a fresh scratch folder under $TMPDIR (or /tmp) into buf. */
int tu_mkscratch(char *buf, size_t cap);
/* Removes the scratch folder and everything in it (two levels deep). */
void tu_rmscratch(const char *dir);
/* 1 when both files exist and have the same bytes. */
int tu_files_equal(const char *a, const char *b);
/* Inverts byte off of path. */
int tu_flip_byte(const char *path, long off);
/* Replaces path with the n bytes at p. */
int tu_write(const char *path, const void *p, size_t n);

#endif
