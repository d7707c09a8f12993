/* EXEC: run a command in a folder on the host, stream its stdout and
 * stderr separately as they are written (or, with a pty, the terminal's
 * output), pass stdin, window sizes and signals through, and end with its
 * exit status. Used by `gpurun exec`, `gpurun shell` and the build step. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "safe_dir.h"

struct exec_state {
	uint32_t id;
	pid_t pid;
	int out_fd, err_fd, in_fd;
	struct strbuf in_buf; /* stdin bytes not yet written */
	size_t in_off;
	int in_end;           /* client closed stdin */
	int pty;              /* out_fd is a pty's master (in_fd a dup of it) */
	int exited, status;
	int closed;
};

static void exec_maybe_finish(struct agent *a, struct exec_state *s);

static void close_in(struct agent *a, struct exec_state *s)
{
	if (s->in_fd >= 0) {
		agent_unwatch_fd(a, s->in_fd);
		close(s->in_fd);
		s->in_fd = -1;
	}
}

static void on_output(struct agent *a, int fd, short revents, void *arg)
{
	struct exec_state *s = arg;
	char buf[65536];
	ssize_t r;

	(void)revents;
	r = read(fd, buf, sizeof(buf));
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		agent_unwatch_fd(a, fd);
		close(fd);
		if (fd == s->out_fd)
			s->out_fd = -1;
		else
			s->err_fd = -1;
		exec_maybe_finish(a, s);
		return;
	}
	agent_send(a, fd == s->out_fd ? GR_MSG_STDOUT : GR_MSG_STDERR, 0, s->id,
		   buf, (size_t)r);
}

static void on_stdin_ready(struct agent *a, int fd, short revents, void *arg)
{
	struct exec_state *s = arg;

	(void)fd;
	if (revents & (POLLERR | POLLHUP)) {
		close_in(a, s);
		return;
	}
	while (s->in_off < s->in_buf.len) {
		ssize_t w = write(s->in_fd, s->in_buf.buf + s->in_off, s->in_buf.len - s->in_off);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			close_in(a, s);
			return;
		}
		s->in_off += (size_t)w;
	}
	sb_reset(&s->in_buf);
	s->in_off = 0;
	if (s->in_end) {
		if (s->pty) {
			/* A terminal has no end of input: type its EOF key, as
			 * a user closing the program by hand would. */
			struct termios t;
			if (tcgetattr(s->in_fd, &t) == 0 && (t.c_lflag & ICANON) &&
			    write(s->in_fd, &t.c_cc[VEOF], 1) < 0) {
				/* the program is gone: nothing to tell */
			}
		}
		close_in(a, s);
	} else
		agent_watch_fd(a, s->in_fd, 0, on_stdin_ready, s);
}

static void on_exit_status(struct agent *a, pid_t pid, int status, void *arg)
{
	struct exec_state *s = arg;

	(void)pid;
	s->exited = 1;
	s->status = status;
	if (s->pty && s->out_fd >= 0) {
		/* What the command wrote before it ended is in the pty now. A
		 * background process may keep the terminal open for ever: take
		 * what is there and end, as sshd does. */
		char buf[65536];
		ssize_t r;
		while ((r = read(s->out_fd, buf, sizeof(buf))) > 0)
			agent_send(a, GR_MSG_STDOUT, 0, s->id, buf, (size_t)r);
		agent_unwatch_fd(a, s->out_fd);
		close(s->out_fd);
		s->out_fd = -1;
	}
	exec_maybe_finish(a, s);
}

static void exec_maybe_finish(struct agent *a, struct exec_state *s)
{
	struct strbuf pl = STRBUF_INIT;

	if (!s->exited || s->out_fd >= 0 || s->err_fd >= 0 || s->closed)
		return;
	if (WIFSIGNALED(s->status)) {
		put_u8(&pl, 1);
		put_u32(&pl, (uint32_t)WTERMSIG(s->status));
	} else {
		put_u8(&pl, 0);
		put_u32(&pl, (uint32_t)WEXITSTATUS(s->status));
	}
	agent_send(a, GR_MSG_EXIT, GR_F_END, s->id, pl.buf, pl.len);
	sb_release(&pl);
	agent_stream_close(a, s->id);
}

static int exec_on_frame(struct agent *a, uint32_t id, void *st,
			 const struct gr_frame *f, struct gr_err *err)
{
	struct exec_state *s = st;
	struct gr_rd rd;

	(void)id;
	rd_init(&rd, f->payload, f->len);
	if (f->type == GR_MSG_SIGNAL) {
		uint32_t sig = get_u32(&rd);
		if (rd_done(&rd, err, "SIGNAL") < 0)
			return GR_EPROTO;
		if (sig == 0 || sig >= 65)
			return gr_errf(err, GR_EINVAL, "bad signal number %u", sig);
		if (!s->exited) {
			/* On a terminal the signal is for the job in front (what
			 * the key would have reached), else for the command's group. */
			pid_t pg = s->pty && s->out_fd >= 0 ? tcgetpgrp(s->out_fd) : -1;
			kill(pg > 0 ? -pg : -s->pid, (int)sig);
		}
		return 0;
	}
	if (f->type == GR_MSG_WINSIZE) {
		struct winsize ws = { 0 };
		ws.ws_row = get_u16(&rd);
		ws.ws_col = get_u16(&rd);
		if (rd_done(&rd, err, "WINSIZE") < 0)
			return GR_EPROTO;
		/* The kernel tells the program (SIGWINCH) when the size changed. */
		if (s->pty && s->out_fd >= 0 && ws.ws_row && ws.ws_col)
			ioctl(s->out_fd, TIOCSWINSZ, &ws);
		return 0;
	}
	if (f->type == GR_MSG_STDIN) {
		if (s->in_fd < 0)
			return 0;
		sb_add(&s->in_buf, f->payload, f->len);
		if (f->flags & GR_F_END)
			s->in_end = 1;
		on_stdin_ready(a, s->in_fd, 0, s);
		if (s->in_fd >= 0 && s->in_off < s->in_buf.len)
			agent_watch_fd(a, s->in_fd, POLLOUT, on_stdin_ready, s);
		return 0;
	}
	return gr_errf(err, GR_EPROTO, "unexpected %s frame for EXEC",
		       proto_msg_name(f->type));
}

static void exec_on_close(struct agent *a, uint32_t id, void *st)
{
	struct exec_state *s = st;

	(void)id;
	s->closed = 1;
	if (!s->exited) {
		/* The client went away or cancelled: hang up on the command, as
		 * sshd does when a session closes. The child watcher stays and
		 * reaps it; it must not touch s after this. */
		kill(-s->pid, SIGHUP);
		kill(-s->pid, SIGTERM);
	}
	if (s->out_fd >= 0) { agent_unwatch_fd(a, s->out_fd); close(s->out_fd); }
	if (s->err_fd >= 0) { agent_unwatch_fd(a, s->err_fd); close(s->err_fd); }
	close_in(a, s);
	sb_release(&s->in_buf);
	if (s->exited)
		free(s);
	/* else freed by the child callback below once the command ends */
}

static const struct agent_stream_ops exec_ops = {
	.on_frame = exec_on_frame,
	.on_close = exec_on_close,
};

static void on_orphan_exit(struct agent *a, pid_t pid, int status, void *arg)
{
	(void)a; (void)pid; (void)status;
	free(arg);
}

static void on_child_exit(struct agent *a, pid_t pid, int status, void *arg)
{
	struct exec_state *s = arg;

	if (s->closed) {
		on_orphan_exit(a, pid, status, arg);
		return;
	}
	on_exit_status(a, pid, status, arg);
}

/* The user's login shell: $SHELL (sshd sets it from the passwd entry),
 * else the passwd entry itself (read from the file: a static binary's
 * getpwuid may find no NSS module), else /bin/sh. */
static char *login_shell(void)
{
	const char *env = getenv("SHELL");
	char line[1024], *shell = NULL;
	FILE *f;

	if (env && env[0] == '/' && access(env, X_OK) == 0)
		return xstrdup(env);
	if ((f = fopen("/etc/passwd", "re"))) {
		while (!shell && fgets(line, sizeof(line), f)) {
			char *field[7] = { 0 }, *p = line;
			int n = 0;
			line[strcspn(line, "\n")] = 0;
			while (n < 7 && p) {
				field[n++] = p;
				if ((p = strchr(p, ':')))
					*p++ = 0;
			}
			long long uid;
			if (n == 7 && parse_ll(field[2], 0, 0xffffffffLL, &uid) == 0 &&
			    (uid_t)uid == getuid() && field[6][0] == '/' && access(field[6], X_OK) == 0)
				shell = xstrdup(field[6]);
		}
		fclose(f);
	}
	return shell ? shell : xstrdup("/bin/sh");
}

/* In the child: run argv in dir with env added, or report why not on
 * errfd (errno, then exit). */
static void exec_child(const char *dir, struct strvec *argv, struct strvec *env,
		       const char *path, int errfd)
{
	int e;

	signal(SIGPIPE, SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	for (size_t i = 0; i < env->n; i++)
		putenv(env->v[i]);
	if (chdir(dir) < 0 || (execvp(path, argv->v), 1)) {
		e = errno;
		if (write(errfd, &e, sizeof(e)) < 0)
			_exit(127);
	}
	_exit(127);
}

static int h_exec(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	char *cwd = get_str(rd), *full = NULL, *term = NULL, *shell = NULL;
	struct strvec argv = STRVEC_INIT, env = STRVEC_INIT;
	int pout[2] = { -1, -1 }, perr[2] = { -1, -1 }, pin[2] = { -1, -1 };
	int pexec[2] = { -1, -1 }, master = -1;
	struct exec_state *s = NULL;
	struct winsize ws = { 0 };
	struct stat st;
	uint32_t n, flags;
	pid_t pid;
	int rc = 0;

	n = get_u32(rd);
	for (uint32_t i = 0; i < n && !rd->bad; i++) {
		char *v = get_str(rd);
		if (v)
			sv_push(&argv, v);
		free(v);
	}
	n = get_u32(rd);
	for (uint32_t i = 0; i < n && !rd->bad; i++) {
		char *v = get_str(rd);
		if (v)
			sv_push(&env, v);
		free(v);
	}
	flags = get_u32(rd);
	term = get_str(rd);
	ws.ws_row = get_u16(rd);
	ws.ws_col = get_u16(rd);
	if ((rc = rd_done(rd, err, "EXEC")) < 0)
		goto out;
	if (flags & ~(uint32_t)(GR_EXEC_PTY | GR_EXEC_LOGIN)) {
		rc = gr_errf(err, GR_EINVAL, "unknown EXEC flags %#x", flags);
		goto out;
	}
	if (flags & GR_EXEC_LOGIN) {
		/* The login shell: "-bash" as argv[0] is how a shell is told. */
		const char *base;
		if (argv.n) {
			rc = gr_errf(err, GR_EINVAL, "a login shell takes no command");
			goto out;
		}
		shell = login_shell();
		base = strrchr(shell, '/') ? strrchr(shell, '/') + 1 : shell;
		sv_pushf(&argv, "-%s", base);
	} else if (!argv.n) {
		rc = gr_errf(err, GR_EINVAL, "no command to run");
		goto out;
	}
	full = agent_path(cwd);
	if (stat(full, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rc = gr_errf(err, GR_ENOTFOUND, "remote folder '%s' does not exist", full);
		goto out;
	}
	/* Another user's folder would run their code as us; the checked
	 * path, links resolved, is where the command runs. */
	char *real = NULL;
	if ((rc = safe_dir_check_path(full, 1, &real, err)) < 0)
		goto out;
	if (!real) {
		rc = gr_errf(err, GR_ENOTFOUND, "remote folder '%s' does not exist", full);
		goto out;
	}
	free(full);
	full = real;
	if (pipe2(pexec, O_CLOEXEC) < 0 ||
	    (!(flags & GR_EXEC_PTY) &&
	     (pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0 ||
	      pipe2(pin, O_CLOEXEC) < 0))) {
		rc = gr_errf(err, GR_EIO, "pipe: %s", strerror(errno));
		goto out;
	}
	if (flags & GR_EXEC_PTY) {
		/* The terminal's own defaults (cooked, echo, signals): the
		 * client's terminal is raw and this one does the work. */
		if (term && *term)
			sv_pushf(&env, "TERM=%s", term);
		if (!ws.ws_row || !ws.ws_col)
			ws = (struct winsize){ .ws_row = 24, .ws_col = 80 };
		pid = forkpty(&master, NULL, NULL, &ws);
	} else {
		pid = fork();
	}
	if (pid < 0) {
		rc = gr_errf(err, GR_EIO, "%s: %s", flags & GR_EXEC_PTY ? "forkpty" : "fork",
			     strerror(errno));
		goto out;
	}
	if (pid == 0) {
		if (!(flags & GR_EXEC_PTY)) {
			setpgid(0, 0);
			dup2(pin[0], 0);
			dup2(pout[1], 1);
			dup2(perr[1], 2);
		}
		exec_child(full, &argv, &env, shell ? shell : argv.v[0], pexec[1]);
	}
	close(pexec[1]);
	pexec[1] = -1;
	int child_errno = 0;
	if (read_full(pexec[0], &child_errno, sizeof(child_errno)) == sizeof(child_errno)) {
		/* Answer as a shell would: the reason on stderr, 127 for a
		 * missing program, 126 for one that cannot be run. */
		struct strbuf msg = STRBUF_INIT, pl = STRBUF_INIT;
		waitpid(pid, NULL, 0);
		sb_addf(&msg, "gpurun-agent: cannot run '%s': %s\n", shell ? shell : argv.v[0],
			strerror(child_errno));
		agent_send(a, GR_MSG_STDERR, 0, id, msg.buf, msg.len);
		put_u8(&pl, 0);
		put_u32(&pl, child_errno == ENOENT ? 127 : 126);
		agent_send(a, GR_MSG_EXIT, GR_F_END, id, pl.buf, pl.len);
		sb_release(&msg);
		sb_release(&pl);
		goto out;
	}
	s = xcalloc(1, sizeof(*s));
	s->id = id;
	s->pid = pid;
	if (flags & GR_EXEC_PTY) {
		s->pty = 1;
		s->out_fd = master;
		s->err_fd = -1;
		s->in_fd = fcntl(master, F_DUPFD_CLOEXEC, 3); /* watched apart from reads */
		set_cloexec(master);
		master = -1;
	} else {
		s->out_fd = pout[0];
		s->err_fd = perr[0];
		s->in_fd = pin[1];
		pout[0] = perr[0] = pin[1] = -1;
	}
	set_nonblock(s->out_fd, 1);
	agent_watch_fd(a, s->out_fd, POLLIN, on_output, s);
	if (s->err_fd >= 0) {
		set_nonblock(s->err_fd, 1);
		agent_watch_fd(a, s->err_fd, POLLIN, on_output, s);
	}
	if (s->in_fd >= 0)
		set_nonblock(s->in_fd, 1);
	agent_watch_child(a, pid, on_child_exit, s);
	agent_stream_open(a, id, &exec_ops, s);
	s = NULL;
out:
	for (int i = 0; i < 2; i++) {
		if (pout[i] >= 0) close(pout[i]);
		if (perr[i] >= 0) close(perr[i]);
		if (pin[i] >= 0) close(pin[i]);
		if (pexec[i] >= 0) close(pexec[i]);
	}
	if (master >= 0)
		close(master);
	free(cwd);
	free(full);
	free(term);
	free(shell);
	sv_clear(&argv);
	sv_clear(&env);
	return rc;
}

const struct agent_handler agent_exec_handlers[] = {
	{ GR_MSG_EXEC, "exec", h_exec },
	{ 0, NULL, NULL },
};
