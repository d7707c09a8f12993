/* Forked helpers for slow job requests (see agent_helper.h). The helper
 * writes its answer to a result pipe: u8 0 + OK payload, or u8 1 + i32
 * code + str message. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_helper.h"

#define DATA_PIPE (1u << 20) /* the helper's data pipe, and the most read at once */

/* The helper's exit is not watched: its result pipe says all (an empty
 * result means it died), and the agent's loop reaps it like any child. So
 * nothing of ours outlives the request, even when the agent exits first. */
struct child {
	uint32_t id;
	pid_t pid;
	int data_fd, res_fd;
	struct strbuf res;
	int kill_on_cancel;
	agent_helper_then then;
	void *then_arg;
};

static void maybe_finish(struct agent *a, struct child *c)
{
	struct gr_rd rd;

	if (c->data_fd >= 0 || c->res_fd >= 0)
		return;
	rd_init(&rd, c->res.buf, c->res.len);
	uint8_t kind = c->res.len ? get_u8(&rd) : 2;
	if (kind == 0 && c->then) {
		/* The request goes on: its OK is not the end. */
		uint32_t id = c->id;
		agent_helper_then then = c->then;
		void *then_arg = c->then_arg;
		struct strbuf ok = c->res; /* rd points into it */
		c->then_arg = NULL;
		c->res = (struct strbuf)STRBUF_INIT;
		agent_send(a, GR_MSG_OK, 0, id, rd.p, rd.n);
		agent_stream_close(a, id); /* frees c */
		then(a, id, rd.p, rd.n, then_arg);
		free(then_arg);
		sb_release(&ok);
		return;
	}
	if (kind == 0) {
		agent_ok(a, c->id, rd.p, rd.n);
	} else if (kind == 1) {
		int code = (int)get_u32(&rd);
		char *msg = get_str(&rd);
		agent_fail(a, c->id, code < 0 ? code : GR_EAGENT, "%s", msg ? msg : "failed");
		free(msg);
	} else {
		agent_fail(a, c->id, GR_EAGENT, "the agent's helper process died");
	}
	agent_stream_close(a, c->id); /* frees c */
}

static void close_fd(struct agent *a, int *fd)
{
	if (*fd >= 0) {
		agent_unwatch_fd(a, *fd);
		close(*fd);
		*fd = -1;
	}
}

static void on_readable(struct agent *a, int fd, short revents, void *arg)
{
	struct child *c = arg;
	char buf[65536];
	ssize_t r;

	(void)revents;
	/* Data goes from the pipe straight into the agent's queue, as much
	 * as the pipe holds: a pull's bytes were read, copied into the queue
	 * and written, 64 KiB per turn of the loop. */
	if (fd == c->data_fd)
		r = agent_send_read(a, GR_MSG_DATA, c->id, fd, DATA_PIPE);
	else
		r = read(fd, buf, sizeof(buf));
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		close_fd(a, fd == c->data_fd ? &c->data_fd : &c->res_fd);
		maybe_finish(a, c);
		return;
	}
	if (fd == c->res_fd && c->res.len < GR_FRAME_MAX)
		sb_add(&c->res, buf, (size_t)r);
}

static void on_close(struct agent *a, uint32_t id, void *st)
{
	struct child *c = st;

	(void)id;
	if (c->kill_on_cancel && (c->data_fd >= 0 || c->res_fd >= 0))
		kill(c->pid, SIGKILL);
	/* else a stop runs to its end on its own (it is in a session of
	 * its own and writes its answer to nobody) */
	close_fd(a, &c->data_fd);
	close_fd(a, &c->res_fd);
	sb_release(&c->res);
	free(c->then_arg);
	free(c);
}

static const struct agent_stream_ops child_ops = { .on_close = on_close };

int agent_helper_start(struct agent *a, uint32_t id, int stream, int kill_on_cancel,
		    agent_helper_fn fn, void *arg, struct gr_err *err)
{
	return agent_helper_start_then(a, id, stream, kill_on_cancel, fn, arg, NULL, NULL, err);
}

int agent_helper_start_then(struct agent *a, uint32_t id, int stream, int kill_on_cancel,
			    agent_helper_fn fn, void *arg, agent_helper_then then,
			    void *then_arg, struct gr_err *err)
{
	int dp[2] = { -1, -1 }, rp[2];
	struct child *c;
	pid_t pid;

	if (pipe2(rp, O_CLOEXEC) < 0) {
		free(then_arg);
		return gr_errf(err, GR_EIO, "pipe: %s", strerror(errno));
	}
	if (stream && pipe2(dp, O_CLOEXEC) < 0) {
		close(rp[0]);
		close(rp[1]);
		free(then_arg);
		return gr_errf(err, GR_EIO, "pipe: %s", strerror(errno));
	}
	pid = fork();
	if (pid < 0) {
		close(rp[0]); close(rp[1]);
		if (stream) { close(dp[0]); close(dp[1]); }
		free(then_arg);
		return gr_errf(err, GR_EIO, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		struct strbuf reply = STRBUF_INIT, out = STRBUF_INIT;
		struct gr_err e = { 0 };
		int nul = open("/dev/null", O_RDWR);

		/* Never write on the agent's wire (fd 1); outlive it if need be. */
		dup2(nul, 0);
		dup2(nul, 1);
		setsid();
		signal(SIGCHLD, SIG_DFL);
		/* Hold nothing of the agent's: another request's pipe kept open
		 * here would delay its EOF. */
		for (int fd = 3; fd < 1024; fd++)
			if (fd != rp[1] && fd != dp[1])
				close(fd);
		int rc = fn(arg, dp[1], &reply, &e);
		if (stream)
			close(dp[1]);
		if (rc == 0) {
			put_u8(&out, 0);
			sb_add(&out, reply.buf, reply.len);
		} else {
			put_u8(&out, 1);
			put_u32(&out, (uint32_t)(e.code ? e.code : rc));
			put_str(&out, e.msg[0] ? e.msg : gr_strcode(rc));
		}
		if (write_full(rp[1], out.buf, out.len) < 0)
			_exit(1);
		_exit(0);
	}
	close(rp[1]);
	if (stream)
		close(dp[1]);
	c = xcalloc(1, sizeof(*c));
	c->id = id;
	c->pid = pid;
	c->res_fd = rp[0];
	c->data_fd = stream ? dp[0] : -1;
	c->kill_on_cancel = kill_on_cancel;
	c->then = then;
	c->then_arg = then_arg;
	set_nonblock(c->res_fd, 1);
	agent_watch_fd(a, c->res_fd, POLLIN, on_readable, c);
	if (c->data_fd >= 0) {
		(void)fcntl(c->data_fd, F_SETPIPE_SZ, DATA_PIPE); /* best effort */
		set_nonblock(c->data_fd, 1);
		agent_watch_fd(a, c->data_fd, POLLIN, on_readable, c);
	}
	agent_stream_open(a, id, &child_ops, c);
	return 0;
}
