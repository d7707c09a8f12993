/* The watcher's syncs without the walk (sync_incr.c): what its last sync
 * committed, plus the paths inotify reported since. cli/sync's own: the
 * watcher (sync_watch.c) fills it, sync_project (sync.c) uses it. */
#ifndef GR_SYNC_INCR_H
#define GR_SYNC_INCR_H

#include <stdint.h>

#include "ignore.h"
#include "sync_manifest.h"
#include "util.h"

/* .gpurun/remote-KEY's identity: rewritten (atomically, a new inode) by
 * any sync that commits, ours or another gpurun's. */
struct sync_incr_id {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};

struct sync_incr {
	/* The watcher's, before each sync: */
	int usable;            /* paths says all that changed since the last sync's scan */
	struct strvec paths;   /* those paths (any order, repeats) */
	/* sync_project's, after each sync: */
	int have_state;        /* the last sync succeeded; remote-KEY as it left it */
	struct sync_incr_id state;
	struct ignore *ig;     /* scan_probe's rules (dropped at every walk) */
	/* remote-KEY's contents as the last sync left it, and their digest,
	 * when it knew them (have_list): the next sync takes them instead of
	 * reading and digesting the file (~150 ms at 300k entries) while
	 * remote-KEY's identity is still state. */
	int have_list;
	struct sm_list list;
	uint8_t list_digest[SM_HASH_LEN];
	int walked;            /* the last sync walked the tree */
};

/* The local manifest (out emptied first): the last committed state with
 * each reported path as the walk would see it now, sorted, the changed
 * files SM_F_UNHASHED (with their stat identity), the others SM_F_SAME
 * (as committed); old (emptied first):
 * the committed entries it replaced or dropped, sorted; digest: the
 * committed state's. 1 when built (*nchanged: the paths looked at), 0
 * when only a walk can say (out and old empty). */
int sync_incr_build(struct sync_incr *in, const char *root, const char *key,
		    const struct scan_opts *so, struct sm_list *out, struct sm_list *old,
		    uint8_t digest[SM_HASH_LEN], size_t *nchanged);
/* After a sync: ok (it succeeded, not a dry run) records remote-KEY's
 * identity for the next; else the next walks. */
void sync_incr_committed(struct sync_incr *in, const char *root, const char *key, int ok);
/* After a sync that succeeded: l (moved out, emptied) is what
 * remote-KEY now holds, digest its digest; l NULL: not known. Call
 * before sync_incr_committed. */
void sync_incr_keep(struct sync_incr *in, struct sm_list *l, const uint8_t digest[SM_HASH_LEN]);
/* The next sync walks (and reloads the rules). */
void sync_incr_forget(struct sync_incr *in);
void sync_incr_release(struct sync_incr *in);

#endif
