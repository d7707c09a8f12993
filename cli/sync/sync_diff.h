/* The walked scan read against the last committed state (.gpurun/
 * remote-KEY): what a sync needs of local when it may be a no-op, without
 * a list of the tree. Owned by the sync engine (sync.c's). */
#ifndef GR_SYNC_DIFF_H
#define GR_SYNC_DIFF_H

#include <stdint.h>

#include "ignore.h"
#include "sync_index.h"
#include "sync_manifest.h"

/* The walked scan read in step with the index and with the last
 * committed state (remote-KEY, open as state_fd), all three in path
 * order, keeping only where local differs from the state: a no-op of a
 * large tree holds no list at all. d gets:
 *   kept     the local entries (as sync_scan_manifest makes them) that the
 *            state lacks or holds otherwise, or that the index cannot
 *            vouch for (SM_F_UNHASHED);
 *   same     one bit per state entry: local holds it as it is;
 *   lacking  1 if the state holds an entry local lacks that is not
 *            ignored here (ignored(arg, path, is_dir)), so not a no-op;
 *   digest   the state's (sm_digest of it).
 * A file the index holds, but changed too close to the scan that put it
 * there to be trusted, is hashed with rehash(arg, m) (sync_hash_entry's
 * work; NULL: none) when the state says it may be the same: rehashed
 * counts those found so, and sync_index_renew(root, start_ns) then makes
 * the index trust them (a no-op right after a sync holds no list).
 * A no-op is !redo && !kept.n && !lacking: local, with what the host
 * keeps (run_keep_ignored), is then the state. redo: the state or the index
 * is damaged (or the scan gave an entry out of order): nothing is kept;
 * use sync_scan_manifest. Errors: the scan's, d then empty. */
struct sync_scan_diff {
	struct sm_list kept;
	uint8_t *same;
	size_t asame;      /* same's bytes */
	size_t nstate;     /* the state's entries */
	size_t entries;    /* local entries scanned (kept or same) */
	uint64_t cached;   /* files hashed from the index */
	uint64_t dev;      /* the device the same files are on */
	int devs;          /* changes of it seen (>1: more than one) */
	int lacking, redo;
	uint64_t rehashed;
	int64_t start_ns;  /* the wall-clock time the walk began */
	uint8_t digest[SM_HASH_LEN];
};
int sync_scan_diff(const char *root, const struct scan_opts *so, struct sync_index *idx,
		   int state_fd, int (*ignored)(void *arg, const char *path, int is_dir),
		   int (*rehash)(void *arg, struct sm_entry *m), void *arg,
		   struct sync_scan_diff *d, struct gr_err *err);
/* The whole local manifest, as sync_scan_manifest would have made it,
 * from d, the state (read again) and the index (for the stat identity
 * of the files local holds as the state does), those entries marked
 * SM_F_SAME; differ gets copies of the state's other entries (what a
 * plan against the state needs of it: the shape run_known_diff makes). d is
 * emptied. 1 if it cannot be (the state or the index changed, the files
 * are on more than one device), out and differ empty: scan again with
 * sync_scan_manifest. */
int sync_diff_whole(struct sync_scan_diff *d, struct sync_index *idx, int state_fd,
		    struct sm_list *out, struct sm_list *differ, struct sync_hash_stats *hs,
		    struct gr_err *err);
void sync_diff_free(struct sync_scan_diff *d);

#endif
