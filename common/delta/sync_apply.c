/* A librsync delta applied with copy_file_range, and block hashes kept and
 * reused on the host (see sync_apply.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compat.h"
#include "sync_apply.h"
#include "sync_proto.h"
#include "util.h"

#define DELTA_MAGIC 0x72730236u
#define LEAVES_DIR "sync-leaves"

enum { ST_MAGIC, ST_CMD, ST_PARAM, ST_LITERAL, ST_DONE };

void (*sync_apply_busy)(void);

static void busy(void)
{
	if (sync_apply_busy)
		sync_apply_busy();
}

void dapply_init(struct dapply *d, int basefd, uint64_t base_size, int outfd, uint64_t max_out)
{
	memset(d, 0, sizeof(*d));
	d->basefd = basefd;
	d->outfd = outfd;
	d->base_size = base_size;
	d->max_out = max_out;
	d->state = ST_MAGIC;
	d->need = 4;
}

void dapply_release(struct dapply *d)
{
	free(d->same);
	d->same = NULL;
}

static int fail(struct dapply *d, const char *what)
{
	d->errnum = errno;
	snprintf(d->err, sizeof(d->err), "%s%s%s", what, errno ? ": " : "",
		 errno ? strerror(errno) : "");
	return -1;
}

static uint64_t be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static int do_copy(struct dapply *d, uint64_t pos, uint64_t len)
{
	off_t src = (off_t)pos, dst = (off_t)d->out;
	uint64_t left = len;

	errno = 0;
	if (pos > d->base_size || len > d->base_size - pos || len > d->max_out - d->out)
		return fail(d, "the delta copies outside the old file");
	while (left) {
		ssize_t r = compat_copy_file_range(d->basefd, &src, d->outfd, &dst,
						   left > (1u << 28) ? (1u << 28) : (size_t)left);
		if (r > 0) {
			left -= (uint64_t)r;
			busy();
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 || errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
		    errno == EOPNOTSUPP) {
			/* No in-kernel copy here: through a buffer. */
			char buf[1 << 16];
			while (left) {
				size_t k = left < sizeof(buf) ? (size_t)left : sizeof(buf);
				ssize_t g = pread(d->basefd, buf, k, src);
				if (g <= 0 || pwrite_full(d->outfd, buf, (size_t)g, (uint64_t)dst) < 0)
					return fail(d, "cannot copy from the old file");
				src += g;
				dst += g;
				left -= (uint64_t)g;
			}
			break;
		}
		return fail(d, "cannot copy from the old file");
	}
	if (pos == d->out) { /* in place: its blocks may keep their hashes */
		if (d->nsame && d->same[d->nsame - 1].off + d->same[d->nsame - 1].len == pos) {
			d->same[d->nsame - 1].len += len;
		} else {
			if (d->nsame == d->asame) {
				d->asame = d->asame ? 2 * d->asame : 16;
				d->same = xrealloc(d->same, d->asame * sizeof(*d->same));
			}
			d->same[d->nsame].off = pos;
			d->same[d->nsame++].len = len;
		}
	}
	d->out += len;
	return 0;
}

/* A command byte: how many parameter bytes follow, and what it is. */
static int command(struct dapply *d, uint8_t op)
{
	d->op = op;
	d->have = 0;
	if (op == 0) {
		d->state = ST_DONE;
		d->done = 1;
	} else if (op <= 0x40) {
		d->lit_left = op;
		d->state = ST_LITERAL;
	} else if (op <= 0x44) {
		d->need = (size_t)1 << (op - 0x41);
		d->state = ST_PARAM;
	} else if (op <= 0x54) {
		unsigned idx = op - 0x45u;
		d->need = ((size_t)1 << (idx >> 2)) + ((size_t)1 << (idx & 3));
		d->state = ST_PARAM;
	} else {
		errno = 0;
		return fail(d, "the delta holds an unknown command");
	}
	return 0;
}

static int params_done(struct dapply *d)
{
	if (d->op <= 0x44) {
		d->lit_left = be(d->par, d->need);
		d->state = d->lit_left ? ST_LITERAL : ST_CMD;
		return 0;
	}
	unsigned idx = d->op - 0x45u;
	size_t pn = (size_t)1 << (idx >> 2);
	d->state = ST_CMD;
	return do_copy(d, be(d->par, pn), be(d->par + pn, d->need - pn));
}

int dapply_feed(struct dapply *d, const uint8_t *p, size_t n)
{
	while (n) {
		switch (d->state) {
		case ST_MAGIC:
		case ST_PARAM: {
			size_t k = d->need - d->have < n ? d->need - d->have : n;
			memcpy(d->par + d->have, p, k);
			d->have += k;
			p += k;
			n -= k;
			if (d->have < d->need)
				break;
			if (d->state == ST_MAGIC) {
				errno = 0;
				if (be(d->par, 4) != DELTA_MAGIC)
					return fail(d, "not a librsync delta");
				d->state = ST_CMD;
			} else if (params_done(d) < 0) {
				return -1;
			}
			break;
		}
		case ST_CMD:
			if (command(d, *p) < 0)
				return -1;
			p++;
			n--;
			break;
		case ST_LITERAL: {
			size_t k = d->lit_left < n ? (size_t)d->lit_left : n;
			errno = 0;
			if (k > d->max_out - d->out)
				return fail(d, "the delta makes a longer file than announced");
			if (pwrite_full(d->outfd, p, k, d->out) < 0)
				return fail(d, "cannot write");
			d->out += k;
			d->lit_left -= k;
			p += k;
			n -= k;
			if (!d->lit_left)
				d->state = ST_CMD;
			break;
		}
		case ST_DONE:
			errno = 0;
			return fail(d, "bytes after the end of the delta");
		}
	}
	return 0;
}

void dapply_reusable(const struct dapply *d, uint64_t size, uint8_t *reuse)
{
	uint32_t b = sm_block_len(size), bb = sm_block_len(d->base_size);

	if (b != bb) { /* the old version's blocks are cut differently */
		uint64_t n = (size + b - 1) / b;
		memset(reuse, 0, n ? n : 1);
		return;
	}
	dapply_reusable_at(d, size, b, reuse);
}

void dapply_reusable_at(const struct dapply *d, uint64_t size, uint32_t b, uint8_t *reuse)
{
	uint64_t n = (size + b - 1) / b;
	size_t r = 0;

	memset(reuse, 0, n ? n : 1);
	for (uint64_t k = 0; k < n; k++) {
		uint64_t off = k * b, len = size - off < b ? size - off : b;
		uint64_t blen = off < d->base_size ? (d->base_size - off < b ? d->base_size - off : b) : 0;
		while (r < d->nsame && d->same[r].off + d->same[r].len <= off)
			r++;
		if (r < d->nsame && d->same[r].off <= off && off + len <= d->same[r].off + d->same[r].len &&
		    blen == len)
			reuse[k] = 1;
	}
}

struct hash_part {
	int fd;
	uint64_t size, first, last;
	uint32_t block;
	const uint8_t *known, *reuse;
	uint8_t *leaves;
	int err;
};

static void *hash_part_main(void *arg)
{
	struct hash_part *h = arg;
	uint8_t *buf = xmalloc(h->block);

	for (uint64_t k = h->first; k < h->last && !h->err; k++) {
		if (h->reuse && h->reuse[k]) {
			memcpy(h->leaves + k * SM_HASH_LEN, h->known + k * SM_HASH_LEN, SM_HASH_LEN);
			continue;
		}
		uint64_t off = k * h->block;
		size_t len = h->size - off < h->block ? (size_t)(h->size - off) : h->block;
		if (pread(h->fd, buf, len, (off_t)off) != (ssize_t)len) {
			h->err = errno ? errno : EIO;
			break;
		}
		sm_leaf_hash(h->leaves + k * SM_HASH_LEN, buf, len);
		if (k % 1024 == 0)
			busy(); /* (the keepalive does nothing off the agent's main thread) */
	}
	free(buf);
	return NULL;
}

int sync_hash_blocks(int fd, uint64_t size, const uint8_t *known, const uint8_t *reuse,
		     uint8_t *leaves)
{
	uint32_t b = sm_block_len(size);
	uint64_t n = (size + b - 1) / b, todo = 0, mid = n;
	struct hash_part p[2];
	pthread_t th;
	int threaded = 0;

	for (uint64_t k = 0; k < n; k++)
		todo += !(reuse && reuse[k]);
	if (todo * b >= (8u << 20)) /* worth a second thread: split the work */
		for (uint64_t k = 0, seen = 0; k < n; k++)
			if (!(reuse && reuse[k]) && ++seen == todo / 2) {
				mid = k + 1;
				break;
			}
	p[0] = (struct hash_part){ fd, size, 0, mid, b, known, reuse, leaves, 0 };
	p[1] = (struct hash_part){ fd, size, mid, n, b, known, reuse, leaves, 0 };
	if (mid < n)
		threaded = pthread_create(&th, NULL, hash_part_main, &p[1]) == 0;
	hash_part_main(&p[0]);
	if (threaded)
		pthread_join(th, NULL);
	else if (mid < n)
		hash_part_main(&p[1]);
	if (p[0].err || p[1].err) {
		errno = p[0].err ? p[0].err : p[1].err;
		return -1;
	}
	return 0;
}

static int leaves_dir(int statefd, int create)
{
	if (create && mkdirat(statefd, LEAVES_DIR, 0700) < 0 && errno != EEXIST)
		return -1;
	return openat(statefd, LEAVES_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

uint8_t *sync_leaves_load(int statefd, const uint8_t hash[SM_HASH_LEN], uint64_t size)
{
	char hex[2 * SM_HASH_LEN + 1];
	uint32_t b = sm_block_len(size);
	uint64_t n = (size + b - 1) / b;
	int dfd = statefd < 0 ? -1 : leaves_dir(statefd, 0), fd;
	uint8_t *lv = NULL;
	struct stat st;

	if (dfd < 0)
		return NULL;
	sm_hex(hash, hex);
	fd = openat(dfd, hex, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == n * SM_HASH_LEN) {
		lv = xmalloc(n ? n * SM_HASH_LEN : 1);
		uint8_t root[SM_HASH_LEN];
		if (read_full(fd, lv, n * SM_HASH_LEN) != (ssize_t)(n * SM_HASH_LEN)) {
			free(lv);
			lv = NULL;
		} else {
			/* only if they really are that version's */
			thash_from_leaves(lv, n, size, root);
			if (memcmp(root, hash, SM_HASH_LEN)) {
				free(lv);
				lv = NULL;
			}
		}
	}
	close(fd);
	return lv;
}

void sync_leaves_save(int statefd, const uint8_t hash[SM_HASH_LEN], const uint8_t *leaves,
		      uint64_t n)
{
	char hex[2 * SM_HASH_LEN + 1], tmp[64];
	int dfd = statefd < 0 ? -1 : leaves_dir(statefd, 1), fd;

	if (dfd < 0)
		return;
	sm_hex(hash, hex);
	snprintf(tmp, sizeof(tmp), SYNC_TMP_PREFIX "leaves-%llu", compat_thread_id());
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		/* A cache: lost on a crash is fine, a torn file is checked on load. */
		if (write_full(fd, leaves, n * SM_HASH_LEN) == 0 && close(fd) == 0)
			renameat(dfd, tmp, dfd, hex);
		else
			unlinkat(dfd, tmp, 0);
	}
	close(dfd);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void sync_leaves_gc(int statefd, const struct sm_list *man)
{
	struct strvec want = STRVEC_INIT;

	for (size_t i = 0; i < man->n; i++) {
		char hex[2 * SM_HASH_LEN + 1];
		if (man->e[i].type != SM_FILE || man->e[i].size < SYNC_LEAVES_MIN)
			continue;
		sm_hex(man->e[i].hash, hex);
		sv_push(&want, hex);
	}
	sync_leaves_gc_want(statefd, &want);
	sv_clear(&want);
}

void sync_leaves_gc_want(int statefd, struct strvec *wantp)
{
	int dfd = statefd < 0 ? -1 : leaves_dir(statefd, 0);
	DIR *dir = dfd < 0 ? NULL : fdopendir(dfd);
	struct dirent *de;
	struct strvec want = *wantp;

	if (!dir) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	if (want.n > 1)
		qsort(want.v, want.n, sizeof(*want.v), cmp_str);
	while ((de = readdir(dir))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		const char *name = de->d_name;
		if (!want.n || !bsearch(&name, want.v, want.n, sizeof(*want.v), cmp_str))
			unlinkat(dirfd(dir), de->d_name, 0);
	}
	closedir(dir);
}
