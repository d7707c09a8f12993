/* test_job_house.c's world: the model's operations and jobs, the
 * project and the disk the jobs live on, and the helpers that start,
 * end, log and orphan a job as a supervisor would. Header-only: the
 * model test is one binary (test_job_house.c includes this, then
 * job_house_ops.h). */
#ifndef GR_JOB_HOUSE_WORLD_H
#define GR_JOB_HOUSE_WORLD_H

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
	/* A stop may come before the child's handler is in: SIGTERM waits,
	 * blocked, until it is (else the waiter died of it, now and then:
	 * seed 270 of make soak). */
	sigset_t term, old;
	sigemptyset(&term);
	sigaddset(&term, SIGTERM);
	sigprocmask(SIG_BLOCK, &term, &old);
	pid = fork();
	if (pid == 0) {
		static const int sigs[] = { SIGCHLD, SIGTERM };
		for (int fd = 3; fd < 1024; fd++)
			close(fd);
		if (sig_wake_start(&sup_wake, sigs, 2, SA_RESTART) < 0)
			_exit(9);
		sigprocmask(SIG_SETMASK, &old, NULL);
		char *log = job_meta(wdir, "log");
		struct sup s = { .dir = wdir, .id = "20261127-000000-0000", .mode = &model_mode };
		s.log_fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		int rc = sup_wait_job(&s, other, a->id, ok);
		_exit(rc == 0 ? 0 : rc == SIGTERM ? 2 : s.end && !strcmp(s.end, "cancelled") ? 1 : 3);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
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

#endif
