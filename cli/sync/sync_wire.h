/* The wire of a sync's transfer (sync_wire.c), below both its users,
 * sync_xfer.c and sync_xfer_tar.c (the tar stream): the requests in
 * flight, frame output with pacing, DATA framing. Internal to cli/sync. */
#ifndef GR_SYNC_WIRE_H
#define GR_SYNC_WIRE_H

#include "sync_xfer.h"

#define SYNC_WIRE_FRAME (256u << 10)

enum { SYNC_RQ_SESSION = 1, SYNC_RQ_TAR, SYNC_RQ_FILE, SYNC_RQ_SIG };

struct sync_wire_req {
	uint32_t id;
	int kind;
	size_t item;         /* plan->files index (FILE, SIG) */
	int done, failed;
	struct strbuf data;  /* SIG: the signature; SESSION: a long answer's first part */
	struct strbuf ans;   /* OK's payload */
};

struct sync_wire_sig {
	uint8_t hash[SM_HASH_LEN];
	struct strbuf sig;
};

/* Queue a frame on the connection, counting it in x->wire. */
void sync_wire_send(struct sync_xfer *x, uint16_t type, uint16_t flags, uint32_t id,
		    const void *p, size_t n);
/* Register request id; returns its index in x->reqs (stable). */
size_t sync_wire_add_req(struct sync_xfer *x, uint32_t id, int kind, size_t item);
/* Read every answer already here, without waiting (and write what the
 * transport takes now). x->fatal, or 0. */
int sync_wire_poll(struct sync_xfer *x);
/* Read answers already there, and wait for the pipe while too much is
 * queued. x->fatal, or 0. */
int sync_wire_pace(struct sync_xfer *x);
/* Wait (at most x->idle_ms of silence) for one more answer. x->fatal, or 0. */
int sync_wire_wait_one(struct sync_xfer *x);
/* Keep sig (taken over, *sig emptied) to cache once committed. */
void sync_wire_keep_sig(struct sync_xfer *x, const uint8_t hash[SM_HASH_LEN], struct strbuf *sig);
/* A file (path; NULL: the tar stream) the host could not write, or that
 * could not be read here (SYNC_ERR_LOCAL); one per file. */
void sync_wire_add_error(struct sync_xfer *x, const char *path, int kind, const char *msg,
			 uint64_t size);
/* Plan item `item` was not sent: the host keeps its version. */
void sync_wire_revert(struct sync_xfer *x, size_t item);
/* The local entry of plan item `item`. */
struct sm_entry *sync_wire_entry(struct sync_xfer *x, size_t item);

/* DATA frames for one stream, SYNC_WIRE_FRAME bytes at a time. */
struct sync_wire_data {
	struct sync_xfer *x;
	uint32_t id;
	struct strbuf b;
};
int sync_wire_data_add(struct sync_wire_data *fb, const void *p, size_t n);
void sync_wire_data_end(struct sync_wire_data *fb);

#endif
