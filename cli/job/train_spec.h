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
	struct strvec env;   /* --env and --env-file as NAME=VALUE, in order
				(train_env_arg, train_env_file): secrets */
	const char *name;    /* --name (a sweep: the job's own), or NULL */
	const char *group;   /* the sweep's group, or NULL */
	const char *after;   /* "ID" or "ID:ok" (resolved --after), or NULL */
	const struct strvec *vars; /* a sweep job's NAME=VALUE, or NULL */
};

/* Check what the command line gave (the name, the command): 0, or
 * GR_EUSAGE with err set. (--env words are checked as they come.) */
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

/* Secrets. A job's environment ([train] env, --env NAME=VALUE, --env
 * NAME, --env-file) may hold API tokens and keys, so every value of it,
 * inline ones included (one rule is easier to trust than two), travels
 * only in the job's spec: JOB_START's payload over the channel, never the
 * bootstrap command (argv on the host: every account's ps sees it), and
 * the host keeps it in the job's `spec` file (0600, in a 0700 folder);
 * the record, `status` (table, JOB, --json), -v and traces show none of
 * it; the job's processes get them in their environment. A value given
 * inline is on this machine's command line (ps) and a [train] env in
 * gpurun.ini is synced with the project: --env NAME and --env-file are
 * the ways to keep one off both.
 *
 * --env WORD onto env: NAME=VALUE as given (config_env_word_ok), or NAME
 * alone: NAME's value in this environment (as docker run -e NAME), any
 * bytes. 0, or GR_EUSAGE with err set (a bad word, or NAME not set here:
 * the message names it). */
int train_env_arg(const char *word, struct strvec *env, struct gr_err *err);
/* --env-file FILE onto env, in the file's order (later wins): dotenv
 * lines, read here and never sent as a file: NAME=VALUE, blank lines
 * and # comments, an optional "export " first, VALUE unquoted (to the
 * end of the line, less a " #" comment and blanks around), 'single
 * quoted' (as it is) or "double quoted" (\n \r \t \\ \" \' \$
 * escapes), quoted ones over several lines too; no ${VAR} expansion; a
 * NAME alone takes its value from here (docker's --env-file). At most
 * 1 MiB. 0, or GR_EUSAGE with err set to "FILE:LINE: why" for a bad line. */
int train_env_file(const char *path, struct strvec *env, struct gr_err *err);
/* train_env_file's parser, on text already read; file names it in errors. */
int train_env_parse(const char *file, const char *text, size_t len, struct strvec *env,
		    struct gr_err *err);

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
