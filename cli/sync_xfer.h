/* Carry out a sync plan over the open session, pipelined on the one
 * connection: folder/link/deletion ops in one frame, signature requests
 * for large files without a cached one, deltas and whole large files as
 * they are computed, every other file in one tar.zst stream, then COMMIT
 * with the digest the host's manifest must have. Nothing waits for an
 * answer until COMMIT, except deltas that need the host's signature. */
#ifndef GR_SYNC_XFER_H
#define GR_SYNC_XFER_H

#include <stdint.h>

#include "conn.h"
#include "sync_manifest.h"
#include "sync_plan.h"
#include "sync_progress.h"

struct sync_wire {
	uint64_t out, in; /* frame bytes (headers included) sent and received */
};

struct sync_xfer {
	/* in */
	struct gr_conn *c;
	uint32_t sid;               /* the session (OPEN's request id) */
	int optimistic;             /* OPEN's answer (SYNC_STATE) is still to come */
	const char *root;           /* local project folder */
	const struct sync_plan *plan;
	struct sm_list *local;      /* entries whose content changed while being
				       sent get the hash of what was sent */
	uint8_t **leaves;           /* per local entry: block hashes, or NULL */
	uint64_t delta_min;         /* cache signatures of files this large */
	struct sync_wire *wire;
	struct sync_progress *prog;
	/* out */
	uint64_t files_tar, files_delta, files_whole, files_sig, literal, matched;
	struct strvec warnings;     /* messages to show */
	struct strvec errors;       /* "'path': what went wrong" */
	struct sm_list expect;      /* what the host should hold now */
	uint8_t digest[SM_HASH_LEN];/* what the host says it holds */
	int committed;              /* COMMIT answered OK */
	int rejected;               /* optimistic: the host was not as planned for */
	/* private */
	struct xreq *reqs;
	size_t nreqs;
	uint8_t *revert;            /* per local entry: the host keeps its version */
	struct xsig *sigs;          /* signatures to cache once committed */
	size_t nsigs;
	int fatal;
	struct gr_err *err;
};

/* 0 when the exchange completed (check committed, errors and whether
 * digest matches the digest of expect), or a GR_E* code with err set when
 * the connection or the session failed. */
int sync_xfer_run(struct sync_xfer *x, struct gr_err *err);
/* Save the signatures of what was sent (after a matching COMMIT). */
void sync_xfer_save_sigs(struct sync_xfer *x);
void sync_xfer_release(struct sync_xfer *x);

#endif
