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

char *job_root(const char *project)
{
	char *full = agent_path(project), *base;
	char real[PATH_MAX];
	const char *use = realpath(full, real) ? real : full;
	uint32_t h = 2166136261u; /* FNV-1a: a stable key per project path */
	struct strbuf key = STRBUF_INIT;
	char *out;

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
	out = xasprintf("%s/.cache/gpurun/jobs/%s-%08x", agent_home(), key.buf, h);
	sb_release(&key);
	free(full);
	return out;
}

/* Read "str project, str id" and find the job's folder. */
int agent_find_job(struct gr_rd *rd, char **dir, struct gr_err *err)
{
	char *project = get_str(rd), *want = get_str(rd), *root = NULL, *id = NULL;
	int rc = rd->bad ? gr_errf(err, GR_EPROTO, "protocol error: malformed job request") : 0;

	if (rc == 0) {
		root = job_root(project);
		rc = job_resolve(root, want, &id, err);
	}
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
