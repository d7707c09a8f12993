/* gpurun diff's engine: two jobs' snapshots as the host lists them
 * (JOB_SNAP_LIST: path, type, mode, size, content hash, and each job's
 * config lines), the differing files' contents fetched within limits
 * (JOB_SNAP_READ), written into two trees of a temporary folder and
 * compared by git itself (git diff of the two trees in a scratch
 * repository), so the output is git's unified diff. Everything in a
 * listing comes from the host: each path is checked (relative, no '.' or
 * '..' component, no NUL, its folder listed as a folder) before it names
 * a local file, and files are written without following a symlink. */
#ifndef GR_JOB_SNAPDIFF_H
#define GR_JOB_SNAPDIFF_H

#include <stdint.h>
#include <stdio.h>

#include "ctx.h"
#include "err.h"
#include "util.h"

/* At most this many bytes of contents are fetched for one diff; files
 * beyond it, or over JOB_SNAP_FILE_MAX each, are named, not shown. */
#define JOB_DIFF_TOTAL_MAX (32u << 20)
/* The largest listing accepted (both jobs' entries). */
#define JOB_DIFF_LIST_MAX (256u << 20)

struct snap_ent {
	char *path;
	char *hash;    /* content hash (or the host's file identity); "" for a folder */
	uint64_t size;
	uint32_t mode; /* permission bits */
	char type;     /* 'd', 'f' or 'l' */
};

struct snap_side {
	char *id;
	struct strvec conf;   /* "key = value", "env NAME" */
	struct snap_ent *v;   /* sorted by path */
	size_t n;
};

/* Parse a JOB_SNAP_LIST stream (p, len) into a and b (the caller's to
 * free with job_snap_side_free, whatever the result). GR_EPROTO with err
 * naming the host when anything is malformed: a bad id, path, type,
 * mode or hash, a path twice, or one whose folder is not listed. */
int job_snap_parse(const void *p, size_t len, struct snap_side *a, struct snap_side *b,
		   struct gr_err *err);
void job_snap_side_free(struct snap_side *s);

/* Ask the host for both listings (ja, jb: ids, names or prefixes). */
int job_snap_list(struct gr_conn *c, const char *project, const char *ja, const char *jb,
		  struct snap_side *a, struct snap_side *b, struct gr_err *err);

/* Print to out (stdout: git writes there too) how b differs from a: the
 * config lines first, then git's diff of the code (stat: git's --stat),
 * then the files not shown and why. *differ: 1 when anything differs. */
int job_snap_diff(struct gr_conn *c, const char *project, const struct snap_side *a,
		  const struct snap_side *b, int stat, int *differ, struct gr_err *err);

#endif
