/* Transports that run a subprocess: `sh -c SCRIPT` here (transport =
 * local, for a workstation with its own GPU and for tests) and `ssh HOST
 * SCRIPT` (transport = openssh, the escape hatch for ssh features libssh2
 * lacks). Both are two non-blocking pipes to the child. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compat.h"
#include "transport.h"

struct proc_transport {
	struct gr_transport base;
	pid_t pid;
	int to_fd, from_fd;
};

static ssize_t proc_read(struct gr_transport *t, void *buf, size_t n, struct gr_err *err)
{
	struct proc_transport *p = (struct proc_transport *)t;
	ssize_t r = read(p->from_fd, buf, n);

	if (r >= 0)
		return r;
	if (errno == EAGAIN || errno == EINTR)
		return GR_TR_AGAIN;
	return gr_errf(err, GR_EIO, "reading from %s: %s", t->desc, strerror(errno));
}

static ssize_t proc_write(struct gr_transport *t, const void *buf, size_t n, struct gr_err *err)
{
	struct proc_transport *p = (struct proc_transport *)t;
	ssize_t w;

	if (p->to_fd < 0)
		return gr_errf(err, GR_EIO, "writing to %s: already closed", t->desc);
	w = write(p->to_fd, buf, n);
	if (w >= 0)
		return w;
	if (errno == EAGAIN || errno == EINTR)
		return GR_TR_AGAIN;
	if (errno == EPIPE)
		return gr_errf(err, GR_ESSH, "connection to %s closed", t->desc);
	return gr_errf(err, GR_EIO, "writing to %s: %s", t->desc, strerror(errno));
}

static int proc_pollfds(struct gr_transport *t, struct pollfd *pfd, int want_read,
			int want_write)
{
	struct proc_transport *p = (struct proc_transport *)t;
	int n = 0;

	if (want_read)
		pfd[n++] = (struct pollfd){ p->from_fd, POLLIN, 0 };
	if (want_write && p->to_fd >= 0)
		pfd[n++] = (struct pollfd){ p->to_fd, POLLOUT, 0 };
	return n;
}

static int proc_tick(struct gr_transport *t, int *timeout_ms, struct gr_err *err)
{
	(void)t;
	(void)err;
	*timeout_ms = -1;
	return 0;
}

static int proc_close_write(struct gr_transport *t, struct gr_err *err)
{
	struct proc_transport *p = (struct proc_transport *)t;

	(void)err;
	if (p->to_fd >= 0)
		close(p->to_fd);
	p->to_fd = -1;
	return 0;
}

static void proc_free(struct gr_transport *t)
{
	struct proc_transport *p = (struct proc_transport *)t;
	int status;

	if (!t)
		return;
	if (p->to_fd >= 0)
		close(p->to_fd);
	if (p->from_fd >= 0)
		close(p->from_fd);
	if (p->pid > 0) {
		/* Closing the pipes ends the agent; give it a moment, then
		 * make sure nothing is left behind. */
		for (int i = 0; i < 100; i++) {
			if (waitpid(p->pid, &status, WNOHANG) != 0)
				goto reaped;
			usleep(10000);
		}
		/* A stopped or stuck process never acts on SIGTERM: it gets
		 * SIGKILL after a while, so gpurun itself never hangs here. */
		kill(p->pid, SIGTERM);
		for (int i = 0; i < 200; i++) {
			if (waitpid(p->pid, &status, WNOHANG) != 0)
				goto reaped;
			usleep(10000);
		}
		kill(p->pid, SIGKILL);
		waitpid(p->pid, &status, 0);
	}
reaped:
	free(t->desc);
	free(p);
}

/* ---- port forwarding for the local transport: a plain TCP relay ---- */

struct tr_tunnel {
	int fd;
};

static int tcp_open(struct gr_transport *t, const char *host, int port, struct tr_tunnel **out,
		    struct gr_err *err)
{
	struct addrinfo hints = { 0 }, *res = NULL;
	char ps[16];
	int rc, fd = -1, last = ECONNREFUSED;

	(void)t;
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	snprintf(ps, sizeof(ps), "%d", port);
	if ((rc = getaddrinfo(host, ps, &hints, &res)) != 0)
		return gr_errf(err, GR_EREMOTE, "cannot resolve '%s': %s", host, gai_strerror(rc));
	/* This machine is the host: a connect is as quick as the answer. */
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = compat_socket_cloexec(ai->ai_family, ai->ai_socktype, 0, 0);
		if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			last = errno;
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	if (fd < 0)
		return gr_errf(err, GR_EREMOTE, "%s", strerror(last));
	set_nonblock(fd, 1);
	*out = xcalloc(1, sizeof(**out));
	(*out)->fd = fd;
	return 0;
}

static ssize_t tcp_read(struct gr_transport *t, struct tr_tunnel *tu, void *buf, size_t n,
			struct gr_err *err)
{
	ssize_t r = recv(tu->fd, buf, n, 0);

	(void)t;
	if (r >= 0)
		return r;
	if (errno == EAGAIN || errno == EINTR)
		return GR_TR_AGAIN;
	return gr_errf(err, GR_EIO, "forwarded connection: %s", strerror(errno));
}

static ssize_t tcp_write(struct gr_transport *t, struct tr_tunnel *tu, const void *buf,
			 size_t n, struct gr_err *err)
{
	ssize_t w = compat_send_nosignal(tu->fd, buf, n, 0);

	(void)t;
	if (w >= 0)
		return w;
	if (errno == EAGAIN || errno == EINTR)
		return GR_TR_AGAIN;
	return gr_errf(err, GR_EIO, "forwarded connection: %s", strerror(errno));
}

static int tcp_send_eof(struct gr_transport *t, struct tr_tunnel *tu)
{
	(void)t;
	shutdown(tu->fd, SHUT_WR);
	return 0;
}

static int tcp_close(struct gr_transport *t, struct tr_tunnel *tu)
{
	(void)t;
	close(tu->fd);
	free(tu);
	return 0;
}

static void tcp_drop(struct gr_transport *t, struct tr_tunnel *tu)
{
	tcp_close(t, tu);
}

static int tcp_fd(struct gr_transport *t, struct tr_tunnel *tu)
{
	(void)t;
	return tu->fd;
}

static int tcp_ready(struct gr_transport *t, struct tr_tunnel *tu, int want_read, int want_write)
{
	(void)t; (void)tu; (void)want_read; (void)want_write;
	return 0; /* a socket: poll tells */
}

static const struct tr_tunnel_ops tcp_tunnels = {
	.open = tcp_open,
	.read = tcp_read,
	.write = tcp_write,
	.send_eof = tcp_send_eof,
	.close = tcp_close,
	.drop = tcp_drop,
	.fd = tcp_fd,
	.ready = tcp_ready,
};

static const struct gr_transport_ops proc_ops = {
	.name = "process",
	.read = proc_read,
	.write = proc_write,
	.pollfds = proc_pollfds,
	.tick = proc_tick,
	.close_write = proc_close_write,
	.free = proc_free,
};

static const struct gr_transport_ops local_ops = {
	.name = "local",
	.read = proc_read,
	.write = proc_write,
	.pollfds = proc_pollfds,
	.tick = proc_tick,
	.close_write = proc_close_write,
	.free = proc_free,
	.tunnels = &tcp_tunnels,
};

static int spawn(struct gr_transport **out, const struct gr_transport_ops *ops,
		 char *const argv[], const char *desc, struct gr_err *err)
{
	int in[2], outp[2];
	struct proc_transport *p;
	pid_t pid;

	if (compat_pipe_cloexec(in, 0) < 0)
		return gr_errf(err, GR_EIO, "pipe: %s", strerror(errno));
	if (compat_pipe_cloexec(outp, 0) < 0) {
		close(in[0]);
		close(in[1]);
		return gr_errf(err, GR_EIO, "pipe: %s", strerror(errno));
	}
	pid = fork();
	if (pid < 0) {
		close(in[0]); close(in[1]); close(outp[0]); close(outp[1]);
		return gr_errf(err, GR_EIO, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(outp[1], 1);
		/* Keep the child out of our process group's Ctrl-C: gpurun
		 * decides what an interrupt means for the remote side. */
		setpgid(0, 0);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(outp[1]);
	p = xcalloc(1, sizeof(*p));
	p->base.ops = ops;
	p->base.desc = xstrdup(desc);
	p->pid = pid;
	p->to_fd = in[1];
	p->from_fd = outp[0];
	set_nonblock(p->to_fd, 1);
	set_nonblock(p->from_fd, 1);
	*out = &p->base;
	return 0;
}

int transport_proc_local(struct gr_transport **out, const struct tr_cmd *cmd,
			 struct gr_err *err)
{
	struct strbuf arg = STRBUF_INIT;
	char *argv[] = { "/bin/sh", "-c", (char *)cmd->script, "gpurun", NULL, NULL };
	int rc;

	if (cmd->late)
		cmd->late(cmd->late_arg, &arg);
	if (arg.len)
		argv[4] = arg.buf;
	rc = spawn(out, &local_ops, argv, "local", err);
	sb_release(&arg);
	return rc;
}

int transport_proc_openssh(struct gr_transport **out, const struct gr_config *cfg,
			   const struct tr_cmd *cmd, int accept_new, struct gr_err *err)
{
	struct strvec av = STRVEC_INIT;
	char *remote = tr_command_line(cmd);
	int rc;

	sv_push(&av, getenv("GPURUN_SSH") ? getenv("GPURUN_SSH") : "ssh");
	sv_push(&av, "-T");
	sv_push(&av, "-o");
	sv_push(&av, "BatchMode=yes");
	if (accept_new) {
		sv_push(&av, "-o");
		sv_push(&av, "StrictHostKeyChecking=accept-new");
	}
	if (cfg->remote.identity && *cfg->remote.identity) {
		sv_push(&av, "-i");
		sv_push(&av, cfg->remote.identity);
	}
	if (cfg->remote.known_hosts && *cfg->remote.known_hosts)
		sv_pushf(&av, "-oUserKnownHostsFile=%s", cfg->remote.known_hosts);
	if (cfg->remote.connect_timeout > 0)
		sv_pushf(&av, "-oConnectTimeout=%d", cfg->remote.connect_timeout);
	/* OpenSSH reads the passwd home, not $HOME: point it at $HOME's config
	 * so gpurun and ssh agree on which ssh_config is in force. */
	char *user_cfg = expand_home("~/.ssh/config");
	if (access(user_cfg, R_OK) == 0) {
		sv_push(&av, "-F");
		sv_push(&av, user_cfg);
	}
	free(user_cfg);
	/* Forwarded ports: ssh's own -L (gpurun checked they are free). A
	 * port ssh cannot take fails the connection rather than a warning. */
	for (size_t i = 0; i < cmd->nfwd; i++) {
		const struct fwd_spec *f = &cmd->fwd[i];
		sv_push(&av, "-L");
		sv_pushf(&av, "%s:%d:%s:%d", f->bind, f->lport, f->host, f->hport);
	}
	if (cmd->nfwd)
		sv_push(&av, "-oExitOnForwardFailure=yes");
	sv_push(&av, "--");
	sv_push(&av, cfg->remote.host);
	sv_push(&av, remote);
	rc = spawn(out, &proc_ops, av.v, cfg->remote.host, err);
	sv_clear(&av);
	free(remote);
	return rc;
}
