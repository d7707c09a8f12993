/* git's ignore rules, exactly, without git: nested .gitignore files,
 * .git/info/exclude, the global excludes file (core.excludesFile, else
 * $XDG_CONFIG_HOME/git/ignore or ~/.config/git/ignore), negation,
 * anchoring, directory-only patterns, **, escapes; then .gpurunignore files
 * and extra patterns layered on top. `git check-ignore` is the test oracle. */
#ifndef GR_IGNORE_H
#define GR_IGNORE_H

#include "err.h"
#include "scan.h"

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

/* Added for the scan and `sync --why`; the functions above are unchanged.
 * Strings in a struct ignore_match point into ig and live until ignore_free.
 * Built-in rules (.git/, .gpurun/) report source "(built-in)"; a path
 * that git tracks reports source ".git/index", negated 1, line 0. */

/* Like ignore_load_dir, with dirfd an open descriptor of that folder (the
 * scan's fast path; works for paths longer than PATH_MAX). Ignore files
 * are opened with O_NOFOLLOW: a symlinked .gitignore is skipped, as git
 * skips it. An unreadable one is an error (GR_EIO) naming it. */
int ignore_load_dir_at(struct ignore *ig, int dirfd, const char *dir,
		       struct gr_err *err);
/* [sync] include: gitignore-syntax patterns naming paths to send although
 * ignored; a path named (or below a folder named) is sent whatever the
 * ignore rules and [sync] exclude say. Checked before those rules. */
void ignore_set_include(struct ignore *ig, const char *const *pats, size_t n);
/* [train] persist: paths (relative; a trailing '/' is dropped) that live
 * on the host: they and all below them are never sent, whatever else. */
void ignore_set_persist(struct ignore *ig, const char *const *paths, size_t n);
/* Keep .git/ in ignore_path's answers ([sync] include_git). Off by default. */
void ignore_set_include_git(struct ignore *ig, int on);
/* 1 if relpath is or lies inside what gpurun never syncs by name: an entry
 * called ".git" at any depth (unless include_git) or the top-level
 * ".gpurun" (gpurun's local state). No rules are consulted. */
int ignore_builtin(const char *relpath, int include_git);
/* git never ignores a tracked path: 1 if .git/index lists relpath, 0 if
 * not (or there is no index). ignore_tracked_under: 1 if the index lists
 * something inside folder reldir, so the scan must look inside it even
 * when it is ignored. */
int ignore_tracked(struct ignore *ig, const char *relpath);
int ignore_tracked_under(struct ignore *ig, const char *reldir);

struct scan_opts;
struct strbuf;
/* `gpurun sync --why PATH`, like `git check-ignore -v`: appends to out one
 * line saying whether path would be synced and which rule in which file
 * decided, e.g.
 *   synced: 'data/x.csv' (no rule matches)
 *   ignored: 'build/a.o' by .gitignore:3 '*.o'
 *   synced: 'keep.o' re-included by sub/.gitignore:2 '!keep.o'
 *   ignored: 'build/x/y.c' because folder 'build/' is ignored by .gitignore:1 'build/'
 * plus "note:" lines where they help (a negation that cannot re-include a
 * path inside an ignored folder; a path that does not exist). path is
 * relative to root (or absolute inside it); a trailing '/' means a folder.
 * Returns 1 ignored, 0 synced, or a negative GR_E* code with err set. */
int ignore_explain(const char *root, const struct scan_opts *o, const char *path,
		   struct strbuf *out, struct gr_err *err);

#endif
