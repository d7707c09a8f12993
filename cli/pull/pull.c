/* Artifact pulls, the request (see pull.h): what dest holds already is
 * told to the host, the bases of deltas signed first where asked, and
 * the stream fed to an extractor in a child process (pull_extract.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "art_delta.h"
#include "compat.h"
#include "config.h"
#include "job_proto.h"
#include "pull.h"
#include "pull_below.h"
#include "pull_extract.h"

struct art_pull {
	struct gr_conn *c;
	uint32_t id;
	pid_t pid;
	int wfd, rfd;      /* data into the extractor, its result out */
	int broken;        /* the extractor stopped reading */
	int got_data;      /* a DATA frame came (GPURUN_TRACE says when) */
	int failed;        /* the agent answered ERROR */
	struct gr_err agent_err;
	struct art_stats st;
};

uint32_t art_pull_id(const struct art_pull *p)
{
	return p->id;
}

/* delta: the pull may bring files as deltas (it waits for the plan and
 * uploads signatures first: blocking). */
static int pull_start(struct gr_conn *c, const char *project, const char *id,
		      const struct strvec *patterns, const char *dest, int min_free_pct,
		      int delta, struct art_pull **out, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT;
	struct art_have have;
	struct art_delta d = { .n = 0 };
	int dp[2] = { -1, -1 }, rp[2];
	struct art_pull *p;
	pid_t pid;

	if (mkdir_p(dest, 0755, err) < 0)
		return err->code;
	/* One pull at a time into dest, its extraction included: a pull
	 * that follows one just cut short (its extractor still keeping its
	 * part) waits for it, and so do two pulls of one job at once. The
	 * extractor inherits the lock and holds it until it exits. */
	int lk = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lk >= 0)
		while (flock(lk, LOCK_EX) < 0 && errno == EINTR)
			;
	art_have_scan(dest, &have);
	put_str(&pl, project);
	put_str(&pl, id);
	put_u32(&pl, (uint32_t)patterns->n);
	for (size_t i = 0; i < patterns->n; i++)
		put_str(&pl, patterns->v[i] + config_job_dir_prefix(patterns->v[i]));
	put_u32(&pl, have.nfiles);
	sb_add(&pl, have.files.buf, have.files.len);
	put_u32(&pl, have.nparts);
	sb_add(&pl, have.parts.buf, have.parts.len);
	art_have_release(&have);
	if (delta) {
		int rc = art_delta_prepare(c, &pl, project, id, dest, have.big, &d, err);
		if (rc < 0) {
			if (lk >= 0)
				close(lk);
			sb_release(&pl);
			return rc;
		}
	}
	if (compat_pipe_cloexec(dp, 0) < 0 || compat_pipe_cloexec(rp, 0) < 0) {
		int e = errno;
		if (dp[0] >= 0) {
			close(dp[0]);
			close(dp[1]);
		}
		if (lk >= 0)
			close(lk);
		sb_release(&pl);
		art_delta_free(&d);
		return gr_errf(err, GR_EIO, "pipe: %s", strerror(e));
	}
	/* Room for bursts: with 64 KiB, gpurun stalled on the extractor's
	 * every pause (a page-cache write, a new file), and the stream with
	 * it. Best effort: the default size works, only slower. */
	compat_pipe_grow(dp[1], 1 << 20);
	pid = fork();
	if (pid < 0) {
		close(dp[0]); close(dp[1]); close(rp[0]); close(rp[1]);
		if (lk >= 0)
			close(lk);
		sb_release(&pl);
		art_delta_free(&d);
		return gr_errf(err, GR_EIO, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		struct gr_err e = { 0 };
		uint32_t files = 0;
		char res[1200];
		int n;

		/* Hold none of gpurun's descriptors (the connection's pipes). */
		for (int fd = 3; fd < 1024; fd++) {
			int basis = 0;
			for (size_t i = 0; i < d.n && !basis; i++)
				basis = d.v[i].fd == fd;
			if (fd != dp[0] && fd != rp[1] && fd != lk && !basis)
				close(fd);
		}
		signal(SIGINT, SIG_IGN); /* gpurun decides what Ctrl-C means */
		if (art_extract_announced(dp[0], dest, min_free_pct, &d, &files, &e) == 0) {
			/* Every file the host sent is whole: a part left is of a
			 * file it no longer sends. */
			art_drop_parts(dest);
			n = snprintf(res, sizeof(res), "0 %u %u\n", files, art_delta_used(&d));
			/* Drain what is left so the writer never blocks on us. */
			char buf[65536];
			while (read(dp[0], buf, sizeof(buf)) > 0)
				;
		} else {
			/* Refused: stop reading, so gpurun sees the pipe break
			 * and cancels the request rather than take it all. */
			n = snprintf(res, sizeof(res), "1 %s\n%s", e.msg, e.hint);
			close(dp[0]);
		}
		if (write_full(rp[1], res, (size_t)n) < 0)
			_exit(1);
		_exit(0);
	}
	close(dp[0]);
	close(rp[1]);
	if (lk >= 0)
		close(lk);
	p = xcalloc(1, sizeof(*p));
	p->c = c;
	p->pid = pid;
	p->wfd = dp[1];
	p->rfd = rp[0];
	p->id = conn_next_id(c);
	/* flags, and the signatures staged for this pull */
	put_u32(&pl, 0);
	put_str(&pl, d.n ? d.token : "");
	put_u32(&pl, (uint32_t)d.n);
	for (size_t i = 0; i < d.n; i++) {
		put_str(&pl, d.v[i].path);
		put_u32(&pl, d.v[i].index);
	}
	conn_send(c, GR_MSG_ART_PULL, 0, p->id, pl.buf, pl.len);
	sb_release(&pl);
	art_delta_free(&d); /* the extractor has its own copy */
	*out = p;
	return 0;
}

int art_pull_start(struct gr_conn *c, const char *project, const char *id,
		   const struct strvec *patterns, const char *dest, int min_free_pct,
		   struct art_pull **out, struct gr_err *err)
{
	/* Beside a log being followed: no plan round (it would wait for its
	 * answer with the log's frames arriving), whole files. */
	return pull_start(c, project, id, patterns, dest, min_free_pct, 0, out, err);
}

int art_pull_frame(struct art_pull *p, const struct gr_frame *f)
{
	struct gr_rd rd;

	if (f->type == GR_MSG_DATA) {
		if (!p->got_data++)
			gr_trace("pull: first data");
		if (!p->broken && write_full(p->wfd, f->payload, f->len) < 0) {
			/* The extractor refused the rest (it says why): stop the
			 * transfer here rather than receive it for nothing. The
			 * agent answers nothing more to a cancelled request. */
			p->broken = 1;
			conn_send(p->c, GR_MSG_CANCEL, 0, p->id, NULL, 0);
			return 1;
		}
		return 0;
	}
	if (f->type == GR_MSG_ERROR) {
		conn_error_from_frame(f, &p->agent_err);
		p->failed = 1;
		return 1;
	}
	if (f->type == GR_MSG_OK) {
		rd_init(&rd, f->payload, f->len);
		p->st.matched = get_u32(&rd);
		p->st.sent = get_u32(&rd);
		p->st.bytes = get_u64(&rd);
		p->st.written = get_u32(&rd);
		uint32_t n = get_u32(&rd);
		for (uint32_t i = 0; i < n && i < 64 && !rd.bad; i++) {
			char *path = get_str(&rd);
			uint64_t size = get_u64(&rd);
			if (path)
				sv_pushf(&p->st.names, "%s\t%llu", path, (unsigned long long)size);
			free(path);
		}
		n = get_u32(&rd);
		for (uint32_t i = 0; i < n && !rd.bad; i++) {
			char *path = get_str(&rd), *why = get_str(&rd);
			if (path && why && i < 64)
				sv_pushf(&p->st.whole, "%s\t%s", path, why);
			free(path);
			free(why);
		}
		if (rd_done(&rd, &p->agent_err, "ART_PULL") < 0)
			p->failed = 1;
		return 1;
	}
	return 0; /* not ours to judge */
}

static void pull_free(struct art_pull *p, int kill_it)
{
	sv_clear(&p->st.names);
	sv_clear(&p->st.whole);
	if (p->wfd >= 0)
		close(p->wfd);
	if (kill_it)
		kill(p->pid, SIGKILL);
	while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(p->rfd);
	free(p);
}

int art_pull_finish(struct art_pull *p, struct art_stats *st, struct gr_err *err)
{
	struct strbuf res = STRBUF_INIT;
	int rc = 0;

	close(p->wfd);
	p->wfd = -1;
	char buf[4096];
	ssize_t n;
	while ((n = read(p->rfd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		sb_add(&res, buf, (size_t)n);
	}
	if (p->failed) {
		rc = gr_errf(err, p->agent_err.code ? p->agent_err.code : GR_EREMOTE, "%s", p->agent_err.msg);
	} else if (res.len >= 2 && res.buf[0] == '0') {
		unsigned files = 0, deltas = 0;
		res.buf[strcspn(res.buf, "\n")] = '\0';
		if (sscanf(res.buf + 2, "%u %u", &files, &deltas) == 2 && deltas <= files) {
			p->st.extracted = files;
			p->st.deltas = deltas;
		}
	} else if (res.len >= 2) {
		char *nl = strchr(res.buf + 2, '\n');
		if (nl)
			*nl = '\0';
		rc = gr_errf(err, GR_EINVAL, "%s", res.buf + 2);
		if (nl && nl[1])
			gr_hintf(err, "%s", nl + 1);
	} else {
		rc = gr_errf(err, GR_EIO, "the artifact extraction stopped without a word");
	}
	if (st) {
		*st = p->st;
		p->st.names = (struct strvec)STRVEC_INIT;
		p->st.whole = (struct strvec)STRVEC_INIT;
	}
	sb_release(&res);
	pull_free(p, 0);
	return rc;
}

void art_stats_release(struct art_stats *st)
{
	sv_clear(&st->names);
	sv_clear(&st->whole);
}

void art_pull_abort(struct art_pull *p)
{
	if (p)
		pull_free(p, 0); /* closing its input ends it; it removes its part file */
}

int art_pull(struct gr_conn *c, const char *project, const char *id,
	     const struct strvec *patterns, const char *dest, int min_free_pct,
	     struct art_stats *st, struct gr_err *err)
{
	struct art_pull *p;
	struct gr_frame f;
	int rc = pull_start(c, project, id, patterns, dest, min_free_pct, 1, &p, err);

	if (rc < 0)
		return rc;
	for (;;) {
		rc = conn_recv_idle(c, &f, conn_idle_ms(), err);
		if (rc < 0) {
			art_pull_abort(p);
			return rc;
		}
		if (f.id == p->id && art_pull_frame(p, &f))
			break;
	}
	return art_pull_finish(p, st, err);
}
