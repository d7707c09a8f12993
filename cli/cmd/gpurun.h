/* The command table and the context every command gets. One table
 * (commands.c) names each command, what it needs set up, its options and
 * its help; main.c dispatches from it and help.c / completion.c generate
 * their output from it (git's builtin/ + commands[]). */
#ifndef GR_GPURUN_H
#define GR_GPURUN_H

#include <stdio.h>

#include "config.h"
#include "ctx.h"
#include "err.h"
#include "opts.h"
#include "util.h"


enum gr_cmd_needs {
	CMD_CONFIG = 1,      /* gpurun.ini must exist and load */
	CMD_CONFIG_OPT = 2,  /* load gpurun.ini if there is one, else defaults */
	CMD_PASSTHROUGH = 4, /* from the first positional on, every word is an
				argument (exec's remote command), not an option */
};

/* A command returns an exit code (>= 0) it has reported itself, or a
 * negative GR_E* code with ctx->err set, which main prints (with its hint)
 * and maps through gr_exit_code(). */
typedef int (*gr_cmd_fn)(int argc, char **argv, struct gr_ctx *ctx);

struct gr_cmd {
	const char *name;
	gr_cmd_fn fn;
	unsigned needs;
	const struct gr_opt *opts;
	const char *args;     /* positional synopsis: "[JOB]", "-- CMD [ARGS...]" */
	const char *summary;  /* one line for `gpurun help` */
	const char *help;     /* paragraphs for `gpurun help CMD`; may be NULL */
	enum gr_complete complete_args; /* what positionals complete to */
};

/* Ids of gr_global_opts (options before the command name). */
enum { G_CONFIG = 1, G_CHDIR, G_SET, G_VERBOSE, G_QUIET, G_HOST, G_ACCEPT_NEW, G_VERSION, G_COLOR };

extern const struct gr_cmd gr_commands[];   /* ends with name == NULL */
extern const struct gr_opt gr_global_opts[];
const struct gr_cmd *gr_find_command(const char *name);

/* report.c: print "gpurun: MSG" and "hint: HINT" for ctx->err on stderr. */
void gr_report(const struct gr_ctx *ctx);
/* Print a usage error for the running command, with its synopsis. */
int gr_usage_error(struct gr_ctx *ctx);
/* What a command returns for sync_project's failure rc: one exit code
 * for one cause whichever command synced (sync, train, exec --sync): the
 * connection's, the configuration's and a refusal's own codes pass
 * through; any other failure of the sync itself is reported here
 * (gr_report) and becomes GR_EXIT_SYNC. */
int sync_failed(struct gr_ctx *ctx, int rc);
/* cmd_pull.c, for pull and train: pull job id's artifacts into
 * <project>/runs/<id>/ and say on stderr what came, or, when no file
 * matched, what the job wrote. One reconnect is tried. 0 or a GR_E* code
 * with ctx->err set. got: NULL, or what came (the caller releases it). */
struct art_stats;
int job_pull_artifacts(struct gr_ctx *ctx, const char *id, struct art_stats *got);

/* cmd_train.c, for train and rerun: a job just started; with detach
 * print its id and leave it, else follow its log, say how it ended and
 * pull its artifacts; [jobs] keep either way. log_id: the request id its
 * log already comes on (job_start_train's follow_id), 0: ask for it.
 * Returns the exit code (the job's) or a GR_E* code with ctx->err set. */
int train_follow(struct gr_ctx *ctx, const char *id, uint32_t log_id, const char *name, int detach,
		 int stop_int, int raw, int json);

/* help.c */
struct help_topic {
	const char *name;     /* `gpurun help NAME` */
	const char *summary;
	void (*show)(FILE *out);
};
extern const struct help_topic help_topics[]; /* ends with name == NULL */
void help_command(const struct gr_cmd *c, FILE *out);
void help_overview(FILE *out);
void help_exit_codes(FILE *out);
void help_config(FILE *out);
void help_environment(FILE *out);
/* gpurun(1) and gpurun.ini(5) in roff, from the same tables (help_man.c;
 * `gpurun __man`, `gpurun __man 5`). */
void help_man(FILE *out);
void help_man_ini(FILE *out);
/* "usage: gpurun NAME [OPTIONS] ARGS" without a newline, into sb. */
void help_usage_line(const struct gr_cmd *c, struct strbuf *sb);
/* The command or topic closest to a mistyped name, or NULL when none is
 * close enough to suggest. */
const char *help_suggest(const char *typo);

/* The commands. */
int cmd_init(int argc, char **argv, struct gr_ctx *ctx);
int cmd_config(int argc, char **argv, struct gr_ctx *ctx);
int cmd_exec(int argc, char **argv, struct gr_ctx *ctx);
int cmd_shell(int argc, char **argv, struct gr_ctx *ctx);
int cmd_forward(int argc, char **argv, struct gr_ctx *ctx);
int cmd_doctor(int argc, char **argv, struct gr_ctx *ctx);
int cmd_disconnect(int argc, char **argv, struct gr_ctx *ctx);
int cmd_sync(int argc, char **argv, struct gr_ctx *ctx);
int cmd_train(int argc, char **argv, struct gr_ctx *ctx);
int cmd_logs(int argc, char **argv, struct gr_ctx *ctx);
int cmd_rerun(int argc, char **argv, struct gr_ctx *ctx);
int cmd_diff(int argc, char **argv, struct gr_ctx *ctx);
int cmd_status(int argc, char **argv, struct gr_ctx *ctx);
int cmd_stop(int argc, char **argv, struct gr_ctx *ctx);
int cmd_pull(int argc, char **argv, struct gr_ctx *ctx);
int cmd_rm(int argc, char **argv, struct gr_ctx *ctx);
int cmd_prune(int argc, char **argv, struct gr_ctx *ctx);
int cmd_hook(int argc, char **argv, struct gr_ctx *ctx);
int cmd_completion(int argc, char **argv, struct gr_ctx *ctx);
int cmd_help(int argc, char **argv, struct gr_ctx *ctx);
/* cmd_version.c: `gpurun version`, and the line --version and -V print. */
int cmd_version(int argc, char **argv, struct gr_ctx *ctx);
extern const struct gr_opt cmd_version_opts[];
void gr_print_version(FILE *out);

extern const struct gr_opt cmd_init_opts[], cmd_config_opts[], cmd_exec_opts[],
	cmd_shell_opts[], cmd_forward_opts[],
	cmd_doctor_opts[], cmd_disconnect_opts[], cmd_sync_opts[], cmd_train_opts[], cmd_logs_opts[],
	cmd_status_opts[], cmd_stop_opts[], cmd_pull_opts[], cmd_rm_opts[], cmd_prune_opts[],
	cmd_hook_opts[],
	cmd_completion_opts[], cmd_help_opts[];
extern const struct gr_opt cmd_rerun_opts[], cmd_diff_opts[];

/* The shells' completion scripts ask `gpurun __complete ...` (completion.c). */
int complete_main(int argc, char **argv);

#endif
