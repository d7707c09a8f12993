/* The supervisor's signals, and its writers of the job's log and status
 * (see job_super_int.h): output through a pty or a pipe into the log, a
 * full disk counted and said rather than dropped, and the status that
 * records the end written even then. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job_store.h"
#include "job_super_int.h"
#include "sig_wake.h"

struct sig_wake sup_wake = { .fd = { -1, -1 } };

uint64_t sup_wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A full disk must not drop output silently (issue 29): what the log
 * could not take is counted, and once there is room again the log gets
 * "[gpurun] N bytes of output lost: no space left on the host" before
 * the next output; a count still unsaid at the end goes into the status
 * (log_lost=N), which needs no room (status_put). */
uint64_t sup_log_lost;

static int log_room_err(int e)
{
	return e == ENOSPC || e == EDQUOT;
}

/* Write all of buf, or say how much did not go (0: all of it went). */
static size_t log_put(int log_fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t w = write(log_fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return n;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Say what was lost, if anything was: 0 once said (or nothing to say). */
static int log_lost_say(int log_fd)
{
	char m[128];

	if (!sup_log_lost)
		return 0;
	snprintf(m, sizeof(m), "\n[gpurun] %llu bytes of output lost: no space left on the host\n",
		 (unsigned long long)sup_log_lost);
	if (log_put(log_fd, m, strlen(m)))
		return -1;
	sup_log_lost = 0;
	return 0;
}

/* A line of gpurun's own in the job's log. */
void sup_note(struct sup *s, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	sb_adds(&sb, "[gpurun] ");
	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	sb_adds(&sb, "\n");
	sup_log_write(s->log_fd, sb.buf, sb.len);
	sb_release(&sb);
}

/* A full disk when the job ends must not turn its exit into "lost"
 * (issue 29). At the start the supervisor takes a block for the status
 * (.gpurun/status.room); at the end, when the status cannot be written
 * the usual way, it goes into that block in place (no new block needed)
 * and the file is renamed to .gpurun/status. Failing even that (no room
 * was taken), the supervisor waits for room, up to sup_status_wait_ms,
 * holding the job's lock: the job reads "running" meanwhile, not lost. */
#define STATUS_ROOM 4096
uint64_t sup_status_wait_ms = 7ULL * 24 * 3600 * 1000;

void sup_status_room_take(const char *dir)
{
	char *p = job_meta(dir, "status.room");
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd >= 0) {
		if (posix_fallocate(fd, 0, STATUS_ROOM) != 0 || fsync(fd) < 0)
			unlink(p);
		close(fd);
	}
	free(p);
}

/* Write the status text t: 0, or -1 with err set. */
static int status_put(const char *dir, const char *t, struct gr_err *err)
{
	char *room = job_meta(dir, "status.room"), *p = job_meta(dir, "status");
	size_t n = strlen(t);
	int rc = -1, fd;

	if (job_meta_write(dir, "status", t, err) == 0) {
		unlink(room);
		rc = 0;
	} else if ((fd = open(room, O_WRONLY | O_CLOEXEC)) >= 0) {
		int ok = n <= STATUS_ROOM && pwrite(fd, t, n, 0) == (ssize_t)n &&
			 ftruncate(fd, (off_t)n) == 0 && fsync(fd) == 0;
		if (close(fd) == 0 && ok && rename(room, p) == 0)
			rc = 0;
	}
	free(room);
	free(p);
	return rc;
}

void sup_write_status(struct sup *s, int status, enum job_step step)
{
	struct gr_err err = { 0 };
	uint64_t until = now_ms() + sup_status_wait_ms;
	struct strbuf t = STRBUF_INIT;

	for (int said = 0;;) {
		/* What the log lost is said there first if it can be, else
		 * in the status: the status goes last. */
		log_lost_say(s->log_fd);
		sb_reset(&t);
		sb_addf(&t, "exit=%d\nsignal=%d\nend_ms=%llu\nphase=%s\n",
			WIFEXITED(status) ? WEXITSTATUS(status) : 0,
			WIFSIGNALED(status) ? WTERMSIG(status) : 0,
			(unsigned long long)sup_wall_ms(), job_step_names[step]);
		if (s->status_extra && *s->status_extra)
			sb_addf(&t, "%s%s", s->status_extra,
				s->status_extra[strlen(s->status_extra) - 1] == '\n' ? "" : "\n");
		if (s->end)
			sb_addf(&t, "end=%s\n", s->end);
		if (s->end_reason)
			sb_addf(&t, "reason=%.*s\n", (int)strcspn(s->end_reason, "\n"), s->end_reason);
		if (s->tries)
			sb_addf(&t, "tries=%u\n", s->tries);
		if (sup_log_lost)
			sb_addf(&t, "log_lost=%llu\n", (unsigned long long)sup_log_lost);
		int rc = status_put(s->dir, t.buf, &err);
		if (rc == 0)
			break;
		if (!said++)
			fprintf(stderr, "gpurun-agent: %s; waiting for room to record the job's end\n",
				err.msg);
		if (now_ms() >= until)
			break;
		sup_nap(2000);
	}
	sb_release(&t);
}

int sup_stop_asked(struct sup *s)
{
	return sig_wake_caught(&sup_wake, SIGTERM) || job_meta_exists(s->dir, "stopped");
}

/* Sleep up to ms, waking early on a signal. */
void sup_nap(int ms)
{
	struct pollfd pfd = { sup_wake.fd[0], POLLIN, 0 };

	if (poll(&pfd, 1, ms) > 0)
		sig_wake_drain(&sup_wake);
}

/* A container's terminal (-t) turns each \n into \r\n; undo that, so a
 * job's log reads the same inside a container as outside (a lone \r, a
 * progress bar's, stays). *cr: a \r ended the last piece; it waits for
 * the next byte, or for sup_flush_cr. Returns the bytes put in out (n + 1). */
size_t sup_crlf_undo(int *cr, const char *in, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (*cr) {
			*cr = 0;
			if (in[i] != '\n')
				out[o++] = '\r';
		}
		if (in[i] == '\r')
			*cr = 1;
		else
			out[o++] = in[i];
	}
	return o;
}

void sup_log_write(int log_fd, const char *buf, size_t n)
{
	size_t left;

	if (!n)
		return;
	if (log_lost_say(log_fd) < 0) {
		sup_log_lost += n;
		return;
	}
	if ((left = log_put(log_fd, buf, n))) {
		if (log_room_err(errno))
			sup_log_lost += left;
		else
			fprintf(stderr, "gpurun-agent: cannot write the log: %s\n", strerror(errno));
	}
}

/* A \r held back by crlf_undo: nothing followed it for a while. */
void sup_flush_cr(int *cr, int log_fd)
{
	if (cr && *cr) {
		*cr = 0;
		sup_log_write(log_fd, "\r", 1);
	}
}

/* Copy what the step wrote from the pty to the log (through crlf_undo
 * when cr is set). Returns 0 while the pty is open, 1 once every writer
 * closed it. A pty read gives at most 4 KiB (the line discipline's
 * buffer): what is there already is gathered up to 64 KiB a write, so
 * the log and its readers see a sixteenth of the writes and wakeups. */
int sup_pump(int master, int log_fd, int *cr)
{
	char buf[65536], out[65537];
	size_t have = 0;

	for (;;) {
		ssize_t n = read(master, buf + have, sizeof(buf) - have);
		int open_ = n < 0 && errno == EAGAIN; /* (errno before the writes) */
		if (n > 0) {
			have += (size_t)n;
			if (have < sizeof(buf))
				continue;
		} else if (n < 0 && errno == EINTR) {
			continue;
		}
		if (have && cr)
			sup_log_write(log_fd, out, sup_crlf_undo(cr, buf, have, out));
		else if (have)
			sup_log_write(log_fd, buf, have);
		have = 0;
		if (n > 0)
			continue;
		return !open_; /* else EIO: no writer left */
	}
}


static uint64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

/* sup_pump() for the output pipe: what ends mid-line waits for the rest up
 * to PIPE_GATHER_US. Returns 0 while the pipe is open, 1 at its end. */
int sup_pump_pipe(int fd, int log_fd)
{
	char buf[65536];
	size_t have = 0;
	uint64_t until = 0;

	for (;;) {
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		if (n > 0) {
			have += (size_t)n;
			if (have == sizeof(buf)) {
				sup_log_write(log_fd, buf, have);
				have = 0;
			}
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		int open_ = n < 0 && errno == EAGAIN; /* else 0 bytes: no writer left */
		if (open_ && have && buf[have - 1] != '\n') {
			uint64_t now = mono_us();
			if (!until)
				until = now + PIPE_GATHER_US;
			struct pollfd pfd = { fd, POLLIN, 0 };
			if (now < until && poll(&pfd, 1, (int)((until - now + 999) / 1000)) > 0)
				continue;
		}
		sup_log_write(log_fd, buf, have);
		return !open_;
	}
}
