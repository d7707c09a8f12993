/* One sync at a time per project: .gpurun/sync.lock, held with flock()
 * by whatever syncs (gpurun sync, each sync of sync --watch, train from
 * its sync until its job has started, the pre-push hook). Another gpurun
 * waits for it, bounded, and says for whom: a `train` started while the
 * watcher sends an edit starts the job on what that sync committed.
 * flock, not fcntl: fcntl's locks belong to the process and vanish when
 * any descriptor of the file closes; flock's go with the one open file,
 * and with the process when it dies (no stale lock after a crash). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "sync.h"
#include "sync_index.h"
#include "sync_steps.h"

/* This process's hold: nested takes (train's, then its sync_project's)
 * count, so the inner one neither waits for the outer nor frees it. */
static int lock_fd = -1, lock_depth;

/* The holder's pid, as it wrote it (0 when unknown). */
static long holder_pid(int fd)
{
	char buf[32];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	long pid;
	char *end;

	if (n <= 0)
		return 0;
	buf[n] = 0;
	errno = 0;
	pid = strtol(buf, &end, 10);
	return errno || end == buf || pid <= 0 ? 0 : pid;
}

static void nap_ms(int ms)
{
	struct timespec ts = { 0, (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

int sync_lock_take(const char *root, int wait_ms, const struct sync_show *show, void *arg,
		   struct gr_err *err)
{
	uint64_t start = now_ms();
	long pid = 0;
	int fd, said = 0, rc;

	if (lock_depth > 0) {
		lock_depth++;
		return 0;
	}
	if ((rc = sync_state_dir(root, "", err)) < 0)
		return rc;
	char *path = xasprintf("%s/.gpurun/sync.lock", root);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0) {
		rc = gr_errf(err, GR_EIO, "cannot open '.gpurun/sync.lock': %s", strerror(errno));
		free(path);
		return rc;
	}
	free(path);
	for (;;) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			break;
		if (errno != EWOULDBLOCK && errno != EINTR) {
			rc = gr_errf(err, GR_EIO, "cannot lock '.gpurun/sync.lock': %s",
				     strerror(errno));
			close(fd);
			return rc;
		}
		long p = holder_pid(fd);
		if (p)
			pid = p;
		if (!said && show) {
			if (pid)
				sync_say(show, arg, "waiting for another sync of this project to "
					 "finish (gpurun, pid %ld)", pid);
			else
				sync_say(show, arg, "waiting for another sync of this project to "
					 "finish");
			said = 1;
		}
		if (now_ms() - start >= (uint64_t)wait_ms) {
			if (pid)
				gr_errf(err, GR_ECONFLICT, "another sync of this project (gpurun, pid "
					"%ld) did not finish within %d s", pid, wait_ms / 1000);
			else
				gr_errf(err, GR_ECONFLICT, "another sync of this project did not "
					"finish within %d s", wait_ms / 1000);
			gr_hintf(err, "let it finish, or stop it; GPURUN_IO_TIMEOUT sets how "
				 "long gpurun waits");
			close(fd);
			return GR_ECONFLICT;
		}
		nap_ms(20);
	}
	/* Who holds it, for the next one to wait (a hint only). */
	char line[32];
	int n = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, line, (size_t)n, 0) != n) {
		/* a waiter then names no pid */
	}
	lock_fd = fd;
	lock_depth = 1;
	return 0;
}

void sync_lock_release(void)
{
	if (lock_depth <= 0 || --lock_depth > 0)
		return;
	/* (The pid stays: the next holder overwrites it.) */
	close(lock_fd); /* drops the flock */
	lock_fd = -1;
}
