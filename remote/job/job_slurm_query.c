/* What Slurm said about a project's jobs, cached in each job's
 * .gpurun/slurm-state, and the one query for all of them (see
 * job_slurm.h): the Slurm backend's state (job_backend_slurm.c) reads it,
 * so a status of N jobs costs one squeue, not N, and a Slurm that does
 * not answer is not asked again for a while. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "job_backend.h"
#include "job_record.h"
#include "job_slurm.h"
#include "job_store.h"

/* ---- what Slurm said, cached in .gpurun/slurm-state ---- */

static void cache_write(const char *dir, const char *id, const struct slurm_info *si, int final,
			const char *error)
{
	char *t = xasprintf("id=%s\nqueried_ms=%llu\nknown=%d\nfinal=%d\nstate=%s\nreason=%s\n"
			    "exit=%d\nsignal=%d\nrestarts=%u\nnodes=%s\npartition=%s\n"
			    "start_s=%llu\nend_s=%llu\nsource=%s\nerror=%s\n",
			    id, (unsigned long long)slurm_now_ms(), si->known, final, si->state, si->reason,
			    si->exit_code, si->exit_signal, si->restarts, si->nodes, si->partition,
			    (unsigned long long)si->start_s, (unsigned long long)si->end_s, si->source,
			    error ? error : "");
	job_meta_write(dir, "slurm-state", t, NULL);
	free(t);
}

/* The cached answer about job id: 0 and si filled when there is one. */
static int cache_read(const char *dir, const char *id, struct slurm_info *si, uint64_t *at,
		      int *final)
{
	struct strvec kv = STRVEC_INIT;
	char *p = job_meta(dir, "slurm-state");
	const char *v;
	int rc = -1;

	*si = (struct slurm_info){ 0 };
	if (job_kv_read(p, &kv, NULL) < 0 || !(v = job_kv_get(&kv, "id")) || strcmp(v, id))
		goto out;
#define CP(field, key) snprintf(si->field, sizeof(si->field), "%s", \
				job_kv_get(&kv, key) ? job_kv_get(&kv, key) : "")
	CP(state, "state");
	CP(reason, "reason");
	CP(nodes, "nodes");
	CP(partition, "partition");
	CP(source, "source");
#undef CP
	si->known = job_kv_u64(&kv, "known") != 0;
	si->exit_code = (int)job_kv_u64(&kv, "exit");
	si->exit_signal = (int)job_kv_u64(&kv, "signal");
	si->restarts = (uint32_t)job_kv_u64(&kv, "restarts");
	si->start_s = job_kv_u64(&kv, "start_s");
	si->end_s = job_kv_u64(&kv, "end_s");
	*at = job_kv_u64(&kv, "queried_ms");
	*final = job_kv_u64(&kv, "final") != 0;
	rc = 0;
out:
	sv_clear(&kv);
	free(p);
	return rc;
}

/* A Reason Slurm gave ("None" is none). */
int slurm_reason_given(const char *reason)
{
	return *reason && strcmp(reason, "None");
}

/* ---- one query for all of a project's jobs ----
 *
 * root/.slurm-queue (root: the project's jobs folder, a job's folder's
 * parent) says when Slurm was last asked about the project's jobs and,
 * when it did not answer, why: then no job asks again for DOWN_MS (each
 * try costs a time limit; with slurmctld down, status of N jobs took N
 * time limits). refresh asks squeue once for all the project's unfinished
 * jobs, at most every QUEUE_MS, and writes each job's cache; a job whose
 * state changed, or that squeue no longer lists, is asked alone
 * (scontrol, then sacct: its exit code, restarts), once. */
#define QUEUE_MS 2000
#define DOWN_MS 30000

static char *queue_file(const char *path, int is_root)
{
	const char *slash = strrchr(path, '/');

	if (is_root || !slash)
		return xasprintf("%s/.slurm-queue", path);
	return xasprintf("%.*s/.slurm-queue", (int)(slash - path), path);
}

void slurm_queue_mark(const char *path, int is_root, const char *error)
{
	char *p = queue_file(path, is_root);
	char *t = xasprintf("queried_ms=%llu\nerror=%s\n", (unsigned long long)slurm_now_ms(),
			    error ? error : "");

	write_file_atomic(p, t, strlen(t), 0644, NULL);
	free(t);
	free(p);
}

/* Asked at *at_ms; 1 with why when Slurm did not answer within DOWN_MS. */
static int queue_read(const char *path, int is_root, uint64_t *at_ms, char *why, size_t n)
{
	struct strvec kv = STRVEC_INIT;
	char *p = queue_file(path, is_root);
	int down = 0;

	*at_ms = 0;
	if (job_kv_read(p, &kv, NULL) == 0) {
		const char *e = job_kv_get(&kv, "error");
		*at_ms = job_kv_u64(&kv, "queried_ms");
		if (e && *e && slurm_now_ms() - *at_ms < DOWN_MS) {
			if (why)
				snprintf(why, n, "Slurm's controller does not answer (%s; asked %llu s "
					 "ago)", e, (unsigned long long)((slurm_now_ms() - *at_ms) / 1000));
			down = 1;
		}
	}
	free(p);
	sv_clear(&kv);
	return down;
}

int slurm_queue_down(const char *path, int is_root, char *why, size_t n)
{
	uint64_t at;

	return queue_read(path, is_root, &at, why, n);
}

/* While a job waits, a line in its log each time Slurm's reason
 * changes ("queued: Resources (Slurm job 12)"), written by whoever asked
 * (no process waits with the job). */
static void note_queue(const char *dir, const char *id, const struct slurm_info *old,
		       const struct slurm_info *now)
{
	if (!now->known || strcmp(now->state, "PENDING") || !slurm_reason_given(now->reason))
		return;
	if (old && !strcmp(old->state, "PENDING") && !strcmp(old->reason, now->reason))
		return;
	int fd = slurm_open_log(dir);
	slurm_lognote(fd, "queued: %s (Slurm job %s)", now->reason, id);
	if (fd >= 0)
		close(fd);
}

void slurm_refresh(const char *root)
{
	struct strvec ids = STRVEC_INIT, dirs = STRVEC_INIT, cur = STRVEC_INIT;
	struct strbuf out = STRBUF_INIT, e = STRBUF_INIT;
	const char *argv[] = { "squeue", "--me", "-h", "-o", SLURM_SQUEUE_FORMAT, NULL };
	char why[256];
	uint64_t at;

	job_list_ids(root, &ids);
	for (size_t i = 0; i < ids.n; i++) {
		char *dir = xasprintf("%s/%s", root, ids.v[i]);
		struct strvec sids = STRVEC_INIT;
		struct slurm_info si;
		uint64_t cat;
		int final = 0;
		if (job_backend_of(dir) == &job_backend_slurm) {
			slurm_ids(dir, &sids);
			if (sids.n && !(cache_read(dir, sids.v[sids.n - 1], &si, &cat, &final) == 0 && final)) {
				sv_push(&dirs, dir);
				sv_push(&cur, sids.v[sids.n - 1]);
			}
		}
		sv_clear(&sids);
		free(dir);
	}
	if (!dirs.n || queue_read(root, 1, &at, why, sizeof(why)) ||
	    slurm_now_ms() - at < QUEUE_MS)
		goto out;
	int rc = slurm_tool(argv, SLURM_TOOL_MS, &out, &e);
	if (rc != 0) {
		char msg[200];
		snprintf(msg, sizeof(msg), "squeue: %.*s", (int)strcspn(e.buf ? e.buf : "", "\n"),
			 e.buf && *e.buf ? e.buf : "failed");
		slurm_queue_mark(root, 1, msg);
		goto out;
	}
	slurm_queue_mark(root, 1, NULL);
	for (size_t i = 0; i < dirs.n; i++) {
		struct slurm_info now, old;
		uint64_t cat;
		int final = 0, have = cache_read(dirs.v[i], cur.v[i], &old, &cat, &final) == 0;
		if (slurm_parse_squeue(out.buf, cur.v[i], &now) < 0)
			continue; /* ended, or not yet listed: asked alone */
		/* squeue has no exit code or restarts: a job whose state
		 * changed is asked alone; one that did not keeps them. */
		if (have ? strcmp(old.state, now.state) : strcmp(now.state, "PENDING"))
			continue;
		if (have) {
			now.restarts = old.restarts;
			now.exit_code = old.exit_code;
			now.exit_signal = old.exit_signal;
		}
		note_queue(dirs.v[i], cur.v[i], have ? &old : NULL, &now);
		cache_write(dirs.v[i], cur.v[i], &now, 0, NULL);
	}
out:
	sb_release(&out);
	sb_release(&e);
	sv_clear(&ids);
	sv_clear(&dirs);
	sv_clear(&cur);
}

/* What Slurm says about job id, from the cache when it is fresh (max_age
 * ms) or final. *error: why Slurm could not be asked ("" when it could),
 * the caller's. Returns 0 when si holds an answer (maybe an old one). */
int slurm_info_get(const char *dir, const char *id, int requeue, uint64_t max_age,
		   struct slurm_info *si, char **error)
{
	struct gr_err err = { 0 };
	uint64_t at = 0;
	int final = 0, have = cache_read(dir, id, si, &at, &final) == 0;

	*error = xstrdup("");
	/* A cached "pending" is stale once the job's command has started. */
	if (have && !final && (!strcmp(si->state, "PENDING") || !strcmp(si->state, "CONFIGURING"))) {
		struct strvec run = STRVEC_INIT;
		char *p = job_meta(dir, "run");
		if (job_kv_read(p, &run, NULL) == 0 && job_kv_u64(&run, "start_ms") + 1000 >= at)
			max_age = 0;
		free(p);
		sv_clear(&run);
	}
	if (have && (final || (max_age && slurm_now_ms() - at < max_age)))
		return 0;
	/* Slurm did not answer a moment ago: not asked again (each try
	 * costs a time limit), what it said last, and why. */
	char down[256];
	if (slurm_queue_down(dir, 0, down, sizeof(down))) {
		free(*error);
		*error = xstrdup(down);
		return have ? 0 : -1;
	}
	struct slurm_info fresh;
	if (slurm_query(id, &fresh, &err) < 0) {
		free(*error);
		*error = xstrdup(err.msg);
		slurm_queue_mark(dir, 0, err.msg);
		return have ? 0 : -1;
	}
	note_queue(dir, id, have ? si : NULL, &fresh);
	*si = fresh;
	cache_write(dir, id, si, si->known && slurm_state_final(si->state, requeue), NULL);
	return 0;
}
