/* Carry out a sync plan over the open session, pipelined on the one
 * connection: folder/link/deletion/mode ops in as many frames as they
 * need, signature requests for large files without a cached one, deltas
 * and whole large files as they are computed, every other file in one
 * tar.zst stream, then COMMIT with the digest the host's manifest must
 * have. Nothing waits for an answer until COMMIT, except deltas that need
 * the host's signature; an answer that arrives early (the host refused a
 * file while it was being sent) stops that file at once. No wait is
 * longer than idle_ms of silence on the connection. */
#ifndef GR_SYNC_XFER_H
#define GR_SYNC_XFER_H

#include <stdint.h>

#include "ctx.h"
#include "sync_manifest.h"
#include "sync_open.h"
#include "sync_plan.h"
#include "term.h"

struct sync_wire {
	uint64_t out, in; /* frame bytes (headers included) sent and received */
};

/* A local file that could not be read (never from the host). */
#define SYNC_ERR_LOCAL 100

/* A file (or the tar stream, path NULL) the host could not write. */
struct sync_error {
	char *path;
	int kind;       /* SYNC_ERR_* (sync_proto.h) */
	char *msg;
	uint64_t size;  /* the file's size, 0 if not known */
};

/* A plan given a window at a time, for the first sync to a host that
 * holds nothing (sync_first.h): never a list of the tree. */
struct sync_windows {
	/* back to the first window: 0, or a GR_E* code with err set */
	int (*rewind)(void *arg, struct gr_err *err);
	/* the next window of local's entries, and their plan against nothing
	 * (folders, links, files HOW_TAR): 1, 0 after the last, or GR_E* */
	int (*next)(void *arg, struct sm_list *win, struct sync_plan *p, struct gr_err *err);
	/* the window sent: its files hashed as they went, but for those the
	 * host does not get (gone: plan->files indexes, sorted, n of them) */
	void (*sent)(void *arg, const struct sm_list *win, const struct sync_plan *p,
		     const uint32_t *gone, size_t n);
	/* the digest of what the host should hold, all windows sent */
	void (*digest)(void *arg, uint8_t out[SM_HASH_LEN]);
	void *arg;
	size_t nfiles;              /* files in all the windows */
};

struct sync_xfer {
	/* in */
	struct gr_conn *c;
	uint32_t sid;               /* the session (OPEN's request id) */
	int optimistic;             /* OPEN's answer (SYNC_STATE) is still to come */
	const char *root;           /* the local project folder (its .gpurun/sigs) */
	struct sync_tree *tree;     /* the same, open (sync_open.h) */
	const struct sync_plan *plan;
	struct sm_list *local;      /* entries whose content changed while being
				       sent get the hash of what was sent */
	uint64_t delta_min;         /* cache signatures of files this large */
	int idle_ms;                /* the longest silence on the connection */
	struct sync_wire *wire;
	struct sync_progress *prog;
	/* in, optional: local holds only what differs from a state (the whole
	 * is a merge of the two, sync_diff.h): the whole's digest from what
	 * the host should hold of local (0, or -1 if it cannot be made) */
	int (*whole_digest)(void *arg, const struct sm_list *expected, uint8_t out[SM_HASH_LEN]);
	void *whole_arg;
	/* in, optional: the plan a window at a time (plan then says only how
	 * many bytes in all; local is empty): ops for every window, then
	 * every window's files in one tar, then COMMIT */
	const struct sync_windows *windows;
	/* in, and out when the optimistic STATE tells them */
	char *host_root;            /* the folder on the host (owned) */
	uint64_t host_free;         /* bytes free there at OPEN */
	/* out */
	uint64_t files_tar, files_delta, files_whole, files_sig, literal, matched;
	struct strvec warnings;     /* messages to show */
	struct sync_error *errs;    /* what the host could not write */
	size_t nerrs;
	int nospace;                /* the host ran out of space: the rest stayed home */
	struct sm_list expect;      /* what the host should hold now, when it is not local */
	const struct sm_list *expected; /* that: &expect or local (set at COMMIT; NULL before) */
	uint8_t digest[SM_HASH_LEN];/* what the host says it holds */
	uint8_t expect_digest[SM_HASH_LEN]; /* expected's, made once COMMIT went */
	int committed;              /* COMMIT answered OK */
	int rejected;               /* optimistic: the host was not as planned for */
	/* private */
	struct sync_wire_req *reqs;
	size_t nreqs;
	uint32_t *reverted;         /* plan->files indexes: the host keeps its version
				       (a list, not a byte a file: few ever are) */
	size_t nreverted, areverted;
	struct sync_wire_sig *sigs; /* signatures to cache once committed */
	size_t nsigs;
	int fatal;
	struct gr_err *err;
	uint64_t paced_ns;          /* time spent waiting for the transport (sync_wire_pace) */
};

/* 0 when the exchange completed (check committed, errs and whether
 * digest matches the digest of expect), or a GR_E* code with err set when
 * the connection or the session failed. */
int sync_xfer_run(struct sync_xfer *x, struct gr_err *err);
/* Save the signatures of what was sent (after a matching COMMIT). */
void sync_xfer_save_sigs(struct sync_xfer *x);
void sync_xfer_release(struct sync_xfer *x);

/* sync_xfer_tar.c, for sync_xfer.c: every HOW_TAR file in one tar.zst
 * stream. */
int sync_xfer_tar(struct sync_xfer *x);
/* The same in steps: open the stream, add x->plan's HOW_TAR files (again
 * for each window), close (rc: what went wrong before; returned, or
 * the close's). */
struct sync_tar {
	struct tarz *tz;
	struct archive *a;
	uint8_t *buf;
};
int sync_xfer_tar_open(struct sync_xfer *x, struct sync_tar *t);
int sync_xfer_tar_files(struct sync_xfer *x, struct sync_tar *t);
int sync_xfer_tar_close(struct sync_xfer *x, struct sync_tar *t, int rc);

#endif
