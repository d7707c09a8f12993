/* [notify] command (job_notify.h): the job's end told to a command of
 * the user's, through the one runner of the agent (run.h), bounded, its
 * words written to the job's folder rather than to anyone's terminal. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h" /* and with it run.h's run_capture_how */
#include "job_notify.h"
#include "job_record.h"
#include "job_store.h"

static int notify_timeout_s(void)
{
	const char *s = getenv("GPURUN_NOTIFY_TIMEOUT");
	long long v;

	if (s && *s && parse_ll(s, 1, 86400, &v) == 0)
		return (int)v;
	return JOB_NOTIFY_TIMEOUT_S;
}

/* The record's values as the command sees them ("NAME=value"). */
static void notify_env(const struct job_rec *r, struct strvec *env)
{
	int code = job_rec_exit_code(r);

	sv_pushf(env, "GPURUN_JOB_ID=%s", r->id);
	sv_pushf(env, "GPURUN_JOB_NAME=%s", r->name ? r->name : "");
	sv_pushf(env, "GPURUN_JOB_STATE=%s", r->state ? r->state : "");
	if (code >= 0)
		sv_pushf(env, "GPURUN_JOB_EXIT=%d", code);
	else
		sv_push(env, "GPURUN_JOB_EXIT=");
	if (r->created_ms && r->end_ms >= r->created_ms)
		sv_pushf(env, "GPURUN_JOB_DURATION=%llu",
			 (unsigned long long)((r->end_ms - r->created_ms) / 1000));
	else
		sv_push(env, "GPURUN_JOB_DURATION=");
	sv_pushf(env, "GPURUN_JOB_DIR=%s", r->dir);
	sv_pushf(env, "GPURUN_JOB_GROUP=%s", r->group ? r->group : "");
}

/* Append to notify.log (fd < 0: nowhere); a full disk loses the words,
 * never the job's record. */
static void log_add(int fd, const char *p, size_t n)
{
	if (fd >= 0 && n && write_full(fd, p, n) < 0) {
		/* nothing better to do: the supervisor has no one to tell */
	}
}

void job_notify_end(const char *dir)
{
	struct job_spec spec = { STRVEC_INIT };
	struct job_rec r = { 0 };
	struct strvec env = STRVEC_INIT;
	struct strbuf out = STRBUF_INIT, errs = STRBUF_INIT, line = STRBUF_INIT;
	struct gr_err err = { 0 };
	char *path = NULL;
	int fd = -1, rc, secs = notify_timeout_s();

	if (job_spec_read(dir, &spec, NULL) < 0)
		goto out;
	const char *cmd = job_spec_get(&spec, "notify_command", "");
	if (!*cmd)
		goto out;
	path = job_meta(dir, "notify.log");
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (job_load(dir, &r, 0, &err) < 0) {
		sb_addf(&line, "[gpurun] notify command: could not run: %s\n", err.msg);
		log_add(fd, line.buf, line.len);
		goto out;
	}
	notify_env(&r, &env);
	const char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	struct run_how how = { .cwd = dir, .own_group = 1, .merge = 1 };
	rc = run_capture_how(argv, (const char *const *)env.v, secs * 1000, JOB_NOTIFY_LOG_MAX,
			     &out, &errs, &how);
	int e = errno;
	size_t n = out.len < JOB_NOTIFY_LOG_MAX ? out.len : JOB_NOTIFY_LOG_MAX;
	log_add(fd, out.buf, n);
	if (n && out.buf[n - 1] != '\n')
		sb_adds(&line, "\n");
	if (out.len > JOB_NOTIFY_LOG_MAX)
		sb_addf(&line, "[gpurun] notify command: its output was cut at %d KiB\n",
			JOB_NOTIFY_LOG_MAX / 1024);
	if (rc == RUN_TIMEOUT)
		sb_addf(&line, "[gpurun] notify command: killed after %d s\n", secs);
	else if (rc < 0)
		sb_addf(&line, "[gpurun] notify command: could not run: %s\n",
			errs.len ? errs.buf : strerror(e));
	else
		sb_addf(&line, "[gpurun] notify command: exit %d\n", rc);
	log_add(fd, line.buf, line.len);
out:
	if (fd >= 0)
		close(fd);
	free(path);
	sv_clear(&env);
	sb_release(&out);
	sb_release(&errs);
	sb_release(&line);
	job_rec_clear(&r);
	job_spec_free(&spec);
}
