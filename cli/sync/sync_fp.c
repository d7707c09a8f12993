/* Block fingerprints of large files (see sync_fp.h). A record:
 *   "GRFP" u32 version, u32 block, u32 fp_len, u64 n, str path,
 *   bytes n * fp_len (fingerprints), bytes n * 32 (leaves),
 *   then 32 bytes: BLAKE2b-256 of all that (a torn or edited record is
 *   not used). */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto.h"
#include "sync_fp.h"
#include "sync_index.h"

#define FP_MAGIC "GRFP"
#define FP_VERSION 1u
/* A record is 48 bytes a block: 48 MiB holds the 1M blocks of a 1 TiB
 * file (1 MiB blocks). A larger file is hashed whole, as without one. */
#define FP_MAX_FILE (48u << 20)

void sync_fp(uint8_t *out, const void *p, size_t n)
{
	XXH128_canonical_t c;

	XXH128_canonicalFromHash(&c, XXH3_128bits(p, n));
	memcpy(out, c.digest, SYNC_FP_LEN);
}

/* blocks/<32 hex digits>: the path's own key. */
static char *fp_name(const char *path)
{
	uint8_t h[SM_HASH_LEN];
	char hex[2 * SM_HASH_LEN + 1];

	sm_leaf_hash(h, path, strlen(path));
	sm_hex(h, hex);
	hex[32] = '\0';
	return xstrdup(hex);
}

static char *fp_path(const char *root, const char *path)
{
	char *name = fp_name(path), *p = xasprintf("%s/.gpurun/blocks/%s", root, name);

	free(name);
	return p;
}

int sync_fp_load(const char *root, const char *path, struct sync_known *k)
{
	char *p = fp_path(root, path);
	struct strbuf sb = STRBUF_INIT;
	struct stat st;
	int rc = -1;

	memset(k, 0, sizeof(*k));
	k->fp = sync_fp;
	k->fp_len = SYNC_FP_LEN;
	if (stat(p, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size < 4 + SM_HASH_LEN ||
	    (uint64_t)st.st_size > FP_MAX_FILE || read_file(p, &sb, NULL) < 0)
		goto out;
	if (sb.len < 4 + SM_HASH_LEN || memcmp(sb.buf, FP_MAGIC, 4))
		goto out;
	uint8_t sum[SM_HASH_LEN];
	size_t body = sb.len - SM_HASH_LEN;
	sm_leaf_hash(sum, sb.buf, body);
	if (memcmp(sum, sb.buf + body, SM_HASH_LEN))
		goto out;
	struct gr_rd rd;
	rd_init(&rd, sb.buf + 4, body - 4);
	uint32_t version = get_u32(&rd), block = get_u32(&rd), fp_len = get_u32(&rd);
	uint64_t n = get_u64(&rd);
	size_t plen, flen, llen;
	const uint8_t *rp = get_bytes(&rd, &plen);
	const uint8_t *fps = get_bytes(&rd, &flen), *leaves = get_bytes(&rd, &llen);
	if (rd.bad || rd.n || version != FP_VERSION || fp_len != SYNC_FP_LEN || !block ||
	    plen != strlen(path) || memcmp(rp, path, plen) || n > flen / SYNC_FP_LEN ||
	    flen != n * SYNC_FP_LEN || llen != n * SM_HASH_LEN)
		goto out;
	/* Pointers into the record, which k now owns (no second copy). */
	k->block = block;
	k->n = n;
	k->fps = fps;
	k->leaves = leaves;
	k->owned = sb.buf;
	sb = (struct strbuf)STRBUF_INIT;
	rc = 0;
out:
	sb_release(&sb);
	free(p);
	return rc;
}

void sync_fp_free(struct sync_known *k)
{
	free(k->owned);
	k->owned = NULL;
	k->fps = k->leaves = NULL;
	k->n = 0;
}

void sync_fp_save(const char *root, const char *path, uint32_t block, uint64_t n,
		  const uint8_t *fps, const uint8_t *leaves)
{
	struct strbuf b = STRBUF_INIT;
	uint8_t sum[SM_HASH_LEN];
	char *p;

	if (sync_state_dir(root, "blocks", NULL) < 0 || n > FP_MAX_FILE / (SYNC_FP_LEN + SM_HASH_LEN))
		return;
	sb_add(&b, FP_MAGIC, 4);
	put_u32(&b, FP_VERSION);
	put_u32(&b, block);
	put_u32(&b, SYNC_FP_LEN);
	put_u64(&b, n);
	put_str(&b, path);
	put_bytes(&b, fps, n * SYNC_FP_LEN);
	put_bytes(&b, leaves, n * SM_HASH_LEN);
	sm_leaf_hash(sum, b.buf, b.len);
	sb_add(&b, sum, SM_HASH_LEN);
	p = fp_path(root, path);
	write_file_atomic(p, b.buf, b.len, 0644, NULL);
	free(p);
	sb_release(&b);
}

/* (a temporary a crash left goes too: none is being written, under the
 * project's sync lock) */
static int fp_spare(const char *name)
{
	return name[0] == '.';
}

static void fp_keep_name(const struct sm_entry *e, uint64_t min, struct strbuf *out)
{
	if (e->type == SM_FILE && e->size >= min) {
		char *name = fp_name(e->path);
		sb_adds(out, name);
		free(name);
	}
}

void sync_fp_gc(const char *root, sm_each_fn each, void *src, uint64_t min)
{
	char *dir = xasprintf("%s/.gpurun/blocks", root);

	sync_gc_dir(dir, fp_spare, fp_keep_name, min, each, src);
	free(dir);
}
