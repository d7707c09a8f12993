/* One sync's state, shared by sync.c (the exchange) and sync_known.c
 * (what it knows of the host before asking). cli/sync only. */
#ifndef GR_SYNC_RUN_H
#define GR_SYNC_RUN_H

#include "ignore.h"
#include "sync.h"
#include "sync_diff.h"
#include "sync_first.h"
#include "sync_host.h"
#include "sync_index.h"
#include "sync_open.h"
#include "sync_wire.h"

struct run {
	struct gr_ctx *ctx;
	const struct sync_opts *o;
	struct sm_list local, known, view;
	int known_fd;       /* the last committed state (.gpurun/remote-KEY), or -1 */
	int known_loaded;   /* known holds it: 2 whole (run_known_load), 1 where it
			       differs from local (run_known_diff), 0 not at all */
	uint8_t local_digest[SM_HASH_LEN], known_digest[SM_HASH_LEN];
	int have_known;
	char *key;
	struct sync_wire wire;
	struct sync_stats st;
	struct sync_hash_stats hs;
	uint32_t early_sid; /* an OPEN that went with the bootstrap command */
	struct ignore *ig;  /* for run_ignored_here, made when first needed */
	struct scan_opts so;
	struct sync_tree *tree;
	int idle_ms;        /* the longest silence on the connection we wait out */
	char *host_root;    /* STATE's (the non-optimistic path) */
	uint64_t host_free;
	const struct sync_show *show; /* how to talk to the user (o->show) */
	void *show_arg;
	int incr;           /* local is the watcher's (sync_incr.h), not a walk's */
	int local_is_state; /* remote-KEY holds local now, whose digest is: */
	uint8_t state_digest[SM_HASH_LEN];
	/* The walk was read against remote-KEY (sync_diff.h): local stays
	 * empty until run_local_whole makes it, which a no-op never needs. */
	int streamed;
	struct sync_scan_diff diff;
	/* And where it differs (run_partial): local holds only what the walk
	 * kept, known the state's entries that differ; the whole is their
	 * merge with the state (sync_merged), never a list. */
	int partial;
	/* No state to read the walk against: the walk is in a spool, not a
	 * list (spooled), until run_local_whole reads it, or a first sync to
	 * a host that holds nothing sends from it (first). */
	struct sync_spool spool;
	int spooled, first;
	struct sync_windows windows; /* first's */
	/* The host's manifest in a file (a spooled walk's: sync_host.h),
	 * which then stands in for the state, as known_fd, read against the
	 * spool (partial); at_changes: the local entries at the paths the
	 * host says changed there (host: its state, meanwhile). */
	struct host_file hf;
	struct sm_list at_changes;
	const struct host_state *host;
	struct sync_index *idx;
};

/* sync_run's answer when a sync without the walk finds what it cannot
 * settle: nothing was changed on the host; walk and sync again. */
#define SYNC_WALK 1

/* sync_known.c. */
/* Is path (on the host) ignored here? Then the sync leaves it there. */
int run_ignored_here(void *arg, const char *path, int is_dir);
/* A file sync_scan_diff must hash (sync_hash_entry, the tree open). */
int run_rehash_racy(void *arg, struct sm_entry *m);
/* What the host holds and this side ignores stays on the host (and in
 * the local list, as the host has it). */
void run_keep_ignored(struct run *r, const struct sm_list *host);
/* Before the connection, after a walk: the state's digest, what it keeps
 * ignored here, the files to compare marked; the state stays open. */
void run_known_scan(struct run *r);
/* The local list made, after a walk read against the state (streamed),
 * or from the spool (spooled). */
int run_local_whole(struct run *r);
/* Or only where it differs from the state (sync_diff_partial): 1, or 0
 * if that cannot be (then run_local_whole). run_local_whole after it
 * makes the list from the same (the host was not in the state). */
int run_partial(struct run *r);
/* The host sent its manifest (into r->hf), which is not the state known
 * here: local read against it, only what differs held (run_partial's
 * lists), the manifest standing in for the state. 0; 1 where it cannot
 * be (the manifest is then in h->manifest, for the list); or an error. */
struct host_state;
int run_host_diff(struct run *r, struct host_state *h);
/* Where the host changed since the state (its changes, not its
 * manifest): run_partial's lists grow by the paths it changed, and view
 * gets what it holds at each path of them (sync_diff_changes). 0; 1 if
 * that cannot be (then run_local_whole); or an error (its digest). */
int run_host_changes(struct run *r, const struct host_state *h);
/* run_partial's whole (sync_merged): local as given (local's, or what
 * the host holds of it after a COMMIT). */
struct sync_merged run_merged(struct run *r, const struct sm_list *local);
/* The same for a sync without the walk (the watcher's). */
void run_known_from_incr(struct run *r);
/* local's digest, for a sync without the walk. */
void run_incr_digest(struct run *r);
/* Clear SM_F_SAME on local's entries. */
void run_forget_same(struct run *r);
/* The last committed state into known: whole, or where local differs
 * (local's others marked SM_F_SAME). 0, or GR_EIO with err set. */
int run_known_load(struct run *r);
int run_known_diff(struct run *r);

#endif
