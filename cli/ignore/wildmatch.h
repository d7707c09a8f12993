/* Shell-style glob matching with git's wildmatch semantics (the matcher
 * behind .gitignore): '*', '?', '[...]' with ranges, negation and POSIX
 * classes, backslash escapes, and '**' across folders under WM_PATHNAME. */
#ifndef GR_WILDMATCH_H
#define GR_WILDMATCH_H

#define WM_CASEFOLD 1u  /* ASCII case-insensitive (core.ignoreCase) */
#define WM_PATHNAME 2u  /* '*', '?' and classes never match '/'; '**' does */

/* Results; only WM_MATCH means the text matched. */
#define WM_MATCH 0
#define WM_NOMATCH 1
#define WM_ABORT_ALL (-1)
#define WM_ABORT_TO_STARSTAR (-2)

/* Match the whole of text against pattern (both NUL-terminated byte
 * strings, no encoding assumed). Returns WM_MATCH or another WM_* code. */
int wildmatch(const char *pattern, const char *text, unsigned flags);

#endif
