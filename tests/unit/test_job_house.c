/* A model-based randomized test of the job store and its housekeeping
 * (remote/job/job_store.c, job_house.c, job_snap.c, the local backend's
 * state): a seeded generator starts jobs (folder, snapshot through the
 * shared store, a lock held as a live supervisor holds it), lets them
 * write, finish, fail or lose their supervisor, edits the project, and
 * removes jobs with job_house_remove and job_house_prune (keep N, older
 * than, both, dry runs) and collects the store's garbage, against a model of which jobs
 * exist and in what state. After every step:
 *  - the jobs on disk are the model's, newest first;
 *  - each job's state is the model's, and a job that has not ended was
 *    never removed;
 *  - each job's snapshot holds the project as it was at its start;
 *  - the disk accounting (each job's own bytes plus the store) equals an
 *    independent walk counting each inode once, and after a collection
 *    no store object is unused;
 *  - nothing is left half removed.
 * Faults (issue 29): a supervisor killed while the job's child, which
 * ignores SIGHUP, runs on (a real process carrying GPURUN_JOB_ID and
 * holding the job's GPU lock), a stop that must reach it, and the folder
 * of such a job deleted (rm -rf ~/.cache on the host) before the stop.
 * Then also:
 *  - a job with a live process is never removed (rm refuses, prune and
 *    keep skip it), and reads lost with its processes as the reason;
 *  - after a stop nothing of the job is left running; until then what
 *    carries its id is found, its folder there or not;
 *  - a GPU lock is held exactly while its job's supervisor or one of its
 *    processes lives.
 * Full disk (issue 29): as root the world's jobs live on an 8 MiB tmpfs
 * (in a mount namespace of the test's own, unmounted at teardown); "full"
 * fills it with a filler file, "fullend" fills it and then a job ends,
 * "room" removes the filler. Jobs take the status block at start
 * (sup_status_room_take), write output through the supervisor's log
 * writer ("log": sup_log_write, with its sup_log_lost count kept per job
 * as each supervisor process keeps its own) and end through its status
 * writer (sup_write_status, status_put), full or not. Then also:
 *  - a job that ended with exit X reads done or failed with code X, never
 *    lost, while the disk is full and after;
 *  - bytes a job wrote = bytes of output in its log + the counts its
 *    "N bytes of output lost" markers say + the status's log_lost + what
 *    its supervisor still counts (or counted when killed); the log holds
 *    nothing else, and a supervisor whose last output had room counts
 *    nothing unsaid.
 * Dependencies (issue 33): "after" starts a job's wait for another job
 * (ID or ID:ok), the supervisor's own (sup_wait_job) in a process of its
 * own, or stops one such wait. Then also:
 *  - a wait goes on only once its job has ended or is gone, and then
 *    within a nap; with :ok only after a job that ended done, else it
 *    ends cancelled; a stopped wait ends stopped.
 * Limits and retries (issue 33): "limit" runs a job with [train]
 * time_limit or retries under a real supervisor (job_supervise_mode in a
 * process of its own), sometimes killing it -9 while the command runs
 * (then the job is stopped as gpurun stop does). Then also:
 *  - a job at its limit ends timeout (exit 247), SIGKILL reaching one
 *    that ignores SIGTERM; a failing one ran 1 + retries times, one that
 *    succeeds on its 2nd run ends done after 2; a killed supervisor's job
 *    is lost and, once stopped, nothing of it lives.
 * Not root, or no tmpfs: full, fullend and room do nothing and the case
 * for them prints a skip; the rest (log included) runs as before.
 * On a failure the seed is printed and the operation list shrunk to a
 * smallest one that still fails. GPURUN_MODEL_SEEDS=N runs N seeds (make
 * soak); GPURUN_MODEL_SEED=S replays one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#include "job_backend.h"
#include "job_container.h"
#include "job_glob.h"
#include "job_gpu.h"
#include "job_house.h"
#include "job_proc.h"
#include "job_pyhook.h"
#include "job_record.h"
#include "job_slurm.h"
#include "job_snap.h"
#include "job_steps.h"
#include "job_store.h"
#include "job_super.h"
#include "job_super_int.h"
#include "sync_manifest.h"
#include "sync_proto.h"

enum op_kind { OP_START, OP_WRITE, OP_FINISH, OP_FAIL, OP_LOSE, OP_EDIT, OP_RM, OP_PRUNE,
	       OP_GC, OP_TIME, OP_ORPHAN, OP_STOP, OP_RMDIR, OP_FULL, OP_FULLEND, OP_ROOM, OP_LOG,
	       OP_AFTER, OP_LIMIT, OP_COUNT };
static const char *const op_names[] = { "start", "write", "finish", "fail", "lose", "edit",
					"rm", "prune", "gc", "time", "orphan", "stop", "rmdir",
					"full", "fullend", "room", "log", "after", "limit" };

struct op {
	enum op_kind kind;
	uint32_t a, b, c; /* operands, interpreted per kind (mod what exists) */
};

#define MAXJOBS 64
#define NFILES 4

struct mjob {
	char id[GR_JOB_ID_LEN + 1];
	uint64_t created_ms;
	int alive, ended, failed, lost, removed;
	int lock_fd;
	int gpu_fd;               /* its GPU lock, as the supervisor holds it */
	pid_t child;              /* a process of it that outlived its supervisor */
	int gone;                 /* its folder was deleted from outside */
	uint32_t version[NFILES]; /* the project's files at its start */
	uint32_t code;            /* the exit it ended with */
	int log_fd;               /* its log, as the supervisor holds it open */
	uint64_t out;             /* bytes of output it wrote */
	uint64_t pending;         /* its supervisor's sup_log_lost (when killed: then) */
	int last_full;            /* its last output came while the disk was full */
	int real;                 /* a real supervisor ran it ("limit"): its log
				     holds gpurun's own lines */
	int timeout;              /* it ended at its time limit */
	uint32_t tries;           /* runs of its command ("limit") */
};

/* A job started --after another (issue 33): its supervisor's wait
 * (sup_wait_job) in a process of its own. */
#define MAXWAIT 6
struct waiter {
	pid_t pid;                /* 0: none (any more) */
	size_t a;                 /* the job it waits for */
	int ok;                   /* ID:ok */
	int stopped;              /* SIGTERM sent: it must end stopped */
};

struct world {
	char base[256], project[320], root[320];
	uint64_t now_ms;
	struct mjob jobs[MAXJOBS];
	size_t njobs;
	uint32_t version[NFILES];
	char mnt[320];   /* the tmpfs the jobs live on, or "" */
	int full;        /* the filler is there */
	struct waiter waiters[MAXWAIT];
	size_t nwait;
	char why[512]; /* the first broken invariant */
};

/* Why the full-disk faults cannot run (NULL: they can), and how often
 * they bit, over all seeds. */
static const char *disk_skip;
static uint64_t n_fills, n_full_ends, n_lost_bytes;
/* How the --after waits ended, over all seeds. */
static uint64_t n_went, n_cancelled, n_wait_stopped;
/* How the real supervisors' runs ended, over all seeds. */
static uint64_t n_timeouts, n_retried, n_killed_sups;
static const struct job_sup_mode model_mode = { .setup_build = 1, .run = 1, .take_gpus = 1 };

static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

static int fail(struct world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct world *w, const char *fmt, ...)
{
	va_list ap;

	if (!w->why[0]) {
		va_start(ap, fmt);
		vsnprintf(w->why, sizeof(w->why), fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* File i of the project at version v. */
static size_t file_size(int i, uint32_t v)
{
	static const size_t base[NFILES] = { 40, 3000, 70000, 200000 };
	return base[i] + v % 7;
}

static void file_content(int i, uint32_t v, struct strbuf *sb)
{
	size_t n = file_size(i, v);
	sb_reset(sb);
	sb_grow(sb, n);
	for (size_t k = 0; k < n; k++)
		sb->buf[k] = (char)('a' + (k * 7 + i * 13 + v) % 26);
	sb->len = n;
}

/* Write the project's files at w->version and the sync manifest a sync
 * would leave (hashes, and what the host saw after writing). */
static void write_project(struct world *w)
{
	struct sm_list man = { 0 };
	struct strbuf sb = STRBUF_INIT, enc = STRBUF_INIT;
	char p[512];

	for (int i = 0; i < NFILES; i++) {
		snprintf(p, sizeof(p), "%s/f%d.txt", w->project, i);
		file_content(i, w->version[i], &sb);
		/* A new version arrives by rename, as sync writes it. */
		char tmp[600];
		snprintf(tmp, sizeof(tmp), "%s.tmp", p);
		write_file_atomic(tmp, sb.buf, sb.len, 0644, NULL);
		rename(tmp, p);
		struct stat st;
		stat(p, &st);
		char name[16];
		snprintf(name, sizeof(name), "f%d.txt", i);
		struct sm_entry *e = sm_add(&man, name, SM_FILE);
		e->mode = 0644;
		e->size = sb.len;
		e->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
		struct thash t;
		thash_init(&t, sb.len);
		thash_update(&t, sb.buf, sb.len);
		thash_final(&t, e->hash);
		e->host.ino = st.st_ino;
		e->host.mtime_ns = e->mtime_ns;
		e->host.ctime_ns = (int64_t)st.st_ctim.tv_sec * 1000000000 + st.st_ctim.tv_nsec;
	}
	sm_sort(&man);
	sm_encode(&man, 1, &enc);
	snprintf(p, sizeof(p), "%s/%s", w->project, SYNC_MANIFEST_FILE);
	write_file_atomic(p, enc.buf, enc.len, 0600, NULL);
	sm_list_free(&man);
	sb_release(&sb);
	sb_release(&enc);
}

static int world_init(struct world *w)
{
	memset(w, 0, sizeof(*w));
	snprintf(w->base, sizeof(w->base), "%s/gr-jobmodel.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(w->base))
		return -1;
	if (!disk_skip) {
		snprintf(w->mnt, sizeof(w->mnt), "%s/jobs", w->base);
		if (mkdir(w->mnt, 0700) < 0 ||
		    mount("gpurun-model", w->mnt, "tmpfs", MS_NOSUID | MS_NODEV, "size=8m,mode=700") < 0) {
			w->mnt[0] = '\0';
			job_rm_tree(w->base);
			return -1;
		}
	}
	snprintf(w->project, sizeof(w->project), "%s/project", w->base);
	snprintf(w->root, sizeof(w->root), "%s/jobs/project-0", w->base);
	char p[400];
	snprintf(p, sizeof(p), "%s/.gpurun", w->project);
	mkdir_p(p, 0700, NULL);
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	w->now_ms = (uint64_t)ts.tv_sec * 1000;
	write_project(w);
	return 0;
}

static void world_free(struct world *w, int failed)
{
	for (size_t i = 0; i < w->nwait; i++)
		if (w->waiters[i].pid > 0) {
			kill(w->waiters[i].pid, SIGKILL);
			waitpid(w->waiters[i].pid, NULL, 0);
		}
	for (size_t i = 0; i < w->njobs; i++) {
		if (w->jobs[i].lock_fd > 0)
			close(w->jobs[i].lock_fd);
		if (w->jobs[i].gpu_fd > 0)
			close(w->jobs[i].gpu_fd);
		if (w->jobs[i].log_fd > 0)
			close(w->jobs[i].log_fd);
		if (w->jobs[i].child > 0) {
			kill(w->jobs[i].child, SIGKILL);
			waitpid(w->jobs[i].child, NULL, 0);
		}
	}
	if (failed && getenv("GPURUN_MODEL_KEEP")) {
		fprintf(stderr, "  kept %s%s\n", w->base,
			w->mnt[0] ? " (its jobs on a tmpfs, gone when the test exits)" : "");
		return;
	}
	if (w->mnt[0] && umount2(w->mnt, 0) < 0)
		umount2(w->mnt, MNT_DETACH);
	job_rm_tree(w->base);
}

/* Can the faults mount a tmpfs? As root, in a mount namespace of our
 * own, so that a crash leaves no mount behind. */
static void disk_probe(void)
{
	static char why[160];
	char dir[256];

	if (geteuid() != 0) {
		disk_skip = "not root: no tmpfs for the full-disk faults";
		return;
	}
	if (unshare(CLONE_NEWNS) == 0)
		mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
	snprintf(dir, sizeof(dir), "%s/gr-jobmodel-probe.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(dir)) {
		disk_skip = "no temp folder to mount a tmpfs on";
		return;
	}
	if (mount("gpurun-model", dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m") < 0) {
		snprintf(why, sizeof(why), "cannot mount a tmpfs: %s", strerror(errno));
		disk_skip = why;
	} else {
		umount2(dir, 0);
	}
	rmdir(dir);
}

/* Fill the jobs' tmpfs to its last page (a filler file beside the root). */
static int disk_fill(struct world *w)
{
	char *p = xasprintf("%s/fill", w->mnt);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	struct stat st;
	struct statvfs vs = { 0 };
	off_t off;

	free(p);
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return fail(w, "cannot make the filler: %s", strerror(errno));
	}
	off = st.st_size;
	for (off_t chunk = 1 << 20; chunk >= 4096; chunk /= 16)
		while (posix_fallocate(fd, off, chunk) == 0)
			off += chunk;
	close(fd);
	if (statvfs(w->mnt, &vs) < 0 || vs.f_bfree != 0)
		return fail(w, "the filler left %llu blocks free",
			    (unsigned long long)vs.f_bfree);
	w->full = 1;
	n_fills++;
	return 0;
}

/* Byte k of every job's output: lines of letters (never a '['). */
static char out_byte(uint64_t k)
{
	return k % 50 == 49 ? '\n' : (char)('a' + k % 26);
}

static struct mjob *pick(struct world *w, uint32_t k, int alive_only)
{
	size_t n = 0;
	for (size_t i = 0; i < w->njobs; i++)
		n += !w->jobs[i].removed && (!alive_only || w->jobs[i].alive);
	if (!n)
		return NULL;
	k %= (uint32_t)n;
	for (size_t i = 0; i < w->njobs; i++)
		if (!w->jobs[i].removed && (!alive_only || w->jobs[i].alive) && k-- == 0)
			return &w->jobs[i];
	return NULL;
}

static char *job_path(struct world *w, const struct mjob *j)
{
	return xasprintf("%s/%s", w->root, j->id);
}

/* The model's order: newest first, as job_list_ids promises. */
static int cmp_model(const void *a, const void *b)
{
	const struct mjob *x = *(struct mjob *const *)a, *y = *(struct mjob *const *)b;
	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? 1 : -1;
	return strcmp(y->id, x->id);
}

static size_t live(struct world *w, struct mjob **v)
{
	size_t n = 0;
	for (size_t i = 0; i < w->njobs; i++)
		if (!w->jobs[i].removed)
			v[n++] = &w->jobs[i];
	qsort(v, n, sizeof(*v), cmp_model);
	return n;
}

/* The job's GPU lock file (one per job, in the test's own folder). */
static char *gpu_lock_path(struct world *w, const struct mjob *j)
{
	return xasprintf("%s/gpu-%s.lock", w->base, j->id);
}

/* Is j's GPU lock held (by anyone)? */
static int gpu_locked(struct world *w, const struct mjob *j)
{
	char *p = gpu_lock_path(w, j);
	int fd = open(p, O_RDONLY | O_CLOEXEC), held = 0;

	free(p);
	if (fd < 0)
		return 0;
	held = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return held;
}

/* The supervisor is killed; a child of the job that ignores SIGHUP runs
 * on, with the job's id in its environment and its GPU lock. */
static int orphan_job(struct mjob *j, struct world *w)
{
	pid_t pid = fork();

	if (pid < 0)
		return fail(w, "fork: %s", strerror(errno));
	if (pid == 0) {
		for (int fd = 3; fd < 1024; fd++)
			if (fd != j->gpu_fd)
				close(fd);
		signal(SIGHUP, SIG_IGN);
		setenv("GPURUN_JOB_ID", j->id, 1);
		execl("/bin/sleep", "sleep", "600", (char *)NULL);
		_exit(127);
	}
	j->child = pid;
	close(j->lock_fd);
	close(j->gpu_fd);
	close(j->log_fd); /* what its supervisor counted lost dies with it (pending) */
	j->lock_fd = j->gpu_fd = j->log_fd = -1;
	j->alive = 0;
	j->ended = j->lost = 1;
	/* It runs once its environment is the job's (after exec). */
	for (int i = 0; i < 500; i++) {
		char *job = gpu_pid_job((uint32_t)pid);
		int ok = job && !strcmp(job, j->id);
		free(job);
		if (ok)
			return 0;
		usleep(2000);
	}
	return fail(w, "the orphan of job %s never ran", j->id);
}

/* The job ends with exit code through the supervisor's own status
 * writer (on a full disk: into the block taken at start), or, lost, its
 * supervisor is killed. */
static void end_job(struct mjob *j, uint32_t code, int lost, struct world *w)
{
	char *dir = job_path(w, j);
	if (!lost) {
		struct sup s = { .dir = dir, .log_fd = j->log_fd, .mode = &model_mode };
		sup_log_lost = j->pending; /* each supervisor process has its own */
		sup_write_status(&s, (int)(code << 8), JOB_STEP_RUN);
		sup_log_lost = 0;
		j->pending = 0; /* said in the log or in the status, or the check tells */
		n_full_ends += w->full;
	}
	close(j->lock_fd);
	close(j->gpu_fd);
	close(j->log_fd);
	j->lock_fd = j->gpu_fd = j->log_fd = -1;
	j->alive = 0;
	j->ended = 1;
	j->failed = code != 0;
	j->code = code;
	j->lost = lost;
	free(dir);
}

/* A job writes n bytes of output, as the supervisor's pump hands them to
 * the log writer, in pieces of up to piece bytes. */
static void log_job(struct mjob *j, size_t n, size_t piece, struct world *w)
{
	char buf[4096];
	uint64_t before = j->pending;

	sup_log_lost = j->pending;
	while (n) {
		size_t m = n < piece ? n : piece;
		for (size_t k = 0; k < m; k++)
			buf[k] = out_byte(j->out + k);
		sup_log_write(j->log_fd, buf, m);
		j->out += m;
		n -= m;
	}
	j->pending = sup_log_lost;
	sup_log_lost = 0;
	j->last_full = w->full;
	if (j->pending > before)
		n_lost_bytes += j->pending - before;
}

/* Start a job's wait for job a (ID:ok when ok), as its supervisor runs
 * it before setup, in a process of its own that holds nothing of the
 * model's (no job's lock, log or GPU). Its exit: 0 it went on, 1
 * cancelled, 2 stopped. */
static int start_waiter(struct world *w, struct mjob *a, int ok)
{
	struct waiter *wt = &w->waiters[w->nwait];
	char *wdir = xasprintf("%s/waiters/w%zu", w->base, w->nwait), *meta = job_meta(wdir, "");
	char *other = job_path(w, a);
	pid_t pid;

	mkdir_p(meta, 0700, NULL);
	pid = fork();
	if (pid == 0) {
		static const int sigs[] = { SIGCHLD, SIGTERM };
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		if (sig_wake_start(&sup_wake, sigs, 2, SA_RESTART) < 0)
			_exit(9);
		char *log = job_meta(wdir, "log");
		struct sup s = { .dir = wdir, .id = "20261127-000000-0000", .mode = &model_mode };
		s.log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int rc = sup_wait_job(&s, other, a->id, ok);
		_exit(rc == 0 ? 0 : rc == SIGTERM ? 2 : s.end && !strcmp(s.end, "cancelled") ? 1 : 3);
	}
	free(wdir);
	free(meta);
	free(other);
	if (pid < 0)
		return fail(w, "fork: %s", strerror(errno));
	*wt = (struct waiter){ .pid = pid, .a = (size_t)(a - w->jobs), .ok = ok };
	w->nwait++;
	return 0;
}

/* A new job of the model in w->jobs[w->njobs] (counted by the caller),
 * made as JOB_START's helper makes one: its folder and spec, then the
 * snapshot of the project through the store. Its folder (the caller's),
 * or NULL with the failure said. */
static char *make_job(struct world *w, const struct job_spec *spec)
{
	struct mjob *j = &w->jobs[w->njobs];
	struct gr_err err = { 0 };
	struct snap_stats ss;
	char *id = NULL, *dir = NULL;

	memset(j, 0, sizeof(*j));
	j->lock_fd = j->gpu_fd = j->log_fd = -1;
	if (job_create(w->root, w->project, spec, w->now_ms, &id, &dir, &err) < 0) {
		fail(w, "job_create: %s", err.msg);
		return NULL;
	}
	snprintf(j->id, sizeof(j->id), "%s", id);
	free(id);
	j->created_ms = w->now_ms;
	memcpy(j->version, w->version, sizeof(j->version));
	int src = job_snapshot(w->project, dir, w->root, NULL, &ss, &err);
	sv_clear(&ss.env_names);
	if (src < 0) {
		fail(w, "job_snapshot: %s", err.msg);
		free(dir);
		return NULL;
	}
	return dir;
}

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

/* ---- invariants ---- */

struct ino_seen {
	dev_t dev;
	ino_t ino;
};

/* du: every inode once, its blocks (as du -B1 counts). */
static uint64_t du_unique(const char *path, struct ino_seen **seen, size_t *n)
{
	struct stat st;
	uint64_t sum = 0;

	if (lstat(path, &st) < 0)
		return 0;
	for (size_t i = 0; i < *n; i++)
		if ((*seen)[i].dev == st.st_dev && (*seen)[i].ino == st.st_ino)
			return 0;
	*seen = xrealloc(*seen, (*n + 1) * sizeof(**seen));
	(*seen)[(*n)++] = (struct ino_seen){ st.st_dev, st.st_ino };
	sum = (uint64_t)st.st_blocks * 512;
	if (S_ISDIR(st.st_mode)) {
		DIR *d = opendir(path);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			char *sub = xasprintf("%s/%s", path, e->d_name);
			sum += du_unique(sub, seen, n);
			free(sub);
		}
		if (d)
			closedir(d);
	}
	return sum;
}

#define LOST_HEAD "\n[gpurun] "
#define LOST_TAIL " bytes of output lost: no space left on the host\n"

/* Nothing of j's output lost silently: what it wrote is in its log, or
 * counted lost by a marker there, by its status (r), or by its
 * supervisor still (or when killed). */
static int check_log(struct world *w, const struct mjob *j, const char *dir,
		     const struct job_rec *r)
{
	char *p = job_meta(dir, "log");
	struct strbuf log = STRBUF_INIT;
	uint64_t data = 0, said = 0;
	size_t at = 0;
	int rc = 0;

	if (read_file(p, &log, NULL) < 0)
		rc = fail(w, "job %s: cannot read its log", j->id);
	while (!rc && at < log.len) {
		const char *m = memmem(log.buf + at, log.len - at, LOST_HEAD, strlen(LOST_HEAD));
		size_t end = m ? (size_t)(m - log.buf) : log.len;
		for (size_t k = at; !rc && k < end; k++)
			if (log.buf[k] != '\n' && (log.buf[k] < 'a' || log.buf[k] > 'z'))
				rc = fail(w, "job %s: byte %zu of its log (0x%02x) is neither output nor a "
					  "whole marker", j->id, k, (unsigned char)log.buf[k]);
		data += end - at;
		if (rc || !m)
			break;
		char *num = log.buf + end + strlen(LOST_HEAD), *tail;
		errno = 0;
		unsigned long long n = strtoull(num, &tail, 10);
		if (tail == num || errno || (size_t)(log.buf + log.len - tail) < strlen(LOST_TAIL) ||
		    memcmp(tail, LOST_TAIL, strlen(LOST_TAIL)) || !n)
			rc = fail(w, "job %s: a broken marker at byte %zu of its log", j->id, end);
		said += n;
		at = (size_t)(tail - log.buf) + strlen(LOST_TAIL);
	}
	uint64_t in_status = r->has_status ? r->log_lost : 0;
	if (!rc && data + said + in_status + j->pending != j->out)
		rc = fail(w, "job %s wrote %llu bytes: %llu in its log, %llu said lost there, %llu in "
			  "its status, %llu counted by its supervisor", j->id,
			  (unsigned long long)j->out, (unsigned long long)data,
			  (unsigned long long)said, (unsigned long long)in_status,
			  (unsigned long long)j->pending);
	if (!rc && j->alive && j->pending && !j->last_full)
		rc = fail(w, "job %s: %llu bytes lost unsaid after output with room", j->id,
			  (unsigned long long)j->pending);
	free(p);
	sb_release(&log);
	return rc;
}

/* after_gc: no store object may be unused. content: read every job's
 * snapshot back. */
static int check(struct world *w, int after_gc, int content)
{
	struct mjob *v[MAXJOBS];
	size_t n = live(w, v);
	struct strvec ids = STRVEC_INIT;
	struct strbuf want = STRBUF_INIT, got = STRBUF_INIT;
	int rc = 0;

	/* A job whose folder is gone: what it started is found by its id
	 * while it lives, and its GPU lock is held exactly as long. */
	for (size_t i = 0; !rc && i < w->njobs; i++) {
		struct mjob *g = &w->jobs[i];
		if (!g->gone)
			continue;
		if ((job_procs_alive(g->id, 0, NULL) > 0) != (g->child > 0))
			rc = fail(w, "job %s (folder gone): its processes are %sfound, yet %s", g->id,
				  g->child > 0 ? "not " : "", g->child > 0 ? "one lives" : "none lives");
		else if (gpu_locked(w, g) != (g->child > 0))
			rc = fail(w, "job %s (folder gone): its GPU lock is %s", g->id,
				  g->child > 0 ? "free while it runs" : "held, nothing of it lives");
	}
	job_list_ids(w->root, &ids);
	if (!rc && ids.n != n)
		rc = fail(w, "%zu jobs on disk, the model has %zu", ids.n, n);
	for (size_t i = 0; !rc && i < n; i++)
		if (strcmp(ids.v[i], v[i]->id))
			rc = fail(w, "job #%zu is %s on disk, %s in the model (newest first)", i,
				  ids.v[i], v[i]->id);
	for (size_t i = 0; !rc && i < n; i++) {
		char *dir = job_path(w, v[i]);
		struct job_rec r;
		if (job_load(dir, &r, 0, NULL) < 0) {
			rc = fail(w, "job %s does not load", v[i]->id);
		} else {
			const char *st = v[i]->alive ? "running" : v[i]->lost ? "lost" :
					 v[i]->timeout ? "timeout" : v[i]->failed ? "failed" : "done";
			if (strcmp(r.state, st))
				rc = fail(w, "job %s is %s, the model says %s", v[i]->id, r.state, st);
			if (!rc && v[i]->timeout && job_rec_exit_code(&r) != GR_EXIT_JOB_TIMEOUT)
				rc = fail(w, "job %s timed out, yet exits %d", v[i]->id, job_rec_exit_code(&r));
			if (!rc && v[i]->real && !v[i]->lost && r.tries != v[i]->tries)
				rc = fail(w, "job %s ran %u times, the model says %u", v[i]->id, r.tries,
					  v[i]->tries);
			if (!rc && v[i]->ended && !v[i]->lost && !v[i]->timeout &&
			    (!r.has_status || r.signalled || r.code != v[i]->code))
				rc = fail(w, "job %s: exit %s%u, it ended with exit %u%s", v[i]->id,
					  r.signalled ? "signal " : "", r.has_status ? r.code : 0,
					  v[i]->code, r.has_status ? "" : " (no status)");
			if (!rc && !v[i]->real)
				rc = check_log(w, v[i], dir, &r);
			if (!rc && job_rec_ended(&r) != v[i]->ended)
				rc = fail(w, "job %s: ended %d, the model says %d", v[i]->id,
					  job_rec_ended(&r), v[i]->ended);
			int says = r.reason && strstr(r.reason, "still running") != NULL;
			if (!rc && says != (v[i]->child > 0))
				rc = fail(w, "job %s: reason '%s', yet a process of it %s", v[i]->id,
					  r.reason ? r.reason : "", v[i]->child > 0 ? "lives" : "does not");
			if (!rc && !v[i]->child && job_procs_alive(v[i]->id, r.pid, NULL))
				rc = fail(w, "job %s: a process of it lives after its stop", v[i]->id);
		}
		job_rec_clear(&r);
		/* Its GPU lock: held while the supervisor or a process of it lives. */
		if (!rc && gpu_locked(w, v[i]) != (v[i]->alive || v[i]->child > 0))
			rc = fail(w, "job %s: its GPU lock is %s, yet %s", v[i]->id,
				  gpu_locked(w, v[i]) ? "held" : "free",
				  v[i]->alive || v[i]->child > 0 ? "it runs" : "nothing of it lives");
		/* Its snapshot is the project at its start. */
		for (int f = 0; !rc && content && f < NFILES; f++) {
			char *p = xasprintf("%s/f%d.txt", dir, f);
			sb_reset(&got);
			file_content(f, v[i]->version[f], &want);
			if (read_file(p, &got, NULL) < 0 || got.len != want.len ||
			    memcmp(got.buf, want.buf, want.len))
				rc = fail(w, "job %s: f%d.txt is not version %u", v[i]->id, f,
					  v[i]->version[f]);
			free(p);
		}
		free(dir);
	}
	/* Accounting: each job's own bytes plus the store's equal a walk
	 * that counts each inode once (less the root's and the store's own
	 * folder blocks, which neither counts). */
	if (!rc) {
		struct ino_seen *seen = NULL;
		size_t ns = 0;
		struct stat rs, os;
		char *objs = xasprintf("%s/%s", w->root, JOB_OBJECTS);
		uint64_t acc = job_root_du(w->root); /* first: it may write its caches */
		uint64_t walk = du_unique(w->root, &seen, &ns);
		if (stat(w->root, &rs) == 0)
			walk -= (uint64_t)rs.st_blocks * 512;
		if (stat(objs, &os) == 0)
			walk -= (uint64_t)os.st_blocks * 512;
		if (walk != acc)
			rc = fail(w, "disk: jobs and store count %llu bytes, a walk %llu",
				  (unsigned long long)acc, (unsigned long long)walk);
		free(seen);
		/* After a collection, every object is some job's. */
		DIR *d = opendir(objs);
		struct dirent *e;
		while (!rc && d && (e = readdir(d))) {
			struct stat st;
			if (e->d_name[0] == '.')
				continue;
			if (fstatat(dirfd(d), e->d_name, &st, 0) < 0)
				continue;
			if (after_gc && st.st_nlink < 2)
				rc = fail(w, "store object %s is unused after a collection", e->d_name);
		}
		if (d)
			closedir(d);
		free(objs);
		/* Nothing half removed. */
		d = opendir(w->root);
		while (!rc && d && (e = readdir(d)))
			if (!strncmp(e->d_name, TRASH_PREFIX, strlen(TRASH_PREFIX)))
				rc = fail(w, "%s left behind", e->d_name);
		if (d)
			closedir(d);
	}
	sv_clear(&ids);
	sb_release(&want);
	sb_release(&got);
	return rc;
}

/* Run ops (with mask: skip ops[i] where skip[i]); the index of the op
 * after which an invariant broke, or -1 if none did. */
static long run(const struct op *ops, size_t n, const unsigned char *skip, char *why, size_t whyn)
{
	struct world w;
	long bad = -1;

	if (world_init(&w) < 0) {
		snprintf(why, whyn, "cannot make a temp folder");
		return 0;
	}
	for (size_t i = 0; i < n && bad < 0; i++) {
		if (skip && skip[i])
			continue;
		enum op_kind k = ops[i].kind;
		if (apply(&w, &ops[i]) < 0 ||
		    check(&w, k == OP_GC, k == OP_START || k == OP_EDIT || k == OP_GC || k == OP_PRUNE ||
				       k == OP_RM) < 0 ||
		    check_waiters(&w) < 0)
			bad = (long)i;
	}
	if (bad >= 0)
		snprintf(why, whyn, "%s", w.why);
	world_free(&w, bad >= 0);
	return bad;
}

static void gen(uint64_t seed, struct op *ops, size_t n)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	static const int weights[OP_COUNT] = { 8, 3, 3, 2, 1, 2, 2, 3, 2, 4, 3, 3, 2, 2, 2, 3, 6, 5, 2 };
	int total = 0;

	for (int k = 0; k < OP_COUNT; k++)
		total += weights[k];
	for (size_t i = 0; i < n; i++) {
		int r = (int)(rng_next(&s) % (uint64_t)total), k = 0;
		while (r >= weights[k])
			r -= weights[k++];
		ops[i] = (struct op){ (enum op_kind)k, (uint32_t)rng_next(&s), (uint32_t)rng_next(&s),
				      (uint32_t)rng_next(&s) };
	}
}

/* Drop ops while the failure stays (chunks first, then one at a time). */
static void shrink(const struct op *ops, size_t n, unsigned char *skip)
{
	char why[512];

	for (size_t chunk = n / 2; chunk >= 1; chunk /= 2) {
		for (size_t at = 0; at < n; at += chunk) {
			unsigned char saved[512];
			size_t m = 0;
			for (size_t i = at; i < at + chunk && i < n; i++, m++) {
				saved[m] = skip[i];
				skip[i] = 1;
			}
			if (run(ops, n, skip, why, sizeof(why)) < 0)
				for (size_t i = at, k = 0; k < m; i++, k++)
					skip[i] = saved[k]; /* passes without them: needed */
		}
		if (chunk == 1)
			break;
	}
}

static void print_ops(const struct op *ops, size_t n, const unsigned char *skip)
{
	for (size_t i = 0; i < n; i++)
		if (!skip || !skip[i])
			fprintf(stderr, "    %3zu %-6s %u %u %u\n", i, op_names[ops[i].kind], ops[i].a,
				ops[i].b, ops[i].c);
}

#define NOPS 60

static int one_seed(uint64_t seed)
{
	struct op ops[NOPS];
	unsigned char skip[NOPS] = { 0 };
	char why[512];

	gen(seed, ops, NOPS);
	long bad = run(ops, NOPS, NULL, why, sizeof(why));
	if (bad < 0)
		return 0;
	fprintf(stderr, "  seed %llu: after op %ld: %s\n", (unsigned long long)seed, bad, why);
	for (long i = bad + 1; i < NOPS; i++)
		skip[i] = 1;
	shrink(ops, NOPS, skip);
	run(ops, NOPS, skip, why, sizeof(why));
	fprintf(stderr, "  shrunk to (replay: GPURUN_MODEL_SEED=%llu): %s\n",
		(unsigned long long)seed, why);
	print_ops(ops, NOPS, skip);
	return -1;
}

static long long seeds_run;

static void test_model_fixed_seeds(void)
{
	const char *one = getenv("GPURUN_MODEL_SEED"), *many = getenv("GPURUN_MODEL_SEEDS");
	long long n = 12, first = 1;

	if (one && parse_ll(one, 0, 1LL << 62, &first) == 0)
		n = 1;
	else if (many)
		parse_ll(many, 1, 1000000, &n);
	for (long long s = first; s < first + n; s++)
		if (one_seed((uint64_t)s) < 0) {
			CHECK(!"an invariant broke (seed and shrunk sequence above)");
			return;
		}
	/* Seeds that found bugs, kept: 45 (a job's du cache left at its
	 * placeholder when the disk had no room for the final text). */
	static const uint64_t found[] = { 45 };
	for (size_t i = 0; !one && i < GR_ARRAY_SIZE(found); i++)
		if (one_seed(found[i]) < 0) {
			CHECK(!"an invariant broke (seed and shrunk sequence above)");
			return;
		}
	printf("# %lld seeds x %d operations, every invariant held\n", n, NOPS);
	printf("# --after waits: %llu went on, %llu cancelled (:ok of a job that failed, was lost "
	       "or removed), %llu stopped\n", (unsigned long long)n_went,
	       (unsigned long long)n_cancelled, (unsigned long long)n_wait_stopped);
	printf("# real supervisors: %llu timeouts, %llu runs again after a failure, %llu killed -9 "
	       "and stopped\n", (unsigned long long)n_timeouts, (unsigned long long)n_retried,
	       (unsigned long long)n_killed_sups);
	if (n >= 12)
		CHECK(n_went && n_cancelled && n_wait_stopped && n_timeouts && n_retried);
	seeds_run = n;
}

/* The full-disk faults bit in the seeds above (a skip when they could
 * not run). */
static void test_model_disk_full(void)
{
	if (disk_skip)
		SKIP(disk_skip);
	printf("# full disk: %llu fills, %llu jobs ended on it, %llu bytes of output lost on it "
	       "and accounted\n", (unsigned long long)n_fills, (unsigned long long)n_full_ends,
	       (unsigned long long)n_lost_bytes);
	if (seeds_run >= 12)
		CHECK(n_fills && n_full_ends && n_lost_bytes);
}

/* The record travels as key/value pairs: what goes in comes out; a
 * duplicate key, a malformed number or a lying count is refused. */
static void test_record_wire(void)
{
	struct job_rec r = { 0 }, back;
	struct strbuf b = STRBUF_INIT;
	struct gr_rd rd;

	r.id = xstrdup("20261122-003512-a1b2");
	r.state = xstrdup("running");
	r.created_ms = 1763771712000ULL;
	r.has_status = 1;
	r.code = 7;
	r.disk_bytes = UINT64_MAX;
	r.phase = xstrdup("build");
	job_rec_put(&b, &r);
	rd_init(&rd, b.buf, b.len);
	job_rec_get(&rd, &back);
	CHECK(!rd.bad && rd.n == 0);
	CHECK_STR(back.id, r.id);
	CHECK_STR(back.state, "running");
	CHECK_STR(back.phase, "build");
	CHECK_STR(back.gpus, ""); /* unset strings read back as "" */
	CHECK(back.created_ms == r.created_ms && back.disk_bytes == UINT64_MAX);
	CHECK(back.has_status == 1 && back.code == 7 && back.signalled == 0);
	job_rec_clear(&back);

	static const char *const bad[][2] = {
		{ "code", "4294967296" }, { "code", "-1" }, { "created_ms", "12a" },
		{ "created_ms", "" }, { "has_status", "2" }, { "disk_bytes", "18446744073709551616" },
	};
	for (size_t i = 0; i < GR_ARRAY_SIZE(bad); i++) {
		sb_reset(&b);
		put_u32(&b, 1);
		put_str(&b, bad[i][0]);
		put_str(&b, bad[i][1]);
		rd_init(&rd, b.buf, b.len);
		job_rec_get(&rd, &back);
		CHECK(rd.bad);
		job_rec_clear(&back);
	}
	sb_reset(&b);
	put_u32(&b, 2);
	put_str(&b, "state");
	put_str(&b, "done");
	put_str(&b, "state");
	put_str(&b, "lost");
	rd_init(&rd, b.buf, b.len);
	job_rec_get(&rd, &back);
	CHECK(rd.bad); /* a duplicate */
	job_rec_clear(&back);
	sb_reset(&b);
	put_u32(&b, 1000000);
	rd_init(&rd, b.buf, b.len);
	job_rec_get(&rd, &back);
	CHECK(rd.bad); /* more pairs than bytes */
	job_rec_clear(&back);
	sb_reset(&b);
	put_u32(&b, 1);
	put_str(&b, "from_a_later_issue");
	put_str(&b, "x");
	rd_init(&rd, b.buf, b.len);
	job_rec_get(&rd, &back);
	CHECK(!rd.bad); /* unknown keys are skipped */
	job_rec_clear(&back);
	job_rec_clear(&r);
	sb_release(&b);
}

/* A name that no job has is "not found", not a crash (job_resolve once
 * passed NULL on to xstrdup). */
static void test_resolve_unknown_name(void)
{
	char root[] = "/tmp/gr-resolve.XXXXXX", *id = NULL;
	struct gr_err err = { 0 };

	CHECK(mkdtemp(root) != NULL);
	CHECK(job_resolve(root, "nosuch", &id, &err) == GR_ENOTFOUND);
	CHECK(id == NULL && strstr(err.msg, "no job named 'nosuch'"));
	rmdir(root);
}

int main(void)
{
	/* No waiting for room: a status that cannot go shows at once. */
	sup_status_wait_ms = 0;
	RUN(test_record_wire);
	RUN(test_resolve_unknown_name);
	disk_probe();
	RUN(test_model_fixed_seeds);
	RUN(test_model_disk_full);
	return T_DONE();
}
