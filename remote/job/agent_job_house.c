/* The agent's job housekeeping and environment requests (job_proto.h):
 * JOB_RM and JOB_PRUNE remove ended jobs (job_house.h) in forked helpers,
 * a job folder may take a while to delete; JOB_ENV asks the job's shell
 * what a job's command would find. Their entries are in agent_job.c's
 * table. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agent_job.h"
#include "job_gpu.h"
#include "job_house.h"
#include "job_record.h"
#include "job_steps.h"
#include "job_store.h"

/* RM, PRUNE: in helpers (a job folder may be large to delete). */

struct rm_arg {
	char *root;
	struct strvec ids;
	uint32_t keep;
	uint64_t older_s;
	int dry_run;
};

static int rm_fn(void *arg, int data_fd, struct strbuf *pl, struct gr_err *err)
{
	struct rm_arg *s = arg;
	struct strbuf items = STRBUF_INIT;
	uint64_t freed = 0;

	(void)data_fd;
	(void)err;
	put_u32(pl, (uint32_t)s->ids.n);
	for (size_t i = 0; i < s->ids.n; i++) {
		struct gr_err e = { 0 };
		char *id = NULL;
		uint64_t bytes = 0;
		int rc = job_resolve(s->root, s->ids.v[i], &id, &e);
		if (rc == 0)
			rc = job_house_remove(s->root, id, &bytes, &e);
		put_str(pl, s->ids.v[i]);
		put_u8(pl, rc == 0);
		put_str(pl, rc == 0 ? (id ? id : "") : e.msg);
		put_u64(pl, bytes);
		freed += bytes;
		free(id);
	}
	freed += job_store_gc(s->root);
	put_u64(pl, freed);
	sb_release(&items);
	return 0;
}

int agent_job_rm(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	struct rm_arg s = { NULL, STRVEC_INIT, 0, 0, 0 };
	char *project = get_str(rd);
	uint32_t n = get_u32(rd);
	int rc;

	if (n > rd->n / 4)
		rd->bad = 1;
	for (uint32_t i = 0; i < n && !rd->bad; i++) {
		char *id = get_str(rd);
		if (id)
			sv_push(&s.ids, id);
		free(id);
	}
	if ((rc = rd_done(rd, err, "JOB_RM")) == 0) {
		if ((rc = job_root(project, &s.root, err)) == 0)
			rc = agent_helper_start(a, rid, 0, 0, rm_fn, &s, err);
	}
	free(project);
	free(s.root);
	sv_clear(&s.ids);
	return rc;
}

static int prune_fn(void *arg, int data_fd, struct strbuf *pl, struct gr_err *err)
{
	struct rm_arg *s = arg;
	struct job_house_result res;
	struct timespec now;

	(void)data_fd;
	(void)err;
	clock_gettime(CLOCK_REALTIME, &now);
	job_house_prune(s->root, s->keep, s->older_s * 1000,
			(uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000, s->dry_run, &res);
	put_u32(pl, (uint32_t)res.n);
	for (size_t i = 0; i < res.n; i++) {
		put_str(pl, res.v[i].id);
		put_u64(pl, res.v[i].bytes);
	}
	put_u64(pl, res.freed);
	put_u32(pl, res.kept);
	job_house_result_free(&res);
	return 0;
}

int agent_job_prune(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	struct rm_arg s = { NULL, STRVEC_INIT, 0, 0, 0 };
	char *project = get_str(rd);
	int rc;

	s.keep = get_u32(rd);
	s.older_s = get_u64(rd);
	s.dry_run = get_u8(rd);
	if (s.older_s > (1ULL << 40))
		rd->bad = 1;
	if ((rc = rd_done(rd, err, "JOB_PRUNE")) == 0) {
		if ((rc = job_root(project, &s.root, err)) == 0)
			rc = agent_helper_start(a, rid, 0, 0, prune_fn, &s, err);
	}
	free(project);
	free(s.root);
	return rc;
}

/* ENV: what a job's command would find, through the job's shell. */

struct env_arg {
	char *full, *shell;
};

static int env_fn(void *arg, int data_fd, struct strbuf *pl, struct gr_err *err)
{
	static const char script[] =
		"for t in python3 python nvcc nvidia-smi; do "
		"printf '%s=%s\\n' \"$t\" \"$(command -v \"$t\")\"; done; "
		"printf 'python_version=%s\\n' \"$(python3 --version 2>&1 | head -n 1)\"; "
		"printf 'path=%s\\n' \"$PATH\"";
	struct env_arg *s = arg;
	struct strvec argv = STRVEC_INIT, kv = STRVEC_INIT;
	struct strbuf out = STRBUF_INIT;
	char *cwd = getcwd(NULL, 0);

	(void)data_fd;
	(void)err;
	job_step_argv(s->shell, script, &argv);
	if (chdir(s->full) < 0) {
		/* the home folder then */
	}
	int rc = gpu_run_capture((const char *const *)argv.v, 20000, &out);
	for (char *l = out.buf, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		char *eq = strchr(l, '=');
		if (eq && eq - l < 32) {
			*eq = '\0';
			sv_push(&kv, l);
			sv_push(&kv, eq + 1);
		}
	}
	sv_push(&kv, "shell");
	sv_push(&kv, argv.v[0]);
	sv_push(&kv, "status");
	sv_pushf(&kv, "%d", rc);
	put_u32(pl, (uint32_t)(kv.n / 2));
	for (size_t i = 0; i < kv.n; i++)
		put_str(pl, kv.v[i]);
	if (cwd && chdir(cwd) < 0) {
		/* a helper: it exits next */
	}
	free(cwd);
	sv_clear(&argv);
	sv_clear(&kv);
	sb_release(&out);
	return 0;
}

int agent_job_env(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	char *project = get_str(rd);
	struct env_arg s = { NULL, get_str(rd) };
	int rc = rd_done(rd, err, "JOB_ENV");

	if (rc == 0 && !job_shell_valid(s.shell))
		rc = gr_errf(err, GR_EINVAL, "unknown shell '%s' (sh or login)", s.shell);
	if (rc == 0) {
		s.full = agent_path(project);
		rc = agent_helper_start(a, rid, 0, 1, env_fn, &s, err);
	}
	free(project);
	free(s.full);
	free(s.shell);
	return rc;
}
