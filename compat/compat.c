/* The POSIX fallbacks of compat.h, and the calls that need more than one
 * line on any system (the program's own path). Each is built where its
 * GR_HAVE_* is not defined: on Linux only under GR_PORTABLE. */
#if defined(__APPLE__)
#define __STDC_WANT_LIB_EXT1__ 1 /* memset_s */
#endif
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "compat.h"

#if defined(GR_HAVE_NSGETEXECUTABLEPATH)
#include <mach-o/dyld.h>
#endif
#if defined(GR_HAVE_KERN_PROC_PATHNAME)
#include <sys/sysctl.h>
#endif
#if defined(GR_HAVE_INOTIFY)
#include <sys/inotify.h>
#endif

#if !defined(GR_HAVE_PIPE2) || !defined(GR_HAVE_SOCK_CLOEXEC) || !defined(GR_HAVE_ACCEPT4)
/* Readers: a fallback between making a descriptor and its FD_CLOEXEC;
 * the writer: fork(), through pthread_atfork. The child unlocks its copy
 * as pthread_atfork's child handlers do (the pull's extractor is a child
 * that goes on without exec). */
static pthread_rwlock_t cloexec_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_once_t cloexec_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void)
{
	pthread_rwlock_wrlock(&cloexec_lock);
}

static void fork_after(void)
{
	pthread_rwlock_unlock(&cloexec_lock);
}

static void cloexec_init(void)
{
	/* Without the handlers (ENOMEM) a fork can still leak: the race the
	 * lock closes is the one left then. */
	(void)pthread_atfork(fork_prepare, fork_after, fork_after);
}

static void cloexec_begin(void)
{
	pthread_once(&cloexec_once, cloexec_init);
	pthread_rwlock_rdlock(&cloexec_lock);
}

static void cloexec_end(void)
{
	pthread_rwlock_unlock(&cloexec_lock);
}

/* FD_CLOEXEC, and O_NONBLOCK on or off; on failure fd is closed. */
static int fd_setup(int fd, int nonblock)
{
	int fl;

	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 || (fl = fcntl(fd, F_GETFL)) < 0 ||
	    fcntl(fd, F_SETFL, nonblock ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* fd_setup for both ends of a new pipe or socket pair: 0, or -1 with
 * both closed. */
static int __attribute__((unused)) pair_setup(int fds[2], int nonblock)
{
	if (fd_setup(fds[0], nonblock) < 0) {
		int e = errno;
		close(fds[1]);
		errno = e;
		return -1;
	}
	if (fd_setup(fds[1], nonblock) < 0) {
		int e = errno;
		close(fds[0]);
		errno = e;
		return -1;
	}
	return 0;
}
#endif

#if !defined(GR_HAVE_PIPE2)
int compat_pipe_cloexec(int fds[2], int nonblock)
{
	int rc = -1;

	cloexec_begin();
	if (pipe(fds) == 0)
		rc = pair_setup(fds, nonblock);
	cloexec_end();
	return rc;
}
#endif

#if !defined(GR_HAVE_SOCK_CLOEXEC)
int compat_socket_cloexec(int domain, int type, int proto, int nonblock)
{
	int fd;

	cloexec_begin();
	fd = socket(domain, type, proto);
	if (fd >= 0)
		fd = fd_setup(fd, nonblock);
	cloexec_end();
	return fd;
}

int compat_socketpair_cloexec(int domain, int type, int proto, int sv[2])
{
	int rc = -1;

	cloexec_begin();
	if (socketpair(domain, type, proto, sv) == 0)
		rc = pair_setup(sv, 0);
	cloexec_end();
	return rc;
}
#endif

#if !defined(GR_HAVE_ACCEPT4)
int compat_accept_cloexec(int fd, struct sockaddr *addr, socklen_t *len, int nonblock)
{
	int s;

	cloexec_begin();
	s = accept(fd, addr, len);
	if (s >= 0)
		s = fd_setup(s, nonblock);
	cloexec_end();
	return s;
}
#endif

#if !defined(GR_HAVE_MSG_NOSIGNAL)
/* SIGPIPE blocked in this thread around the send, and the one the send
 * raised (a write's SIGPIPE goes to the thread that wrote) taken back
 * with sigwait, unless one was pending before: libpq's way. The client
 * ignores SIGPIPE from conn_open on, but this does not rely on it. */
ssize_t compat_send_nosignal(int fd, const void *buf, size_t n, int flags)
{
	sigset_t pipe_set, old, pending;
	int had = 0, e, sig;
	ssize_t w;

	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	if (pthread_sigmask(SIG_BLOCK, &pipe_set, &old) != 0)
		return send(fd, buf, n, flags);
	if (sigpending(&pending) == 0)
		had = sigismember(&pending, SIGPIPE) == 1;
	w = send(fd, buf, n, flags);
	e = errno;
	if (w < 0 && e == EPIPE && !had && sigpending(&pending) == 0 &&
	    sigismember(&pending, SIGPIPE) == 1)
		sigwait(&pipe_set, &sig);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return w;
}
#endif

#if !defined(GR_HAVE_SYNCFS)
int compat_syncfs(int fd)
{
	sync();
#if defined(GR_HAVE_F_FULLFSYNC)
	/* macOS's fsync leaves the drive's cache; this empties it. */
	if (fcntl(fd, F_FULLFSYNC) == 0)
		return 0;
#endif
	/* A folder's fsync may fail with EINVAL on some systems: sync() ran. */
	if (fsync(fd) < 0 && errno != EINVAL)
		return -1;
	return 0;
}
#endif

#if !defined(GR_HAVE_SYNC_FILE_RANGE)
void compat_writeback(int fd, off_t off, off_t len)
{
	(void)fd;
	(void)off;
	(void)len;
}
#endif

#if !defined(GR_HAVE_F_SETPIPE_SZ)
void compat_pipe_grow(int fd, int size)
{
	(void)fd;
	(void)size;
}
#endif

#if !defined(GR_HAVE_COPY_FILE_RANGE)
#define COPY_BUF (1u << 16)
ssize_t compat_copy_file_range(int in, off_t *off_in, int out, off_t *off_out, size_t len)
{
	char buf[COPY_BUF];
	size_t k = len < sizeof(buf) ? len : sizeof(buf), done = 0;
	ssize_t g;

	do
		g = pread(in, buf, k, *off_in);
	while (g < 0 && errno == EINTR);
	if (g <= 0)
		return g;
	while (done < (size_t)g) {
		ssize_t w = pwrite(out, buf + done, (size_t)g - done, *off_out + (off_t)done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			if (!done)
				return w < 0 ? -1 : (errno = EIO, -1);
			break;
		}
		done += (size_t)w;
	}
	*off_in += (off_t)done;
	*off_out += (off_t)done;
	return (ssize_t)done;
}
#endif

/* ---- the program's own path ---- */

#if !defined(GR_HAVE_PROC_SELF_EXE) && !defined(GR_HAVE_NSGETEXECUTABLEPATH) && \
	!defined(GR_HAVE_KERN_PROC_PATHNAME)
#define SELF_FROM_ARGV0 1
static char *self_path; /* resolved by compat_set_argv0, or NULL */

/* argv[0] with a slash is a path (from the folder we started in, which is
 * now); a bare name is what the shell found first on PATH. */
static char *find_self(const char *argv0)
{
	const char *path = getenv("PATH"), *p, *end;
	char cand[PATH_MAX];
	struct stat st;

	if (!argv0 || !*argv0)
		return NULL;
	if (strchr(argv0, '/'))
		return realpath(argv0, NULL);
	for (p = path ? path : "/usr/bin:/bin"; ; p = end + 1) {
		int n;

		end = strchr(p, ':');
		if (!end)
			end = p + strlen(p);
		/* An empty entry is the current folder. */
		n = end > p ? snprintf(cand, sizeof(cand), "%.*s/%s", (int)(end - p), p, argv0)
			    : snprintf(cand, sizeof(cand), "./%s", argv0);
		if (n > 0 && (size_t)n < sizeof(cand) && stat(cand, &st) == 0 &&
		    S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
			return realpath(cand, NULL);
		if (!*end)
			return NULL;
	}
}
#endif

void compat_set_argv0(const char *argv0)
{
#if defined(SELF_FROM_ARGV0)
	free(self_path);
	self_path = find_self(argv0);
#else
	(void)argv0;
#endif
}

char *compat_self_exe(char *buf, size_t size)
{
#if defined(GR_HAVE_PROC_SELF_EXE)
	ssize_t n;

	if (size < 2) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	n = readlink("/proc/self/exe", buf, size - 1);
	if (n <= 0)
		return NULL;
	if ((size_t)n >= size - 1) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	buf[n] = 0;
	return buf;
#elif defined(GR_HAVE_NSGETEXECUTABLEPATH)
	char raw[PATH_MAX], *real;
	uint32_t n = sizeof(raw);

	if (_NSGetExecutablePath(raw, &n) != 0 || !(real = realpath(raw, NULL))) {
		errno = errno ? errno : ENAMETOOLONG;
		return NULL;
	}
	if (strlen(real) >= size) {
		free(real);
		errno = ENAMETOOLONG;
		return NULL;
	}
	memcpy(buf, real, strlen(real) + 1);
	free(real);
	return buf;
#elif defined(GR_HAVE_KERN_PROC_PATHNAME)
	int mib[4] = { CTL_KERN, KERN_PROC, KERN_PROC_PATHNAME, -1 };
	size_t n = size;

	if (sysctl(mib, 4, buf, &n, NULL, 0) < 0)
		return NULL;
	return buf;
#else
	if (!self_path) {
		errno = ENOENT;
		return NULL;
	}
	if (strlen(self_path) >= size) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	memcpy(buf, self_path, strlen(self_path) + 1);
	return buf;
#endif
}

#if !defined(GR_HAVE_GETTID)
/* This process's id and a number per thread: unique among the threads of
 * every process while they run (pid below 2^32, threads below 2^31). */
unsigned long long compat_thread_id(void)
{
	static unsigned long next;
	static _Thread_local unsigned long mine;

	if (!mine)
		mine = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
	return (unsigned long long)(uint32_t)getpid() << 31 | (mine & 0x7fffffffu);
}
#endif

#if !defined(GR_HAVE_EXECVPE)
int compat_execvpe(const char *file, char *const argv[], char *const envp[])
{
	environ = (char **)envp;
	return execvp(file, argv);
}
#endif

#if !defined(GR_HAVE_MEMRCHR)
void *compat_memrchr(const void *s, int c, size_t n)
{
	const unsigned char *p = (const unsigned char *)s + n;

	while (p > (const unsigned char *)s)
		if (*--p == (unsigned char)c)
			return (void *)p;
	return NULL;
}
#endif

#if !defined(GR_HAVE_GNU_QSORT_R)
/* A top-down merge sort through tmp (n * size bytes), as git's
 * compat/qsort_s.c: stable, O(n log n), no recursion deeper than log n. */
static void msort(char *b, size_t n, size_t size, char *tmp,
		  int (*cmp)(const void *, const void *, void *), void *arg)
{
	size_t n1 = n / 2, n2 = n - n1;
	char *b1 = b, *b2 = b + n1 * size, *t = tmp;

	if (n <= 1)
		return;
	msort(b1, n1, size, tmp, cmp, arg);
	msort(b2, n2, size, tmp, cmp, arg);
	while (n1 && n2) {
		if (cmp(b1, b2, arg) <= 0) {
			memcpy(t, b1, size);
			b1 += size;
			n1--;
		} else {
			memcpy(t, b2, size);
			b2 += size;
			n2--;
		}
		t += size;
	}
	if (n1)
		memcpy(t, b1, n1 * size);
	memcpy(b, tmp, (n - n2) * size);
}

void compat_qsort_r(void *base, size_t n, size_t size,
		    int (*cmp)(const void *, const void *, void *), void *arg)
{
	char small[1024], *tmp = small;

	if (n < 2 || !size)
		return;
	if (n > SIZE_MAX / size)
		abort();
	if (n * size > sizeof(small) && !(tmp = malloc(n * size))) {
		/* No memory: an insertion sort in place, slow but right. */
		char *b = base, *x = small;
		if (size > sizeof(small))
			abort();
		for (size_t i = 1; i < n; i++) {
			size_t j = i;
			memcpy(x, b + i * size, size);
			while (j > 0 && cmp(b + (j - 1) * size, x, arg) > 0) {
				memcpy(b + j * size, b + (j - 1) * size, size);
				j--;
			}
			memcpy(b + j * size, x, size);
		}
		return;
	}
	msort(base, n, size, tmp, cmp, arg);
	if (tmp != small)
		free(tmp);
}
#endif

#if !defined(GR_HAVE_EXPLICIT_BZERO)
#if defined(GR_HAVE_MEMSET_S)
void compat_explicit_bzero(void *p, size_t n)
{
	(void)memset_s(p, n, 0, n);
}
#else
/* Called through a volatile pointer, memset cannot be proven dead
 * (OpenSSH's openbsd-compat does the same). */
static void *(*volatile wipe)(void *, int, size_t) = memset;

void compat_explicit_bzero(void *p, size_t n)
{
	wipe(p, 0, n);
}
#endif
#endif

void compat_tcp_quickack(int fd)
{
#if defined(GR_HAVE_TCP_QUICKACK)
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
#else
	(void)fd;
#endif
}

#if defined(GR_HAVE_INOTIFY)
int compat_watch_init(void)
{
	return inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
}

int compat_watch_add(int fd, const char *path)
{
	/* IN_MODIFY too, not only IN_CLOSE_WRITE: a file kept open (mmap'd,
	 * appended to) is a change the caller must not miss. */
	return inotify_add_watch(fd, path, IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
				 IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF |
				 IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK);
}

static unsigned watch_flags(uint32_t m)
{
	unsigned f = 0;

	if (m & IN_ISDIR)
		f |= COMPAT_WATCH_DIR;
	if (m & (IN_CREATE | IN_MOVED_TO))
		f |= COMPAT_WATCH_NEW;
	if (m & (IN_DELETE | IN_MOVED_FROM))
		f |= COMPAT_WATCH_OLD;
	if (m & (IN_MOVED_FROM | IN_MOVED_TO))
		f |= COMPAT_WATCH_MOVED;
	if (m & (IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB))
		f |= COMPAT_WATCH_CHANGED;
	if (m & (IN_DELETE_SELF | IN_MOVE_SELF))
		f |= COMPAT_WATCH_SELF;
	if (m & IN_IGNORED)
		f |= COMPAT_WATCH_GONE;
	if (m & IN_Q_OVERFLOW)
		f |= COMPAT_WATCH_OVERFLOW;
	return f;
}

int compat_watch_read(int fd, void (*each)(void *arg, int wd, unsigned flags, const char *name),
		      void *arg)
{
	/* Aligned for struct inotify_event; one event is at most
	 * sizeof(event) + NAME_MAX + 1 bytes, so a read never fails EINVAL. */
	char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
	int count = 0;

	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return count;
		if (n <= 0)
			return n == 0 ? count : -1;
		for (ssize_t off = 0; off + (ssize_t)sizeof(struct inotify_event) <= n;) {
			const struct inotify_event *e = (const void *)(buf + off);
			size_t len = sizeof(*e) + e->len;
			if (off + (ssize_t)len > n)
				break;
			/* The kernel pads the name with NULs; len 0: no name. */
			each(arg, e->wd, watch_flags(e->mask), e->len ? e->name : "");
			count++;
			off += (ssize_t)len;
		}
	}
}
#else
int compat_watch_init(void)
{
	errno = ENOSYS;
	return -1;
}

int compat_watch_add(int fd, const char *path)
{
	(void)fd;
	(void)path;
	errno = ENOSYS;
	return -1;
}

int compat_watch_read(int fd, void (*each)(void *arg, int wd, unsigned flags, const char *name),
		      void *arg)
{
	(void)fd;
	(void)each;
	(void)arg;
	errno = ENOSYS;
	return -1;
}
#endif

int compat_peer_cred(int fd, uid_t *uid, pid_t *pid)
{
#if defined(SO_PEERCRED) && defined(__linux__)
	struct ucred uc;
	socklen_t len = sizeof(uc);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0 || len != sizeof(uc))
		return -1;
	*uid = uc.uid;
	*pid = uc.pid;
	return 0;
#elif defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__)
	gid_t gid;

	if (getpeereid(fd, uid, &gid) < 0)
		return -1;
	*pid = 0;
	return 0;
#else
	(void)fd;
	(void)uid;
	(void)pid;
	return -1;
#endif
}

int compat_tmpfile_in(const char *dir)
{
	static const char name[] = "/spool.XXXXXX";
	size_t n = strlen(dir);
	char *tmp;
	int fd;

#if defined(GR_HAVE_O_TMPFILE)
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
#endif
	if (!(tmp = malloc(n + sizeof(name))))
		return -1;
	memcpy(tmp, dir, n);
	memcpy(tmp + n, name, sizeof(name));
	if ((fd = mkostemp(tmp, O_CLOEXEC)) >= 0)
		unlink(tmp);
	free(tmp);
	return fd;
}

const char *compat_exec_self(void)
{
#if defined(GR_HAVE_PROC_SELF_EXE)
	return "/proc/self/exe";
#else
	static char path[PATH_MAX];

	return compat_self_exe(path, sizeof(path)) ? path : "";
#endif
}
