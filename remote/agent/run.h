/* The host's tools: where a program is, and running one to read what it
 * says. The one place the agent does either, so `gpurun doctor` (PROBE)
 * and a job agree where a tool is, and every caller reads a tool's end
 * the same way. */
#ifndef GR_RUN_H
#define GR_RUN_H

#include <stddef.h>

#include "util.h"

/* The program's full path (new string), or NULL when it is not found: a
 * regular, executable file in an absolute folder of PATH (or, PATH unset
 * or empty, /usr/local/bin:/usr/bin:/bin), then of the folders a
 * non-login PATH often lacks (CUDA's and NVIDIA's usual homes). */
char *run_which(const char *prog);

#define RUN_KEEP_DEFAULT (1u << 20) /* bytes kept of each stream */
#define RUN_TIMEOUT (-2)

/* Run argv (no shell; argv[0] searched on PATH) with stdin on /dev/null,
 * its stdout into out and its stderr into errs (NULL: read and dropped),
 * at most keep bytes of each (0: RUN_KEEP_DEFAULT), for timeout_ms. env:
 * NULL, or "NAME=value" to set and "NAME" to unset in the child. Signals
 * are default and unblocked in the child. Returns its exit code (util.h,
 * exit_code_of: its own, or 128+N for signal N; 127: it could not be run,
 * its stderr says why), RUN_TIMEOUT when it was
 * killed (SIGKILL) at the timeout, or -1 with errno when it could not be
 * started or waited for ("pipe: ..." or "fork: ..." added to errs). */
int run_capture(const char *const *argv, const char *const *env, int timeout_ms, size_t keep,
		struct strbuf *out, struct strbuf *errs);

/* More of how run_capture_how runs a program (zero: as run_capture). */
struct run_how {
	const char *cwd; /* the child's folder (NULL: ours); one it cannot
			    enter is exit 127, its stderr saying why */
	int own_group;   /* in a session (and process group) of its own; the
			    timeout's SIGKILL goes to the whole group */
	int merge;       /* stderr joins stdout, in the order written (into
			    out; errs gets only "pipe: ..." or "fork: ...") */
};
/* run_capture, run as how says (NULL: as run_capture). */
int run_capture_how(const char *const *argv, const char *const *env, int timeout_ms, size_t keep,
		    struct strbuf *out, struct strbuf *errs, const struct run_how *how);

#endif
