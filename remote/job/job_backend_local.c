/* The local backend (job_backend.h): the agent's own supervisor. start
 * double-forks `gpurun-agent supervise` (job_super.c) into a session of
 * its own, handing it the job's lock; the job's state comes from that
 * lock and the supervisor's meta files; stop signals the job's whole
 * process tree (job_proc.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_backend.h"
#include "job_container.h"
#include "job_gpu.h"
#include "job_queue.h"
#include "job_proc.h"
#include "job_record.h"
#include "job_store.h"
#include "job_super.h"

/* ---- start ---- */

static int local_start(const char *dir, struct gr_err *err)
{
	return job_start_supervisor(dir, "supervise", err);
}

/* ---- state ---- */

/* Why a job is lost, when something of it still runs (issue 29): its
 * processes outlived the supervisor; NULL when nothing does. */
static char *lost_reason(const char *id, uint32_t pid)
{
	struct strbuf desc = STRBUF_INIT;
	size_t n = job_procs_alive(id, pid, &desc);
	char *why = n ? xasprintf("supervisor gone, %zu process%s still running (%s)", n,
				  n == 1 ? "" : "es", desc.buf)
		      : NULL;

	sb_release(&desc);
	return why;
}

static void local_state(const char *dir, struct job_rec *r)
{
	struct strvec run = STRVEC_INIT, st = STRVEC_INIT;
	char *p, *phase;
	const char *state;

	/* Order matters: liveness first, then the files, so a job that ends
	 * between the two reads shows its status rather than "lost". */
	int alive = job_supervisor_alive(dir);
	p = job_meta(dir, "run");
	job_kv_read(p, &run, NULL);
	free(p);
	p = job_meta(dir, "status");
	int has_status = job_kv_read(p, &st, NULL) == 0;
	free(p);
	phase = job_meta_text(dir, "phase");

	r->start_ms = job_kv_u64(&run, "start_ms");
	r->pid = (uint32_t)job_kv_u64(&run, "pid");
	free(r->gpus);
	r->gpus = xstrdup(job_kv_get(&run, "gpus") ? job_kv_get(&run, "gpus") : "");
	free(r->reason);
	r->reason = NULL;
	if (has_status) {
		uint64_t sig = job_kv_u64(&st, "signal");
		r->has_status = 1;
		r->signalled = sig != 0;
		r->code = (uint32_t)(sig ? sig : job_kv_u64(&st, "exit"));
		r->end_ms = job_kv_u64(&st, "end_ms");
		r->log_lost = job_kv_u64(&st, "log_lost");
		free(phase);
		phase = xstrdup(job_kv_get(&st, "phase") ? job_kv_get(&st, "phase") : "run");
		r->tries = (uint32_t)job_kv_u64(&st, "tries");
		state = job_meta_exists(dir, "stopped") ? "stopped" : job_status_state(&st, r);
	} else if (alive) {
		char *queued = job_meta_text(dir, "queued"), *tries = job_meta_text(dir, "tries");
		r->tries = (uint32_t)strtoul(tries, NULL, 10);
		free(tries);
		if (run.n)
			state = "running";
		else if (job_meta_exists(dir, "queued"))
			state = "queued";
		else if (!strcmp(phase, "setup"))
			state = "setup";
		else if (!strcmp(phase, "build"))
			state = "building";
		else
			state = "starting";
		if (!strcmp(state, "queued"))
			r->queue_pos = (uint32_t)gpu_queue_place(r->id);
		if (*queued)
			r->reason = queued;
		else
			free(queued);
	} else {
		state = "lost";
		r->reason = lost_reason(r->id, r->pid);
	}
	free(r->state);
	r->state = xstrdup(state);
	free(r->phase);
	r->phase = phase;
	sv_clear(&run);
	sv_clear(&st);
}

/* ---- stop ---- */

struct pidset {
	pid_t *v;
	size_t n;
};

static int pidset_has(const struct pidset *s, pid_t p)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == p)
			return 1;
	return 0;
}

static int pidset_add(struct pidset *s, pid_t p)
{
	if (pidset_has(s, p))
		return 0;
	s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
	s->v[s->n++] = p;
	return 1;
}

/* SIGTERM every process of job id (sid: its session, 0 if unknown) and
 * whatever appears during grace_s, then SIGKILL until none is left (or
 * they will not go). seen: every pid signalled; *nterm: how many got
 * SIGTERM; *killed: SIGKILL was needed. Returns how many are left, in
 * *left (the caller's). */
static size_t stop_procs(const char *id, pid_t sid, int grace_s, struct pidset *seen,
			 uint32_t *nterm, int *killed, struct job_proc **left)
{
	struct job_proc *ps = NULL;
	size_t n;

	uint64_t deadline = now_ms() + (uint64_t)grace_s * 1000;
	for (;;) {
		n = job_procs(id, sid, &ps);
		for (size_t i = 0; i < n; i++)
			if (pidset_add(seen, ps[i].pid)) {
				kill(ps[i].pid, SIGTERM);
				kill(ps[i].pid, SIGCONT); /* a stopped process must see it */
				(*nterm)++;
			}
		free(ps);
		ps = NULL;
		if (!n || now_ms() >= deadline)
			break;
		usleep(100 * 1000);
	}
	for (int round = 0; n && round < 40; round++) {
		*killed = 1;
		n = job_procs(id, sid, &ps);
		for (size_t i = 0; i < n; i++) {
			pidset_add(seen, ps[i].pid);
			kill(ps[i].pid, SIGKILL);
		}
		free(ps);
		ps = NULL;
		if (n)
			usleep(50 * 1000);
	}
	return job_procs(id, sid, left);
}

/* The GPUs job id's processes (seen, or carrying its id) still hold:
 * u32 n, n x (u32 pid, str GPU), appended to payload. */
static void put_gpu_holders(struct strbuf *payload, const struct pidset *seen, const char *id)
{
	struct gpu_report g = { 0 };
	struct strbuf holders = STRBUF_INIT;
	uint32_t nh = 0;

	gpu_report_load(&g, 1);
	for (size_t i = 0; i < g.napps; i++) {
		const struct gpu_app *a = &g.apps[i];
		if (!pidset_has(seen, (pid_t)a->pid) && !(a->job && !strcmp(a->job, id)))
			continue;
		char idx[16] = "";
		for (size_t j = 0; j < g.ngpus; j++)
			if (!strcmp(g.gpus[j].uuid, a->gpu_uuid))
				snprintf(idx, sizeof(idx), "%u", g.gpus[j].index);
		put_u32(&holders, a->pid);
		put_str(&holders, idx[0] ? idx : a->gpu_uuid);
		nh++;
	}
	put_u32(payload, nh);
	sb_add(payload, holders.buf, holders.len);
	sb_release(&holders);
	gpu_report_free(&g);
}

/* JOB_STOP's reply after its record: how many processes got SIGTERM,
 * whether SIGKILL was needed, and those still there. */
static void put_stop_procs(struct strbuf *payload, uint32_t nterm, int killed,
			   const struct job_proc *ps, size_t n)
{
	put_u32(payload, nterm);
	put_u8(payload, (uint8_t)killed);
	put_u32(payload, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		put_u32(payload, (uint32_t)ps[i].pid);
		put_str(payload, ps[i].comm);
	}
}

int job_stop_orphan(const char *id, int grace_s, struct strbuf *payload, struct gr_err *err)
{
	struct job_rec r = { 0 };
	struct job_proc *ps = NULL;
	struct pidset seen = { 0 };
	uint32_t nterm = 0;
	int killed = 0;
	size_t n;

	if (!job_procs_alive(id, 0, NULL))
		return gr_errf(err, GR_ENOTFOUND, "no job '%s' on the host", id);
	n = stop_procs(id, 0, grace_s, &seen, &nterm, &killed, &ps);
	r.id = xstrdup(id);
	r.state = xstrdup("lost");
	r.reason = xstrdup("its folder on the host is gone; what carried its id was stopped");
	r.backend = xstrdup("local");
	job_rec_put(payload, &r);
	put_stop_procs(payload, nterm, killed, ps, n);
	put_gpu_holders(payload, &seen, id);
	put_u32(payload, 0); /* containers: found by their job's folder only */
	put_str(payload, "");
	free(ps);
	free(seen.v);
	job_rec_clear(&r);
	return 0;
}

int job_orphan_rec(const char *id, struct job_rec *r)
{
	struct strbuf desc = STRBUF_INIT;
	size_t np = job_id_valid(id) ? job_procs_alive(id, 0, &desc) : 0;

	*r = (struct job_rec){ 0 };
	if (np) {
		r->id = xstrdup(id);
		r->state = xstrdup("lost");
		r->backend = xstrdup("local");
		r->reason = xasprintf("its folder on the host is gone, %zu process%s still running (%s)",
				      np, np == 1 ? "" : "es", desc.buf);
	}
	sb_release(&desc);
	return np > 0;
}

void job_orphans_put(const char *root, struct strbuf *recs, uint32_t *n)
{
	struct strvec ids = STRVEC_INIT;

	job_orphan_ids(root, &ids);
	for (size_t i = 0; i < ids.n; i++) {
		struct job_rec r;
		if (job_orphan_rec(ids.v[i], &r)) {
			job_rec_put(recs, &r);
			(*n)++;
		}
		job_rec_clear(&r);
	}
	sv_clear(&ids);
}

static int local_stop(const char *dir, int grace_s, struct strbuf *payload, struct gr_err *err)
{
	struct job_rec r;
	struct job_proc *ps = NULL;
	struct pidset seen = { 0 };
	struct job_ctr ctr;
	struct strvec cstopped = STRVEC_INIT, cleft = STRVEC_INIT;
	struct gr_err cerr = { 0 };
	const char *ctr_err = "";
	uint32_t nterm = 0;
	int killed = 0, rc;
	size_t n;
	char *p;

	if ((rc = job_load(dir, &r, 0, err)) < 0)
		return rc;
	p = job_meta(dir, "stopped");
	if (!job_rec_ended(&r))
		write_file_atomic(p, "", 0, 0644, NULL);
	free(p);

	/* A job in a container: its runtime stops it (SIGTERM to its init,
	 * SIGKILL after the grace) and removes it, and says what is left.
	 * The processes are looked for after, as for any job. */
	if (job_ctr_load(dir, &ctr, NULL) == 0) {
		if (job_ctr_stop_all(&ctr, r.id, grace_s, &cstopped, &cleft, &cerr) < 0)
			ctr_err = cerr.msg;
		job_ctr_free(&ctr);
	}

	/* SIGTERM everything now, and whatever appears during the grace;
	 * then SIGKILL, until nothing is left (or it will not go). */
	n = stop_procs(r.id, (pid_t)r.pid, grace_s, &seen, &nterm, &killed, &ps);

	/* The supervisor records the end once the job's main process is
	 * gone; give it a moment so the reply shows the final state. */
	for (int i = 0; i < 50 && !job_rec_ended(&r); i++) {
		job_rec_clear(&r);
		if ((rc = job_load(dir, &r, 0, err)) < 0)
			goto out;
		if (!job_rec_ended(&r))
			usleep(100 * 1000);
	}
	job_rec_put(payload, &r);
	put_stop_procs(payload, nterm, killed, ps, n);
	/* Does any of its processes (even a survivor) still hold a GPU? */
	put_gpu_holders(payload, &seen, r.id);
	/* The containers stopped, each with whether it is still there (one
	 * that appeared meanwhile is only "still there"). */
	struct strvec newer = STRVEC_INIT;
	for (size_t j = 0; j < cleft.n; j++) {
		int seen = 0;
		for (size_t i = 0; i < cstopped.n; i++)
			seen |= !strcmp(cleft.v[j], cstopped.v[i]);
		if (!seen)
			sv_push(&newer, cleft.v[j]);
	}
	put_u32(payload, (uint32_t)(cstopped.n + newer.n));
	for (size_t i = 0; i < cstopped.n; i++) {
		int still = 0;
		for (size_t j = 0; j < cleft.n; j++)
			still |= !strcmp(cleft.v[j], cstopped.v[i]);
		put_str(payload, cstopped.v[i]);
		put_u8(payload, (uint8_t)still);
	}
	for (size_t j = 0; j < newer.n; j++) {
		put_str(payload, newer.v[j]);
		put_u8(payload, 1);
	}
	sv_clear(&newer);
	put_str(payload, ctr_err);
	rc = 0;
out:
	free(ps);
	free(seen.v);
	sv_clear(&cstopped);
	sv_clear(&cleft);
	job_rec_clear(&r);
	return rc;
}

static int local_main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "supervise"))
		return job_supervise(argc, argv);
	if (argc >= 2 && !strcmp(argv[1], "container-reap"))
		return job_ctr_reap_main(argc, argv);
	return -1;
}

const struct job_backend job_backend_local = {
	.name = "local",
	.start = local_start,
	.state = local_state,
	.refresh = NULL,
	.stop = local_stop,
	.status_final = 1,
	.main = local_main,
};
