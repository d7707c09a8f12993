/* compat/: each wrapper does what the Linux call does, native or (make
 * PORTABLE=1) through its POSIX fallback; the first case says which ran.
 * Linux's own /proc serves as the oracle for the program's path. */
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compat.h"
#include "t.h"

static const char *argv0;

static int is_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);
	return fl >= 0 && (fl & FD_CLOEXEC);
}

static int is_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	return fl >= 0 && (fl & O_NONBLOCK);
}

/* Under GR_PORTABLE no native call is left. */
static void test_mode(void)
{
#if defined(GR_PORTABLE)
#if defined(GR_HAVE_PIPE2) || defined(GR_HAVE_ACCEPT4) || defined(GR_HAVE_SOCK_CLOEXEC) || \
	defined(GR_HAVE_MSG_NOSIGNAL) || defined(GR_HAVE_SYNCFS) || defined(GR_HAVE_COPY_FILE_RANGE) || \
	defined(GR_HAVE_PROC_SELF_EXE) || defined(GR_HAVE_GNU_QSORT_R) || defined(GR_HAVE_MEMRCHR) || \
	defined(GR_HAVE_GETTID) || defined(GR_HAVE_EXECVPE) || defined(GR_HAVE_EXPLICIT_BZERO) || \
	defined(GR_HAVE_SYNC_FILE_RANGE) || defined(GR_HAVE_F_SETPIPE_SZ) || defined(GR_HAVE_INOTIFY) || \
	defined(GR_HAVE_O_TMPFILE)
	CHECK(!"a GR_HAVE_* survived GR_PORTABLE");
#endif
	printf("# compat: the POSIX fallbacks (GR_PORTABLE)\n");
#else
	printf("# compat: the native calls\n");
#endif
}

static void test_pipe(void)
{
	int p[2];

	for (int nb = 0; nb < 2; nb++) {
		CHECK_EQ_INT(compat_pipe_cloexec(p, nb), 0);
		CHECK(is_cloexec(p[0]) && is_cloexec(p[1]));
		CHECK_EQ_INT(is_nonblock(p[0]), nb);
		CHECK_EQ_INT(is_nonblock(p[1]), nb);
		close(p[0]);
		close(p[1]);
	}
	compat_pipe_grow(p[0], 1 << 20); /* closed: must not crash */
}

static void test_sockets(void)
{
	struct sockaddr_in a = { 0 };
	socklen_t al = sizeof(a);
	int l, c, s, sv[2];

	CHECK_EQ_INT(compat_socketpair_cloexec(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	CHECK(is_cloexec(sv[0]) && is_cloexec(sv[1]) && !is_nonblock(sv[0]));
	close(sv[0]);
	close(sv[1]);

	l = compat_socket_cloexec(AF_INET, SOCK_STREAM, 0, 1);
	CHECK(l >= 0 && is_cloexec(l) && is_nonblock(l));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	CHECK(bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 4) == 0);
	CHECK(getsockname(l, (struct sockaddr *)&a, &al) == 0);
	/* Nothing waiting: EAGAIN, not a block. */
	CHECK(compat_accept_cloexec(l, NULL, NULL, 1) < 0 && errno == EAGAIN);
	for (int nb = 0; nb < 2; nb++) {
		c = compat_socket_cloexec(AF_INET, SOCK_STREAM, 0, 0);
		CHECK(c >= 0 && is_cloexec(c) && !is_nonblock(c));
		CHECK(connect(c, (struct sockaddr *)&a, sizeof(a)) == 0);
		do
			s = compat_accept_cloexec(l, NULL, NULL, nb);
		while (s < 0 && errno == EAGAIN);
		/* Blocking unless asked, though the listener is not (BSD's
		 * accept would pass that on). */
		CHECK(s >= 0 && is_cloexec(s));
		CHECK_EQ_INT(is_nonblock(s), nb);
		close(s);
		close(c);
	}
	close(l);
}

/* SIGPIPE at its default (death): a send to a closed peer must come back
 * as EPIPE, leave no SIGPIPE pending, and kill nothing. */
static void test_send_nosignal(void)
{
	struct sigaction dfl = { 0 }, old;
	sigset_t pend;
	int sv[2];
	ssize_t w = 0;

	dfl.sa_handler = SIG_DFL;
	sigaction(SIGPIPE, &dfl, &old);
	CHECK_EQ_INT(compat_socketpair_cloexec(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	CHECK_EQ_INT(compat_send_nosignal(sv[0], "x", 1, 0), 1);
	close(sv[1]);
	for (int i = 0; i < 3 && w >= 0; i++)
		w = compat_send_nosignal(sv[0], "xyz", 3, 0);
	CHECK(w < 0 && errno == EPIPE);
	sigemptyset(&pend);
	CHECK(sigpending(&pend) == 0 && !sigismember(&pend, SIGPIPE));
	close(sv[0]);
	sigaction(SIGPIPE, &old, NULL);
}

/* More than the fallback's 64 KiB buffer, from and to offsets, the files'
 * own offsets untouched. */
static void test_copy_file_range(void)
{
	char in[] = "/tmp/gpurun-compat-in.XXXXXX", out[] = "/tmp/gpurun-compat-out.XXXXXX";
	size_t n = (1u << 20) + 123, left;
	unsigned char *a = malloc(n), *b = calloc(1, n);
	int fi = mkstemp(in), fo = mkstemp(out);
	off_t oi = 100, oo = 7;

	for (size_t i = 0; i < n; i++)
		a[i] = (unsigned char)(i * 7 + (i >> 9));
	CHECK(fi >= 0 && fo >= 0 && write(fi, a, n) == (ssize_t)n);
	CHECK(lseek(fi, 0, SEEK_SET) == 0);
	left = n - 100;
	while (left) {
		ssize_t r = compat_copy_file_range(fi, &oi, fo, &oo, left);
		if (r <= 0) {
			CHECK(r > 0);
			break;
		}
		left -= (size_t)r;
	}
	CHECK_EQ_INT(oi, (off_t)n);
	CHECK_EQ_INT(oo, (off_t)(n - 100 + 7));
	CHECK_EQ_INT(lseek(fi, 0, SEEK_CUR), 0);
	CHECK_EQ_INT(lseek(fo, 0, SEEK_CUR), 0);
	CHECK(pread(fo, b, n - 100, 7) == (ssize_t)(n - 100) && !memcmp(a + 100, b, n - 100));
	/* At the end: 0. */
	CHECK_EQ_INT(compat_copy_file_range(fi, &oi, fo, &oo, 10), 0);
	compat_writeback(fo, 0, (off_t)n);
	CHECK_EQ_INT(compat_syncfs(fo), 0);
	close(fi);
	close(fo);
	unlink(in);
	unlink(out);
	free(a);
	free(b);
}

/* A file with no name: it reads back what was written, is close-on-exec,
 * and leaves the folder as empty as it was, natively and through the
 * fallback. A folder that does not exist: -1. */
static void test_tmpfile(void)
{
	char dir[] = "/tmp/gpurun-compat-tmp.XXXXXX", buf[6] = { 0 };
	int fd;

	CHECK(mkdtemp(dir) != NULL);
	fd = compat_tmpfile_in(dir);
	CHECK(fd >= 0 && is_cloexec(fd));
	CHECK(write(fd, "spool", 5) == 5 && pread(fd, buf, 5, 0) == 5 && !strcmp(buf, "spool"));
	CHECK_EQ_INT(rmdir(dir), 0); /* (nothing in it: no name was left) */
	close(fd);
	CHECK(mkdir(dir, 0700) == 0);
	char sub[sizeof(dir) + 8];
	snprintf(sub, sizeof(sub), "%s/nope", dir);
	CHECK_EQ_INT(compat_tmpfile_in(sub), -1);
	rmdir(dir);
}

/* The path of this very binary, as /proc says; from argv[0] given as a
 * path and as a bare name on PATH, the folder changed afterwards. */
static void test_self_exe(void)
{
	char want[PATH_MAX], got[PATH_MAX], dir[PATH_MAX], *w, *slash;
	ssize_t n = readlink("/proc/self/exe", want, sizeof(want) - 1);
	const char *old_path = getenv("PATH");
	char *keep_path = old_path ? strdup(old_path) : NULL;
	char cwd[PATH_MAX];

	if (n <= 0)
		SKIP("no /proc/self/exe to compare with");
	want[n] = 0;
	CHECK(getcwd(cwd, sizeof(cwd)) != NULL);
	compat_set_argv0(argv0);
	CHECK_STR(compat_self_exe(got, sizeof(got)), want);
	CHECK(compat_self_exe(got, 4) == NULL && errno == ENAMETOOLONG);

	/* A bare name found on PATH, and the folder changed after. */
	snprintf(dir, sizeof(dir), "%s", want);
	slash = strrchr(dir, '/');
	*slash = 0;
	setenv("PATH", dir, 1);
	compat_set_argv0(slash + 1);
	CHECK(chdir("/") == 0);
	w = compat_self_exe(got, sizeof(got));
	CHECK_STR(w, want);
	CHECK(chdir(cwd) == 0);
	if (keep_path)
		setenv("PATH", keep_path, 1);
	free(keep_path);
	compat_set_argv0(argv0);
}

static int by_key(const void *a, const void *b, void *arg)
{
	const int *keys = arg;
	int x = keys[*(const int *)a], y = keys[*(const int *)b];

	return x < y ? -1 : x > y;
}

static void test_sort_and_memrchr(void)
{
	static int keys[5000], idx[5000];
	const char s[] = "a/b/c";

	for (size_t n = 0; n <= 5000; n = n ? n * 10 : 5) {
		for (size_t i = 0; i < n; i++) {
			keys[i] = (int)((i * 2654435761u) % 997);
			idx[i] = (int)i;
		}
		compat_qsort_r(idx, n, sizeof(int), by_key, keys);
		for (size_t i = 1; i < n; i++)
			CHECK(keys[idx[i - 1]] <= keys[idx[i]]);
		if (n >= 5000)
			break;
	}
	CHECK(compat_memrchr(s, '/', 5) == s + 3);
	CHECK(compat_memrchr(s, '/', 3) == s + 1);
	CHECK(compat_memrchr(s, 'x', 5) == NULL);
	CHECK(compat_memrchr(s, 'a', 0) == NULL);
}

static void *tid_main(void *arg)
{
	*(unsigned long long *)arg = compat_thread_id();
	return NULL;
}

static void test_thread_id(void)
{
	unsigned long long mine = compat_thread_id(), other = 0;
	pthread_t th;

	CHECK(mine != 0 && mine == compat_thread_id());
	CHECK(pthread_create(&th, NULL, tid_main, &other) == 0 && pthread_join(th, NULL) == 0);
	CHECK(other != 0 && other != mine);
}

static void test_execvpe_and_bzero(void)
{
	char secret[32];
	int st = -1;
	pid_t pid;

	memset(secret, 'k', sizeof(secret));
	compat_explicit_bzero(secret, sizeof(secret));
	for (size_t i = 0; i < sizeof(secret); i++)
		CHECK(secret[i] == 0);

	pid = fork();
	if (pid == 0) {
		char *const av[] = { "sh", "-c", "test \"$GR_COMPAT_X\" = yes", NULL };
		char *const env[] = { "GR_COMPAT_X=yes", "PATH=/usr/bin:/bin", NULL };
		compat_execvpe("sh", av, env);
		_exit(127);
	}
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_mtime_nsec(void)
{
	char p[] = "/tmp/gpurun-compat-t.XXXXXX";
	int fd = mkstemp(p);
	struct timespec ts[2] = { { 1000, 123456789 }, { 1000, 123456789 } };
	struct stat st;

	CHECK(fd >= 0 && futimens(fd, ts) == 0 && fstat(fd, &st) == 0);
	CHECK_EQ_INT(st.st_mtime, 1000);
	CHECK_EQ_INT(GR_ST_MTIME_NSEC(&st), 123456789);
	close(fd);
	unlink(p);
}

/* A thread makes pipes while this one forks: no child may see a pipe
 * without FD_CLOEXEC (the fallback's window, closed by its lock). */
static volatile int churn_stop;

static void *churn(void *arg)
{
	(void)arg;
	while (!churn_stop) {
		int p[2];
		if (compat_pipe_cloexec(p, 0) == 0) {
			close(p[0]);
			close(p[1]);
		}
	}
	return NULL;
}

static void test_fork_race(void)
{
	static char inherited[1024];
	pthread_t th;
	int bad = 0;

	/* What we were started with (a test runner's fds) does not count. */
	for (int fd = 3; fd < 1024; fd++) {
		int fl = fcntl(fd, F_GETFD);
		inherited[fd] = fl >= 0 && !(fl & FD_CLOEXEC);
	}
	churn_stop = 0;
	CHECK(pthread_create(&th, NULL, churn, NULL) == 0);
	for (int i = 0; i < 300 && !bad; i++) {
		int st;
		pid_t pid = fork();
		if (pid == 0) {
			for (int fd = 3; fd < 1024; fd++) {
				int fl = fcntl(fd, F_GETFD);
				if (fl >= 0 && !(fl & FD_CLOEXEC) && !inherited[fd])
					_exit(1);
			}
			_exit(0);
		}
		if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	churn_stop = 1;
	pthread_join(th, NULL);
	CHECK(!bad);
}

/* The folder watcher: inotify's events as flags where there is inotify,
 * ENOSYS elsewhere (sync --watch then scans). */
struct seen {
	unsigned all;       /* every flag seen */
	unsigned of[4];     /* flags seen for "f", "d", "g", "" */
	int wd_self;
};

static void on_event(void *arg, int wd, unsigned flags, const char *name)
{
	struct seen *s = arg;
	static const char *const names[] = { "f", "d", "g", "" };

	s->all |= flags;
	for (int i = 0; i < 4; i++)
		if (!strcmp(name, names[i]))
			s->of[i] |= flags;
	if (!*name)
		s->wd_self = wd;
}

/* Read events for up to 2 s until want is among what was seen for name i. */
static void read_until(int fd, struct seen *s, int i, unsigned want)
{
	for (int t = 0; t < 200 && (s->of[i] & want) != want; t++) {
		struct pollfd p = { fd, POLLIN, 0 };
		if (poll(&p, 1, 10) > 0)
			CHECK(compat_watch_read(fd, on_event, s) >= 0);
	}
}

static void test_watch(void)
{
	char dir[] = "/tmp/gpurun-test-watch.XXXXXX", path[128], path2[128];
	struct seen s = { 0 };
	int fd, wd;

	CHECK(mkdtemp(dir) != NULL);
	fd = compat_watch_init();
#if !defined(GR_HAVE_INOTIFY)
	CHECK_EQ_INT(fd, -1);
	CHECK_EQ_INT(errno, ENOSYS);
	CHECK_EQ_INT(compat_watch_add(3, dir), -1);
	CHECK_EQ_INT(compat_watch_read(3, on_event, &s), -1);
	rmdir(dir);
	return;
#endif
	CHECK(fd >= 0);
	CHECK(is_cloexec(fd) && is_nonblock(fd));
	CHECK_EQ_INT(compat_watch_read(fd, on_event, &s), 0); /* nothing yet, no block */
	wd = compat_watch_add(fd, dir);
	CHECK(wd >= 0);
	CHECK_EQ_INT(compat_watch_add(fd, dir), wd);
	snprintf(path, sizeof(path), "%s/f", dir);
	CHECK(compat_watch_add(fd, path) < 0); /* not a folder (and not there) */
	int f = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	CHECK(f >= 0);
	CHECK(write(f, "x", 1) == 1);
	close(f);
	read_until(fd, &s, 0, COMPAT_WATCH_NEW | COMPAT_WATCH_CHANGED);
	CHECK(!(s.of[0] & COMPAT_WATCH_DIR));
	snprintf(path, sizeof(path), "%s/d", dir);
	CHECK_EQ_INT(mkdir(path, 0755), 0);
	read_until(fd, &s, 1, COMPAT_WATCH_NEW | COMPAT_WATCH_DIR);
	snprintf(path2, sizeof(path2), "%s/g", dir);
	CHECK_EQ_INT(rename(path, path2), 0);
	read_until(fd, &s, 1, COMPAT_WATCH_OLD | COMPAT_WATCH_MOVED);
	read_until(fd, &s, 2, COMPAT_WATCH_NEW | COMPAT_WATCH_MOVED | COMPAT_WATCH_DIR);
	CHECK_EQ_INT(rmdir(path2), 0);
	snprintf(path, sizeof(path), "%s/f", dir);
	CHECK_EQ_INT(unlink(path), 0);
	read_until(fd, &s, 0, COMPAT_WATCH_OLD);
	CHECK(!(s.of[0] & COMPAT_WATCH_MOVED));
	CHECK_EQ_INT(rmdir(dir), 0);
	read_until(fd, &s, 3, COMPAT_WATCH_SELF | COMPAT_WATCH_GONE);
	CHECK_EQ_INT(s.wd_self, wd);
	CHECK(!(s.all & COMPAT_WATCH_OVERFLOW));
	close(fd);
}

int main(int argc, char **argv)
{
	(void)argc;
	argv0 = argv[0];
	compat_set_argv0(argv0);
	RUN(test_mode);
	RUN(test_pipe);
	RUN(test_sockets);
	RUN(test_send_nosignal);
	RUN(test_copy_file_range);
	RUN(test_tmpfile);
	RUN(test_self_exe);
	RUN(test_sort_and_memrchr);
	RUN(test_thread_id);
	RUN(test_execvpe_and_bzero);
	RUN(test_mtime_nsec);
	RUN(test_fork_race);
	RUN(test_watch);
	return T_DONE();
}
