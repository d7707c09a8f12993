/* Artifacts on the client, cli/pull's face: ask the agent for a job's
 * files (only those new or changed since the last pull travel), and
 * extract its tar.zst into runs/<job>/ safely (pull_extract.h), each
 * file renamed into place only once complete; a file cut short (1 MiB
 * or more) keeps its part, and the next pull fetches only the rest
 * (PROTOCOL.md, ART_PULL: resume). Memory stays bounded whatever the
 * sizes: frames are written to the extractor as they come, and the
 * connection reads no further ahead than a few MiB (conn.c). */
#ifndef GR_PULL_H
#define GR_PULL_H

#include <stdint.h>
#include <sys/types.h>

#include "ctx.h"

struct art_stats {
	uint32_t matched;   /* files the patterns select on the host */
	uint32_t sent;      /* of those, new or changed: sent */
	uint32_t extracted; /* files written here */
	uint32_t deltas;    /* of those, how many came as deltas */
	uint64_t bytes;     /* their size */
	/* When nothing matched: what the job wrote (written files in all,
	 * the first of them in names, "PATH\tSIZE", as the host said). */
	uint32_t written;
	struct strvec names;
	/* Files this pull sent a signature for that came whole: "PATH\tWHY". */
	struct strvec whole;
};
void art_stats_release(struct art_stats *st);

/* A pull in flight on a connection, so train can pull while it follows a
 * log on the same connection. The extraction runs in a child process fed
 * through a pipe. */
struct art_pull;
/* Send the request (patterns relative to the job's folder, a leading
 * $GPURUN_JOB_DIR/ allowed; dest created if missing). */
int art_pull_start(struct gr_conn *c, const char *project, const char *id,
		   const struct strvec *patterns, const char *dest, int min_free_pct,
		   struct art_pull **out, struct gr_err *err);
uint32_t art_pull_id(const struct art_pull *p);
/* Feed a frame addressed to art_pull_id: 1 when the request has ended
 * (call art_pull_finish), 0 for more. */
int art_pull_frame(struct art_pull *p, const struct gr_frame *f);
/* Wait for the extraction, free p. 0 or a GR_E* code with err set. */
int art_pull_finish(struct art_pull *p, struct art_stats *st, struct gr_err *err);
/* The connection is gone: stop the extraction, free p. */
void art_pull_abort(struct art_pull *p);

/* The whole pull, blocking. */
int art_pull(struct gr_conn *c, const char *project, const char *id,
	     const struct strvec *patterns, const char *dest, int min_free_pct,
	     struct art_stats *st, struct gr_err *err);

#endif
