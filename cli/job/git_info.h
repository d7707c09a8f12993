/* What a job was run from, for its record: the local git commit, branch,
 * whether the work tree differed from it, and a hash of the difference,
 * so a run can be tied to its code a week later. Read with git itself
 * (the oracle for what "changed" means); no git or no repository is not
 * an error, just nothing to record. */
#ifndef GR_GIT_INFO_H
#define GR_GIT_INFO_H

#include "err.h"

struct git_info {
	int have;            /* a repository with a commit was found */
	char commit[65];     /* full object name (40 hex, 64 for sha256 repos) */
	char branch[256];    /* "main"; "" when HEAD is detached */
	int dirty;           /* tracked changes or untracked files (gpurun's own
				runs/ and .gpurun/ aside) */
	char diff_hash[65];  /* BLAKE2b-256 hex of the difference; "" when clean */
};

/* Fill gi for the work tree at root. 0 (gi->have says whether there was
 * anything), or GR_EIO when git failed halfway (gi->have is 0 then). */
int git_info_read(const char *root, struct git_info *gi, struct gr_err *err);

#endif
