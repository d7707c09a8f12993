/* The one content hasher of files (sync_manifest.h: the tree hash of
 * blocks), for the client's sync and the agent's pull deltas alike: big
 * files are hashed block-wise on two threads. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync_manifest.h"

#define PAR_HASH_MIN (8u << 20)

struct par_hash {
	int fd;
	uint64_t size, first, last; /* blocks [first, last) */
	uint32_t block;
	uint8_t *leaves;
	int err;
	const struct sync_known *kn; /* NULL: hash every block */
	uint64_t reused;
};

/* Block k's leaf: the recorded one if its fingerprint is unchanged. */
static void leaf_of(struct par_hash *p, uint64_t k, const uint8_t *b, size_t bl)
{
	const struct sync_known *kn = p->kn;

	if (kn) {
		uint8_t f[64];
		kn->fp(f, b, bl);
		if (kn->fps_out)
			memcpy(kn->fps_out + k * kn->fp_len, f, kn->fp_len);
		/* (Recorded with another block length: of no use.) */
		if (kn->block == p->block && k < kn->n &&
		    !memcmp(f, kn->fps + k * kn->fp_len, kn->fp_len)) {
			memcpy(p->leaves + k * SM_HASH_LEN, kn->leaves + k * SM_HASH_LEN, SM_HASH_LEN);
			p->reused++;
			return;
		}
	}
	sm_leaf_hash(p->leaves + k * SM_HASH_LEN, b, bl);
}

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
			leaf_of(p, k, buf + o, bl);
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
	return sync_hash_fd_known(fd, abspath, size, hash, leaves, NULL, err);
}

int sync_hash_fd_known(int fd, const char *abspath, uint64_t size, uint8_t hash[SM_HASH_LEN],
		       uint8_t **leaves, struct sync_known *kn, struct gr_err *err)
{
	struct stat st;
	int rc = 0;

	if (leaves)
		*leaves = NULL;
	if (fstat(fd, &st) == 0)
		size = (uint64_t)st.st_size;
	uint32_t block = sm_block_len(size);
	uint64_t nblocks = (size + block - 1) / block;
	const struct sync_known *use = kn && kn->fp && kn->fp_len <= 64 ? kn : NULL;
	if (kn) {
		kn->reused = 0;
		kn->fps_out = use && kn->want_fps ? xmalloc(nblocks ? nblocks * kn->fp_len : 1) : NULL;
		kn->nout = nblocks;
		kn->block_out = block;
	}
	if (size >= PAR_HASH_MIN || leaves || use) {
		/* Block hashes are independent: two threads on big files. */
		struct par_hash p[2];
		pthread_t th;
		uint8_t *lv = xmalloc(nblocks ? nblocks * SM_HASH_LEN : 1);
		uint64_t mid = size >= PAR_HASH_MIN ? nblocks / 2 : nblocks;
		p[0] = (struct par_hash){ fd, size, 0, mid, block, lv, 0, use, 0 };
		p[1] = (struct par_hash){ fd, size, mid, nblocks, block, lv, 0, use, 0 };
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
		if (kn)
			kn->reused = p[0].reused + p[1].reused;
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
