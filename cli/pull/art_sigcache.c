/* Signatures of pulled files, kept for the next pull (art_sigcache.h). */
#include <blake2.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "art_sigcache.h"
#include "compat.h"
#include "sync_manifest.h"
#include "util.h"

#define MAGIC "GRPSIG1\n"
#define HDR_LEN (8 + 8 * 8 + 8)   /* magic, 8 u64 fields, block + pad */
#define KEEP_FILES 64             /* entries kept in the folder */

struct hdr {
	uint64_t dev, ino, size, mtime_s, mtime_ns, ctime_s, ctime_ns, n;
	uint32_t block;
};

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void hdr_of(const struct stat *st, uint32_t block, struct hdr *h)
{
	*h = (struct hdr){ (uint64_t)st->st_dev, (uint64_t)st->st_ino, (uint64_t)st->st_size,
			   (uint64_t)st->st_mtime, (uint64_t)GR_ST_MTIME_NSEC(st),
			   (uint64_t)st->st_ctime, (uint64_t)GR_ST_CTIME_NSEC(st),
			   block ? ((uint64_t)st->st_size + block - 1) / block : 0, block };
}

static void hdr_put(uint8_t *p, const struct hdr *h)
{
	memcpy(p, MAGIC, 8);
	const uint64_t f[8] = { h->dev, h->ino, h->size, h->mtime_s, h->mtime_ns, h->ctime_s,
				h->ctime_ns, h->n };
	for (int i = 0; i < 8; i++)
		put64(p + 8 + 8 * i, f[i]);
	put64(p + 72, h->block);
}

static char *entry_path(const char *dir, const struct stat *st)
{
	return xasprintf("%s/%llx-%llx", dir, (unsigned long long)st->st_dev,
			 (unsigned long long)st->st_ino);
}

int art_sigcache_load(const char *dir, const struct stat *st, uint32_t block, uint32_t *weak,
		      uint8_t *leaves)
{
	struct hdr h;
	uint8_t want[HDR_LEN], *buf = NULL;
	char *path;
	int fd, rc = -1;

	if (!dir || !block)
		return -1;
	hdr_of(st, block, &h);
	size_t body = (size_t)h.n * (4 + SM_HASH_LEN), len = HDR_LEN + body + SM_HASH_LEN;
	path = entry_path(dir, st);
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat cst;
	if (fd < 0 || fstat(fd, &cst) < 0 || !S_ISREG(cst.st_mode) || (uint64_t)cst.st_size != len)
		goto out;
	buf = xmalloc(len);
	if (read_full(fd, buf, len) != (ssize_t)len)
		goto out;
	hdr_put(want, &h);
	uint8_t sum[SM_HASH_LEN];
	blake2b(sum, buf, NULL, SM_HASH_LEN, len - SM_HASH_LEN, 0);
	if (memcmp(buf, want, HDR_LEN) || memcmp(sum, buf + len - SM_HASH_LEN, SM_HASH_LEN))
		goto out; /* another version of that inode, or torn: not used */
	const uint8_t *p = buf + HDR_LEN;
	for (uint64_t k = 0; k < h.n; k++, p += 4)
		weak[k] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			  (uint32_t)p[3] << 24;
	memcpy(leaves, p, (size_t)h.n * SM_HASH_LEN);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	if (rc < 0 && fd >= 0)
		unlink(path); /* stale: the file changed since */
	free(buf);
	free(path);
	return rc;
}

/* The oldest entries go past KEEP_FILES (a pull adds one per file). */
static void prune(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct old { char *name; time_t t; } *v = NULL;
	size_t n = 0, cap = 0;

	while (d && (de = readdir(d))) {
		struct stat st;
		if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (n == cap)
			v = xrealloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*v));
		v[n++] = (struct old){ xstrdup(de->d_name), st.st_mtime };
	}
	while (n > KEEP_FILES) {
		size_t o = 0;
		for (size_t i = 1; i < n; i++)
			if (v[i].t < v[o].t)
				o = i;
		if (d)
			unlinkat(dirfd(d), v[o].name, 0);
		free(v[o].name);
		v[o] = v[--n];
	}
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	if (d)
		closedir(d);
}

void art_sigcache_store(const char *dir, int fd, uint32_t block, const uint32_t *weak,
			const uint8_t *leaves)
{
	struct stat st;
	struct hdr h;

	if (!dir || !block || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return;
	hdr_of(&st, block, &h);
	size_t body = (size_t)h.n * (4 + SM_HASH_LEN), len = HDR_LEN + body + SM_HASH_LEN;
	uint8_t *buf = xmalloc(len), *p = buf + HDR_LEN;
	hdr_put(buf, &h);
	for (uint64_t k = 0; k < h.n; k++, p += 4) {
		p[0] = (uint8_t)weak[k];
		p[1] = (uint8_t)(weak[k] >> 8);
		p[2] = (uint8_t)(weak[k] >> 16);
		p[3] = (uint8_t)(weak[k] >> 24);
	}
	memcpy(p, leaves, (size_t)h.n * SM_HASH_LEN);
	blake2b(buf + len - SM_HASH_LEN, buf, NULL, SM_HASH_LEN, len - SM_HASH_LEN, 0);
	char *path = entry_path(dir, &st);
	/* A cache: no fsync; a torn entry fails its checksum and is dropped. */
	(void)write_file_atomic(path, buf, len, 0600, NULL);
	free(path);
	free(buf);
	prune(dir);
}
