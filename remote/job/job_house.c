/* Housekeeping of a project's jobs (see job_house.h): disk use, removal,
 * prune, and the shared store's garbage collection. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "job_container.h"
#include "job_house.h"
#include "job_proc.h"
#include "job_record.h"
#include "job_store.h"


uint64_t job_store_du(const char *root)
{
	char *p = xasprintf("%s/%s", root, JOB_OBJECTS);
	DIR *d = opendir(p);
	struct dirent *e;
	uint64_t sum = 0;

	free(p);
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		struct stat st;
		if (e->d_name[0] != '.' && fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			sum += (uint64_t)st.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

uint64_t job_root_du(const char *root)
{
	struct strvec ids = STRVEC_INIT;
	uint64_t sum = job_store_du(root);

	job_list_ids(root, &ids);
	for (size_t i = 0; i < ids.n; i++) {
		char *dir = xasprintf("%s/%s", root, ids.v[i]);
		struct job_rec r;
		if (job_load(dir, &r, JOB_LOAD_DU, NULL) == 0)
			sum += r.disk_bytes;
		job_rec_clear(&r);
		free(dir);
	}
	sv_clear(&ids);
	return sum;
}

/* ---- removal ---- */

uint64_t job_store_gc(const char *root)
{
	char *p = xasprintf("%s/%s", root, JOB_OBJECTS);
	DIR *d = opendir(p);
	struct dirent *e;
	uint64_t freed = 0;

	if (d) {
		while ((e = readdir(d))) {
			struct stat st;
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
				continue;
			/* In use by a job. (One made for a snapshot and not
			 * linked there yet may go: the snapshot makes it again.) */
			if (st.st_nlink > 1)
				continue;
			if (unlinkat(dirfd(d), e->d_name, 0) == 0)
				freed += (uint64_t)st.st_blocks * 512;
		}
		closedir(d);
	}
	free(p);
	/* What an interrupted removal left. */
	d = opendir(root);
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, TRASH_PREFIX, strlen(TRASH_PREFIX))) {
			char *t = xasprintf("%s/%s", root, e->d_name);
			job_rm_tree(t);
			free(t);
		}
	if (d)
		closedir(d);
	return freed;
}

void job_house_result_free(struct job_house_result *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->v[i].id);
	free(r->v);
	*r = (struct job_house_result){ 0 };
}

/* Take the job folder out of sight first (one rename), then delete it. */
static int remove_job(const char *root, const char *id, struct gr_err *err)
{
	char *dir = xasprintf("%s/%s", root, id);
	char *trash = xasprintf("%s/" TRASH_PREFIX "%s-%ld", root, id, (long)getpid());
	int rc = 0;

	if (rename(dir, trash) < 0)
		rc = gr_errf(err, GR_EIO, "cannot remove job %s: %s", id, strerror(errno));
	else if (job_rm_tree(trash) < 0)
		rc = gr_errf(err, GR_EIO, "cannot remove all of job %s's folder: %s", id,
			     strerror(errno));
	free(dir);
	free(trash);
	return rc;
}

/* 0 when nothing job r started lives on, else GR_EINVAL with err saying
 * what: a job recorded as ended can still have processes (its supervisor
 * killed, children that ignore SIGHUP; a background child of a command
 * that exited) or a container (its supervisor and reaper killed at once).
 * Removing it would leave them running untracked, GPU locks and all. */
static int job_nothing_lives(const char *dir, const struct job_rec *r, struct gr_err *err)
{
	struct strbuf desc = STRBUF_INIT;
	struct strvec names = STRVEC_INIT;
	struct job_ctr c;
	int rc = 0;

	if (job_procs_alive(r->id, r->pid, &desc)) {
		rc = gr_errf(err, GR_EINVAL, "job %s has processes still running (%s); stop it first: gpurun stop %s",
			     r->id, desc.buf, r->id);
	} else if (job_ctr_load(dir, &c, NULL) == 0) {
		if (job_ctr_list(&c, r->id, &names, NULL) == 0 && names.n)
			rc = gr_errf(err, GR_EINVAL, "job %s has a container still there (%s); stop it first: gpurun stop %s",
				     r->id, names.v[0], r->id);
		job_ctr_free(&c);
	}
	sb_release(&desc);
	sv_clear(&names);
	return rc;
}

int job_house_remove(const char *root, const char *id, uint64_t *bytes, struct gr_err *err)
{
	char *dir = xasprintf("%s/%s", root, id);
	struct job_rec r;
	int rc;

	*bytes = 0;
	if (!job_id_valid(id)) {
		free(dir);
		return gr_errf(err, GR_ENOTFOUND, "no job '%s' on the host", id);
	}
	rc = job_load(dir, &r, JOB_LOAD_DU, err);
	if (rc == 0 && !job_rec_ended(&r))
		rc = gr_errf(err, GR_EINVAL, "job %s is %s; stop it first", id, r.state);
	if (rc == 0)
		rc = job_nothing_lives(dir, &r, err);
	if (rc == 0 && (rc = remove_job(root, id, err)) == 0)
		*bytes = r.disk_bytes;
	job_rec_clear(&r);
	free(dir);
	return rc;
}

void job_house_prune(const char *root, uint32_t keep, uint64_t older_ms, uint64_t now_ms,
		     int dry_run, struct job_house_result *res)
{
	struct strvec ids = STRVEC_INIT;

	*res = (struct job_house_result){ 0 };
	job_list_ids(root, &ids);
	for (size_t i = 0; i < ids.n; i++) {
		char *dir = xasprintf("%s/%s", root, ids.v[i]);
		struct job_rec r;
		int go = job_load(dir, &r, 0, NULL) == 0 && job_rec_ended(&r) &&
			 (!keep || i >= keep) &&
			 (!older_ms || (r.created_ms && r.created_ms + older_ms < now_ms)) &&
			 job_nothing_lives(dir, &r, NULL) == 0;
		if (go) {
			uint64_t bytes = job_du(dir, 1);
			if (!dry_run && remove_job(root, ids.v[i], NULL) < 0)
				go = 0;
			if (go) {
				res->v = xrealloc(res->v, (res->n + 1) * sizeof(*res->v));
				res->v[res->n].id = xstrdup(ids.v[i]);
				res->v[res->n++].bytes = bytes;
				res->freed += bytes;
			}
		}
		if (!go)
			res->kept++;
		job_rec_clear(&r);
		free(dir);
	}
	if (!dry_run)
		res->freed += job_store_gc(root);
	sv_clear(&ids);
}
