/* Signatures of pulled files, kept for the next pull. A file that came as
 * a delta has its block hashes made already (the content check) and the
 * weak sums of blocks copied in place known from its basis, so its
 * signature costs almost nothing then; the next pull of that file sends
 * it without reading the file again (signing 256 MiB took ~0.45 s of a
 * ~1.7 s pull). Entries live in .gpurun/pull-sigs/, one per file, named
 * by device and inode, and hold the file's size, mtime and ctime: a file
 * changed since (a write, a touch, a rename over it) no longer matches and
 * its entry is dropped. Each ends with a BLAKE2b of the rest (a torn
 * entry is not used). The 64 newest are kept. */
#ifndef GR_ART_SIGCACHE_H
#define GR_ART_SIGCACHE_H

#include <stdint.h>
#include <sys/stat.h>

/* The signature of the file st describes, at this block length: weak
 * sums and block hashes (room for ceil(size / block) of each). 0 if dir
 * has a valid entry for exactly that version of the file, else -1 (and a
 * stale entry is removed). */
int art_sigcache_load(const char *dir, const struct stat *st, uint32_t block, uint32_t *weak,
		      uint8_t *leaves);
/* Keep the signature of the file open as fd (its version now). Best
 * effort: a cache that cannot be written is not an error. */
void art_sigcache_store(const char *dir, int fd, uint32_t block, const uint32_t *weak,
			const uint8_t *leaves);

#endif
