/* The agent's JOB_LOG request (job_proto.h): a job's log from a byte
 * offset, then (follow) as it grows. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "agent_job.h"
#include "job_backend.h"
#include "job_proto.h"
#include "job_record.h"
#include "job_store.h"

/* LOG: bytes from an offset, then (follow) as they are written, until the
 * job has ended and every byte is sent. inotify on the job's .gpurun/
 * wakes us when the log grows or the status appears; a 1 s timer asks the
 * job's backend whether it ended another way (a supervisor that died:
 * the job is then "lost"). */

#define LOG_CHUNK 65536
#define LOG_BURST (4u << 20) /* at most this much per wakeup: stay fair */

struct logf {
	uint32_t rid;
	char *dir;
	int fd, ino, follow, fast, cool;
	int status_final; /* the job's backend: a status is its end */
	uint64_t off;
};

/* After a wakeup by inotify, the next ones gather this long: a job that
 * writes fast (4 KiB through its pty at a time) would otherwise wake us
 * for every write and take the CPU its writer needs. A line after a
 * quiet spell still goes at once. */
#define LOG_COOL_MS 5

static void log_timer(struct agent *a, void *arg);
static void log_fast(struct agent *a, void *arg);

static void log_end(struct agent *a, struct logf *l)
{
	struct strbuf pl = STRBUF_INIT;
	struct job_rec r;

	put_u64(&pl, l->off);
	if (job_load(l->dir, &r, 0, NULL) < 0)
		r = (struct job_rec){ 0 };
	job_rec_put(&pl, &r);
	job_rec_clear(&r);
	agent_send(a, GR_MSG_JOB_LOG_END, GR_F_END, l->rid, pl.buf, pl.len);
	sb_release(&pl);
	agent_stream_close(a, l->rid); /* frees l */
}

/* Send what the log holds past l->off. Returns 1 at its end, 0 if more
 * is waiting (out queue full or burst used up). */
static int log_pump(struct agent *a, struct logf *l)
{
	uint8_t buf[LOG_CHUNK + 8];
	size_t sent = 0;

	while (sent < LOG_BURST) {
		if (agent_out_full(a))
			return 0;
		ssize_t n = pread(l->fd, buf + 8, LOG_CHUNK, (off_t)l->off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 1;
		for (int i = 0; i < 8; i++)
			buf[i] = (uint8_t)(l->off >> (56 - 8 * i));
		agent_send(a, GR_MSG_JOB_LOG_DATA, 0, l->rid, buf, (size_t)n + 8);
		l->off += (uint64_t)n;
		sent += (size_t)n;
	}
	return 0;
}

/* Ended another way than by writing its status (lost, or what a
 * scheduler says): the backend decides. */
static int ended_otherwise(const char *dir)
{
	struct job_rec r;
	int ended = job_load(dir, &r, 0, NULL) < 0 || job_rec_ended(&r);

	job_rec_clear(&r);
	return ended;
}

/* Pump, and end the stream when there is nothing more to come. Returns 1
 * if the stream was closed (l is freed). */
static int log_step(struct agent *a, struct logf *l, int check_lost)
{
	/* Look for the end before reading: the supervisor writes the status
	 * after the log's last byte, so reading after seeing it gets all. A
	 * scheduler's backend confirms it (the job may run again). */
	int ended = job_meta_exists(l->dir, "status");
	if (ended && !l->status_final)
		ended = ended_otherwise(l->dir);

	/* A supervisor that died without a status: the job is lost, and
	 * nothing more will come. */
	if (!ended && check_lost)
		ended = ended_otherwise(l->dir);
	int at_end = log_pump(a, l);
	if (at_end && (ended || !l->follow)) {
		log_end(a, l);
		return 1;
	}
	if (!at_end && !l->fast) {
		l->fast = 1;
		agent_add_timer(a, 10, log_fast, l);
	} else if (at_end && l->fast) {
		l->fast = 0;
		agent_del_timer(a, log_fast, l);
	}
	return 0;
}

static void log_fast(struct agent *a, void *arg)
{
	log_step(a, arg, 0);
}

static void log_timer(struct agent *a, void *arg)
{
	log_step(a, arg, 1);
}

static void log_inotify(struct agent *a, int fd, short revents, void *arg);

static void log_rearm(struct agent *a, void *arg)
{
	struct logf *l = arg;

	agent_del_timer(a, log_rearm, l);
	l->cool = 0;
	agent_watch_fd(a, l->ino, POLLIN, log_inotify, l);
	log_step(a, l, 0); /* what came meanwhile; may free l */
}

static void log_inotify(struct agent *a, int fd, short revents, void *arg)
{
	struct logf *l = arg;
	char buf[4096];

	(void)revents;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	if (log_step(a, l, 0))
		return; /* ended: l is freed */
	l->cool = 1;
	agent_watch_fd(a, fd, 0, log_inotify, l);
	agent_add_timer(a, LOG_COOL_MS, log_rearm, l);
}

static void log_close(struct agent *a, uint32_t id, void *st)
{
	struct logf *l = st;

	(void)id;
	if (l->ino >= 0) {
		agent_unwatch_fd(a, l->ino);
		close(l->ino);
	}
	agent_del_timer(a, log_timer, l);
	if (l->fast)
		agent_del_timer(a, log_fast, l);
	if (l->cool)
		agent_del_timer(a, log_rearm, l);
	close(l->fd);
	free(l->dir);
	free(l);
}

static const struct agent_stream_ops log_ops = { .on_close = log_close };

int agent_job_log(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	char *dir = NULL, *p = NULL;
	int rc = agent_find_job(rd, &dir, err);
	uint64_t off = get_u64(rd);
	uint32_t tail = get_u32(rd);
	uint8_t follow = get_u8(rd);
	struct strbuf pl = STRBUF_INIT;
	struct stat st;
	struct logf *l;

	if (rc < 0 || (rc = rd_done(rd, err, "JOB_LOG")) < 0)
		goto out;
	p = job_meta(dir, "log");
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot open the job's log '%s': %s", p, strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	if (tail)
		off = job_tail_offset(p, tail);
	if (off > (uint64_t)st.st_size) {
		close(fd);
		rc = gr_errf(err, GR_EINVAL, "offset %llu is past the log's end (%llu bytes)",
			     (unsigned long long)off, (unsigned long long)st.st_size);
		goto out;
	}
	l = xcalloc(1, sizeof(*l));
	l->rid = rid;
	l->dir = dir;
	dir = NULL;
	l->fd = fd;
	l->off = off;
	l->follow = follow;
	l->ino = -1;
	const struct job_backend *be = job_backend_of(l->dir);
	l->status_final = !be || be->status_final;
	const char *slash = strrchr(l->dir, '/');
	put_str(&pl, slash ? slash + 1 : l->dir);
	put_u64(&pl, off);
	agent_send(a, GR_MSG_JOB_LOG_INFO, 0, rid, pl.buf, pl.len);
	agent_stream_open(a, rid, &log_ops, l);
	if (follow) {
		char *meta = job_meta(l->dir, "");
		l->ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (l->ino >= 0 &&
		    inotify_add_watch(l->ino, meta, IN_MODIFY | IN_MOVED_TO | IN_CREATE) < 0) {
			close(l->ino);
			l->ino = -1;
		}
		free(meta);
		if (l->ino >= 0)
			agent_watch_fd(a, l->ino, POLLIN, log_inotify, l);
		/* Without inotify, poll the log often instead. */
		agent_add_timer(a, l->ino >= 0 ? 1000 : 50, log_timer, l);
	}
	log_step(a, l, 1);
out:
	free(dir);
	free(p);
	sb_release(&pl);
	return rc;
}
