/* test_job_house.c's operations: each one the generator makes, applied
 * to the world and the model together (apply), with the real
 * supervisors of "limit" and the waits of "after". Header-only, after
 * job_house_world.h. */
#ifndef GR_JOB_HOUSE_OPS_H
#define GR_JOB_HOUSE_OPS_H

#include "job_house_world.h"

/* limit: a job with [train] time_limit or retries, run by a real
 * supervisor (job_supervise_mode, in a process of its own) to its end;
 * sometimes that supervisor is killed -9 while its command runs, and
 * the job is then stopped as gpurun stop does. */
static int limit_op(struct world *w, const struct op *o)
{
	static const char *const cmds[] = {
		"sleep 30",                             /* the limit: TERM ends it */
		"trap '' TERM; sleep 0.2; sleep 0.2; sleep 0.2; sleep 0.2; sleep 0.2; "
		"sleep 0.2; sleep 0.2; sleep 0.2; sleep 0.2; sleep 30", /* ignores TERM: KILL */
		"exit 3",                               /* fails every time */
		"n=$(cat n 2>/dev/null || echo 0); n=$((n+1)); echo $n >n; test $n -ge 2", /* 2nd run ok */
	};
	unsigned v = o->b % 4, retries = v == 2 ? o->c % 3 : v == 3 ? 2 : 0;
	int kill9 = v < 2 && o->c % 3 == 0, lockfd, st = 0;
	struct job_spec spec = { STRVEC_INIT };
	struct gr_err err = { 0 };
	char *dir = NULL, n[16];
	struct mjob *j;
	pid_t pid;

	if (w->njobs == MAXJOBS || w->full)
		return 0;
	j = &w->jobs[w->njobs];
	sv_push(&spec.kv, "command");
	sv_push(&spec.kv, cmds[v]);
	sv_push(&spec.kv, "time_limit");
	sv_push(&spec.kv, v < 2 ? "1" : "0");
	sv_push(&spec.kv, "stop_grace");
	sv_push(&spec.kv, v == 1 ? "1" : "0");
	snprintf(n, sizeof(n), "%u", retries);
	sv_push(&spec.kv, "retries");
	sv_push(&spec.kv, n);
	dir = make_job(w, &spec);
	job_spec_free(&spec);
	if (!dir)
		return -1;
	j->real = 1;
	w->njobs++;
	char *p = job_meta(dir, "lock");
	lockfd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	free(p);
	if (lockfd < 0 || flock(lockfd, LOCK_EX) < 0) {
		free(dir);
		return fail(w, "cannot hold the lock");
	}
	pid = fork();
	if (pid == 0) {
		for (int fd = 3; fd < 1024; fd++)
			if (fd != lockfd)
				close(fd);
		_exit(job_supervise_mode(dir, lockfd, -1, &model_mode));
	}
	close(lockfd);
	if (pid < 0) {
		free(dir);
		return fail(w, "fork: %s", strerror(errno));
	}
	if (kill9) {
		/* once its command runs */
		for (int i = 0; i < 500 && !job_meta_exists(dir, "run"); i++)
			usleep(2000);
		usleep(100000);
		kill(pid, SIGKILL);
	}
	for (int i = 0; i < 2000 && waitpid(pid, &st, WNOHANG) != pid; i++)
		usleep(10000);
	if (kill(pid, 0) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		free(dir);
		return fail(w, "the supervisor of job %s (%s) did not end in 20 s", j->id, cmds[v]);
	}
	j->ended = 1;
	if (kill9) {
		/* lost, its command still running: gpurun stop reaches it */
		struct strbuf pl = STRBUF_INIT;
		int rc = job_backend_local.stop(dir, 0, &pl, &err);
		sb_release(&pl);
		free(dir);
		j->lost = 1;
		n_killed_sups++;
		return rc < 0 ? fail(w, "stop of lost job %s: %s", j->id, err.msg) : 0;
	}
	free(dir);
	if (v < 2) {
		j->timeout = 1;
		n_timeouts++;
	} else {
		j->failed = v == 2;
		j->code = v == 2 ? 3 : 0;
	}
	j->tries = v == 2 ? retries + 1 : v == 3 ? 2 : 1;
	n_retried += j->tries > 1;
	return 0;
}

/* after: a new job waits for one (one that ran, ended, was removed or
 * lost), or a waiting one is stopped. */
static int after_op(struct world *w, const struct op *o)
{
	if (o->c % 2 == 0) {
		for (size_t k = 0; k < w->nwait; k++) {
			struct waiter *wt = &w->waiters[(k + o->a) % w->nwait];
			struct mjob *a = &w->jobs[wt->a];
			if (wt->pid > 0 && !wt->stopped && !a->ended && !a->removed) {
				kill(wt->pid, SIGTERM);
				wt->stopped = 1;
				break;
			}
		}
		return 0;
	}
	if (w->nwait == MAXWAIT || !w->njobs)
		return 0;
	/* mostly a job that runs; else any, ended or removed too */
	struct mjob *a = o->b % 3 ? pick(w, o->a, 1) : NULL;
	return start_waiter(w, a ? a : &w->jobs[o->a % w->njobs], (int)(o->b & 1));
}

/* Each wait against the model: it goes on only once its job has ended
 * or is gone, then at once; with :ok it goes on only after a done job,
 * else it ends cancelled; a stop ends it stopped. */
static int check_waiters(struct world *w)
{
	for (size_t i = 0; i < w->nwait; i++) {
		struct waiter *wt = &w->waiters[i];
		struct mjob *a = &w->jobs[wt->a];
		int over = a->ended || a->removed, st = 0;
		pid_t got = 0;
		if (wt->pid <= 0)
			continue;
		if (!over && !wt->stopped) {
			got = waitpid(wt->pid, &st, WNOHANG);
			if (got == wt->pid) {
				wt->pid = 0;
				return fail(w, "a job after %s went on (exit %d) while %s runs", a->id,
					    WIFEXITED(st) ? WEXITSTATUS(st) : -1, a->id);
			}
			continue;
		}
		/* It must end now: within a wait's nap, and more for a slow box. */
		for (int k = 0; k < 1000 && got != wt->pid; k++) {
			got = waitpid(wt->pid, &st, WNOHANG);
			if (got != wt->pid)
				usleep(10000);
		}
		if (got != wt->pid)
			return fail(w, "a job after %s still waits 10 s after %s", a->id,
				    wt->stopped ? "its stop" : "that job ended");
		wt->pid = 0;
		int want = wt->stopped ? 2 :
			   !wt->ok ? 0 :
			   a->removed || a->lost || a->failed || a->timeout ? 1 : 0;
		int code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
		if (code != want)
			return fail(w, "a job after %s%s (%s) ended its wait with %d, the model says %d",
				    a->id, wt->ok ? ":ok" : "",
				    a->removed ? "removed" : a->lost ? "lost" : a->timeout ? "timeout" :
				    a->failed ? "failed" : "done",
				    code, want);
		n_went += want == 0;
		n_cancelled += want == 1;
		n_wait_stopped += want == 2;
	}
	return 0;
}

static int apply(struct world *w, const struct op *o)
{
	struct gr_err err = { 0 };
	struct mjob *j;
	char *dir = NULL;
	int rc = 0;

	switch (o->kind) {
	case OP_START: {
		/* Starting a job on a full disk is not modelled. */
		if (w->njobs == MAXJOBS || w->full)
			break;
		struct job_spec spec = { STRVEC_INIT };
		sv_push(&spec.kv, "command");
		sv_push(&spec.kv, "true");
		j = &w->jobs[w->njobs];
		dir = make_job(w, &spec);
		job_spec_free(&spec);
		if (!dir)
			return -1;
		/* A live supervisor: it holds the lock and has started the job. */
		char *p = job_meta(dir, "lock");
		j->lock_fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		free(p);
		if (j->lock_fd < 0 || flock(j->lock_fd, LOCK_EX) < 0) {
			rc = fail(w, "cannot hold the lock");
			break;
		}
		char *run = xasprintf("pid=%d\nstart_ms=%llu\ngpus=\n", (int)getpid(),
				      (unsigned long long)w->now_ms);
		job_meta_write(dir, "run", run, NULL);
		free(run);
		p = gpu_lock_path(w, j);
		j->gpu_fd = open(p, O_RDWR | O_CREAT, 0600); /* no CLOEXEC: children inherit it */
		free(p);
		if (j->gpu_fd < 0 || flock(j->gpu_fd, LOCK_EX | LOCK_NB) < 0) {
			rc = fail(w, "cannot take the GPU lock");
			break;
		}
		/* The supervisor opens the log and takes the status's block. */
		p = job_meta(dir, "log");
		j->log_fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		free(p);
		if (j->log_fd < 0) {
			rc = fail(w, "cannot open the log");
			break;
		}
		sup_status_room_take(dir);
		j->alive = 1;
		w->njobs++;
		break;
	}
	case OP_ORPHAN:
		if ((j = pick(w, o->a, 1)))
			rc = orphan_job(j, w);
		break;
	case OP_AFTER:
		rc = after_op(w, o);
		break;
	case OP_LIMIT:
		rc = limit_op(w, o);
		break;
	case OP_RMDIR: {
		/* The folder of a job whose process runs on is deleted. */
		struct mjob *v[MAXJOBS];
		size_t n = 0;
		for (size_t i = 0; i < w->njobs; i++)
			if (w->jobs[i].child > 0 && !w->jobs[i].removed)
				v[n++] = &w->jobs[i];
		if (!n)
			break;
		j = v[o->a % n];
		dir = job_path(w, j);
		if (job_rm_tree(dir) < 0)
			rc = fail(w, "cannot delete %s", dir);
		j->removed = j->gone = 1;
		break;
	}
	case OP_STOP: {
		/* gpurun stop of a job whose supervisor is gone: the local
		 * backend's stop, as the agent's helper runs it (for a job
		 * whose folder is gone, the stop by its id alone). */
		struct mjob *v[MAXJOBS];
		size_t n = 0;
		for (size_t i = 0; i < w->njobs; i++)
			if (w->jobs[i].child > 0 && (!w->jobs[i].removed || w->jobs[i].gone))
				v[n++] = &w->jobs[i];
		if (!n)
			break;
		j = v[o->a % n];
		dir = job_path(w, j);
		struct strbuf pl = STRBUF_INIT;
		rc = j->gone ? job_stop_orphan(j->id, 0, &pl, &err) : job_backend_local.stop(dir, 0, &pl, &err);
		sb_release(&pl);
		if (rc < 0) {
			rc = fail(w, "stop of job %s: %s", j->id, err.msg);
			break;
		}
		for (int i = 0; i < 200; i++) {
			int st;
			if (waitpid(j->child, &st, WNOHANG) == j->child) {
				j->child = 0;
				break;
			}
			usleep(5000);
		}
		if (j->child)
			rc = fail(w, "stop of job %s did not reach pid %d", j->id, (int)j->child);
		break;
	}
	case OP_WRITE:
		if (!(j = pick(w, o->a, 1)))
			break;
		dir = job_path(w, j);
		char *p = xasprintf("%s/out-%u.bin", dir, o->b % 1000);
		struct strbuf sb = STRBUF_INIT;
		sb_grow(&sb, o->c % 20000 + 1);
		memset(sb.buf, 'o', o->c % 20000 + 1);
		write_file_atomic(p, sb.buf, o->c % 20000 + 1, 0644, NULL);
		sb_release(&sb);
		free(p);
		break;
	case OP_FINISH:
	case OP_FAIL:
	case OP_LOSE:
		if ((j = pick(w, o->a, 1)))
			end_job(j, o->kind == OP_FAIL ? 1 + o->b % 254 : 0, o->kind == OP_LOSE, w);
		break;
	case OP_FULL:
		if (w->mnt[0])
			rc = disk_fill(w);
		break;
	case OP_FULLEND:
		/* The disk fills, then a job ends (exit 0 or not) on it. */
		if (!w->mnt[0] || (rc = disk_fill(w)) < 0)
			break;
		if ((j = pick(w, o->a, 1)))
			end_job(j, o->b % 3 ? 0 : 1 + o->c % 254, 0, w);
		break;
	case OP_ROOM:
		if (w->full) {
			char *fill = xasprintf("%s/fill", w->mnt);
			unlink(fill);
			free(fill);
			w->full = 0;
		}
		break;
	case OP_LOG:
		if ((j = pick(w, o->a, 1)))
			log_job(j, o->b % 12000 + 1, o->c % 4096 + 1, w);
		break;
	case OP_EDIT:
		w->version[o->a % NFILES]++;
		write_project(w);
		break;
	case OP_RM: {
		/* Ask to remove a job in any state, or one that is gone. */
		struct mjob *v[MAXJOBS];
		size_t n = 0;
		for (size_t i = 0; i < w->njobs; i++)
			v[n++] = &w->jobs[i];
		if (!n)
			break;
		j = v[o->a % n];
		uint64_t bytes;
		rc = job_house_remove(w->root, j->id, &bytes, &err);
		if (j->removed) {
			if (rc != GR_ENOTFOUND)
				return fail(w, "rm of removed job %s: %d (%s)", j->id, rc, err.msg);
		} else if (!j->ended) {
			if (rc != GR_EINVAL)
				return fail(w, "rm of running job %s: %d, not refused", j->id, rc);
		} else if (j->child > 0) {
			if (rc != GR_EINVAL || !strstr(err.msg, "processes still running"))
				return fail(w, "rm of lost job %s with a live process: %d (%s), not refused",
					    j->id, rc, err.msg);
		} else if (rc != 0) {
			return fail(w, "rm of ended job %s: %s", j->id, err.msg);
		} else {
			j->removed = 1;
		}
		rc = 0;
		break;
	}
	case OP_PRUNE: {
		uint32_t keep = o->a % 4 == 0 ? 0 : o->a % 5;
		uint64_t older = o->b % 3 == 0 ? 0 : (uint64_t)(o->b % 4) * 20000;
		int dry = o->c % 4 == 0;
		struct mjob *v[MAXJOBS];
		size_t n = live(w, v);
		struct job_house_result res;
		if (!keep && !older)
			keep = 1;
		job_house_prune(w->root, keep, older, w->now_ms, dry, &res);
		/* The model: ended, not among the keep newest, older. */
		size_t want = 0;
		for (size_t i = 0; i < n; i++) {
			int go = v[i]->ended && v[i]->child <= 0 && (!keep || i >= keep) &&
				 (!older || v[i]->created_ms + older < w->now_ms);
			int found = 0;
			for (size_t k = 0; k < res.n; k++)
				found |= !strcmp(res.v[k].id, v[i]->id);
			if (go != found) {
				rc = fail(w, "prune keep=%u older=%llu: job %s (%s, #%zu) %s", keep,
					  (unsigned long long)older, v[i]->id,
					  v[i]->ended ? "ended" : "running", i,
					  go ? "should have gone" : "should have stayed");
				break;
			}
			want += go;
			if (go && !dry)
				v[i]->removed = 1;
		}
		if (!rc && (res.n != want || res.kept != n - want))
			rc = fail(w, "prune counted %zu removed, %u kept; the model %zu and %zu",
				  res.n, res.kept, want, n - want);
		job_house_result_free(&res);
		break;
	}
	case OP_GC:
		job_store_gc(w->root);
		break;
	case OP_TIME:
		w->now_ms += o->a % 5 == 0 ? 30000 : o->a % 700;
		break;
	case OP_COUNT:
		break;
	}
	free(dir);
	return rc;
}

#endif
