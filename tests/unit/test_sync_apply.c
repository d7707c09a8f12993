/* The agent's delta applier (common/delta/sync_apply.c, compiled in here) against
 * librsync's own rs_patch: the same output for deltas made by librsync
 * (rs_delta_begin) and by gpurun's client, block hashes reused only where
 * a block really stayed in place, and malformed deltas refused. */
#include <fcntl.h>
#include <librsync.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "t.h"
#include "sync_apply.h"
#include "sync_delta.h"

static char tmpdir[] = "/tmp/gpurun-test-apply-XXXXXX";

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

static int tmpfile_with(const char *name, const void *p, size_t n)
{
	char *path = xasprintf("%s/%s", tmpdir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);

	free(path);
	if (fd < 0 || (n && write_full(fd, p, n) < 0))
		abort();
	return fd;
}

/* librsync's own delta of new against old (its default signature). */
static void rs_make_delta(const uint8_t *old, size_t oldn, const uint8_t *new, size_t newn,
			  struct strbuf *delta)
{
	size_t cap = 2 * newn + oldn + 4096;
	char *sig = malloc(cap), *out = malloc(cap);
	rs_signature_t *sumset;
	rs_job_t *job = rs_sig_begin(2048, 8, RS_RK_BLAKE2_SIG_MAGIC);
	rs_buffers_t b = { (char *)old, oldn, 1, sig, cap };

	rs_job_iter(job, &b);
	rs_job_free(job);
	size_t sign = cap - b.avail_out;
	job = rs_loadsig_begin(&sumset);
	rs_buffers_t b2 = { sig, sign, 1, NULL, 0 };
	rs_job_iter(job, &b2);
	rs_job_free(job);
	rs_build_hash_table(sumset);
	job = rs_delta_begin(sumset);
	rs_buffers_t b3 = { (char *)new, newn, 1, out, cap };
	rs_job_iter(job, &b3);
	rs_job_free(job);
	sb_add(delta, out, cap - b3.avail_out);
	rs_free_sumset(sumset);
	free(sig);
	free(out);
}

/* Apply with dapply, fed in odd-sized pieces; compare with new. */
static void check_apply(const uint8_t *old, size_t oldn, const uint8_t *new, size_t newn,
			const struct strbuf *delta)
{
	int bfd = tmpfile_with("base", old, oldn), ofd = tmpfile_with("out", NULL, 0);
	struct dapply d;
	uint8_t *got = malloc(newn + 1);

	dapply_init(&d, bfd, oldn, ofd, newn);
	for (size_t i = 0; i < delta->len; i += 777) {
		size_t k = delta->len - i < 777 ? delta->len - i : 777;
		if (dapply_feed(&d, (const uint8_t *)delta->buf + i, k) < 0) {
			fprintf(stderr, "  dapply: %s\n", d.err);
			CHECK(0);
			break;
		}
	}
	CHECK(d.done);
	CHECK_EQ_INT(d.out, newn);
	CHECK_EQ_INT(pread(ofd, got, newn, 0), newn);
	CHECK(!memcmp(got, new, newn));

	/* Block hashes: reused where allowed, they equal a full hash. */
	uint32_t b = sm_block_len(newn);
	uint64_t n = (newn + b - 1) / b;
	uint8_t *full = malloc(n * 32 + 1), *mixed = malloc(n * 32 + 1), *reuse = malloc(n + 1);
	uint8_t *oldleaves = malloc(((oldn + b - 1) / b) * 32 + 1);
	int obfd = tmpfile_with("base2", old, oldn);
	CHECK_EQ_INT(sync_hash_blocks(obfd, oldn, NULL, NULL, oldleaves), 0);
	CHECK_EQ_INT(sync_hash_blocks(ofd, newn, NULL, NULL, full), 0);
	dapply_reusable(&d, newn, reuse);
	CHECK_EQ_INT(sync_hash_blocks(ofd, newn, oldleaves, reuse, mixed), 0);
	CHECK(!memcmp(full, mixed, n * 32));
	close(obfd);
	free(full);
	free(mixed);
	free(reuse);
	free(oldleaves);
	dapply_release(&d);
	close(bfd);
	close(ofd);
	free(got);
}

static void test_librsync_deltas(void)
{
	size_t n = 300000;
	uint8_t *old = malloc(n), *new = malloc(n + 5000);

	fill(old, n, 1);
	memcpy(new, old, n);
	fill(new + 1000, 3000, 2);         /* an edit */
	memmove(new + 100005, new + 100000, n - 100005); /* a shift */
	struct strbuf d = STRBUF_INIT;
	rs_make_delta(old, n, new, n, &d);
	check_apply(old, n, new, n, &d);
	sb_reset(&d);
	rs_make_delta(old, n, old, n / 2, &d); /* truncated */
	check_apply(old, n, old, n / 2, &d);
	sb_reset(&d);
	rs_make_delta(old, 0, new, n, &d);     /* all literal */
	check_apply(old, 0, new, n, &d);
	sb_release(&d);
	free(old);
	free(new);
}

static int collect(void *arg, const void *p, size_t n)
{
	sb_add(arg, p, n);
	return 0;
}

/* gpurun's client deltas (COPY runs for blocks in place + librsync's
 * rolling search), decompressed, on a file above 4 MiB. */
static void test_client_deltas(void)
{
	size_t n = 6u << 20;
	uint8_t *old = malloc(n), *new = malloc(n), h[32];
	struct strbuf sig = STRBUF_INIT, z = STRBUF_INIT, d = STRBUF_INIT;
	struct sigmaker m;
	struct sync_sig s;
	struct sync_send_res res = { 0 };
	struct gr_err err = { 0 };

	fill(old, n, 3);
	memcpy(new, old, n);
	fill(new + n / 3, 200000, 4);
	sigmaker_init(&m, n, NULL);
	sigmaker_update(&m, old, n);
	sigmaker_final(&m, &sig, h);
	sigmaker_release(&m);
	CHECK_EQ_INT(sync_sig_parse(sig.buf, sig.len, &s), 0);
	int fd = tmpfile_with("new", new, n);
	close(fd);
	char *path = xasprintf("%s/new", tmpdir);
	sigmaker_init(&m, n, NULL);
	sigmaker_update(&m, new, n);
	sigmaker_final(&m, NULL, h);
	sigmaker_release(&m);
	fd = open(path, O_RDONLY);
	struct sync_send in = { fd, path, n, h, NULL, &s, collect, &z };
	CHECK_EQ_INT(sync_send_file(&in, &res, &err), 0);
	close(fd);
	sb_grow(&d, n + 65536);
	size_t dn = ZSTD_decompress(d.buf, n + 65536, z.buf, z.len);
	CHECK(!ZSTD_isError(dn));
	d.len = dn;
	check_apply(old, n, new, n, &d);
	free(path);
	free(old);
	free(new);
	sb_release(&sig);
	sb_release(&z);
	sb_release(&d);
	sb_release(&res.sig);
}

static void test_malformed(void)
{
	uint8_t old[100] = { 0 };
	int bfd = tmpfile_with("base", old, sizeof(old)), ofd = tmpfile_with("out", NULL, 0);
	static const uint8_t bad_magic[] = { 0x72, 0x73, 0x02, 0x37, 0 };
	static const uint8_t copy_out[] = { 0x72, 0x73, 0x02, 0x36, 0x45, 90, 20, 0 };
	static const uint8_t too_long[] = { 0x72, 0x73, 0x02, 0x36, 0x03, 'a', 'b', 'c', 0 };
	static const uint8_t unknown[] = { 0x72, 0x73, 0x02, 0x36, 0x60 };
	static const uint8_t after_end[] = { 0x72, 0x73, 0x02, 0x36, 0, 1 };
	struct dapply d;

	dapply_init(&d, bfd, sizeof(old), ofd, 100);
	CHECK(dapply_feed(&d, bad_magic, sizeof(bad_magic)) < 0);
	dapply_release(&d);
	dapply_init(&d, bfd, sizeof(old), ofd, 100);
	CHECK(dapply_feed(&d, copy_out, sizeof(copy_out)) < 0);
	CHECK(strstr(d.err, "outside") != NULL);
	dapply_release(&d);
	dapply_init(&d, bfd, sizeof(old), ofd, 2);
	CHECK(dapply_feed(&d, too_long, sizeof(too_long)) < 0);
	dapply_release(&d);
	dapply_init(&d, bfd, sizeof(old), ofd, 100);
	CHECK(dapply_feed(&d, unknown, sizeof(unknown)) < 0);
	dapply_release(&d);
	dapply_init(&d, bfd, sizeof(old), ofd, 100);
	CHECK(dapply_feed(&d, after_end, sizeof(after_end)) < 0);
	dapply_release(&d);
	close(bfd);
	close(ofd);
}

int main(void)
{
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(test_librsync_deltas);
	RUN(test_client_deltas);
	RUN(test_malformed);
	char *rm = xasprintf("rm -rf '%s'", tmpdir);
	if (system(rm) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	free(rm);
	return T_DONE();
}
