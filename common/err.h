/* Error codes, the error context modules fill, and gpurun's exit codes.
 * Modules never print and never exit: they return 0 or a negative GR_E*
 * code and leave a message (and maybe a hint) in a struct gr_err. */
#ifndef GR_ERR_H
#define GR_ERR_H

#include <stddef.h>

enum {
	GR_OK = 0,
	GR_EINVAL = -1,     /* bad argument or value */
	GR_ENOMEM = -2,
	GR_EIO = -3,        /* local I/O (errno text in the message) */
	GR_ECONFIG = -4,    /* gpurun.ini or ssh_config problem */
	GR_ENOTFOUND = -5,
	GR_ESSH = -6,       /* connection, name resolution, TCP, ssh protocol */
	GR_EHOSTKEY = -7,   /* unknown or changed host key */
	GR_EAUTH = -8,      /* authentication failed */
	GR_EPROTO = -9,     /* malformed frame, version mismatch */
	GR_EAGENT = -10,    /* agent could not be started or answered an error */
	GR_EREMOTE = -11,   /* the remote side reported a failure */
	GR_ETIMEOUT = -12,
	GR_ECANCEL = -13,   /* interrupted by the user */
	GR_EUNSUPP = -14,   /* unsupported (e.g. remote architecture) */
	GR_EEXIST = -15,
	GR_EUSAGE = -16,    /* bad command line */
	GR_ECONFLICT = -17, /* remote changed behind our back */
};

struct gr_err {
	int code;
	char msg[1024];
	char hint[512];
};

/* Set the message (printf-style) and return code, so callers can write
 * `return gr_errf(err, GR_EIO, "cannot open '%s': %s", p, strerror(errno));`.
 * err may be NULL. A message already set is replaced. */
int gr_errf(struct gr_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Add a hint line ("hint: ...") shown under the message. */
void gr_hintf(struct gr_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Prefix the current message with "what: " (adds context on the way up). */
void gr_err_prefix(struct gr_err *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void gr_err_clear(struct gr_err *err);
/* Short name of a code, for logs and the protocol ("GR_EIO"). */
const char *gr_strcode(int code);

/* Exit codes. A remote command's or job's status passes through unchanged
 * (0-254, 128+N for a signal); gpurun's own failures use these, at the top
 * of the range as ssh does with 255. Listed in README and `gpurun help
 * exit-codes`. */
enum {
	GR_EXIT_OK = 0,
	GR_EXIT_DETACHED = 0,   /* detached from a running job: not a failure */
	GR_EXIT_FAILURE = 1,    /* a local command (init, config, ...) failed */
	GR_EXIT_JOB_TIMEOUT = 247, /* the job reached its time limit (Slurm, [train] time_limit) */
	GR_EXIT_JOB_LOST = 248, /* the job ended but left no exit status */
	GR_EXIT_INTERRUPTED = 249, /* stopped by Ctrl-C */
	GR_EXIT_SYNC = 250,     /* sync or artifact transfer failed */
	GR_EXIT_REMOTE = 251,   /* the agent reported an error */
	GR_EXIT_USAGE = 252,    /* bad command line */
	GR_EXIT_CONFIG = 253,   /* bad gpurun.ini / ssh_config */
	GR_EXIT_AUTH = 254,     /* host key or authentication refused */
	GR_EXIT_CONNECT = 255,  /* could not reach the host or start the agent */
};

/* Map a GR_E* code to the exit code gpurun uses for it. */
int gr_exit_code(int code);

#endif
