/* Change detection for `gpurun sync --watch` (see sync_notify.h): one
 * inotify watch per folder the sync's scan enters (scan_tree_each, with
 * the same rules: an ignored .venv/ or node_modules/ costs no watch),
 * plus .git/ and .git/info/ for the rules that live there; or, without
 * inotify (PORTABLE=1, macOS, the BSDs, the watch limit reached), a stat
 * scan of the same tree every poll_ms, reduced to one digest: a scan
 * holds no list, whatever the tree's size. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compat.h"
#include "ignore.h"
#include "sync_notify.h"

enum watch_kind { W_TREE = 1, W_GIT, W_GITINFO };

struct slot {
	char *path;   /* relative to the root ("" the root itself); NULL: free */
	int kind;
};

struct sync_notify {
	char *root;
	struct scan_opts so;
	int fd;               /* inotify, or -1: scanning */
	struct slot *w;       /* by watch id */
	size_t cap, nwatches;
	int limit;            /* GPURUN_WATCH_LIMIT: a test's stand-in for the kernel's */
	int full;             /* the limit was hit while placing watches */
	struct ignore *ig;    /* the rules as they were when the watches were placed */
	int rewatch;          /* place the watches again before the next sync */
	int changed;
	int poll_ms;
	uint64_t digest;      /* scanning: the last scan's */
	uint64_t last_scan, next_scan;
	char *notice;
	/* The paths events named since sync_notify_mark (files and links,
	 * as they may be now), for a sync that looks at those only; lost:
	 * something no list of paths can say (a folder made, moved or gone,
	 * rules changed, events dropped, too many paths). */
	struct strvec dirty;
	int lost;
};

#define DIRTY_MAX 20000 /* more paths than this: the walk is as cheap */

/* ---- scanning ---- */

/* 64-bit FNV-1a (fnv1a64), then a mixer (splitmix64's) so the per-entry
 * hashes can be summed: the scan's order is the file system's. A change
 * goes unseen only if two states of the tree collide in 64 bits. */
static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int digest_entry(void *arg, const struct scan_entry *e)
{
	uint64_t *sum = arg, h = FNV1A64_INIT;
	uint64_t v[6] = { (uint64_t)e->type, e->mode, e->size, (uint64_t)e->mtime_ns, e->ino,
			  e->dev };

	h = fnv1a64(h, e->path, strlen(e->path) + 1);
	h = fnv1a64(h, v, sizeof(v));
	if (e->link)
		h = fnv1a64(h, e->link, strlen(e->link) + 1);
	*sum += mix(h);
	return 0;
}

/* The tree's digest now: what the sync would see, by stat alone (sizes,
 * times, modes, inodes, link targets). A failed scan digests its error. */
static uint64_t scan_digest(struct sync_notify *n)
{
	struct gr_err e = { 0 };
	uint64_t sum = 0;

	if (scan_tree_each(n->root, &n->so, digest_entry, &sum, &e) < 0)
		return mix(fnv1a64(0xcbf29ce484222325ULL, e.msg, strlen(e.msg)));
	return sum;
}

/* ---- inotify ---- */

static void drop_watches(struct sync_notify *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
	for (size_t i = 0; i < n->cap; i++) {
		free(n->w[i].path);
		n->w[i].path = NULL;
	}
	n->nwatches = 0;
}

static void to_scanning(struct sync_notify *n)
{
	drop_watches(n);
	n->digest = scan_digest(n);
	n->last_scan = now_ms();
	n->next_scan = n->last_scan + (uint64_t)n->poll_ms;
}

/* The kernel's limit, for the message (0: unknown). */
static long max_user_watches(void)
{
	FILE *f = fopen("/proc/sys/fs/inotify/max_user_watches", "re");
	long v = 0;

	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* Watch rel (kind). 0, or -1 when the limit is reached (n->full). What
 * vanished or cannot be read is skipped: the sync reports it. */
static int add_watch(struct sync_notify *n, const char *rel, int kind)
{
	char *path = *rel ? xasprintf("%s/%s", n->root, rel) : xstrdup(n->root);
	int wd;

	if (n->limit && n->nwatches >= (size_t)n->limit) {
		wd = -1;
		errno = ENOSPC;
	} else {
		wd = compat_watch_add(n->fd, path);
	}
	free(path);
	if (wd < 0) {
		if (errno != ENOSPC)
			return 0;
		n->full = 1;
		return -1;
	}
	if ((size_t)wd >= n->cap) {
		size_t cap = n->cap ? n->cap : 64;
		while (cap <= (size_t)wd)
			cap *= 2;
		n->w = xrealloc(n->w, cap * sizeof(*n->w));
		memset(n->w + n->cap, 0, (cap - n->cap) * sizeof(*n->w));
		n->cap = cap;
	}
	if (!n->w[wd].path) { /* (the same folder again: the same id) */
		n->w[wd].path = xstrdup(rel);
		n->w[wd].kind = kind;
		n->nwatches++;
	}
	return 0;
}

struct place {
	struct sync_notify *n;
	char *last_parent;
};

static int place_entry(void *arg, const struct scan_entry *e)
{
	struct place *p = arg;
	const char *slash;

	if (e->type == SCAN_DIR)
		return add_watch(p->n, e->path, W_TREE);
	/* A file the scan reached inside an ignored folder (a tracked or
	 * included one) has no folder entry of its own: watch its folder. */
	if (!(slash = strrchr(e->path, '/')))
		return 0;
	size_t len = (size_t)(slash - e->path);
	if (p->last_parent && strlen(p->last_parent) == len &&
	    !memcmp(p->last_parent, e->path, len))
		return 0;
	free(p->last_parent);
	p->last_parent = xstrndup(e->path, len);
	return add_watch(p->n, p->last_parent, W_TREE);
}

static int is_dir(const char *root, const char *rel)
{
	char *path = xasprintf("%s/%s", root, rel);
	struct stat st;
	int r = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);

	free(path);
	return r;
}

static void new_rules(struct sync_notify *n)
{
	struct gr_err e = { 0 };

	ignore_free(n->ig);
	n->ig = NULL;
	if (ignore_new(&n->ig, n->root, n->so.extra, n->so.nextra, &e) < 0) {
		n->ig = NULL; /* every event then counts */
		return;
	}
	ignore_set_include_git(n->ig, n->so.include_git);
	ignore_set_include(n->ig, n->so.include, n->so.ninclude);
	ignore_set_persist(n->ig, n->so.persist, n->so.npersist);
}

/* Place every watch afresh (a new inotify instance: no stale ids). */
static void place_watches(struct sync_notify *n)
{
	struct place p = { n, NULL };
	struct gr_err e = { 0 };
	int rc;

	drop_watches(n);
	n->rewatch = 0;
	new_rules(n);
	if ((n->fd = compat_watch_init()) < 0) {
		if (errno != ENOSYS)
			n->notice = xasprintf("cannot use inotify (%s): scanning the tree every "
					      "%d ms instead", strerror(errno), n->poll_ms);
		to_scanning(n);
		return;
	}
	rc = add_watch(n, "", W_TREE);
	if (rc == 0 && !n->so.include_git && is_dir(n->root, ".git")) {
		rc = add_watch(n, ".git", W_GIT);
		if (rc == 0 && is_dir(n->root, ".git/info"))
			rc = add_watch(n, ".git/info", W_GITINFO);
	}
	if (rc == 0)
		rc = scan_tree_each(n->root, &n->so, place_entry, &p, &e);
	free(p.last_parent);
	if (n->full) {
		long max = max_user_watches();
		char lim[64] = "";
		if (n->limit)
			snprintf(lim, sizeof(lim), " (GPURUN_WATCH_LIMIT = %d)", n->limit);
		else if (max > 0)
			snprintf(lim, sizeof(lim), " (fs.inotify.max_user_watches = %ld)", max);
		n->notice = xasprintf("inotify's limit of watched folders is reached%s: scanning "
				      "the tree every %d ms instead; hint: raise the limit (sysctl "
				      "fs.inotify.max_user_watches=524288), or ignore big folders in "
				      ".gpurunignore", lim, n->poll_ms);
		to_scanning(n);
	}
	/* (A failed scan placed what it could: the sync reports the error,
	 * and the next event or sync places the rest.) */
	if (rc < 0 && !n->full)
		n->rewatch = 1;
}

static int is_rules_file(const char *name)
{
	return !strcmp(name, ".gitignore") || !strcmp(name, ".gpurunignore");
}

static void on_event(void *arg, int wd, unsigned fl, const char *name)
{
	struct sync_notify *n = arg;
	struct gr_err e = { 0 };

	if (fl & COMPAT_WATCH_OVERFLOW) {
		n->rewatch = n->changed = n->lost = 1;
		return;
	}
	if (wd < 0 || (size_t)wd >= n->cap || !n->w[wd].path)
		return;
	struct slot *s = &n->w[wd];
	if (fl & COMPAT_WATCH_GONE) {
		n->lost = 1;
		free(s->path);
		s->path = NULL;
		n->nwatches--;
		return;
	}
	if (fl & COMPAT_WATCH_SELF) {
		/* A folder below reports it to its parent too; the root
		 * itself moved or deleted: the next sync says so. */
		n->lost = 1;
		if (!*s->path)
			n->rewatch = n->changed = 1;
		return;
	}
	if (s->kind == W_GIT) { /* which files git tracks; .git/info appearing */
		if (!strcmp(name, "index") || !strcmp(name, "info"))
			n->rewatch = n->changed = n->lost = 1;
		return;
	}
	if (s->kind == W_GITINFO) {
		if (!strcmp(name, "exclude"))
			n->rewatch = n->changed = n->lost = 1;
		return;
	}
	if (is_rules_file(name)) {
		n->rewatch = n->changed = n->lost = 1;
		return;
	}
	char *rel = *s->path ? xasprintf("%s/%s", s->path, name) : xstrdup(name);
	int dir = !!(fl & COMPAT_WATCH_DIR);
	/* Every path the scan may list, ignored ones too (the sync decides
	 * again, as the walk would); a folder's event speaks for what it
	 * holds: only a walk can follow it. */
	if (ignore_builtin(rel, n->so.include_git))
		;
	else if (dir || n->dirty.n >= DIRTY_MAX)
		n->lost = 1;
	else if (!n->lost)
		sv_push(&n->dirty, rel);
	if (ignore_builtin(rel, n->so.include_git)) {
		/* .gpurun/ is ours; a .git/ made (git init) brings rules */
		if (!*s->path && !strcmp(name, ".git") && (fl & COMPAT_WATCH_NEW))
			n->rewatch = n->changed = n->lost = 1;
	} else if (!n->ig || ignore_path(n->ig, rel, dir, NULL, &e) != 1) {
		n->changed = 1;
		/* A folder made or moved: watch it (and what it holds) before
		 * the sync; a moved one's old watches name old paths. */
		if (dir && (fl & (COMPAT_WATCH_NEW | COMPAT_WATCH_MOVED)))
			n->rewatch = 1;
	}
	free(rel);
}

/* ---- the face ---- */

int sync_notify_new(struct sync_notify **out, const char *root, const struct scan_opts *so,
		    int force_scan, int poll_ms, struct gr_err *err)
{
	struct sync_notify *n = xcalloc(1, sizeof(*n));
	const char *lim = getenv("GPURUN_WATCH_LIMIT");

	(void)err;
	n->root = xstrdup(root);
	n->so = *so;
	n->so.ignored = NULL;
	n->fd = -1;
	n->poll_ms = poll_ms;
	n->dirty = (struct strvec)STRVEC_INIT;
	n->lost = 1; /* nothing synced yet */
	if (lim && *lim) {
		char *end;
		long v = strtol(lim, &end, 10);
		if (!*end && v > 0 && v < 1000000000)
			n->limit = (int)v;
	}
	if (force_scan)
		to_scanning(n);
	else
		place_watches(n);
	*out = n;
	return 0;
}

void sync_notify_free(struct sync_notify *n)
{
	if (!n)
		return;
	drop_watches(n);
	free(n->w);
	ignore_free(n->ig);
	free(n->notice);
	sv_clear(&n->dirty);
	free(n->root);
	free(n);
}

int sync_notify_fd(const struct sync_notify *n)
{
	return n->fd;
}

int sync_notify_due_ms(const struct sync_notify *n, int soon_ms)
{
	uint64_t now = now_ms(), at;

	if (n->fd >= 0)
		return -1;
	at = n->next_scan;
	/* settling: the next scan comes soon_ms after the last */
	if (soon_ms > 0 && at > n->last_scan + (uint64_t)soon_ms)
		at = n->last_scan + (uint64_t)soon_ms;
	return at > now ? (int)(at - now) : 0;
}

int sync_notify_check(struct sync_notify *n, int soon_ms)
{
	if (n->fd >= 0) {
		if (compat_watch_read(n->fd, on_event, n) < 0 && errno != EINTR)
			n->rewatch = n->changed = n->lost = 1; /* (not expected: start over) */
	} else if (sync_notify_due_ms(n, soon_ms) == 0) {
		uint64_t d = scan_digest(n);
		if (d != n->digest)
			n->changed = 1;
		n->digest = d;
		n->last_scan = now_ms();
		n->next_scan = n->last_scan + (uint64_t)n->poll_ms;
	}
	int c = n->changed;
	n->changed = 0;
	return c;
}

void sync_notify_prepare(struct sync_notify *n)
{
	if (n->fd >= 0 && n->rewatch)
		place_watches(n);
}

void sync_notify_describe(const struct sync_notify *n, struct strbuf *sb)
{
	if (n->fd >= 0)
		sb_addf(sb, "inotify on %zu folder%s", n->nwatches, n->nwatches == 1 ? "" : "s");
	else if (n->poll_ms % 1000 == 0)
		sb_addf(sb, "a scan of the tree every %d s", n->poll_ms / 1000);
	else
		sb_addf(sb, "a scan of the tree every %d ms", n->poll_ms);
}

char *sync_notify_notice(struct sync_notify *n)
{
	char *s = n->notice;

	n->notice = NULL;
	return s;
}

void sync_notify_mark(struct sync_notify *n)
{
	sv_clear(&n->dirty);
	n->lost = n->fd < 0 || n->rewatch;
}

const struct strvec *sync_notify_dirty(const struct sync_notify *n)
{
	return n->fd < 0 || n->lost || n->rewatch ? NULL : &n->dirty;
}
