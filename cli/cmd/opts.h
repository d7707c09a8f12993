/* Command-line options from tables. The same tables generate --help and
 * the shell completions, so flags, help and completions cannot disagree. */
#ifndef GR_OPTS_H
#define GR_OPTS_H

#include "err.h"
#include "util.h"

enum gr_opt_type {
	OPT_FLAG,   /* --dry-run */
	OPT_STRING, /* --why PATH */
	OPT_INT,    /* --tail N (range min..max) */
	OPT_ENUM,   /* --device cpu|cuda (values[]) */
};

/* What a value completes to (completions/ and `gpurun help`). */
enum gr_complete {
	COMPLETE_NONE = 0,
	COMPLETE_FILE,
	COMPLETE_DIR,
	COMPLETE_HOST,
	COMPLETE_JOB,
	COMPLETE_KEY,  /* a config key "section.key" */
	COMPLETE_CMD,  /* a gpurun command name or help topic */
	COMPLETE_CHOICE, /* one of the words in the command's args: "bash|zsh|fish" */
};

struct gr_opt {
	int id;              /* returned by gr_getopt; 0 ends the table */
	const char *lng;     /* long name without dashes */
	char shrt;           /* short letter or 0 */
	enum gr_opt_type type;
	const char *argname; /* "PATH", "N" */
	const char *help;    /* one line */
	const char *const *values; /* OPT_ENUM: NULL-terminated */
	long long min, max;  /* OPT_INT */
	enum gr_complete complete;
};

struct gr_getopt {
	int argc;
	char **argv;
	int i;                /* next argv index */
	const char *cluster;  /* rest of a -abc cluster */
	int stop_at_positional; /* everything from the first positional on is positional (exec) */
	int done_opts;
	/* Out: */
	const char *arg;      /* the option's value (OPT_STRING/ENUM/INT) */
	long long num;        /* OPT_INT's value */
	struct strvec args;   /* positionals, in order */
};

/* Ids every command shares. */
enum { OPT_HELP = 1000 };

void gr_getopt_init(struct gr_getopt *st, int argc, char **argv);
/* Returns the next option's id, 0 when all arguments are consumed
 * (positionals collected in st->args), or GR_EUSAGE with err set
 * ("unknown option '--x'", "option '--tail' needs a value", ...).
 * -h/--help is always accepted and returns OPT_HELP. */
int gr_getopt(struct gr_getopt *st, const struct gr_opt *opts, struct gr_err *err);
void gr_getopt_release(struct gr_getopt *st);

/* The entry of opts that a command-line word names: "--tail", "--tail=5",
 * "-t", "-t5" (for a cluster "-ab", the option 'a'), or NULL. -h/--help is
 * not in any table and is not found here. */
const struct gr_opt *gr_opt_lookup(const struct gr_opt *opts, const char *word);

/* Global options anywhere before "--" (as git's -C and kubectl's -n
 * are, and docker's and gh's flags): split argv, a command's words from
 * its name on, into the command's words (cmd, argv[0] first, in order)
 * and those of the global options (glob: each option word, then its
 * value as a word of its own when it was not inline), for gr_getopt to
 * parse each with its own table. A word the command's table (or
 * -h/--help) names is the command's: its own option of the same name
 * wins; so is a value it takes from the next word. A word neither table
 * names stays with the command, which reports it. A cluster that mixes
 * both ("-tv") is split. From "--" on, and with passthrough from the
 * first positional on (exec's remote command: `exec ls -v` passes -v to
 * ls), every word is the command's as it is. cmd and glob are the
 * caller's to sv_clear. */
void gr_opts_split(int argc, char **argv, const struct gr_opt *cmd_opts,
		   const struct gr_opt *globals, int passthrough, struct strvec *cmd,
		   struct strvec *glob);

#endif
