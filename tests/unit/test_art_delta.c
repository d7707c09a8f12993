/* Pulls by delta without a network: the client signs its copy (cli/
 * art_delta.c), the agent's packer (compiled in from remote/) sends the
 * host's file as a delta entry against it, the client's extractor applies
 * it and checks the host's content hash. And a host that lies: a delta
 * entry the client did not ask for, one whose output runs past the size
 * it announced, one that copies from outside the basis, one whose result
 * does not have the hash it announced. Each is refused, the copy in place
 * stays as it was, and a note makes the next pull fetch the file whole. */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "t.h"

#include "job_glob.h"
#include "job_delta.h"
#include "job_pack.h"
#include "job_snap.h"
#include "art_delta.h"
#include "art_limits.h"
#include "pull.h"
#include "pull_below.h"
#include "pull_extract.h"
#include "job_proto.h"

static char tmp[256];
#define SIZE (6u << 20)

static void put(const char *rel, const uint8_t *p, size_t n)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", tmp, rel);
	char *slash = strrchr(path, '/');
	*slash = '\0';
	mkdir_p(path, 0755, NULL);
	*slash = '/';
	CHECK(write_file_atomic(path, p, n, 0644, NULL) == 0);
}

static int same(const char *a, const char *b)
{
	char q[1200];
	snprintf(q, sizeof(q), "cmp -s '%s/%s' '%s/%s'", tmp, a, tmp, b);
	return system(q) == 0;
}

/* The basis runs/ck.bin, the host's job/ck.bin: the basis with 10 %
 * rewritten in place. */
static uint8_t *setup(void)
{
	uint8_t *b = xmalloc(SIZE);
	srand(7);
	for (size_t i = 0; i < SIZE; i++)
		b[i] = (uint8_t)rand();
	put("runs/ck.bin", b, SIZE);
	for (size_t k = 0; k < 10; k++) /* 10 pieces of 64 KiB spread over it */
		for (size_t i = 0; i < 65536; i++)
			b[k * (SIZE / 10) + i] ^= 0x5a;
	put("job/ck.bin", b, SIZE);
	return b;
}

/* The client's side before the pull: its basis signed, the signature
 * staged where the agent's ART_SIG handler puts it. */
static void sign(struct art_delta *d, struct pack_sig *ps)
{
	char p[400];
	struct strbuf sig = STRBUF_INIT;

	memset(d, 0, sizeof(*d));
	snprintf(d->token, sizeof(d->token), "0123456789abcdef");
	d->v = xcalloc(1, sizeof(*d->v));
	d->n = 1;
	struct art_basis *b = &d->v[0];
	snprintf(p, sizeof(p), "%s/runs/ck.bin", tmp);
	b->fd = open(p, O_RDONLY);
	CHECK(b->fd >= 0 && fstat(b->fd, &b->st) == 0);
	b->path = xstrdup("ck.bin");
	b->from = xstrdup(p);
	b->target = SIZE;
	b->block = sm_block_len(SIZE);
	CHECK(art_delta_sign(b, NULL, &sig) == 0);
	snprintf(p, sizeof(p), "%s/job", tmp);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/job/.gpurun", tmp);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/job", tmp);
	struct gr_err err = { 0 };
	CHECK_EQ_INT(job_delta_stage(p, d->token, 0, 0, sig.buf, sig.len, &err), 0);
	ps->path = xstrdup("ck.bin");
	ps->sigpath = job_delta_sig_path(p, d->token, 0);
	sb_release(&sig);
}

/* Pack job/ as the agent does for a pull with that signature. */
static int pack_delta_archive(struct pack_sig *ps, struct pack_stats *st)
{
	const char *pat[] = { "ck.bin" };
	char dir[300], state[320], path[320];
	struct gr_err err = { 0 };
	snprintf(dir, sizeof(dir), "%s/job", tmp);
	snprintf(state, sizeof(state), "%s/.gpurun", dir);
	snprintf(path, sizeof(path), "%s/pull.tar.zst", tmp);
	struct pack_opts o = { .sigs = ps, .nsigs = 1, .tmpfd = open(state, O_RDONLY | O_DIRECTORY) };
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK_EQ_INT(job_pack(dir, pat, 1, NULL, 0, &o, fd, st, &err), 0);
	close(o.tmpfd);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static int extract(int fd, struct art_delta *d, struct gr_err *err)
{
	char dest[300];
	uint32_t files = 0;
	snprintf(dest, sizeof(dest), "%s/runs", tmp);
	int rc = art_extract_announced(fd, dest, 0, d, &files, err);
	if (rc < 0)
		printf("# refused as wanted: %s\n", err->msg);
	return rc;
}

static void test_roundtrip(void)
{
	struct art_delta d;
	struct pack_sig ps;
	struct pack_stats st;
	struct gr_err err = { 0 };
	free(setup());
	sign(&d, &ps);
	int fd = pack_delta_archive(&ps, &st);
	printf("# a %u-byte file, 10 %% changed: a delta of %llu bytes\n", SIZE,
	       (unsigned long long)st.bytes);
	CHECK_EQ_INT(st.deltas, 1);
	CHECK(st.bytes < SIZE / 5);
	CHECK_EQ_INT(extract(fd, &d, &err), 0);
	close(fd);
	CHECK(same("runs/ck.bin", "job/ck.bin"));
	char p[400];
	snprintf(p, sizeof(p), "%s/runs/.ck.bin.gpurun-part", tmp);
	CHECK(access(p, F_OK) < 0);
	art_delta_free(&d);
	free(ps.path);
	free(ps.sigpath);
}

/* An archive with one delta entry ck.bin: data (zstd'ed here if z), the
 * attribute value given. */
static int craft(const void *data, size_t n, int z, const char *value)
{
	char path[300];
	size_t cap = ZSTD_compressBound(n);
	void *zd = xmalloc(cap);
	if (z)
		n = ZSTD_compress(zd, cap, data, n, 1);
	else
		memcpy(zd, data, n);
	snprintf(path, sizeof(path), "%s/evil.tar.zst", tmp);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	unsigned char hdr[16] = "GRA1";
	hdr[7] = 1;
	for (int i = 0; i < 8; i++)
		hdr[8 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
	CHECK(write_full(fd, hdr, 16) == 0);
	struct archive *a = archive_write_new();
	archive_write_add_filter_zstd(a);
	archive_write_set_format_pax(a);
	archive_write_set_bytes_in_last_block(a, 1);
	archive_write_open_fd(a, fd);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "ck.bin");
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, (la_int64_t)n);
	archive_entry_xattr_add_entry(e, GR_ART_DELTA_XATTR, value, strlen(value));
	archive_write_header(a, e);
	archive_write_data(a, zd, n);
	archive_entry_free(e);
	archive_write_close(a);
	archive_write_free(a);
	free(zd);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* The basis is untouched and the next pull takes the file whole. */
static void check_kept(const uint8_t *basis_before)
{
	char p[400];
	struct strbuf sb = STRBUF_INIT;
	snprintf(p, sizeof(p), "%s/runs/ck.bin", tmp);
	CHECK(read_file(p, &sb, NULL) == 0 && sb.len == SIZE && !memcmp(sb.buf, basis_before, SIZE));
	sb_release(&sb);
	snprintf(p, sizeof(p), "%s/runs/.ck.bin.gpurun-part", tmp);
	CHECK(access(p, F_OK) < 0);
}

static uint8_t *basis_bytes(void)
{
	char p[400];
	struct strbuf sb = STRBUF_INIT;
	snprintf(p, sizeof(p), "%s/runs/ck.bin", tmp);
	CHECK(read_file(p, &sb, NULL) == 0);
	return (uint8_t *)sb.buf;
}

static void test_hostile(void)
{
	struct art_delta d;
	struct pack_sig ps;
	struct pack_stats st;
	struct gr_err err = { 0 };
	char p[400], value[128], hex[65];
	uint8_t *host = setup(), hash[SM_HASH_LEN];
	uint8_t *before = basis_bytes();
	thash_from_leaves(NULL, 0, 0, hash); /* a hash of nothing: wrong for anything */
	sign(&d, &ps);

	/* 1. A genuine delta, but this pull sent no signature for it. */
	int fd = pack_delta_archive(&ps, &st);
	CHECK(extract(fd, NULL, &err) < 0);
	CHECK(strstr(err.msg, "did not ask for") != NULL);
	close(fd);
	check_kept(before);

	/* 2. A delta whose output runs past the size it announces: one
	 * LITERAL of 100 bytes for a file of 50. */
	uint8_t lit[4 + 2 + 100 + 1] = { 0x72, 0x73, 0x02, 0x36, 0x41, 100 };
	snprintf(value, sizeof(value), "50 %064d", 0);
	fd = craft(lit, sizeof(lit), 1, value);
	d.v[0].used = 0;
	CHECK(extract(fd, &d, &err) < 0);
	CHECK(strstr(err.msg, "longer file than announced") != NULL);
	close(fd);
	check_kept(before);

	/* 3. A COPY from past the basis's end (reading what is not there). */
	uint8_t cp[4 + 1 + 8 + 8 + 1] = { 0x72, 0x73, 0x02, 0x36, 0x54 };
	for (int i = 0; i < 8; i++)
		cp[5 + i] = (uint8_t)((uint64_t)(SIZE - 10) >> (56 - 8 * i));
	cp[5 + 8 + 7] = 100;
	snprintf(value, sizeof(value), "100 %064d", 0);
	fd = craft(cp, sizeof(cp), 1, value);
	d.v[0].used = 0;
	CHECK(extract(fd, &d, &err) < 0);
	CHECK(strstr(err.msg, "outside the old file") != NULL);
	close(fd);
	check_kept(before);

	/* 4. The right delta with a wrong hash: refused, the copy stays,
	 * and a note makes the next pull take the file whole. */
	int real = pack_delta_archive(&ps, &st);
	CHECK_EQ_INT(st.deltas, 1);
	struct archive *in = archive_read_new();
	struct archive_entry *e;
	archive_read_support_filter_zstd(in);
	archive_read_support_format_tar(in);
	lseek(real, 16, SEEK_SET);
	CHECK(archive_read_open_fd(in, real, 65536) == ARCHIVE_OK);
	CHECK(archive_read_next_header(in, &e) == ARCHIVE_OK);
	size_t dn = (size_t)archive_entry_size(e);
	uint8_t *delta = xmalloc(dn);
	CHECK(archive_read_data(in, delta, dn) == (la_ssize_t)dn);
	archive_read_free(in);
	close(real);
	sm_hex(hash, hex);
	snprintf(value, sizeof(value), "%u %s", SIZE, hex);
	fd = craft(delta, dn, 0, value);
	d.v[0].used = 0;
	CHECK(extract(fd, &d, &err) < 0);
	CHECK(strstr(err.msg, "did not come out as the host has it") != NULL);
	CHECK(strstr(err.hint, "fetches it whole") != NULL);
	close(fd);
	check_kept(before);
	snprintf(p, sizeof(p), "%s/runs/.ck.bin" ART_NODELTA_SUFFIX, tmp);
	CHECK(access(p, F_OK) == 0);

	/* 5. A malformed attribute. */
	fd = craft(delta, dn, 0, "12 nothex");
	d.v[0].used = 0;
	CHECK(extract(fd, &d, &err) < 0);
	CHECK(strstr(err.msg, "malformed") != NULL);
	close(fd);
	check_kept(before);

	/* 6. A delta frame that asks for a 128 MiB window: refused before
	 * zstd allocates it. */
	{
		ZSTD_CCtx *cz = ZSTD_createCCtx();
		size_t cap = ZSTD_compressBound(sizeof(lit)) + 64, zn;
		uint8_t *zb = xmalloc(cap);
		ZSTD_CCtx_setParameter(cz, ZSTD_c_windowLog, 27);
		ZSTD_outBuffer zo = { zb, cap, 0 };
		ZSTD_inBuffer zi = { lit, sizeof(lit), 0 };
		ZSTD_compressStream2(cz, &zo, &zi, ZSTD_e_continue); /* size unknown */
		ZSTD_inBuffer none = { NULL, 0, 0 };
		while ((zn = ZSTD_compressStream2(cz, &zo, &none, ZSTD_e_end)) != 0)
			CHECK(!ZSTD_isError(zn));
		snprintf(value, sizeof(value), "100 %064d", 0);
		fd = craft(zb, zo.pos, 0, value);
		d.v[0].used = 0;
		CHECK(extract(fd, &d, &err) < 0);
		CHECK(strstr(err.msg, "corrupt delta") != NULL);
		close(fd);
		check_kept(before);
		free(zb);
		ZSTD_freeCCtx(cz);
	}

	/* 7. The outer tar.zst itself asks for a 128 MiB window (libarchive's
	 * zstd filter would have allocated it): refused, nothing written. */
	{
		char path[300];
		snprintf(path, sizeof(path), "%s/plain.tar", tmp);
		struct archive *a = archive_write_new();
		archive_write_set_format_pax(a);
		archive_write_open_filename(a, path);
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, "x.bin");
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_perm(e, 0644);
		archive_entry_set_size(e, sizeof(lit));
		archive_write_header(a, e);
		archive_write_data(a, lit, sizeof(lit));
		archive_entry_free(e);
		archive_write_close(a);
		archive_write_free(a);
		struct strbuf tar = STRBUF_INIT;
		CHECK(read_file(path, &tar, NULL) == 0);
		ZSTD_CCtx *cz = ZSTD_createCCtx();
		size_t cap = ZSTD_compressBound(tar.len) + 64, zn;
		uint8_t *zb = xmalloc(cap);
		ZSTD_CCtx_setParameter(cz, ZSTD_c_windowLog, 27);
		ZSTD_outBuffer zo = { zb, cap, 0 };
		ZSTD_inBuffer zi = { tar.buf, tar.len, 0 };
		ZSTD_compressStream2(cz, &zo, &zi, ZSTD_e_continue);
		ZSTD_inBuffer none = { NULL, 0, 0 };
		while ((zn = ZSTD_compressStream2(cz, &zo, &none, ZSTD_e_end)) != 0)
			CHECK(!ZSTD_isError(zn));
		snprintf(path, sizeof(path), "%s/wide.tar.zst", tmp);
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
		unsigned char hdr[16] = "GRA1";
		hdr[7] = 1;
		for (int i = 0; i < 8; i++)
			hdr[8 + i] = (unsigned char)((uint64_t)tar.len >> (56 - 8 * i));
		CHECK(write_full(fd, hdr, 16) == 0 && write_full(fd, zb, zo.pos) == 0);
		lseek(fd, 0, SEEK_SET);
		CHECK(extract(fd, &d, &err) < 0);
		CHECK(strstr(err.msg, "not one gpurun's agent makes") != NULL);
		close(fd);
		snprintf(path, sizeof(path), "%s/runs/x.bin", tmp);
		CHECK(access(path, F_OK) < 0);
		free(zb);
		ZSTD_freeCCtx(cz);
		sb_release(&tar);
	}

	free(delta);
	free(host);
	free(before);
	art_delta_free(&d);
	free(ps.path);
	free(ps.sigpath);
}

/* The signature of a file a delta made is kept (art_sigcache.h): the next
 * sign of it comes from the cache and is byte for byte what reading the
 * file gives; a touched file or a torn entry is signed afresh. */
static struct art_basis basis_at(const char *rel)
{
	char p[400];
	struct art_basis b = { .fd = -1 };
	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	b.fd = open(p, O_RDONLY);
	CHECK(b.fd >= 0 && fstat(b.fd, &b.st) == 0);
	b.block = sm_block_len((uint64_t)b.st.st_size);
	return b;
}

static void basis_done(struct art_basis *b)
{
	close(b->fd);
	free(b->leaves);
	free(b->weak);
}

static void test_signature_kept(void)
{
	struct art_delta d;
	struct pack_sig ps;
	struct pack_stats st;
	struct gr_err err = { 0 };
	char dir[300];
	free(setup());
	sign(&d, &ps);
	snprintf(dir, sizeof(dir), "%s/sigs", tmp);
	d.sigdir = xstrdup(dir);
	int fd = pack_delta_archive(&ps, &st);
	CHECK_EQ_INT(extract(fd, &d, &err), 0);
	close(fd);
	CHECK(same("runs/ck.bin", "job/ck.bin"));
	art_delta_free(&d);
	free(ps.path);
	free(ps.sigpath);

	struct strbuf fresh = STRBUF_INIT, cached = STRBUF_INIT;
	struct art_basis a = basis_at("runs/ck.bin"), c = basis_at("runs/ck.bin");
	CHECK_EQ_INT(art_delta_sign(&a, NULL, &fresh), 0);
	CHECK_EQ_INT(art_delta_sign(&c, dir, &cached), 1);
	CHECK(fresh.len == cached.len && !memcmp(fresh.buf, cached.buf, fresh.len));
	basis_done(&a);
	basis_done(&c);
	sb_release(&cached);

	/* A torn entry: its checksum fails, it is signed afresh and dropped. */
	c = basis_at("runs/ck.bin");
	char ent[400];
	snprintf(ent, sizeof(ent), "%s/%llx-%llx", dir, (unsigned long long)c.st.st_dev,
		 (unsigned long long)c.st.st_ino);
	int efd = open(ent, O_RDWR);
	CHECK(efd >= 0 && pwrite(efd, "X", 1, 200) == 1);
	close(efd);
	CHECK_EQ_INT(art_delta_sign(&c, dir, &cached), 0);
	CHECK(fresh.len == cached.len && !memcmp(fresh.buf, cached.buf, fresh.len));
	CHECK(access(ent, F_OK) < 0);
	basis_done(&c);
	sb_release(&cached);

	/* Pulled again (the host's copy changed once more): a new entry.
	 * Then the file is touched (its ctime moves): the entry no longer
	 * matches. */
	struct art_delta d2;
	struct pack_sig ps2;
	struct strbuf host = STRBUF_INIT;
	char p[400];
	snprintf(p, sizeof(p), "%s/job/ck.bin", tmp);
	CHECK(read_file(p, &host, NULL) == 0 && host.len == SIZE);
	for (size_t i = 0; i < 65536; i++)
		host.buf[SIZE / 3 + i] ^= 0x33;
	put("job/ck.bin", (uint8_t *)host.buf, SIZE);
	sb_release(&host);
	sign(&d2, &ps2);
	d2.sigdir = xstrdup(dir);
	fd = pack_delta_archive(&ps2, &st);
	CHECK_EQ_INT(extract(fd, &d2, &err), 0);
	close(fd);
	CHECK(same("runs/ck.bin", "job/ck.bin"));
	art_delta_free(&d2);
	free(ps2.path);
	free(ps2.sigpath);
	c = basis_at("runs/ck.bin");
	CHECK_EQ_INT(art_delta_sign(&c, dir, &cached), 1);
	basis_done(&c);
	sb_release(&cached);
	c = basis_at("runs/ck.bin");
	snprintf(p, sizeof(p), "%s/runs/ck.bin", tmp);
	struct timespec now[2] = { { 0, UTIME_NOW }, { 0, UTIME_OMIT } };
	CHECK(utimensat(AT_FDCWD, p, now, 0) == 0);
	CHECK(fstat(c.fd, &c.st) == 0);
	CHECK_EQ_INT(art_delta_sign(&c, dir, &cached), 0);
	basis_done(&c);
	sb_release(&cached);
	sb_release(&fresh);
}

int main(void)
{
	snprintf(tmp, sizeof(tmp), "%s/gpurun-test-artd.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(test_roundtrip);
	RUN(test_hostile);
	RUN(test_signature_kept);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (!t_failed_cases && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	return T_DONE();
}
