/* Shell completion: the candidates for a partly typed gpurun command line,
 * computed from the command, option and config-key tables and the local
 * job cache. The bash, zsh and fish scripts (completion_scripts.c) only ask
 * `gpurun __complete WORDS...` and show the answer, so they cannot drift
 * from the tables, and TAB never touches the network. */
#ifndef GR_COMPLETION_H
#define GR_COMPLETION_H

#include <stdio.h>

#include "gpurun.h"

/* The job cache the jobs code keeps under the project root: one line per
 * job, newest first, "ID<TAB>STATE<TAB>START_UNIX". */
#define GR_JOBS_CACHE ".gpurun/jobs"
/* The Slurm partitions `gpurun doctor` last found on the login node, one
 * name a line (each checked by slurm_partition_ok), for -o slurm.partition=. */
#define GR_PARTITIONS_CACHE ".gpurun/slurm-partitions"

/* 1 if s can be a Slurm partition's name to offer a shell: letters,
 * digits, '.', '_', '-', at most 64 bytes. */
static inline int slurm_partition_ok(const char *s, size_t n)
{
	if (!n || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

struct complete_src {
	const struct gr_config_key *keys; /* the config schema (config_keys()) */
	size_t nkeys;
	long long now;                    /* unix time, for "started 5 min ago" */
};

struct complete_out {
	struct strvec cands; /* "VALUE" or "VALUE<TAB>DESCRIPTION", in order */
	int nospace;         /* no space after the candidate ("remote.host=") */
	int files;           /* let the shell complete file names */
	int dirs;            /* let the shell complete directory names */
};

/* Candidates for words[n-1], the word under the cursor (possibly ""), with
 * words[0..n-2] the words typed before it after "gpurun". Candidates start
 * with what the word already holds (prefix-filtered); "--opt=" and "KEY="
 * prefixes are kept in the candidate. -C DIR and -c FILE among the words
 * choose the project whose job cache is read. out must be zeroed; the
 * caller frees it with complete_release(). */
void complete_words(const struct complete_src *src, int n, char **words,
		    struct complete_out *out);
void complete_release(struct complete_out *out);

/* The `gpurun __complete` answer: one candidate per line, then a last line
 * ":" followed by the directives (" nospace", " files", " dirs"). */
void complete_print(const struct complete_out *out, FILE *f);

/* `gpurun __complete WORDS...` (argv[0] is "__complete"); always 0. */
int complete_main(int argc, char **argv);

/* The scripts `gpurun completion SHELL` prints; NULL for another shell. */
const char *completion_script(const char *shell);

/* Walk up from dir (NULL: the current folder) to the folder holding
 * gpurun.ini, as config loading does. 0 and *root (the caller frees it),
 * or GR_ENOTFOUND with err set. */
int find_project_root(const char *dir, char **root, struct gr_err *err);

#endif
