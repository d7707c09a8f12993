/* gpurun.ini: the schema (one table of keys that also drives `gpurun init`,
 * `gpurun config`, help and completions), loading with inih, and the
 * precedence defaults < user config (~/.config/gpurun/config) < the
 * project's gpurun.ini < GPURUN_* environment < command line. */
#ifndef GR_CONFIG_H
#define GR_CONFIG_H

#include <stdint.h>

#include "err.h"
#include "util.h"

enum gr_transport_kind {
	GR_TRANSPORT_LIBSSH2 = 0,
	GR_TRANSPORT_OPENSSH = 1,
	GR_TRANSPORT_LOCAL = 2,
};

enum gr_key_type {
	GR_KEY_STRING,  /* free text */
	GR_KEY_PATH,    /* text; a leading ~ means $HOME (expanded on load) */
	GR_KEY_RPATH,   /* a path on the remote host; ~ left for the agent; "" only
			   when that is the default */
	GR_KEY_ENUM,    /* one of values[] */
	GR_KEY_BOOL,    /* true/false, yes/no, on/off, 1/0 */
	GR_KEY_INT,     /* integer in [min, max] */
	GR_KEY_SIZE,    /* bytes: 512, 10k, 1.5M, 2G */
	GR_KEY_LIST,    /* whitespace- or comma-separated words; repeatable */
};

struct gr_config_key {
	const char *section;    /* "remote" */
	const char *name;       /* "host" */
	enum gr_key_type type;
	const char *def;        /* default, as text ("" = unset) */
	const char *const *values; /* GR_KEY_ENUM: NULL-terminated */
	long long min, max;     /* GR_KEY_INT */
	const char *help;       /* one line, for the template and `gpurun config` */
	const char *example;    /* written (commented out) by `gpurun init` when def is "" */
	/* Extra validation after the type's own: NULL when value is fine, else
	 * why not ("must not start with '-'"). May leave a normalised value in
	 * norm (e.g. "0, 2" -> "0,2"); norm is empty otherwise. */
	const char *(*check)(const char *value, struct strbuf *norm);
	/* Names this project's own things (its folder on the host): refused
	 * in the user config, where every project would share it. */
	int project_only;
};

/* [remote] host names at most this many hosts (a list or a pool). */
#define GR_HOSTS_MAX 64

/* The whole schema, in template order; *n gets the count. */
const struct gr_config_key *config_keys(size_t *n);

/* The GPURUN_* variables gpurun reads besides GPURUN_<SECTION>_<KEY>
 * (help environment lists them; any other GPURUN_* that looks like one
 * of these or like a key gets a warning). */
struct gr_env_var {
	const char *name;   /* "GPURUN_TRACE" */
	const char *value;  /* what to set it to, for help ("1"), or NULL */
	const char *help;   /* one or two lines ('\n' between them) */
	int host;           /* read by the agent on the GPU host */
};
const struct gr_env_var *config_env_vars(size_t *n);

/* [train] env: NAME=VALUE words, separated by blanks, quoted as in a
 * shell ('...', "..." with \" \\ \$ \`, \x), nothing expanded. Each word
 * is appended to out (may be NULL: only check). 0, or -1 with why set. */
int config_env_parse(const char *s, struct strvec *out, struct strbuf *why);
/* One NAME=VALUE (--env): a variable name, no control characters. */
int config_env_word_ok(const char *kv, struct strbuf *why);
/* A duration: units (90s, 30m, 4h, 2d, 1h30m) or H:MM:SS / M:SS, to
 * seconds. "" is 0. 0, or -1 with why set (may be NULL). */
int config_duration(const char *v, uint64_t *secs, const char **why);
/* [remote] persist: "0" (or empty) is 0, else a duration up to 7 days. */
int config_linger(const char *v, uint64_t *secs, const char **why);

struct gr_config {
	char *file;  /* the gpurun.ini in use, or NULL when none was found */
	char *user_file; /* the user config loaded (absolute), or NULL when none */
	char *root;  /* the folder holding it (the project root); else cwd */
	struct {
		char *host;        /* ssh alias, [user@]host[:port], or "local": the
				      first of hosts (NULL when none is set) */
		/* [remote] host as a list: "a b c" inline, or the name of a
		 * [pools] entry expanded. NULL-terminated; nhosts >= 1 when
		 * host is set, 0 when not; each validated like a single host,
		 * no duplicates, at most GR_HOSTS_MAX. */
		char **hosts;
		size_t nhosts;
		char *pool;        /* the [pools] name host gave, else "" (inline or unset) */
		char *path;        /* project folder on the host (remote ~ kept) */
		char *jobs_dir;    /* host folder for job folders (remote ~ kept); ""
				      = the agent's ${XDG_CACHE_HOME:-~/.cache}/gpurun/jobs */
		int transport;     /* enum gr_transport_kind */
		char *identity;    /* extra identity file, ~ expanded; may be "" */
		char *known_hosts; /* known_hosts file, ~ expanded; "" = ssh's */
		int connect_timeout; /* seconds; 0 = ssh_config's or none */
		uint64_t persist;    /* seconds a connection holder lingers; 0 = none */
	} remote;
	struct {
		struct strvec exclude; /* extra ignore patterns, gitignore syntax */
		uint64_t warn_size;    /* ask before sending more than this */
		uint64_t delta_min;    /* files at least this big travel as deltas */
		int include_git;       /* send .git/ too */
		int preserve_perms;    /* keep group/other mode bits on the host */
		struct strvec include; /* sent although ignored, gitignore syntax */
	} sync;
	struct {
		char *command;         /* prepares the host, in the project folder; "" = none */
		struct strvec inputs;  /* files whose content reruns it */
	} setup;
	struct {
		char *command;         /* run in the job's folder before the job; "" = none */
	} build;
	struct {
		char *command;         /* the job */
		char *env;             /* [train] env: config_env_parse's input */
		char *shell;           /* "sh" or "login" */
		char *output;          /* "pty" or "pipe": the steps' stdout and stderr */
		struct strvec persist; /* paths shared by every job, kept in the project folder */
		char *gpus;            /* "all", "N" or "0,2" */
		int stop_grace;        /* seconds between SIGTERM and SIGKILL */
		uint64_t time_limit;   /* seconds the command may run; 0 = no limit */
		int retries;           /* runs again after a failure, at most */
	} train;
	struct {
		char *command;         /* run on the host when a job ends; "" = none */
		char *local;           /* "auto", "bell", "desktop" or "none" */
	} notify;
	struct {
		struct strvec pull;    /* globs relative to the job's folder */
		int interval;          /* seconds between pulls while a job runs; 0 = off */
		int min_free;          /* percent of the local filesystem a pull leaves free */
	} artifacts;
	struct {
		int keep;              /* ended jobs kept after each train; 0 = all */
	} jobs;
	struct {
		char *image;           /* "" = jobs run on the host */
		char *runtime;         /* "auto", "podman" or "docker" */
		struct strvec options; /* words, quotes removed (config_split_words) */
		struct strvec mounts;  /* SRC[:DST[:ro]] */
		char *user;            /* "" = the caller's uid:gid on the host */
	} container;
	struct {
		char *pre_push;        /* smoke test run on the host by the pre-push hook */
	} hooks;
	struct strvec warnings;    /* for the user, not fatal: GPURUN_TRAIN_COMAND is
				      no variable gpurun reads (did you mean ...?) */
	/* [remote] scheduler = slurm: the host is a cluster's login node. */
	int slurm_on;
	struct {
		char *partition, *account, *qos, *time, *mem, *constraint, *gpu_type;
		int nodes, ntasks_per_node, cpus_per_task;
		char *gpu_flag;        /* "gres" or "gpus" */
		struct strvec options; /* words, quotes removed (config_split_words) */
		char *build_on;        /* "login" or "compute" */
		int signal_before;     /* seconds; 0 = none */
		int requeue;
		int resubmit;          /* submit a job at its time limit again */
		int max_resubmits;     /* at most this many times */
	} slurm;
	void *origins;             /* private: where each value came from */
};

/* Find and load the configuration. First the user config:
 * $XDG_CONFIG_HOME/gpurun/config (XDG_CONFIG_HOME only when absolute),
 * else $HOME/.config/gpurun/config; the same sections and keys as
 * gpurun.ini (less the project_only ones) plus [pools]; origins read
 * "~/.config/gpurun/config:3". Missing is fine; unreadable or broken is
 * GR_ECONFIG naming it. Then the project's file. file: -c FILE (may be
 * NULL: search cwd and its parents for gpurun.ini, as git finds .git). No gpurun.ini
 * found is GR_ECONFIG ("no gpurun.ini in '<cwd>' or any parent folder",
 * hint: run 'gpurun init'), unless allow_missing, in which case defaults
 * (and environment) are loaded and cfg->file is NULL. A -c FILE that does
 * not exist is always an error.
 *
 * The file: "[section]" headers and "key = value" lines; comments are
 * lines starting with '#' or ';', and, as in git config, a '#' or ';'
 * after a blank in a value starts one (inside '...' or "..." it is the
 * value's); values run to the end of the line, no continuation lines
 * (leading whitespace is ignored). List keys (and [remote] host) are
 * words as [train] env takes them: blanks or commas between, '...',
 * "..." and \ as in a shell. A key may appear once, except list keys,
 * whose lines add up ("exclude =" empties a list). Unknown sections and keys, bad values and
 * malformed lines are GR_ECONFIG errors "FILE:LINE: ...".
 *
 * Then GPURUN_<SECTION>_<KEY> environment variables (empty ones are
 * ignored; a list given there replaces the file's); a GPURUN_* variable
 * gpurun does not read but that looks like one it does is a warning in
 * cfg->warnings (typos in the file and -o are errors, but the
 * environment is shared with everything else). On success *out is the
 * caller's to config_free(). */
int config_load(struct gr_config **out, const char *file, int allow_missing,
		struct gr_err *err);

/* [pools] (either file): "NAME = host host ...", a NAME that [remote]
 * host may give alone to mean those hosts. A pool lists hosts, never
 * another pool; an empty one is refused; the project's NAME replaces
 * the user config's. With scheduler = slurm, host must be one host.
 *
 * Set "section.key" from the command line (origin e.g. "--host" or "-o");
 * validated like the file. Replaces a file or environment value; a list
 * set twice on the command line adds up, anything else: the last wins.
 * Errors are GR_EUSAGE (a bad command line) and name the flag. */
int config_set(struct gr_config *cfg, const char *key, const char *value,
	       const char *origin, struct gr_err *err);

/* The effective value of "section.key" as text, and where it came from
 * ("default", "gpurun.ini:12", "env GPURUN_REMOTE_HOST", "-o", "--host").
 * A bare key name that is unique ("host") is accepted too. Lists come
 * back space-separated, booleans as true/false, paths with ~ expanded.
 * Returns GR_ENOTFOUND for an unknown key (with a hint when one is close). */
int config_get(const struct gr_config *cfg, const char *key, struct strbuf *value,
	       const char **origin, struct gr_err *err);

/* Every key with value and origin: an aligned table, or JSON when json is
 * set ({"file":..., "root":..., "keys": {"remote.host": {"value": ...,
 * "origin": ...}, ...}}; lists as arrays, numbers and booleans typed). */
void config_dump(const struct gr_config *cfg, struct strbuf *out, int json);

/* Write the commented template (every key, its default, one line of help)
 * to path, generated from config_keys(); remote.path's default names the
 * folder path is in. Written to a temporary file and linked into place,
 * so it never overwrites: an existing path is GR_EEXIST. */
int config_write_template(const char *path, struct gr_err *err);

void config_free(struct gr_config *cfg);

/* Split v into words as a shell would, without expanding anything:
 * blanks separate words, '...' and "..." group them (in "...", \" and \\
 * stand for themselves), \ quotes the next character. Words go to out
 * (may be NULL: only check). Returns NULL, or why v cannot be split. */
const char *config_split_words(const char *v, struct strvec *out);

/* Length of a leading "$GPURUN_JOB_DIR/" (or "${GPURUN_JOB_DIR}/") in an
 * [artifacts] pull glob, 0 if none: such a glob names the same file
 * relative to the job's folder. */
size_t config_job_dir_prefix(const char *glob);

#endif
