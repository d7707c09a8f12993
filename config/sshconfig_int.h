/* Internal to the ssh_config resolver: the small pieces of OpenSSH 9.2's
 * config grammar (tokenising, patterns, %-tokens, destinations) that
 * sshconfig.c needs to behave exactly like `ssh -G`. Not a public API. */
#ifndef GR_SSHCONFIG_INT_H
#define GR_SSHCONFIG_INT_H

#include <stddef.h>

#include "util.h"

/* ssh's whitespace set for config lines. */
#define SSHC_WS " \t\r\n"

/* Next token of *s, splitting on whitespace (and one '=' when
 * split_equals), honouring double quotes; *s moves on (NULL at the end).
 * NULL on an unterminated quote. Modifies the line in place. */
char *sshc_strdelim(char **s, int split_equals);

/* Split s into words like ssh's argv_split: single and double quotes,
 * backslash escapes of quotes, backslash and space; a word starting with
 * '#' ends the line. Returns 0, or -1 on an unterminated quote. */
int sshc_argv_split(const char *s, struct strvec *out);

/* Glob match of s against pattern ('*' and '?'), case-sensitive. */
int sshc_match_pattern(const char *s, const char *pattern);
/* Comma-separated pattern list with '!' negation: 1 match, 0 none,
 * -1 a negated entry matched. dolower lowercases the patterns. */
int sshc_match_pattern_list(const char *s, const char *list, int dolower);

/* Port number or service name; -1 if invalid. */
int sshc_a2port(const char *s);
/* "90", "1h30m", "2d": seconds, or -1 if invalid. */
int sshc_convtime(const char *s);
/* A whole decimal number in [0, INT_MAX]; -1 if invalid. */
int sshc_atoi(const char *s, const char **why);

/* [user@]host[:port] and ssh://[user@]host[:port] (ssh's parsers).
 * Outputs may be NULL; the caller frees *user and *host.
 * parse_user_host_port: 0 or -1. parse_ssh_uri: 0, 1 (not an ssh URI), -1. */
int sshc_parse_user_host_port(const char *s, char **user, char **host, int *port);
int sshc_parse_ssh_uri(const char *s, char **user, char **host, int *port);

/* Expand %x tokens (and ${VAR} when dollar) in s. keys[i] is a token
 * character, vals[i] its value. Appends to out; on failure returns -1 and
 * puts the reason in why ("unknown token %j", ...). */
int sshc_expand(const char *s, int dollar, const char *keys, const char *const *vals,
		struct strbuf *out, struct strbuf *why);

/* Lowercase hex SHA-1 of data (for the %C token). */
void sshc_sha1_hex(const void *data, size_t n, char out[41]);

void sshc_lowercase(char *s);

/* ---- shared by the resolver (sshconfig.c) and the reader (sshconfig_read.c) */

#include "sshconfig.h"

enum { CF_USER = 1, CF_CHECKPERM = 2, CF_NEVERMATCH = 4, CF_FINAL = 8 };
#define MAX_DEPTH 16          /* READCONF_MAX_DEPTH */
#define MAX_IDENTITY_FILES 100
#define MAX_HOSTS_FILES 32

/* Options as read so far; -1 / NULL mean "not obtained yet". */
struct sopts {
	char *hostname, *user, *proxy_command, *jump_host, *jump_user, *jump_extra;
	char *host_key_alias, *ignore_unknown;
	int port, identities_only, shk, connect_timeout, sai, sacm, batch_mode;
	int canonicalize, canon_domains, jump_port;
	struct strvec ids, ids_where;   /* raw IdentityFile values, and file:line */
	unsigned char ids_user[MAX_IDENTITY_FILES];
	struct strvec ukh;              /* raw UserKnownHostsFile words */
	char *ukh_where, *pc_where, *hn_where;
};

struct sctx {
	struct sopts o;
	const char *host;    /* what Host patterns see: the alias, then the final name */
	const char *orig;    /* the alias as given */
	int want_final;
	const char *local_user, *home;
	char thishost[256], shorthost[256], uid[24];
	struct strvec *warnings;
	struct gr_err *err;
};

/* Read the user then the system configuration into c->o (NULL means the
 * default file, "" none). extra is CF_FINAL for the final pass. Returns 0
 * or GR_ECONFIG with c->err set ("file:line: ..."). */
int sshc_read_configs(struct sctx *c, const char *user_config, const char *system_config,
		      unsigned extra);
/* Add a warning to c->warnings, once. */
void sshc_warn(struct sctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
