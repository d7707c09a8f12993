/* The agent's job requests (0x40-0x5f, job_proto.h): start a
 * job (its folder, its snapshot, then its backend), list jobs and their
 * state and disk use, stream a log from a byte offset (following it as
 * it grows: agent_job_log.c), stop a job, remove jobs, report GPUs and a job's
 * environment. Also the agent binary's other modes, the backends'
 * (job_backend.h). Artifacts are the pull's (remote/pull/agent_pull.c);
 * which job a request names, agent_job_find.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agent_job.h"
#include "job_backend.h"
#include "job_container.h"
#include "job_glob.h"
#include "job_gpu.h"
#include "job_queue.h"
#include "job_house.h"
#include "job_proc.h"
#include "job_record.h"
#include "job_snap.h"
#include "job_snaplist.h"
#include "job_steps.h"
#include "job_store.h"

/* START_JOB */

/* Where systemd-logind kills a login's processes when it ends
 * (KillUserProcesses=yes), a job started from an ssh session dies with
 * the connection, supervisor and all. Say so when it is the case: we are
 * in a session scope and logind.conf (or a drop-in) turns it on. */
static char *logout_kill_warning(void)
{
	struct strbuf cg = STRBUF_INIT, conf = STRBUF_INIT;
	int kill = 0;
	char *w = NULL;

	if (read_file("/proc/self/cgroup", &cg, NULL) < 0 || !cg.buf || !strstr(cg.buf, "/session-"))
		goto out;
	read_file("/etc/systemd/logind.conf", &conf, NULL);
	DIR *d = opendir("/etc/systemd/logind.conf.d");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n > 5 && !strcmp(e->d_name + n - 5, ".conf")) {
			char *p = xasprintf("/etc/systemd/logind.conf.d/%s", e->d_name);
			sb_adds(&conf, "\n");
			read_file(p, &conf, NULL);
			free(p);
		}
	}
	if (d)
		closedir(d);
	for (char *l = conf.buf; l && *l;) {
		char *nl = strchr(l, '\n');
		while (*l == ' ' || *l == '\t')
			l++;
		if (!strncmp(l, "KillUserProcesses=", 18))
			kill = !strncmp(l + 18, "yes", 3) || !strncmp(l + 18, "true", 4) ||
			       !strncmp(l + 18, "1", 1) || !strncmp(l + 18, "on", 2);
		l = nl ? nl + 1 : NULL;
	}
	if (kill)
		w = xstrdup("this host's systemd-logind kills a login's processes when it ends "
			    "(KillUserProcesses=yes): the job may die when the connection closes; "
			    "ask for KillExcludeUsers= or run gpurun from a lingering user service");
out:
	sb_release(&cg);
	sb_release(&conf);
	return w;
}

/* Lock the project's names (<root>/.names.lock) and check no live job is
 * called name: the lock's fd, -2 (err: which job has it), or -1. */
static int job_name_claim(const char *root, const char *name, struct gr_err *err)
{
	struct strvec ids = STRVEC_INIT;
	char *p;
	int fd, rc;

	if ((rc = mkdir_p(root, 0700, err)) < 0)
		return -1;
	p = xasprintf("%s/.names.lock", root);
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	free(p);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		gr_errf(err, GR_EIO, "cannot lock the job names: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	job_list_ids(root, &ids);
	for (size_t i = 0; i < ids.n && fd >= 0; i++) {
		char *d = xasprintf("%s/%s", root, ids.v[i]);
		struct job_rec r = { 0 };
		if (job_load(d, &r, 0, NULL) == 0 && !job_rec_ended(&r) && !strcmp(r.name, name)) {
			gr_errf(err, GR_EEXIST, "job %s is called '%s' and has not ended", r.id, name);
			gr_hintf(err, "choose another --name, or stop it first: gpurun stop %s", name);
			close(fd);
			fd = -2;
		}
		job_rec_clear(&r);
		free(d);
	}
	sv_clear(&ids);
	return fd;
}

struct start_arg {
	char *project, *full, *root;
	struct job_spec spec;
	char *from; /* rerun: the folder of the job whose snapshot it takes */
};

/* In a helper: the job's folder, its snapshot, then its backend. */
static int start_fn(void *arg, int data_fd, struct strbuf *pl, struct gr_err *err)
{
	struct start_arg *s = arg;
	struct strvec persist = STRVEC_INIT, ids = STRVEC_INIT;
	struct strbuf others = STRBUF_INIT;
	const struct job_backend *be = job_backend_find(job_spec_get(&s->spec, "backend",
								      JOB_BACKEND_DEFAULT));
	struct snap_stats ss;
	char *id = NULL, *dir = NULL, *warn = NULL, *ctr_warn = NULL, *from_warn = NULL;
	uint32_t nothers = 0;
	int rc;

	(void)data_fd;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	/* A name is unique among the project's live jobs: checked and the
	 * job made under one lock, so two starts cannot both take it. */
	int name_lock = -1;
	const char *name = job_spec_get(&s->spec, "name", "");
	if (*name && (name_lock = job_name_claim(s->root, name, err)) < 0) {
		rc = name_lock == -2 ? GR_EEXIST : GR_EIO;
		goto out;
	}
	if ((rc = job_create(s->root, s->full, &s->spec, (uint64_t)now.tv_sec * 1000 +
			     (uint64_t)now.tv_nsec / 1000000, &id, &dir, err)) < 0)
		goto out;
	job_spec_list(&s->spec, "persist", &persist);
	ss.env_names = (struct strvec)STRVEC_INIT;
	rc = s->from ? job_snap_rerun(s->from, dir, &from_warn, err)
		     : job_snapshot(s->full, dir, s->root, &persist, &ss, err);
	sv_clear(&ss.env_names);
	if (rc == 0)
		rc = job_snap_record(dir, err);
	if (rc < 0) {
		gr_err_prefix(err, s->from ? "cannot copy the job's snapshot" : "cannot snapshot the project");
		goto fail;
	}
	if ((rc = job_ctr_prepare(dir, s->full, &ctr_warn, err)) < 0)
		goto fail;
	if ((rc = be->start(dir, err)) < 0)
		goto fail;
	/* Running (or queued) now: the name is the new job's. */
	if (name_lock >= 0)
		close(name_lock);
	name_lock = -1;
	/* The project's other jobs that are not over, so train can say so. */
	job_list_ids(s->root, &ids);
	for (size_t i = 0; i < ids.n && nothers < 16; i++) {
		char *d = xasprintf("%s/%s", s->root, ids.v[i]);
		struct job_rec r = { 0 };
		if (strcmp(ids.v[i], id) && job_load(d, &r, 0, NULL) == 0 && !job_rec_ended(&r)) {
			job_rec_put(&others, &r);
			nothers++;
		}
		job_rec_clear(&r);
		free(d);
	}
	warn = logout_kill_warning();
	if (from_warn) {
		char *both = warn ? xasprintf("%s; %s", from_warn, warn) : xstrdup(from_warn);
		free(warn);
		warn = both;
	}
	if (ctr_warn) {
		char *both = warn ? xasprintf("%s; %s", warn, ctr_warn) : xstrdup(ctr_warn);
		free(warn);
		warn = both;
	}
	put_str(pl, id);
	put_str(pl, dir);
	put_str(pl, warn ? warn : "");
	put_u32(pl, nothers);
	sb_add(pl, others.buf, others.len);
	goto out;
fail:
	job_rm_tree(dir);
out:
	if (name_lock >= 0)
		close(name_lock);
	sv_clear(&persist);
	sv_clear(&ids);
	sb_release(&others);
	free(id);
	free(dir);
	free(warn);
	free(ctr_warn);
	free(from_warn);
	return rc;
}

/* The spec keys of issue 15: a name of the allowed shape, an argv whose
 * program is named, and git fields of their shapes. */
static int check_spec_15(const struct job_spec *spec, struct gr_err *err)
{
	struct strvec argv = STRVEC_INIT;
	const char *name = job_spec_get(spec, "name", "");
	int rc = 0;

	job_spec_list(spec, "argv", &argv);
	if (*name && !job_name_ok(name))
		rc = gr_errf(err, GR_EINVAL, "bad job name '%s': a letter, then letters, digits, "
			     "'.', '_' or '-', at most %d", name, GR_JOB_NAME_MAX);
	else if (*job_spec_get(spec, "term", "") && !job_term_ok(job_spec_get(spec, "term", "")))
		rc = gr_errf(err, GR_EINVAL, "bad terminal type in the job's spec");
	else if (argv.n && !*argv.v[0])
		rc = gr_errf(err, GR_EINVAL, "the job's argv names no program");
	else if (!job_hex_ok(job_spec_get(spec, "git_commit", ""), 40, 64) ||
		 !job_hex_ok(job_spec_get(spec, "git_diff", ""), 64, 64))
		rc = gr_errf(err, GR_EINVAL, "malformed git commit or diff hash in the job's spec");
	sv_clear(&argv);
	return rc;
}

/* A number in [0, max], or absent. */
static int spec_num_ok(const struct job_spec *spec, const char *key, long long max)
{
	const char *v = job_spec_get(spec, key, NULL);
	long long n;

	return !v || parse_ll(v, 0, max, &n) == 0;
}

/* The spec keys of issue 33: limits, retries, a dependency, a group. */
static int check_spec_33(const struct job_spec *spec, struct gr_err *err)
{
	const char *after = job_spec_get(spec, "after", ""), *group = job_spec_get(spec, "group", "");
	size_t idlen = strcspn(after, ":");
	char id[GR_JOB_ID_LEN + 1];

	if (!spec_num_ok(spec, "time_limit", 366ll * 86400) || !spec_num_ok(spec, "retries", 100) ||
	    !spec_num_ok(spec, "stop_grace", 3600))
		return gr_errf(err, GR_EINVAL, "bad time_limit, retries or stop_grace in the job's spec");
	if (*after) {
		snprintf(id, sizeof(id), "%.*s", (int)idlen, after);
		if (idlen != GR_JOB_ID_LEN || !job_id_ok(id) ||
		    (after[idlen] && strcmp(after + idlen, ":ok")))
			return gr_errf(err, GR_EINVAL, "bad dependency '%s': a job id, optionally with :ok",
				       after);
	}
	if (*group && !job_name_ok(group))
		return gr_errf(err, GR_EINVAL, "bad sweep group '%s': a letter, then letters, digits, "
			       "'.', '_' or '-', at most %d", group, GR_JOB_NAME_MAX);
	return 0;
}

/* JOB_START_FOLLOW: the started job's log, as JOB_LOG from its first
 * byte with follow would send it, under the start's own id (ok: the OK's
 * payload, the new id first; project: the request's). */
static void start_follow(struct agent *a, uint32_t rid, const void *ok, size_t n, void *project)
{
	struct strbuf pl = STRBUF_INIT;
	struct gr_err err = { 0 };
	struct gr_rd rd;
	char *id;

	rd_init(&rd, ok, n);
	id = get_str(&rd);
	put_str(&pl, project);
	put_str(&pl, id ? id : "");
	put_u64(&pl, 0);
	put_u32(&pl, 0);
	put_u8(&pl, 1);
	rd_init(&rd, pl.buf, pl.len);
	if (agent_job_log(a, rid, &rd, &err) < 0)
		agent_fail(a, rid, err.code, "%s", err.msg);
	free(id);
	sb_release(&pl);
}

static int h_start(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	struct start_arg s = { get_str(rd), NULL, NULL, { STRVEC_INIT }, NULL };
	struct strvec persist = STRVEC_INIT;
	struct stat st;
	uint32_t n = get_u32(rd);
	int rc;

	if (n > rd->n / 8)
		rd->bad = 1;
	for (uint32_t i = 0; i < n && !rd->bad; i++) {
		char *k = get_str(rd), *v = get_str(rd);
		if (k && v) {
			sv_push(&s.spec.kv, k);
			sv_push(&s.spec.kv, v);
		}
		free(k);
		free(v);
	}
	/* Optional (later clients): u32 flags, JOB_START_FOLLOW. */
	uint32_t flags = rd->n && !rd->bad ? get_u32(rd) : 0;
	if ((rc = rd_done(rd, err, "JOB_START")) < 0 || (rc = job_spec_check(&s.spec, err)) < 0)
		goto out;
	if (flags & ~(uint32_t)JOB_START_FOLLOW) {
		rc = gr_errf(err, GR_EINVAL, "unknown JOB_START flags 0x%x", flags);
		goto out;
	}
	/* A rerun: from here on the spec is the old job's (agent_job_snap.c). */
	if (job_spec_get(&s.spec, "rerun_of", NULL) &&
	    (rc = job_rerun_spec(s.project, &s.spec, &s.from, err)) < 0)
		goto out;
	if (!*job_spec_get(&s.spec, "command", "")) {
		rc = gr_errf(err, GR_EINVAL, "no [train] command to run");
		goto out;
	}
	if ((rc = check_spec_15(&s.spec, err)) < 0 || (rc = check_spec_33(&s.spec, err)) < 0)
		goto out;
	if (!job_shell_valid(job_spec_get(&s.spec, "shell", ""))) {
		rc = gr_errf(err, GR_EINVAL, "unknown shell '%s' (sh or login)",
			     job_spec_get(&s.spec, "shell", ""));
		goto out;
	}
	if (!job_output_valid(job_spec_get(&s.spec, "output", "pty"))) {
		rc = gr_errf(err, GR_EINVAL, "unknown output '%s' (pty or pipe)",
			     job_spec_get(&s.spec, "output", ""));
		goto out;
	}
	if ((rc = job_ctr_spec_check(&s.spec, err)) < 0)
		goto out;
	if (!job_backend_find(job_spec_get(&s.spec, "backend", JOB_BACKEND_DEFAULT))) {
		rc = gr_errf(err, GR_EUNSUPP, "this agent has no job backend '%s'",
			     job_spec_get(&s.spec, "backend", ""));
		goto out;
	}
	job_spec_list(&s.spec, "persist", &persist);
	for (size_t i = 0; i < persist.n; i++)
		if (!job_persist_ok(persist.v[i])) {
			rc = gr_errf(err, GR_EINVAL, "persistent path '%s' must be relative, inside "
				     "the project, and not in .gpurun/", persist.v[i]);
			goto out;
		}
	s.full = agent_path(s.project);
	if (stat(s.full, &st) < 0 || !S_ISDIR(st.st_mode)) {
		rc = gr_errf(err, GR_ENOTFOUND, "remote folder '%s' does not exist", s.full);
		goto out;
	}
	/* Another user's folder would run their code (a planted GNUmakefile). */
	if ((rc = safe_dir_check_path(s.full, 1, NULL, err)) < 0)
		goto out;
	if ((rc = job_root(s.project, &s.root, err)) < 0)
		goto out;
	rc = flags & JOB_START_FOLLOW
		? agent_helper_start_then(a, rid, 0, 0, start_fn, &s, start_follow,
					  xstrdup(s.project), err)
		: agent_helper_start(a, rid, 0, 0, start_fn, &s, err);
out:
	sv_clear(&persist);
	free(s.project);
	free(s.full);
	free(s.root);
	free(s.from);
	job_spec_free(&s.spec);
	return rc;
}

/* LIST / STATUS */

static int h_list(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	char *project = get_str(rd), *want = get_str(rd), *root = NULL;
	uint32_t limit = get_u32(rd), n = 0;
	struct strvec ids = STRVEC_INIT;
	struct strbuf recs = STRBUF_INIT, pl = STRBUF_INIT;
	int rc = rd_done(rd, err, "JOB_LIST");

	if (rc < 0)
		goto out;
	if ((rc = job_root(project, &root, err)) < 0)
		goto out;
	if (*want) {
		char *id = NULL;
		rc = job_resolve(root, want, &id, err);
		if (rc == GR_ENOTFOUND) {
			/* Its folder gone, its processes not (issue 29). */
			struct job_rec orphan;
			if (job_orphan_rec(want, &orphan)) {
				gr_err_clear(err);
				rc = 0;
				job_rec_put(&recs, &orphan);
				n++;
			}
			job_rec_clear(&orphan);
		}
		if (rc < 0)
			goto out;
		if (id)
			sv_push(&ids, id);
		free(id);
	} else {
		job_list_ids(root, &ids);
	}
	job_backends_refresh(root);
	for (size_t i = 0; i < ids.n && (!limit || n < limit); i++) {
		char *dir = xasprintf("%s/%s", root, ids.v[i]);
		struct job_rec r;
		if (job_load(dir, &r, JOB_LOAD_DU, NULL) == 0) {
			job_rec_put(&recs, &r);
			n++;
		}
		job_rec_clear(&r);
		free(dir);
	}
	/* A job whose folder is gone while its processes run (issue 29). */
	if (!*want)
		job_orphans_put(root, &recs, &n);
	put_u32(&pl, n);
	sb_add(&pl, recs.buf, recs.len);
	put_u64(&pl, job_root_du(root));
	agent_ok(a, rid, pl.buf, pl.len);
out:
	free(project);
	free(want);
	free(root);
	sv_clear(&ids);
	sb_release(&recs);
	sb_release(&pl);
	return rc;
}

/* want, a full id, names a job whose folder is gone while its processes
 * run: its record (status J shows it as the listing does). */
static int orphan_status(struct gr_rd again, struct job_rec *r)
{
	char *project = get_str(&again), *want = get_str(&again);
	int found = want && job_orphan_rec(want, r);

	free(project);
	free(want);
	return found;
}

static int h_status(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	char *dir = NULL;
	struct strbuf pl = STRBUF_INIT;
	struct job_rec r = { 0 };
	struct gr_rd again = *rd;
	int rc = agent_find_job(rd, &dir, err);

	if (rc == GR_ENOTFOUND && orphan_status(again, &r)) {
		gr_err_clear(err);
		if ((rc = rd_done(rd, err, "JOB_STATUS")) == 0) {
			job_rec_put(&pl, &r);
			agent_ok(a, rid, pl.buf, pl.len);
		}
		goto out;
	}
	if (rc == 0)
		rc = rd_done(rd, err, "JOB_STATUS");
	if (rc == 0)
		rc = job_load(dir, &r, 0, err); /* disk use: JOB_LIST */
	if (rc == 0) {
		job_rec_put(&pl, &r);
		agent_ok(a, rid, pl.buf, pl.len);
	}
out:
	job_rec_clear(&r);
	sb_release(&pl);
	free(dir);
	return rc;
}

/* STOP, GPUS: in forked helpers (agent_helper.h). */

struct stop_arg {
	char *dir;
	uint32_t grace;
	char *orphan; /* a full id whose folder is gone, but not its processes */
};

static int stop_fn(void *arg, int data_fd, struct strbuf *reply, struct gr_err *err)
{
	struct stop_arg *s = arg;
	const struct job_backend *be;

	(void)data_fd;
	if (s->orphan)
		return job_stop_orphan(s->orphan, (int)s->grace, reply, err);
	be = job_backend_of(s->dir);
	if (!be)
		return gr_errf(err, GR_EUNSUPP, "this agent does not know the job's backend");
	return be->stop(s->dir, (int)s->grace, reply, err);
}

static int h_stop(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	struct stop_arg s = { NULL, 0, NULL };
	struct gr_rd again = *rd;
	int rc = agent_find_job(rd, &s.dir, err);

	s.grace = get_u32(rd);
	if (rc == GR_ENOTFOUND) {
		/* Its folder gone (rm -rf ~/.cache during a job): what still
		 * carries its full id is stopped all the same (issue 29). */
		char *project = get_str(&again), *want = get_str(&again);
		if (want && job_id_valid(want) && job_procs_alive(want, 0, NULL)) {
			s.orphan = want;
			want = NULL;
			rc = 0;
		}
		free(project);
		free(want);
	}
	if (rc == 0 && (rc = rd_done(rd, err, "JOB_STOP")) == 0)
		rc = agent_helper_start(a, rid, 0, 0, stop_fn, &s, err);
	free(s.dir);
	free(s.orphan);
	return rc;
}

static int gpus_fn(void *arg, int data_fd, struct strbuf *pl, struct gr_err *err)
{
	struct gpu_report g;

	(void)arg;
	(void)data_fd;
	(void)err;
	gpu_report_load(&g, 1);
	put_u8(pl, (uint8_t)g.have_smi);
	put_str(pl, g.error ? g.error : "");
	put_u32(pl, (uint32_t)g.ngpus);
	for (size_t i = 0; i < g.ngpus; i++) {
		put_u32(pl, g.gpus[i].index);
		put_str(pl, g.gpus[i].uuid);
		put_str(pl, g.gpus[i].name);
		put_u32(pl, g.gpus[i].util);
		put_u64(pl, g.gpus[i].mem_used);
		put_u64(pl, g.gpus[i].mem_total);
		put_str(pl, g.gpus[i].locked_by ? g.gpus[i].locked_by : "");
	}
	put_u32(pl, (uint32_t)g.napps);
	for (size_t i = 0; i < g.napps; i++) {
		put_u32(pl, g.apps[i].pid);
		put_str(pl, g.apps[i].gpu_uuid);
		put_u64(pl, g.apps[i].mem);
		put_str(pl, g.apps[i].name);
		put_str(pl, g.apps[i].job ? g.apps[i].job : "");
	}
	put_u32(pl, (uint32_t)gpu_queue_waiting());
	gpu_report_free(&g);
	return 0;
}

static int h_gpus(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	char *project = get_str(rd);
	int rc = rd_done(rd, err, "JOB_GPUS");

	free(project);
	if (rc < 0)
		return rc;
	return agent_helper_start(a, rid, 0, 1, gpus_fn, NULL, err);
}

const struct agent_handler agent_job_handlers[] = {
	{ GR_MSG_JOB_START, "job-start", h_start },
	{ GR_MSG_JOB_LIST, "job-list", h_list },
	{ GR_MSG_JOB_STATUS, "job-status", h_status },
	{ GR_MSG_JOB_LOG, "job-log", agent_job_log },
	{ GR_MSG_JOB_STOP, "job-stop", h_stop },
	{ GR_MSG_JOB_GPUS, "job-gpus", h_gpus },
	{ GR_MSG_JOB_RM, "job-rm", agent_job_rm },
	{ GR_MSG_JOB_PRUNE, "job-prune", agent_job_prune },
	{ GR_MSG_JOB_ENV, "job-env", agent_job_env },
	{ GR_MSG_CONTAINER_CHECK, "container-check", agent_ctr_check },
	{ GR_MSG_JOB_SNAP_LIST, "job-snap-list", agent_job_snap_list },
	{ GR_MSG_JOB_SNAP_READ, "job-snap-read", agent_job_snap_read },
	{ GR_MSG_PROBE, "probe", agent_job_probe },
	{ 0, NULL, NULL },
};

int agent_job_main(int argc, char **argv)
{
	return job_backend_main(argc, argv); /* -1: not one of ours */
}
