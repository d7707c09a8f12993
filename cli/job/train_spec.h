/* What `gpurun train` adds to a job's spec beyond the configuration
 * (job_spec_from_config): the command as an argv (train -- CMD ARGS,
 * passed as words, never re-split), the job's environment ([train] env,
 * then --env), its name, and the local git commit it was started from. */
#ifndef GR_TRAIN_SPEC_H
#define GR_TRAIN_SPEC_H

#include "config.h"
#include "err.h"
#include "util.h"

struct train_run {
	struct strvec argv;  /* train -- CMD ARGS; empty: [train] command */
	struct strvec env;   /* --env K=V, in order */
	const char *name;    /* --name, or NULL */
};

/* Check what the command line gave (names, K=V words): 0, or GR_EUSAGE
 * with err set. */
int train_run_check(const struct train_run *tr, struct gr_err *err);

/* Add to spec (pairs): the argv and its display as the command (in place
 * of [train] command), the environment, the name, and the git commit,
 * branch, dirtiness and diff hash of cfg->root (nothing when it is not a
 * git work tree). 0, or a GR_E* code with err set ([train] env that does
 * not parse). */
int train_spec_add(const struct gr_config *cfg, const struct train_run *tr, struct strvec *spec,
		   struct gr_err *err);

/* argv as one line a shell would split back into the same words: plain
 * words as they are, others in single quotes. Returns a new string. */
char *argv_display(char *const *argv, size_t n);

#endif
