/* Large-file transfer and the local index against real files in a temp
 * folder: deltas made by sync_send_file (aligned blocks by hash, the rest
 * by librsync's rolling search) must rebuild the new version with
 * librsync's own rs_patch, the signature derived for the cache must be the
 * one a full pass would make, a rewritten file must be declined, and the
 * stat cache must hash what changed and only that. */
#include <fcntl.h>
#include <librsync.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "t.h"
#include "sync_delta.h"
#include "sync_fp.h"
#include "sync_index.h"

static char tmpdir[] = "/tmp/gpurun-test-sync-XXXXXX";

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

static char *write_tmp(const char *name, const void *p, size_t n)
{
	char *path = xasprintf("%s/%s", tmpdir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write_full(fd, p, n) < 0)
		abort();
	close(fd);
	return path;
}

static int collect(void *arg, const void *p, size_t n)
{
	sb_add(arg, p, n);
	return 0;
}

struct mem { const uint8_t *p; size_t n; };

static rs_result copy_from(void *arg, rs_long_t pos, size_t *len, void **buf)
{
	struct mem *m = arg;

	if (pos < 0 || (size_t)pos >= m->n)
		return RS_INPUT_ENDED;
	if (*len > m->n - (size_t)pos)
		*len = m->n - (size_t)pos;
	memcpy(*buf, m->p + pos, *len);
	return RS_DONE;
}

/* Decompress the delta and apply it to old with librsync. */
static int patch(const struct strbuf *z, const uint8_t *old, size_t oldn, struct strbuf *out)
{
	size_t cap = 64u << 20;
	char *delta = malloc(cap);
	size_t dn = ZSTD_decompress(delta, cap, z->buf, z->len);
	struct mem m = { old, oldn };
	int rc = -1;

	if (!ZSTD_isError(dn)) {
		rs_job_t *job = rs_patch_begin(copy_from, &m);
		sb_grow(out, cap);
		rs_buffers_t b = { delta, dn, 1, out->buf, cap };
		rs_result r = rs_job_iter(job, &b);
		rs_job_free(job);
		out->len = cap - b.avail_out;
		rc = r == RS_DONE ? 0 : -1;
	}
	free(delta);
	return rc;
}

static void full_sig(const uint8_t *p, size_t n, struct strbuf *sig, uint8_t hash[SM_HASH_LEN])
{
	struct sigmaker m;

	sigmaker_init(&m, n, NULL);
	sigmaker_update(&m, p, n);
	sigmaker_final(&m, sig, hash);
	sigmaker_release(&m);
}

/* Send new as a delta against old's signature; check it rebuilds new. */
static void roundtrip(const uint8_t *old, size_t oldn, const uint8_t *new, size_t newn,
		      int expect_declined, uint64_t max_literal)
{
	struct strbuf oldsig = STRBUF_INIT, newsig = STRBUF_INIT, z = STRBUF_INIT,
		      out = STRBUF_INIT;
	uint8_t oh[SM_HASH_LEN], nh[SM_HASH_LEN], *leaves = NULL, lh[SM_HASH_LEN];
	struct sync_sig sig;
	struct sync_send_res res = { 0 };
	struct gr_err err = { 0 };
	char *path = write_tmp("new", new, newn);

	full_sig(old, oldn, &oldsig, oh);
	full_sig(new, newn, &newsig, nh);
	CHECK_EQ_INT(sync_sig_parse(oldsig.buf, oldsig.len, &sig), 0);
	CHECK_EQ_INT(sync_hash_file(path, newn, lh, &leaves, &err), 0);
	CHECK(!memcmp(lh, nh, SM_HASH_LEN));
	int fd = open(path, O_RDONLY);
	struct sync_send in = { fd, path, newn, nh, leaves, &sig, collect, &z };
	CHECK_EQ_INT(sync_send_file(&in, &res, &err), 0);
	close(fd);
	CHECK_EQ_INT(res.declined, expect_declined);
	if (!expect_declined) {
		CHECK_EQ_INT(patch(&z, old, oldn, &out), 0);
		CHECK_EQ_INT(out.len, newn);
		CHECK(out.len == newn && !memcmp(out.buf, new, newn));
		CHECK(res.literal <= max_literal);
		/* the signature derived for the cache is the full one */
		CHECK_EQ_INT(res.sig.len, newsig.len);
		CHECK(res.sig.len == newsig.len && !memcmp(res.sig.buf, newsig.buf, newsig.len));
	} else {
		CHECK_EQ_INT(z.len, 0);
	}
	free(leaves);
	free(path);
	sb_release(&oldsig);
	sb_release(&newsig);
	sb_release(&z);
	sb_release(&out);
	sb_release(&res.sig);
}

static void test_delta_in_place(void)
{
	size_t n = 6u << 20; /* above 4 MiB: a block length other than 2048 */
	uint8_t *old = malloc(n), *new = malloc(n);

	fill(old, n, 1);
	memcpy(new, old, n);
	fill(new + n / 2, 100000, 2);
	roundtrip(old, n, new, n, 0, 100000 + 2 * sm_block_len(n));
	free(old);
	free(new);
}

/* An edit in place whose new bytes hold old blocks at offsets off the
 * block grid: the quick scan of changed regions (a rolling weak sum
 * against the old blocks' index) must find them, not send them as
 * literals; and a region with none of them goes as literals at once. */
static void test_delta_in_place_holding_old_blocks(void)
{
	size_t n = 6u << 20, b = sm_block_len(n);
	uint8_t *old = malloc(n), *new = malloc(n);

	fill(old, n, 5);
	memcpy(new, old, n);
	fill(new + n / 2, 300000, 6);
	memcpy(new + n / 2 + 100001, old + 1000 * b, 3 * b); /* three old blocks, moved */
	fill(new + n / 4, 50000, 7);                          /* and a region with none */
	roundtrip(old, n, new, n, 0, 300000 - 3 * b + 50000 + 4 * b);
	free(old);
	free(new);
}

/* An old version of equal blocks (zeros, as in a sparse or padded
 * checkpoint) with a change that holds one of them off the grid: the
 * index of old blocks keeps one of equal blocks (built in linear time)
 * and the delta is right. */
static void test_delta_equal_blocks(void)
{
	size_t n = 64u << 20, b = sm_block_len(n);
	uint8_t *old = calloc(1, n), *new = calloc(1, n);

	fill(old + n / 3, 200000, 8);
	memcpy(new, old, n);
	fill(new + n / 2, 300000, 9);
	memset(new + n / 2 + 1001, 0, b); /* a zero block, moved */
	roundtrip(old, n, new, n, 0, 300000 + 2 * b);
	free(old);
	free(new);
}

static void test_delta_shifted(void)
{
	size_t n = 3u << 20;
	uint8_t *old = malloc(n), *new = malloc(n + 333);

	fill(old, n, 3);
	fill(new, 333, 4); /* an insertion at the start moves every block */
	memcpy(new + 333, old, n);
	roundtrip(old, n, new, n + 333, 0, 333 + 2 * 2048);
	free(old);
	free(new);
}

static void test_delta_append_truncate(void)
{
	size_t n = 2u << 20;
	uint8_t *old = malloc(n + 5000), *new = malloc(n + 5000);

	fill(old, n, 5);
	memcpy(new, old, n);
	fill(new + n, 5000, 6);
	roundtrip(old, n, new, n + 5000, 0, 5000 + 2048);
	roundtrip(new, n + 5000, old, n - 1000, 0, 2048);
	free(old);
	free(new);
}

static void test_rewritten_is_declined(void)
{
	size_t n = 1u << 20;
	uint8_t *old = malloc(n), *new = malloc(n);

	fill(old, n, 7);
	fill(new, n, 8);
	roundtrip(old, n, new, n, 1, 0);
	free(old);
	free(new);
}

static void test_whole_file(void)
{
	size_t n = 300000;
	uint8_t *d = malloc(n), h[SM_HASH_LEN], lh[SM_HASH_LEN];
	struct strbuf z = STRBUF_INIT, sig = STRBUF_INIT;
	struct sync_send_res res = { 0 };
	struct gr_err err = { 0 };

	fill(d, n, 9);
	char *path = write_tmp("whole", d, n);
	full_sig(d, n, &sig, h);
	CHECK_EQ_INT(sync_hash_file(path, n, lh, NULL, &err), 0);
	CHECK(!memcmp(lh, h, SM_HASH_LEN));
	int fd = open(path, O_RDONLY);
	struct sync_send in = { fd, path, n, h, NULL, NULL, collect, &z };
	CHECK_EQ_INT(sync_send_file(&in, &res, &err), 0);
	uint8_t *back = malloc(n);
	CHECK_EQ_INT(ZSTD_decompress(back, n, z.buf, z.len), n);
	CHECK(!memcmp(back, d, n));
	CHECK(res.sig.len == sig.len && !memcmp(res.sig.buf, sig.buf, sig.len));
	/* a file that no longer matches the plan is refused */
	uint8_t wrong[SM_HASH_LEN] = { 1 };
	lseek(fd, 0, SEEK_SET);
	struct sync_send bad = { fd, path, n, wrong, NULL, NULL, collect, &z };
	struct sync_send_res r2 = { 0 };
	CHECK_EQ_INT(sync_send_file(&bad, &r2, &err), GR_ECONFLICT);
	close(fd);
	sb_release(&r2.sig);
	free(back);
	free(path);
	free(d);
	sb_release(&z);
	sb_release(&sig);
	sb_release(&res.sig);
}

static struct scan_entry entry(const char *name)
{
	char *p = xasprintf("%s/%s", tmpdir, name);
	struct stat st;
	struct scan_entry e = { 0 };

	if (lstat(p, &st) < 0)
		abort();
	e.path = (char *)name;
	e.type = S_ISDIR(st.st_mode) ? SCAN_DIR : SCAN_FILE;
	e.mode = st.st_mode & 0777;
	e.size = (uint64_t)st.st_size;
	e.mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
	e.ino = st.st_ino;
	e.dev = st.st_dev;
	free(p);
	return e;
}

static void age(const char *name, int secs)
{
	char *p = xasprintf("%s/%s", tmpdir, name);
	struct timespec ts[2] = { { time(NULL) - secs, 0 }, { time(NULL) - secs, 0 } };

	utimensat(AT_FDCWD, p, ts, 0);
	free(p);
}

/* sync_local_manifest takes the entries' paths: it gets copies. */
static int local_manifest(const struct scan_entry *e, size_t n, struct sync_index *idx,
			  struct sm_list *m, struct sync_hash_stats *hs, struct gr_err *err)
{
	struct scan_entry *c = xcalloc(n ? n : 1, sizeof(*c));

	for (size_t i = 0; i < n; i++) {
		c[i] = e[i];
		c[i].path = xstrdup(e[i].path);
		c[i].link = e[i].link ? xstrdup(e[i].link) : NULL;
	}
	int rc = sync_local_manifest(c, n, idx, m, hs, err);
	scan_free(c, n);
	return rc;
}

/* The index step as sync does it: the local manifest, hashing what is
 * unhashed, learning the hashes, saving. */
static int index_pass(struct sync_index *idx, struct scan_entry *e, size_t n,
		      struct sm_list *m, struct sync_hash_stats *hs)
{
	struct gr_err err = { 0 };
	struct sync_tree *tree = sync_tree_open(tmpdir, &err);
	int rc = 0;

	memset(hs, 0, sizeof(*hs));
	if (local_manifest(e, n, idx, m, hs, &err) < 0)
		return -1;
	for (size_t i = 0; i < m->n && !rc; i++)
		if ((m->e[i].flags & SM_F_UNHASHED) &&
		    sync_hash_entry(tree, NULL, &m->e[i], NULL, hs, &err) < 0 &&
		    err.code != GR_ENOTFOUND)
			rc = -1;
	sync_tree_close(tree);
	if (rc)
		return rc;
	return sync_index_save(tmpdir, idx, m, &err);
}

static void test_index_caches_hashes(void)
{
	struct sync_index *idx = sync_index_load(tmpdir);
	struct sync_hash_stats hs;
	struct sm_list m = { 0 };
	struct gr_err err = { 0 };
	struct sync_tree *tree = sync_tree_open(tmpdir, &err);

	char *sub = xasprintf("%s/sub", tmpdir);
	mkdir(sub, 0755);
	free(sub);
	free(write_tmp("sub/one", "one", 3));
	free(write_tmp("two", "two!", 4));
	age("sub/one", 3600);
	age("two", 3600);
	struct scan_entry e[2] = { entry("sub/one"), entry("two") };
	CHECK_EQ_INT(index_pass(idx, e, 2, &m, &hs), 0);
	CHECK_EQ_INT(m.n, 3); /* the parent folder is added */
	CHECK_STR(m.e[0].path, "sub");
	CHECK_EQ_INT(m.e[0].type, SM_DIR);
	CHECK_EQ_INT(hs.files_hashed, 2);
	sync_index_free(idx);
	sm_list_free(&m);

	/* unchanged: from the cache, hashed already */
	idx = sync_index_load(tmpdir);
	CHECK_EQ_INT(local_manifest(e, 2, idx, &m, &hs, &err), 0);
	CHECK_EQ_INT(hs.files_cached, 2);
	CHECK(!(m.e[1].flags & SM_F_UNHASHED) && !(m.e[2].flags & SM_F_UNHASHED));
	uint8_t h[SM_HASH_LEN];
	char *two = xasprintf("%s/two", tmpdir);
	sync_hash_file(two, 4, h, NULL, &err);
	CHECK(!memcmp(m.e[2].hash, h, SM_HASH_LEN));
	sm_list_free(&m);

	/* changed (same size, new mtime): unhashed until hashed, then new */
	free(write_tmp("two", "TWO!", 4));
	age("two", 1800);
	e[1] = entry("two");
	CHECK_EQ_INT(local_manifest(e, 2, idx, &m, &hs, &err), 0);
	CHECK(m.e[2].flags & SM_F_UNHASHED);
	CHECK(!(m.e[1].flags & SM_F_UNHASHED));
	CHECK_EQ_INT(sync_hash_entry(tree, NULL, &m.e[2], NULL, &hs, &err), 0);
	CHECK(memcmp(m.e[2].hash, h, SM_HASH_LEN));
	/* an entry left unhashed is not saved: it is hashed next time */
	CHECK_EQ_INT(sync_index_save(tmpdir, idx, &m, &err), 0);
	sm_list_free(&m);
	free(write_tmp("two", "2wo!", 4));
	age("two", 900);
	e[1] = entry("two");
	CHECK_EQ_INT(local_manifest(e, 2, idx, &m, &hs, &err), 0);
	/* "two" never hashed this time */
	CHECK_EQ_INT(sync_index_save(tmpdir, idx, &m, &err), 0);
	sync_index_free(idx);
	sm_list_free(&m);
	idx = sync_index_load(tmpdir);
	CHECK_EQ_INT(local_manifest(e, 2, idx, &m, &hs, &err), 0);
	CHECK(m.e[2].flags & SM_F_UNHASHED);
	sm_list_free(&m);

	/* a file that vanished since the scan */
	unlink(two);
	free(two);
	CHECK_EQ_INT(local_manifest(e, 2, idx, &m, &hs, &err), 0);
	CHECK_EQ_INT(sync_hash_entry(tree, NULL, &m.e[2], NULL, &hs, &err), GR_ENOTFOUND);
	sm_list_free(&m);
	sync_index_free(idx);
	sync_tree_close(tree);
}

static void test_racy_files_are_rehashed(void)
{
	struct sync_index *idx = sync_index_load(tmpdir);
	struct sync_hash_stats hs;
	struct sm_list m = { 0 };

	free(write_tmp("fresh", "x", 1)); /* modified just now */
	struct scan_entry e[1] = { entry("fresh") };
	CHECK_EQ_INT(index_pass(idx, e, 1, &m, &hs), 0);
	sm_list_free(&m);
	CHECK_EQ_INT(index_pass(idx, e, 1, &m, &hs), 0);
	CHECK_EQ_INT(hs.files_hashed, 1); /* too close to the last scan to trust */
	sm_list_free(&m);
	sync_index_free(idx);
}

/* The index is read in step with the scan: entries the scan lacks are
 * passed over, and damage anywhere (even after the last file scanned)
 * leaves none of it used, what was taken before the damage included. */
static void test_index_read_in_step(void)
{
	struct sync_index *idx = sync_index_load(tmpdir);
	struct sync_hash_stats hs;
	struct sm_list m = { 0 };
	struct gr_err err = { 0 };
	char *ipath = xasprintf("%s/.gpurun/index", tmpdir);
	struct strbuf good = STRBUF_INIT;

	free(write_tmp("a1", "a", 1));
	free(write_tmp("b2", "bb", 2));
	free(write_tmp("c3", "ccc", 3));
	age("a1", 3600);
	age("b2", 3600);
	age("c3", 3600);
	struct scan_entry e[3] = { entry("a1"), entry("b2"), entry("c3") };
	CHECK_EQ_INT(index_pass(idx, e, 3, &m, &hs), 0);
	sm_list_free(&m);
	CHECK_EQ_INT(read_file(ipath, &good, &err), 0);
	/* only the middle one scanned: found past the first */
	CHECK_EQ_INT(local_manifest(&e[1], 1, idx, &m, &hs, &err), 0);
	CHECK_EQ_INT(hs.files_cached, 1);
	CHECK(m.n == 1 && !(m.e[0].flags & SM_F_UNHASHED));
	sm_list_free(&m);
	/* cut inside the last entry: the first two are not used either */
	for (size_t cut = 1; cut <= 40; cut += 13) {
		CHECK_EQ_INT(write_file_atomic(ipath, good.buf, good.len - cut, 0644, &err), 0);
		memset(&hs, 0, sizeof(hs));
		CHECK_EQ_INT(local_manifest(e, 3, idx, &m, &hs, &err), 0);
		CHECK_EQ_INT(hs.files_cached, 0);
		for (size_t i = 0; i < m.n; i++) {
			uint8_t zero[SM_HASH_LEN] = { 0 };
			CHECK(m.e[i].flags & SM_F_UNHASHED);
			CHECK(!memcmp(m.e[i].hash, zero, SM_HASH_LEN));
		}
		sm_list_free(&m);
	}
	/* the same when only the first file is scanned */
	CHECK_EQ_INT(write_file_atomic(ipath, good.buf, good.len - 1, 0644, &err), 0);
	memset(&hs, 0, sizeof(hs));
	CHECK_EQ_INT(local_manifest(e, 1, idx, &m, &hs, &err), 0);
	CHECK(hs.files_cached == 0 && (m.e[0].flags & SM_F_UNHASHED));
	sm_list_free(&m);
	/* whole again: all three from it */
	CHECK_EQ_INT(write_file_atomic(ipath, good.buf, good.len, 0644, &err), 0);
	memset(&hs, 0, sizeof(hs));
	CHECK_EQ_INT(local_manifest(e, 3, idx, &m, &hs, &err), 0);
	CHECK_EQ_INT(hs.files_cached, 3);
	sm_list_free(&m);
	sb_release(&good);
	free(ipath);
	sync_index_free(idx);
}

/* Raw zstd frames (zraw): any size, fed in any pieces, between ordinary
 * frames, must decode to the bytes given, with the window limit the
 * client sets (8 MiB) and with a one-shot decoder, and each block must
 * stay within 128 KiB. */
static void test_zraw_frames(void)
{
	static const size_t sizes[] = { 0, 1, 4095, 128 << 10, (128 << 10) + 1, (1 << 20) + 7 };
	size_t max = (1 << 20) + 7;
	uint8_t *data = xmalloc(max), *back = xmalloc(3 * max + 64);

	fill(data, max, 7);
	for (size_t i = 0; i < GR_ARRAY_SIZE(sizes); i++) {
		struct strbuf out = STRBUF_INIT, want = STRBUF_INIT;
		struct zraw r = { collect, &out };
		size_t n = sizes[i], cap = ZSTD_compressBound(100);
		/* an ordinary frame, a raw one fed in uneven pieces, another */
		sb_grow(&out, cap);
		out.len = ZSTD_compress(out.buf, cap, "before", 6, 3);
		CHECK(!ZSTD_isError(out.len));
		sb_add(&want, "before", 6);
		CHECK_EQ_INT(zraw_begin(&r), 0);
		for (size_t off = 0, k = 1; off < n; off += k, k = k * 3 + 1000) {
			if (k > n - off)
				k = n - off;
			CHECK_EQ_INT(zraw_put(&r, data + off, k), 0);
		}
		CHECK_EQ_INT(zraw_end(&r), 0);
		sb_add(&want, data, n);
		sb_grow(&out, cap);
		size_t c = ZSTD_compress(out.buf + out.len, cap, "after", 5, 3);
		CHECK(!ZSTD_isError(c));
		out.len += c;
		sb_add(&want, "after", 5);

		ZSTD_DStream *z = ZSTD_createDStream();
		ZSTD_DCtx_setParameter(z, ZSTD_d_windowLogMax, 23);
		ZSTD_inBuffer zi = { out.buf, out.len, 0 };
		ZSTD_outBuffer zo = { back, 3 * max + 64, 0 };
		while (zi.pos < zi.size) {
			size_t rc = ZSTD_decompressStream(z, &zo, &zi);
			CHECK(!ZSTD_isError(rc));
			if (ZSTD_isError(rc))
				break;
		}
		CHECK_EQ_INT(zo.pos, want.len);
		CHECK(zo.pos == want.len && !memcmp(back, want.buf, want.len));
		ZSTD_freeDStream(z);
		size_t d = ZSTD_decompress(back, 3 * max + 64, out.buf, out.len);
		CHECK(!ZSTD_isError(d) && d == want.len && !memcmp(back, want.buf, want.len));
		sb_release(&out);
		sb_release(&want);
	}
	free(data);
	free(back);
}

/* Block fingerprints (sync_fp.h): an edit hashes only the blocks it
 * touched, the content hash and block hashes are those of a full pass,
 * and a damaged, foreign or differently cut record only costs the
 * shortcut. */
static void rehash(struct sync_tree *tree, const char *name, size_t n, struct sm_entry *m,
		   struct sync_hash_stats *hs, uint8_t **lv)
{
	struct gr_err err = { 0 };
	struct stat st;
	char *path = xasprintf("%s/%s", tmpdir, name);

	stat(path, &st);
	memset(m, 0, sizeof(*m));
	m->path = (char *)name;
	m->size = n;
	m->type = SM_FILE;
	m->dev = (uint64_t)st.st_dev;
	m->ino = (uint64_t)st.st_ino;
	memset(hs, 0, sizeof(*hs));
	CHECK_EQ_INT(sync_hash_entry(tree, tmpdir, m, lv, hs, &err), 0);
	/* The same as a full pass, whatever was reused. */
	uint8_t h[SM_HASH_LEN], *full = NULL;
	CHECK_EQ_INT(sync_hash_file(path, n, h, &full, &err), 0);
	CHECK(!memcmp(h, m->hash, SM_HASH_LEN));
	uint32_t block = sm_block_len(n);
	CHECK(!memcmp(full, *lv, (n + block - 1) / block * SM_HASH_LEN));
	free(full);
	free(path);
}

static void test_block_fingerprints(void)
{
	struct gr_err err = { 0 };
	struct sync_tree *tree = sync_tree_open(tmpdir, &err);
	struct sync_hash_stats hs;
	struct sm_entry m;
	size_t n = (size_t)9 << 20;
	uint32_t block = sm_block_len(n);
	uint8_t *p = xmalloc(n), *lv = NULL;

	fill(p, n, 7);
	free(write_tmp("fp.bin", p, n));
	rehash(tree, "fp.bin", n, &m, &hs, &lv); /* no record yet: all hashed */
	CHECK_EQ_INT(hs.bytes_reused, 0);
	free(lv);
	rehash(tree, "fp.bin", n, &m, &hs, &lv); /* unchanged: every block kept */
	CHECK_EQ_INT(hs.bytes_reused / block, (n + block - 1) / block);
	free(lv);
	/* two blocks edited: those two hashed, the rest kept */
	p[5 * block + 3] ^= 1;
	p[n - 1] ^= 0x80;
	free(write_tmp("fp.bin", p, n));
	rehash(tree, "fp.bin", n, &m, &hs, &lv);
	CHECK_EQ_INT(hs.bytes_reused / block, (n + block - 1) / block - 2);
	free(lv);
	/* a damaged record (a byte of a leaf flipped): not used */
	char *rec = NULL;
	{
		char *dir = xasprintf("%s/.gpurun/blocks", tmpdir);
		char *cmd = xasprintf("f=$(ls '%s' | head -n1); printf '\\377' | "
				      "dd of='%s'/$f bs=1 seek=200 conv=notrunc 2>/dev/null", dir, dir);
		CHECK_EQ_INT(system(cmd), 0);
		free(cmd);
		rec = dir;
	}
	p[0] ^= 1;
	free(write_tmp("fp.bin", p, n));
	rehash(tree, "fp.bin", n, &m, &hs, &lv);
	CHECK_EQ_INT(hs.bytes_reused, 0);
	free(lv);
	/* another path's record is not this file's */
	free(write_tmp("fp2.bin", p, n));
	rehash(tree, "fp2.bin", n, &m, &hs, &lv);
	CHECK_EQ_INT(hs.bytes_reused, 0);
	free(lv);
	/* cut differently (a size with another block length): all hashed */
	size_t n2 = n * 4;
	uint8_t *q = xmalloc(n2);
	memcpy(q, p, n);
	fill(q + n, n2 - n, 9);
	free(write_tmp("fp.bin", q, n2));
	CHECK(sm_block_len(n2) != block);
	rehash(tree, "fp.bin", n2, &m, &hs, &lv);
	CHECK_EQ_INT(hs.bytes_reused, 0);
	free(lv);
	/* gc: the records of paths no longer large files go */
	struct sm_list keep = { 0 };
	sm_reserve(&keep, 1);
	keep.e[0] = m;
	keep.e[0].path = (char *)"fp.bin";
	keep.n = 1;
	sync_fp_gc(tmpdir, sm_list_each, &keep, 1);
	char *cnt = xasprintf("test $(ls '%s' | wc -l) = 1", rec);
	CHECK_EQ_INT(system(cnt), 0);
	free(cnt);
	keep.n = 0;
	sync_fp_gc(tmpdir, sm_list_each, &keep, 1);
	cnt = xasprintf("test $(ls '%s' | wc -l) = 0", rec);
	CHECK_EQ_INT(system(cnt), 0);
	free(cnt);
	free(keep.e);
	free(rec);
	free(q);
	free(p);
	sync_tree_close(tree);
}

static int each_fails(void *src, void (*fn)(void *arg, const struct sm_entry *e), void *arg)
{
	sm_list_each(src, fn, arg); /* gives them all, then says it could not */
	return -1;
}

/* The signature cache keeps what a manifest's files name, given as a
 * stream: the folder is listed, not a name held for every file. */
static void test_sig_gc_streamed(void)
{
	uint8_t h[3][SM_HASH_LEN];
	struct sm_list keep = { 0 };
	char *dir = xasprintf("%s/.gpurun/sigs", tmpdir);

	for (int i = 0; i < 3; i++) {
		memset(h[i], 0x11 * (i + 1), SM_HASH_LEN);
		CHECK_EQ_INT(sync_sig_save(tmpdir, h[i], "sig", 3, NULL), 0);
	}
	char *odd = xasprintf("%s/not-a-signature", dir), *dot = xasprintf("%s/.hidden", dir);
	free(write_tmp(".gpurun/sigs/not-a-signature", "x", 1));
	free(write_tmp(".gpurun/sigs/.hidden", "x", 1));
	struct sm_entry *e = sm_add(&keep, "a.bin", SM_FILE);
	memcpy(e->hash, h[1], SM_HASH_LEN);
	sm_add(&keep, "b", SM_DIR); /* (a folder's zero hash names nothing) */
	/* a stream that cannot be read whole removes nothing */
	sync_sig_gc(tmpdir, each_fails, &keep);
	for (int i = 0; i < 3; i++)
		CHECK_EQ_INT(sync_sig_have(tmpdir, h[i]), 1);
	sync_sig_gc(tmpdir, sm_list_each, &keep);
	CHECK_EQ_INT(sync_sig_have(tmpdir, h[0]), 0);
	CHECK_EQ_INT(sync_sig_have(tmpdir, h[1]), 1);
	CHECK_EQ_INT(sync_sig_have(tmpdir, h[2]), 0);
	CHECK_EQ_INT(access(odd, F_OK), 0);
	CHECK_EQ_INT(access(dot, F_OK), 0);
	sm_list_free(&keep);
	free(odd);
	free(dot);
	free(dir);
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(test_delta_in_place);
	RUN(test_delta_in_place_holding_old_blocks);
	RUN(test_delta_equal_blocks);
	RUN(test_delta_shifted);
	RUN(test_delta_append_truncate);
	RUN(test_rewritten_is_declined);
	RUN(test_whole_file);
	RUN(test_index_caches_hashes);
	RUN(test_racy_files_are_rehashed);
	RUN(test_index_read_in_step);
	RUN(test_zraw_frames);
	RUN(test_block_fingerprints);
	RUN(test_sig_gc_streamed);
	char *rm = xasprintf("rm -rf '%s'", tmpdir);
	if (system(rm) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	free(rm);
	return T_DONE();
}
