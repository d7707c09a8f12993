/* What a sync must do, from the local manifest and the host's (both sorted
 * by path): deletions (children first), folders (parents first), symlinks,
 * files to send and how (tar, delta, delta after asking for a signature),
 * and mode/mtime-only changes. Pure logic: no I/O but the have_sig test. */
#ifndef GR_SYNC_PLAN_H
#define GR_SYNC_PLAN_H

#include <stdint.h>

#include "sync_manifest.h"

enum sync_how {
	HOW_TAR = 1,     /* new or small: in the tar.zst stream */
	HOW_DELTA,       /* large, the host's version's signature is cached */
	HOW_DELTA_SIG,   /* large, ask the host for its version's signature */
};

/* 8 bytes: a first sync plans every file. */
struct sync_item {
	uint32_t local;                /* index into the local list */
	uint32_t prev : 30;            /* whatever the host has there: index + 1
					  into plan->remote, or 0 */
	uint32_t how : 2;              /* enum sync_how */
};

struct sync_plan {
	struct strvec deletes;   /* children before parents */
	struct strvec mkdirs;    /* parents before children */
	size_t *links;           /* local indexes of symlinks to (re)make */
	size_t nlinks;
	struct sync_item *files;
	size_t nfiles;
	size_t *meta;            /* local indexes: same content, new mode or mtime */
	size_t nmeta;
	uint64_t send_bytes;     /* sizes of the files to send */
	const struct sm_list *remote; /* the host's list it was made against
					 (items point into it) */
};

/* Whatever the host has at the item's path, or NULL. */
static inline const struct sm_entry *sync_item_prev(const struct sync_plan *p,
						    const struct sync_item *it)
{
	return it->prev ? &p->remote->e[it->prev - 1] : NULL;
}

/* The host's file at the item's path (the delta base when how is
 * HOW_DELTA or HOW_DELTA_SIG), or NULL if it has none there. */
static inline const struct sm_entry *sync_item_remote(const struct sync_plan *p,
						      const struct sync_item *it)
{
	const struct sm_entry *r = sync_item_prev(p, it);

	return r && r->type == SM_FILE ? r : NULL;
}

/* sm_entry.flags: an entry of the host's that is ignored here, kept in
 * the local list as the host has it (sync_plan_keep_ignored). */
#define SM_F_KEPT 2
/* sm_entry.flags: to be hashed by resolve_hashes (sync_hash_mark). */
#define SM_F_COMPARE 8
/* sm_entry.flags: the host has this entry as it is (its list, given to
 * sync_plan_build, leaves such entries out). */
#define SM_F_SAME 16

/* A sync never deletes on the host what is ignored here (as rsync's
 * --delete spares excluded files): every entry of host that ignored()
 * says is ignored here and that local lacks joins local (sorted), as the
 * host has it, marked SM_F_KEPT, so the plan neither sends nor deletes it
 * and the manifest the sync expects keeps it. Entries kept before are
 * dropped first. *map (NULL if nothing changed, else the caller's to
 * free) gives each new index's old index, or SIZE_MAX for a kept entry;
 * map may be NULL.
 * Returns how many are kept. */
size_t sync_plan_keep_ignored(struct sm_list *local, const struct sm_list *host,
			      int (*ignored)(void *arg, const char *path, int is_dir), void *arg,
			      size_t **map);

/* have_sig(arg, hash): is a signature of that version cached? A local
 * entry marked SM_F_SAME that remote lacks is on the host as it is. */
void sync_plan_build(const struct sm_list *local, const struct sm_list *remote,
		     uint64_t delta_min, int (*have_sig)(void *arg, const uint8_t *hash),
		     void *arg, struct sync_plan *p);
void sync_plan_free(struct sync_plan *p);
/* Nothing to do at all? */
int sync_plan_empty(const struct sync_plan *p);

/* --dry-run: "send PATH", "send PATH/" (folder), "delete PATH",
 * "update PATH" (mode or mtime), one per line, paths quoted like git's. */
void sync_plan_list(const struct sync_plan *p, const struct sm_list *local,
		    struct strbuf *out);

/* The n largest top-level folders by bytes to send ("(top level)" for
 * files in the root); returns how many were filled. */
struct sync_folder_size {
	char *name;
	uint64_t bytes;
};
size_t sync_plan_largest(const struct sync_plan *p, const struct sm_list *local,
			 struct sync_folder_size *out, size_t n);

/* A path as git prints it: as is, or in double quotes with C escapes
 * when it holds control characters, quotes, backslashes or non-ASCII
 * bytes. Returns a new string. */
char *sync_quote(const char *path);

#endif
