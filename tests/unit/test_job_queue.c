/* A model-based randomized test of the line for GPUs (remote/job/
 * job_queue.c with job_gpu.c's locks), as supervisors use it, on a box
 * of 3 GPUs (a fake nvidia-smi) with two accounts: this process, and, as
 * root, a child that has become another user and runs the same
 * operations for its jobs, sent over a pipe. A seeded generator joins
 * jobs (a count of GPUs or a list of indices), steps waiting ones (their
 * turn, then gpu_acquire), lets holders finish, kills waiting and holding
 * supervisors (their fds closed, a ticket left behind), stops waiters, and
 * races one job of each account at the same moment. After every step:
 *  - no GPU is held by two jobs, and each GPU's lock names the job the
 *    model says holds it (or none);
 *  - first come, first served: a job got GPUs only when no earlier live
 *    waiting job stood in its way (a count before it; a list sharing one
 *    of its indices) and, a count, took none of the indices an earlier
 *    list waits for; its place was 1 + the live tickets before it;
 *  - nothing is lost: at the end every holder lets go and the waiters
 *    are stepped until none waits: each one gets its GPUs, in turn.
 * On a failure the seed is printed and the operation list shrunk.
 * GPURUN_QUEUE_SEEDS=N runs N seeds (make soak); GPURUN_QUEUE_SEED=S
 * replays one. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#include "job_gpu.h"
#include "job_queue.h"
#include "job_store.h"

#define NGPUS 3
#define MAXJOBS 48

enum op_kind { OP_JOIN, OP_STEP, OP_FINISH, OP_CRASH, OP_STOP, OP_RACE, OP_COUNT };
static const char *const op_names[] = { "join", "step", "finish", "crash", "stop", "race" };

struct op {
	enum op_kind kind;
	uint32_t a, b;
};

/* What one account's process keeps of a job: its ticket and locks. */
struct held {
	struct gpu_queue q;
	int fds[NGPUS];
	size_t nfds;
};

/* A request to an account's process, and its answer. */
struct req {
	int kind;               /* OP_JOIN, OP_STEP, OP_FINISH, OP_CRASH, OP_STOP; -1: quit */
	int slot;
	char id[GR_JOB_ID_LEN + 1];
	char spec[32];
};
struct ans {
	int rc;                 /* join: 0/-1; step: 0 got, 1 waits, -1 error */
	int go;                 /* step: its turn */
	uint32_t place;
	long long at_s, at_ns;  /* join: the ticket's place */
	char gpus[64];          /* step: assigned */
	uint32_t avoid[8];
	uint32_t navoid;
};

static struct held slots[MAXJOBS]; /* in each account's process */

static void do_req(const struct req *q, struct ans *a)
{
	struct held *h = &slots[q->slot];
	struct gr_err err = { 0 };

	memset(a, 0, sizeof(*a));
	switch (q->kind) {
	case OP_JOIN:
		memset(h, 0, sizeof(*h));
		a->rc = gpu_queue_join(&h->q, q->id, q->spec, &err) < 0 ? -1 : 0;
		a->at_s = h->q.at.tv_sec;
		a->at_ns = h->q.at.tv_nsec;
		break;
	case OP_STEP: {
		struct gpu_queue_turn t;
		gpu_queue_turn(&h->q, q->spec, &t);
		a->go = t.go;
		a->place = (uint32_t)t.place;
		a->navoid = (uint32_t)(t.navoid < 8 ? t.navoid : 8);
		memcpy(a->avoid, t.avoid, a->navoid * sizeof(uint32_t));
		a->rc = 1;
		if (t.go) {
			char *gpus = NULL, *why = NULL;
			int restrict_ = 0, *fds = NULL;
			size_t nfds = 0;
			int rc = gpu_acquire(q->spec, q->id, t.avoid, t.navoid, &gpus, &restrict_, &fds,
					     &nfds, &why, &err);
			a->rc = rc < 0 ? -1 : rc;
			if (rc == 0) {
				for (size_t i = 0; i < nfds && i < NGPUS; i++)
					h->fds[i] = fds[i];
				h->nfds = nfds;
				snprintf(a->gpus, sizeof(a->gpus), "%s", gpus);
				gpu_queue_leave(&h->q);
			}
			free(gpus);
			free(why);
			free(fds);
		}
		gpu_queue_turn_free(&t);
		break;
	}
	case OP_FINISH:
		for (size_t i = 0; i < h->nfds; i++)
			close(h->fds[i]);
		h->nfds = 0;
		break;
	case OP_CRASH:
		/* kill -9: every fd closes, nothing is unlinked */
		if (h->q.fd >= 0)
			close(h->q.fd);
		h->q.fd = -1;
		for (size_t i = 0; i < h->nfds; i++)
			close(h->fds[i]);
		h->nfds = 0;
		break;
	case OP_STOP:
		gpu_queue_leave(&h->q);
		break;
	}
}

/* The other account: a child that became uid 65534 and answers requests. */
struct acct {
	pid_t pid;          /* 0: this process */
	int to, from;
	uid_t uid;
};

static int acct_start(struct acct *b)
{
	int down[2], up[2];

	if (pipe(down) < 0 || pipe(up) < 0)
		return -1;
	b->pid = fork();
	if (b->pid < 0)
		return -1;
	if (b->pid == 0) {
		close(down[1]);
		close(up[0]);
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(1);
		for (struct req q; read(down[0], &q, sizeof(q)) == (ssize_t)sizeof(q) && q.kind >= 0;) {
			struct ans a;
			do_req(&q, &a);
			if (write(up[1], &a, sizeof(a)) != (ssize_t)sizeof(a))
				_exit(1);
		}
		_exit(0);
	}
	close(down[0]);
	close(up[1]);
	b->to = down[1];
	b->from = up[0];
	b->uid = 65534;
	return 0;
}

static void acct_stop(struct acct *b)
{
	struct req q = { .kind = -1 };

	if (!b->pid)
		return;
	if (write(b->to, &q, sizeof(q)) < 0) {
		/* it is gone already */
	}
	close(b->to);
	close(b->from);
	waitpid(b->pid, NULL, 0);
	b->pid = 0;
}

static int acct_send(struct acct *b, const struct req *q)
{
	return write(b->to, q, sizeof(*q)) == (ssize_t)sizeof(*q) ? 0 : -1;
}

static int acct_recv(struct acct *b, struct ans *a)
{
	return read(b->from, a, sizeof(*a)) == (ssize_t)sizeof(*a) ? 0 : -1;
}

/* ---- the model ---- */

enum mstate { M_WAIT, M_HOLD, M_GONE };

struct mjob {
	int acct;               /* 0 this process, 1 the other account */
	char id[GR_JOB_ID_LEN + 1];
	char spec[32];
	uint32_t idx[NGPUS];    /* a list's indices */
	size_t nidx;            /* 0: a count */
	long long count;
	long long at_s, at_ns;
	enum mstate state;
	int gpus[NGPUS];        /* held */
};

struct world {
	char base[256], locks[300];
	struct acct other;
	int two;                /* the other account runs */
	struct mjob jobs[MAXJOBS];
	size_t n;
	int holder[NGPUS];      /* job index, or -1 */
	char why[512];
	uint64_t got, waited, crashed, raced;
};

static const char *two_skip;

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

static uid_t uid_of(const struct world *w, const struct mjob *j)
{
	return j->acct ? w->other.uid : geteuid();
}

/* Ticket order, as job_queue.c's: (ctime, uid, name). */
static int before(const struct world *w, const struct mjob *x, const struct mjob *y)
{
	if (x->at_s != y->at_s)
		return x->at_s < y->at_s;
	if (x->at_ns != y->at_ns)
		return x->at_ns < y->at_ns;
	if (uid_of(w, x) != uid_of(w, y))
		return uid_of(w, x) < uid_of(w, y);
	return strcmp(x->id, y->id) < 0;
}

static int shares(const struct mjob *a, const uint32_t *idx, size_t n)
{
	for (size_t i = 0; i < a->nidx; i++)
		for (size_t k = 0; k < n; k++)
			if (a->idx[i] == idx[k])
				return 1;
	return 0;
}

static int world_init(struct world *w)
{
	char p[400];
	FILE *f;

	memset(w, 0, sizeof(*w));
	for (int i = 0; i < NGPUS; i++)
		w->holder[i] = -1;
	snprintf(w->base, sizeof(w->base), "%s/gr-queuemodel.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(w->base) || chmod(w->base, 0755) < 0)
		return -1;
	snprintf(w->locks, sizeof(w->locks), "%s/locks", w->base);
	if (mkdir(w->locks, 0755) < 0 || chmod(w->locks, 01777) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/nvidia-smi", w->base);
	if (!(f = fopen(p, "w")))
		return -1;
	fprintf(f, "#!/bin/sh\ncase \"$1\" in --query-gpu=*)\n");
	for (int i = 0; i < NGPUS; i++)
		fprintf(f, "echo '%d, GPU-model-%d, Model GPU, 0, 1, 81559'\n", i, i);
	fprintf(f, ";; esac\nexit 0\n");
	fclose(f);
	chmod(p, 0755);
	setenv("GPURUN_NVIDIA_SMI", p, 1);
	setenv("GPURUN_LOCK_DIR", w->locks, 1);
	if (!two_skip && acct_start(&w->other) == 0)
		w->two = 1;
	return 0;
}

static void world_free(struct world *w)
{
	struct req q = { .kind = OP_CRASH };

	for (size_t i = 0; i < w->n; i++) {
		q.slot = (int)i;
		if (!w->jobs[i].acct)
			do_req(&q, &(struct ans){ 0 });
	}
	acct_stop(&w->other);
	job_rm_tree(w->base);
}

/* Send q for job j to its account; the answer in a. */
static int call(struct world *w, const struct mjob *j, struct req *q, struct ans *a)
{
	if (!j->acct) {
		do_req(q, a);
		return 0;
	}
	if (acct_send(&w->other, q) < 0 || acct_recv(&w->other, a) < 0)
		return fail(w, "the other account's process is gone");
	return 0;
}

static struct req req_of(const struct world *w, const struct mjob *j, int kind)
{
	struct req q = { .kind = kind, .slot = (int)(j - w->jobs) };

	snprintf(q.id, sizeof(q.id), "%s", j->id);
	snprintf(q.spec, sizeof(q.spec), "%s", j->spec);
	return q;
}

/* The invariants after a step: who holds each GPU, on disk too. */
static int check_locks(struct world *w)
{
	for (uint32_t g = 0; g < NGPUS; g++) {
		char *who = gpu_lock_holder(g);
		int h = w->holder[g];
		const char *id = who ? (strchr(who, ':') ? strchr(who, ':') + 1 : who) : NULL;
		if (h < 0 && who) {
			fail(w, "GPU %u is locked by %s; the model says nobody holds it", g, who);
		} else if (h >= 0 && (!id || strcmp(id, w->jobs[h].id))) {
			fail(w, "GPU %u is held by job %s in the model, but its lock says %s", g,
			     w->jobs[h].id, who ? who : "nobody");
		}
		free(who);
		if (w->why[0])
			return -1;
	}
	return 0;
}

static int apply_got(struct world *w, struct mjob *j, const struct ans *a);

/* A step's answer against the model: place, FIFO, no GPU twice. */
static int apply_step(struct world *w, struct mjob *j, const struct ans *a)
{
	size_t earlier = 0;
	int blocked = 0;

	if (a->rc < 0)
		return fail(w, "job %s: gpu_acquire failed", j->id);
	for (size_t i = 0; i < w->n; i++) {
		struct mjob *e = &w->jobs[i];
		if (e == j || e->state != M_WAIT || !before(w, e, j))
			continue;
		earlier++;
		if (!e->nidx || (j->nidx && shares(e, j->idx, j->nidx)))
			blocked = 1;
	}
	if (a->place != earlier + 1)
		return fail(w, "job %s: place %u, the model says %zu", j->id, a->place, earlier + 1);
	if (a->go == blocked)
		return fail(w, "job %s: its turn is %d, the model says %d", j->id, a->go, !blocked);
	return a->rc == 1 ? 0 : apply_got(w, j, a);
}

/* It got GPUs: which, and are they free, and not an earlier list's? */
static int apply_got(struct world *w, struct mjob *j, const struct ans *a)
{
	size_t n = 0;
	for (const char *p = a->gpus; *p;) {
		long long g;
		char b[8];
		size_t len = strcspn(p, ",");
		snprintf(b, sizeof(b), "%.*s", (int)(len < 7 ? len : 7), p);
		if (parse_ll(b, 0, NGPUS - 1, &g) < 0)
			return fail(w, "job %s: assigned '%s'", j->id, a->gpus);
		if (w->holder[g] >= 0)
			return fail(w, "job %s got GPU %lld, which job %s holds", j->id, g,
				    w->jobs[w->holder[g]].id);
		for (size_t i = 0; i < w->n; i++) {
			struct mjob *e = &w->jobs[i];
			uint32_t gu = (uint32_t)g;
			if (e != j && e->state == M_WAIT && before(w, e, j) && e->nidx && shares(e, &gu, 1))
				return fail(w, "job %s took GPU %lld, which earlier job %s waits for", j->id,
					    g, e->id);
		}
		j->gpus[n++] = (int)g;
		p += len + (p[len] == ',');
	}
	if ((j->nidx && n != j->nidx) || (!j->nidx && (long long)n != j->count))
		return fail(w, "job %s asked for %s and got '%s'", j->id, j->spec, a->gpus);
	for (size_t i = 0; i < n; i++)
		w->holder[j->gpus[i]] = (int)(j - w->jobs);
	j->state = M_HOLD;
	w->got++;
	return 0;
}

static void let_go(struct world *w, struct mjob *j)
{
	for (int g = 0; g < NGPUS; g++)
		if (w->holder[g] == (int)(j - w->jobs))
			w->holder[g] = -1;
	j->state = M_GONE;
}

static struct mjob *pick(struct world *w, uint32_t k, enum mstate st, int acct)
{
	size_t n = 0;

	for (size_t i = 0; i < w->n; i++)
		n += w->jobs[i].state == st && (acct < 0 || w->jobs[i].acct == acct);
	if (!n)
		return NULL;
	k %= (uint32_t)n;
	for (size_t i = 0; i < w->n; i++)
		if (w->jobs[i].state == st && (acct < 0 || w->jobs[i].acct == acct) && k-- == 0)
			return &w->jobs[i];
	return NULL;
}

/* j's answer in a race: as the model is, or (other: it got its GPUs at
 * the same moment) as it is once other no longer waits. */
static int race_check(struct world *w, struct mjob *j, const struct ans *a, struct mjob *other)
{
	char why[sizeof(w->why)];

	if (apply_step(w, j, a) == 0)
		return 0;
	if (!other)
		return -1;
	snprintf(why, sizeof(why), "%s", w->why);
	w->why[0] = '\0';
	other->state = M_HOLD;
	int rc = apply_step(w, j, a);
	other->state = M_WAIT;
	if (rc < 0) {
		char after[sizeof(w->why)];
		snprintf(after, sizeof(after), "%s", w->why);
		snprintf(w->why, sizeof(w->why), "%.200s (and with the other job's GPUs taken: %.200s)",
			 why, after);
	}
	return rc;
}

static int run_op(struct world *w, const struct op *o)
{
	struct mjob *j;
	struct req q;
	struct ans a;

	switch (o->kind) {
	case OP_JOIN: {
		if (w->n == MAXJOBS)
			return 0;
		j = &w->jobs[w->n];
		memset(j, 0, sizeof(*j));
		j->acct = w->two ? (int)(o->a & 1) : 0;
		snprintf(j->id, sizeof(j->id), "20261127-000000-%04zx", w->n);
		/* counts 1-3 mostly, sometimes a list of two indices ("1"
		 * alone would be a count: a list has at least two) */
		if (o->b % 4 == 3) {
			j->nidx = 2;
			j->idx[0] = (o->b / 8) % NGPUS;
			j->idx[1] = (j->idx[0] + 1 + (o->b / 32) % (NGPUS - 1)) % NGPUS;
			snprintf(j->spec, sizeof(j->spec), "%u,%u", j->idx[0], j->idx[1]);
		} else {
			j->count = 1 + (long long)((o->b / 4) % NGPUS);
			snprintf(j->spec, sizeof(j->spec), "%lld", j->count);
		}
		w->n++;
		q = req_of(w, j, OP_JOIN);
		if (call(w, j, &q, &a) < 0)
			return -1;
		if (a.rc < 0)
			return fail(w, "job %s could not join the line", j->id);
		j->at_s = a.at_s;
		j->at_ns = a.at_ns;
		j->state = M_WAIT;
		w->waited++;
		return 0;
	}
	case OP_STEP:
		if (!(j = pick(w, o->a, M_WAIT, -1)))
			return 0;
		q = req_of(w, j, OP_STEP);
		if (call(w, j, &q, &a) < 0)
			return -1;
		return apply_step(w, j, &a);
	case OP_FINISH:
		if (!(j = pick(w, o->a, M_HOLD, -1)))
			return 0;
		q = req_of(w, j, OP_FINISH);
		if (call(w, j, &q, &a) < 0)
			return -1;
		let_go(w, j);
		return 0;
	case OP_CRASH:
		if (!(j = pick(w, o->a, o->b & 1 ? M_HOLD : M_WAIT, -1)))
			return 0;
		q = req_of(w, j, OP_CRASH);
		if (call(w, j, &q, &a) < 0)
			return -1;
		let_go(w, j);
		w->crashed++;
		return 0;
	case OP_STOP:
		if (!(j = pick(w, o->a, M_WAIT, -1)))
			return 0;
		q = req_of(w, j, OP_STOP);
		if (call(w, j, &q, &a) < 0)
			return -1;
		let_go(w, j);
		return 0;
	case OP_RACE: {
		/* One waiting job of each account steps at the same moment:
		 * the other's request goes out first, ours runs meanwhile. */
		struct mjob *x = w->two ? pick(w, o->a, M_WAIT, 1) : NULL, *y = pick(w, o->b, M_WAIT, 0);
		struct ans ax, ay;
		struct req qx, qy;
		if (!x || !y)
			return 0;
		qx = req_of(w, x, OP_STEP);
		qy = req_of(w, y, OP_STEP);
		if (acct_send(&w->other, &qx) < 0)
			return fail(w, "the other account's process is gone");
		do_req(&qy, &ay);
		if (acct_recv(&w->other, &ax) < 0)
			return fail(w, "the other account's process is gone");
		w->raced++;
		/* Each saw the line as it was, or, where the other got its
		 * GPUs meanwhile, as it was after that: check its place and
		 * turn against either model. Then no GPU twice. */
		int yok = ay.rc == 0, xok = ax.rc == 0;
		struct ans ax1 = ax, ay1 = ay;
		ax1.rc = ay1.rc = 1;
		if (race_check(w, x, &ax1, yok ? y : NULL) < 0 || race_check(w, y, &ay1, xok ? x : NULL) < 0)
			return -1;
		if (xok && apply_got(w, x, &ax) < 0)
			return -1;
		if (yok && apply_got(w, y, &ay) < 0)
			return -1;
		return 0;
	}
	default:
		return 0;
	}
}

/* The end: every holder lets go; waiters step (in a rotating order)
 * until none waits, each holder letting go as soon as it got its GPUs. */
static int drain(struct world *w)
{
	struct req q;
	struct ans a;

	for (size_t i = 0; i < w->n; i++)
		if (w->jobs[i].state == M_HOLD) {
			q = req_of(w, &w->jobs[i], OP_FINISH);
			if (call(w, &w->jobs[i], &q, &a) < 0)
				return -1;
			let_go(w, &w->jobs[i]);
		}
	for (size_t round = 0; round < 4 * MAXJOBS; round++) {
		int waiting = 0;
		for (size_t k = 0; k < w->n; k++) {
			struct mjob *j = &w->jobs[(k + round) % w->n];
			if (j->state != M_WAIT)
				continue;
			waiting = 1;
			q = req_of(w, j, OP_STEP);
			if (call(w, j, &q, &a) < 0 || apply_step(w, j, &a) < 0 || check_locks(w) < 0)
				return -1;
			if (j->state == M_HOLD) {
				q = req_of(w, j, OP_FINISH);
				if (call(w, j, &q, &a) < 0)
					return -1;
				let_go(w, j);
			}
		}
		if (!waiting)
			return 0;
	}
	for (size_t i = 0; i < w->n; i++)
		if (w->jobs[i].state == M_WAIT)
			return fail(w, "job %s (%s) still waits with every GPU free: lost", w->jobs[i].id,
				    w->jobs[i].spec);
	return 0;
}

static void gen_ops(uint64_t seed, struct op *ops, size_t n)
{
	uint64_t s = seed * 2654435761u + 1;

	for (size_t i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		static const enum op_kind weights[] = { OP_JOIN, OP_JOIN, OP_JOIN, OP_STEP, OP_STEP,
							OP_STEP, OP_STEP, OP_FINISH, OP_FINISH,
							OP_CRASH, OP_STOP, OP_RACE, OP_RACE };
		ops[i].kind = weights[s % GR_ARRAY_SIZE(weights)];
		ops[i].a = (uint32_t)(s >> 16);
		ops[i].b = (uint32_t)(s >> 40);
	}
}

/* Run ops; 0 if every invariant held. why gets the first broken one. */
static int run_ops(const struct op *ops, size_t n, char *why, size_t len, struct world *stats)
{
	struct world *w = calloc(1, sizeof(*w));
	int rc = 0;

	if (!w || world_init(w) < 0) {
		snprintf(why, len, "cannot set up the world");
		free(w);
		return -1;
	}
	for (size_t i = 0; i < n && rc == 0; i++)
		if (run_op(w, &ops[i]) < 0 || check_locks(w) < 0) {
			rc = -1;
			snprintf(why, len, "after op %zu (%s): %.400s", i, op_names[ops[i].kind], w->why);
		}
	if (rc == 0 && (drain(w) < 0 || check_locks(w) < 0)) {
		rc = -1;
		snprintf(why, len, "at the end: %.400s", w->why);
	}
	if (stats) {
		stats->got += w->got;
		stats->waited += w->waited;
		stats->crashed += w->crashed;
		stats->raced += w->raced;
		stats->two |= w->two;
	}
	world_free(w);
	free(w);
	return rc;
}

/* Drop operations while it still fails; print the rest. */
static void shrink(struct op *ops, size_t n)
{
	char why[512];

	for (size_t i = 0; i < n;) {
		struct op *try = malloc(n * sizeof(*try));
		memcpy(try, ops, i * sizeof(*try));
		memcpy(try + i, ops + i + 1, (n - i - 1) * sizeof(*try));
		if (run_ops(try, n - 1, why, sizeof(why), NULL) < 0) {
			memcpy(ops, try, (n - 1) * sizeof(*try));
			n--;
		} else {
			i++;
		}
		free(try);
	}
	run_ops(ops, n, why, sizeof(why), NULL);
	fprintf(stderr, "  shrunk to %zu operations (%s):\n", n, why);
	for (size_t i = 0; i < n; i++)
		fprintf(stderr, "    %s %u %u\n", op_names[ops[i].kind], ops[i].a, ops[i].b);
}

static void test_model(void)
{
	const char *one = getenv("GPURUN_QUEUE_SEED"), *many = getenv("GPURUN_QUEUE_SEEDS");
	long long first = 1, count = 8;
	struct world stats = { 0 };
	enum { NOPS = 70 };

	if (one && parse_ll(one, 0, 1ll << 40, &first) == 0)
		count = 1;
	else if (many)
		parse_ll(many, 1, 100000, &count);
	for (long long seed = first; seed < first + count; seed++) {
		struct op ops[NOPS];
		char why[512];
		gen_ops((uint64_t)seed, ops, NOPS);
		if (run_ops(ops, NOPS, why, sizeof(why), &stats) < 0) {
			fprintf(stderr, "  seed %lld: %s\n", seed, why);
			shrink(ops, NOPS);
			CHECK(!"the line for GPUs broke an invariant (seed above)");
			return;
		}
	}
	printf("# %lld seeds: %llu jobs waited, %llu got their GPUs, %llu supervisors killed, "
	       "%llu races across two accounts%s\n", count, (unsigned long long)stats.waited,
	       (unsigned long long)stats.got, (unsigned long long)stats.crashed,
	       (unsigned long long)stats.raced, stats.two ? "" : " (one account only)");
	CHECK(stats.got > 0);
	if (!stats.two)
		SKIP(two_skip ? two_skip : "the other account's process could not start");
	CHECK(stats.raced > 0);
}

/* The place words: 1st, 2nd, 3rd, 4th, 11th, 12th, 13th, 21st, 22nd, 111th. */
static void test_ordinal(void)
{
	char b[32];

	CHECK_STR(fmt_ordinal(1, b, sizeof(b)), "1st");
	CHECK_STR(fmt_ordinal(2, b, sizeof(b)), "2nd");
	CHECK_STR(fmt_ordinal(3, b, sizeof(b)), "3rd");
	CHECK_STR(fmt_ordinal(4, b, sizeof(b)), "4th");
	CHECK_STR(fmt_ordinal(11, b, sizeof(b)), "11th");
	CHECK_STR(fmt_ordinal(12, b, sizeof(b)), "12th");
	CHECK_STR(fmt_ordinal(13, b, sizeof(b)), "13th");
	CHECK_STR(fmt_ordinal(21, b, sizeof(b)), "21st");
	CHECK_STR(fmt_ordinal(22, b, sizeof(b)), "22nd");
	CHECK_STR(fmt_ordinal(111, b, sizeof(b)), "111th");
}

/* A stop whose marker was made between the supervisor's look and the
 * wait's watches is seen at once, not after the wait's bound (a stop
 * gave up after 5 s on a job still queued: t0400, seen once). Without
 * the marker the wait does wait, so the bound is what is measured. */
static void test_stop_before_watch(void)
{
	char base[] = "/tmp/gpurun-queue-stop.XXXXXX";
	struct gpu_queue_turn t = { .go = 1, .place = 1 };

	if (!mkdtemp(base)) {
		CHECK(!"mkdtemp");
		return;
	}
	char *locks = xasprintf("%s/locks", base), *meta = xasprintf("%s/meta/", base);
	char *marker = xasprintf("%sstopped", meta), *old = getenv("GPURUN_LOCK_DIR");
	old = old ? xstrdup(old) : NULL;
	CHECK(mkdir(locks, 0700) == 0 && mkdir(meta, 0700) == 0);
	setenv("GPURUN_LOCK_DIR", locks, 1);
	char *seen = gpu_queue_locks_seen();
	uint64_t t0 = now_ms();
	gpu_queue_wait(&t, seen, meta, -1, 300);
	CHECK(now_ms() - t0 >= 250); /* nothing moved: the whole wait */
	int fd = open(marker, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	CHECK(fd >= 0);
	if (fd >= 0)
		close(fd);
	t0 = now_ms();
	gpu_queue_wait(&t, seen, meta, -1, 5000);
	CHECK(now_ms() - t0 < 1000);
	free(seen);
	unlink(marker);
	rmdir(meta);
	rmdir(locks);
	rmdir(base);
	if (old)
		setenv("GPURUN_LOCK_DIR", old, 1);
	else
		unsetenv("GPURUN_LOCK_DIR");
	free(old);
	free(marker);
	free(meta);
	free(locks);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	if (geteuid() != 0)
		two_skip = "not root: no second account to race";
	else if (!getpwuid(65534))
		two_skip = "no uid 65534 (nobody) for the second account";
	RUN(test_ordinal);
	RUN(test_stop_before_watch);
	RUN(test_model);
	return T_DONE();
}
