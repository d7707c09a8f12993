/* Host pools (issue 34): `[remote] host = box1 box2 box3`, or the name of
 * a pool from a [pools] section. Each box is reached by this same gpurun
 * run again as `gpurun --host BOX ...` (a child), so whatever one host
 * does works unchanged on every box; this module only decides which
 * boxes a command goes to, and merges what they answer:
 *
 *   status          every box asked at once (one round trip each), one
 *                   table of jobs with a HOST column, one of GPUs
 *   train           the same probe, then the box that has the GPUs free
 *                   now (where the project was synced last first), else
 *                   the one with the shortest line; `--after JOB`: JOB's
 *   logs stop pull  the box that holds the job (an id, a prefix, a name
 *   rm, status JOB  or a sweep's group); the latest job's without one
 *   exec shell      the box of the latest job
 *   forward
 *   sync prune      each box in turn
 *   doctor
 *
 * What a child prints reaches the user as it is; a box that does not
 * answer is named with its reason and the others go on. */
#ifndef GR_POOL_H
#define GR_POOL_H

#include "ctx.h"
#include "gpurun.h"

/* 1 when cmd on ctx's config goes through the pool (more than one host). */
int pool_wants(const struct gr_ctx *ctx);
/* Run the command (argv from its name on) on the pool: an exit code
 * (0-255), or a GR_E* code with ctx->err set. */
int pool_main(struct gr_ctx *ctx, int argc, char **argv);

/* The hidden command a pool's child runs to be probed: one box's job list
 * and GPU report, as the agent sent them, on stdout. */
extern const struct gr_cmd pool_probe_cmd;

#endif
