/* gpurun diff's listing from the host (job_snap_parse): a good one is
 * read and sorted; every hostile path (absolute, '..', '.', empty or
 * doubled '/', a path under a file or a symlink, a path twice), a bad
 * type, mode, hash or id, a count larger than the bytes, and trailing
 * bytes are refused before any path names a local file. A NUL inside a
 * path cannot even be read as a string (get_str). */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "job_proto.h"
#include "job_snapdiff.h"

#define IDA "20261122-003512-a1b2"
#define IDB "20261122-003513-c3d4"
#define HEX "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

struct ent {
	const char *path;
	char type;
	uint32_t mode;
	const char *hash;
};

/* One side: id, conf lines, entries; NULL-path-terminated. */
static void put_side(struct strbuf *b, const char *id, const struct ent *e)
{
	uint32_t n = 0;

	put_str(b, id);
	put_u32(b, 2);
	put_str(b, "command = python3 train.py");
	put_str(b, "env WANDB_API_KEY");
	while (e[n].path)
		n++;
	put_u32(b, n);
	for (uint32_t i = 0; i < n; i++) {
		put_str(b, e[i].path);
		put_u8(b, (uint8_t)e[i].type);
		put_u32(b, e[i].mode);
		put_u64(b, 3);
		put_str(b, e[i].hash);
	}
}

static const struct ent good[] = {
	{ "src/b.py", 'f', 0644, HEX },
	{ "src", 'd', 0755, "" },
	{ "a.py", 'f', 0755, HEX },
	{ "link", 'l', 0777, HEX },
	{ "big.bin", 'f', 0644, "ino-2049-1234-99999999999-1700000000000000000" },
	{ "src/sub", 'd', 0755, "" },
	{ "src/sub/c.py", 'f', 0644, HEX },
	{ NULL, 0, 0, NULL },
};

/* Parse side a = bad (with good as b): 0 or the error code. */
static int parse_with(const struct ent *bad, const char *ida)
{
	struct strbuf b = STRBUF_INIT;
	struct snap_side a, c;
	struct gr_err err = { 0 };
	int rc;

	put_side(&b, ida, bad);
	put_side(&b, IDB, good);
	rc = job_snap_parse(b.buf, b.len, &a, &c, &err);
	if (rc < 0 && !strstr(err.msg, "malformed snapshot listing"))
		fprintf(stderr, "  unexpected message: %s\n", err.msg);
	job_snap_side_free(&a);
	job_snap_side_free(&c);
	sb_release(&b);
	return rc;
}

static void good_listing(void)
{
	struct strbuf b = STRBUF_INIT;
	struct snap_side a, c;
	struct gr_err err = { 0 };

	put_side(&b, IDA, good);
	put_side(&b, IDB, good);
	CHECK_EQ_INT(job_snap_parse(b.buf, b.len, &a, &c, &err), 0);
	CHECK_STR(a.id, IDA);
	CHECK_STR(c.id, IDB);
	CHECK_EQ_INT(a.n, 7);
	CHECK_EQ_INT(a.conf.n, 2);
	CHECK_STR(a.conf.v[1], "env WANDB_API_KEY");
	/* sorted by path */
	for (size_t i = 1; i < a.n; i++)
		CHECK(strcmp(a.v[i - 1].path, a.v[i].path) < 0);
	job_snap_side_free(&a);
	job_snap_side_free(&c);
	sb_release(&b);
}

static void hostile_paths(void)
{
	static const char *const paths[] = {
		"/etc/passwd", "../x", "a/../../x", "a/./b", ".", "..", "", "a//b", "a/", "/",
		NULL,
	};

	for (const char *const *p = paths; *p; p++) {
		struct ent e[] = { { *p, 'f', 0644, HEX }, { NULL, 0, 0, NULL } };
		int rc = parse_with(e, IDA);
		if (rc != GR_EPROTO)
			fprintf(stderr, "  path '%s' was accepted\n", *p);
		CHECK_EQ_INT(rc, GR_EPROTO);
	}
}

static void below_a_file_or_link(void)
{
	/* "x" a symlink (to /etc, say), then "x/passwd": never written. */
	struct ent under_link[] = { { "x", 'l', 0777, HEX }, { "x/passwd", 'f', 0644, HEX },
				    { NULL, 0, 0, NULL } };
	struct ent under_file[] = { { "x", 'f', 0644, HEX }, { "x/y", 'f', 0644, HEX },
				    { NULL, 0, 0, NULL } };
	struct ent unlisted[] = { { "dir/y", 'f', 0644, HEX }, { NULL, 0, 0, NULL } };
	struct ent twice[] = { { "x", 'f', 0644, HEX }, { "x", 'l', 0777, HEX }, { NULL, 0, 0, NULL } };

	CHECK_EQ_INT(parse_with(under_link, IDA), GR_EPROTO);
	CHECK_EQ_INT(parse_with(under_file, IDA), GR_EPROTO);
	CHECK_EQ_INT(parse_with(unlisted, IDA), GR_EPROTO);
	CHECK_EQ_INT(parse_with(twice, IDA), GR_EPROTO);
}

static void bad_fields(void)
{
	struct ent type[] = { { "x", 'p', 0644, HEX }, { NULL, 0, 0, NULL } };
	struct ent mode[] = { { "x", 'f', 010644, HEX }, { NULL, 0, 0, NULL } };
	struct ent hash[] = { { "x", 'f', 0644, "\033]52;c;AAAA\007" }, { NULL, 0, 0, NULL } };
	struct ent nohash[] = { { "x", 'f', 0644, "" }, { NULL, 0, 0, NULL } };
	struct ent dirhash[] = { { "x", 'd', 0755, HEX }, { NULL, 0, 0, NULL } };

	CHECK_EQ_INT(parse_with(type, IDA), GR_EPROTO);
	CHECK_EQ_INT(parse_with(mode, IDA), GR_EPROTO);
	CHECK_EQ_INT(parse_with(hash, IDA), GR_EPROTO);
	CHECK_EQ_INT(parse_with(nohash, IDA), GR_EPROTO);
	CHECK_EQ_INT(parse_with(dirhash, IDA), GR_EPROTO);
	CHECK_EQ_INT(parse_with(good, "../../etc"), GR_EPROTO);
}

static void bad_framing(void)
{
	struct strbuf b = STRBUF_INIT;
	struct snap_side a, c;
	struct gr_err err = { 0 };

	/* A count far beyond the bytes that follow. */
	put_str(&b, IDA);
	put_u32(&b, 0);
	put_u32(&b, 0x7fffffff);
	CHECK_EQ_INT(job_snap_parse(b.buf, b.len, &a, &c, &err), GR_EPROTO);
	job_snap_side_free(&a);
	job_snap_side_free(&c);
	/* A NUL inside a path: not a string. */
	sb_reset(&b);
	put_str(&b, IDA);
	put_u32(&b, 0);
	put_u32(&b, 1);
	put_bytes(&b, "a\0/../../x", 10);
	put_u8(&b, 'f');
	put_u32(&b, 0644);
	put_u64(&b, 1);
	put_str(&b, HEX);
	put_side(&b, IDB, good);
	CHECK_EQ_INT(job_snap_parse(b.buf, b.len, &a, &c, &err), GR_EPROTO);
	job_snap_side_free(&a);
	job_snap_side_free(&c);
	/* Trailing bytes. */
	sb_reset(&b);
	put_side(&b, IDA, good);
	put_side(&b, IDB, good);
	put_u8(&b, 0);
	CHECK_EQ_INT(job_snap_parse(b.buf, b.len, &a, &c, &err), GR_EPROTO);
	job_snap_side_free(&a);
	job_snap_side_free(&c);
	/* Cut short anywhere: refused, never read past the end. */
	sb_reset(&b);
	put_side(&b, IDA, good);
	put_side(&b, IDB, good);
	for (size_t cut = 0; cut < b.len; cut++) {
		char *copy = xmalloc(cut + 1);
		memcpy(copy, b.buf, cut);
		int prc = job_snap_parse(copy, cut, &a, &c, &err);
		if (prc != GR_EPROTO)
			fprintf(stderr, "  cut at %zu of %zu parsed: %d\n", cut, b.len, prc);
		CHECK_EQ_INT(prc, GR_EPROTO);
		job_snap_side_free(&a);
		job_snap_side_free(&c);
		free(copy);
	}
	sb_release(&b);
}

int main(void)
{
	RUN(good_listing);
	RUN(hostile_paths);
	RUN(below_a_file_or_link);
	RUN(bad_fields);
	RUN(bad_framing);
	return T_DONE();
}
