/* The local index (stat cache -> content hash), the remote state files and
 * the signature cache, all under <project>/.gpurun/ (see sync_index.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "compat.h"
#include "proto.h"
#include "sync_fp.h"
#include "sync_index.h"
#include "sync_index_rd.h"
#include "sync_plan.h"
#include "sync_proto.h"



int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static char *state_path(const char *root, const char *name)
{
	return xasprintf("%s/.gpurun/%s", root, name);
}

int sync_state_dir(const char *root, const char *sub, struct gr_err *err)
{
	char *dir = state_path(root, sub), *ign = state_path(root, ".gitignore");
	int rc = mkdir_p(dir, 0755, err);

	/* gpurun's state ignores itself: `git add -A` never takes it. */
	if (rc == 0 && access(ign, F_OK) < 0)
		write_file_atomic(ign, "*\n", 2, 0644, NULL);
	free(dir);
	free(ign);
	return rc;
}

int sync_state_tmpfile(const char *root)
{
	char *dir = state_path(root, "");
	int fd = sync_state_dir(root, "", NULL) < 0 ? -1 : compat_tmpfile_in(dir);

	free(dir);
	return fd;
}

struct sync_index *sync_index_load(const char *root)
{
	struct sync_index *idx = xcalloc(1, sizeof(*idx));

	idx->path = state_path(root, "index");
	return idx;
}

void sync_index_free(struct sync_index *idx)
{
	if (!idx)
		return;
	free(idx->path);
	free(idx);
}


/* strcmp of two byte strings without NUL bytes. */
static int cmp_bytes(const char *a, size_t an, const char *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);

	return c ? c : an < bn ? -1 : an > bn;
}

/* Read the next entry into r->cur: 1, or 0 at the end (r->bad if the
 * file is damaged: an entry cut short, a path with a NUL byte, a hash of
 * another length, paths out of order). */
int idx_next(struct idx_rd *r)
{
	r->have = 0;
	if (r->bad || !r->left)
		return 0;
	for (size_t want = 8192;; want *= 2) {
		ssize_t have = fwin_need(&r->w, want);
		struct gr_rd rd;
		size_t pl = 0, hl = 0;

		if (have < 0)
			break;
		rd_init(&rd, r->w.b.buf + r->w.pos, (size_t)have);
		const uint8_t *p = get_bytes(&rd, &pl);
		r->cur.size = get_u64(&rd);
		r->cur.mtime_ns = (int64_t)get_u64(&rd);
		r->cur.ino = get_u64(&rd);
		r->cur.mode = get_u32(&rd);
		const uint8_t *h = get_bytes(&rd, &hl);
		if (rd.bad) {
			if (r->w.eof)
				break;
			continue; /* cut by the window: read more */
		}
		if (memchr(p, '\0', pl) || hl != SM_HASH_LEN ||
		    (r->started && cmp_bytes(r->path.buf, r->path.len, (const char *)p, pl) >= 0))
			break;
		memcpy(r->cur.hash, h, SM_HASH_LEN);
		sb_reset(&r->path);
		sb_add(&r->path, p, pl);
		r->w.pos += (size_t)have - rd.n;
		r->left--;
		r->started = 1;
		return r->have = 1;
	}
	r->bad = 1;
	return 0;
}

/* Open the index (absent, unreadable or of another version: no entries)
 * and read its first entry. */
void idx_open(struct idx_rd *r, const char *path)
{
	struct gr_rd rd;

	memset(r, 0, sizeof(*r));
	r->w.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->w.fd < 0)
		return;
	ssize_t have = fwin_need(&r->w, IDX_HDR);
	if (have < 4 || memcmp(r->w.b.buf, IDX_MAGIC, 4))
		return;
	rd_init(&rd, r->w.b.buf + 4, (size_t)have - 4);
	uint32_t version = get_u32(&rd);
	r->scan_ns = (int64_t)get_u64(&rd);
	uint32_t n = get_u32(&rd);
	if (rd.bad || version != IDX_VERSION)
		return;
	r->w.pos = IDX_HDR;
	r->left = n;
	idx_next(r);
}

void idx_close(struct idx_rd *r)
{
	if (r->w.fd >= 0)
		close(r->w.fd);
	fwin_release(&r->w);
	sb_release(&r->path);
}

/* The entry for path, if the index has one (asked in path order). */
const struct idx_entry *idx_seek(struct idx_rd *r, const char *path)
{
	size_t n = strlen(path);
	int c = 1;

	while (r->have && (c = cmp_bytes(r->path.buf, r->path.len, path, n)) < 0)
		idx_next(r);
	return r->have && c == 0 ? &r->cur : NULL;
}

/* Is dir (len bytes) prev itself or a folder above it? */
static int is_above(const char *dir, size_t len, const char *prev)
{
	return prev && !strncmp(prev, dir, len) && (prev[len] == '\0' || prev[len] == '/');
}

/* Add path's folders; *prev: the folder of the path added last, whose
 * folders are in already. Without it each file would add its whole chain
 * again (100k files three deep: 400k entries to sort before the
 * duplicates go, 64 MiB of them). The scan lists every folder before what
 * it holds, so out is usually in order with the folders in it already:
 * then nothing is added, and there is nothing to sort. Once a folder is
 * missing, *unsorted is set and the folders are added (the caller sorts
 * and drops the duplicates). */
static void add_parents(struct sm_list *out, const char *path, char **prev, int *unsorted)
{
	char *p = xstrdup(path), *s = strrchr(p, '/');

	if (!s) {
		free(p);
		return;
	}
	*s = '\0';
	if (*prev && !strcmp(*prev, p)) {
		free(p);
		return;
	}
	char *old = *prev;
	*prev = xstrdup(p);
	for (;;) {
		if (is_above(p, strlen(p), old))
			break;
		if (*unsorted || !sm_find(out, p)) {
			sm_add(out, p, SM_DIR);
			*unsorted = 1;
		}
		if (!(s = strrchr(p, '/')))
			break;
		*s = '\0';
	}
	free(old);
	free(p);
}

/* A name the agent keeps for its temp files (and removes as strays): such
 * a file or folder cannot be carried, and is left out. */
int sync_unsendable(const char *path)
{
	static const char pre[] = SYNC_TMP_PREFIX;

	for (const char *c = path; c; c = strchr(c, '/')) {
		c += *c == '/';
		if (!strncmp(c, pre, sizeof(pre) - 1))
			return 1;
	}
	return 0;
}

int lm_describe(const struct scan_entry *s, struct sm_entry *m)
{
	memset(m, 0, sizeof(*m));
	if (!sm_path_ok(s->path) || sync_unsendable(s->path))
		return 0;
	m->path = s->path;
	if (s->type == SCAN_DIR) {
		m->type = SM_DIR;
	} else if (s->type == SCAN_SYMLINK) {
		if (!s->link || !*s->link)
			return 0;
		m->type = SM_LINK;
		m->link = s->link;
	} else if (s->type == SCAN_FILE) {
		m->type = SM_FILE;
		m->mode = s->mode & 0777;
		m->size = s->size;
		m->mtime_ns = s->mtime_ns;
		m->dev = s->dev;
		m->ino = s->ino;
	}
	return m->type;
}

struct sm_entry *lm_keep(struct sm_list *out, const struct sm_entry *m)
{
	struct sm_entry *e = sm_add_pooled(out, m->path, m->type);

	e->link = m->link ? xstrdup(m->link) : NULL;
	e->mode = m->mode;
	e->size = m->size;
	e->mtime_ns = m->mtime_ns;
	e->dev = m->dev;
	e->ino = m->ino;
	return e;
}

/* One scanned entry into the manifest (its path into the list's pool),
 * unless it cannot be carried. */
static int lm_add(void *arg, const struct scan_entry *s)
{
	struct sm_entry m;

	if (lm_describe(s, &m))
		lm_keep(arg, &m);
	return 0;
}

/* The entries out holds, as the scan found them: sorted, hashes from the
 * index, parent folders added. */
static void lm_finish(struct sm_list *out, struct sync_index *idx, struct sync_hash_stats *hs)
{
	struct idx_rd ir;
	uint64_t cached = 0;
	size_t first = 0, n = out->n;

	/* The scan comes in path order: a pass to see, not a sort (a
	 * walked no-op of 300,000 files went from 807 to 764 ms). */
	for (size_t i = 1; i < n; i++)
		if (strcmp(out->e[i - 1].path, out->e[i].path) > 0) {
			sm_sort(out);
			break;
		}
	idx_open(&ir, idx->path);
	idx->scan_ns = wall_ns();
	for (size_t i = first; i < n; i++) {
		struct sm_entry *m = &out->e[i];
		if (m->type != SM_FILE || (m->flags & SM_F_KEPT))
			continue;
		const struct idx_entry *c = idx_seek(&ir, m->path);
		if (idx_stat_same(c, m) && c->mtime_ns < ir.scan_ns - RACY_NS) {
			memcpy(m->hash, c->hash, SM_HASH_LEN);
			cached++;
		} else {
			m->flags |= SM_F_UNHASHED;
		}
	}
	/* All of a damaged index is ignored, the part after the last file
	 * scanned too: what came from it is hashed again. */
	while (idx_next(&ir))
		;
	if (ir.bad) {
		for (size_t i = first; i < n; i++)
			if (out->e[i].type == SM_FILE && !(out->e[i].flags & SM_F_UNHASHED)) {
				out->e[i].flags |= SM_F_UNHASHED;
				memset(out->e[i].hash, 0, SM_HASH_LEN);
			}
		cached = 0;
	}
	idx_close(&ir);
	if (hs)
		hs->files_cached += cached;
	lm_parents(out);
}

/* The folders of out's entries that it lacks, added; out is sorted. */
void lm_parents(struct sm_list *out)
{
	char *prev = NULL; /* add_parents' */
	int unsorted = 0;
	size_t n = out->n;

	/* Every folder is in already unless the scan left one out (its
	 * name cannot be carried): add_parents adds none then. */
	for (size_t i = 0; i < n; i++)
		add_parents(out, out->e[i].path, &prev, &unsorted);
	free(prev);
	if (unsorted) { /* sort and drop duplicate folders */
		sm_sort(out);
		size_t keep = 0;
		for (size_t i = 0; i < out->n; i++) {
			if (keep && !strcmp(out->e[keep - 1].path, out->e[i].path)) {
				sm_entry_release(&out->e[i]);
				continue;
			}
			out->e[keep++] = out->e[i];
		}
		out->n = keep;
	}
	sm_shrink(out);
}

int sync_local_manifest(const struct scan_entry *e, size_t n, struct sync_index *idx,
			struct sm_list *out, struct sync_hash_stats *hs, struct gr_err *err)
{
	(void)err;
	sm_list_free(out);
	sm_reserve(out, n + n / 8 + 16); /* the scan's entries and a few folders */
	for (size_t i = 0; i < n; i++)
		lm_add(out, &e[i]);
	lm_finish(out, idx, hs);
	return 0;
}

int sync_scan_manifest(const char *root, const struct scan_opts *so, struct sync_index *idx,
		       struct sm_list *out, struct sync_hash_stats *hs, struct gr_err *err)
{
	int rc;

	sm_list_free(out);
	if ((rc = scan_tree_each(root, so, lm_add, out, err)) < 0) {
		sm_list_free(out); /* half a tree, unsorted and unhashed */
		return rc;
	}
	lm_finish(out, idx, hs);
	return 0;
}

int sync_hash_entry(struct sync_tree *t, const char *root, struct sm_entry *m, uint8_t **leaves,
		    struct sync_hash_stats *hs, struct gr_err *err)
{
	int fd = sync_tree_open_file(t, m->path, m->dev, m->ino, err);
	struct sync_known k = { 0 };
	int rc;

	if (fd < 0)
		return fd;
	if (!root || !leaves) {
		rc = sync_hash_fd(fd, m->path, m->size, m->hash, leaves, err);
	} else {
		/* A large file: what its last hashing learnt (sync_fp.h). */
		sync_fp_load(root, m->path, &k);
		k.want_fps = 1;
		rc = sync_hash_fd_known(fd, m->path, m->size, m->hash, leaves, &k, err);
		if (rc == 0 && k.fps_out)
			sync_fp_save(root, m->path, k.block_out, k.nout, k.fps_out, *leaves);
		if (rc == 0 && hs)
			hs->bytes_reused += k.reused * k.block_out < m->size ? k.reused * k.block_out
										: m->size;
		free(k.fps_out);
		sync_fp_free(&k);
	}
	close(fd);
	if (rc < 0)
		return rc;
	m->flags &= (uint8_t)~SM_F_UNHASHED;
	if (hs) {
		hs->files_hashed++;
		hs->bytes_hashed += m->size;
	}
	return 0;
}

/* The local files the index records: hashed, and not the host's entries
 * kept in the list (sync_plan_keep_ignored). */
static int idx_records(const struct sm_entry *m)
{
	return m->type == SM_FILE && !(m->flags & (SM_F_UNHASHED | SM_F_KEPT));
}

void idx_wr_add(struct idx_wr *w, const char *path, const struct idx_entry *c)
{
	if (w->failed)
		return;
	put_str(&w->b, path);
	put_u64(&w->b, c->size);
	put_u64(&w->b, (uint64_t)c->mtime_ns);
	put_u64(&w->b, c->ino);
	put_u32(&w->b, c->mode);
	put_bytes(&w->b, c->hash, SM_HASH_LEN);
	w->n++;
	if (w->b.len >= (256u << 10)) {
		w->failed = write_full(w->fd, w->b.buf, w->b.len) < 0;
		sb_reset(&w->b);
	}
}

struct idx_save {
	const struct sync_index *idx;
	void (*fill)(void *arg, struct idx_wr *w);
	void *arg;
};

/* Write the index to fd in pieces of 256 KiB, its count put into the
 * header at the end. */
static int idx_write(void *arg, int fd)
{
	const struct idx_save *a = arg;
	struct idx_wr w = { .fd = fd, .b = STRBUF_INIT };
	struct strbuf c = STRBUF_INIT;

	sb_add(&w.b, IDX_MAGIC, 4);
	put_u32(&w.b, IDX_VERSION);
	put_u64(&w.b, (uint64_t)a->idx->scan_ns);
	put_u32(&w.b, 0);
	a->fill(a->arg, &w);
	if (!w.failed && w.b.len)
		w.failed = write_full(fd, w.b.buf, w.b.len) < 0;
	put_u32(&c, w.n);
	if (!w.failed)
		w.failed = pwrite(fd, c.buf, 4, IDX_HDR - 4) != 4;
	sb_release(&c);
	sb_release(&w.b);
	return w.failed ? -1 : 0;
}

int idx_save_with(const char *root, const struct sync_index *idx,
		  void (*fill)(void *arg, struct idx_wr *w), void *arg, struct gr_err *err)
{
	struct idx_save a = { idx, fill, arg };
	char *path = state_path(root, "index");
	int rc = sync_state_dir(root, "", err);

	if (!rc)
		rc = write_file_atomic_with(path, idx_write, &a, 0644, err);
	free(path);
	return rc;
}

void idx_wr_add_local(struct idx_wr *w, const struct sm_entry *m)
{
	if (!idx_records(m))
		return;
	struct idx_entry c = { m->size, m->ino, m->mtime_ns, m->mode, { 0 } };
	memcpy(c.hash, m->hash, SM_HASH_LEN);
	idx_wr_add(w, m->path, &c);
}

static void idx_fill_list(void *arg, struct idx_wr *w)
{
	const struct sm_list *l = arg;

	for (size_t i = 0; i < l->n; i++)
		idx_wr_add_local(w, &l->e[i]);
}

int sync_index_save(const char *root, struct sync_index *idx, const struct sm_list *local,
		    struct gr_err *err)
{
	return idx_save_with(root, idx, idx_fill_list, (void *)local, err);
}

struct idx_renew {
	int from;
	int64_t scan_ns;
};

/* The index as it is, but for the time of the scan it records. */
static int idx_renew_write(void *arg, int fd)
{
	const struct idx_renew *a = arg;
	struct strbuf b = STRBUF_INIT;
	int rc = 0, first = 1;

	sb_grow(&b, 256u << 10);
	for (;;) {
		ssize_t n = read(a->from, b.buf, 256u << 10);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -1 : 0;
			break;
		}
		if (first) {
			struct strbuf h = STRBUF_INIT;
			if (n < IDX_HDR || memcmp(b.buf, IDX_MAGIC, 4)) {
				rc = -1;
				break;
			}
			put_u64(&h, (uint64_t)a->scan_ns);
			memcpy(b.buf + 8, h.buf, 8);
			sb_release(&h);
			first = 0;
		}
		if ((rc = write_full(fd, b.buf, (size_t)n)) < 0)
			break;
	}
	sb_release(&b);
	return rc < 0 ? -1 : 0;
}

int sync_index_renew(const char *root, int64_t scan_ns, struct gr_err *err)
{
	char *path = state_path(root, "index");
	struct idx_renew a = { open(path, O_RDONLY | O_CLOEXEC), scan_ns };
	int rc = a.from < 0 ? -1 : write_file_atomic_with(path, idx_renew_write, &a, 0644, err);

	if (a.from >= 0)
		close(a.from);
	free(path);
	return rc;
}

char *sync_remote_key(const char *host, const char *path)
{
	uint8_t h[SM_HASH_LEN];
	char hex[2 * SM_HASH_LEN + 1];
	blake2b_state s;

	blake2b_init(&s, SM_HASH_LEN);
	blake2b_update(&s, (const uint8_t *)host, strlen(host) + 1);
	blake2b_update(&s, (const uint8_t *)path, strlen(path) + 1);
	blake2b_final(&s, h, SM_HASH_LEN);
	sm_hex(h, hex);
	hex[16] = '\0';
	return xstrdup(hex);
}

int sync_rstate_load(const char *root, const char *key, struct sm_list *man,
		     uint8_t digest[SM_HASH_LEN])
{
	char *name = xasprintf("remote-%s", key), *path = state_path(root, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC), have = 0;

	/* Read in pieces: held whole beside the list, the file was a fifth
	 * of a no-op sync's peak. */
	if (fd >= 0 && sm_decode_fd(fd, 0, man, NULL) == 0) {
		sm_digest(man, digest);
		have = 1;
	}
	if (fd >= 0)
		close(fd);
	free(name);
	free(path);
	return have;
}

int sync_rstate_open(const char *root, const char *key)
{
	char *name = xasprintf("remote-%s", key), *path = state_path(root, name);
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	free(name);
	free(path);
	return fd;
}

struct rstate_fill {
	sm_each_fn each;
	void *src;
	struct sm_writer w;
};

static void rstate_add(void *arg, const struct sm_entry *e)
{
	sm_writer_add(arg, e);
}

static int rstate_write(void *arg, int fd)
{
	struct rstate_fill *f = arg;

	sm_writer_init(&f->w, fd, 0);
	if (f->each(f->src, rstate_add, &f->w) < 0 && !f->w.failed)
		f->w.failed = EIO;
	return sm_writer_finish(&f->w);
}

int sync_rstate_save_each(const char *root, const char *key, sm_each_fn each, void *src,
			  struct gr_err *err)
{
	char *name = xasprintf("remote-%s", key), *path = state_path(root, name);
	struct rstate_fill f = { each, src, { 0 } };
	int rc = sync_state_dir(root, "", err);

	if (!rc)
		rc = write_file_atomic_with(path, rstate_write, &f, 0644, err);
	free(name);
	free(path);
	return rc;
}

int sync_rstate_save(const char *root, const char *key, const struct sm_list *man,
		     struct gr_err *err)
{
	return sync_rstate_save_each(root, key, sm_list_each, (void *)man, err);
}

void sync_rstate_drop(const char *root, const char *key)
{
	char *name = xasprintf("remote-%s", key), *path = state_path(root, name);

	unlink(path);
	free(name);
	free(path);
}

char *sync_sig_path(const char *root, const uint8_t hash[SM_HASH_LEN])
{
	char hex[2 * SM_HASH_LEN + 1];

	sm_hex(hash, hex);
	return xasprintf("%s/.gpurun/sigs/%s", root, hex);
}

int sync_sig_have(const char *root, const uint8_t hash[SM_HASH_LEN])
{
	char *p = sync_sig_path(root, hash);
	int ok = access(p, R_OK) == 0;

	free(p);
	return ok;
}

int sync_sig_load(const char *root, const uint8_t hash[SM_HASH_LEN], struct strbuf *out)
{
	char *p = sync_sig_path(root, hash);
	int rc = read_file(p, out, NULL);

	free(p);
	return rc;
}

int sync_sig_save(const char *root, const uint8_t hash[SM_HASH_LEN], const void *sig,
		  size_t n, struct gr_err *err)
{
	char *dir = state_path(root, "sigs"), *p = sync_sig_path(root, hash);
	int rc = sync_state_dir(root, "sigs", err);

	if (!rc)
		rc = write_file_atomic(p, sig, n, 0644, err);
	free(dir);
	free(p);
	return rc;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* sync_gc_dir's: the files of the folder, sorted, and which are named. */
struct gc_dir {
	struct strvec names;
	uint8_t *named;
	void (*name)(const struct sm_entry *e, uint64_t min, struct strbuf *out);
	uint64_t min;
	struct strbuf b;
};

static void gc_mark(void *arg, const struct sm_entry *e)
{
	struct gc_dir *g = arg;

	sb_reset(&g->b);
	g->name(e, g->min, &g->b);
	if (!g->b.len)
		return;
	const char *name = g->b.buf;
	char **at = bsearch(&name, g->names.v, g->names.n, sizeof(*g->names.v), cmp_str);
	if (at)
		g->named[at - g->names.v] = 1;
}

void sync_gc_dir(const char *dir, int (*spare)(const char *name),
		 void (*name)(const struct sm_entry *e, uint64_t min, struct strbuf *out),
		 uint64_t min, sm_each_fn each, void *src)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct gc_dir g = { .names = STRVEC_INIT, .name = name, .min = min, .b = STRBUF_INIT };

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && !spare(de->d_name))
			sv_push(&g.names, de->d_name);
	if (g.names.n) {
		qsort(g.names.v, g.names.n, sizeof(*g.names.v), cmp_str);
		g.named = xcalloc(g.names.n, 1);
		/* (a manifest that cannot be read whole names nothing for sure) */
		if (each(src, gc_mark, &g) == 0)
			for (size_t i = 0; i < g.names.n; i++)
				if (!g.named[i])
					unlinkat(dirfd(d), g.names.v[i], 0);
	}
	closedir(d);
	sv_clear(&g.names);
	sb_release(&g.b);
	free(g.named);
}

/* Not a signature's name: left alone. */
static int sig_spare(const char *name)
{
	return name[0] == '.' || strlen(name) != 2 * SM_HASH_LEN;
}

static void sig_name(const struct sm_entry *e, uint64_t min, struct strbuf *out)
{
	char hex[2 * SM_HASH_LEN + 1];

	(void)min;
	if (e->type != SM_FILE)
		return;
	sm_hex(e->hash, hex);
	sb_adds(out, hex);
}

/* The signature files are few (one a large file version sent): the
 * folder is listed and each is looked up, instead of a name held for
 * every file of keep (~20 MB at 300k files). */
void sync_sig_gc(const char *root, sm_each_fn each, void *src)
{
	char *dir = state_path(root, "sigs");

	sync_gc_dir(dir, sig_spare, sig_name, 0, each, src);
	free(dir);
}
