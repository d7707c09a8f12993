/* What `gpurun train` adds to a job's spec beyond the configuration
 * (job_spec_from_config): the command as an argv (train -- CMD ARGS,
 * passed as words, never re-split), the job's environment ([train] env,
 * then --env, then a sweep's variables), its name, group and the job it
 * waits for, and the local git commit it was started from; and the jobs
 * a sweep makes (train_sweep.c). */
#ifndef GR_TRAIN_SPEC_H
#define GR_TRAIN_SPEC_H

#include "config.h"
#include "err.h"
#include "util.h"

struct train_run {
	struct strvec argv;  /* train -- CMD ARGS; empty: [train] command */
	struct strvec env;   /* --env K=V, in order */
	const char *name;    /* --name (a sweep: the job's own), or NULL */
	const char *group;   /* the sweep's group, or NULL */
	const char *after;   /* "ID" or "ID:ok" (resolved --after), or NULL */
	const struct strvec *vars; /* a sweep job's NAME=VALUE, or NULL */
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
/* The two halves of train_spec_add, for a sweep (the git part read once):
 * what is the job's own (argv with tr->vars' {NAME} words replaced,
 * environment with tr->vars last, name, group, after), and the commit. */
int train_spec_add_job(const struct gr_config *cfg, const struct train_run *tr,
		       struct strvec *spec, struct gr_err *err);
void train_spec_add_git(const struct gr_config *cfg, struct strvec *spec);

/* A sweep: the jobs it makes, each a list of NAME=VALUE (in order: the
 * --sweep-file line's, then one per --sweep flag). */
#define TRAIN_SWEEP_MAX 1000
struct train_sweep {
	struct strvec *v;
	size_t n;
};
/* From --sweep NAME=V1,V2,... flags (their cartesian product) and an
 * optional --sweep-file FILE (one job a line, K=V words quoted as in
 * [train] env; blank and '#' lines skipped), multiplied when both are
 * given. No flag and no file: s->n == 0. Names must be variable names,
 * values non-empty without control characters, a name set once per job,
 * and at most TRAIN_SWEEP_MAX jobs. 0, or GR_EUSAGE with err set (s then
 * empty). s is the caller's to train_sweep_free. */
int train_sweep_build(const struct strvec *flags, const char *file, struct train_sweep *s,
		      struct gr_err *err);
void train_sweep_free(struct train_sweep *s);
/* word with each {NAME} of a NAME in vars replaced by its value; any
 * other brace (an unknown {X}, a Python format, find's {}) stays as it
 * is. Returns a new string. */
char *train_sweep_subst(const char *word, const struct strvec *vars);

/* argv as one line a shell would split back into the same words: plain
 * words as they are, others in single quotes. Returns a new string. */
char *argv_display(char *const *argv, size_t n);

#endif
