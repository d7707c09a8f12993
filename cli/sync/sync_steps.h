/* The steps of a sync that are not the transfer itself, shared by
 * sync.c: the host's answer to OPEN (its manifest, what changed there),
 * the connection opened while the tree is scanned, which files to hash.
 * What a sync shows the user is sync_show.c's. */
#ifndef GR_SYNC_STEPS_H
#define GR_SYNC_STEPS_H

#include <pthread.h>

#include "sync.h"
#include "sync_manifest.h"
#include "sync_open.h"
#include "sync_plan.h"

struct sync_hash_stats;

struct host_state {
	uint32_t flags;
	uint8_t digest[SM_HASH_LEN];
	char *root;
	uint64_t free;            /* bytes free in the folder's file system */
	struct sm_list changed;   /* updated entries */
	struct strvec missing;    /* gone from the host */
	struct sm_list manifest;  /* when sent whole */
	int manifest_apart;       /* ... but to a file instead (sync_host.h) */
	struct strvec warnings;
};

void host_state_release(struct host_state *h);
/* A copy of a message from the host, fit for a terminal (control bytes
 * become '?'). */
char *sync_tame(const char *msg);
/* STATE's payload (with its long part before it, if any). With
 * h->manifest_apart set, the manifest is not in it (its bytes are none). */
int parse_state(const uint8_t *p, size_t n, struct host_state *h, struct gr_err *err);
/* What comes before its manifest: flags, digest, root, free space and
 * what changed on the host (rd->bad if it is not all there, or malformed). */
struct gr_rd;
void parse_state_head(struct gr_rd *rd, struct host_state *h);
/* What the host holds: the manifest it sent, or known with the changes it
 * found applied (a folder gone or replaced takes what was below it);
 * checked against its digest. */
int host_view(struct host_state *h, struct sm_list *known, struct sm_list *view,
	      struct gr_err *err);
/* The paths gone from the host by its changes (h->missing's, and all
 * below a folder gone or replaced): host_gone(g, path), an answer for
 * sync_diff_changes. */
struct host_gone {
	struct strvec missing, dead; /* sorted */
};
void host_gone_init(struct host_gone *g, const struct host_state *h);
int host_gone(void *g, const char *path);
void host_gone_release(struct host_gone *g);
/* A notice for the user through sh->say (one line, no "gpurun: "). */
void sync_say(const struct sync_show *sh, void *arg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Say which files someone changed on the host, where we undo it. */
void warn_host_changes(const struct host_state *h, const struct sm_list *local,
		       const struct sync_show *sh, void *arg);

/* The connection, opened on a thread while the tree is scanned and hashed
 * (an ssh handshake costs round trips, the scan costs disk). */
struct connect_job {
	struct gr_ctx *ctx;
	struct gr_conn *conn;
	struct gr_err err;
	int rc, started;
	pthread_t th;
	pthread_mutex_t mu;      /* guards the offer */
	uint16_t offer_type;
	struct strbuf offer;     /* a request's payload, when offer_type != 0 */
	uint32_t offer_id;       /* its id once it went with the command, else 0 */
	uint16_t first_type;     /* a request that goes first, never answered */
	struct strbuf first;
};
/* Before connect_start: a request (never answered) to go first inside the
 * bootstrap command, if the connection is made for this sync. */
void connect_first(struct connect_job *j, uint16_t type, const void *payload, size_t n);
void connect_start(struct connect_job *j, struct gr_ctx *ctx);
/* Offer a request to travel inside the bootstrap command (conn_opts.early),
 * if the connection has not got that far yet. After connect_finish,
 * j->offer_id says whether it went (and under which id). */
void connect_offer(struct connect_job *j, uint16_t type, const void *payload, size_t n);
int connect_finish(struct connect_job *j);
/* On the way out, whatever happened: collect the thread. */
void connect_abandon(struct connect_job *j);

/* Hash the files whose content must be compared with the host's (view):
 * the same path and size there, or large (a delta needs block hashes).
 * A file gone or replaced since the scan is left unhashed (the transfer
 * skips it with a warning). A large file's block hashes go to its
 * entry's leaves. view NULL: the files sync_hash_mark marked. */
int resolve_hashes(const struct gr_config *cfg, struct sync_tree *tree, struct sm_list *local,
		   const struct sm_list *view, struct sync_hash_stats *hs, struct gr_err *err);

/* Mark the local entry e (SM_F_COMPARE) if resolve_hashes(view NULL)
 * must hash it, r being the host's entry at its path (or NULL). */
void sync_hash_mark(const struct gr_config *cfg, struct sm_entry *e, const struct sm_entry *r);

#endif
