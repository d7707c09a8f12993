/* Which job a request names: the folder holding a project's jobs (named
 * after the project folder and a hash of its real path) and the job in it
 * that "str project, str id" resolves to (agent_job.h). Below every job
 * request file (start, status, log, house-keeping, the pull's), so none of
 * them reaches into another for it. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent_job_find.h"
#include "job_proc.h"
#include "job_record.h"
#include "job_store.h"

int job_base(char **out, struct gr_err *err)
{
	const char *conf = agent_jobs_dir_conf();
	char *dir;
	int rc;

	*out = NULL;
	if (!*conf)
		dir = xasprintf("%s/jobs", agent_cache_dir());
	else if (conf[0] == '/' || (conf[0] == '~' && (conf[1] == '\0' || conf[1] == '/')))
		dir = agent_path(conf);
	else
		return gr_errf(err, GR_EINVAL, "[remote] jobs_dir '%s' is not an absolute path",
			       conf);
	if ((rc = safe_dir_check_path(dir, 1, NULL, err)) < 0) {
		/* Only the message crosses the wire: say there which key moves it. */
		gr_err_prefix(err, "%s", *conf ? "[remote] jobs_dir"
				   : "the jobs folder ([remote] jobs_dir moves it)");
		free(dir);
		return rc;
	}
	*out = dir;
	return 0;
}

int job_root(const char *project, char **root, struct gr_err *err)
{
	char *full, *base, *jobs;
	char real[PATH_MAX];
	uint32_t h = 2166136261u; /* FNV-1a: a stable key per project path */
	struct strbuf key = STRBUF_INIT;
	const char *use;
	int rc;

	*root = NULL;
	if ((rc = job_base(&jobs, err)) < 0)
		return rc;
	full = agent_path(project);
	use = realpath(full, real) ? real : full;
	for (const char *p = use; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	base = strrchr(use, '/');
	base = base && base[1] ? base + 1 : (char *)"root";
	for (const char *p = base; *p && key.len < 40; p++) {
		char c = *p;
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		sb_add(&key, ok ? &c : "_", 1);
	}
	if (key.buf[0] == '.')
		key.buf[0] = '_';
	*root = xasprintf("%s/%s-%08x", jobs, key.buf, h);
	sb_release(&key);
	free(full);
	free(jobs);
	return 0;
}

/* Read "str project, str id" and find the job's folder. */
int agent_find_job(struct gr_rd *rd, char **dir, struct gr_err *err)
{
	char *project = get_str(rd), *want = get_str(rd), *root = NULL, *id = NULL;
	int rc = rd->bad ? gr_errf(err, GR_EPROTO, "protocol error: malformed job request") : 0;

	if (rc == 0 && (rc = job_root(project, &root, err)) == 0)
		rc = job_resolve(root, want, &id, err);
	if (rc == 0)
		*dir = xasprintf("%s/%s", root, id);
	if (rc == GR_ENOTFOUND && want) {
		/* Not "no job": its folder went, its processes did not. */
		struct job_rec r;
		if (job_orphan_rec(want, &r)) {
			gr_err_clear(err);
			gr_errf(err, GR_ENOTFOUND, "job %s: %s; 'gpurun stop %s' ends them", want,
				r.reason, want);
		}
		job_rec_clear(&r);
	}
	free(project);
	free(want);
	free(root);
	free(id);
	return rc;
}
