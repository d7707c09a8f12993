/* Inside cli/pool/: the children a pool runs (gpurun --host BOX ...) and
 * the probe that asks every box at once (pool_probe.c); the commands'
 * routing is pool.c's. */
#ifndef GR_POOL_INT_H
#define GR_POOL_INT_H

#include <time.h>

#include "job.h"
#include "pool.h"

struct box {
	const char *host;
	pid_t pid;
	int out, err;              /* the child's stdout and stderr, or -1 */
	struct strbuf o, e;
	int status;                /* its wait status */
	char *error;               /* it did not answer: why; else NULL */
	struct job_rec *recs;      /* the project's jobs there, newest first */
	size_t n;
	uint64_t disk;
	struct job_gpus g;
	time_t synced;             /* when this project was last synced there
				      (the local state's mtime); 0: never */
};

/* Become `gpurun --host HOST ARGV...` (the command runs as if the user had
 * named the box); returns only on failure, a GR_E* code with ctx->err set. */
int pool_exec_on(struct gr_ctx *ctx, const char *host, int argc, char **argv);
/* Run `gpurun --host HOST ARGV...` and wait for it: its exit status, or -1
 * when Ctrl-C ended it. */
int pool_run_on(struct gr_ctx *ctx, const char *host, int argc, char **argv);
/* Ask every box of ctx's pool at once (b: nb zeroed boxes); each answers
 * or says why not (b[i].error). */
void pool_probe_all(struct gr_ctx *ctx, struct box *b, size_t nb);
void pool_boxes_free(struct box *b, size_t nb);
/* Say which boxes did not answer; 0, or GR_ESSH with ctx->err set when
 * none did. */
int pool_probe_report(struct gr_ctx *ctx, const struct box *b, size_t nb);

#endif
