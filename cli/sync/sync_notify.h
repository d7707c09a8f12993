/* What `gpurun sync --watch` watches (sync_notify.c): the project's
 * folders as the sync's scan sees them, through inotify where there is
 * one (compat_watch_*), else by comparing a stat scan of the tree every
 * poll_ms. It says only "something the sync would send may have
 * changed"; the sync itself finds what (its scan and stat cache), so a
 * missed detail costs nothing as long as a sync follows. cli/sync's own. */
#ifndef GR_SYNC_NOTIFY_H
#define GR_SYNC_NOTIFY_H

#include <stdint.h>

#include "err.h"
#include "ignore.h"
#include "util.h"

struct sync_notify;

/* Watch root (so's rules, borrowed: they must outlive *out), by scanning
 * if force_scan or if inotify is not to be had. The first watches are
 * placed (or the first scan made) here, before the first sync, so that
 * nothing after that sync's scan is missed. 0, or GR_EIO with err set. */
int sync_notify_new(struct sync_notify **out, const char *root, const struct scan_opts *so,
		    int force_scan, int poll_ms, struct gr_err *err);
void sync_notify_free(struct sync_notify *n);

/* inotify's descriptor to poll for reading, or -1 when scanning. */
int sync_notify_fd(const struct sync_notify *n);
/* Milliseconds until sync_notify_check wants to scan (soon_ms when a
 * burst of changes is settling, else poll_ms after the last), or -1
 * when it only waits for its descriptor. */
int sync_notify_due_ms(const struct sync_notify *n, int soon_ms);
/* Read what inotify says, or scan if a scan is due: 1 if something the
 * sync sends may have changed since the last call, else 0. Never fails:
 * a scan that fails counts as a change when its error differs from the
 * last one's (the sync then reports it). */
int sync_notify_check(struct sync_notify *n, int soon_ms);
/* Before each sync: place the watches again if folders appeared or
 * moved, the rules changed (.gitignore, .gpurunignore, .git/info/exclude,
 * .git/index) or events were lost. When inotify's watch limit is reached
 * it turns to scanning (sync_notify_notice says so). */
void sync_notify_prepare(struct sync_notify *n);
/* How it watches now, e.g. "inotify on 57 folders", "a scan every 1 s". */
void sync_notify_describe(const struct sync_notify *n, struct strbuf *sb);
/* A fallback taken since the last call, for the user (one line; hint
 * after a "; "), or NULL; the caller frees it. */
char *sync_notify_notice(struct sync_notify *n);
/* A sync's scan starts now (after sync_notify_prepare and a read of
 * what inotify queued): forget the paths said so far. */
void sync_notify_mark(struct sync_notify *n);
/* The paths events named since sync_notify_mark (files and symlinks,
 * any order, repeats; ignored ones too), or NULL when a list cannot say
 * what changed: scanning, events dropped, a folder made, moved or gone,
 * the rules or git's index changed. Valid until the next check. */
const struct strvec *sync_notify_dirty(const struct sync_notify *n);

#endif
