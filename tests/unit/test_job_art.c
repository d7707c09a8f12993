/* Artifacts end to end without a network: the agent's packer (compiled in
 * from remote/) makes a tar.zst, the client's extractor unpacks it; and
 * crafted hostile archives (symlinks leading out, '..' names, absolute
 * paths, hard links, writing through an existing symlink) are refused.
 * Also the artifact globs and nvidia-smi parsing. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <fnmatch.h>

#include "t.h"

#include "job_glob.h"
#include "job_gpu.h"
#include "job_delta.h"
#include "job_pack.h"
#include "job_snap.h"
#include "art_limits.h"
#include "pull.h"
#include "pull_extract.h"
#include "job_proto.h"

static char tmp[256];

/* Limits for crafted archives (no announcement): roomy, checked anyway. */
static struct art_limits roomy(void)
{
	return (struct art_limits){ .files = 100, .bytes = 1u << 30, .min_free_pct = 0 };
}

static void mk(const char *rel, const char *content)
{
	char p[512];
	snprintf(p, sizeof(p), "%s/%s", tmp, rel);
	char *slash = strrchr(p, '/');
	*slash = '\0';
	mkdir_p(p, 0755, NULL);
	*slash = '/';
	write_file_atomic(p, content, strlen(content), 0644, NULL);
}

static int slurp_eq(const char *path, const char *want)
{
	struct strbuf sb = STRBUF_INIT;
	int ok = read_file(path, &sb, NULL) == 0 && sb.len == strlen(want) &&
		 !memcmp(sb.buf, want, sb.len);
	sb_release(&sb);
	return ok;
}

static void test_glob(void)
{
	CHECK(job_glob_match("*.csv", "metrics.csv"));
	CHECK(!job_glob_match("*.csv", "sub/metrics.csv"));
	CHECK(job_glob_match("**/*.csv", "sub/deep/metrics.csv"));
	CHECK(job_glob_match("**/*.csv", "metrics.csv"));
	CHECK(job_glob_match("ckpt/**", "ckpt/a/b.bin"));
	CHECK(job_glob_match("ckpt", "ckpt"));
	CHECK(!job_glob_match("*", ".hidden"));
	CHECK(job_glob_match("./ckpt.bin", "ckpt.bin"));
	CHECK(job_glob_match("step-[0-9]*.bin", "step-12.bin"));
	CHECK(!job_glob_match("step-[0-9]*.bin", "step-x.bin"));
	CHECK(job_glob_may_descend("sub/*.csv", "sub"));
	CHECK(!job_glob_may_descend("sub/*.csv", "other"));
	CHECK(job_glob_may_descend("**/x", "a"));
	CHECK(job_glob_match("a/**", "a"));
	CHECK(job_glob_match("**/**/x", "x"));
	CHECK(!job_glob_match("a/**/b", "a"));
	CHECK(job_glob_may_descend("a/**/b", "a/c/d"));
}

/* A path's segments, as job_glob.c splits it. */
static size_t seg_len(const char *s)
{
	const char *e = strchr(s, '/');
	return e ? (size_t)(e - s) : strlen(s);
}

static const char *seg_next(const char *s)
{
	const char *e = strchr(s, '/');
	return e ? e + 1 : s + strlen(s);
}

/* The matcher before issue 29 (every way to split the path among the
 * `**`s), as the oracle for the memoized one on small inputs. */
static int ref_match(const char *p, const char *s, int prefix_ok)
{
	char pseg[64], sseg[64];
	size_t pl = seg_len(p), sl;

	if (!*p)
		return !*s;
	if (!*s) {
		for (const char *q = p; *q; q = seg_next(q))
			if (!(seg_len(q) == 2 && q[0] == '*' && q[1] == '*'))
				return prefix_ok;
		return 1;
	}
	if (pl == 2 && p[0] == '*' && p[1] == '*')
		return ref_match(seg_next(p), s, prefix_ok) || ref_match(p, seg_next(s), prefix_ok);
	sl = seg_len(s);
	memcpy(pseg, p, pl);
	pseg[pl] = '\0';
	memcpy(sseg, s, sl);
	sseg[sl] = '\0';
	if (fnmatch(pseg, sseg, FNM_PERIOD) != 0)
		return 0;
	return ref_match(seg_next(p), seg_next(s), prefix_ok);
}

/* Linear in the path's depth: ** segments cost a bounded number of steps
 * (counted, not timed), and the answers are the old matcher's. */
static void test_glob_bounded(void)
{
	static const char *const pw[] = { "**", "*", "a", "b*", "?", ".x", "[ab]" };
	static const char *const sw[] = { "a", "b", "bb", ".x", "c" };
	char path[4096], pat[256], sp[256];
	size_t o = 0;
	unsigned long before;
	uint64_t rng = 29;

	for (int i = 0; i < 60; i++)
		o += (size_t)snprintf(path + o, sizeof(path) - o, "d/");
	snprintf(path + o, sizeof(path) - o, "x.pq");
	before = job_glob_steps;
	CHECK(!job_glob_match("**/**/**/**/**/**/*.pt", path));
	CHECK(job_glob_steps - before <= 8 * 62);
	snprintf(path + o, sizeof(path) - o, "x.pt");
	before = job_glob_steps;
	CHECK(job_glob_match("**/**/**/**/**/**/*.pt", path));
	CHECK(job_glob_steps - before <= 8 * 62);
	before = job_glob_steps;
	CHECK(job_glob_may_descend("**/**/**/**/**/**/e/*.pt", path));
	CHECK(job_glob_steps - before <= 9 * 62);

	for (int t = 0; t < 20000; t++) {
		size_t po = 0, so = 0;
		int np = 1 + (int)((rng = rng * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % 5;
		int ns = 1 + (int)((rng = rng * 6364136223846793005ULL + 1442695040888963407ULL) >> 33) % 6;
		for (int i = 0; i < np; i++) {
			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			po += (size_t)snprintf(pat + po, sizeof(pat) - po, "%s%s", i ? "/" : "",
					       pw[(rng >> 33) % 7]);
		}
		for (int i = 0; i < ns; i++) {
			rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
			so += (size_t)snprintf(sp + so, sizeof(sp) - so, "%s%s", i ? "/" : "",
					       sw[(rng >> 33) % 5]);
		}
		if (job_glob_match(pat, sp) != ref_match(pat, sp, 0) ||
		    job_glob_may_descend(pat, sp) != ref_match(pat, sp, 1)) {
			fprintf(stderr, "glob differs from the old matcher: '%s' '%s'\n", pat, sp);
			CHECK(0);
			return;
		}
	}
}

/* Pack patterns from tmp/job into a file; return its fd (rewound). */
static int pack(const char *const *pat, size_t npat, struct pack_have *have, size_t nhave,
		struct pack_stats *st)
{
	char path[300], dir[300];
	snprintf(path, sizeof(path), "%s/art.tar.zst", tmp);
	snprintf(dir, sizeof(dir), "%s/job", tmp);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	struct gr_err err = { 0 };
	int rc = job_pack(dir, pat, npat, have, nhave, NULL, fd, st, &err);
	if (rc < 0)
		fprintf(stderr, "  pack: %s\n", err.msg);
	lseek(fd, 0, SEEK_SET);
	return rc < 0 ? -1 : fd;
}

static void test_roundtrip(void)
{
	const char *pat[] = { "*.csv", "ckpt/**" };
	struct pack_stats st;
	struct gr_err err = { 0 };
	char dest[300], p[400];
	uint32_t files = 0;
	struct stat a, b;

	mk("job/metrics.csv", "step,loss\n1,0.5\n");
	mk("job/ckpt/a.bin", "AAAA");
	mk("job/ckpt/deep/b.bin", "BB");
	mk("job/other.txt", "no");
	mk("job/.gpurun/log", "never packed");
	int fd = pack(pat, 2, NULL, 0, &st);
	CHECK(fd >= 0);
	CHECK_EQ_INT(st.matched, 3);
	CHECK_EQ_INT(st.sent, 3);
	snprintf(dest, sizeof(dest), "%s/runs", tmp);
	mkdir(dest, 0755);
	/* The stream opens with what it holds: 3 files, 16 + 4 + 2 bytes. */
	unsigned char hdr[GR_ART_ANNOUNCE_LEN];
	struct art_limits lim = { 0 };
	CHECK(read(fd, hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr));
	CHECK_EQ_INT(art_announce_parse(hdr, &lim, &err), 0);
	CHECK_EQ_INT(lim.files, 3);
	CHECK_EQ_INT(lim.bytes, 22);
	lseek(fd, 0, SEEK_SET);
	CHECK_EQ_INT(art_extract_announced(fd, dest, 0, NULL, &files, &err), 0);
	close(fd);
	CHECK_EQ_INT(files, 3);
	snprintf(p, sizeof(p), "%s/metrics.csv", dest);
	CHECK(slurp_eq(p, "step,loss\n1,0.5\n"));
	snprintf(p, sizeof(p), "%s/ckpt/deep/b.bin", dest);
	CHECK(slurp_eq(p, "BB"));
	snprintf(p, sizeof(p), "%s/other.txt", dest);
	CHECK(access(p, F_OK) < 0);
	/* mtimes survive to the nanosecond: that is what "unchanged" means */
	snprintf(p, sizeof(p), "%s/job/ckpt/a.bin", tmp);
	stat(p, &a);
	snprintf(p, sizeof(p), "%s/ckpt/a.bin", dest);
	stat(p, &b);
	CHECK(a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec);

	/* Again with what we have: nothing travels; change one, only it does. */
	struct pack_have have[1] = { { (char *)"ckpt/a.bin", (uint64_t)b.st_size,
				       (int64_t)b.st_mtim.tv_sec, (uint32_t)b.st_mtim.tv_nsec } };
	fd = pack(pat, 2, have, 1, &st);
	CHECK_EQ_INT(st.matched, 3);
	CHECK_EQ_INT(st.sent, 2);
	close(fd);
}

/* Write a crafted archive: entries of (name, type, link target, data,
 * and the offset a host "resumes" the file at, as its xattr says). */
struct craft { const char *name; int type; const char *link; const char *data; const char *resume; };

static int craft(const struct craft *c, size_t n)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/evil.tar.zst", tmp);
	struct archive *a = archive_write_new();
	archive_write_add_filter_zstd(a);
	archive_write_set_format_pax(a);
	archive_write_set_bytes_in_last_block(a, 1);
	archive_write_open_filename(a, path);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		archive_entry_set_pathname(e, c[i].name);
		archive_entry_set_perm(e, 0644);
		if (c[i].type == 'l') {
			archive_entry_set_filetype(e, AE_IFLNK);
			archive_entry_set_symlink(e, c[i].link);
		} else if (c[i].type == 'h') {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_hardlink(e, c[i].link);
		} else {
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_size(e, (la_int64_t)strlen(c[i].data));
		}
		if (c[i].resume)
			archive_entry_xattr_add_entry(e, GR_ART_RESUME_XATTR, c[i].resume,
						      strlen(c[i].resume));
		archive_write_header(a, e);
		if (c[i].type == 'f')
			archive_write_data(a, c[i].data, strlen(c[i].data));
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	return open(path, O_RDONLY);
}

static int extract_crafted_into(const char *dest, const struct craft *c, size_t n,
				struct gr_err *err)
{
	uint32_t files;
	int fd = craft(c, n);
	struct art_limits lim = roomy();
	int rc = art_extract_fd(fd, dest, &lim, &files, err);
	close(fd);
	if (rc < 0)
		printf("# refused as wanted: %s\n", err->msg);
	return rc;
}

static int extract_crafted(const struct craft *c, size_t n, struct gr_err *err)
{
	char dest[300];
	snprintf(dest, sizeof(dest), "%s/hostile", tmp);
	mkdir(dest, 0755);
	return extract_crafted_into(dest, c, n, err);
}

/* tmp/NAME, a runs folder whose "sub" is the user's symlink to
 * tmp/NAME-outside (target). */
static void dest_with_link(const char *name, char dest[300], char target[300])
{
	char link[400];
	snprintf(dest, 300, "%s/%s", tmp, name);
	snprintf(target, 300, "%s/%s-outside", tmp, name);
	snprintf(link, sizeof(link), "%s/sub", dest);
	mkdir(dest, 0755);
	mkdir(target, 0755);
	CHECK(symlink(target, link) == 0);
}

static void test_hostile_dotdot(void)
{
	struct craft c[] = { { "../escaped.txt", 'f', NULL, "x", NULL } };
	struct gr_err err = { 0 };
	char p[300];
	CHECK(extract_crafted(c, 1, &err) < 0);
	CHECK(strstr(err.msg, "..") != NULL);
	snprintf(p, sizeof(p), "%s/escaped.txt", tmp);
	CHECK(access(p, F_OK) < 0);
}

static void test_hostile_absolute(void)
{
	char abs[300], p[400];
	snprintf(abs, sizeof(abs), "%s/abs-escaped.txt", tmp);
	struct craft c[] = { { abs, 'f', NULL, "x", NULL } };
	struct gr_err err = { 0 };
	CHECK(extract_crafted(c, 1, &err) < 0);
	CHECK(strstr(err.msg, "absolute") != NULL);
	snprintf(p, sizeof(p), "%s", abs);
	CHECK(access(p, F_OK) < 0);
}

static void test_hostile_symlink_out(void)
{
	/* The classic: a link pointing out, then a file written through it. */
	char target[300], p[400];
	snprintf(target, sizeof(target), "%s/outside", tmp);
	mkdir(target, 0755);
	struct craft c[] = { { "link", 'l', target, NULL, NULL }, { "link/pwned.txt", 'f', NULL, "x", NULL } };
	struct gr_err err = { 0 };
	CHECK(extract_crafted(c, 2, &err) < 0);
	CHECK(strstr(err.msg, "symbolic link") != NULL);
	snprintf(p, sizeof(p), "%s/pwned.txt", target);
	CHECK(access(p, F_OK) < 0);
}

static void test_hostile_hardlink(void)
{
	struct craft c[] = { { "h", 'h', "/etc/passwd", NULL, NULL } };
	struct gr_err err = { 0 };
	CHECK(extract_crafted(c, 1, &err) < 0);
	CHECK(strstr(err.msg, "hard link") != NULL);
}

static void test_existing_symlink_in_dest(void)
{
	/* A symlink already in runs/<job>/ (not from the archive): libarchive's
	 * SECURE_SYMLINKS refuses to write through it. */
	char dest[300], target[300], p[400];
	dest_with_link("hostile2", dest, target);
	struct craft c[] = { { "sub/x.txt", 'f', NULL, "x", NULL } };
	struct gr_err err = { 0 };
	CHECK(extract_crafted_into(dest, c, 1, &err) < 0);
	snprintf(p, sizeof(p), "%s/x.txt", target);
	CHECK(access(p, F_OK) < 0);
	snprintf(p, sizeof(p), "%s/.x.txt.gpurun-part", target);
	CHECK(access(p, F_OK) < 0);
}

/* A host that "resumes" a file whose folder here is the user's symlink:
 * the part cannot be opened through it, and the refusal must not remove
 * the part and info names it would have used, where the symlink leads
 * (it did: the plain unlink followed the symlink). Found by fuzz_art. */
static void test_resume_through_symlink(void)
{
	char dest[300], target[300], p[400];
	dest_with_link("hostile3", dest, target);
	snprintf(p, sizeof(p), "%s/.x.txt.gpurun-part", target);
	CHECK(write_file_atomic(p, "abc", 3, 0644, NULL) == 0);
	snprintf(p, sizeof(p), "%s/.x.txt.gpurun-partinfo", target);
	CHECK(write_file_atomic(p, "keep", 4, 0644, NULL) == 0);
	struct craft c[] = { { "sub/x.txt", 'f', NULL, "defgh", "3" } };
	struct gr_err err = { 0 };
	CHECK(extract_crafted_into(dest, c, 1, &err) < 0);
	CHECK(strstr(err.msg, "no part file") != NULL);
	snprintf(p, sizeof(p), "%s/.x.txt.gpurun-part", target);
	CHECK(slurp_eq(p, "abc"));
	snprintf(p, sizeof(p), "%s/.x.txt.gpurun-partinfo", target);
	CHECK(slurp_eq(p, "keep"));
}

static void test_truncated(void)
{
	/* A stream cut short (connection lost mid-pull) leaves no half file. */
	struct craft c[] = { { "big.bin", 'f', NULL, "0123456789abcdefghij0123456789abcdefghij", NULL } };
	char path[300], dest[300], p[400];
	struct gr_err err = { 0 };
	uint32_t files;
	int fd = craft(c, 1);
	close(fd);
	snprintf(path, sizeof(path), "%s/evil.tar.zst", tmp);
	CHECK(truncate(path, 30) == 0);
	fd = open(path, O_RDONLY);
	snprintf(dest, sizeof(dest), "%s/trunc", tmp);
	mkdir(dest, 0755);
	struct art_limits lim = roomy();
	CHECK(art_extract_fd(fd, dest, &lim, &files, &err) < 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/big.bin", dest);
	CHECK(access(p, F_OK) < 0);
}

/* Extract a crafted archive into a fresh dest within lim. */
static int extract_within(const struct craft *c, size_t n, const char *name,
			  struct art_limits *lim, struct gr_err *err, char *dest, size_t dn)
{
	uint32_t files;
	snprintf(dest, dn, "%s/%s", tmp, name);
	mkdir(dest, 0755);
	int fd = craft(c, n);
	int rc = art_extract_fd(fd, dest, lim, &files, err);
	close(fd);
	if (rc < 0)
		printf("# refused as wanted: %s\n", err->msg);
	return rc;
}

static void test_larger_than_announced(void)
{
	/* An entry bigger than the whole pull was announced to be. */
	struct craft c[] = { { "a.bin", 'f', NULL, "0123456789", NULL } };
	struct art_limits lim = { .files = 1, .bytes = 5 };
	struct gr_err err = { 0 };
	char dest[300], p[400];
	CHECK(extract_within(c, 1, "ann1", &lim, &err, dest, sizeof(dest)) < 0);
	CHECK(strstr(err.msg, "larger than the host announced") != NULL);
	snprintf(p, sizeof(p), "%s/a.bin", dest);
	CHECK(access(p, F_OK) < 0);
	snprintf(p, sizeof(p), "%s/.a.bin.gpurun-part", dest);
	CHECK(access(p, F_OK) < 0);

	/* Each within, together past it: the second is refused. */
	struct craft two[] = { { "x.bin", 'f', NULL, "12345", NULL }, { "y.bin", 'f', NULL, "12345", NULL } };
	lim = (struct art_limits){ .files = 2, .bytes = 8 };
	CHECK(extract_within(two, 2, "ann2", &lim, &err, dest, sizeof(dest)) < 0);
	snprintf(p, sizeof(p), "%s/x.bin", dest);
	CHECK(access(p, F_OK) == 0);
	snprintf(p, sizeof(p), "%s/y.bin", dest);
	CHECK(access(p, F_OK) < 0);

	/* More files than announced. */
	lim = (struct art_limits){ .files = 1, .bytes = 100 };
	CHECK(extract_within(two, 2, "ann3", &lim, &err, dest, sizeof(dest)) < 0);
	CHECK(strstr(err.msg, "announced 1 file") != NULL);

	/* No announcement at all. */
	uint32_t files;
	int fd = craft(two, 2);
	CHECK(art_extract_announced(fd, dest, 0, NULL, &files, &err) < 0);
	CHECK(strstr(err.msg, "without announcing") != NULL);
	close(fd);

	CHECK(art_data_ok(0, 10, 10));
	CHECK(!art_data_ok(0, 11, 10));
	CHECK(!art_data_ok(8, 3, 10));
	CHECK(!art_data_ok(11, 0, 10));
	CHECK(!art_data_ok(-1, 1, 10));
	CHECK(!art_data_ok(1, UINT64_MAX, 10));
}

static void test_min_free(void)
{
	struct statvfs v;
	struct gr_err err = { 0 };
	CHECK(statvfs(tmp, &v) == 0);
	uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
	CHECK_EQ_INT(art_space_check(tmp, 0, 0, 0, &err), 0);
	CHECK_EQ_INT(art_space_check(tmp, 4096, 1, 0, &err), 0);
	/* More than is free: refused, with the numbers. */
	CHECK(art_space_check(tmp, avail + (1u << 30), 1, 0, &err) < 0);
	printf("# refused as wanted: %s\n", err.msg);
	CHECK(strstr(err.msg, "needed") && strstr(err.msg, "free of") && strstr(err.msg, "min_free"));
	/* Fits, but not with 90% kept free (this disk is not that empty). */
	if ((double)v.f_bavail / (double)v.f_blocks < 0.9) {
		CHECK(art_space_check(tmp, 4096, 1, 90, &err) < 0);
		CHECK(strstr(err.msg, "keeps 90%") != NULL);
	}
	/* And the announced path refuses before it writes anything. */
	struct craft c[] = { { "a.bin", 'f', NULL, "x", NULL } };
	char dest[300], p[400], path[300];
	snprintf(dest, sizeof(dest), "%s/full", tmp);
	mkdir(dest, 0755);
	snprintf(path, sizeof(path), "%s/announced.bin", tmp);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644), in = craft(c, 1);
	unsigned char hdr[GR_ART_ANNOUNCE_LEN] = "GRA1";
	uint64_t huge = avail + (1ull << 40);
	hdr[7] = 1;
	for (int i = 0; i < 8; i++)
		hdr[8 + i] = (unsigned char)(huge >> (56 - 8 * i));
	CHECK(write(fd, hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr));
	char buf[4096];
	ssize_t n;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		CHECK(write(fd, buf, (size_t)n) == n);
	close(in);
	lseek(fd, 0, SEEK_SET);
	uint32_t files;
	CHECK(art_extract_announced(fd, dest, 5, NULL, &files, &err) < 0);
	printf("# refused as wanted: %s\n", err.msg);
	close(fd);
	snprintf(p, sizeof(p), "%s/a.bin", dest);
	CHECK(access(p, F_OK) < 0);
}

static void test_smi_parse(void)
{
	struct gpu_report r = { 0 };
	gpu_parse_gpus("0, GPU-aaa, NVIDIA H100 80GB HBM3, 12, 1024, 81559\n"
		       "1, GPU-bbb, NVIDIA H100 80GB HBM3, [N/A], 3, 81559\n", &r);
	gpu_parse_apps("4242, GPU-bbb, 1000, /usr/bin/python3\n", &r);
	CHECK_EQ_INT(r.ngpus, 2);
	CHECK_EQ_INT(r.gpus[0].util, 12);
	CHECK_EQ_INT(r.gpus[1].util, 0);
	CHECK_EQ_INT(r.gpus[1].mem_total, 81559);
	CHECK_STR(r.gpus[1].uuid, "GPU-bbb");
	CHECK_EQ_INT(r.napps, 1);
	CHECK_EQ_INT(r.apps[0].pid, 4242);
	CHECK_STR(r.apps[0].name, "/usr/bin/python3");
	gpu_report_free(&r);
}

/* Files that do not compress go in raw blocks, one that does still
 * shrinks, and the stream of several zstd frames (one per level change)
 * extracts to the same bytes. (The time saved is make bench's to show.) */
static void test_incompressible(void)
{
	const char *pat[] = { "w/**" };
	struct pack_stats st;
	struct gr_err err = { 0 };
	char dest[300], p[400], q[1200];
	uint32_t files = 0;
	struct stat sb;
	size_t n = 3u << 20;
	char *rnd = xmalloc(n + 1), *txt = xmalloc(n + 1);

	srand(7);
	for (size_t i = 0; i < n; i++) {
		rnd[i] = (char)(1 + rand() % 255);
		txt[i] = "step,loss\n"[i % 10];
	}
	rnd[n] = txt[n] = '\0';
	mk("job/w/a.txt", "small");
	mk("job/w/b.bin", rnd);
	mk("job/w/c.csv", txt);
	mk("job/w/d.bin", rnd);
	int fd = pack(pat, 1, NULL, 0, &st);
	CHECK(fd >= 0);
	CHECK_EQ_INT(st.sent, 4);
	CHECK(fstat(fd, &sb) == 0);
	printf("# packed %zu random + %zu text bytes into %lld\n", 2 * n, n, (long long)sb.st_size);
	CHECK(sb.st_size < (off_t)(2 * n + n / 50)); /* the text shrank, the rest ~as is */
	snprintf(dest, sizeof(dest), "%s/runs-z", tmp);
	mkdir(dest, 0755);
	CHECK_EQ_INT(art_extract_announced(fd, dest, 0, NULL, &files, &err), 0);
	close(fd);
	CHECK_EQ_INT(files, 4);
	const char *names[] = { "a.txt", "b.bin", "c.csv", "d.bin" };
	for (int i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s/w/%s", dest, names[i]);
		snprintf(q, sizeof(q), "cmp -s '%s' '%s/job/w/%s'", p, tmp, names[i]);
		CHECK(system(q) == 0);
	}
	free(rnd);
	free(txt);
}

/* A pull cut short keeps its part (cut to what came in order) and a note
 * of what it was begun from; the packer, told of that part, sends only
 * the rest, from the offset the entry names; the extractor appends it and
 * the file is whole. A host that "resumes" a file for which there is no
 * such part is refused. */
static void test_resume(void)
{
	const char *pat[] = { "r/**" };
	struct pack_stats st;
	struct gr_err err = { 0 };
	char dest[300], p[400], q[1200];
	uint32_t files = 0;
	struct stat sb, src;
	size_t n = 4u << 20;
	char *rnd = xmalloc(n + 1);

	srand(11);
	for (size_t i = 0; i < n; i++)
		rnd[i] = (char)(1 + rand() % 255);
	rnd[n] = '\0';
	mk("job/r/big.bin", rnd);
	free(rnd);
	int fd = pack(pat, 1, NULL, 0, &st);
	CHECK(fd >= 0);
	CHECK(fstat(fd, &sb) == 0);
	/* The stream, cut at 60 %. */
	snprintf(p, sizeof(p), "%s/cut.tar.zst", tmp);
	int cut = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
	char *all = xmalloc((size_t)sb.st_size);
	CHECK(read_full(fd, all, (size_t)sb.st_size) == sb.st_size);
	CHECK(write_full(cut, all, (size_t)sb.st_size * 6 / 10) == 0);
	free(all);
	close(fd);
	lseek(cut, 0, SEEK_SET);
	snprintf(dest, sizeof(dest), "%s/runs-r", tmp);
	mkdir(dest, 0755);
	CHECK(art_extract_announced(cut, dest, 0, NULL, &files, &err) < 0);
	close(cut);
	CHECK_EQ_INT(files, 0);
	snprintf(p, sizeof(p), "%s/r/.big.bin.gpurun-part", dest);
	struct stat ps;
	CHECK(stat(p, &ps) == 0);
	printf("# cut at 60 %% of the stream: the part holds %lld of %zu bytes\n", (long long)ps.st_size, n);
	CHECK(ps.st_size > (off_t)(n / 2) && ps.st_size < (off_t)n);
	snprintf(p, sizeof(p), "%s/r/.big.bin.gpurun-partinfo", dest);
	struct strbuf info = STRBUF_INIT;
	CHECK(read_file(p, &info, NULL) == 0);
	long long size = 0, sec = 0, nsec = 0;
	CHECK(sscanf(info.buf, "%lld %lld %lld", &size, &sec, &nsec) == 3);
	sb_release(&info);
	snprintf(p, sizeof(p), "%s/job/r/big.bin", tmp);
	CHECK(stat(p, &src) == 0);
	CHECK(size == (long long)n && sec == src.st_mtim.tv_sec && nsec == src.st_mtim.tv_nsec);

	/* The next pull names the part: only the rest travels. */
	struct pack_part part = { (char *)"r/big.bin", (uint64_t)ps.st_size, (uint64_t)size, sec,
				  (uint32_t)nsec };
	struct pack_opts o = { .parts = &part, .nparts = 1, .tmpfd = -1 };
	char path[300], dir[300];
	snprintf(path, sizeof(path), "%s/art2.tar.zst", tmp);
	snprintf(dir, sizeof(dir), "%s/job", tmp);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK_EQ_INT(job_pack(dir, pat, 1, NULL, 0, &o, fd, &st, &err), 0);
	CHECK_EQ_INT(st.bytes, (long long)(n - (size_t)ps.st_size));
	lseek(fd, 0, SEEK_SET);
	CHECK_EQ_INT(art_extract_announced(fd, dest, 0, NULL, &files, &err), 0);
	close(fd);
	CHECK_EQ_INT(files, 1);
	snprintf(q, sizeof(q), "cmp -s '%s/r/big.bin' '%s/job/r/big.bin'", dest, tmp);
	CHECK(system(q) == 0);
	snprintf(p, sizeof(p), "%s/r/.big.bin.gpurun-partinfo", dest);
	CHECK(access(p, F_OK) < 0);
	snprintf(p, sizeof(p), "%s/r/big.bin", dest);
	struct stat done;
	CHECK(stat(p, &done) == 0);
	CHECK(done.st_mtim.tv_sec == src.st_mtim.tv_sec && done.st_mtim.tv_nsec == src.st_mtim.tv_nsec);

	/* The same again, but the part is gone: the host's "resume" is
	 * refused, nothing is written under the name. */
	unlink(p);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
	CHECK_EQ_INT(job_pack(dir, pat, 1, NULL, 0, &o, fd, &st, &err), 0);
	lseek(fd, 0, SEEK_SET);
	CHECK(art_extract_announced(fd, dest, 0, NULL, &files, &err) < 0);
	close(fd);
	printf("# refused as wanted: %s\n", err.msg);
	CHECK(strstr(err.msg, "no part file") != NULL);
	CHECK(access(p, F_OK) < 0);
}

int main(void)
{
	snprintf(tmp, sizeof(tmp), "%s/gpurun-test-art.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(tmp)) {
		perror("mkdtemp");
		return 1;
	}
	RUN(test_glob);
	RUN(test_glob_bounded);
	RUN(test_roundtrip);
	RUN(test_incompressible);
	RUN(test_resume);
	RUN(test_hostile_dotdot);
	RUN(test_hostile_absolute);
	RUN(test_hostile_symlink_out);
	RUN(test_hostile_hardlink);
	RUN(test_existing_symlink_in_dest);
	RUN(test_resume_through_symlink);
	RUN(test_truncated);
	RUN(test_larger_than_announced);
	RUN(test_min_free);
	RUN(test_smi_parse);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	if (!t_failed_cases && system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmp);
	return T_DONE();
}
