/* gpurun.ini: the schema (one table of keys that also drives `gpurun init`,
 * `gpurun config`, help and completions), loading with inih, and the
 * precedence defaults < file < GPURUN_* environment < command line. */
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
	GR_KEY_RPATH,   /* a path on the remote host; ~ left for the agent */
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
};

/* The whole schema, in template order; *n gets the count. */
const struct gr_config_key *config_keys(size_t *n);

struct gr_config {
	char *file;  /* the gpurun.ini in use, or NULL when none was found */
	char *root;  /* the folder holding it (the project root); else cwd */
	struct {
		char *host;        /* ssh alias, [user@]host[:port], or "local" */
		char *path;        /* project folder on the host (remote ~ kept) */
		int transport;     /* enum gr_transport_kind */
		char *identity;    /* extra identity file, ~ expanded; may be "" */
		char *known_hosts; /* known_hosts file, ~ expanded; "" = ssh's */
		int connect_timeout; /* seconds; 0 = ssh_config's or none */
	} remote;
	struct {
		struct strvec exclude; /* extra ignore patterns, gitignore syntax */
		uint64_t warn_size;    /* ask before sending more than this */
		uint64_t delta_min;    /* files at least this big travel as deltas */
		int include_git;       /* send .git/ too */
	} sync;
	struct {
		char *command;         /* run on the host before each job; "" = none */
	} build;
	struct {
		char *command;         /* the job */
		char *gpus;            /* "all", "N" or "0,2" */
		int stop_grace;        /* seconds between SIGTERM and SIGKILL */
	} train;
	struct {
		struct strvec pull;    /* globs relative to the job folder */
		int interval;          /* seconds between pulls while a job runs; 0 = off */
	} artifacts;
	struct {
		char *pre_push;        /* smoke test run on the host by the pre-push hook */
	} hooks;
	void *origins;             /* private: where each value came from */
};

/* Find and load the configuration. file: -c FILE (may be NULL: search
 * cwd and its parents for gpurun.ini, as git finds .git). A missing file is
 * GR_ENOTFOUND with a hint to run `gpurun init`, unless allow_missing, in
 * which case defaults (and environment) are loaded and cfg->file is NULL.
 * Errors name file:line and the key. On success *out is the caller's to
 * config_free(). */
int config_load(struct gr_config **out, const char *file, int allow_missing,
		struct gr_err *err);

/* Set "section.key" from the command line (origin e.g. "--host" or "-o");
 * validated like the file. */
int config_set(struct gr_config *cfg, const char *key, const char *value,
	       const char *origin, struct gr_err *err);

/* The effective value of "section.key" as text, and where it came from
 * ("default", "gpurun.ini:12", "env GPURUN_REMOTE_HOST", "flag --host").
 * Returns GR_ENOTFOUND for an unknown key. */
int config_get(const struct gr_config *cfg, const char *key, struct strbuf *value,
	       const char **origin, struct gr_err *err);

/* Every key with value and origin: a table, or JSON when json is set. */
void config_dump(const struct gr_config *cfg, struct strbuf *out, int json);

/* Write the commented template (every key, its default, one line of help)
 * to path; refuses (GR_EEXIST) to overwrite an existing file. */
int config_write_template(const char *path, struct gr_err *err);

void config_free(struct gr_config *cfg);

#endif
