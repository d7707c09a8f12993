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

#endif
