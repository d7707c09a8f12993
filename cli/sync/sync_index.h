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

#include "ignore.h"
#include "sync_manifest.h"
#include "sync_open.h"

struct sync_index;

/* Make root/.gpurun/SUB (sub "" for .gpurun itself), and the
 * .gitignore that keeps gpurun's state out of git ('*'). */
int sync_state_dir(const char *root, const char *sub, struct gr_err *err);
/* A file with no name in root/.gpurun (never left behind), or -1. */
int sync_state_tmpfile(const char *root);

/* The index of root/.gpurun/ (a missing or unreadable index is empty;
 * a damaged one is ignored whole). Nothing is read yet: the manifest
 * reads it in pieces, in step with the scan. */
struct sync_index *sync_index_load(const char *root);
void sync_index_free(struct sync_index *idx);

struct sync_hash_stats {
	uint64_t files_hashed, bytes_hashed, files_cached;
	uint64_t bytes_reused; /* of bytes_hashed: blocks whose leaf was kept (sync_fp.h) */
};

/* The local manifest (out is emptied first): every entry scan_tree finds
 * under root (with so) that can be carried, in path order, plus every
 * parent folder, with content hashes from the index when size, mtime,
 * inode and mode match and the entry is not racily new. Other files are
 * marked SM_F_UNHASHED: the caller hashes those it must compare
 * (sync_hash_entry) and the rest are hashed as they are sent. The scan's
 * entries go straight into out, their paths into its pool: the tree is
 * held once. Errors: scan_tree's. */
int sync_scan_manifest(const char *root, const struct scan_opts *so, struct sync_index *idx,
		       struct sm_list *out, struct sync_hash_stats *hs, struct gr_err *err);
/* The same from entries already scanned (copied; tests). */
int sync_local_manifest(const struct scan_entry *e, size_t n, struct sync_index *idx,
			struct sm_list *out, struct sync_hash_stats *hs, struct gr_err *err);
/* Hash an SM_F_UNHASHED entry now (its block hashes too if leaves is set:
 * a new array the caller frees; with root as well, through the block
 * fingerprints root/.gpurun/blocks records, sync_fp.h), opened through t
 * (never through a symlink, and only if it is still the file the scan
 * saw). GR_ENOTFOUND if it is gone meanwhile, GR_ECONFLICT if it was
 * replaced. */
int sync_hash_entry(struct sync_tree *t, const char *root, struct sm_entry *m, uint8_t **leaves,
		    struct sync_hash_stats *hs, struct gr_err *err);

/* A path whose name the agent keeps for its temp files (SYNC_TMP_PREFIX
 * in some component): never carried, as the manifest leaves it out. */
int sync_unsendable(const char *path);

/* Write the index: the files of local (the manifest sync_local_manifest
 * made from idx, hashed since where that was needed) with the stat data
 * the scan saw; files still unhashed and the host's kept entries are left
 * out. */
int sync_index_save(const char *root, struct sync_index *idx, const struct sm_list *local,
		    struct gr_err *err);

/* The index as it is, but as made by a scan at scan_ns: after a walk
 * found every file it holds as it says (sync_scan_diff: no-op). */
int sync_index_renew(const char *root, int64_t scan_ns, struct gr_err *err);

/* The remote state for one (host, path): key is a short hash of both. */
char *sync_remote_key(const char *host, const char *path);
/* 1 and the manifest if there is one, 0 if none (or unreadable). */
int sync_rstate_load(const char *root, const char *key, struct sm_list *man,
		     uint8_t digest[SM_HASH_LEN]);
int sync_rstate_save(const char *root, const char *key, const struct sm_list *man,
		     struct gr_err *err);
/* The same from a manifest given an entry at a time (written as it
 * comes: never whole in memory). */
int sync_rstate_save_each(const char *root, const char *key, sm_each_fn each, void *src,
			  struct gr_err *err);
/* The same file open for reading (sm_decode_fd, sm_decode_fd_each), or
 * -1 if there is none. */
int sync_rstate_open(const char *root, const char *key);
/* Forget it (after a failed commit): the next sync asks for the manifest. */
void sync_rstate_drop(const char *root, const char *key);

/* Signature cache. */
char *sync_sig_path(const char *root, const uint8_t hash[SM_HASH_LEN]);
int sync_sig_have(const char *root, const uint8_t hash[SM_HASH_LEN]);
int sync_sig_load(const char *root, const uint8_t hash[SM_HASH_LEN], struct strbuf *out);
int sync_sig_save(const char *root, const uint8_t hash[SM_HASH_LEN], const void *sig,
		  size_t n, struct gr_err *err);
/* Remove cached signatures whose version is in none of the files each
 * gives (sm_list_each and a list, or a manifest streamed). */
void sync_sig_gc(const char *root, sm_each_fn each, void *src);
/* Remove the files of dir (but those spare says to leave alone) that
 * name(e, min, out) names for none of the entries each gives (out left
 * empty: none); nothing if each cannot give them all. */
void sync_gc_dir(const char *dir, int (*spare)(const char *name),
		 void (*name)(const struct sm_entry *e, uint64_t min, struct strbuf *out),
		 uint64_t min, sm_each_fn each, void *src);

#endif
