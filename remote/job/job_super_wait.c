/* What a job waits for before its command (issue 33): the job it was
 * started after (--after), then its GPUs, in the box's line (job_queue.h).
 * A wait sleeps on what it waits for, never polls fast, and a stop ends
 * it at once (the job's .gpurun folder is watched too). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "job_gpu.h"
#include "job_queue.h"
#include "job_record.h"
#include "job_store.h"
#include "job_super.h"
#include "job_super_int.h"

/* A safety net under every wait: a change missed (a folder that
 * appeared, a tool from before the line) is seen within this long. */
#define WAIT_SAFETY_MS 10000

void sup_set_queued(struct sup *s, const char *why)
{
	char *p = job_meta(s->dir, "queued");

	if (why)
		write_file_atomic(p, why, strlen(why), 0644, NULL);
	else
		unlink(p);
	free(p);
}

/* Say why the job waits, when it is news: note in the log, why in
 * .gpurun/queued (the place in line is not there: status asks the line). */
static void say_wait(struct sup *s, char **last, const char *note, const char *why)
{
	if (*last && !strcmp(*last, note))
		return;
	sup_set_queued(s, why);
	sup_note(s, "%s", note);
	free(*last);
	*last = xstrdup(note);
}

/* Sleep up to ms, waking on a signal or a change in one of the folders. */
static void nap_on(struct sup *s, const char *const *dirs, size_t n, int ms)
{
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	struct pollfd pfd[2] = { { sup_wake.fd[0], POLLIN, 0 }, { in, POLLIN, 0 } };

	for (size_t i = 0; in >= 0 && i < n; i++)
		inotify_add_watch(in, dirs[i], IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_CLOSE_WRITE);
	/* (a stop asked before the watches were set: not slept through) */
	if (!sup_stop_asked(s) && poll(pfd, 2, in < 0 && ms > 1000 ? 1000 : ms) > 0 &&
	    pfd[0].revents)
		sig_wake_drain(&sup_wake);
	if (in >= 0)
		close(in);
}

int sup_wait_after(struct sup *s)
{
	const char *after = job_spec_get(&s->spec, "after", "");
	size_t idlen = strcspn(after, ":");
	char *root, *other, *id, *slash;
	int rc;

	if (!*after)
		return 0;
	root = xstrdup(s->dir);
	if ((slash = strrchr(root, '/')))
		*slash = '\0';
	id = xstrndup(after, idlen);
	other = xasprintf("%s/%s", root, id);
	rc = sup_wait_job(s, other, id, !strcmp(after + idlen, ":ok"));
	free(other);
	free(id);
	free(root);
	return rc;
}

int sup_wait_job(struct sup *s, const char *other, const char *other_id, int want_ok)
{
	char *other_meta = job_meta(other, ""), *self_meta = job_meta(s->dir, ""), *last = NULL;
	int rc = 0;

	for (;;) {
		struct job_rec r;
		struct gr_err err = { 0 };
		char *why;
		if (sup_stop_asked(s)) {
			sup_note(s, "stopped before it started");
			rc = SIGTERM;
			break;
		}
		if (job_load(other, &r, 0, &err) < 0) {
			job_rec_clear(&r);
			if (!want_ok) {
				sup_note(s, "job %s is gone: starting", other_id);
				break;
			}
			s->end = "cancelled";
			s->end_reason = xasprintf("job %s, which it was to start after, is gone", other_id);
			sup_note(s, "cancelled: %s", s->end_reason);
			rc = 1 << 8;
			break;
		}
		if (job_rec_ended(&r)) {
			int code = job_rec_exit_code(&r);
			if (!want_ok || (code == 0 && !strcmp(r.state, "done"))) {
				sup_note(s, "job %s ended (%s): starting", r.id, r.state);
				job_rec_clear(&r);
				break;
			}
			s->end = "cancelled";
			s->end_reason = xasprintf("job %s, which it was to start after with :ok, ended %s "
						  "(exit %d)", r.id, r.state, code);
			sup_note(s, "cancelled: %s", s->end_reason);
			job_rec_clear(&r);
			rc = 1 << 8;
			break;
		}
		why = xasprintf("waiting for job %s to end%s (it is %s)", r.id,
				want_ok ? " well" : "", r.state);
		say_wait(s, &last, why, why);
		free(why);
		/* A Slurm job's state is a query to the cluster (cached 2 s
		 * for every reader): ask it less often. */
		int nap_ms = r.backend && !strcmp(r.backend, "slurm") ? 10000 : 2000;
		job_rec_clear(&r);
		const char *dirs[] = { other_meta, self_meta };
		nap_on(s, dirs, 2, nap_ms);
	}
	sup_set_queued(s, NULL);
	free(last);
	free(other_meta);
	free(self_meta);
	return rc;
}

int sup_take_gpus(struct sup *s, const char *spec, char **gpus, int *restrict_, int **fds,
		  size_t *nfds)
{
	struct gpu_queue q = { .fd = -1 };
	struct gr_err err = { 0 };
	char *meta = job_meta(s->dir, ""), *last = NULL, *why = NULL;
	int rc, status = 0;
	long long count = 0;

	*gpus = NULL;
	/* all, 0, or nothing asked: no GPUs to wait for, no line */
	if (!strchr(spec, ',') && (parse_ll(spec, 0, 1024, &count) < 0 || count == 0)) {
		rc = gpu_acquire(spec, s->id, NULL, 0, gpus, restrict_, fds, nfds, &why, &err);
		goto done;
	}
	if (gpu_queue_join(&q, s->id, spec, &err) < 0) {
		/* No line (a lock folder we cannot use): gpu_acquire says
		 * the same, clearly, below. */
		sup_note(s, "%s", err.msg);
		err = (struct gr_err){ 0 };
	}
	for (;;) {
		struct gpu_queue_turn t = { .go = 1, .place = 1 };
		struct strbuf msg = STRBUF_INIT;
		char *seen = NULL, nth[32];
		if (sup_stop_asked(s)) {
			sup_note(s, "stopped before it started");
			status = SIGTERM; /* as if terminated */
			break;
		}
		if (q.fd >= 0)
			gpu_queue_turn(&q, spec, &t);
		if (t.go) {
			seen = gpu_queue_locks_seen();
			free(why);
			why = NULL;
			rc = gpu_acquire(spec, s->id, t.avoid, t.navoid, gpus, restrict_, fds, nfds, &why, &err);
			if (rc <= 0) {
				free(seen);
				gpu_queue_turn_free(&t);
				goto done;
			}
			sb_adds(&msg, why);
		} else {
			const char *w = t.behind_wants;
			sb_addf(&msg, "behind %s, which waits for ", t.behind);
			if (strchr(w, ','))
				sb_addf(&msg, "GPUs %s", w);
			else
				sb_addf(&msg, "%s GPU%s", w, strcmp(w, "1") ? "s" : "");
		}
		char *note = xasprintf("queued: %s, %s", fmt_ordinal(t.place, nth, sizeof(nth)),
				       msg.buf);
		say_wait(s, &last, note, msg.buf);
		free(note);
		sb_release(&msg);
		/* What woke us so far is read (nvidia-smi's end is a
		 * SIGCHLD: left in the pipe, it would end every wait at once);
		 * a stop that came meanwhile is still seen, its flag kept. */
		sig_wake_drain(&sup_wake);
		if (!sup_stop_asked(s))
			gpu_queue_wait(&t, seen, meta, sup_wake.fd[0], WAIT_SAFETY_MS);
		free(seen);
		gpu_queue_turn_free(&t);
	}
	rc = 0;
done:
	if (rc < 0) {
		sup_note(s, "cannot start the job: %s", err.msg);
		status = 1 << 8;
	} else if (status == 0 && why) {
		sup_note(s, "%s", why); /* no GPUs assigned: why */
	}
	gpu_queue_leave(&q);
	free(why);
	free(last);
	free(meta);
	return status;
}
