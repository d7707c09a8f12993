/* gpurun's local sync state, under <project>/.gpurun/ (never synced):
 *   index          stat cache: path, size, mtime, inode, mode -> content hash,
 *                  so an unchanged file is not read again;
 *   remote-<key>   per remote folder: the manifest gpurun last committed
 *                  there (what the host holds, as far as we know) and its
 *                  digest;
 *   sigs/<hash>    the librsync signature of each large file version last
 *                  sent, so deltas need no signature from the host. */
#ifndef GR_SYNC_INDEX_H
#define GR_SYNC_INDEX_H

#include <stdint.h>

#include "scan.h"
#include "sync_manifest.h"

struct sync_index;

/* Load root/.gpurun/index (a missing or unreadable index is empty). */
struct sync_index *sync_index_load(const char *root);
void sync_index_free(struct sync_index *idx);

struct sync_hash_stats {
	uint64_t files_hashed, bytes_hashed, files_cached;
};

/* The local manifest: the scanned entries with content hashes (from the
 * cache when size, mtime, inode and mode match and the entry is not
 * racily new; else read and hashed, and the cache updated), plus every
 * parent folder. Files that vanish meanwhile are left out. For files of
 * at least leaves_min bytes that were read, (*leaves)[i] holds their block
 * hashes (entry i of out; caller frees each and the array).
 * Errors: GR_EIO (unreadable file, with a hint). */
int sync_local_manifest(const char *root, const struct scan_entry *e, size_t n,
			struct sync_index *idx, uint64_t leaves_min, struct sm_list *out,
			uint8_t ***leaves, struct sync_hash_stats *hs, struct gr_err *err);

/* Hash one local file (content hash, and block hashes if leaves != NULL:
 * a new array of sm_block_len(size)-sized blocks' hashes). */
int sync_hash_file(const char *abspath, uint64_t size, uint8_t hash[SM_HASH_LEN],
		   uint8_t **leaves, struct gr_err *err);

int sync_index_save(const char *root, struct sync_index *idx, struct gr_err *err);

/* The remote state for one (host, path): key is a short hash of both. */
char *sync_remote_key(const char *host, const char *path);
/* 1 and the manifest if there is one, 0 if none (or unreadable). */
int sync_rstate_load(const char *root, const char *key, struct sm_list *man,
		     uint8_t digest[SM_HASH_LEN]);
int sync_rstate_save(const char *root, const char *key, const struct sm_list *man,
		     struct gr_err *err);
/* Forget it (after a failed commit): the next sync asks for the manifest. */
void sync_rstate_drop(const char *root, const char *key);

/* Signature cache. */
char *sync_sig_path(const char *root, const uint8_t hash[SM_HASH_LEN]);
int sync_sig_have(const char *root, const uint8_t hash[SM_HASH_LEN]);
int sync_sig_load(const char *root, const uint8_t hash[SM_HASH_LEN], struct strbuf *out);
int sync_sig_save(const char *root, const uint8_t hash[SM_HASH_LEN], const void *sig,
		  size_t n, struct gr_err *err);
/* Remove cached signatures whose version is in none of keep's files. */
void sync_sig_gc(const char *root, const struct sm_list *keep);

#endif
