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

#include "proto.h"
#include "sync_index.h"
#include "sync_proto.h"

#define IDX_MAGIC "GRIX"
#define IDX_VERSION 1u
#define RACY_NS 1000000000LL /* files changed this close to a scan are rehashed */
#define PAR_HASH_MIN (8u << 20)

struct idx_entry {
	char *path;
	uint64_t size, ino;
	int64_t mtime_ns;
	uint32_t mode;
	uint8_t hash[SM_HASH_LEN];
	int unhashed;
};

struct sync_index {
	int64_t scan_ns;      /* wall-clock time of the scan that made it */
	struct idx_entry *e;  /* sorted by path */
	size_t n, alloc;
};

static int64_t wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static char *state_path(const char *root, const char *name)
{
	return xasprintf("%s/.gpurun/%s", root, name);
}

struct sync_index *sync_index_load(const char *root)
{
	struct sync_index *idx = xcalloc(1, sizeof(*idx));
	struct strbuf b = STRBUF_INIT;
	char *path = state_path(root, "index");
	struct gr_rd rd;

	if (read_file(path, &b, NULL) < 0 || b.len < 4 || memcmp(b.buf, IDX_MAGIC, 4))
		goto out;
	rd_init(&rd, b.buf + 4, b.len - 4);
	uint32_t version = get_u32(&rd);
	idx->scan_ns = (int64_t)get_u64(&rd);
	uint32_t n = get_u32(&rd);
	if (rd.bad || version != IDX_VERSION)
		goto out;
	idx->e = xcalloc(n ? n : 1, sizeof(*idx->e));
	idx->alloc = n;
	for (uint32_t i = 0; i < n && !rd.bad; i++) {
		struct idx_entry *e = &idx->e[idx->n];
		size_t hl = 0;
		e->path = get_str(&rd);
		e->size = get_u64(&rd);
		e->mtime_ns = (int64_t)get_u64(&rd);
		e->ino = get_u64(&rd);
		e->mode = get_u32(&rd);
		const uint8_t *h = get_bytes(&rd, &hl);
		if (rd.bad || !e->path || hl != SM_HASH_LEN ||
		    (idx->n && strcmp(idx->e[idx->n - 1].path, e->path) >= 0)) {
			free(e->path);
			rd.bad = 1;
			break;
		}
		memcpy(e->hash, h, SM_HASH_LEN);
		idx->n++;
	}
	if (rd.bad) { /* damaged: start from nothing, it is only a cache */
		for (size_t i = 0; i < idx->n; i++)
			free(idx->e[i].path);
		idx->n = 0;
	}
out:
	free(path);
	sb_release(&b);
	return idx;
}

void sync_index_free(struct sync_index *idx)
{
	if (!idx)
		return;
	for (size_t i = 0; i < idx->n; i++)
		free(idx->e[i].path);
	free(idx->e);
	free(idx);
}

static struct idx_entry *idx_find(struct sync_index *idx, const char *path)
{
	size_t lo = 0, hi = idx->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(idx->e[mid].path, path);
		if (!c)
			return &idx->e[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

struct par_hash {
	int fd;
	uint64_t size, first, last; /* blocks [first, last) */
	uint32_t block;
	uint8_t *leaves;
	int err;
};

static void *hash_range(void *arg)
{
	struct par_hash *p = arg;
	size_t chunk = (size_t)p->block * (((1u << 20) + p->block - 1) / p->block);
	uint8_t *buf = xmalloc(chunk);

	for (uint64_t k = p->first; k < p->last && !p->err;) {
		uint64_t off = k * p->block;
		size_t want = chunk;
		if (off + want > p->size)
			want = (size_t)(p->size - off);
		ssize_t r = pread(p->fd, buf, want, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)want) {
			p->err = r < 0 ? errno : EIO;
			break;
		}
		for (size_t o = 0; o < want && k < p->last; o += p->block, k++) {
			size_t bl = want - o < p->block ? want - o : p->block;
			blake2b(p->leaves + k * SM_HASH_LEN, buf + o, NULL, SM_HASH_LEN, bl, 0);
		}
	}
	free(buf);
	return NULL;
}

int sync_hash_file(const char *abspath, uint64_t size, uint8_t hash[SM_HASH_LEN],
		   uint8_t **leaves, struct gr_err *err)
{
	int fd = open(abspath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (leaves)
		*leaves = NULL;
	if (fd < 0)
		return gr_errf(err, errno == ENOENT ? GR_ENOTFOUND : GR_EIO,
			       "cannot open '%s': %s", abspath, strerror(errno));
	int rc = sync_hash_fd(fd, abspath, size, hash, leaves, err);
	close(fd);
	return rc;
}

int sync_hash_fd(int fd, const char *abspath, uint64_t size, uint8_t hash[SM_HASH_LEN],
		 uint8_t **leaves, struct gr_err *err)
{
	struct stat st;
	int rc = 0;

	if (leaves)
		*leaves = NULL;
	if (fstat(fd, &st) == 0)
		size = (uint64_t)st.st_size;
	uint32_t block = sm_block_len(size);
	uint64_t nblocks = (size + block - 1) / block;
	if (size >= PAR_HASH_MIN || leaves) {
		/* Block hashes are independent: two threads on big files. */
		struct par_hash p[2];
		pthread_t th;
		uint8_t *lv = xmalloc(nblocks ? nblocks * SM_HASH_LEN : 1);
		uint64_t mid = size >= PAR_HASH_MIN ? nblocks / 2 : nblocks;
		p[0] = (struct par_hash){ fd, size, 0, mid, block, lv, 0 };
		p[1] = (struct par_hash){ fd, size, mid, nblocks, block, lv, 0 };
		int threaded = mid < nblocks && pthread_create(&th, NULL, hash_range, &p[1]) == 0;
		hash_range(&p[0]);
		if (threaded)
			pthread_join(th, NULL);
		else
			hash_range(&p[1]);
		if (p[0].err || p[1].err) {
			free(lv);
			rc = gr_errf(err, GR_EIO, "cannot read '%s': %s", abspath,
				     strerror(p[0].err ? p[0].err : p[1].err));
			goto out;
		}
		thash_from_leaves(lv, nblocks, size, hash);
		if (leaves)
			*leaves = lv;
		else
			free(lv);
		goto out;
	}
	struct thash t;
	char buf[65536];
	thash_init(&t, size);
	for (;;) {
		ssize_t r = read(fd, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = gr_errf(err, GR_EIO, "cannot read '%s': %s", abspath, strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		thash_update(&t, buf, (size_t)r);
	}
	thash_final(&t, hash);
out:
	return rc;
}

static void add_parents(struct sm_list *out, const char *path)
{
	char *p = xstrdup(path);

	for (char *s = strrchr(p, '/'); s; s = strrchr(p, '/')) {
		*s = '\0';
		sm_add(out, p, SM_DIR);
	}
	free(p);
}

/* A name the agent keeps for its temp files (and removes as strays): such
 * a file or folder cannot be carried, and is left out. */
static int unsendable(const char *path)
{
	static const char pre[] = SYNC_TMP_PREFIX;

	for (const char *c = path; c; c = strchr(c, '/')) {
		c += *c == '/';
		if (!strncmp(c, pre, sizeof(pre) - 1))
			return 1;
	}
	return 0;
}

int sync_local_manifest(const struct scan_entry *e, size_t n, struct sync_index *idx,
			struct sm_list *out, struct sync_hash_stats *hs, struct gr_err *err)
{
	struct idx_entry *fresh = xcalloc(n ? n : 1, sizeof(*fresh));
	size_t nfresh = 0;
	int64_t scan_ns = wall_ns();

	(void)err;
	for (size_t i = 0; i < n; i++) {
		const struct scan_entry *s = &e[i];
		if (!sm_path_ok(s->path) || unsendable(s->path))
			continue;
		if (s->type == SCAN_DIR) {
			sm_add(out, s->path, SM_DIR);
		} else if (s->type == SCAN_SYMLINK) {
			if (!s->link || !*s->link)
				continue;
			sm_add(out, s->path, SM_LINK)->link = xstrdup(s->link);
		} else if (s->type == SCAN_FILE) {
			struct idx_entry *c = idx_find(idx, s->path);
			struct sm_entry *m = sm_add(out, s->path, SM_FILE);
			struct idx_entry *f = &fresh[nfresh++];
			m->mode = s->mode & 0777;
			m->size = s->size;
			m->mtime_ns = s->mtime_ns;
			m->dev = s->dev;
			m->ino = s->ino;
			if (c && !c->unhashed && c->size == s->size && c->mtime_ns == s->mtime_ns &&
			    c->ino == s->ino && c->mode == s->mode &&
			    c->mtime_ns < idx->scan_ns - RACY_NS) {
				memcpy(m->hash, c->hash, SM_HASH_LEN);
				if (hs)
					hs->files_cached++;
			} else {
				m->flags |= SM_F_UNHASHED;
				f->unhashed = 1;
			}
			f->path = xstrdup(s->path);
			f->size = s->size;
			f->mtime_ns = s->mtime_ns;
			f->ino = s->ino;
			f->mode = s->mode;
			memcpy(f->hash, m->hash, SM_HASH_LEN);
		} else {
			continue;
		}
		add_parents(out, s->path);
	}
	/* Sort and drop duplicate folders. */
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
	/* The new index: what was seen now (scan order is path order). */
	for (size_t i = 0; i < idx->n; i++)
		free(idx->e[i].path);
	free(idx->e);
	idx->e = fresh;
	idx->n = idx->alloc = nfresh;
	idx->scan_ns = scan_ns;
	return 0;
}

int sync_hash_entry(struct sync_tree *t, struct sm_entry *m, uint8_t **leaves,
		    struct sync_hash_stats *hs, struct gr_err *err)
{
	int fd = sync_tree_open_file(t, m->path, m->dev, m->ino, err);

	if (fd < 0)
		return fd;
	int rc = sync_hash_fd(fd, m->path, m->size, m->hash, leaves, err);
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

void sync_index_learn(struct sync_index *idx, const struct sm_list *local)
{
	size_t keep = 0;

	for (size_t i = 0; i < idx->n; i++) {
		struct idx_entry *e = &idx->e[i];
		if (e->unhashed) {
			const struct sm_entry *m = sm_find(local, e->path);
			if (m && m->type == SM_FILE && !(m->flags & SM_F_UNHASHED) &&
			    m->size == e->size) {
				memcpy(e->hash, m->hash, SM_HASH_LEN);
				e->unhashed = 0;
			} else {
				free(e->path);
				continue;
			}
		}
		idx->e[keep++] = *e;
	}
	idx->n = keep;
}

int sync_index_save(const char *root, struct sync_index *idx, struct gr_err *err)
{
	struct strbuf b = STRBUF_INIT;
	char *dir = state_path(root, ""), *path = state_path(root, "index");
	int rc;

	sb_add(&b, IDX_MAGIC, 4);
	put_u32(&b, IDX_VERSION);
	put_u64(&b, (uint64_t)idx->scan_ns);
	size_t count = 0;
	for (size_t i = 0; i < idx->n; i++)
		count += !idx->e[i].unhashed;
	put_u32(&b, (uint32_t)count);
	for (size_t i = 0; i < idx->n; i++) {
		if (idx->e[i].unhashed)
			continue;
		put_str(&b, idx->e[i].path);
		put_u64(&b, idx->e[i].size);
		put_u64(&b, (uint64_t)idx->e[i].mtime_ns);
		put_u64(&b, idx->e[i].ino);
		put_u32(&b, idx->e[i].mode);
		put_bytes(&b, idx->e[i].hash, SM_HASH_LEN);
	}
	rc = mkdir_p(dir, 0755, err);
	if (!rc)
		rc = write_file_atomic(path, b.buf, b.len, 0644, err);
	free(dir);
	free(path);
	sb_release(&b);
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
	struct strbuf b = STRBUF_INIT;
	int have = 0;

	if (read_file(path, &b, NULL) == 0 && sm_decode(b.buf, b.len, 0, man, NULL) == 0) {
		sm_digest(man, digest);
		have = 1;
	}
	free(name);
	free(path);
	sb_release(&b);
	return have;
}

int sync_rstate_save(const char *root, const char *key, const struct sm_list *man,
		     struct gr_err *err)
{
	char *name = xasprintf("remote-%s", key), *path = state_path(root, name);
	char *dir = state_path(root, "");
	struct strbuf b = STRBUF_INIT;
	int rc;

	sm_encode(man, 0, &b);
	rc = mkdir_p(dir, 0755, err);
	if (!rc)
		rc = write_file_atomic(path, b.buf, b.len, 0644, err);
	free(name);
	free(path);
	free(dir);
	sb_release(&b);
	return rc;
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
	int rc = mkdir_p(dir, 0755, err);

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

void sync_sig_gc(const char *root, const struct sm_list *keep)
{
	char *dir = state_path(root, "sigs");
	DIR *d = opendir(dir);
	struct dirent *de;
	struct strvec want = STRVEC_INIT;

	if (!d) {
		free(dir);
		return;
	}
	for (size_t i = 0; i < keep->n; i++) {
		char hex[2 * SM_HASH_LEN + 1];
		if (keep->e[i].type != SM_FILE)
			continue;
		sm_hex(keep->e[i].hash, hex);
		sv_push(&want, hex);
	}
	if (want.n > 1)
		qsort(want.v, want.n, sizeof(*want.v), cmp_str);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || strlen(de->d_name) != 2 * SM_HASH_LEN)
			continue;
		const char *name = de->d_name;
		if (!want.n || !bsearch(&name, want.v, want.n, sizeof(*want.v), cmp_str))
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
	sv_clear(&want);
	free(dir);
}
