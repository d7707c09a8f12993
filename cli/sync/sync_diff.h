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
/* Does local hold the state's entry i as it is? */
static inline int sync_diff_same(const struct sync_scan_diff *d, size_t i)
{
	return i / 8 < d->asame && (d->same[i / 8] >> (i % 8) & 1);
}
int sync_scan_diff(const char *root, const struct scan_opts *so, struct sync_index *idx,
		   int state_fd, int (*ignored)(void *arg, const char *path, int is_dir),
		   int (*rehash)(void *arg, struct sm_entry *m), void *arg,
		   struct sync_scan_diff *d, struct gr_err *err);
/* The same read from a spool of the walk (each(src, fn, arg): its
 * entries in path order, as sync_spool_each_walk gives them) against a
 * manifest the host sent (state_fd, sorted: else redo), for a sync that
 * knows no state of its own: d as sync_scan_diff makes it, but that a
 * file the spool did not hash is hashed (rehash) where the host has one
 * of its size at its path, and that the index is written anew meanwhile
 * (root, idx) from every file hashed (so what was hashed here need not
 * be again; root NULL: none is written, as for entries with no stat
 * identity). seen(arg, m): each local entry, as compared. d->cached stays
 * 0 (the spool counted those). 0, or 1 (d->redo, the index as it was)
 * if the host's manifest is out of order or damaged, or the spool or
 * the index cannot be read or written. d's bits then serve sync_merged
 * with state_fd, as after sync_diff_partial; never sync_diff_whole (the
 * index does not hold the host's entries' stat identity). */
int sync_spool_diff(int (*each)(void *src, void (*fn)(void *arg, const struct sm_entry *e),
				void *arg),
		    void *src, const char *root, struct sync_index *idx, int state_fd,
		    int (*ignored)(void *arg, const char *path, int is_dir),
		    int (*rehash)(void *arg, struct sm_entry *m),
		    void (*seen)(void *arg, const struct sm_entry *m), void *arg,
		    struct sync_scan_diff *d);
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
/* Where local differs from the state, with no list of the tree: local
 * gets d's kept entries (d->kept is emptied), differ copies of the
 * state's entries local does not hold as they are, but for those local
 * lacks that are ignored here (ignored(arg, path, is_dir): they stay on
 * the host). What a plan against the state needs (the shape run_known_diff
 * makes, without local's SM_F_SAME entries). d's bits stay, for
 * sync_merged. 1 if it cannot be (the state changed or is damaged): use
 * sync_diff_whole, or scan again. */
int sync_diff_partial(struct sync_scan_diff *d, int state_fd,
		      int (*ignored)(void *arg, const char *path, int is_dir), void *arg,
		      struct sm_list *local, struct sm_list *differ);
/* After sync_diff_partial (local, differ), where the host changed since
 * the state (it sent its changes, not its manifest): what it holds is the
 * state with changed's entries in place (changed sorted, as parse_state
 * leaves it) and without the paths gone(arg, path) says (missing, or
 * below a folder gone). local and differ then grow by the entries at the
 * state's paths the host changed: differ by the state's, local by its
 * own there (the state's that local holds as it is, with its stat
 * identity from idx where it holds the file; or, where local lacks it
 * and it is ignored here, the host's new one, SM_F_KEPT, which stays),
 * and by the host's new entries ignored here (SM_F_KEPT); both stay
 * sorted, and sync_merged stands for local's whole as before. view gets
 * the host's entries at every path of local, differ and changed (what a
 * plan against the host needs), digest the digest of all the host holds
 * (to check against its own). Nothing is held of the rest of the tree.
 * 0, or 1 (local and differ as they were) if the state cannot be read as
 * it was. */
int sync_diff_changes(const struct sync_scan_diff *d, int state_fd, const struct sync_index *idx,
		      const struct sm_list *changed, int (*gone)(void *garg, const char *path),
		      void *garg, int (*ignored)(void *arg, const char *path, int is_dir), void *arg,
		      struct sm_list *local, struct sm_list *differ, struct sm_list *view,
		      uint8_t digest[SM_HASH_LEN]);

/* The whole that sync_diff_partial's lists stand for, as a stream (never
 * a list): the state's entries (read again) but those differ holds,
 * merged with local's (the kept entries, or what the host holds of them
 * after a COMMIT: their paths are differ's or the state's lacks). */
struct sync_merged {
	const struct sync_scan_diff *d; /* which of the state's local holds as it is */
	int state_fd;
	const struct sm_list *differ, *local;
};
/* An sm_each_fn: -1 if the state cannot be read whole as it was. */
int sync_merged_each(void *m, void (*fn)(void *arg, const struct sm_entry *e), void *arg);
/* The same without what the host keeps that is ignored here: local's
 * whole (the state's entries it holds as they are come with no stat
 * identity: dev and ino 0). */
int sync_merged_each_here(void *m, void (*fn)(void *arg, const struct sm_entry *e), void *arg);
/* Its digest (sm_digest's); -1 and zeros if it cannot be read. */
int sync_merged_digest(const struct sync_merged *m, uint8_t out[SM_HASH_LEN]);
/* The index written from it: local's files (m->local with the scan's
 * stat data), and the state's files local holds as they are, with the
 * old index's (read in step). Failing, the old index stays. */
int sync_diff_save_index(const char *root, struct sync_index *idx, const struct sync_merged *m,
			 struct gr_err *err);
void sync_diff_free(struct sync_scan_diff *d);

#endif
