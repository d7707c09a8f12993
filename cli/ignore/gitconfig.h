/* Just enough of git's config-file reader for the ignore rules
 * (core.excludesFile, core.ignoreCase), so they hold without git. */
#ifndef GR_GITCONFIG_H
#define GR_GITCONFIG_H

/* Values git's config would give for the keys the ignore engine needs.
 * Missing keys stay NULL. gitcfg_free frees the strings. */
struct gitcfg {
	char *excludes_file; /* core.excludesFile, "~/" expanded, as found */
	char *ignore_case;   /* core.ignoreCase: the raw value; "true" for a bare key */
	char *object_format; /* extensions.objectFormat ("sha1", "sha256") */
};

/* Read the files git reads, in git's order (later wins): system
 * (/etc/gitconfig unless GIT_CONFIG_NOSYSTEM; GIT_CONFIG_SYSTEM overrides),
 * global ($XDG_CONFIG_HOME/git/config or ~/.config/git/config, then
 * ~/.gitconfig; GIT_CONFIG_GLOBAL overrides both), then the repository's
 * config (gitdir/config, may be NULL). "include.path" is followed;
 * "includeIf" is not. Unreadable or malformed files are skipped, as a
 * missing value is harmless here. */
void gitcfg_load(struct gitcfg *c, const char *gitdir);
/* Read one file into c (later assignments win). 0, or -1 if unreadable. */
int gitcfg_read_file(struct gitcfg *c, const char *path, int depth);
void gitcfg_free(struct gitcfg *c);

/* git's boolean: true/yes/on/1 (or a bare key), false/no/off/0/"".
 * Returns 1, 0, or -1 if it is not a boolean. */
int gitcfg_bool(const char *v);

#endif
