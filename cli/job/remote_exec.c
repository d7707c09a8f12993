/* The client side of EXEC (see remote_exec.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "remote_exec.h"
#include "sig_wake.h"
#include "term.h"

/* Standard input queued for the host above this: read no more of it
 * until the transport has taken it (bounded memory, whatever the input's
 * size: `gpurun exec cmd < 1GiB` held most of the file before). */
#define EXEC_STDIN_QUEUE (1u << 20)

static void send_winsize(struct gr_conn *c, uint32_t id)
{
	struct strbuf pl = STRBUF_INIT;
	unsigned rows, cols;

	if (term_size(&rows, &cols) < 0)
		return;
	put_u16(&pl, (uint16_t)(rows > 0xffff ? 0xffff : rows));
	put_u16(&pl, (uint16_t)(cols > 0xffff ? 0xffff : cols));
	conn_send(c, GR_MSG_WINSIZE, 0, id, pl.buf, pl.len);
	sb_release(&pl);
}

static void exec_payload(const struct remote_exec_opts *o, struct strbuf *pl)
{
	size_t argc = 0, envc = 0;
	unsigned rows = 0, cols = 0;
	uint32_t flags = (o->pty ? GR_EXEC_PTY : 0) | (o->login_shell ? GR_EXEC_LOGIN : 0);
	const char *term = getenv("TERM");

	while (o->argv && o->argv[argc])
		argc++;
	while (o->env && o->env[envc])
		envc++;
	put_str(pl, o->cwd);
	put_u32(pl, (uint32_t)argc);
	for (size_t i = 0; i < argc; i++)
		put_str(pl, o->argv[i]);
	put_u32(pl, (uint32_t)envc);
	for (size_t i = 0; i < envc; i++)
		put_str(pl, o->env[i]);
	put_u32(pl, flags);
	if (o->pty)
		term_size(&rows, &cols);
	put_str(pl, o->pty ? (term && *term ? term : "dumb") : "");
	put_u16(pl, (uint16_t)(rows > 0xffff ? 0xffff : rows));
	put_u16(pl, (uint16_t)(cols > 0xffff ? 0xffff : cols));
}

static void send_exec(struct gr_conn *c, uint32_t id, const struct remote_exec_opts *o)
{
	struct strbuf pl = STRBUF_INIT;

	exec_payload(o, &pl);
	conn_send(c, GR_MSG_EXEC, 0, id, pl.buf, pl.len);
	sb_release(&pl);
}

void remote_exec_early(void *arg, struct gr_conn *c, struct strbuf *frames)
{
	struct remote_exec_opts *o = arg;
	struct strbuf pl = STRBUF_INIT;

	if (o->env && o->env[0])
		return;
	exec_payload(o, &pl);
	o->early_id = conn_next_id(c);
	proto_frame_append(frames, GR_MSG_EXEC, 0, o->early_id, pl.buf, pl.len);
	if (!o->forward_stdin)
		proto_frame_append(frames, GR_MSG_STDIN, GR_F_END, o->early_id, NULL, 0);
	sb_release(&pl);
}

int remote_exec(struct gr_conn *c, const struct remote_exec_opts *o, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT;
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGWINCH };
	struct sig_wake wake;
	struct pollfd extra[2];
	struct term_filter tf_out, tf_err;
	uint32_t id = o->early_id ? o->early_id : conn_next_id(c);
	int stdin_open = o->forward_stdin, interrupts = 0, raw = 0, rc;

	tf_init(&tf_out);
	tf_init(&tf_err);
	if (!o->early_id) {
		send_exec(c, id, o);
		if (!stdin_open)
			conn_send(c, GR_MSG_STDIN, GR_F_END, id, NULL, 0);
	}

	if (sig_wake_start(&wake, sigs, GR_ARRAY_SIZE(sigs), 0) < 0) {
		sb_release(&pl);
		return gr_errf(err, GR_EIO, "pipe: %s", strerror(errno));
	}
	/* Keys go to the remote terminal as typed (Ctrl-C included: its
	 * line discipline makes the SIGINT), as with ssh -t. */
	if (o->pty && stdin_open && term_set(0, TERM_RAW) == 0)
		raw = 1;

	for (;;) {
		struct gr_frame f;
		int n = 0;
		int full = stdin_open && conn_pending(c) > EXEC_STDIN_QUEUE;

		extra[n++] = (struct pollfd){ wake.fd[0], POLLIN, 0 };
		if (stdin_open && !full)
			extra[n++] = (struct pollfd){ 0, POLLIN, 0 };
		/* Queue full: conn_wait returns only for a frame or its
		 * timeout, so look again every millisecond while it drains. */
		rc = conn_wait(c, &f, extra, n, full ? 1 : 1000, err);
		if (rc == 0)
			rc = conn_idle_check(c, conn_idle_ms(), err);
		if (rc == 0)
			continue;
		if (rc < 0) {
			gr_err_prefix(err, "the command's status is unknown");
			break;
		}
		if (rc == 2) {
			int sig = sig_wake_next(&wake);
			if (sig) {
				if (sig == SIGWINCH) {
					if (o->pty)
						send_winsize(c, id);
				} else if (++interrupts >= 2) {
					rc = gr_errf(err, GR_ECANCEL, "interrupted; the command may still be running on the host");
					break;
				} else {
					put_u32(&pl, sig);
					conn_send(c, GR_MSG_SIGNAL, 0, id, pl.buf, pl.len);
					sb_reset(&pl);
				}
			}
			if (stdin_open && n > 1 && extra[1].revents) {
				char buf[65536];
				ssize_t r = read(0, buf, sizeof(buf));
				if (r < 0 && (errno == EINTR || errno == EAGAIN))
					continue;
				if (r <= 0) {
					conn_send(c, GR_MSG_STDIN, GR_F_END, id, NULL, 0);
					stdin_open = 0;
				} else {
					conn_send(c, GR_MSG_STDIN, 0, id, buf, (size_t)r);
				}
			}
			continue;
		}
		if (rc == 0 || f.id != id)
			continue;
		if (f.type == GR_MSG_STDOUT || f.type == GR_MSG_STDERR) {
			int is_out = f.type == GR_MSG_STDOUT;
			int fd = is_out ? o->out_fd : o->err_fd;
			struct term_filter *tf = (is_out ? o->filter_out : o->filter_err)
							 ? (is_out ? &tf_out : &tf_err) : NULL;
			if (tf_write(tf, fd, f.payload, f.len) < 0 && errno != EPIPE) {
				rc = gr_errf(err, GR_EIO, "cannot write output: %s", strerror(errno));
				break;
			}
			continue;
		}
		if (f.type == GR_MSG_ERROR) {
			/* The command never started: that is gpurun's failure, not
			 * a status of the command's, so it gets gpurun's code. */
			if (conn_error_from_frame(&f, err) == GR_ENOTFOUND &&
			    strstr(err->msg, "remote folder"))
				gr_hintf(err, "run 'gpurun sync' first, or check [remote] path");
			rc = err->code = GR_EREMOTE;
			break;
		}
		if (f.type == GR_MSG_EXIT) {
			struct gr_rd rd;
			rd_init(&rd, f.payload, f.len);
			uint8_t signalled = get_u8(&rd);
			uint32_t code = get_u32(&rd);
			if ((rc = rd_done(&rd, err, "EXIT")) < 0)
				break;
			rc = exit_code_from(signalled, code);
			break;
		}
	}
	if (raw)
		term_restore(0);
	/* A character cut short at the end shows as U+FFFD, as less does. */
	sb_reset(&pl);
	if (o->filter_out && (tf_finish(&tf_out, &pl), pl.len) && write_full(o->out_fd, pl.buf, pl.len) < 0) {
		/* nothing more to say to it */
	}
	sb_reset(&pl);
	if (o->filter_err && (tf_finish(&tf_err, &pl), pl.len) && write_full(o->err_fd, pl.buf, pl.len) < 0) {
		/* nothing more to say to it */
	}
	sig_wake_stop(&wake);
	sb_release(&pl);
	return rc;
}
