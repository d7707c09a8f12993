/* Attached to a job: its log streamed from a byte offset as it is written;
 * when the connection drops, reconnect with backoff and continue at the
 * exact byte (no gap, no line twice); Ctrl-C asks "stop or detach?" on a
 * terminal, detaches without one, stops with --stop-on-interrupt, and a
 * second Ctrl-C leaves at once; artifacts pulled every [artifacts]
 * interval meanwhile. Shared by `gpurun train` and `gpurun logs`. */
#ifndef GR_JOB_ATTACH_H
#define GR_JOB_ATTACH_H

#include <stdint.h>

#include "ctx.h"
#include "job_proto.h"

enum attach_interrupt {
	ATTACH_INT_LEAVE, /* Ctrl-C stops following (logs -f) */
	ATTACH_INT_ASK,   /* Ctrl-C asks stop or detach (train) */
};

struct attach_opts {
	const char *id;           /* the job (a full id) */
	uint32_t log_id;          /* the log is on its way already under this
				     request id (job_start_intr's follow_id):
				     from byte 0, following; 0: ask for it */
	uint64_t offset;          /* first byte wanted (ignored with tail) */
	uint32_t tail;            /* start at the last N lines (0: at offset) */
	int follow;               /* keep going until the job ends */
	int out_fd;               /* where the log goes */
	int filter;               /* out_fd is a terminal: only safe bytes (term_filter.h) */
	enum attach_interrupt on_interrupt;
	int stop_on_interrupt;    /* Ctrl-C stops the job without asking */
	const struct strvec *pull; /* artifact globs; NULL: no pulls */
	int pull_interval;        /* seconds between pulls; 0: none */
	const char *pull_dest;    /* runs/<job> */
	int notify_end;           /* the job had not ended when following began:
				     its end is told as [notify] local says
				     (job_notify_local.h) */
	int json;                 /* --json: the log as `log` events on stdout
				     (out_fd and filter unused); following, the
				     job's `queued` and `started` too, and each
				     pull's `pulled` (job_event_*) */
};

struct attach_result {
	struct job_rec rec;       /* the last record seen (final if ended) */
	int ended;                /* the job ended and every byte was shown */
	int detached;             /* left it running (Ctrl-C/d, no terminal, SIGHUP) */
	int interrupted;          /* a second Ctrl-C: left at once */
	int stop_asked;           /* Ctrl-C asked the job to stop */
	uint64_t offset;          /* bytes of the log shown so far */
};

/* Returns 0 (see res), or a GR_E* code with ctx->err set. res->rec is the
 * caller's to job_rec_clear. */
int job_attach(struct gr_ctx *ctx, const struct attach_opts *o, struct attach_result *res);

/* "gpurun: detached from job ID (NAME); it keeps running" + how to
 * reattach (by name when it has one; name may be NULL). */
void job_print_detached(const struct gr_ctx *ctx, const char *id, const char *name);

/* The NDJSON events of `train --json` and `logs -f --json` on stdout
 * (job_events.c; the schema is the README's, "Output, colour and
 * scripting"): each writes one line, and returns 0, or -1 with errno when
 * stdout is gone. synced: what a sync sent; queued: where a job waits
 * (its place in the box's line, why, which job it runs after); started:
 * it left the line (its id, name, host, GPUs, state); pulled: what a
 * pull brought; ended: how it ended; detached: we stopped following it
 * and it runs on. */
struct sync_stats;
struct art_stats;
int job_event_synced(const struct sync_stats *st);
int job_event_queued(const struct job_rec *r);
int job_event_started(const struct job_rec *r, const char *host);
int job_event_pulled(const char *id, const struct art_stats *st);
int job_event_ended(const struct job_rec *r);
int job_event_detached(const char *id);

#endif
