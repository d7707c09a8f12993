/* The sync progress bar: bytes done of the total, rate and ETA, redrawn on
 * stderr at most ten times a second, and only when the caller allows it
 * (ctx->progress: a terminal, not CI, no NO_COLOR). Nothing otherwise. */
#ifndef GR_SYNC_PROGRESS_H
#define GR_SYNC_PROGRESS_H

#include <stdint.h>

struct sync_progress {
	int enabled;
	uint64_t total, done;
	uint64_t start_ns, last_ns;
	int drawn;
};

void sync_progress_start(struct sync_progress *p, int enabled, uint64_t total);
void sync_progress_add(struct sync_progress *p, uint64_t bytes);
/* Erase the bar (before printing anything else, and at the end). */
void sync_progress_clear(struct sync_progress *p);

#endif
