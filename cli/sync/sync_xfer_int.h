/* What sync_xfer.c shares with sync_xfer_tar.c (the tar stream): the
 * requests in flight, frame output with pacing, DATA framing. Internal to
 * the transfer. */
#ifndef GR_SYNC_XFER_INT_H
#define GR_SYNC_XFER_INT_H

#include "sync_xfer.h"

#define FRAME_DATA (256u << 10)

enum { RQ_SESSION = 1, RQ_TAR, RQ_FILE, RQ_SIG };

struct xreq {
	uint32_t id;
	int kind;
	size_t item;         /* plan->files index (FILE, SIG) */
	int done, failed;
	struct strbuf data;  /* SIG: the signature; SESSION: a long answer's first part */
	struct strbuf ans;   /* OK's payload */
};

struct xsig {
	uint8_t hash[SM_HASH_LEN];
	struct strbuf sig;
};

void xsend(struct sync_xfer *x, uint16_t type, uint16_t flags, uint32_t id, const void *p,
	   size_t n);
/* Register request id; returns its index in x->reqs (stable). */
size_t add_req(struct sync_xfer *x, uint32_t id, int kind, size_t item);
/* Read answers already there, and wait for the pipe while too much is
 * queued. x->fatal, or 0. */
int pace(struct sync_xfer *x);
void keep_sig(struct sync_xfer *x, const uint8_t hash[SM_HASH_LEN], struct strbuf *sig);
void add_error(struct sync_xfer *x, const char *path, int kind, const char *msg, uint64_t size);
/* Plan item `item` was not sent: the host keeps its version. */
void revert_item(struct sync_xfer *x, size_t item);
/* The local entry of plan item `item`. */
struct sm_entry *item_entry(struct sync_xfer *x, size_t item);

/* DATA frames for one stream, FRAME_DATA bytes at a time. */
struct fbuf {
	struct sync_xfer *x;
	uint32_t id;
	struct strbuf b;
};
int fbuf_add(struct fbuf *fb, const void *p, size_t n);
void fbuf_end(struct fbuf *fb);

/* sync_xfer_tar.c: every HOW_TAR file in one tar.zst stream. */
int sync_xfer_tar(struct sync_xfer *x);

#endif
