/* gpurun sync as a library call, so train and the pre-push hook sync the
 * same way the command does. Owned by the sync engine. */
#ifndef GR_SYNC_H
#define GR_SYNC_H

#include <stdint.h>

#include "gpurun.h"

struct sync_opts {
	int dry_run;      /* list what would change, send nothing */
	int yes;          /* skip the size confirmation */
	int quiet;        /* no summary line */
};

struct sync_stats {
	uint64_t files_sent, files_deleted, bytes_wire, bytes_total;
	double seconds;
};

/* Bring [remote] path on the host up to date with the project (opens
 * ctx->conn if needed). Returns 0 or a GR_E* code with ctx->err set. */
int sync_project(struct gr_ctx *ctx, const struct sync_opts *o, struct sync_stats *st);

#endif
