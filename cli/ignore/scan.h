/* Walk the project tree the way git sees it: every entry that git's
 * ignore rules (plus .gpurunignore and [sync] exclude) do not ignore,
 * sorted by path bytes. Owned by the ignore engine (ignore.c, scan.c). */
#ifndef GR_SCAN_H
#define GR_SCAN_H

#include <stdint.h>
#include <sys/types.h>

#include "err.h"
#include "util.h"

enum scan_type { SCAN_FILE = 1, SCAN_DIR, SCAN_SYMLINK };

struct scan_entry {
	char *path;        /* relative to the root, '/'-separated, no leading "./" */
	enum scan_type type;
	uint32_t mode;     /* st_mode permission bits (0777) */
	uint64_t size;
	int64_t mtime_ns;
	uint64_t ino, dev;
	char *link;        /* SCAN_SYMLINK: the target as stored (never followed) */
};

/* What the ignore rules (git's, .gpurunignore, [sync] exclude) left out
 * of a scan: files seen and skipped, with their bytes, and ignored
 * folders, not entered (their names: the first SCAN_IGNORED_NAMES).
 * With walk_dirs, each ignored folder's files are counted too (a walk
 * of what the scan would not enter: for --dry-run, not every sync). */
#define SCAN_IGNORED_NAMES 4
struct scan_ignored {
	int walk_dirs;
	uint64_t files, bytes, dirs;
	struct strvec names;
};

struct scan_opts {
	const char *const *extra; /* extra gitignore-syntax patterns ([sync] exclude), may be NULL */
	size_t nextra;
	int include_git;          /* keep .git/ (never by default) */
	const char *const *include; /* [sync] include: sent although ignored */
	size_t ninclude;
	const char *const *persist; /* [train] persist: never sent */
	size_t npersist;
	struct scan_ignored *ignored; /* NULL, or counts what the rules left out */
};

/* Scan root. Directories that hold no entries are listed too (so empty
 * folders are carried); ignored directories are not descended (unless to
 * reach a tracked or included path). Always skipped: .git/ (unless
 * include_git), .gpurun/ (gpurun's local state) and persistent paths.
 * *out is an array of *n entries, the caller's to scan_free().
 *
 * Details (scan.c, ignore.c):
 * - Every kept folder is an entry, not only empty ones; the root is not.
 * - Order is strcmp() of path (plain bytes: "a" < "a-b" < "a/x" < "a0"),
 *   so a folder always comes before what it holds.
 * - An entry named ".git" is skipped at any depth (a nested repository's
 *   files are scanned with the outer rules plus its own .gitignore files;
 *   git itself would show such a folder as one untracked entry). With
 *   include_git, every .git is listed whole, with no rules applied inside.
 * - Files git tracks (.git/index) are kept even when a rule matches, and
 *   an ignored folder is entered only to reach tracked files in it.
 * - FIFOs, sockets and devices are skipped (git skips them too); an entry
 *   that vanishes during the scan is skipped.
 * - Errors (GR_EIO, err names the path, relative to root): a folder that
 *   cannot be opened or read, an ignore file that cannot be read (a
 *   symlinked .gitignore is not an error: git does not follow it either). */
int scan_tree(const char *root, const struct scan_opts *o,
	      struct scan_entry **out, size_t *n, struct gr_err *err);
void scan_free(struct scan_entry *e, size_t n);
/* The same entries, each given to each(arg, e) as it is found, in path
 * order (each folder's entries are sorted, and what a folder holds comes
 * at its place: "a", "a.txt", "a/b"). A folder entered only to reach
 * tracked or included files is walked when it comes up (to know whether
 * it stays), and what it keeps is held until its place. e and its
 * strings are the scan's, valid during the call only. Nothing else is
 * held but the walk's own state, so a caller that keeps the entries in its own form keeps
 * one copy of the tree, not two. A negative return from each stops the
 * scan and is returned. */
int scan_tree_each(const char *root, const struct scan_opts *o,
		   int (*each)(void *arg, const struct scan_entry *e), void *arg,
		   struct gr_err *err);

/* One path as scan_tree would see it, without the walk (the watcher's
 * syncs, for the paths inotify reported). *ig holds the rules loaded so
 * far (made here when NULL, the caller's to ignore_free; reuse it only
 * while the ignore files and the git index are unchanged). Certain only
 * where the walk would reach path through folders it enters with the
 * rules alone: SCAN_PROBE_KEPT (out filled: a file or symlink the scan
 * lists; free out->path and out->link), SCAN_PROBE_NONE (gone, ignored,
 * or a kind the scan skips: not listed). SCAN_PROBE_WALK for the rest
 * (a folder, a folder on the way ignored, included, .git or gone, a
 * symlink on the way, include_git set): only a walk can say. */
enum { SCAN_PROBE_WALK = 0, SCAN_PROBE_NONE = 1, SCAN_PROBE_KEPT = 2 };
struct ignore;
int scan_probe(struct ignore **ig, const char *root, const struct scan_opts *o,
	       const char *path, struct scan_entry *out, struct gr_err *err);

#endif
