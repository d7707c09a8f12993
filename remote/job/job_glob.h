/* Artifact globs: shell-style patterns relative to the job folder, with
 * `**` for any number of folders. Standalone (no agent state), so the
 * unit tests compile it in directly. */
#ifndef GR_JOB_GLOB_H
#define GR_JOB_GLOB_H

#include "util.h"

/* 1 if path ('/'-separated, relative) matches pat. Each segment is an
 * fnmatch(3) pattern (a leading '.' must be matched explicitly); a `**`
 * segment matches zero or more whole segments. */
int job_glob_match(const char *pat, const char *path);

/* 1 if path is a folder that pat selects as a whole or might select
 * something beneath (so a walk must descend into it). */
int job_glob_may_descend(const char *pat, const char *dir);

/* Steps the matcher has taken so far (for tests: each call takes at most
 * (pattern segments + 1) x (path segments + 1)). */
extern unsigned long job_glob_steps;

/* 1 if entry is a usable [train] persist path: relative, no empty, '.'
 * or '..' component, not inside .gpurun/ (a trailing '/' is allowed). */
int job_persist_ok(const char *entry);

/* 1 if rel (a path in the job's folder, no trailing '/') is one of the
 * persist entries. */
int job_persist_is(const struct strvec *persist, const char *rel);

#endif
