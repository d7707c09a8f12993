/* The sync manifest, digest, content hash and signature format: both sides
 * must agree byte for byte, and our signatures must be librsync's. */
#include <fcntl.h>
#include <librsync.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t.h"
#include "proto.h"
#include "sync.h"
#include "sync_delta.h"
#include "sync_manifest.h"

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

static void sample(struct sm_list *l)
{
	struct sm_entry *e;

	sm_add(l, "dir", SM_DIR);
	e = sm_add(l, "dir/a b", SM_FILE);
	e->mode = 0755;
	e->size = 3;
	e->mtime_ns = 1700000000123456789LL;
	memset(e->hash, 7, SM_HASH_LEN);
	e = sm_add(l, "link", SM_LINK);
	e->link = xstrdup("../x y");
	e = sm_add(l, "nl\nname\xff", SM_FILE);
	e->mode = 0600;
	sm_sort(l);
}

static void test_paths(void)
{
	CHECK(sm_path_ok("a"));
	CHECK(sm_path_ok("a/b c/d\ne\xff"));
	CHECK(sm_path_ok(".hidden/..x/x.."));
	CHECK(!sm_path_ok(""));
	CHECK(!sm_path_ok("/abs"));
	CHECK(!sm_path_ok("a//b"));
	CHECK(!sm_path_ok("a/"));
	CHECK(!sm_path_ok("./a"));
	CHECK(!sm_path_ok("a/./b"));
	CHECK(!sm_path_ok(".."));
	CHECK(!sm_path_ok("a/../b"));
	CHECK(!sm_path_ok("a/.."));
	char long_name[300];
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	CHECK(!sm_path_ok(long_name));
}

static void test_roundtrip_and_digest(void)
{
	struct sm_list a = { 0 }, b = { 0 }, c = { 0 };
	struct strbuf enc = STRBUF_INIT, z = STRBUF_INIT;
	uint8_t da[SM_HASH_LEN], db[SM_HASH_LEN];

	sample(&a);
	sm_encode(&a, 1, &enc);
	CHECK_EQ_INT(sm_decode(enc.buf, enc.len, 1, &b, NULL), 0);
	CHECK_EQ_INT(b.n, a.n);
	for (size_t i = 0; i < a.n && i < b.n; i++)
		CHECK(sm_same(&a.e[i], &b.e[i]));
	sm_digest(&a, da);
	sm_digest(&b, db);
	CHECK(!memcmp(da, db, SM_HASH_LEN));
	/* with_host must match */
	CHECK(sm_decode(enc.buf, enc.len, 0, &c, NULL) < 0);
	CHECK_EQ_INT(c.n, 0);
	sm_encode_z(&a, &z);
	CHECK_EQ_INT(sm_decode_z(z.buf, z.len, &c, NULL), 0);
	CHECK_EQ_INT(c.n, a.n);
	/* each described field changes the digest; host fields do not */
	b.e[1].host.ino = 99;
	sm_digest(&b, db);
	CHECK(!memcmp(da, db, SM_HASH_LEN));
	b.e[1].mtime_ns++;
	sm_digest(&b, db);
	CHECK(memcmp(da, db, SM_HASH_LEN));
	b.e[1].mtime_ns--;
	b.e[1].mode = 0644;
	sm_digest(&b, db);
	CHECK(memcmp(da, db, SM_HASH_LEN));
	sm_list_free(&a);
	sm_list_free(&b);
	sm_list_free(&c);
	sb_release(&enc);
	sb_release(&z);
}

static void test_decode_rejects(void)
{
	struct sm_list a = { 0 }, b = { 0 };
	struct strbuf enc = STRBUF_INIT;

	/* unsorted */
	sm_add(&a, "b", SM_DIR);
	sm_add(&a, "a", SM_DIR);
	sm_encode(&a, 0, &enc);
	CHECK(sm_decode(enc.buf, enc.len, 0, &b, NULL) < 0);
	sm_list_free(&a);
	sb_reset(&enc);
	/* unsafe path */
	sm_add(&a, "../etc", SM_DIR);
	sm_encode(&a, 0, &enc);
	CHECK(sm_decode(enc.buf, enc.len, 0, &b, NULL) < 0);
	/* truncated */
	sm_list_free(&a);
	sb_reset(&enc);
	sample(&a);
	sm_encode(&a, 0, &enc);
	for (size_t cut = 0; cut < enc.len; cut += 7)
		CHECK(sm_decode(enc.buf, cut, 0, &b, NULL) < 0);
	CHECK_EQ_INT(b.n, 0);
	CHECK(sm_decode_z("garbage", 7, &b, NULL) < 0);
	sm_list_free(&a);
	sm_list_free(&b);
	sb_release(&enc);
}

/* enc's bytes (the first n) in a fresh temp file, at offset 0. */
static int temp_with(const struct strbuf *enc, size_t n)
{
	FILE *f = tmpfile();
	int fd = dup(fileno(f));

	fclose(f);
	CHECK_EQ_INT(write_full(fd, enc->buf, n), 0);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

struct each_count {
	size_t n;
	struct sm_digest d;
	const struct sm_list *want;
	int same;
};

static void each_entry(void *arg, const struct sm_entry *e)
{
	struct each_count *c = arg;

	c->same &= c->n < c->want->n && sm_same(e, &c->want->e[c->n]) &&
		   !strcmp(e->path, c->want->e[c->n].path);
	c->n++;
	sm_digest_add(&c->d, e);
}

/* sm_decode_fd reads the file through a window: entries cut by its edge,
 * entries larger than its read-ahead, and every damage sm_decode refuses. */
static void test_decode_fd(void)
{
	struct sm_list a = { 0 }, b = { 0 }, c = { 0 };
	struct strbuf enc = STRBUF_INIT, path = STRBUF_INIT, big = STRBUF_INIT;
	uint8_t da[SM_HASH_LEN], db[SM_HASH_LEN];

	for (int i = 0; i < 20000; i++) {
		sb_reset(&path);
		sb_addf(&path, "d%03d/%0*d", i / 1000, 5 + i % 37, i);
		struct sm_entry *e = sm_add(&a, path.buf, i % 5 ? SM_FILE : SM_LINK);
		e->size = (uint64_t)i;
		e->mode = 0644;
		memset(e->hash, i & 0xff, SM_HASH_LEN);
		if (e->type == SM_LINK)
			e->link = xstrdup("target");
	}
	for (int i = 0; i < 70000; i++) /* a link longer than the read-ahead */
		sb_add(&big, "x/", 2);
	sm_add(&a, "zz-long-link", SM_LINK)->link = xstrdup(big.buf);
	sm_sort(&a);
	for (int host = 0; host < 2; host++) {
		int fd = temp_with(&enc, 0);
		CHECK_EQ_INT(sm_encode_fd(&a, host, fd), 0);
		/* written in pieces, the count put in at the end: the bytes
		 * sm_encode makes */
		struct strbuf whole = STRBUF_INIT, back = STRBUF_INIT;
		sm_encode(&a, host, &whole);
		lseek(fd, 0, SEEK_SET);
		sb_grow(&back, whole.len + 1);
		CHECK(read(fd, back.buf, whole.len + 1) == (ssize_t)whole.len);
		CHECK(!memcmp(back.buf, whole.buf, whole.len));
		sb_release(&whole);
		sb_release(&back);
		lseek(fd, 0, SEEK_SET);
		CHECK_EQ_INT(sm_decode_fd(fd, host, &b, NULL), 0);
		CHECK_EQ_INT(b.n, a.n);
		for (size_t i = 0; i < a.n && i < b.n; i++)
			CHECK(sm_same(&a.e[i], &b.e[i]) && !strcmp(a.e[i].path, b.e[i].path));
		sm_digest(&a, da);
		sm_digest(&b, db);
		CHECK(!memcmp(da, db, SM_HASH_LEN));
		/* an entry at a time: the same entries, the same digest */
		struct each_count cnt = { .want = &a, .same = 1 };
		lseek(fd, 0, SEEK_SET);
		sm_digest_init(&cnt.d);
		CHECK_EQ_INT(sm_decode_fd_each(fd, host, each_entry, &cnt, NULL), 0);
		sm_digest_final(&cnt.d, db);
		CHECK(cnt.n == a.n && cnt.same && !memcmp(da, db, SM_HASH_LEN));
		/* pulled: the same, then NULL with rc 0 (and NULL again) */
		struct sm_reader rd;
		const struct sm_entry *e;
		size_t got = 0, same = 0;
		lseek(fd, 0, SEEK_SET);
		CHECK_EQ_INT(sm_reader_open(&rd, fd, host, NULL, NULL), 0);
		for (; (e = sm_reader_next(&rd)); got++)
			same += got < a.n && sm_same(e, &a.e[got]) && !strcmp(e->path, a.e[got].path);
		CHECK(got == a.n && same == a.n && rd.rc == 0 && !sm_reader_next(&rd));
		sm_reader_close(&rd);
		lseek(fd, 0, SEEK_SET); /* with_host must match */
		CHECK_EQ_INT(sm_decode_fd(fd, !host, &c, NULL), GR_EPROTO);
		CHECK_EQ_INT(c.n, 0);
		close(fd);
		sm_list_free(&b);
	}
	{ /* a writer that cannot write says so at the end */
		struct sm_writer w;
		int fd = open("/dev/null", O_RDONLY);
		sm_writer_init(&w, fd, 1);
		for (size_t i = 0; i < a.n; i++)
			sm_writer_add(&w, &a.e[i]);
		CHECK_EQ_INT(sm_writer_finish(&w), -1);
		close(fd);
	}
	/* cut anywhere, or with a byte more: refused, nothing kept */
	sm_encode(&a, 0, &enc);
	for (size_t cut = 0; cut < enc.len; cut += cut < 64 ? 1 : 4099) {
		int fd = temp_with(&enc, cut);
		CHECK_EQ_INT(sm_decode_fd(fd, 0, &b, NULL), GR_EPROTO);
		close(fd);
	}
	CHECK_EQ_INT(b.n, 0);
	sb_add(&enc, "", 1);
	int fd = temp_with(&enc, enc.len);
	CHECK_EQ_INT(sm_decode_fd(fd, 0, &b, NULL), GR_EPROTO);
	close(fd);
	CHECK_EQ_INT(b.n, 0);
	/* out of order deep inside */
	sm_list_free(&a);
	sb_reset(&enc);
	for (int i = 0; i < 30000; i++) {
		sb_reset(&path);
		sb_addf(&path, "p%06d", i == 25000 ? 3 : i);
		sm_add(&a, path.buf, SM_DIR);
	}
	sm_encode(&a, 0, &enc);
	fd = temp_with(&enc, enc.len);
	CHECK_EQ_INT(sm_decode_fd(fd, 0, &b, NULL), GR_EPROTO);
	CHECK_EQ_INT(b.n, 0);
	/* one at a time, the damage is found after the entries before it */
	struct each_count cnt = { .want = &a, .same = 1 };
	lseek(fd, 0, SEEK_SET);
	sm_digest_init(&cnt.d);
	CHECK_EQ_INT(sm_decode_fd_each(fd, 0, each_entry, &cnt, NULL), GR_EPROTO);
	sm_digest_final(&cnt.d, db);
	CHECK(cnt.n == 25000 && cnt.same);
	struct sm_reader rd; /* pulled: the same */
	size_t got = 0;
	lseek(fd, 0, SEEK_SET);
	CHECK_EQ_INT(sm_reader_open(&rd, fd, 0, NULL, NULL), 0);
	while (sm_reader_next(&rd))
		got++;
	CHECK(got == 25000 && rd.rc == GR_EPROTO && !sm_reader_next(&rd));
	sm_reader_close(&rd);
	close(fd);
	sm_list_free(&a);
	sm_list_free(&b);
	sb_release(&enc);
	sb_release(&path);
	sb_release(&big);
}

static void test_block_len(void)
{
	CHECK_EQ_INT(sm_block_len(0), 2048);
	CHECK_EQ_INT(sm_block_len(4u << 20), 2048);
	CHECK_EQ_INT(sm_block_len(100000000), 10240);
	CHECK_EQ_INT(sm_block_len(5ull << 30) % 1024, 0);
	CHECK(sm_block_len(5ull << 30) > 70000);
	CHECK_EQ_INT(sm_block_len(1ull << 50), 1u << 20);
}

static void test_thash_streaming(void)
{
	size_t n = 3 * 2048 + 17;
	uint8_t *d = malloc(n), h1[SM_HASH_LEN], h2[SM_HASH_LEN], h3[SM_HASH_LEN];
	struct thash t;
	struct sigmaker m;

	fill(d, n, 1);
	thash_init(&t, n);
	thash_update(&t, d, n);
	thash_final(&t, h1);
	thash_init(&t, n);
	for (size_t i = 0; i < n; i += 1000)
		thash_update(&t, d + i, n - i < 1000 ? n - i : 1000);
	thash_final(&t, h2);
	CHECK(!memcmp(h1, h2, SM_HASH_LEN));
	sigmaker_init(&m, n, NULL);
	for (size_t i = 0; i < n; i += 333)
		sigmaker_update(&m, d + i, n - i < 333 ? n - i : 333);
	sigmaker_final(&m, NULL, h3);
	sigmaker_release(&m);
	CHECK(!memcmp(h1, h3, SM_HASH_LEN));
	d[100] ^= 1;
	thash_init(&t, n);
	thash_update(&t, d, n);
	thash_final(&t, h2);
	CHECK(memcmp(h1, h2, SM_HASH_LEN));
	/* the empty file and a one-byte file differ */
	thash_init(&t, 0);
	thash_final(&t, h1);
	thash_init(&t, 1);
	thash_update(&t, "", 1);
	thash_final(&t, h2);
	CHECK(memcmp(h1, h2, SM_HASH_LEN));
	free(d);
}

/* Our full-strength signature is exactly what librsync makes. */
static void test_sig_is_librsync(void)
{
	static const size_t sizes[] = { 0, 1, 2047, 2048, 2049, 10000, 70001 };

	for (size_t s = 0; s < GR_ARRAY_SIZE(sizes); s++) {
		size_t n = sizes[s];
		uint8_t *d = malloc(n + 1), h[SM_HASH_LEN];
		struct sigmaker m;
		struct strbuf ours = STRBUF_INIT;
		fill(d, n, (unsigned)n + 3);
		sigmaker_init(&m, n, NULL);
		sigmaker_update(&m, d, n);
		sigmaker_final(&m, &ours, h);
		sigmaker_release(&m);

		size_t cap = 64 + n, produced;
		char *theirs = malloc(cap);
		rs_job_t *job = rs_sig_begin(sm_block_len(n), SM_HASH_LEN, RS_RK_BLAKE2_SIG_MAGIC);
		rs_buffers_t b = { (char *)d, n, 1, theirs, cap };
		CHECK_EQ_INT(rs_job_iter(job, &b), RS_DONE);
		rs_job_free(job);
		produced = cap - b.avail_out;
		CHECK_EQ_INT(ours.len, produced);
		CHECK(ours.len == produced && !memcmp(ours.buf, theirs, produced));
		struct sync_sig sig;
		CHECK_EQ_INT(sync_sig_parse(ours.buf, ours.len, &sig), 0);
		CHECK_EQ_INT(sig.n, (n + 2047) / 2048);
		free(theirs);
		free(d);
		sb_release(&ours);
	}
}

/* The weak sum (vector or not, by length and CPU) is the definition's,
 * for every length around the vector step and at every alignment. */
static void test_weak_sum(void)
{
	size_t big = (1u << 20) + 77;
	uint8_t *d = malloc(big + 8);
	int bad = 0;

	fill(d, big + 8, 11);
	for (size_t off = 0; off < 8; off++)
		for (size_t n = 0; n <= 1200; n++)
			if (sm_weak_sum(d + off, n) != sm_weak_sum_ref(d + off, n) && bad++ < 3)
				fprintf(stderr, "weak sum differs at offset %zu, length %zu\n", off, n);
	CHECK_EQ_INT(bad, 0);
	CHECK_EQ_INT(sm_weak_sum(d + 3, big), sm_weak_sum_ref(d + 3, big));
	memset(d, 0xff, big); /* every product at its largest */
	CHECK_EQ_INT(sm_weak_sum(d, big), sm_weak_sum_ref(d, big));
	CHECK_EQ_INT(sm_weak_sum(d, 0), 1);
	free(d);
}

static void test_refused_roots(void)
{
	CHECK(sm_root_refused("/", NULL));
	CHECK(sm_root_refused("/etc", NULL));
	CHECK(sm_root_refused("/etc/x", NULL));
	CHECK(sm_root_refused("/usr/local/src/p", NULL));
	CHECK(sm_root_refused("/var", NULL));
	CHECK(sm_root_refused("/var/lib/x", NULL));
	CHECK(sm_root_refused("/tmp", NULL));
	CHECK(sm_root_refused("/home", NULL));
	CHECK(sm_root_refused("/home/u", "/home/u"));
	CHECK(sm_root_refused("/home", "/home/u"));
	CHECK(!sm_root_refused("/home/u/proj", "/home/u"));
	CHECK(!sm_root_refused("/tmp/x", NULL));
	CHECK(!sm_root_refused("/var/tmp/x", NULL));
	CHECK(!sm_root_refused("/data/proj", NULL));
	CHECK(!sm_root_refused("/srv/proj", NULL));
	char *c = sm_clean_path("/home/u/../../etc/./");
	CHECK_STR(c, "/etc");
	free(c);
	c = sm_clean_path("//a//b/..");
	CHECK_STR(c, "/a");
	free(c);
}

static void test_client_path_check(void)
{
	CHECK_EQ_INT(sync_check_remote_path("/", NULL), GR_ECONFIG);
	CHECK_EQ_INT(sync_check_remote_path("~", NULL), GR_ECONFIG);
	CHECK_EQ_INT(sync_check_remote_path("~/", NULL), GR_ECONFIG);
	CHECK_EQ_INT(sync_check_remote_path("~/..", NULL), GR_ECONFIG);
	CHECK_EQ_INT(sync_check_remote_path(".", NULL), GR_ECONFIG);
	CHECK_EQ_INT(sync_check_remote_path("", NULL), GR_ECONFIG);
	CHECK_EQ_INT(sync_check_remote_path("$HOME", NULL), GR_ECONFIG);
	CHECK_EQ_INT(sync_check_remote_path("/etc", NULL), GR_ECONFIG);
	CHECK_EQ_INT(sync_check_remote_path("/usr/../etc/x", NULL), GR_ECONFIG);
	CHECK_EQ_INT(sync_check_remote_path("proj/..", NULL), GR_ECONFIG);
	CHECK_EQ_INT(sync_check_remote_path("~/proj", NULL), 0);
	CHECK_EQ_INT(sync_check_remote_path("proj", NULL), 0);
	CHECK_EQ_INT(sync_check_remote_path("/data/proj", NULL), 0);
}

static int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* sm_sort (indexes, then the permutation's cycles) gives strcmp order,
 * keeps equal paths in the order they were added, and pooled paths
 * (sm_add_pooled) live and die with their list beside malloc'd ones. */
static void test_sort_and_pool(void)
{
	enum { N = 3000 };
	struct sm_list l = { 0 };
	char *want[N];
	unsigned seed = 7;

	for (int i = 0; i < N; i++) {
		char p[64];
		seed = seed * 1103515245u + 12345u;
		snprintf(p, sizeof(p), "d%u/%s%u", seed % 13, (seed >> 8) % 3 ? "f" : "f-", (seed >> 12) % 97);
		struct sm_entry *e = i % 3 ? sm_add_pooled(&l, p, SM_FILE) : sm_add(&l, p, SM_FILE);
		e->size = (uint64_t)i; /* the order added */
		want[i] = xstrdup(p);
	}
	CHECK(l.pool != NULL);
	qsort(want, N, sizeof(*want), cmp_strp);
	sm_sort(&l);
	CHECK_EQ_INT(l.n, N);
	for (int i = 0; i < N; i++) {
		CHECK_STR(l.e[i].path, want[i]);
		if (i && !strcmp(l.e[i - 1].path, l.e[i].path))
			CHECK(l.e[i - 1].size < l.e[i].size);
		free(want[i]);
	}
	sm_entry_release(&l.e[0]); /* a pooled path is not freed alone */
	sm_entry_release(&l.e[1]);
	sm_list_free(&l);
	CHECK(l.pool == NULL && l.e == NULL);
}

int main(void)
{
	RUN(test_paths);
	RUN(test_roundtrip_and_digest);
	RUN(test_decode_rejects);
	RUN(test_decode_fd);
	RUN(test_block_len);
	RUN(test_thash_streaming);
	RUN(test_sig_is_librsync);
	RUN(test_weak_sum);
	RUN(test_refused_roots);
	RUN(test_client_path_check);
	RUN(test_sort_and_pool);
	return T_DONE();
}
