/* The project walk: one openat/fdopendir per folder, fstatat with
 * AT_SYMLINK_NOFOLLOW per kept entry (d_type decides the rest), each
 * folder's ignore files loaded on the way down, ignored folders never
 * entered (git cannot re-include a file below an excluded folder) except
 * to reach files git tracks. Output is sorted by plain path bytes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compat.h"
#include "ignore_int.h"
#include "scan.h"

enum scan_mode {
	SCAN_RULES,        /* the ignore rules decide */
	SCAN_TRACKED_ONLY, /* inside an ignored folder: only what git tracks or
			      [sync] include names */
	SCAN_RAW,          /* inside .git with include_git: everything */
	SCAN_INCLUDED,     /* inside a folder [sync] include names: all but .git
			      and persistent paths */
};

struct scan_ctx {
	struct ignore *ig;
	const struct scan_opts *o;
	int (*each)(void *arg, const struct scan_entry *e);
	void *arg;
	/* Folders entered only to look for tracked or included paths: said
	 * once something below them is kept, forgotten if nothing is. */
	struct scan_entry *pend;
	size_t npend, apend;
	/* While such a folder (the outermost) is scanned, what it keeps is
	 * held here, to be said at its place (scan_entry_one). */
	struct scan_held *hold;
	struct strbuf path;   /* the current path, relative to the root */
	struct gr_err *err;
};

static int scan_is_git(const char *name)
{
	return !strcmp(name, ".git");
}

/* Entries said later (copies). */
struct scan_held {
	struct scan_entry *v;
	size_t n, alloc;
};

static void held_add(struct scan_held *h, const struct scan_entry *e)
{
	if (h->n == h->alloc) {
		h->alloc = h->alloc ? 2 * h->alloc : 16;
		h->v = xrealloc(h->v, h->alloc * sizeof(*h->v));
	}
	h->v[h->n] = *e;
	h->v[h->n].path = xstrdup(e->path);
	h->v[h->n++].link = e->link ? xstrdup(e->link) : NULL;
}

static void held_free(struct scan_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].path);
		free(v[i].link);
	}
}

static int scan_say(struct scan_ctx *c, const struct scan_entry *e)
{
	if (!c->hold)
		return c->each(c->arg, e);
	held_add(c->hold, e);
	return 0;
}

static int scan_emit(struct scan_ctx *c, const struct scan_entry *e)
{
	int ret = 0;

	for (size_t i = 0; i < c->npend; i++) {
		if (!ret)
			ret = scan_say(c, &c->pend[i]);
		free(c->pend[i].path);
	}
	c->npend = 0;
	return ret ? ret : scan_say(c, e);
}

/* The entry c->path names: to each() now, or (defer: a folder that may
 * hold nothing kept) once something below it is kept. */
static int scan_add(struct scan_ctx *c, int dfd, const char *name, const struct stat *st,
		    int defer)
{
	struct scan_entry e = { 0 };
	int ret;

	e.type = S_ISDIR(st->st_mode) ? SCAN_DIR : S_ISLNK(st->st_mode) ? SCAN_SYMLINK : SCAN_FILE;
	e.mode = st->st_mode & 0777;
	e.size = e.type == SCAN_DIR ? 0 : (uint64_t)st->st_size;
	e.mtime_ns = (int64_t)st->st_mtime * 1000000000 + GR_ST_MTIME_NSEC(st);
	e.ino = st->st_ino;
	e.dev = st->st_dev;
	if (e.type == SCAN_SYMLINK) {
		size_t cap = st->st_size > 0 ? (size_t)st->st_size + 1 : 256;

		for (;;) {
			char *buf = xmalloc(cap);
			ssize_t r = readlinkat(dfd, name, buf, cap);

			if (r < 0) {
				int e2 = errno;

				free(buf);
				return gr_errf(c->err, GR_EIO, "cannot read link '%s': %s",
					       c->path.buf, strerror(e2));
			}
			if ((size_t)r < cap) {
				buf[r] = '\0';
				e.link = buf;
				break;
			}
			free(buf);
			cap *= 2;
		}
		e.size = strlen(e.link);
	}
	if (defer) {
		if (c->npend == c->apend) {
			c->apend = c->apend ? c->apend * 2 : 8;
			c->pend = xrealloc(c->pend, c->apend * sizeof(*c->pend));
		}
		e.path = xstrndup(c->path.buf, c->path.len);
		c->pend[c->npend++] = e;
		return 0;
	}
	e.path = c->path.buf;
	ret = scan_emit(c, &e);
	free(e.link);
	return ret;
}

static int scan_dir(struct scan_ctx *c, int dfd, enum scan_mode mode);
static int scan_cmp(const void *a, const void *b);

/* Files and bytes below folder dfd (never through a link), for
 * scan_ignored's walk_dirs; at most *budget entries are looked at. */
static void count_below(int dfd, struct scan_ignored *ig, uint64_t *budget)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return;
	}
	while (*budget && (de = readdir(d))) {
		struct stat st;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		(*budget)--;
		if (S_ISREG(st.st_mode)) {
			ig->files++;
			ig->bytes += (uint64_t)st.st_size;
		} else if (S_ISDIR(st.st_mode)) {
			int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (fd >= 0)
				count_below(fd, ig, budget);
		}
	}
	closedir(d);
}

/* An entry the rules ignore (c->path names it): count it. */
static void scan_ignored_one(struct scan_ctx *c, int dfd, const char *name, int is_dir)
{
	struct scan_ignored *ig = c->o->ignored;
	struct stat st;

	if (!ig || ig_persist_match(c->ig, c->path.buf, c->path.len, NULL))
		return;
	if (!is_dir) {
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
			ig->files++;
			ig->bytes += (uint64_t)st.st_size;
		}
		return;
	}
	ig->dirs++;
	if (ig->names.n < SCAN_IGNORED_NAMES)
		sv_pushf(&ig->names, "%s/", c->path.buf);
	if (ig->walk_dirs) {
		uint64_t budget = 1000000;
		int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			count_below(fd, ig, &budget);
	}
}

/* Enter folder name (c->path already names it) and scan it. */
static int scan_enter(struct scan_ctx *c, int dfd, const char *name, enum scan_mode mode)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0) {
		int ret;

		/* Gone or replaced since readdir: nothing to enter. */
		if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
			return 0;
		ret = gr_errf(c->err, GR_EIO, "cannot open folder '%s': %s", c->path.buf,
			      strerror(errno));
		gr_hintf(c->err, "make it readable, or add '/%s/' to .gpurunignore", c->path.buf);
		return ret;
	}
	return scan_dir(c, fd, mode);
}

/* Folders of one folder to enter once its entries up to "name/" are
 * out (path order: "a", "a.txt", then what "a/" holds), ordered by that
 * key. */
struct later {
	char *name;
	enum scan_mode mode;
	struct scan_entry *held; /* what to say instead of entering (all of it */
	size_t nheld;            /* found already, in path order) */
};
struct later_q {
	struct later *v;
	size_t head, n, alloc;
};

/* Does "a/" sort before b (neither the other's name)? */
static int slash_before(const char *a, const char *b)
{
	size_t n = strlen(a);
	int c = strncmp(a, b, n);

	return c ? c < 0 : '/' < (unsigned char)b[n];
}

static struct later *later_push(struct later_q *q, const char *name, enum scan_mode mode)
{
	size_t i;

	if (q->n == q->alloc) {
		q->alloc = q->alloc ? 2 * q->alloc : 16;
		q->v = xrealloc(q->v, q->alloc * sizeof(*q->v));
	}
	/* Names come in order, and so do their keys but where a name is a
	 * prefix of the next ("a", "a-b": "a-b/" < "a/"). */
	for (i = q->n; i > q->head && !slash_before(q->v[i - 1].name, name); i--)
		q->v[i] = q->v[i - 1];
	q->v[i].name = xstrdup(name);
	q->v[i].mode = mode;
	q->v[i].held = NULL;
	q->v[i].nheld = 0;
	q->n++;
	return &q->v[i];
}

static void later_free(struct later *l)
{
	free(l->name);
	if (l->held) {
		held_free(l->held, l->nheld);
		free(l->held);
	}
}

/* One entry of the folder open as dfd; c->path names it. A folder to
 * enter goes to q (entered by the caller at its place), or is entered
 * now when q is NULL or it may be left out (held in c->pend until
 * something below it is kept). */
static int scan_entry_one(struct scan_ctx *c, int dfd, const char *name, unsigned char dtype,
			  enum scan_mode mode, int at_root, struct later_q *q)
{
	struct stat st;
	int is_dir, have_st = 0, ret;
	enum scan_mode child = mode;

	if (dtype == DT_UNKNOWN) {
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			goto stat_failed;
		have_st = 1;
		is_dir = S_ISDIR(st.st_mode);
	} else {
		if (dtype != DT_DIR && dtype != DT_REG && dtype != DT_LNK)
			return 0; /* FIFOs, sockets, devices: git skips them too */
		is_dir = dtype == DT_DIR;
	}
again:
	switch (mode) {
	case SCAN_RAW:
		break;
	case SCAN_RULES:
		if (scan_is_git(name) || (at_root && !strcmp(name, ".gpurun"))) {
			if (!c->o->include_git || !scan_is_git(name))
				return 0;
			child = SCAN_RAW;
			break;
		}
		if (ig_check_len(c->ig, c->path.buf, c->path.len, is_dir, NULL)) {
			if (!is_dir || ig_persist_match(c->ig, c->path.buf, c->path.len, NULL) ||
			    (!ignore_tracked_under(c->ig, c->path.buf) &&
			     !ig_include_may_descend(c->ig, c->path.buf, c->path.len))) {
				scan_ignored_one(c, dfd, name, is_dir);
				return 0;
			}
			child = SCAN_TRACKED_ONLY;
		} else if (is_dir && ig_include_match(c->ig, c->path.buf, c->path.len, 1, NULL) > 0) {
			child = SCAN_INCLUDED;
		}
		break;
	case SCAN_TRACKED_ONLY:
		if (ig_persist_match(c->ig, c->path.buf, c->path.len, NULL))
			return 0;
		if (ig_include_match(c->ig, c->path.buf, c->path.len, is_dir, NULL) > 0) {
			child = SCAN_INCLUDED;
			break;
		}
		if (is_dir ? !ignore_tracked_under(c->ig, c->path.buf) &&
			     !ig_include_may_descend(c->ig, c->path.buf, c->path.len)
			   : !ignore_tracked(c->ig, c->path.buf))
			return 0;
		break;
	case SCAN_INCLUDED:
		if (scan_is_git(name)) {
			if (!c->o->include_git)
				return 0;
			child = SCAN_RAW;
			break;
		}
		if (ig_persist_match(c->ig, c->path.buf, c->path.len, NULL))
			return 0;
		if (ig_include_match(c->ig, c->path.buf, c->path.len, is_dir, NULL) < 0) {
			/* Taken back by a '!' include: as if it were not
			 * included, folders above it considered. */
			size_t decided;
			int ig = ig_path_len(c->ig, c->path.buf, c->path.len, is_dir, NULL, &decided,
					     c->err);
			if (ig < 0)
				return ig;
			if (!ig) {
				child = SCAN_RULES;
				break;
			}
			mode = child = SCAN_TRACKED_ONLY;
			goto again;
		}
		break;
	}
	if (!have_st) {
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			goto stat_failed;
		have_st = 1;
		if ((S_ISDIR(st.st_mode) ? 1 : 0) != is_dir) {
			/* Replaced between readdir and now: decide again. */
			is_dir = S_ISDIR(st.st_mode);
			child = mode;
			goto again;
		}
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode))
		return 0;
	int defer = is_dir && child == SCAN_TRACKED_ONLY;
	size_t at = c->npend;
	struct scan_held held = { 0 };
	/* The outermost such folder is entered now, to know whether it
	 * stays, and what it keeps is held: the folder itself is said now,
	 * at its place, and the rest at the place of "name/" (between "a"
	 * and "a/x" come "a-b" and "a.txt"). */
	int hold = defer && q && !c->hold;
	if (hold)
		c->hold = &held;
	ret = scan_add(c, dfd, name, &st, defer);
	if (ret < 0 || !is_dir) {
		c->hold = hold ? NULL : c->hold;
		return ret;
	}
	if (!defer && q) {
		later_push(q, name, child);
		return 0;
	}
	ret = scan_enter(c, dfd, name, child);
	if (hold)
		c->hold = NULL;
	/* A folder entered only to look for tracked or included paths, that
	 * held none: it is ignored after all. */
	if (defer && c->npend == at + 1) {
		c->npend--;
		free(c->pend[c->npend].path);
	}
	if (hold && ret >= 0 && held.n) {
		/* (its entries came in the order it was walked in) */
		qsort(held.v, held.n, sizeof(*held.v), scan_cmp);
		ret = c->each(c->arg, &held.v[0]); /* the folder: "name" < "name/..." */
		struct later *l = later_push(q, name, child);
		l->held = held.v;
		l->nheld = held.n;
		free(held.v[0].path);
		free(held.v[0].link);
		l->held[0].path = l->held[0].link = NULL;
		return ret;
	}
	held_free(held.v, held.n);
	free(held.v);
	return ret;

stat_failed:
	if (errno == ENOENT)
		return 0; /* deleted since readdir */
	return gr_errf(c->err, GR_EIO, "cannot stat '%s': %s", c->path.buf, strerror(errno));
}

struct kid {
	char *name;
	unsigned char dtype;
};

static int kid_cmp(const void *a, const void *b)
{
	return strcmp(((const struct kid *)a)->name, ((const struct kid *)b)->name);
}

/* c->path: the folder (length plen), then name. */
static void path_at(struct scan_ctx *c, size_t plen, const char *name)
{
	c->path.len = plen;
	if (plen)
		sb_add(&c->path, "/", 1);
	sb_adds(&c->path, name);
}

/* Enter the queued folders whose content comes before name (all of them
 * when name is NULL). */
static int enter_before(struct scan_ctx *c, int dfd, size_t plen, struct later_q *q,
			const char *name)
{
	int ret = 0;

	while (q->head < q->n && (!name || slash_before(q->v[q->head].name, name))) {
		struct later *l = &q->v[q->head++];
		if (!ret && l->held) {
			for (size_t i = 1; i < l->nheld && !ret; i++)
				ret = c->each(c->arg, &l->held[i]);
		} else if (!ret) {
			path_at(c, plen, l->name);
			ret = scan_enter(c, dfd, l->name, l->mode);
		}
		later_free(l);
	}
	return ret;
}

/* Takes ownership of dfd. c->path names the folder ("" for the root).
 * Its entries are read first and sorted, so they come out in path order
 * with each folder's content at its place (enter_before). */
static int scan_dir(struct scan_ctx *c, int dfd, enum scan_mode mode)
{
	size_t plen = c->path.len, nkids = 0, akids = 0;
	struct kid *kids = NULL;
	struct later_q q = { 0 };
	struct dirent *de;
	DIR *d;
	int ret = 0;

	if (mode == SCAN_RULES || mode == SCAN_INCLUDED) {
		ret = ig_load(c->ig, dfd, c->path.buf, c->path.len, c->err);
		if (ret < 0) {
			close(dfd);
			return ret;
		}
	}
	d = fdopendir(dfd);
	if (!d) {
		ret = gr_errf(c->err, GR_EIO, "cannot read folder '%s': %s",
			      plen ? c->path.buf : ".", strerror(errno));
		close(dfd);
		return ret;
	}
	for (;;) {
		const char *name;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno)
				ret = gr_errf(c->err, GR_EIO, "cannot read folder '%s': %s",
					      plen ? c->path.buf : ".", strerror(errno));
			break;
		}
		name = de->d_name;
		if (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2])))
			continue;
		if (nkids == akids) {
			akids = akids ? 2 * akids : 32;
			kids = xrealloc(kids, akids * sizeof(*kids));
		}
		kids[nkids].name = xstrdup(name);
		kids[nkids++].dtype = de->d_type;
	}
	if (nkids > 1)
		qsort(kids, nkids, sizeof(*kids), kid_cmp);
	for (size_t i = 0; i < nkids && ret >= 0; i++) {
		if ((ret = enter_before(c, dirfd(d), plen, &q, kids[i].name)) < 0)
			break;
		path_at(c, plen, kids[i].name);
		ret = scan_entry_one(c, dirfd(d), kids[i].name, kids[i].dtype, mode, plen == 0, &q);
	}
	if (ret >= 0)
		ret = enter_before(c, dirfd(d), plen, &q, NULL);
	for (size_t i = q.head; i < q.n; i++) /* (after an error) */
		later_free(&q.v[i]);
	for (size_t i = 0; i < nkids; i++)
		free(kids[i].name);
	free(kids);
	free(q.v);
	c->path.len = plen;
	if (c->path.buf)
		c->path.buf[plen] = '\0';
	closedir(d);
	return ret;
}

static int scan_cmp(const void *a, const void *b)
{
	return strcmp(((const struct scan_entry *)a)->path, ((const struct scan_entry *)b)->path);
}

int scan_tree_each(const char *root, const struct scan_opts *o,
		   int (*each)(void *arg, const struct scan_entry *e), void *arg,
		   struct gr_err *err)
{
	static const struct scan_opts defaults;
	struct scan_ctx c = { 0 };
	int fd, ret;

	c.o = o ? o : &defaults;
	c.each = each;
	c.arg = arg;
	c.err = err;
	fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return gr_errf(err, errno == ENOENT ? GR_ENOTFOUND : GR_EIO,
			       "cannot open folder '%s': %s", root, strerror(errno));
	ret = ignore_new(&c.ig, root, c.o->extra, c.o->nextra, err);
	if (ret < 0) {
		close(fd);
		goto out;
	}
	ignore_set_include_git(c.ig, c.o->include_git);
	ignore_set_include(c.ig, c.o->include, c.o->ninclude);
	ignore_set_persist(c.ig, c.o->persist, c.o->npersist);
	sb_add(&c.path, "", 0);
	ret = scan_dir(&c, fd, SCAN_RULES);
out:
	for (size_t i = 0; i < c.npend; i++)
		free(c.pend[i].path);
	free(c.pend);
	ignore_free(c.ig);
	sb_release(&c.path);
	return ret;
}

struct scan_all {
	struct scan_entry *v;
	size_t n, alloc;
};

static int scan_keep(void *arg, const struct scan_entry *e)
{
	struct scan_all *a = arg;

	if (a->n == a->alloc) {
		a->alloc = a->alloc ? a->alloc * 2 : 1024;
		a->v = xrealloc(a->v, a->alloc * sizeof(*a->v));
	}
	a->v[a->n] = *e;
	a->v[a->n].path = xstrdup(e->path);
	a->v[a->n].link = e->link ? xstrdup(e->link) : NULL;
	a->n++;
	return 0;
}

int scan_tree(const char *root, const struct scan_opts *o, struct scan_entry **out,
	      size_t *n, struct gr_err *err)
{
	struct scan_all a = { 0 };
	int ret;

	*out = NULL;
	*n = 0;
	ret = scan_tree_each(root, o, scan_keep, &a, err);
	if (ret < 0) {
		scan_free(a.v, a.n);
		return ret;
	}
	if (a.n)
		qsort(a.v, a.n, sizeof(*a.v), scan_cmp);
	*out = a.v;
	*n = a.n;
	return 0;
}

void scan_free(struct scan_entry *e, size_t n)
{
	if (!e)
		return;
	for (size_t i = 0; i < n; i++) {
		free(e[i].path);
		free(e[i].link);
	}
	free(e);
}

/* ---- one path, as the walk would see it ---- */

/* Is folder path[0..len) (dfd open on it) one the walk enters with the
 * rules alone (SCAN_RULES): not .git or the top .gpurun, not ignored
 * (then only tracked or included paths below count), not named by
 * [sync] include (then rules do not apply below)? */
static int probe_plain_dir(struct ignore *ig, const char *path, size_t len, int at_root,
			   const char *name)
{
	if (scan_is_git(name) || (at_root && !strcmp(name, ".gpurun")))
		return 0;
	if (ig_check_len(ig, path, len, 1, NULL))
		return 0;
	return ig_include_match(ig, path, len, 1, NULL) <= 0;
}

int scan_probe(struct ignore **igp, const char *root, const struct scan_opts *o,
	       const char *path, struct scan_entry *out, struct gr_err *err)
{
	static const struct scan_opts defaults;
	struct strbuf at = STRBUF_INIT;
	const char *name = path, *slash;
	struct stat st;
	int dfd, ret = SCAN_PROBE_WALK;

	memset(out, 0, sizeof(*out));
	o = o ? o : &defaults;
	if (o->include_git || !*path || path[0] == '/')
		return SCAN_PROBE_WALK;
	if (!*igp) {
		if (ignore_new(igp, root, o->extra, o->nextra, err) < 0) {
			*igp = NULL;
			return SCAN_PROBE_WALK;
		}
		ignore_set_include_git(*igp, o->include_git);
		ignore_set_include(*igp, o->include, o->ninclude);
		ignore_set_persist(*igp, o->persist, o->npersist);
	}
	if ((dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return SCAN_PROBE_WALK;
	sb_add(&at, "", 0);
	/* Down the folders, each opened without following a link, each
	 * one's ignore files loaded as the walk loads them. */
	for (;;) {
		if (ig_load(*igp, dfd, at.buf, at.len, err) < 0)
			goto out;
		if (!(slash = strchr(name, '/')))
			break;
		size_t nlen = (size_t)(slash - name);
		char *comp = xstrndup(name, nlen);
		if (at.len)
			sb_add(&at, "/", 1);
		sb_add(&at, comp, nlen);
		int ok = nlen && probe_plain_dir(*igp, at.buf, at.len, at.len == nlen, comp);
		int fd = ok ? openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
		free(comp);
		if (fd < 0)
			goto out; /* gone, a link now, or not a plain folder: the walk decides */
		close(dfd);
		dfd = fd;
		name = slash + 1;
	}
	if (!*name)
		goto out;
	size_t plen = at.len;
	if (plen)
		sb_add(&at, "/", 1);
	sb_adds(&at, name);
	if (scan_is_git(name) || (plen == 0 && !strcmp(name, ".gpurun"))) {
		ret = SCAN_PROBE_NONE;
		goto out;
	}
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			ret = SCAN_PROBE_NONE;
		goto out;
	}
	if (S_ISDIR(st.st_mode))
		goto out; /* a folder: its subtree is the walk's */
	if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
		ret = SCAN_PROBE_NONE; /* FIFOs, sockets, devices: skipped */
		goto out;
	}
	/* As scan_entry_one decides a file in SCAN_RULES. */
	if (ig_check_len(*igp, at.buf, at.len, 0, NULL)) {
		ret = SCAN_PROBE_NONE;
		goto out;
	}
	out->type = S_ISLNK(st.st_mode) ? SCAN_SYMLINK : SCAN_FILE;
	out->mode = st.st_mode & 0777;
	out->size = (uint64_t)st.st_size;
	out->mtime_ns = (int64_t)st.st_mtime * 1000000000 + GR_ST_MTIME_NSEC(&st);
	out->ino = st.st_ino;
	out->dev = st.st_dev;
	if (out->type == SCAN_SYMLINK) {
		size_t cap = st.st_size > 0 ? (size_t)st.st_size + 1 : 256;
		for (;;) {
			char *buf = xmalloc(cap);
			ssize_t r = readlinkat(dfd, name, buf, cap);
			if (r < 0) {
				free(buf);
				goto out; /* replaced meanwhile: walk */
			}
			if ((size_t)r < cap) {
				buf[r] = '\0';
				out->link = buf;
				break;
			}
			free(buf);
			cap *= 2;
		}
		out->size = strlen(out->link);
	}
	out->path = xstrdup(at.buf);
	ret = SCAN_PROBE_KEPT;
out:
	close(dfd);
	sb_release(&at);
	return ret;
}
