/* Block fingerprints of large files, so an edit in one is not hashed whole
 * again: <project>/.gpurun/blocks/<key of the path> holds, for the version
 * last hashed or sent at that path, each block's XXH3-128 fingerprint and
 * its BLAKE2b leaf (the content hash's, sync_manifest.h). Hashing the file
 * again, a block whose fingerprint is unchanged keeps its leaf; only the
 * others go through BLAKE2b (sync_hash_fd_known). XXH3 reads ~20x faster
 * than libb2's BLAKE2b here, and is what rsync (3.2+) trusts to say that
 * a block is unchanged (its xxh128 strong sum). A damaged or foreign file
 * is ignored: the file is then hashed whole, as without one. */
#ifndef GR_SYNC_FP_H
#define GR_SYNC_FP_H

#include <stdint.h>

#include "err.h"
#include "sync_manifest.h"

#define SYNC_FP_LEN 16

/* One block's fingerprint: XXH3-128, big-endian (its canonical form). */
void sync_fp(uint8_t *out, const void *p, size_t n);

/* What root/.gpurun/blocks records for path: into k (block, n, fps,
 * leaves, fp, fp_len; fps_out left alone), 0 if usable, -1 if none (k
 * then records nothing, with fp set). sync_fp_free releases it. */
int sync_fp_load(const char *root, const char *path, struct sync_known *k);
void sync_fp_free(struct sync_known *k);

/* Record n blocks of block bytes for path (written whole, atomically). A
 * failure only costs the next hashing its shortcut: nothing is said. */
void sync_fp_save(const char *root, const char *path, uint32_t block, uint64_t n,
		  const uint8_t *fps, const uint8_t *leaves);

/* Remove the records of paths that are not a file of at least min bytes
 * among the entries each gives (sm_list_each and a list, or streamed). */
void sync_fp_gc(const char *root, sm_each_fn each, void *src, uint64_t min);

#endif
