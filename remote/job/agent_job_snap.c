/* The agent's half of `gpurun rerun` and `gpurun diff`: a JOB_START that
 * names a job to rerun becomes that job's spec (job_rerun_spec; the start
 * itself is agent_job.c's, its snapshot made from the old one by
 * job_snap_rerun), and JOB_SNAP_LIST / JOB_SNAP_READ show two jobs'
 * snapshots (job_snaplist.h). */
#include <stdlib.h>
#include <string.h>

#include "agent_job.h"
#include "job_snaplist.h"

/* The job want names in project's jobs (its folder, its id: new). */
static int find_in(const char *root, const char *want, char **id, char **dir,
		   struct gr_err *err)
{
	int rc = job_resolve(root, want, id, err);

	if (rc == 0)
		*dir = xasprintf("%s/%s", root, *id);
	return rc;
}

/* A job with no record of its snapshot cannot be repeated or compared:
 * say why (its folder is there, so the job was made before the record). */
static int need_record(const char *dir, const char *id, struct gr_err *err)
{
	struct snap_recs l;
	int rc = job_snap_recs_read(dir, &l, err);

	job_snap_recs_free(&l);
	if (rc == GR_ENOTFOUND) {
		gr_err_clear(err);
		rc = gr_errf(err, GR_ENOTFOUND, "job %s has no record of its snapshot (it was "
			     "started by an older gpurun): what it ran is not known apart from "
			     "what it wrote", id);
	} else if (rc < 0) {
		gr_err_prefix(err, "job %s", id);
	}
	return rc;
}

int job_rerun_spec(const char *project, struct job_spec *spec, char **from, struct gr_err *err)
{
	struct job_spec old = { STRVEC_INIT }, out = { STRVEC_INIT };
	const char *want = job_spec_get(spec, "rerun_of", ""), *name = job_spec_get(spec, "name", NULL);
	char *root = NULL, *id = NULL, *dir = NULL;
	int rc = 0;

	*from = NULL;
	for (size_t i = 0; i + 1 < spec->kv.n; i += 2)
		if (strcmp(spec->kv.v[i], "rerun_of") && strcmp(spec->kv.v[i], "name"))
			return gr_errf(err, GR_EINVAL, "a rerun's spec holds only rerun_of and name, "
				       "not '%s': it runs what the job ran", spec->kv.v[i]);
	if ((rc = job_root(project, &root, err)) < 0)
		goto out;
	if ((rc = find_in(root, want, &id, &dir, err)) < 0) {
		if (rc == GR_ENOTFOUND)
			gr_hintf(err, "a job removed from the host (gpurun rm, prune, [jobs] keep) "
				 "took its snapshot with it");
		goto out;
	}
	if ((rc = need_record(dir, id, err)) < 0 || (rc = job_spec_read(dir, &old, err)) < 0)
		goto out;
	/* Its spec as it is, but what names it and what it waited for: the
	 * rerun starts now (it does not wait for an --after job again), runs
	 * setup only if needed, and says which job it repeats. */
	for (size_t i = 0; i + 1 < old.kv.n; i += 2) {
		const char *k = old.kv.v[i];
		if (!strcmp(k, "after") || !strcmp(k, "setup_force") || !strcmp(k, "rerun_of") ||
		    (!strcmp(k, "name") && name))
			continue;
		sv_push(&out.kv, k);
		sv_push(&out.kv, old.kv.v[i + 1]);
	}
	if (name && *name) {
		sv_push(&out.kv, "name");
		sv_push(&out.kv, name);
	}
	sv_push(&out.kv, "rerun_of");
	sv_push(&out.kv, id);
	job_spec_free(spec);
	*spec = out;
	out = (struct job_spec){ STRVEC_INIT };
	*from = dir;
	dir = NULL;
out:
	job_spec_free(&old);
	job_spec_free(&out);
	free(root);
	free(id);
	free(dir);
	return rc;
}

/* JOB_SNAP_LIST */

struct list_arg {
	char *ida, *dira, *idb, *dirb;
};

static int list_fn(void *arg, int data_fd, struct strbuf *reply, struct gr_err *err)
{
	struct list_arg *l = arg;

	(void)reply;
	return job_snap_list_write(l->ida, l->dira, l->idb, l->dirb, data_fd, err);
}

int agent_job_snap_list(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	char *project = get_str(rd), *wa = get_str(rd), *wb = get_str(rd), *root = NULL;
	struct list_arg l = { 0 };
	int rc = rd_done(rd, err, "JOB_SNAP_LIST");

	if (rc == 0)
		rc = job_root(project, &root, err);
	if (rc == 0 && (rc = find_in(root, wa, &l.ida, &l.dira, err)) == 0 &&
	    (rc = find_in(root, wb, &l.idb, &l.dirb, err)) == 0 &&
	    (rc = need_record(l.dira, l.ida, err)) == 0 && (rc = need_record(l.dirb, l.idb, err)) == 0)
		rc = agent_helper_start(a, rid, 1, 1, list_fn, &l, err);
	free(project);
	free(wa);
	free(wb);
	free(root);
	free(l.ida);
	free(l.dira);
	free(l.idb);
	free(l.dirb);
	return rc;
}

/* JOB_SNAP_READ */

int agent_job_snap_read(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	struct strvec paths = STRVEC_INIT;
	struct strbuf pl = STRBUF_INIT;
	char *dir = NULL;
	int rc = agent_find_job(rd, &dir, err);
	uint32_t n = rc == 0 ? get_u32(rd) : 0;

	if (n > rd->n / 4)
		rd->bad = 1;
	for (uint32_t i = 0; i < n && !rd->bad; i++) {
		char *p = get_str(rd);
		if (p)
			sv_push(&paths, p);
		free(p);
	}
	if (rc == 0)
		rc = rd_done(rd, err, "JOB_SNAP_READ");
	if (rc == 0 && (rc = job_snap_read_put(dir, &paths, &pl, err)) == 0)
		agent_ok(a, rid, pl.buf, pl.len);
	sv_clear(&paths);
	sb_release(&pl);
	free(dir);
	return rc;
}
