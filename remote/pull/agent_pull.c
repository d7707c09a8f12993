/* ART_PULL and ART_SIG (PROTOCOL.md): artifacts out of a job, packed in a
 * forked helper (job_pack.c), large files as deltas against signatures
 * the client staged (job_delta.c). */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent_job.h"
#include "job_delta.h"
#include "job_pack.h"
#include "job_proto.h"

#define WRITTEN_MAX 20 /* files named when nothing matched */

struct art_arg {
	char *dir;
	struct strvec pat;
	struct pack_have *have;
	size_t nhave;
	struct pack_part *parts;
	size_t nparts;
	uint32_t flags;          /* GR_ART_PLAN_ONLY */
	char *token;             /* the client's staged signatures */
	struct pack_sig *sigs;
	size_t nsigs;
};

static int art_fn(void *arg, int data_fd, struct strbuf *pl, struct gr_err *err)
{
	struct art_arg *s = arg;
	struct job_spec spec = { STRVEC_INIT };
	struct strvec persist = STRVEC_INIT;
	struct job_rec r;
	struct pack_stats st;
	struct written w = { STRVEC_INIT, NULL, 0 };
	int rc = job_load(s->dir, &r, 0, err);

	if (rc < 0)
		return rc;
	job_spec_read(s->dir, &spec, NULL);
	job_spec_list(&spec, "persist", &persist);
	struct strbuf plan = STRBUF_INIT;
	struct strvec whole = STRVEC_INIT;
	char *state = xasprintf("%s/.gpurun", s->dir);
	struct pack_opts o = { &persist, r.created_ms, job_rec_ended(&r) ? r.end_ms : 0,
			       s->parts, s->nparts, s->sigs, s->nsigs, -1, &whole,
			       (s->flags & GR_ART_PLAN_ONLY) ? &plan : NULL };
	if (s->nsigs)
		o.tmpfd = open(state, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	else if (s->flags & GR_ART_PLAN_ONLY)
		job_delta_gc(s->dir, NULL); /* what pulls cut short left */
	free(state);
	rc = job_pack(s->dir, (const char *const *)s->pat.v, s->pat.n, s->have, s->nhave, &o,
		      data_fd, &st, err);
	if (o.tmpfd >= 0)
		close(o.tmpfd);
	if (s->nsigs)
		job_delta_gc(s->dir, s->token);
	if (rc == 0 && o.plan) {
		sb_add(pl, plan.buf, plan.len);
	} else if (rc == 0) {
		put_u32(pl, st.matched);
		put_u32(pl, st.sent);
		put_u64(pl, st.bytes);
		if (!st.matched)
			job_written(s->dir, &o, WRITTEN_MAX, &w);
		put_u32(pl, w.total);
		put_u32(pl, (uint32_t)w.paths.n);
		for (size_t i = 0; i < w.paths.n; i++) {
			put_str(pl, w.paths.v[i]);
			put_u64(pl, w.sizes[i]);
		}
		/* u32 n, n x (str path, str why): signed files sent whole */
		put_u32(pl, (uint32_t)whole.n);
		for (size_t i = 0; i < whole.n; i++) {
			char *tab = strchr(whole.v[i], '\t');
			*tab = '\0';
			put_str(pl, whole.v[i]);
			put_str(pl, tab + 1);
		}
	}
	sv_clear(&whole);
	sb_release(&plan);
	job_written_free(&w);
	sv_clear(&persist);
	job_spec_free(&spec);
	job_rec_clear(&r);
	return rc;
}

static int h_art(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	struct art_arg s = { .pat = STRVEC_INIT };
	int rc = agent_find_job(rd, &s.dir, err);
	uint32_t n = get_u32(rd);

	for (uint32_t i = 0; i < n && !rd->bad; i++) {
		char *v = get_str(rd);
		if (v)
			sv_push(&s.pat, v);
		free(v);
	}
	n = get_u32(rd);
	if (n <= rd->n / 24) /* each entry is at least 24 bytes: no huge alloc */
		s.have = xcalloc(n ? n : 1, sizeof(*s.have));
	else
		rd->bad = 1;
	for (uint32_t i = 0; i < n && !rd->bad; i++) {
		struct pack_have *h = &s.have[s.nhave];
		h->path = get_str(rd);
		h->size = get_u64(rd);
		h->mtime_s = (int64_t)get_u64(rd);
		h->mtime_ns = get_u32(rd);
		if (h->path)
			s.nhave++;
	}
	/* The client's part files (a pull cut short): u32 n, n × (str path,
	 * u64 have, u64 size, u64 mtime_s, u32 mtime_ns). */
	n = get_u32(rd);
	if (n <= rd->n / 32) /* each entry is at least 32 bytes */
		s.parts = xcalloc(n ? n : 1, sizeof(*s.parts));
	else
		rd->bad = 1;
	for (uint32_t i = 0; i < n && !rd->bad; i++) {
		struct pack_part *h = &s.parts[s.nparts];
		h->path = get_str(rd);
		h->have = get_u64(rd);
		h->size = get_u64(rd);
		h->mtime_s = (int64_t)get_u64(rd);
		h->mtime_ns = get_u32(rd);
		if (h->path)
			s.nparts++;
	}
	/* u32 flags, str token, u32 nsig, nsig x (str path, u32 index): the
	 * signatures the client staged with ART_SIG. */
	s.flags = get_u32(rd);
	s.token = get_str(rd);
	n = get_u32(rd);
	if (n <= JOB_DELTA_SIGS_MAX && n <= rd->n / 8)
		s.sigs = xcalloc(n ? n : 1, sizeof(*s.sigs));
	else
		rd->bad = 1;
	for (uint32_t i = 0; i < n && !rd->bad; i++) {
		char *path = get_str(rd);
		uint32_t index = get_u32(rd);
		if (!path || rd->bad || !s.dir || !job_delta_token_ok(s.token) ||
		    index >= JOB_DELTA_SIGS_MAX) {
			rd->bad = 1;
			free(path);
			break;
		}
		s.sigs[s.nsigs].path = path;
		s.sigs[s.nsigs++].sigpath = job_delta_sig_path(s.dir, s.token, index);
	}
	if (rc == 0 && (rc = rd_done(rd, err, "ART_PULL")) == 0)
		rc = agent_helper_start(a, rid, !(s.flags & GR_ART_PLAN_ONLY), 1, art_fn, &s, err);
	for (size_t i = 0; i < s.nhave; i++)
		free(s.have[i].path);
	free(s.have);
	for (size_t i = 0; i < s.nparts; i++)
		free(s.parts[i].path);
	free(s.parts);
	for (size_t i = 0; i < s.nsigs; i++) {
		free(s.sigs[i].path);
		free(s.sigs[i].sigpath);
	}
	free(s.sigs);
	free(s.token);
	sv_clear(&s.pat);
	free(s.dir);
	return rc;
}

/* ART_SIG: str project, str id, str token, u32 index, u64 offset, bytes
 * chunk: a piece of the signature of the client's copy of a file, staged
 * for the ART_PULL that follows (PROTOCOL.md, ART_PULL: deltas). */
static int h_art_sig(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	char *dir = NULL;
	int rc = agent_find_job(rd, &dir, err);
	char *token = get_str(rd);
	uint32_t index = get_u32(rd);
	uint64_t off = get_u64(rd);
	size_t n = 0;
	const void *p = get_bytes(rd, &n);

	if (rc == 0 && (rc = rd_done(rd, err, "ART_SIG")) == 0 &&
	    (rc = job_delta_stage(dir, token, index, off, p, n, err)) == 0)
		agent_ok(a, rid, NULL, 0);
	free(token);
	free(dir);
	return rc;
}

const struct agent_handler agent_pull_handlers[] = {
	{ GR_MSG_ART_PULL, "artifacts", h_art },
	{ GR_MSG_ART_SIG, "artifacts-sig", h_art_sig },
	{ 0, NULL, NULL },
};
