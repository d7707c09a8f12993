/* What a command's JOB argument names (see job_client.h, job_pick): one
 * job (an id, a unique prefix of one, a name) or every job of a sweep's
 * group. Groups are found here, on the client, from the job list: no
 * request of the agent's changes, and an exact name always wins over a
 * group of the same name. */
#include <stdlib.h>
#include <string.h>

#include "job_client.h"

int job_list_all(struct gr_conn *c, const char *project, struct job_rec **recs, size_t *n,
		 struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, rep = STRBUF_INIT;
	int rc;

	*recs = NULL;
	*n = 0;
	put_str(&pl, project);
	put_str(&pl, "");
	put_u32(&pl, 0);
	rc = conn_request(c, GR_MSG_JOB_LIST, pl.buf, pl.len, &rep, err);
	if (rc == 0)
		rc = job_list_parse(rep.buf, rep.len, recs, n, NULL, err);
	sb_release(&pl);
	sb_release(&rep);
	return rc;
}

void job_pick_free(struct job_pick *p)
{
	job_recs_free(p->recs, p->n);
	free(p->group);
	*p = (struct job_pick){ 0 };
}

/* Move recs[i] to the end of p. */
static void take(struct job_pick *p, struct job_rec *r)
{
	p->recs = xrealloc(p->recs, (p->n + 1) * sizeof(*p->recs));
	p->recs[p->n++] = *r;
	*r = (struct job_rec){ 0 };
}

int job_pick_in(struct job_rec *all, size_t n, const char *want, struct job_pick *p,
		struct gr_err *err)
{
	*p = (struct job_pick){ 0 };
	/* A name: its newest job (the list is newest first), as the agent
	 * resolves one. */
	for (size_t i = 0; i < n && !p->n; i++)
		if (all[i].name && !strcmp(all[i].name, want))
			take(p, &all[i]);
	for (size_t i = 0; i < n && !p->n && !p->group; i++)
		if (all[i].group && !strcmp(all[i].group, want))
			p->group = xstrdup(want);
	for (size_t i = 0; p->group && i < n; i++)
		if (all[i].group && !strcmp(all[i].group, want))
			take(p, &all[i]);
	if (p->n)
		return 0;
	gr_errf(err, GR_ENOTFOUND, "no job or group '%s' on the host", want);
	gr_hintf(err, "'gpurun status' lists the jobs");
	return GR_ENOTFOUND;
}

int job_pick(struct gr_ctx *ctx, const char *want, struct job_pick *p)
{
	struct job_rec *all = NULL, one;
	size_t n = 0;
	int rc;

	*p = (struct job_pick){ 0 };
	if ((rc = ctx_connect(ctx)) < 0)
		return rc;
	if (!want || !job_name_ok(want)) {
		/* The latest job, an id or a prefix: the agent resolves it. */
		if ((rc = job_status(ctx->conn, ctx->cfg->remote.path, want ? want : "", &one,
				     &ctx->err)) == 0)
			take(p, &one);
		return rc;
	}
	/* A name: the agent finds a job's name in one cheap request (the
	 * newest job of that name, as job_pick_in would); only a word no job
	 * is named takes the whole list, to look for a sweep's group. */
	rc = job_status(ctx->conn, ctx->cfg->remote.path, want, &one, &ctx->err);
	if (rc == 0) {
		take(p, &one);
		return 0;
	}
	if (rc != GR_ENOTFOUND)
		return rc;
	ctx->err = (struct gr_err){ 0 };
	if ((rc = job_list_all(ctx->conn, ctx->cfg->remote.path, &all, &n, &ctx->err)) == 0)
		rc = job_pick_in(all, n, want, p, &ctx->err);
	job_recs_free(all, n);
	return rc;
}
