/* The host's manifest, when its answer to OPEN (STATE) carries it whole,
 * into a file with no name in .gpurun as the answer arrives (in the
 * manifest's own encoding, as remote-KEY holds it), not into a list: a
 * sync whose state is lost or stale reads its walk (the spool, or the
 * walk read against remote-KEY) against it (sync_spool_diff). At
 * 1,000,000 entries the list and the answer it came from were ~250 MiB.
 * cli/sync only. */
#ifndef GR_SYNC_HOST_H
#define GR_SYNC_HOST_H

#include <stdint.h>

#include "sync_steps.h"

struct host_file {
	int want;           /* to a file (else STATE is parsed as before) */
	int fd;             /* the manifest, written whole; -1: none */
	/* while the answer arrives */
	int streaming, no;  /* into the file now; never (no manifest, no room) */
	size_t try_at;      /* the answer's length at which to look for the head */
	size_t head;        /* the answer's bytes before the manifest's */
	uint64_t got;       /* the answer's bytes so far */
	uint64_t zleft;     /* the manifest's (compressed) bytes still to come */
	uint64_t out;       /* decompressed, so far */
	int ended;          /* its zstd frame is whole */
	void *z;            /* ZSTD_DStream */
	struct strbuf wb;   /* decompressed, not yet written */
};

void host_file_init(struct host_file *f, int want);
/* A piece of STATE's answer (each DATA frame's payload, then STATE's),
 * in order: into body, but for the manifest, which goes to the file. */
int host_file_take(struct host_file *f, const char *root, struct strbuf *body, const void *p,
		   size_t n, struct gr_err *err);
/* The answer whole: parse_state of body into h; with want, a manifest
 * the host sent is in f->fd (h->manifest empty, h->manifest_apart set),
 * unless no file could be made (then it is in h->manifest). */
int host_file_end(struct host_file *f, const char *root, struct strbuf *body,
		  struct host_state *h, struct gr_err *err);
void host_file_close(struct host_file *f);

#endif
