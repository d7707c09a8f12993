/* gpurun sync as a library call, so train and the pre-push hook sync the
 * same way the command does. Owned by the sync engine.
 *
 * Like a command, sync_project talks to the user on stderr: warnings (a
 * file changed on the host since the last sync is overwritten, and said
 * so), the size question, the progress bar (ctx->progress only) and the
 * summary line (unless quiet). --dry-run's listing goes to stdout. */
#ifndef GR_SYNC_H
#define GR_SYNC_H

#include <stdint.h>

#include "ctx.h"
#include "scan.h"

struct sync_opts {
	int dry_run;      /* list what would change, send nothing */
	int yes;          /* skip the size confirmation */
	int quiet;        /* no summary line */
	int stats;        /* print detailed numbers on stdout (--stats) */
	int say_ignored;  /* say what the ignore rules left out (gpurun sync) */
};

struct sync_stats {
	uint64_t files_sent, files_deleted, bytes_wire, bytes_total;
	double seconds;
	/* details (--stats) */
	uint64_t files_tar, files_delta, files_whole, files_updated, sigs_asked;
	uint64_t bytes_literal, bytes_matched, wire_out, wire_in;
	uint64_t files_hashed, bytes_hashed, files_cached, entries;
	int up_to_date;   /* nothing needed sending */
};

/* Bring [remote] path on the host up to date with the project (opens
 * ctx->conn if needed, and leaves it open). No other request may be in
 * flight on ctx->conn meanwhile: frames for other ids are dropped.
 * Returns 0 or a GR_E* code with ctx->err set:
 * GR_ECONFIG (a refused remote path), GR_ECANCEL (the user said no, or
 * the size check refused without --yes), GR_EREMOTE (some files could not
 * be written; each was reported), or the connection's errors. */
int sync_project(struct gr_ctx *ctx, const struct sync_opts *o, struct sync_stats *st);

/* The [remote] path check gpurun does before connecting (the agent checks
 * again after resolving): 0, or GR_ECONFIG with err set. */
int sync_check_remote_path(const char *path, struct gr_err *err);

#endif
