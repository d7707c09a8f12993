/* The line for GPUs on one box, across accounts: tickets beside the GPU
 * locks, ordered by their ctime (see job_queue.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job_gpu.h"
#include "job_queue.h"
#include "job_proto.h"
#include "agent.h"

#define TICKET_PREFIX "queue-"

struct ticket {
	uid_t uid;
	char name[48];
	struct timespec at;
	char *folder;      /* the lock folder's path */
};

static int ts_cmp(const struct timespec *a, const struct timespec *b)
{
	if (a->tv_sec != b->tv_sec)
		return a->tv_sec < b->tv_sec ? -1 : 1;
	return a->tv_nsec < b->tv_nsec ? -1 : a->tv_nsec > b->tv_nsec;
}

static int ticket_cmp(const void *x, const void *y)
{
	const struct ticket *a = x, *b = y;
	int c = ts_cmp(&a->at, &b->at);

	if (c)
		return c;
	if (a->uid != b->uid)
		return a->uid < b->uid ? -1 : 1;
	return strcmp(a->name, b->name);
}

struct tickets {
	struct ticket *v;
	size_t n;
};

static int collect(const char *path, int fd, uid_t uid, void *arg)
{
	struct tickets *ts = arg;
	int dfd = dup(fd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *e;

	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return 0;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (strncmp(e->d_name, TICKET_PREFIX, strlen(TICKET_PREFIX)) ||
		    strlen(e->d_name) >= sizeof(ts->v[0].name))
			continue;
		if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != uid)
			continue;
		ts->v = xrealloc(ts->v, (ts->n + 1) * sizeof(*ts->v));
		struct ticket *t = &ts->v[ts->n++];
		t->uid = uid;
		snprintf(t->name, sizeof(t->name), "%s", e->d_name);
		t->at = st.st_ctim;
		t->folder = xstrdup(path);
	}
	closedir(d);
	return 0;
}

static void tickets_load(struct tickets *ts)
{
	*ts = (struct tickets){ 0 };
	gpu_lock_each_folder(collect, ts);
	if (ts->n > 1)
		qsort(ts->v, ts->n, sizeof(*ts->v), ticket_cmp);
}

static void tickets_free(struct tickets *ts)
{
	for (size_t i = 0; i < ts->n; i++)
		free(ts->v[i].folder);
	free(ts->v);
	*ts = (struct tickets){ 0 };
}

/* Is ticket t held (its supervisor alive)? Then 1, and what it waits for
 * in want (up to len; may be NULL). */
static int ticket_live(const struct ticket *t, char *want, size_t len)
{
	int dfd = open(t->folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), live;

	if (dfd < 0)
		return 0;
	live = gpu_lock_file_held(dfd, t->name, t->uid, want, len);
	close(dfd);
	/* only a count or indices: anything else is a count of 1 */
	if (live && want && len && (!*want || strspn(want, "0123456789,") != strlen(want)))
		snprintf(want, len, "1");
	return live;
}

int gpu_queue_join(struct gpu_queue *q, const char *job_id, const char *spec, struct gr_err *err)
{
	int dfd = gpu_lock_own_dir(err);
	struct stat st;

	q->fd = -1;
	snprintf(q->name, sizeof(q->name), TICKET_PREFIX "%s", job_id);
	if (dfd < 0)
		return err->code ? err->code : GR_EIO;
	/* One left by this job's earlier supervisor is stale: we are it now. */
	unlinkat(dfd, q->name, 0);
	q->fd = openat(dfd, q->name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (q->fd < 0 || flock(q->fd, LOCK_EX | LOCK_NB) < 0 || fchmod(q->fd, 0644) < 0 ||
	    write_full(q->fd, spec, strlen(spec)) < 0 || fstat(q->fd, &st) < 0) {
		int e = errno;
		if (q->fd >= 0) {
			close(q->fd);
			unlinkat(dfd, q->name, 0);
		}
		q->fd = -1;
		close(dfd);
		return gr_errf(err, GR_EIO, "cannot take a place in the GPU queue: %s", strerror(e));
	}
	close(dfd);
	q->at = st.st_ctim;
	return 0;
}

void gpu_queue_leave(struct gpu_queue *q)
{
	struct gr_err err = { 0 };
	int dfd;

	if (q->fd < 0)
		return;
	dfd = gpu_lock_own_dir(&err);
	if (dfd >= 0) {
		unlinkat(dfd, q->name, 0);
		close(dfd);
	}
	close(q->fd);
	q->fd = -1;
}

/* Parse a spec: a count (*count set, 0 indices) or indices. */
static size_t spec_parse(const char *spec, uint32_t *idx, size_t max, long long *count)
{
	size_t n = 0;

	*count = 0;
	if (!strchr(spec, ',')) {
		if (parse_ll(spec, 0, 1024, count) < 0)
			*count = 1;
		return 0;
	}
	for (const char *p = spec; *p && n < max;) {
		long long v;
		size_t len = strcspn(p, ",");
		char w[16];
		snprintf(w, sizeof(w), "%.*s", (int)(len < 15 ? len : 15), p);
		if (parse_ll(w, 0, 1023, &v) == 0)
			idx[n++] = (uint32_t)v;
		p += len + (p[len] == ',');
	}
	return n;
}

static int shares(const uint32_t *a, size_t na, const uint32_t *b, size_t nb)
{
	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nb; j++)
			if (a[i] == b[j])
				return 1;
	return 0;
}

static char *who_of(const struct ticket *t)
{
	const char *id = t->name + strlen(TICKET_PREFIX);

	if (t->uid == geteuid())
		return xasprintf("job %s", job_id_ok(id) ? id : "?");
	char user[64];
	uid_name(t->uid, user, sizeof(user));
	return xasprintf("job %s (%s)", job_id_ok(id) ? id : "?", user);
}

void gpu_queue_turn(const struct gpu_queue *q, const char *spec, struct gpu_queue_turn *t)
{
	struct tickets ts;
	uint32_t mine[64];
	long long count;
	size_t nmine = spec_parse(spec, mine, 64, &count), me = (size_t)-1;

	*t = (struct gpu_queue_turn){ .go = 1, .place = 1 };
	tickets_load(&ts);
	for (size_t i = 0; i < ts.n; i++)
		if (ts.v[i].uid == geteuid() && !strcmp(ts.v[i].name, q->name))
			me = i;
	if (me == (size_t)-1) {
		/* Our ticket is gone (root cleaned /tmp): nothing to keep
		 * our place by; try as we are. */
		tickets_free(&ts);
		return;
	}
	/* The nearest first: the one in the way to watch is the latest
	 * before us, the one likeliest to go next. */
	for (size_t k = me; k-- > 0;) {
		struct ticket *e = &ts.v[k];
		char want[64];
		uint32_t theirs[64];
		long long tcount;
		if (!ticket_live(e, want, sizeof(want))) {
			if (e->uid == geteuid()) {
				/* ours, and its supervisor is gone: clear it */
				char *p = xasprintf("%s/%s", e->folder, e->name);
				unlink(p);
				free(p);
			}
			continue;
		}
		t->place++;
		size_t nt = spec_parse(want, theirs, 64, &tcount);
		int in_way = nt == 0 || (nmine && shares(mine, nmine, theirs, nt));
		if (in_way && !t->behind) {
			t->go = 0;
			t->behind = who_of(e);
			t->behind_wants = xstrdup(want);
			t->watch = xasprintf("%s/%s", e->folder, e->name);
		} else if (!in_way && !nmine) {
			for (size_t j = 0; j < nt && t->navoid < 64; j++)
				t->avoid[t->navoid++] = theirs[j];
		}
	}
	tickets_free(&ts);
}

void gpu_queue_turn_free(struct gpu_queue_turn *t)
{
	free(t->behind);
	free(t->behind_wants);
	free(t->watch);
	*t = (struct gpu_queue_turn){ 0 };
}

/* ---- waiting ---- */

static int locks_of(const char *path, int fd, uid_t uid, void *arg)
{
	struct strbuf *sb = arg;
	int dfd = dup(fd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *e;
	char id[64];

	(void)path;
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return 0;
	}
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "gpu-", 4) && gpu_lock_file_held(fd, e->d_name, uid, id, sizeof(id)))
			sb_addf(sb, "%u/%s %s;", (unsigned)uid, e->d_name, id);
	closedir(d);
	return 0;
}

char *gpu_queue_locks_seen(void)
{
	struct strbuf sb = STRBUF_INIT;

	gpu_lock_each_folder(locks_of, &sb);
	return sb.buf ? sb_detach(&sb, NULL) : xstrdup("");
}

static int watch_folder(const char *path, int fd, uid_t uid, void *arg)
{
	(void)fd;
	(void)uid;
	inotify_add_watch(*(int *)arg, path, IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM);
	return 0;
}

/* Has what t waits for moved? At the head: the GPU locks differ from
 * seen. Behind someone: that ticket is gone (or nobody holds it). */
static int moved(const struct gpu_queue_turn *t, const char *seen)
{
	int changed = 0;

	if (t->go) {
		char *now = gpu_queue_locks_seen();
		changed = seen && strcmp(now, seen);
		free(now);
	} else if (t->watch) {
		struct ticket e = { 0 };
		const char *slash = strrchr(t->watch, '/');
		struct stat st;
		if (stat(t->watch, &st) < 0)
			return 1;
		e.uid = st.st_uid;
		snprintf(e.name, sizeof(e.name), "%s", slash + 1);
		e.folder = xstrndup(t->watch, (size_t)(slash - t->watch));
		changed = !ticket_live(&e, NULL, 0);
		free(e.folder);
	}
	return changed;
}

void gpu_queue_wait(const struct gpu_queue_turn *t, const char *seen, const char *meta_dir,
		    int wake_fd, int ms)
{
	int in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	char *stopped = meta_dir ? xasprintf("%sstopped", meta_dir) : NULL;

	if (in >= 0) {
		/* The watches first, then a look: what moved before they
		 * were set is not missed, a stop's marker included (made
		 * between the supervisor's look and these watches, it was
		 * seen only after ms: a stop gave up on a job still queued). */
		if (meta_dir)
			inotify_add_watch(in, meta_dir, IN_CREATE | IN_MOVED_TO);
		if (t->go)
			gpu_lock_each_folder(watch_folder, &in); /* any GPU lock let go */
		else if (t->watch && inotify_add_watch(in, t->watch, IN_CLOSE_WRITE | IN_DELETE_SELF |
							      IN_ATTRIB) < 0) {
			close(in);
			free(stopped);
			return; /* that ticket is gone already */
		}
		if (!moved(t, seen) && !(stopped && access(stopped, F_OK) == 0)) {
			struct pollfd pfd[2] = { { wake_fd, POLLIN, 0 }, { in, POLLIN, 0 } };
			poll(pfd, 2, ms);
		}
		close(in);
		free(stopped);
		return;
	}
	/* No inotify: fs.inotify.max_user_instances (128 by default) is per
	 * user, and 200 waiting jobs run out. Look each second, cheaply: one
	 * ticket, or the locks' few files, and the stop's marker. */
	for (int left = ms; left > 0; left -= 1000) {
		struct pollfd pfd = { wake_fd, POLLIN, 0 };
		if (moved(t, seen) || (stopped && access(stopped, F_OK) == 0) ||
		    poll(&pfd, 1, left < 1000 ? left : 1000) > 0)
			break;
	}
	free(stopped);
}

/* ---- the place, for status ---- */

size_t gpu_queue_waiting(void)
{
	struct tickets ts;
	size_t n = 0;

	tickets_load(&ts);
	for (size_t i = 0; i < ts.n; i++)
		n += ticket_live(&ts.v[i], NULL, 0) != 0;
	tickets_free(&ts);
	return n;
}

size_t gpu_queue_place(const char *job_id)
{
	static struct tickets cache;
	static char *live;          /* per ticket: 1 live, 0 not */
	static uint64_t at;
	char name[48];
	size_t place = 0;

	if (!at || now_ms() - at > 500) {
		tickets_free(&cache);
		free(live);
		tickets_load(&cache);
		live = xcalloc(cache.n + 1, 1);
		for (size_t i = 0; i < cache.n; i++)
			live[i] = (char)ticket_live(&cache.v[i], NULL, 0);
		at = now_ms();
	}
	snprintf(name, sizeof(name), TICKET_PREFIX "%s", job_id);
	for (size_t i = 0; i < cache.n; i++) {
		if (live[i])
			place++;
		if (cache.v[i].uid == geteuid() && !strcmp(cache.v[i].name, name))
			return live[i] ? place : 0;
	}
	return 0;
}
