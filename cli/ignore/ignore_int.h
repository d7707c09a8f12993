/* Internals of the ignore engine shared by ignore.c, ignore_rules.c,
 * ignore_explain.c and scan.c: the pattern structures, and length-based
 * variants of the API that skip normalisation, for the scan's hot path. */
#ifndef GR_IGNORE_INT_H
#define GR_IGNORE_INT_H

#include <stddef.h>

#include "ignore.h"

#define IG_NEGATIVE 1u
#define IG_MUSTBEDIR 2u
#define IG_NODIR 4u
#define IG_ENDSWITH 8u

struct ig_pattern {
	char *pat;   /* without '!' and the trailing '/'; NUL at patlen */
	char *text;  /* the line as written, trailing spaces trimmed */
	int patlen;
	int nowild;  /* length of the leading part without glob specials */
	int line;
	unsigned flags;
};

struct ig_list {
	char *source;  /* ".gitignore", "a/b/.gpurunignore", "[sync] exclude", ... */
	char *base;    /* the folder the patterns are relative to: "" or "a/b" */
	int baselen;
	struct ig_pattern *v;
	size_t n, alloc;
};

/* ignore_rules.c: one pattern list. */
struct ig_list *ig_list_new(const char *source, const char *base, size_t baselen);
void ig_list_free(struct ig_list *l);
/* One line of a file (lineno counts from 1), or one [sync] exclude entry. */
void ig_parse_line(struct ig_list *l, const char *p, size_t len, int lineno);
void ig_parse_buffer(struct ig_list *l, const char *data, size_t size);
/* A list from an open file; *out is NULL when it is not a regular file.
 * shown names it in messages and in struct ignore_match. */
int ig_read_fd(int fd, const char *shown, const char *base, size_t baselen,
	       struct ig_list **out, struct gr_err *err);
/* A file outside the tree: missing is fine, unreadable is GR_EIO. */
int ig_read_path(const char *path, const char *shown, struct ig_list **out,
		 struct gr_err *err);
/* The last pattern of l matching path[0..pathlen) (NUL at pathlen), whose
 * last component starts at base; NULL if none. */
const struct ig_pattern *ig_list_match(unsigned wmflags, const struct ig_list *l,
				       const char *path, int pathlen,
				       const char *base, int is_dir);

/* Could pattern x (anchored: a '/' before its end) match something below
 * folder dir[0..len)? */
int ig_pattern_may_descend(unsigned wmflags, const struct ig_pattern *x, const char *dir,
			   size_t len);

/* Load the ignore files of folder dir[0..len) (and of its parents first).
 * dirfd is an open descriptor of that folder, or -1 to open it by path. */
int ig_load(struct ignore *ig, int dirfd, const char *dir, size_t len, struct gr_err *err);
/* ignore_check for a normalised path[0..len), NUL at len. */
int ig_check_len(struct ignore *ig, const char *path, size_t len, int is_dir,
		 struct ignore_match *why);
/* ignore_path for a normalised path[0..len); *decided_len is len, or the
 * length of the parent folder whose exclusion decided. */
int ig_path_len(struct ignore *ig, const char *path, size_t len, int is_dir,
		struct ignore_match *why, size_t *decided_len, struct gr_err *err);
/* [train] persist: 1 (why set) if path[0..len) is a persistent path
 * itself (the caller checks its folders). */
int ig_persist_match(struct ignore *ig, const char *path, size_t len, struct ignore_match *why);
/* [sync] include: 1 (why set) if the last include pattern matching
 * path[0..len) names it, -1 if that pattern is a '!' one, 0 if none. */
int ig_include_match(struct ignore *ig, const char *path, size_t len, int is_dir,
		     struct ignore_match *why);
/* 1 if an include pattern could name something below folder dir[0..len)
 * (so the scan must look inside it although it is ignored). */
int ig_include_may_descend(struct ignore *ig, const char *dir, size_t len);
/* Switch [sync] include off (0) and on again (1), for --why's "without
 * it" note. */
void ig_include_enable(struct ignore *ig, int on);
/* The rule a deciding '!' rule m overrides: the next positive rule in
 * git's order that matches path (out set), or NULL. */
const struct ig_pattern *ig_overridden(struct ignore *ig, const char *path, size_t len,
				       int is_dir, const struct ignore_match *m,
				       struct ignore_match *out);

#endif
