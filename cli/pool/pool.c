/* Host pools: which boxes a command goes to, and what they answered
 * merged (pool.h); the children and the probe are pool_probe.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool_int.h"

/* ---- every box's jobs as one list ---- */

struct merged {
	struct job_rec *recs;  /* newest first; each with its host */
	size_t n;
};

struct mref {
	const struct job_rec *r;
	size_t box, at;
};

static int mref_cmp(const void *a, const void *b)
{
	const struct mref *x = a, *y = b;
	uint64_t tx = x->r->created_ms, ty = y->r->created_ms;

	if (tx != ty)
		return tx > ty ? -1 : 1;
	if (x->box != y->box)
		return x->box < y->box ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* The records are moved out of the boxes (left zeroed there). */
static void merge(struct box *b, size_t nb, struct merged *m)
{
	size_t n = 0, k = 0;

	for (size_t i = 0; i < nb; i++)
		n += b[i].n;
	struct mref *refs = xcalloc(n + 1, sizeof(*refs));
	for (size_t i = 0; i < nb; i++)
		for (size_t j = 0; j < b[i].n; j++)
			refs[k++] = (struct mref){ &b[i].recs[j], i, j };
	qsort(refs, n, sizeof(*refs), mref_cmp);
	m->recs = xcalloc(n + 1, sizeof(*m->recs));
	m->n = n;
	for (size_t i = 0; i < n; i++)
		m->recs[i] = *refs[i].r;
	for (size_t i = 0; i < nb; i++) {
		free(b[i].recs);
		b[i].recs = NULL;
		b[i].n = 0;
	}
	free(refs);
}

/* The jobs WANT names among m (an id, an id's prefix, a name, a group;
 * "" the newest), as indices into m->recs; 0, or GR_ENOTFOUND /
 * GR_EUSAGE with err set. */
static int find(const struct merged *m, const char *want, size_t **idx, size_t *n,
		struct gr_err *err)
{
	size_t len = strlen(want);

	*idx = xcalloc(m->n + 1, sizeof(**idx));
	*n = 0;
	if (!*want) {
		if (m->n)
			(*idx)[(*n)++] = 0;
	}
	for (size_t i = 0; i < m->n && !*n && *want; i++)
		if (!strcmp(m->recs[i].id, want))
			(*idx)[(*n)++] = i;
	for (size_t i = 0; i < m->n && !*n && *want; i++)
		if (m->recs[i].name && !strcmp(m->recs[i].name, want))
			(*idx)[(*n)++] = i; /* a name: its newest job */
	if (!*n && *want && job_name_ok(want))
		for (size_t i = 0; i < m->n; i++)
			if (m->recs[i].group && !strcmp(m->recs[i].group, want))
				(*idx)[(*n)++] = i;
	if (!*n && *want)
		for (size_t i = 0; i < m->n; i++)
			if (!strncmp(m->recs[i].id, want, len))
				(*idx)[(*n)++] = i;
	if (*n > 1 && strncmp(m->recs[(*idx)[0]].id, want, len) == 0 &&
	    !(m->recs[(*idx)[0]].group && !strcmp(m->recs[(*idx)[0]].group, want))) {
		struct strbuf l = STRBUF_INIT;
		for (size_t i = 0; i < *n && i < 4; i++)
			sb_addf(&l, "%s%s on %s", i ? ", " : "", m->recs[(*idx)[i]].id,
				m->recs[(*idx)[i]].host);
		gr_errf(err, GR_EUSAGE, "'%s' names more than one job of the pool: %s%s", want, l.buf,
			*n > 4 ? ", ..." : "");
		gr_hintf(err, "give more of the id");
		sb_release(&l);
		return GR_EUSAGE;
	}
	if (*n)
		return 0;
	if (*want)
		gr_errf(err, GR_ENOTFOUND, "no job or group '%s' on any host of the pool", want);
	else
		gr_errf(err, GR_ENOTFOUND, "no jobs for this project on any host of the pool");
	gr_hintf(err, "'gpurun status' lists the pool's jobs");
	return GR_ENOTFOUND;
}

/* ---- the commands ---- */

enum mode { M_NONE, M_STATUS, M_TRAIN, M_JOB, M_JOBS, M_LATEST, M_EACH };

static const struct {
	const char *cmd;
	enum mode mode;
} modes[] = {
	{ "status", M_STATUS }, { "train", M_TRAIN }, { "logs", M_JOB },   { "stop", M_JOB },
	{ "pull", M_JOB },      { "rm", M_JOBS },     { "exec", M_LATEST }, { "shell", M_LATEST },
	{ "forward", M_LATEST }, { "sync", M_EACH },  { "prune", M_EACH },  { "doctor", M_EACH },
	{ "rerun", M_JOB },
};

static enum mode mode_of(const struct gr_cmd *cmd)
{
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (!strcmp(modes[i].cmd, cmd->name))
			return modes[i].mode;
	return M_NONE;
}

int pool_wants(const struct gr_ctx *ctx)
{
	return ctx->cfg && ctx->cfg->remote.nhosts > 1 && ctx->cmd && mode_of(ctx->cmd) != M_NONE;
}

/* The command's words, as its own option table reads them: the
 * positionals, and the values of the options named. */
struct words {
	struct strvec args;
	const char *after;     /* train --after */
	int json, all;         /* status --json, --all */
};

static int read_words(struct gr_ctx *ctx, int argc, char **argv, struct words *w)
{
	struct gr_getopt st;
	int id;

	gr_getopt_init(&st, argc, argv);
	st.stop_at_positional = (ctx->cmd->needs & CMD_PASSTHROUGH) != 0;
	while ((id = gr_getopt(&st, ctx->cmd->opts, &ctx->err)) > 0) {
		for (const struct gr_opt *o = ctx->cmd->opts; o->id; o++) {
			if (o->id != id || !o->lng)
				continue;
			if (!strcmp(o->lng, "after"))
				w->after = st.arg;
			else if (!strcmp(o->lng, "json"))
				w->json = 1;
			else if (!strcmp(o->lng, "all"))
				w->all = 1;
		}
	}
	for (size_t i = 0; i < st.args.n; i++)
		sv_push(&w->args, st.args.v[i]);
	gr_getopt_release(&st);
	return id < 0 ? gr_usage_error(ctx) : 0;
}

/* What [train] gpus asks of a box: a count (all: every GPU it has), or
 * indices. */
struct need {
	int all;
	uint32_t count;
	uint32_t idx[64];
	size_t nidx;
};

static void need_parse(const char *s, struct need *n)
{
	*n = (struct need){ 0 };
	if (!s || !*s || !strcmp(s, "all")) {
		n->all = 1;
		return;
	}
	if (!strchr(s, ',') && !strchr(s, '-')) {
		n->count = (uint32_t)strtoul(s, NULL, 10);
		return;
	}
	for (const char *p = s; *p && n->nidx < 64;) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (end == p)
			break;
		n->idx[n->nidx++] = (uint32_t)v;
		p = *end == ',' ? end + 1 : end;
		if (*end && *end != ',')
			break;
	}
}

static const char *locked(const struct job_gpus *g, uint32_t index, int *exists)
{
	for (size_t i = 0; i < g->ngpus; i++)
		if (g->gpus[i].index == index) {
			*exists = 1;
			return g->gpus[i].locked_by && *g->gpus[i].locked_by ? g->gpus[i].locked_by : NULL;
		}
	*exists = 0;
	return NULL;
}

/* How the box stands for need: 1 it fits now (nothing waits and the GPUs
 * are free), 0 it will once GPUs free, -1 never (too few GPUs). *nfree:
 * its free GPUs. */
static int box_fits(const struct box *b, const struct need *n, uint32_t *nfree)
{
	const struct job_gpus *g = &b->g;
	int exists;

	*nfree = 0;
	for (size_t i = 0; i < g->ngpus; i++)
		*nfree += !(g->gpus[i].locked_by && *g->gpus[i].locked_by);
	if (!g->have_smi) /* no GPUs to lock: nothing to wait for */
		return n->all || (!n->count && !n->nidx) ? 1 : -1;
	if (n->nidx) {
		int now = !g->queued;
		for (size_t i = 0; i < n->nidx; i++) {
			if (locked(g, n->idx[i], &exists))
				now = 0;
			if (!exists)
				return -1;
		}
		return now;
	}
	if (n->all)
		return g->ngpus ? (*nfree == g->ngpus && !g->queued) : 1;
	if (n->count > g->ngpus)
		return -1;
	return *nfree >= n->count && !g->queued;
}

/* Better box for a job: one it fits now; among those, one the project
 * was synced to, then the fewest free GPUs that will do (best fit: the
 * boxes with more stay free for the jobs that need more), then the one
 * synced last; else the shortest line, then the most free GPUs. Ties:
 * the pool's order. */
static int better(const struct box *a, int fa, uint32_t freea, const struct box *b, int fb,
		  uint32_t freeb)
{
	if (fa != fb)
		return fa > fb;
	if (fa == 1) {
		if ((a->synced != 0) != (b->synced != 0))
			return a->synced != 0;
		if (freea != freeb)
			return freea < freeb;
		return a->synced > b->synced;
	}
	if (a->g.queued != b->g.queued)
		return a->g.queued < b->g.queued;
	if (freea != freeb)
		return freea > freeb;
	return a->synced > b->synced;
}

static int do_train(struct gr_ctx *ctx, struct box *b, size_t nb, const struct words *w,
		    int argc, char **argv)
{
	const char *host = NULL;
	struct need need;

	if (w->after) {
		/* --after JOB: the job waits on JOB's box, where it can see it. */
		struct merged m = { 0 };
		size_t *idx, n;
		char *word = xstrdup(w->after);
		char *ok = strrchr(word, ':');
		if (ok && !strcmp(ok, ":ok"))
			*ok = 0;
		merge(b, nb, &m);
		int rc = find(&m, word, &idx, &n, &ctx->err);
		for (size_t i = 0; rc == 0 && i < nb && !host; i++)
			if (!strcmp(b[i].host, m.recs[idx[0]].host))
				host = b[i].host;
		free(idx);
		free(word);
		job_recs_free(m.recs, m.n);
		if (rc < 0)
			return rc;
		if (!ctx->quiet)
			fprintf(stderr, "gpurun: on %s, where the job it starts after is\n", host);
		return pool_exec_on(ctx, host, argc, argv);
	}
	need_parse(ctx->cfg->train.gpus, &need);
	int best = -1, fbest = -2;
	uint32_t freebest = 0;
	for (size_t i = 0; i < nb; i++) {
		uint32_t nfree;
		if (b[i].error)
			continue;
		int f = box_fits(&b[i], &need, &nfree);
		if (best < 0 || better(&b[i], f, nfree, &b[best], fbest, freebest)) {
			best = (int)i;
			fbest = f;
			freebest = nfree;
		}
	}
	host = b[best].host;
	if (!ctx->quiet) {
		const struct job_gpus *g = &b[best].g;
		if (fbest == 1 && g->have_smi)
			fprintf(stderr, "gpurun: on %s: %u of its %zu GPUs free%s\n", host, freebest,
				g->ngpus, b[best].synced ? ", the project synced there" : "");
		else if (fbest == 1)
			fprintf(stderr, "gpurun: on %s%s\n", host,
				b[best].synced ? ", the project synced there" : "");
		else if (fbest == 0)
			fprintf(stderr, "gpurun: no host of the pool has the GPUs free now; "
				"on %s, whose line is shortest (%u waiting)\n", host, g->queued);
		else
			fprintf(stderr, "gpurun: no host of the pool has as many GPUs as [train] gpus = %s; "
				"on %s\n", ctx->cfg->train.gpus, host);
	}
	return pool_exec_on(ctx, host, argc, argv);
}

static int do_status(struct gr_ctx *ctx, struct box *b, size_t nb, const struct words *w)
{
	struct merged m = { 0 };
	struct job_box *jb = xcalloc(nb, sizeof(*jb));
	struct strbuf o = STRBUF_INIT;
	const char *want = w->args.n ? w->args.v[0] : "";
	size_t *idx = NULL, n = 0;
	int rc = 0;

	if (w->args.n > 1) {
		free(jb);
		gr_errf(&ctx->err, GR_EUSAGE, "status takes at most one job");
		return gr_usage_error(ctx);
	}
	uint64_t disk = 0;
	for (size_t i = 0; i < nb; i++) {
		jb[i] = (struct job_box){ b[i].host, b[i].error, b[i].error ? NULL : &b[i].g, b[i].disk };
		disk += b[i].disk;
	}
	merge(b, nb, &m);
	struct job_rec *shown = m.recs;
	size_t nshown = m.n;
	if (*want) {
		if ((rc = find(&m, want, &idx, &n, &ctx->err)) < 0)
			goto out;
		shown = xcalloc(n, sizeof(*shown));
		for (size_t i = 0; i < n; i++)
			shown[i] = m.recs[idx[i]];
		nshown = n;
	} else if (!w->all && nshown > 20) {
		nshown = 20;
	}
	if (w->json) {
		job_show_json_boxes(shown, nshown, jb, nb, ctx->cfg->remote.pool, &o);
	} else {
		job_show_table(shown, nshown, disk, &o);
		if (*want && nshown == 1 && !(shown[0].group && !strcmp(shown[0].group, want)))
			job_show_detail(&shown[0], &o);
		job_show_gpus_boxes(jb, nb, &o);
	}
	fwrite(o.buf, 1, o.len, stdout);
out:
	if (shown != m.recs)
		free(shown);
	free(idx);
	free(jb);
	sb_release(&o);
	job_recs_free(m.recs, m.n);
	return rc;
}

/* logs, stop, pull, rm: on the box (or boxes) holding the jobs named. */
static int do_jobs(struct gr_ctx *ctx, struct box *b, size_t nb, const struct words *w,
		   enum mode mode, int argc, char **argv)
{
	struct merged m = { 0 };
	size_t nwords = mode == M_JOBS ? w->args.n : 1;
	struct strvec *per = xcalloc(nb, sizeof(*per)); /* rm: each box's words */
	int *hit = xcalloc(nb, sizeof(*hit)), rc = 0, nhit = 0, last = -1;

	merge(b, nb, &m);
	for (size_t k = 0; k < nwords; k++) {
		const char *want = k < w->args.n ? w->args.v[k] : "";
		size_t *idx, n;
		if ((rc = find(&m, want, &idx, &n, &ctx->err)) < 0)
			goto out;
		for (size_t j = 0; j < n; j++)
			for (size_t i = 0; i < nb; i++)
				if (!strcmp(b[i].host, m.recs[idx[j]].host)) {
					if (!hit[i]++)
						nhit++;
					if (mode == M_JOBS && (!per[i].n || strcmp(per[i].v[per[i].n - 1], want)))
						sv_push(&per[i], want);
					last = (int)i;
				}
		free(idx);
	}
	if (mode != M_JOBS && nhit == 1) {
		rc = pool_exec_on(ctx, b[last].host, argc, argv);
		goto out;
	}
	/* rm's words on several boxes, or a group across boxes: each in turn. */
	for (size_t i = 0; i < nb; i++) {
		if (!hit[i])
			continue;
		struct strvec av = { 0 };
		sv_push(&av, argv[0]);
		if (mode == M_JOBS)
			for (size_t j = 0; j < per[i].n; j++)
				sv_push(&av, per[i].v[j]);
		else
			for (int j = 1; j < argc; j++)
				sv_push(&av, argv[j]);
		if (!ctx->quiet && nhit > 1)
			fprintf(stderr, "gpurun: on %s:\n", b[i].host);
		int r = pool_run_on(ctx, b[i].host, (int)av.n, av.v);
		sv_clear(&av);
		if (r < 0) {
			rc = GR_EXIT_INTERRUPTED;
			break;
		}
		if (r)
			rc = r;
	}
out:
	for (size_t i = 0; i < nb; i++)
		sv_clear(&per[i]);
	free(per);
	free(hit);
	job_recs_free(m.recs, m.n);
	return rc;
}

/* exec, shell, forward: the box of the latest job; with no job anywhere,
 * where the project was synced last, else the first that answered. */
static int do_latest(struct gr_ctx *ctx, struct box *b, size_t nb, int argc, char **argv)
{
	int best = -1;

	for (size_t i = 0; i < nb; i++) {
		if (b[i].error)
			continue;
		if (best < 0)
			best = (int)i;
		else if (b[i].n && (!b[best].n || b[i].recs[0].created_ms > b[best].recs[0].created_ms))
			best = (int)i;
		else if (!b[i].n && !b[best].n && b[i].synced > b[best].synced)
			best = (int)i;
	}
	if (!ctx->quiet)
		fprintf(stderr, "gpurun: on %s, %s (--host picks another)\n", b[best].host,
			b[best].n ? "the pool's host of the latest job" : "the pool's host synced last");
	return pool_exec_on(ctx, b[best].host, argc, argv);
}

static int do_each(struct gr_ctx *ctx, int argc, char **argv)
{
	const struct gr_config *cfg = ctx->cfg;
	int rc = 0;

	for (size_t i = 0; i < cfg->remote.nhosts; i++) {
		if (!ctx->quiet)
			fprintf(stderr, "gpurun: %s (%zu of %zu):\n", cfg->remote.hosts[i], i + 1,
				cfg->remote.nhosts);
		int r = pool_run_on(ctx, cfg->remote.hosts[i], argc, argv);
		if (r < 0)
			return GR_EXIT_INTERRUPTED;
		if (r)
			rc = r;
	}
	return rc;
}

int pool_main(struct gr_ctx *ctx, int argc, char **argv)
{
	enum mode mode = mode_of(ctx->cmd);
	struct words w = { 0 };
	size_t nb = ctx->cfg->remote.nhosts;
	struct box *b;
	int rc;

	if ((rc = read_words(ctx, argc, argv, &w)) < 0)
		goto out;
	if (mode == M_EACH) {
		rc = do_each(ctx, argc, argv);
		goto out;
	}
	b = xcalloc(nb, sizeof(*b));
	pool_probe_all(ctx, b, nb);
	if ((rc = pool_probe_report(ctx, b, nb)) == 0) {
		switch (mode) {
		case M_STATUS: rc = do_status(ctx, b, nb, &w); break;
		case M_TRAIN: rc = do_train(ctx, b, nb, &w, argc, argv); break;
		case M_JOB:
		case M_JOBS: rc = do_jobs(ctx, b, nb, &w, mode, argc, argv); break;
		case M_LATEST: rc = do_latest(ctx, b, nb, argc, argv); break;
		default: break;
		}
	}
	pool_boxes_free(b, nb);
out:
	sv_clear(&w.args);
	return rc;
}
