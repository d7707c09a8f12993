/* The few calls the client and common/ need that Linux has and POSIX lacks
 * (git's compat/ is the model): each compat_* uses the native call where
 * GR_HAVE_<X> says it exists, and a POSIX fallback (compat.c) elsewhere.
 * `make PORTABLE=1` defines GR_PORTABLE, which leaves every GR_HAVE_*
 * undefined, so the fallbacks are built and tested on Linux too. The agent
 * (remote/) runs only on Linux and never gets GR_PORTABLE; it compiles
 * common/ with this header but does not link compat.c, so common/ may use
 * only the calls that are inline on Linux. */
#ifndef GR_COMPAT_H
#define GR_COMPAT_H

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* ---- what this system has (nothing under GR_PORTABLE) ---- */
#ifndef GR_PORTABLE
#if defined(__linux__)
#define GR_HAVE_PIPE2 1
#define GR_HAVE_ACCEPT4 1
#define GR_HAVE_SOCK_CLOEXEC 1
#define GR_HAVE_MSG_NOSIGNAL 1
#define GR_HAVE_SYNCFS 1
#define GR_HAVE_SYNC_FILE_RANGE 1
#define GR_HAVE_F_SETPIPE_SZ 1
#define GR_HAVE_COPY_FILE_RANGE 1
#define GR_HAVE_PROC_SELF_EXE 1
#define GR_HAVE_GNU_QSORT_R 1
#define GR_HAVE_MEMRCHR 1
#define GR_HAVE_GETTID 1
#define GR_HAVE_EXECVPE 1
#define GR_HAVE_EXPLICIT_BZERO 1
#define GR_HAVE_TCP_QUICKACK 1
#define GR_HAVE_PTY_H 1
#define GR_HAVE_INOTIFY 1
#define GR_HAVE_O_TMPFILE 1
#elif defined(__APPLE__)
#define GR_HAVE_NSGETEXECUTABLEPATH 1
#define GR_HAVE_MEMSET_S 1
#define GR_HAVE_F_FULLFSYNC 1
#define GR_HAVE_UTIL_H 1
#elif defined(__FreeBSD__) || defined(__OpenBSD__)
/* Untested: from their manuals. */
#define GR_HAVE_PIPE2 1
#define GR_HAVE_ACCEPT4 1
#define GR_HAVE_SOCK_CLOEXEC 1
#define GR_HAVE_MSG_NOSIGNAL 1
#define GR_HAVE_MEMRCHR 1
#define GR_HAVE_EXPLICIT_BZERO 1
#if defined(__FreeBSD__)
#define GR_HAVE_KERN_PROC_PATHNAME 1
#define GR_HAVE_LIBUTIL_H 1
#else
#define GR_HAVE_UTIL_H 1
#endif
#endif
#endif /* GR_PORTABLE */

/* st_mtim is POSIX 2008, not Linux's own, so GR_PORTABLE keeps it: only
 * macOS spells it st_mtimespec. Whole seconds (neither) is no target's
 * way, and it would let the pull's signature cache trust a file touched
 * in the same second (test_art_delta's test_signature_kept fails so). */
#if defined(__APPLE__)
#define GR_HAVE_ST_MTIMESPEC 1
#endif

/* forkpty/openpty live in <pty.h> (glibc), <util.h> (macOS, OpenBSD) or
 * <libutil.h> (FreeBSD); -lutil links them everywhere but in glibc 2.34+
 * (in libc). Only the agent calls them today. */
#if defined(GR_WANT_PTY)
#if defined(GR_HAVE_PTY_H)
#include <pty.h>
#elif defined(GR_HAVE_UTIL_H)
#include <util.h>
#elif defined(GR_HAVE_LIBUTIL_H)
#include <libutil.h>
#endif
#endif

/* Not declared by <unistd.h> on macOS. */
extern char **environ;

/* ---- descriptors made close-on-exec ----
 * The fallbacks make the descriptor, then set FD_CLOEXEC (and O_NONBLOCK):
 * a fork() by another thread between the two would leak it into that
 * child, and a leaked write end of a pipe keeps its reader from EOF for
 * as long as the child lives (train reads git's output while another
 * thread starts ssh). So the fallbacks hold a lock that a pthread_atfork
 * handler takes around every fork(); posix_spawn runs no atfork handlers:
 * the client spawns (cmd_hook.c) only while it runs no other thread. */

/* pipe2(fds, O_CLOEXEC [| O_NONBLOCK]). 0, or -1 with errno. */
int compat_pipe_cloexec(int fds[2], int nonblock);
/* socket(domain, type | SOCK_CLOEXEC [| SOCK_NONBLOCK], proto). */
int compat_socket_cloexec(int domain, int type, int proto, int nonblock);
/* socketpair(domain, type | SOCK_CLOEXEC, proto, sv). */
int compat_socketpair_cloexec(int domain, int type, int proto, int sv[2]);
/* accept4(fd, addr, len, SOCK_CLOEXEC [| SOCK_NONBLOCK]); the new socket
 * is blocking unless nonblock, as on Linux (BSD's accept inherits it). */
int compat_accept_cloexec(int fd, struct sockaddr *addr, socklen_t *len, int nonblock);

/* send() that returns EPIPE rather than raising SIGPIPE, whatever the
 * signal's disposition. */
ssize_t compat_send_nosignal(int fd, const void *buf, size_t n, int flags);

/* ---- durability and writeback ---- */

/* Make what was written on fd's file system durable (syncfs). Fallback:
 * sync() then fsync(fd) (F_FULLFSYNC on macOS). POSIX lets sync() return
 * before the writes are done (Linux waits; the BSDs and macOS may not),
 * so there only fd itself (e.g. the folder whose renames matter) is sure
 * to be on disk when this returns. 0, or -1 with errno. */
int compat_syncfs(int fd);
/* Start writeback of [off, off+len) now (sync_file_range WRITE): a hint
 * so a later fsync finds little left; nothing where there is no such call. */
void compat_writeback(int fd, off_t off, off_t len);
/* Grow a pipe's buffer (F_SETPIPE_SZ): best effort, a hint. */
void compat_pipe_grow(int fd, int size);

/* copy_file_range(in, off_in, out, off_out, len, 0): copies from and to the
 * given offsets (advanced by what was copied; the files' own offsets are
 * untouched). Fallback: pread/pwrite through a 64 KiB buffer, at most one
 * buffer a call. The count copied (0 at in's end), or -1 with errno. */
ssize_t compat_copy_file_range(int in, off_t *off_in, int out, off_t *off_out, size_t len);

/* A new file with no name in the folder dir (O_TMPFILE: nothing is left
 * behind whatever happens to the process), read-write, close-on-exec.
 * Fallback (also where dir's file system has no O_TMPFILE): mkostemp
 * there, unlinked at once. fd, or -1 with errno. */
int compat_tmpfile_in(const char *dir);

/* ---- the running program ---- */

/* Remember argv[0] (main calls it first): where there is no system call
 * for the program's own path, it is found from argv[0] (a path, or a name
 * on PATH), resolved at once, before anything changes the folder. */
void compat_set_argv0(const char *argv0);
/* The running binary's absolute path (/proc/self/exe, macOS's
 * _NSGetExecutablePath, FreeBSD's KERN_PROC_PATHNAME, else argv[0] as
 * above) into buf; buf, or NULL (errno set) when unknown or too long. */
char *compat_self_exe(char *buf, size_t size);
/* What to execv to run this program again (children that must be the
 * same build as we are): Linux's /proc/self/exe is the very file even if
 * a rebuild replaced it; elsewhere compat_self_exe's path (what is there
 * now), or "" when unknown (execv then fails with ENOENT). */
const char *compat_exec_self(void);
/* A number that no other thread of any process has now (a tid); for
 * names of temporary files. */
unsigned long long compat_thread_id(void);
/* execvpe: execvp with envp as the environment. Fallback: sets environ
 * first, so only for a child of fork() about to exec or exit. */
int compat_execvpe(const char *file, char *const argv[], char *const envp[]);

/* ---- memory and sorting ---- */

/* The last c in s[0..n), or NULL. */
void *compat_memrchr(const void *s, int c, size_t n);
/* qsort_r with glibc's (and POSIX 2024's) order of arguments; BSD's and
 * macOS's differ, so the fallback is a merge sort of its own. */
void compat_qsort_r(void *base, size_t n, size_t size,
		    int (*cmp)(const void *, const void *, void *), void *arg);
/* memset(p, 0, n) that the compiler may not drop (wiping secrets). */
void compat_explicit_bzero(void *p, size_t n);

/* ---- sockets ---- */

/* Ask for immediate ACKs (Linux's TCP_QUICKACK); nothing elsewhere. */
void compat_tcp_quickack(int fd);
/* The uid (and pid, 0 where the system does not say) at the other end
 * of a connected AF_UNIX socket: SO_PEERCRED, else getpeereid. 0, or -1
 * where neither exists or the call fails (then trust nobody). */
int compat_peer_cred(int fd, uid_t *uid, pid_t *pid);

/* ---- watching folders (Linux's inotify) ----
 * Where GR_HAVE_INOTIFY is not defined (macOS, the BSDs, GR_PORTABLE)
 * each call fails with ENOSYS and the caller scans the tree instead
 * (`gpurun sync --watch` then compares a stat scan every second). The
 * events come as COMPAT_WATCH_* flags, so callers need no <sys/inotify.h>. */
enum {
	COMPAT_WATCH_DIR = 1 << 0,      /* the entry named is a folder */
	COMPAT_WATCH_NEW = 1 << 1,      /* created, or moved in */
	COMPAT_WATCH_OLD = 1 << 2,      /* deleted, or moved out */
	COMPAT_WATCH_MOVED = 1 << 3,    /* with NEW or OLD: by a rename */
	COMPAT_WATCH_CHANGED = 1 << 4,  /* written, or its mode or times set */
	COMPAT_WATCH_SELF = 1 << 5,     /* the watched folder itself was deleted or moved */
	COMPAT_WATCH_GONE = 1 << 6,     /* the watch ended (its folder is gone) */
	COMPAT_WATCH_OVERFLOW = 1 << 7, /* the kernel dropped events: look at everything */
};
/* A watcher (inotify_init1 with IN_NONBLOCK | IN_CLOEXEC): a descriptor
 * that polls readable when events wait, or -1 with errno (ENOSYS: none
 * on this system; EMFILE: the per-user limit of watchers). */
int compat_watch_init(void);
/* Watch the folder path (a symlink is not followed, and only a folder is
 * taken): its entries created, deleted, moved, written or changed, and
 * the folder itself deleted or moved. Watching it again returns the same
 * id. The watch id (>= 0), or -1 with errno (ENOSPC: the per-user limit
 * of watches, fs.inotify.max_user_watches; ENOTDIR, ENOENT, EACCES). */
int compat_watch_add(int fd, const char *path);
/* Read the events waiting on fd without blocking: each(arg, wd, flags,
 * name) for each, name "" when the event is about the watched folder
 * itself (or the overflow, wd -1). The number of events read (0: none
 * waited), or -1 with errno. */
int compat_watch_read(int fd, void (*each)(void *arg, int wd, unsigned flags, const char *name),
		      void *arg);

/* ---- struct stat's nanoseconds ----
 * st_mtime and st_ctime (seconds) are POSIX everywhere; nanoseconds are
 * st_mtim (POSIX 2008) or st_mtimespec (macOS), see above. */
#if defined(GR_HAVE_ST_MTIMESPEC)
#define GR_ST_MTIME_NSEC(st) ((long)(st)->st_mtimespec.tv_nsec)
#define GR_ST_CTIME_NSEC(st) ((long)(st)->st_ctimespec.tv_nsec)
#else
#define GR_ST_MTIME_NSEC(st) ((long)(st)->st_mtim.tv_nsec)
#define GR_ST_CTIME_NSEC(st) ((long)(st)->st_ctim.tv_nsec)
#endif

/* ---- the native calls, inline ---- */
#if defined(GR_HAVE_PIPE2)
static inline int compat_pipe_cloexec_native(int fds[2], int nonblock)
{
	return pipe2(fds, O_CLOEXEC | (nonblock ? O_NONBLOCK : 0));
}
#define compat_pipe_cloexec compat_pipe_cloexec_native
#endif

#if defined(GR_HAVE_SOCK_CLOEXEC)
static inline int compat_socket_cloexec_native(int domain, int type, int proto, int nonblock)
{
	return socket(domain, type | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), proto);
}
#define compat_socket_cloexec compat_socket_cloexec_native
static inline int compat_socketpair_cloexec_native(int domain, int type, int proto, int sv[2])
{
	return socketpair(domain, type | SOCK_CLOEXEC, proto, sv);
}
#define compat_socketpair_cloexec compat_socketpair_cloexec_native
#endif

#if defined(GR_HAVE_ACCEPT4)
static inline int compat_accept_cloexec_native(int fd, struct sockaddr *addr, socklen_t *len,
					       int nonblock)
{
	return accept4(fd, addr, len, SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0));
}
#define compat_accept_cloexec compat_accept_cloexec_native
#endif

#if defined(GR_HAVE_MSG_NOSIGNAL)
static inline ssize_t compat_send_nosignal_native(int fd, const void *buf, size_t n, int flags)
{
	return send(fd, buf, n, flags | MSG_NOSIGNAL);
}
#define compat_send_nosignal compat_send_nosignal_native
#endif

#if defined(GR_HAVE_SYNCFS)
#define compat_syncfs(fd) syncfs(fd)
#endif

#if defined(GR_HAVE_SYNC_FILE_RANGE)
static inline void compat_writeback_native(int fd, off_t off, off_t len)
{
	(void)sync_file_range(fd, off, len, SYNC_FILE_RANGE_WRITE);
}
#define compat_writeback compat_writeback_native
#endif

#if defined(GR_HAVE_F_SETPIPE_SZ)
static inline void compat_pipe_grow_native(int fd, int size)
{
	(void)fcntl(fd, F_SETPIPE_SZ, size);
}
#define compat_pipe_grow compat_pipe_grow_native
#endif

#if defined(GR_HAVE_COPY_FILE_RANGE)
static inline ssize_t compat_copy_file_range_native(int in, off_t *off_in, int out,
						    off_t *off_out, size_t len)
{
	loff_t i = (loff_t)*off_in, o = (loff_t)*off_out;
	ssize_t r = copy_file_range(in, &i, out, &o, len, 0);

	*off_in = (off_t)i;
	*off_out = (off_t)o;
	return r;
}
#define compat_copy_file_range compat_copy_file_range_native
#endif

#if defined(GR_HAVE_GETTID)
#define compat_thread_id() ((unsigned long long)gettid())
#endif

#if defined(GR_HAVE_EXECVPE)
#define compat_execvpe(file, argv, envp) execvpe(file, argv, envp)
#endif

#if defined(GR_HAVE_MEMRCHR)
#define compat_memrchr(s, c, n) memrchr(s, c, n)
#endif

#if defined(GR_HAVE_GNU_QSORT_R)
#define compat_qsort_r(base, n, size, cmp, arg) qsort_r(base, n, size, cmp, arg)
#endif

#if defined(GR_HAVE_EXPLICIT_BZERO)
#define compat_explicit_bzero(p, n) explicit_bzero(p, n)
#endif

#endif
