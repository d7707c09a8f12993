/* The first sync without a list of the tree (cli/sync only). With no
 * committed state to read the walk against (no remote-KEY), the walk
 * goes to a spool file in .gpurun (with no name: it never outlives the
 * sync) instead of a list. If the host turns out to hold nothing gpurun
 * knows (its manifest empty, none known here), everything is sent from
 * the spool a window of entries at a time (sync_windows, sync_xfer.h): the folders and links
 * first, then the files in one tar, hashed as they go. What was sent goes
 * to a second spool, from which remote-KEY, the signature and block
 * caches' collection and the index are written once COMMIT matched. Else
 * (the host has a manifest, --dry-run's listing, the warning size) the
 * spool is read into the local list and the sync goes on as before. */
#ifndef GR_SYNC_FIRST_H
#define GR_SYNC_FIRST_H

#include <stdint.h>

#include "ignore.h"
#include "sync_index.h"
#include "sync_manifest.h"
#include "sync_xfer.h"

struct sync_spool {
	int fd;                 /* the walk's entries; -1: none */
	size_t n, files;        /* entries; files among them */
	uint64_t bytes;         /* the files' sizes */
	uint64_t cached;        /* files whose hash came from the index */
	int unhashed;           /* some file's did not: no digest */
	uint8_t digest[SM_HASH_LEN]; /* the walk's (all hashed) */
	/* sending (sync_windows) */
	uint64_t delta_min;
	int sent_fd;            /* what was sent, hashed (and what the host did not get) */
	int sent_ok;            /* ... every window, written whole */
	struct sm_reader rd;
	int rd_open;
	struct sm_writer sw;
	struct sm_digest dg;
	struct sm_list none;    /* the empty host */
};

/* The walk into sp (sp->fd -1 before). 0; 1 when it cannot be spooled
 * (no room in .gpurun, the scan out of order, a folder left out, a
 * damaged index): walk into a list as before; or the scan's error. */
int sync_spool_scan(const char *root, const struct scan_opts *so, struct sync_index *idx,
		    struct sync_spool *sp, struct gr_err *err);
/* The spool into out, as sync_scan_manifest makes it (and closed). */
int sync_spool_load(struct sync_spool *sp, struct sm_list *out, struct gr_err *err);
/* The windows of sp for sync_xfer (sp must stay until the sync ends):
 * 0, or -1 if no second spool can be made (then load it). */
int sync_spool_windows(struct sync_spool *sp, const char *root, uint64_t delta_min,
		       struct sync_windows *w);
/* What was sent: what the host holds (each_host) and local's entries
 * (each_local), streamed, for the writers after COMMIT (sm_each_fn);
 * and the walk's spool itself (each_walk: a host found up to date). */
int sync_spool_each_host(void *sp, void (*fn)(void *arg, const struct sm_entry *e), void *arg);
int sync_spool_each_local(void *sp, void (*fn)(void *arg, const struct sm_entry *e), void *arg);
int sync_spool_each_walk(void *sp, void (*fn)(void *arg, const struct sm_entry *e), void *arg);
/* The index from what was sent (every window sent; else nothing). */
void sync_spool_save_index(const char *root, struct sync_index *idx, struct sync_spool *sp);
void sync_spool_close(struct sync_spool *sp);

#endif
