/* Job requests from the client and formatting helpers (see job_client.h;
 * the .gpurun/jobs cache is in job_cache.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job_client.h"
#include "term.h"

int job_id_check(const char *id, struct gr_err *err)
{
	if (job_id_ok(id))
		return 0;
	gr_errf(err, GR_EPROTO, "the host sent an invalid job id '%s'; refusing to use it", ts(id));
	gr_hintf(err, "gpurun's agent only makes ids like 20261122-003512-a1b2: the host "
		 "is not running gpurun's agent as it should, or is compromised");
	return GR_EPROTO;
}

static int has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

int job_rec_check(const struct job_rec *r, struct gr_err *err)
{
	int rc = job_id_check(r->id, err);

	/* Names go into messages, the cache and completion: only the shape
	 * both sides allow. Hashes are shown as they come: only hex. */
	if (rc == 0 && r->name && *r->name && !job_name_ok(r->name))
		rc = gr_errf(err, GR_EPROTO, "the host sent an invalid name '%s' for job %s; "
			     "refusing it", ts(r->name), r->id);
	/* A sweep's group and the job waited for go into messages too. */
	if (rc == 0 && r->group && *r->group && !job_name_ok(r->group))
		rc = gr_errf(err, GR_EPROTO, "the host sent an invalid group '%s' for job %s; "
			     "refusing it", ts(r->group), r->id);
	if (rc == 0 && r->after && *r->after) {
		char id[GR_JOB_ID_LEN + 1];
		snprintf(id, sizeof(id), "%s", r->after);
		if (!job_id_ok(id) || (r->after[GR_JOB_ID_LEN] && strcmp(r->after + GR_JOB_ID_LEN, ":ok")))
			rc = gr_errf(err, GR_EPROTO, "the host sent an invalid 'after' '%s' for job %s; "
				     "refusing it", ts(r->after), r->id);
	}
	if (rc == 0 && r->rerun_of && *r->rerun_of && !job_id_ok(r->rerun_of))
		rc = gr_errf(err, GR_EPROTO, "the host sent an invalid 'rerun_of' '%s' for job %s; "
			     "refusing it", ts(r->rerun_of), r->id);
	if (rc == 0 && (!job_hex_ok(r->git_commit, 40, 64) || !job_hex_ok(r->git_diff, 64, 64)))
		rc = gr_errf(err, GR_EPROTO, "the host sent a malformed commit for job %s", r->id);
	/* The image is the user's own [container] image (the agent refused
	 * one with a control character or a leading '-'); the runtime one
	 * of two words. */
	if (rc == 0 && !job_ctr_runtime_ok(r->runtime))
		rc = gr_errf(err, GR_EPROTO, "the host sent an unknown container runtime '%s' for job %s; "
			     "refusing it", ts(r->runtime), r->id);
	if (rc == 0 && r->image && (r->image[0] == '-' || strlen(r->image) > 4096 || has_ctl(r->image)))
		rc = gr_errf(err, GR_EPROTO, "the host sent an invalid image '%s' for job %s; refusing it",
			     ts(r->image), r->id);
	return rc;
}


static void spec_pair(struct strvec *spec, const char *k, const char *v)
{
	if (v && *v) {
		sv_push(spec, k);
		sv_push(spec, v);
	}
}

/* [slurm]: backend "slurm" and its slurm_* keys (job_proto.h). */
static void job_spec_slurm(const struct gr_config *cfg, struct strvec *spec)
{
	char n[24];

#define SPAIR(k, v) spec_pair(spec, (k), (v))
#define NPAIR(k, v) do { snprintf(n, sizeof(n), "%d", (v)); SPAIR((k), n); } while (0)
	SPAIR("backend", "slurm");
	SPAIR("slurm_partition", cfg->slurm.partition);
	SPAIR("slurm_account", cfg->slurm.account);
	SPAIR("slurm_qos", cfg->slurm.qos);
	SPAIR("slurm_time", cfg->slurm.time);
	NPAIR("slurm_nodes", cfg->slurm.nodes);
	NPAIR("slurm_ntasks_per_node", cfg->slurm.ntasks_per_node);
	if (cfg->slurm.cpus_per_task > 0)
		NPAIR("slurm_cpus_per_task", cfg->slurm.cpus_per_task);
	SPAIR("slurm_mem", cfg->slurm.mem);
	SPAIR("slurm_constraint", cfg->slurm.constraint);
	SPAIR("slurm_gpu_flag", cfg->slurm.gpu_flag);
	SPAIR("slurm_gpu_type", cfg->slurm.gpu_type);
	for (size_t i = 0; i < cfg->slurm.options.n; i++) {
		sv_push(spec, "slurm_option");
		sv_push(spec, cfg->slurm.options.v[i]); /* an empty word ("") too */
	}
	SPAIR("slurm_build_on", cfg->slurm.build_on);
	if (cfg->slurm.signal_before > 0)
		NPAIR("slurm_signal_before", cfg->slurm.signal_before);
	if (cfg->slurm.requeue)
		SPAIR("slurm_requeue", "1");
	if (cfg->slurm.resubmit)
		NPAIR("slurm_resubmit", cfg->slurm.max_resubmits);
#undef NPAIR
#undef SPAIR
}

/* The terminal type a job's steps get: the user's terminal's, or
 * xterm-256color when there is none (in a pipe, in CI) or its name is
 * not a plain one; the client filters what reaches a terminal anyway. */
static const char *job_term(void)
{
	const char *t = getenv("TERM");

	if ((!isatty(1) && !isatty(2)) || !job_term_ok(t))
		return "xterm-256color";
	return t;
}

void job_spec_from_config(const struct gr_config *cfg, int force_setup, struct strvec *spec)
{
#define PAIR(k, v) do { sv_push(spec, (k)); sv_push(spec, (v)); } while (0)
	PAIR("command", cfg->train.command ? cfg->train.command : "");
	PAIR("term", job_term());
	PAIR("gpus", cfg->train.gpus ? cfg->train.gpus : "");
	PAIR("shell", cfg->train.shell && *cfg->train.shell ? cfg->train.shell : "sh");
	if (cfg->train.output && !strcmp(cfg->train.output, "pipe"))
		PAIR("output", "pipe");
	if (cfg->setup.command && *cfg->setup.command) {
		PAIR("setup", cfg->setup.command);
		for (size_t i = 0; i < cfg->setup.inputs.n; i++)
			PAIR("setup_input", cfg->setup.inputs.v[i]);
		if (force_setup)
			PAIR("setup_force", "1");
	}
	if (cfg->build.command && *cfg->build.command)
		PAIR("build", cfg->build.command);
	for (size_t i = 0; i < cfg->train.persist.n; i++)
		PAIR("persist", cfg->train.persist.v[i]);
	if (cfg->container.image && *cfg->container.image) {
		PAIR("container_image", cfg->container.image);
		PAIR("container_runtime", cfg->container.runtime && *cfg->container.runtime
						  ? cfg->container.runtime : "auto");
		for (size_t i = 0; i < cfg->container.options.n; i++)
			PAIR("container_option", cfg->container.options.v[i]);
		for (size_t i = 0; i < cfg->container.mounts.n; i++)
			PAIR("container_mount", cfg->container.mounts.v[i]);
		if (cfg->container.user && *cfg->container.user)
			PAIR("container_user", cfg->container.user);
	}
	if (cfg->train.time_limit || cfg->train.retries) {
		char n[32];
		snprintf(n, sizeof(n), "%llu", (unsigned long long)cfg->train.time_limit);
		PAIR("time_limit", n);
		snprintf(n, sizeof(n), "%d", cfg->train.retries);
		PAIR("retries", n);
		snprintf(n, sizeof(n), "%d", cfg->train.stop_grace);
		PAIR("stop_grace", n);
	}
	if (cfg->notify.command && *cfg->notify.command)
		PAIR("notify_command", cfg->notify.command);
	if (cfg->slurm_on)
		job_spec_slurm(cfg, spec);
#undef PAIR
}

int job_start(struct gr_conn *c, const char *project, const struct strvec *spec, char **id,
	      struct job_rec **others, size_t *nothers, char **warn, struct gr_err *err)
{
	return job_start_intr(c, project, spec, id, others, nothers, -1, warn, NULL, err);
}

int job_start_intr(struct gr_conn *c, const char *project, const struct strvec *spec, char **id,
		   struct job_rec **others, size_t *nothers, int intr_fd, char **warn,
		   uint32_t *follow_id, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, rep = STRBUF_INIT;
	struct gr_rd rd;
	int rc;

	*id = NULL;
	*warn = NULL;
	if (others) {
		*others = NULL;
		*nothers = 0;
	}
	/* The spec's "env" values are secrets (train_spec.h): they travel in
	 * this request on the open channel, and nowhere else: never offered
	 * to the bootstrap command (conn_opts.early: argv on the host, which
	 * every account's ps shows), never traced, and the agent keeps them
	 * in the job's 0600 spec file only. */
	put_str(&pl, project);
	put_u32(&pl, (uint32_t)(spec->n / 2));
	for (size_t i = 0; i + 1 < spec->n; i += 2)
		job_spec_put(&pl, spec->v[i], spec->v[i + 1]);
	if (follow_id)
		put_u32(&pl, JOB_START_FOLLOW);
	gr_trace("job: JOB_START%s", follow_id ? ", its log to follow" : "");
	rc = conn_request_intr(c, GR_MSG_JOB_START, pl.buf, pl.len, &rep, intr_fd, err);
	explicit_bzero(pl.buf, pl.len);
	if (rc == 0) {
		struct job_rec *recs = NULL;
		size_t n = 0;
		rd_init(&rd, rep.buf, rep.len);
		*id = get_str(&rd);
		char *dir = get_str(&rd), *w = get_str(&rd);
		uint32_t cnt = get_u32(&rd);
		for (uint32_t i = 0; i < cnt && !rd.bad && i < 64; i++) {
			recs = xrealloc(recs, (n + 1) * sizeof(*recs));
			job_rec_get(&rd, &recs[n++]);
		}
		if (rd_done(&rd, err, "JOB_START") < 0)
			rc = GR_EPROTO;
		else
			rc = job_id_check(*id, err);
		for (size_t i = 0; i < n && rc == 0; i++)
			rc = job_rec_check(&recs[i], err);
		if (rc == 0 && *w)
			*warn = w;
		else
			free(w);
		free(dir);
		if (rc < 0) {
			free(*id);
			*id = NULL;
			job_recs_free(recs, n);
		} else if (others) {
			*others = recs;
			*nothers = n;
		} else {
			job_recs_free(recs, n);
		}
	}
	if (follow_id)
		*follow_id = rc == 0 ? conn_last_id(c) : 0;
	sb_release(&pl);
	sb_release(&rep);
	return rc;
}

void job_recs_free(struct job_rec *recs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		job_rec_clear(&recs[i]);
	free(recs);
}

int job_list_parse(const void *p, size_t len, struct job_rec **recs, size_t *n,
		   uint64_t *disk_total, struct gr_err *err)
{
	struct gr_rd rd;
	int rc;

	*recs = NULL;
	*n = 0;
	rd_init(&rd, p, len);
	uint32_t cnt = get_u32(&rd);
	/* A record that passes job_rec_check holds at least its id (u32 n,
	 * str "id", str of 20 bytes: 34 bytes): a count past that is a lie. */
	if (cnt > rd.n / 34)
		return gr_errf(err, GR_EPROTO, "protocol error: the host announced %u jobs in %zu bytes",
			       cnt, rd.n);
	for (uint32_t i = 0; i < cnt && !rd.bad; i++) {
		*recs = xrealloc(*recs, (*n + 1) * sizeof(**recs));
		job_rec_get(&rd, &(*recs)[(*n)++]);
	}
	uint64_t total = get_u64(&rd);
	if (disk_total)
		*disk_total = total;
	rc = rd_done(&rd, err, "JOB_LIST");
	for (size_t i = 0; i < *n && rc == 0; i++)
		rc = job_rec_check(&(*recs)[i], err);
	if (rc < 0) {
		job_recs_free(*recs, *n);
		*recs = NULL;
		*n = 0;
	}
	return rc;
}

static void list_payloads(const struct job_list_ask *a, struct strbuf *list, struct strbuf *gpus)
{
	put_str(list, a->project);
	put_str(list, a->id ? a->id : "");
	put_u32(list, a->limit);
	job_gpus_payload(gpus, a->project);
}

void job_list_ask_early(void *arg, struct gr_conn *c, struct strbuf *frames)
{
	struct job_list_ask *a = arg;
	struct strbuf list = STRBUF_INIT, gpus = STRBUF_INIT;

	list_payloads(a, &list, &gpus);
	a->list_id = conn_next_id(c);
	a->gpus_id = conn_next_id(c);
	proto_frame_append(frames, GR_MSG_JOB_LIST, 0, a->list_id, list.buf, list.len);
	proto_frame_append(frames, GR_MSG_JOB_GPUS, 0, a->gpus_id, gpus.buf, gpus.len);
	sb_release(&list);
	sb_release(&gpus);
}

int job_list_gpus_raw(struct gr_conn *c, struct job_list_ask *a, struct strbuf *list,
		      struct strbuf *gpus, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, pg = STRBUF_INIT;
	int rc = 0, got_list = 0, got_gpus = 0;

	if (!a->list_id) { /* not in the command: ask now */
		list_payloads(a, &pl, &pg);
		a->list_id = conn_next_id(c);
		a->gpus_id = conn_next_id(c);
		conn_send(c, GR_MSG_JOB_LIST, 0, a->list_id, pl.buf, pl.len);
		conn_send(c, GR_MSG_JOB_GPUS, 0, a->gpus_id, pg.buf, pg.len);
	}
	uint32_t list_id = a->list_id, gpus_id = a->gpus_id;
	while (!got_list || !got_gpus) {
		struct gr_frame f;
		if ((rc = conn_recv_idle(c, &f, conn_idle_ms(), err)) < 0)
			break;
		if (f.id != list_id && f.id != gpus_id)
			continue;
		if (f.type == GR_MSG_ERROR) {
			rc = conn_error_from_frame(&f, err);
			break;
		}
		if (f.id == gpus_id && !got_gpus) {
			sb_add(gpus, f.payload, f.len);
			got_gpus = 1;
		} else if (f.id == list_id && !got_list) {
			sb_add(list, f.payload, f.len);
			got_list = 1;
		}
	}
	sb_release(&pl);
	sb_release(&pg);
	return rc < 0 ? rc : 0;
}

int job_list_gpus(struct gr_conn *c, struct job_list_ask *a, struct job_rec **recs, size_t *n,
		  uint64_t *disk_total, struct job_gpus *g, struct gr_err *err)
{
	struct strbuf list = STRBUF_INIT, gpus = STRBUF_INIT;
	int rc;

	*recs = NULL;
	*n = 0;
	*g = (struct job_gpus){ 0 };
	if ((rc = job_list_gpus_raw(c, a, &list, &gpus, err)) == 0 &&
	    (rc = job_gpus_parse(gpus.buf, gpus.len, g, err)) == 0)
		rc = job_list_parse(list.buf, list.len, recs, n, disk_total, err);
	sb_release(&list);
	sb_release(&gpus);
	return rc;
}

int job_status(struct gr_conn *c, const char *project, const char *id,
	       struct job_rec *r, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, rep = STRBUF_INIT;
	struct gr_rd rd;
	int rc;

	*r = (struct job_rec){ 0 };
	put_str(&pl, project);
	put_str(&pl, id ? id : "");
	rc = conn_request(c, GR_MSG_JOB_STATUS, pl.buf, pl.len, &rep, err);
	if (rc == 0) {
		rd_init(&rd, rep.buf, rep.len);
		job_rec_get(&rd, r);
		if ((rc = rd_done(&rd, err, "JOB_STATUS")) < 0 || (rc = job_rec_check(r, err)) < 0)
			job_rec_clear(r);
	}
	sb_release(&pl);
	sb_release(&rep);
	return rc;
}

void job_stop_report_free(struct job_stop_report *s)
{
	job_rec_clear(&s->rec);
	sv_clear(&s->survivors);
	sv_clear(&s->gpu_holders);
	sv_clear(&s->ctr_stopped);
	sv_clear(&s->ctr_left);
	free(s->ctr_err);
	s->ctr_err = NULL;
}

void job_stop_payload(struct strbuf *pl, const char *project, const char *id, int grace_s)
{
	put_str(pl, project);
	put_str(pl, id ? id : "");
	put_u32(pl, (uint32_t)(grace_s < 0 ? 0 : grace_s));
}

int job_stop_parse(const void *p, size_t n, struct job_stop_report *s, struct gr_err *err)
{
	struct gr_rd rd;

	*s = (struct job_stop_report){ 0 };
	rd_init(&rd, p, n);
	job_rec_get(&rd, &s->rec);
	s->nterm = get_u32(&rd);
	s->killed = get_u8(&rd);
	uint32_t k = get_u32(&rd);
	if (k > rd.n / 8) /* u32 pid + an empty str at least */
		rd.bad = 1;
	for (uint32_t i = 0; i < k && !rd.bad; i++) {
		uint32_t pid = get_u32(&rd);
		char *comm = get_str(&rd);
		if (comm)
			sv_pushf(&s->survivors, "%u %s", pid, comm);
		free(comm);
	}
	k = get_u32(&rd);
	if (k > rd.n / 8)
		rd.bad = 1;
	for (uint32_t i = 0; i < k && !rd.bad; i++) {
		uint32_t pid = get_u32(&rd);
		char *gpu = get_str(&rd);
		if (gpu)
			sv_pushf(&s->gpu_holders, "%u %s", pid, gpu);
		free(gpu);
	}
	k = get_u32(&rd);
	if (k > rd.n / 5) /* an empty str and a u8 at least */
		rd.bad = 1;
	for (uint32_t i = 0; i < k && !rd.bad; i++) {
		char *name = get_str(&rd);
		uint8_t left = get_u8(&rd);
		if (name)
			sv_push(left ? &s->ctr_left : &s->ctr_stopped, name);
		free(name);
	}
	s->ctr_err = get_str(&rd);
	int rc = rd_done(&rd, err, "JOB_STOP");
	if (rc == 0)
		rc = job_rec_check(&s->rec, err);
	/* Names go into messages: only what a runtime allows. */
	for (size_t i = 0; rc == 0 && i < s->ctr_stopped.n + s->ctr_left.n; i++) {
		const char *nm = i < s->ctr_stopped.n ? s->ctr_stopped.v[i]
						      : s->ctr_left.v[i - s->ctr_stopped.n];
		if (!job_ctr_name_ok(nm))
			rc = gr_errf(err, GR_EPROTO, "the host sent an invalid container name '%s' for "
				     "job %s; refusing it", ts(nm), s->rec.id);
	}
	if (rc < 0)
		job_stop_report_free(s);
	return rc;
}

int job_stop(struct gr_conn *c, const char *project, const char *id, int grace_s,
	     struct job_stop_report *s, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, rep = STRBUF_INIT;
	int rc;

	job_stop_payload(&pl, project, id, grace_s);
	rc = conn_request(c, GR_MSG_JOB_STOP, pl.buf, pl.len, &rep, err);
	if (rc == 0)
		rc = job_stop_parse(rep.buf, rep.len, s, err);
	sb_release(&pl);
	sb_release(&rep);
	return rc;
}

void job_rm_report_free(struct job_rm_report *r)
{
	for (size_t i = 0; i < r->n; i++) {
		free(r->v[i].id);
		free(r->v[i].why);
	}
	free(r->v);
	*r = (struct job_rm_report){ 0 };
}

int job_rm(struct gr_conn *c, const char *project, const struct strvec *ids,
	   struct job_rm_report *r, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, rep = STRBUF_INIT;
	struct gr_rd rd;
	int rc;

	*r = (struct job_rm_report){ 0 };
	put_str(&pl, project);
	put_u32(&pl, (uint32_t)ids->n);
	for (size_t i = 0; i < ids->n; i++)
		put_str(&pl, ids->v[i]);
	rc = conn_request(c, GR_MSG_JOB_RM, pl.buf, pl.len, &rep, err);
	if (rc == 0) {
		rd_init(&rd, rep.buf, rep.len);
		uint32_t n = get_u32(&rd);
		if (n != ids->n) /* one answer per id asked: never the host's count */
			rd.bad = 1;
		r->v = xcalloc(ids->n ? ids->n : 1, sizeof(*r->v));
		for (uint32_t i = 0; i < n && !rd.bad; i++, r->n++) {
			r->v[i].id = get_str(&rd);
			r->v[i].removed = get_u8(&rd);
			r->v[i].why = get_str(&rd);
			r->v[i].bytes = get_u64(&rd);
		}
		r->freed = get_u64(&rd);
		if ((rc = rd_done(&rd, err, "JOB_RM")) < 0)
			job_rm_report_free(r);
	}
	sb_release(&pl);
	sb_release(&rep);
	return rc;
}

int job_prune(struct gr_conn *c, const char *project, uint32_t keep, uint64_t older_s,
	      int dry_run, struct job_rm_report *r, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, rep = STRBUF_INIT;
	struct gr_rd rd;
	int rc;

	*r = (struct job_rm_report){ 0 };
	put_str(&pl, project);
	put_u32(&pl, keep);
	put_u64(&pl, older_s);
	put_u8(&pl, (uint8_t)!!dry_run);
	rc = conn_request(c, GR_MSG_JOB_PRUNE, pl.buf, pl.len, &rep, err);
	if (rc == 0) {
		rd_init(&rd, rep.buf, rep.len);
		uint32_t n = get_u32(&rd);
		if (n > rep.len / 12) /* str id + u64 at least: a larger count is a lie */
			n = 0, rd.bad = 1;
		r->v = xcalloc(n ? n : 1, sizeof(*r->v));
		for (uint32_t i = 0; i < n && !rd.bad; i++, r->n++) {
			r->v[i].id = get_str(&rd);
			r->v[i].removed = 1;
			r->v[i].bytes = get_u64(&rd);
			if (r->v[i].id && !job_id_ok(r->v[i].id))
				rd.bad = 1;
		}
		r->freed = get_u64(&rd);
		r->kept = get_u32(&rd);
		if ((rc = rd_done(&rd, err, "JOB_PRUNE")) < 0)
			job_rm_report_free(r);
	}
	sb_release(&pl);
	sb_release(&rep);
	return rc;
}

/* A request answered by u32 n, n x (str key, str value), into kv. */
static int kv_request(struct gr_conn *c, int type, const char *what, const struct strbuf *pl,
		      struct strvec *kv, struct gr_err *err)
{
	struct strbuf rep = STRBUF_INIT;
	struct gr_rd rd;
	int rc = conn_request(c, type, pl->buf, pl->len, &rep, err);

	if (rc == 0) {
		rd_init(&rd, rep.buf, rep.len);
		uint32_t n = get_u32(&rd);
		for (uint32_t i = 0; i < n && i < 64 && !rd.bad; i++) {
			char *k = get_str(&rd), *v = get_str(&rd);
			if (k && v) {
				sv_push(kv, k);
				sv_push(kv, v);
			}
			free(k);
			free(v);
		}
		rc = rd_done(&rd, err, what);
	}
	sb_release(&rep);
	return rc;
}

int job_env(struct gr_conn *c, const char *project, const char *shell, struct strvec *kv,
	    struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT;
	int rc;

	put_str(&pl, project);
	put_str(&pl, shell);
	rc = kv_request(c, GR_MSG_JOB_ENV, "JOB_ENV", &pl, kv, err);
	sb_release(&pl);
	return rc;
}

int job_container_check(struct gr_conn *c, const char *project, const char *runtime,
			const char *image, struct strvec *kv, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT;
	int rc;

	put_str(&pl, project);
	put_str(&pl, runtime);
	put_str(&pl, image);
	rc = kv_request(c, GR_MSG_CONTAINER_CHECK, "CONTAINER_CHECK", &pl, kv, err);
	sb_release(&pl);
	return rc;
}

void job_gpus_payload(struct strbuf *pl, const char *project)
{
	put_str(pl, project);
}

int job_gpus_parse(const void *p, size_t n, struct job_gpus *g, struct gr_err *err)
{
	struct gr_rd rd;

	*g = (struct job_gpus){ 0 };
	rd_init(&rd, p, n);
	g->have_smi = get_u8(&rd);
	g->error = get_str(&rd);
	/* A count past what the payload can hold is a lie: refused before
	 * anything is allocated by it (a GPU is at least 36 bytes, an
	 * application 24). */
	uint32_t k = get_u32(&rd);
	if (k > rd.n / 36)
		rd.bad = 1;
	g->gpus = xcalloc(rd.bad ? 1 : k, sizeof(*g->gpus));
	for (uint32_t i = 0; i < k && !rd.bad; i++, g->ngpus++) {
		struct job_gpu *x = &g->gpus[i];
		x->index = get_u32(&rd);
		x->uuid = get_str(&rd);
		x->name = get_str(&rd);
		x->util = get_u32(&rd);
		x->mem_used = get_u64(&rd);
		x->mem_total = get_u64(&rd);
		x->locked_by = get_str(&rd);
	}
	k = get_u32(&rd);
	if (k > rd.n / 24)
		rd.bad = 1;
	g->apps = xcalloc(rd.bad ? 1 : k, sizeof(*g->apps));
	for (uint32_t i = 0; i < k && !rd.bad; i++, g->napps++) {
		struct job_gpu_app *x = &g->apps[i];
		x->pid = get_u32(&rd);
		x->gpu_uuid = get_str(&rd);
		x->mem = get_u64(&rd);
		x->name = get_str(&rd);
		x->job = get_str(&rd);
	}
	g->queued = get_u32(&rd);
	int rc = rd_done(&rd, err, "JOB_GPUS");
	if (rc < 0)
		job_gpus_free(g);
	return rc;
}

void job_gpus_free(struct job_gpus *g)
{
	for (size_t i = 0; i < g->ngpus; i++) {
		free(g->gpus[i].uuid);
		free(g->gpus[i].name);
		free(g->gpus[i].locked_by);
	}
	for (size_t i = 0; i < g->napps; i++) {
		free(g->apps[i].gpu_uuid);
		free(g->apps[i].name);
		free(g->apps[i].job);
	}
	free(g->gpus);
	free(g->apps);
	free(g->error);
	*g = (struct job_gpus){ 0 };
}

int job_ctx_status(struct gr_ctx *ctx, const char *id, struct job_rec *r)
{
	int rc = ctx_connect(ctx);

	if (rc == 0)
		rc = job_status(ctx->conn, ctx->cfg->remote.path, id, r, &ctx->err);
	return rc;
}

int job_probe(struct gr_conn *c, const char *path, int slurm, struct strvec *kv,
	      struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, rep = STRBUF_INIT;
	struct gr_rd rd;
	int rc;

	put_str(&pl, path);
	put_u8(&pl, slurm ? 1 : 0);
	rc = conn_request(c, GR_MSG_PROBE, pl.buf, pl.len, &rep, err);
	sb_release(&pl);
	if (rc < 0) {
		sb_release(&rep);
		return rc;
	}
	rd_init(&rd, rep.buf, rep.len);
	uint32_t n = get_u32(&rd);
	for (uint32_t i = 0; i < n && !rd.bad && i < 64; i++) {
		char *k = get_str(&rd), *v = get_str(&rd);
		sv_push(kv, k ? k : "");
		sv_push(kv, v ? v : "");
		free(k);
		free(v);
	}
	sb_release(&rep);
	if (rd.bad)
		return gr_errf(err, GR_EPROTO, "the agent's PROBE answer is malformed");
	return 0;
}
