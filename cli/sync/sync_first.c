/* The first sync from a spool, a window at a time (sync_first.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync_first.h"
#include "sync_index_rd.h"
#include "sync_plan.h"

#define WINDOW 4096 /* entries held at a time while sending (~0.5 MiB) */
#define SPOOL_GONE 0x80 /* (in the sent spool) the host did not get it */
#define SPOOL_STOP (-1000)

/* A spool holds local entries in the manifest's encoding with the host's
 * fields, which carry the client's own: the local file's device and
 * inode, and the entry's flags. */
static void spool_put(struct sm_writer *w, const struct sm_entry *e, uint8_t flags)
{
	struct sm_entry s = *e;
	uint64_t dev = e->dev, ino = e->ino;

	s.host.ino = dev;
	s.host.mtime_ns = (int64_t)ino;
	s.host.ctime_ns = flags;
	sm_writer_add(w, &s);
}

/* e as spool_put wrote it (its path and link stay the reader's). */
static void spool_get(const struct sm_entry *r, struct sm_entry *e)
{
	uint64_t dev = r->host.ino, ino = (uint64_t)r->host.mtime_ns;
	uint8_t flags = (uint8_t)r->host.ctime_ns;

	*e = *r;
	e->dev = dev;
	e->ino = ino;
	e->leaves = NULL;
	e->flags = flags & (SM_F_UNHASHED | SPOOL_GONE);
}

struct spool_scan {
	struct sync_spool *sp;
	struct idx_rd ir;
	struct sm_writer w;
	struct sm_digest dg;
	struct strbuf prev;       /* the path scanned last */
	struct strvec dirs;       /* folders whose entries may still come */
};

#define DIRS_MAX 4096 /* (only names like "a", "a-1", "a-1-1" ... pile up) */

/* Is path's folder one spooled before (none missing, as lm_parents
 * would add)? In path order a folder's entries need not follow it
 * straight away ("a", "a.txt", "a/b"): the folders held are those whose
 * entries may still come, and the last of them is path's folder. */
static int parent_spooled(struct spool_scan *c, const char *path)
{
	const char *slash = strrchr(path, '/');

	while (c->dirs.n) {
		const char *d = c->dirs.v[c->dirs.n - 1];
		size_t n = strlen(d);
		int cmp = strncmp(path, d, n);
		if (cmp < 0 || (cmp == 0 && (unsigned char)path[n] <= '/'))
			break; /* (in it, or before what it holds) */
		free(c->dirs.v[--c->dirs.n]); /* past what it holds */
		c->dirs.v[c->dirs.n] = NULL;
	}
	if (!slash)
		return 1;
	const char *d = c->dirs.n ? c->dirs.v[c->dirs.n - 1] : NULL;
	return d && strlen(d) == (size_t)(slash - path) && !strncmp(d, path, (size_t)(slash - path));
}

static int scan_each(void *arg, const struct scan_entry *s)
{
	struct spool_scan *c = arg;
	struct sync_spool *sp = c->sp;
	struct sm_entry m;

	if (!lm_describe(s, &m))
		return 0;
	if (c->prev.len && strcmp(c->prev.buf, s->path) >= 0)
		return SPOOL_STOP; /* (scan_tree_each promises path order) */
	sb_reset(&c->prev);
	sb_adds(&c->prev, s->path);
	if (!parent_spooled(c, s->path))
		return SPOOL_STOP; /* (a folder it could not carry: lm_parents adds it) */
	if (m.type == SM_DIR) {
		if (c->dirs.n >= DIRS_MAX)
			return SPOOL_STOP;
		sv_push(&c->dirs, s->path);
	} else if (m.type == SM_FILE) {
		const struct idx_entry *ie = idx_seek(&c->ir, s->path);
		if (c->ir.bad)
			return SPOOL_STOP;
		if (idx_stat_same(ie, &m) && ie->mtime_ns < c->ir.scan_ns - RACY_NS) {
			memcpy(m.hash, ie->hash, SM_HASH_LEN);
			sp->cached++;
		} else {
			m.flags = SM_F_UNHASHED;
			sp->unhashed = 1;
		}
		sp->files++;
		sp->bytes += m.size;
	}
	if (!sp->unhashed)
		sm_digest_add(&c->dg, &m);
	spool_put(&c->w, &m, m.flags);
	sp->n++;
	return 0;
}

int sync_spool_scan(const char *root, const struct scan_opts *so, struct sync_index *idx,
		    struct sync_spool *sp, struct gr_err *err)
{
	struct spool_scan c = { .sp = sp };
	int rc;

	memset(sp, 0, sizeof(*sp));
	sp->fd = sp->sent_fd = -1;
	if ((sp->fd = sync_state_tmpfile(root)) < 0) {
		gr_trace("sync: no spool in .gpurun (%s): a list", strerror(errno));
		return 1;
	}
	idx_open(&c.ir, idx->path);
	sm_writer_init(&c.w, sp->fd, 1);
	sm_digest_init(&c.dg);
	rc = scan_tree_each(root, so, scan_each, &c, err);
	idx->scan_ns = wall_ns();
	/* All of a damaged index is ignored (as lm_finish): then a list. */
	while (rc == 0 && idx_next(&c.ir))
		;
	const char *why = NULL;
	if (c.ir.bad)
		why = "the index is damaged";
	else if (rc == SPOOL_STOP)
		why = "the walk out of order, or a folder left out";
	else if (rc == 0 && sm_writer_finish(&c.w) < 0)
		why = strerror(errno);
	if (rc == 0 && why)
		rc = SPOOL_STOP;
	sm_digest_final(&c.dg, sp->digest);
	idx_close(&c.ir);
	sb_release(&c.prev);
	sv_clear(&c.dirs);
	sb_release(&c.w.b);
	if (rc < 0 && rc != SPOOL_STOP)
		return rc;
	if (rc == SPOOL_STOP) {
		gr_trace("sync: the walk cannot be spooled (%s): a list", why);
		sync_spool_close(sp);
		gr_err_clear(err);
		return 1;
	}
	return 0;
}

static int spool_rewind(struct sync_spool *sp, int fd, struct gr_err *err)
{
	if (sp->rd_open)
		sm_reader_close(&sp->rd);
	sp->rd_open = 0;
	if (lseek(fd, 0, SEEK_SET) != 0)
		return gr_errf(err, GR_EIO, "cannot read the sync's spool in .gpurun: %s",
			       strerror(errno));
	sp->rd_open = 1; /* (closed also when it fails to open) */
	return sm_reader_open(&sp->rd, fd, 1, NULL, err);
}

/* The reader's next entry into l, as the scan made it; 1, 0 at the end,
 * or the reader's error. */
static int spool_next(struct sync_spool *sp, struct sm_list *l)
{
	const struct sm_entry *r = sm_reader_next(&sp->rd);
	struct sm_entry m;

	if (!r)
		return sp->rd.rc;
	spool_get(r, &m);
	struct sm_entry *e = lm_keep(l, &m);
	memcpy(e->hash, m.hash, SM_HASH_LEN);
	e->flags |= m.flags & SM_F_UNHASHED;
	return 1;
}

int sync_spool_load(struct sync_spool *sp, struct sm_list *out, struct gr_err *err)
{
	int rc;

	sm_list_free(out);
	sm_reserve(out, sp->n);
	if ((rc = spool_rewind(sp, sp->fd, err)) == 0)
		while ((rc = spool_next(sp, out)) > 0)
			;
	sync_spool_close(sp);
	if (rc < 0)
		sm_list_free(out);
	return rc;
}

static int w_rewind(void *arg, struct gr_err *err)
{
	struct sync_spool *sp = arg;

	/* (each pass: what the second sends is written) */
	int bad = ftruncate(sp->sent_fd, 0) < 0 || lseek(sp->sent_fd, 0, SEEK_SET) != 0;
	sb_release(&sp->sw.b);
	sm_writer_init(&sp->sw, sp->sent_fd, 1);
	if (bad)
		sp->sw.failed = errno ? errno : EIO;
	sb_release(&sp->dg.b);
	sm_digest_init(&sp->dg);
	return spool_rewind(sp, sp->fd, err);
}

static int no_sig(void *arg, const uint8_t *hash)
{
	(void)arg;
	(void)hash;
	return 0;
}

static int w_next(void *arg, struct sm_list *win, struct sync_plan *p, struct gr_err *err)
{
	struct sync_spool *sp = arg;
	int rc = 0;

	(void)err;
	sm_reserve(win, WINDOW);
	while (win->n < WINDOW && (rc = spool_next(sp, win)) > 0)
		;
	if (rc < 0)
		return rc;
	if (!win->n)
		return 0;
	sync_plan_build(win, &sp->none, sp->delta_min, no_sig, NULL, p);
	return 1;
}

static void w_sent(void *arg, const struct sm_list *win, const struct sync_plan *p,
		   const uint32_t *gone, size_t n)
{
	struct sync_spool *sp = arg;
	size_t k = 0;

	for (size_t i = 0; i < win->n; i++) {
		const struct sm_entry *e = &win->e[i];
		uint8_t flags = e->flags & SM_F_UNHASHED;
		while (k < n && p->files[gone[k]].local < i)
			k++;
		if (k < n && p->files[gone[k]].local == i)
			flags |= SPOOL_GONE; /* (nothing there before: nothing now) */
		else
			sm_digest_add(&sp->dg, e);
		spool_put(&sp->sw, e, flags);
	}
}

static void w_digest(void *arg, uint8_t out[SM_HASH_LEN])
{
	struct sync_spool *sp = arg;

	sm_digest_final(&sp->dg, out);
	sp->sent_ok = sm_writer_finish(&sp->sw) == 0;
}

int sync_spool_windows(struct sync_spool *sp, const char *root, uint64_t delta_min,
		       struct sync_windows *w)
{
	sp->delta_min = delta_min;
	if (sp->sent_fd < 0 && (sp->sent_fd = sync_state_tmpfile(root)) < 0)
		return -1;
	*w = (struct sync_windows){ w_rewind, w_next, w_sent, w_digest, sp, sp->files };
	return 0;
}

/* A spool read from its start, each entry (gone ones too when all) to
 * fn: 0, or -1 if it cannot be read whole. */
static int spool_each(int fd, int all, void (*fn)(void *arg, const struct sm_entry *e), void *arg)
{
	struct sm_reader rd;
	const struct sm_entry *r;
	struct sm_entry m;
	int rc = -1;

	if (fd < 0 || lseek(fd, 0, SEEK_SET) != 0)
		return -1;
	if (sm_reader_open(&rd, fd, 1, NULL, NULL) == 0) {
		while ((r = sm_reader_next(&rd))) {
			spool_get(r, &m);
			if (all || !(m.flags & SPOOL_GONE))
				fn(arg, &m);
		}
		rc = rd.rc ? -1 : 0;
	}
	sm_reader_close(&rd);
	return rc;
}

int sync_spool_each_host(void *arg, void (*fn)(void *arg, const struct sm_entry *e), void *fa)
{
	struct sync_spool *sp = arg;

	return sp->sent_ok ? spool_each(sp->sent_fd, 0, fn, fa) : -1;
}

int sync_spool_each_local(void *arg, void (*fn)(void *arg, const struct sm_entry *e), void *fa)
{
	struct sync_spool *sp = arg;

	return sp->sent_ok ? spool_each(sp->sent_fd, 1, fn, fa) : -1;
}

int sync_spool_each_walk(void *arg, void (*fn)(void *arg, const struct sm_entry *e), void *fa)
{
	struct sync_spool *sp = arg;

	return spool_each(sp->fd, 1, fn, fa);
}

static void idx_add(void *arg, const struct sm_entry *e)
{
	idx_wr_add_local(arg, e);
}

static void idx_fill(void *arg, struct idx_wr *w)
{
	if (sync_spool_each_local(arg, idx_add, w) < 0 && !w->failed)
		w->failed = EIO;
}

void sync_spool_save_index(const char *root, struct sync_index *idx, struct sync_spool *sp)
{
	if (sp->sent_ok)
		idx_save_with(root, idx, idx_fill, sp, NULL);
}

void sync_spool_close(struct sync_spool *sp)
{
	if (sp->rd_open)
		sm_reader_close(&sp->rd);
	sp->rd_open = 0;
	if (sp->fd >= 0)
		close(sp->fd);
	if (sp->sent_fd >= 0)
		close(sp->sent_fd);
	sp->fd = sp->sent_fd = -1;
	sb_release(&sp->sw.b);
	sb_release(&sp->dg.b); /* (a send cut short: never final) */
}
