/* git's ignore rules, exactly, without git: nested .gitignore files,
 * .git/info/exclude, the global excludes file (core.excludesFile, else
 * $XDG_CONFIG_HOME/git/ignore or ~/.config/git/ignore), negation,
 * anchoring, directory-only patterns, **, escapes; then .gpurunignore files
 * and extra patterns layered on top. `git check-ignore` is the test oracle. */
#ifndef GR_IGNORE_H
#define GR_IGNORE_H

#include "err.h"

struct ignore;

/* Which rule decided, for `gpurun sync --why PATH`. */
struct ignore_match {
	const char *source;  /* ".gitignore", "sub/.gitignore", ".git/info/exclude",
				"[sync] exclude", ...; NULL if no rule matched */
	int line;            /* 1-based line in source */
	const char *pattern; /* the pattern as written */
	int negated;         /* a "!" rule: the path is NOT ignored by it */
};

int ignore_new(struct ignore **out, const char *root, const char *const *extra,
	       size_t nextra, struct gr_err *err);
/* Load DIR/.gitignore and DIR/.gpurunignore (dir relative to root, "" for
 * the root). Call before checking paths inside dir; parents first. */
int ignore_load_dir(struct ignore *ig, const char *dir, struct gr_err *err);
/* 1 if relpath is ignored, 0 if not. Does not consider parent folders
 * (the scan never descends into an ignored one); ignore_path does. */
int ignore_check(struct ignore *ig, const char *relpath, int is_dir,
		 struct ignore_match *why);
/* Full answer for one path, parents included (loads what it needs):
 * 1 ignored, 0 synced; why says which rule decided (or its parent's). */
int ignore_path(struct ignore *ig, const char *relpath, int is_dir,
		struct ignore_match *why, struct gr_err *err);
void ignore_free(struct ignore *ig);

#endif
