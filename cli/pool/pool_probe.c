/* A pool's children and its probe (pool_int.h): every box asked at once,
 * one child `gpurun --host BOX __pool-probe` each. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compat.h"
#include "pool_int.h"
#include "proto.h"
#include "sync.h"
#include "term.h"

#define PROBE_MAGIC "GRPOOL1\n"
#define PROBE_OUT_MAX (64u << 20) /* a box's job list and GPUs, at most */
#define PROBE_ERR_MAX 8192        /* what a child says on stderr, kept */
/* ---- the children ---- */

/* `gpurun GLOBAL OPTIONS --host HOST`: the caller's global options, less
 * any that set the host (--host is ours; the last one would win). */
static void pool_child_argv(const struct gr_ctx *ctx, const char *host, struct strvec *av)
{
	sv_push(av, "gpurun");
	if (ctx->config_file) {
		sv_push(av, "-c");
		sv_push(av, ctx->config_file);
	}
	for (size_t i = 0; i < ctx->overrides.n; i++) {
		const char *kv = ctx->overrides.v[i];
		if (!strncmp(kv, "remote.host=", 12) || !strncmp(kv, "host=", 5))
			continue;
		sv_push(av, "-o");
		sv_push(av, kv);
	}
	for (int i = 0; i < ctx->verbose; i++)
		sv_push(av, "-v");
	if (ctx->quiet)
		sv_push(av, "-q");
	if (ctx->color_arg)
		sv_pushf(av, "--color=%s", ctx->color_arg);
	if (ctx->accept_new)
		sv_push(av, "--accept-new-host-key");
	sv_push(av, "--host");
	sv_push(av, host);
}

/* Become `gpurun --host HOST ARGV...`: the command runs as if the user had
 * named the box (its terminal, its Ctrl-C, its exit status). */
int pool_exec_on(struct gr_ctx *ctx, const char *host, int argc, char **argv)
{
	struct strvec av = { 0 };

	pool_child_argv(ctx, host, &av);
	for (int i = 0; i < argc; i++)
		sv_push(&av, argv[i]);
	fflush(NULL);
	execv(compat_exec_self(), av.v);
	gr_errf(&ctx->err, GR_EIO, "cannot run gpurun again for %s: %s", host, strerror(errno));
	sv_clear(&av);
	return GR_EIO;
}

/* Run `gpurun --host HOST ARGV...` and wait for it; its exit status, or
 * -1 when Ctrl-C ended it (the caller stops going on to the next box). */
int pool_run_on(struct gr_ctx *ctx, const char *host, int argc, char **argv)
{
	struct strvec av = { 0 };
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_quit;
	int st = 0, rc;

	pool_child_argv(ctx, host, &av);
	for (int i = 0; i < argc; i++)
		sv_push(&av, argv[i]);
	fflush(NULL);
	/* As system() does: the terminal's Ctrl-C is the child's to handle. */
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	pid_t pid = fork();
	if (pid == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGQUIT, &old_quit, NULL);
		execv(compat_exec_self(), av.v);
		fprintf(stderr, "gpurun: cannot run gpurun again for %s: %s\n", host, strerror(errno));
		_exit(GR_EXIT_CONNECT);
	}
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	sv_clear(&av);
	if (pid < 0) {
		fprintf(stderr, "gpurun: cannot start gpurun for %s: %s\n", host, strerror(errno));
		return GR_EXIT_CONNECT;
	}
	if (WIFSIGNALED(st) && WTERMSIG(st) == SIGINT)
		return -1;
	rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return rc;
}

/* ---- the probe: every box asked at once ---- */


/* The child's side: connect, ask, and write both answers out. */
static int probe_main(int argc, char **argv, struct gr_ctx *ctx)
{
	struct strbuf list = STRBUF_INIT, gpus = STRBUF_INIT, out = STRBUF_INIT;
	struct job_list_ask ask = { ctx->cfg->remote.path, "", 0, 0, 0 };
	int rc;

	(void)argc;
	(void)argv;
	/* Asked inside the command that starts the agent: one round trip less. */
	if ((rc = ctx_connect_early(ctx, job_list_ask_early, &ask)) < 0 ||
	    (rc = job_list_gpus_raw(ctx->conn, &ask, &list, &gpus, &ctx->err)) < 0)
		goto out;
	sb_adds(&out, PROBE_MAGIC);
	put_u32(&out, (uint32_t)list.len);
	sb_add(&out, list.buf, list.len);
	put_u32(&out, (uint32_t)gpus.len);
	sb_add(&out, gpus.buf, gpus.len);
	if (write_full(1, out.buf, out.len) < 0)
		rc = gr_errf(&ctx->err, GR_EIO, "cannot write the probe's answer: %s", strerror(errno));
out:
	sb_release(&list);
	sb_release(&gpus);
	sb_release(&out);
	return rc;
}

static const struct gr_opt probe_opts[] = { { 0 } };
const struct gr_cmd pool_probe_cmd = {
	"__pool-probe", probe_main, CMD_CONFIG, probe_opts, "", "", NULL, 0,
};

static int spawn_probe(struct gr_ctx *ctx, struct box *b)
{
	struct strvec av = { 0 };
	int po[2], pe[2];

	b->out = b->err = -1;
	if (pipe(po) < 0)
		return -1;
	if (pipe(pe) < 0) {
		close(po[0]);
		close(po[1]);
		return -1;
	}
	pool_child_argv(ctx, b->host, &av);
	sv_push(&av, pool_probe_cmd.name);
	b->pid = fork();
	if (b->pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		if (nul >= 0)
			dup2(nul, 0);
		dup2(po[1], 1);
		dup2(pe[1], 2);
		execv(compat_exec_self(), av.v);
		fprintf(stderr, "gpurun: cannot run gpurun again: %s\n", strerror(errno));
		_exit(GR_EXIT_CONNECT);
	}
	sv_clear(&av);
	close(po[1]);
	close(pe[1]);
	if (b->pid < 0) {
		close(po[0]);
		close(pe[0]);
		return -1;
	}
	b->out = po[0];
	b->err = pe[0];
	fcntl(b->out, F_SETFD, FD_CLOEXEC);
	fcntl(b->err, F_SETFD, FD_CLOEXEC);
	return 0;
}

/* The last line a child wrote on stderr, less our own "gpurun: error: ". */
static char *last_line(const struct strbuf *e)
{
	size_t end = e->len;
	while (end && (e->buf[end - 1] == '\n' || e->buf[end - 1] == '\r'))
		end--;
	size_t start = end;
	while (start && e->buf[start - 1] != '\n')
		start--;
	/* The hint lines come last; the message is the line before them. */
	while (start && !strncmp(e->buf + start, "hint: ", 6)) {
		end = start - 1;
		start = end;
		while (start && e->buf[start - 1] != '\n')
			start--;
	}
	const char *s = e->buf ? e->buf + start : "";
	size_t n = end - start;
	static const char *const pre[] = { "gpurun: error: ", "gpurun: ", NULL };
	for (int i = 0; pre[i]; i++)
		if (n >= strlen(pre[i]) && !strncmp(s, pre[i], strlen(pre[i]))) {
			s += strlen(pre[i]);
			n -= strlen(pre[i]);
			break;
		}
	if (!n)
		return NULL;
	/* What the child said may quote the host: shown escaped, everywhere. */
	char *raw = xstrndup(s, n), *line = xstrdup(ts(raw));
	free(raw);
	return line;
}

static int parse_probe(struct box *b, struct gr_err *err)
{
	struct gr_rd rd;
	size_t ml = strlen(PROBE_MAGIC);

	if (b->o.len < ml || memcmp(b->o.buf, PROBE_MAGIC, ml))
		return gr_errf(err, GR_EPROTO, "its probe answered nothing gpurun can read");
	rd_init(&rd, b->o.buf + ml, b->o.len - ml);
	uint32_t n = get_u32(&rd);
	if (rd.bad || n > rd.n)
		return gr_errf(err, GR_EPROTO, "its probe's answer is cut short");
	const uint8_t *list = (const uint8_t *)rd.p;
	rd.p += n;
	rd.n -= n;
	uint32_t m = get_u32(&rd);
	if (rd.bad || m != rd.n)
		return gr_errf(err, GR_EPROTO, "its probe's answer is cut short");
	if (job_list_parse(list, n, &b->recs, &b->n, &b->disk, err) < 0)
		return GR_EPROTO;
	return job_gpus_parse(rd.p, m, &b->g, err);
}

/* How long the probe may take in all: the connection's own timeout and
 * then some for the agent, or a minute. */
static int probe_budget_ms(const struct gr_config *cfg)
{
	const char *e = getenv("GPURUN_POOL_TIMEOUT_MS"); /* the tests' */
	if (e && *e)
		return (int)strtol(e, NULL, 10);
	return cfg->remote.connect_timeout > 0 ? (cfg->remote.connect_timeout + 30) * 1000 : 60000;
}

/* Ask every box at once; each answers or says why not (b[i].error). */
void pool_probe_all(struct gr_ctx *ctx, struct box *b, size_t nb)
{
	const struct gr_config *cfg = ctx->cfg;
	uint64_t deadline = now_ms() + (uint64_t)probe_budget_ms(cfg);
	struct pollfd *pf = xcalloc(2 * nb, sizeof(*pf));
	char buf[65536];

	for (size_t i = 0; i < nb; i++) {
		b[i].host = cfg->remote.hosts[i];
		if (spawn_probe(ctx, &b[i]) < 0)
			b[i].error = xasprintf("cannot start gpurun for it: %s", strerror(errno));
		char *key = sync_remote_key(b[i].host, cfg->remote.path);
		int fd = sync_rstate_open(cfg->root, key);
		struct stat st;
		if (fd >= 0 && fstat(fd, &st) == 0)
			b[i].synced = st.st_mtime;
		if (fd >= 0)
			close(fd);
		free(key);
	}
	for (;;) {
		size_t np = 0;
		for (size_t i = 0; i < nb; i++) {
			if (b[i].out >= 0)
				pf[np++] = (struct pollfd){ .fd = b[i].out, .events = POLLIN };
			if (b[i].err >= 0)
				pf[np++] = (struct pollfd){ .fd = b[i].err, .events = POLLIN };
		}
		uint64_t now = now_ms();
		if (!np || now >= deadline)
			break;
		if (poll(pf, np, (int)(deadline - now)) < 0 && errno != EINTR)
			break;
		for (size_t k = 0; k < np; k++) {
			if (!pf[k].revents)
				continue;
			for (size_t i = 0; i < nb; i++) {
				int is_out = pf[k].fd == b[i].out;
				if (!is_out && pf[k].fd != b[i].err)
					continue;
				ssize_t r = read(pf[k].fd, buf, sizeof(buf));
				if (r < 0 && errno == EINTR)
					break;
				struct strbuf *s = is_out ? &b[i].o : &b[i].e;
				size_t cap = is_out ? PROBE_OUT_MAX : PROBE_ERR_MAX;
				if (r > 0 && s->len < cap)
					sb_add(s, buf, (size_t)r);
				if (r <= 0 || (is_out && s->len >= cap)) {
					close(pf[k].fd);
					*(is_out ? &b[i].out : &b[i].err) = -1;
				}
				break;
			}
		}
	}
	free(pf);
	/* What is still open past the deadline is a box that did not answer
	 * in time: ended (its child tidies up its connection on SIGTERM). */
	for (size_t i = 0; i < nb; i++) {
		int late = b[i].out >= 0 || b[i].err >= 0;
		if (b[i].out >= 0)
			close(b[i].out);
		if (b[i].err >= 0)
			close(b[i].err);
		b[i].out = b[i].err = -1;
		if (b[i].pid <= 0)
			continue;
		if (late)
			kill(b[i].pid, SIGTERM);
		for (int t = 0;; t++) {
			pid_t w = waitpid(b[i].pid, &b[i].status, late ? WNOHANG : 0);
			if (w == b[i].pid || (w < 0 && errno != EINTR))
				break;
			if (w == 0 && t >= 20) {
				kill(b[i].pid, SIGKILL);
				late = 0;
			} else if (w == 0) {
				usleep(50 * 1000);
			}
		}
		if (b[i].error)
			continue;
		if (late || (b[i].o.len >= PROBE_OUT_MAX)) {
			b[i].error = late ? xasprintf("no answer within %d s", probe_budget_ms(cfg) / 1000)
					  : xstrdup("it answered more than 64 MiB");
			continue;
		}
		if (!WIFEXITED(b[i].status) || WEXITSTATUS(b[i].status)) {
			b[i].error = last_line(&b[i].e);
			if (!b[i].error)
				b[i].error = xstrdup("it did not answer");
			continue;
		}
		struct gr_err e = { 0 };
		if (parse_probe(&b[i], &e) < 0) {
			b[i].error = xstrdup(e.msg[0] ? e.msg : "its answer cannot be read");
			gr_err_clear(&e);
			continue;
		}
		for (size_t j = 0; j < b[i].n; j++) {
			free(b[i].recs[j].host);
			b[i].recs[j].host = xstrdup(b[i].host);
		}
	}
}

void pool_boxes_free(struct box *b, size_t nb)
{
	for (size_t i = 0; i < nb; i++) {
		sb_release(&b[i].o);
		sb_release(&b[i].e);
		free(b[i].error);
		job_recs_free(b[i].recs, b[i].n);
		job_gpus_free(&b[i].g);
	}
	free(b);
}

/* Say which boxes did not answer (stderr). 0, or a GR_E* code with err set
 * when none did. */
int pool_probe_report(struct gr_ctx *ctx, const struct box *b, size_t nb)
{
	size_t ok = 0;

	for (size_t i = 0; i < nb; i++)
		ok += !b[i].error;
	if (!ok) {
		gr_errf(&ctx->err, GR_ESSH, "no host of the pool answered (%s: %s%s)", b[0].host,
			b[0].error, nb > 1 ? ", ..." : "");
		gr_hintf(&ctx->err, "'gpurun --host %s doctor' says more about one of them", b[0].host);
		return GR_ESSH;
	}
	for (size_t i = 0; i < nb && !ctx->quiet; i++)
		if (b[i].error)
			fprintf(stderr, "gpurun: warning: %s did not answer: %s\n", b[i].host, b[i].error);
	return 0;
}
