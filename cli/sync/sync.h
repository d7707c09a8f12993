/* gpurun sync as a library call, so train and the pre-push hook sync the
 * same way the command does. Owned by the sync engine; cli/sync's face.
 *
 * sync_project never prints nor reads stdin itself: what it has to tell
 * or ask the user (warnings such as a file changed on the host since the
 * last sync being overwritten, the size question, --dry-run's listing,
 * the summary) goes through the command's struct sync_show. Only the
 * progress bar (ctx->progress, cli/term) draws on its own. */
#ifndef GR_SYNC_H
#define GR_SYNC_H

#include <signal.h>
#include <stdint.h>

#include "ctx.h"
#include "ignore.h"
#include "sync_plan.h"
#include "sync_index.h"

struct sync_opts;
struct sync_stats;
struct sync_plan;
struct sm_list;
struct sync_incr;

/* How a sync talks to the user while it runs. sync_show_default
 * (sync_show.c) is what gpurun shows, arg being the command's ctx. */
struct sync_show {
	/* A notice, one line without "gpurun: " (a file changed on the
	 * host, a warning, a file that could not be synced). */
	void (*say)(void *arg, const char *msg);
	/* The plan sends more than limit ([sync] warn_size) and o->yes is
	 * unset: 0 to send it anyway, or GR_ECANCEL with err set. */
	int (*too_big)(void *arg, const struct sync_plan *p, const struct sm_list *local,
		       uint64_t limit, struct gr_err *err);
	/* --dry-run's listing of what would change. */
	void (*listing)(void *arg, const char *text, size_t len);
	/* The sync is done: its summary (ig: what the ignore rules left
	 * out, when o->say_ignored; else NULL). */
	void (*done)(void *arg, const struct sync_opts *o, const struct sync_stats *st,
		     const struct scan_ignored *ig);
};

/* The summary line, the size question on a terminal (refused elsewhere),
 * the listing on stdout, notices as "gpurun: MSG" on stderr. */
extern const struct sync_show sync_show_default;

struct sync_opts {
	int dry_run;      /* list what would change, send nothing */
	int yes;          /* skip the size confirmation */
	int quiet;        /* no summary line */
	int stats;        /* print detailed numbers on stdout (--stats) */
	int say_ignored;  /* say what the ignore rules left out (gpurun sync) */
	const struct sync_show *show; /* NULL: sync_show_default */
	void *show_arg;   /* its arg (for the default: the ctx; NULL: this ctx) */
	/* Walk the tree even if a watcher runs (sync_ask.h): the watcher's
	 * own syncs. Otherwise a sync that is not a dry run first asks the
	 * project's watcher, and walks only when it cannot answer. */
	int walk;
	/* The project's sync lock is held for this sync by the gpurun that
	 * asked for it and waits on it (a watcher's flush): not taken here. */
	int lock_held;
	/* The watcher's: what changed since its last sync, so this one need
	 * not walk the tree (sync_incr.h; NULL: walk). Updated after. */
	struct sync_incr *incr;
};

struct sync_stats {
	uint64_t files_sent, files_deleted, bytes_wire, bytes_total;
	double seconds;
	/* details (--stats) */
	uint64_t files_tar, files_delta, files_whole, files_updated, sigs_asked;
	uint64_t bytes_literal, bytes_matched, wire_out, wire_in;
	uint64_t files_hashed, bytes_hashed, files_cached, entries;
	uint64_t bytes_reused; /* of bytes_hashed: in blocks whose fingerprint held (sync_fp.h) */
	int up_to_date;   /* nothing needed sending */
};

/* Bring [remote] path on the host up to date with the project (opens
 * ctx->conn if needed, and leaves it open; not when a watcher answered
 * for it: ctx->conn is then as it was). No other request may be in
 * flight on ctx->conn meanwhile: frames for other ids are dropped.
 * Returns 0 or a GR_E* code with ctx->err set:
 * GR_ECONFIG (a refused remote path), GR_ECANCEL (the user said no, or
 * the size check refused without --yes), GR_EREMOTE (some files could not
 * be written; each was reported), or the connection's errors. */
int sync_project(struct gr_ctx *ctx, const struct sync_opts *o, struct sync_stats *st);

/* The [remote] path check gpurun does before connecting (the agent checks
 * again after resolving): 0, or GR_ECONFIG with err set. */
int sync_check_remote_path(const char *path, struct gr_err *err);

/* One sync at a time per project (.gpurun/sync.lock, sync_lock.c): take
 * it before scanning, hold it until what was synced is used (train: until
 * its job has started). Waits up to wait_ms for another gpurun's sync,
 * telling show (NULL: nobody) once that it waits. Nested takes in one
 * process count and do not wait. 0, or GR_ECONFLICT (still held after
 * wait_ms) or GR_EIO with err set. The lock goes with the process too. */
int sync_lock_take(const char *root, int wait_ms, const struct sync_show *show, void *arg,
		   struct gr_err *err);
void sync_lock_release(void);

/* gpurun sync --watch (sync_watch.c): sync, then watch the project tree
 * and sync each burst of edits on the same connection; meanwhile answer
 * the project's other syncs (sync_ask.h). */
struct sync_watch_opts {
	struct sync_opts sync;   /* each sync's (the first one's say_ignored only) */
	/* A change of the watch's state, one line without "gpurun: ":
	 * watching, connection lost, reconnected, a fallback taken. */
	void (*state)(void *arg, const char *msg);
	/* A sync failed and the watch goes on: report ctx->err. */
	void (*failed)(void *arg, int rc);
	void *arg;
	/* Readable: stop (the command's signal pipe). */
	int stop_fd;
	/* 1 while a sync is in flight, 2 while connecting again after a
	 * loss, else 0: for the signal handler, which then ends the process
	 * at once (the host keeps each file old or new, as after any
	 * interrupted sync). */
	volatile sig_atomic_t *busy;
	int force_scan;          /* scan every poll_ms even where inotify is */
	int quiet_ms, max_ms;    /* debounce: quiet this long, or at most max_ms after the
				    first edit (0: 100 and 1000) */
	int poll_ms;             /* the scan's period without inotify (0: 1000) */
};

/* Returns after stop_fd became readable, *stopped set: 0 if the last
 * sync succeeded, else the last failure's GR_E* code (ctx->err set,
 * already told through failed or state). Or, *stopped 0, with a GR_E*
 * code and ctx->err set (not yet told), for what retrying cannot mend:
 * configuration, host key, authentication, an unsupported host, a size
 * question refused at the first sync. A lost connection is opened again
 * (1 s, 2 s, ... 30 s apart), then a full sync. */
int sync_watch(struct gr_ctx *ctx, const struct sync_watch_opts *o, int *stopped);

#endif
