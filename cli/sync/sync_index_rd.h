/* The index file read in step with a walk: sync_index.c's reader, for
 * sync_diff.c (cli/sync only). */
#ifndef GR_SYNC_INDEX_RD_H
#define GR_SYNC_INDEX_RD_H

#include <stdint.h>
#include <string.h>

#include "ignore.h"
#include "sync_manifest.h"
#include "util.h"

#define IDX_MAGIC "GRIX"
#define IDX_VERSION 1u
#define IDX_HDR 20 /* magic, version u32, scan time u64, count u32 */
#define RACY_NS 1000000000LL /* files changed this close to a scan are rehashed */

/* Nothing of the index is held in memory: sync_local_manifest reads the
 * file in step with the scan (both in path order), and the save writes
 * the local manifest's files. Held whole, the old one and the new, it
 * was 240 bytes a file of the client's peak. */
struct sync_index {
	char *path;           /* <root>/.gpurun/index */
	int64_t scan_ns;      /* wall-clock time of the manifest the save records */
};

/* One entry of the index file, as read (its path in idx_rd.path). */
struct idx_entry {
	uint64_t size, ino;
	int64_t mtime_ns;
	uint32_t mode;
	uint8_t hash[SM_HASH_LEN];
};

/* The index file, read one entry ahead. */
struct idx_rd {
	struct fwin w;
	uint32_t left;        /* entries not read yet */
	int64_t scan_ns;      /* the scan that made it */
	int bad;              /* damaged: none of it may be used */
	int have;             /* cur and path hold the next entry */
	int started;          /* an entry was read (path holds the last one) */
	struct idx_entry cur;
	struct strbuf path;
};

/* Open the index (absent, unreadable or of another version: no entries)
 * and read its first entry. */
void idx_open(struct idx_rd *r, const char *path);
/* Read the next entry into r->cur: 1, or 0 at the end (r->bad if the
 * file is damaged). */
int idx_next(struct idx_rd *r);
/* The entry for path, if the index has one (asked in path order). */
const struct idx_entry *idx_seek(struct idx_rd *r, const char *path);
void idx_close(struct idx_rd *r);
/* Does the index's entry c describe the file the scan saw as m (size,
 * mtime, inode, mode)? Its hash is m's then, unless m changed too close
 * to the scan that recorded it (RACY_NS). */
static inline int idx_stat_same(const struct idx_entry *c, const struct sm_entry *m)
{
	return c && c->size == m->size && c->mtime_ns == m->mtime_ns && c->ino == m->ino &&
	       c->mode == m->mode;
}

/* Does the index's entry c record the state's file e (size, mtime,
 * hash), so its stat identity is e's local file's? */
static inline int idx_holds(const struct idx_entry *c, const struct sm_entry *e)
{
	return c && c->size == e->size && c->mtime_ns == e->mtime_ns &&
	       !memcmp(c->hash, e->hash, SM_HASH_LEN);
}

/* The index written an entry at a time (the count goes into the header
 * at the end): idx_save_with's fill(arg, w) adds each, in path order. */
struct idx_wr {
	int fd, failed;
	uint32_t n;
	struct strbuf b;
};
void idx_wr_add(struct idx_wr *w, const char *path, const struct idx_entry *c);
/* m with the scan's stat data, if the index records it: a local file,
 * hashed, not the host's entry kept in the list (sync_plan_keep_ignored). */
void idx_wr_add_local(struct idx_wr *w, const struct sm_entry *m);
int idx_save_with(const char *root, const struct sync_index *idx,
		  void (*fill)(void *arg, struct idx_wr *w), void *arg, struct gr_err *err);

/* The manifest's description of a scanned entry (its path and link are
 * s's): its type, or 0 if it cannot be carried (sm_path_ok, a temp
 * name of the agent's, a symlink without a target). */
int lm_describe(const struct scan_entry *s, struct sm_entry *m);
/* m at the end of out, its path in out's pool. */
struct sm_entry *lm_keep(struct sm_list *out, const struct sm_entry *m);
/* The folders of out's entries that it lacks, added; out is sorted. */
void lm_parents(struct sm_list *out);
int64_t wall_ns(void);

#endif
