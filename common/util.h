/* Small helpers every part of gpurun shares: growing buffers, whole-fd
 * I/O that retries EINTR and short counts, path expansion, number parsing.
 * Functions returning int give 0 or a negative GR_E* code with err set. */
#ifndef GR_UTIL_H
#define GR_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define GR_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Allocation that aborts on failure: out of memory is not a recoverable
 * condition for a command-line tool (git's xmalloc). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growing byte buffer, always NUL-terminated. Zero-initialise, then
 * sb_release() frees. */
struct strbuf {
	char *buf;
	size_t len, alloc;
};
#define STRBUF_INIT { NULL, 0, 0 }
void sb_grow(struct strbuf *sb, size_t extra);
void sb_add(struct strbuf *sb, const void *data, size_t n);
void sb_adds(struct strbuf *sb, const char *s);
void sb_addf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_vaddf(struct strbuf *sb, const char *fmt, va_list ap);
void sb_reset(struct strbuf *sb);
void sb_release(struct strbuf *sb);

/* The length of the valid UTF-8 character (U+0080 or above) at s, of
 * which n bytes are there: 2 to 4, or 0 when s does not start with one
 * (a stray or missing continuation byte, an overlong form, a surrogate,
 * past U+10FFFF). */
size_t utf8_len(const void *s, size_t n);
/* Append the n bytes at s (NUL included) as a JSON string: quoted, '"'
 * and '\\' escaped, \n and \t as such, every other control byte (C0 with
 * NUL, DEL, and C1 written as UTF-8) as \u00XX, and each byte that is not
 * part of valid UTF-8 (a stray or missing continuation byte, an overlong
 * form, a surrogate, past U+10FFFF) as \ufffd, one for each such byte; so
 * the result is valid JSON and valid UTF-8, tells a terminal nothing,
 * and a string that is valid UTF-8 parses back to exactly its bytes. The one
 * writer of JSON strings: every --json of the client goes through it
 * (tests/fuzz/fuzz_json.c checks all of this). */
void json_strn(struct strbuf *sb, const void *s, size_t n);
/* json_strn of the C string s (NULL: ""). */
void json_str(struct strbuf *sb, const char *s);
/* Hand the buffer to the caller (who frees it); sb is left empty. */
char *sb_detach(struct strbuf *sb, size_t *len);

/* A growing array of owned strings, NULL-terminated. */
struct strvec {
	char **v;
	size_t n, alloc;
};
#define STRVEC_INIT { NULL, 0, 0 }
void sv_push(struct strvec *sv, const char *s);
void sv_pushf(struct strvec *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sv_clear(struct strvec *sv);

/* Write all n bytes, retrying EINTR and short writes (blocking fds). */
int write_full(int fd, const void *buf, size_t n);
/* Remove name in pfd: a file, or a folder and everything below it, never
 * following a symlink (0, or -1 with errno; gone already is 0). */
int rm_tree_at(int pfd, const char *name);
/* Walk from the folder dirfd (AT_FDCWD: the working folder) down the
 * folders named by the first len bytes of rel, one component at a time,
 * each opened with O_DIRECTORY | O_NOFOLLOW: a symlink on the way (or one
 * swapped in while we walk) is refused with ELOOP or ENOTDIR, never
 * followed, so nothing reached leaves dirfd's tree. make: each folder
 * made (0755) where missing. Empty components ("a//b") are skipped.
 * Returns a new descriptor the caller closes, dirfd itself when rel
 * names no folder, or -1 with errno set. The one such walk of the client
 * (the pull's, the sync's opener). */
int walk_below(int dirfd, const char *rel, size_t len, int make);
/* pwrite all n bytes at off, retrying EINTR and short writes (a write may
 * be short just before the disk fills: the next one says why). 0, or -1
 * with errno (EIO if a write wrote nothing). */
int pwrite_full(int fd, const void *buf, size_t n, uint64_t off);
/* Read exactly n bytes; returns bytes read (< n only at EOF) or -1. */
ssize_t read_full(int fd, void *buf, size_t n);
/* Read a whole file into sb (appending). */
int read_file(const char *path, struct strbuf *sb, struct gr_err *err);
/* Write a file atomically: temp name beside it, fsync, rename. */
int write_file_atomic(const char *path, const void *data, size_t n, int mode,
		      struct gr_err *err);
/* The same, the bytes written to the temp file's fd by fill(arg, fd) (0,
 * or -1 with errno set), so a large file needs no buffer of its size. */
int write_file_atomic_with(const char *path, int (*fill)(void *arg, int fd), void *arg,
			   int mode, struct gr_err *err);

/* A file read through a window, for records parsed one at a time without
 * holding the whole file: fwin_need makes at least want bytes from pos
 * readable in b (fewer only at the end of the file) and returns how many
 * are, or -1 with errno set. The caller advances pos past what it used;
 * the window grows only to the largest want. fd stays the caller's. */
struct fwin {
	int fd;
	struct strbuf b;
	size_t pos;
	int eof;
};
ssize_t fwin_need(struct fwin *w, size_t want);
void fwin_release(struct fwin *w);

/* mkdir -p; mode for folders created. */
int mkdir_p(const char *path, int mode, struct gr_err *err);

/* "~" or "~/x" -> $HOME or $HOME/x (gpurun uses $HOME, not passwd, so
 * tests can point it at another home). Returns a new string. */
char *expand_home(const char *path);

/* The user name of uid from /etc/passwd itself (no NSS: the agent is a
 * static binary), or "uid N". */
void uid_name(uid_t uid, char *buf, size_t n);

/* A process's exit as a shell shows it, 0..255: its exit status, or
 * 128 + the signal that killed it. exit_code_from: the same for an end
 * received as (signalled, code), as the agent reports a command's and a
 * job's end (masked, so a hostile value stays in 0..255). exit_code_of:
 * for a status from waitpid (which was not asked for stopped children). */
int exit_code_from(int signalled, uint32_t code);
int exit_code_of(int wait_status);

/* Parse a whole string as a number in [min, max]; 0 or GR_EINVAL. */
int parse_ll(const char *s, long long min, long long max, long long *out);
/* "10", "10k", "1.5M", "2G", "1GiB" -> bytes. */
int parse_size(const char *s, uint64_t *out);
/* Human size: "1.5 MiB". Returns buf. */
const char *fmt_size(uint64_t n, char *buf, size_t bufsz);
/* "1st", "2nd", "3rd", "4th", "11th", "21st"... Returns buf. */
const char *fmt_ordinal(size_t n, char *buf, size_t bufsz);

/* Monotonic clock in nanoseconds / milliseconds. */
uint64_t now_ns(void);
uint64_t now_ms(void);
/* 64-bit FNV-1a of p[0..n) continued from h (FNV1A64_INIT to start): a
 * fingerprint, not a defence against a chosen collision. */
#define FNV1A64_INIT 0xcbf29ce484222325ULL
uint64_t fnv1a64(uint64_t h, const void *p, size_t n);

/* GPURUN_TRACE=1 (as GIT_TRACE): "trace: <ms since start> <what>" lines on
 * stderr, for timing the phases of a command. Off, it costs a branch. */
extern int gr_trace_on;
void gr_trace_init(void);
void gr_trace_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define gr_trace(...) do { if (gr_trace_on) gr_trace_(__VA_ARGS__); } while (0)

int set_nonblock(int fd, int on);
int set_cloexec(int fd);

#include "banned.h"
#endif
