/* The IDX loader against every kind of bad file: each must fail with
 * K_EDATA (K_EIO for a missing file) and a message that names the file and
 * the problem. The files are written here, byte by byte. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "tests/t.h"
#include "tests/util.h"
#include "banned.h"

static const char *dir;
static char img[4200], lab[4200];

/* An IDX file: big-endian magic and dims, then payload bytes 0, 1, 2, ... */
static void write_idx(const char *path, uint32_t magic, const uint32_t *dims, int ndims,
		      size_t payload)
{
	size_t n = 4 + 4 * (size_t)ndims + payload;
	unsigned char *b = malloc(n);
	uint32_t words[4];
	words[0] = magic;
	for (int i = 0; i < ndims; i++)
		words[i + 1] = dims[i];
	for (int w = 0; w <= ndims; w++)
		for (int k = 0; k < 4; k++)
			b[4 * w + k] = (unsigned char)(words[w] >> (24 - 8 * k));
	for (size_t i = 0; i < payload; i++)
		b[4 + 4 * (size_t)ndims + i] = (unsigned char)(i % 10);
	if (tu_write(path, b, n) < 0)
		fprintf(stderr, "  cannot write %s\n", path);
	free(b);
}

/* Good files: 3 images of 2x2 and labels 0, 1, 2. */
static void write_good(void)
{
	uint32_t idims[3] = { 3, 2, 2 }, ldims[1] = { 3 };
	write_idx(img, 0x803, idims, 3, 12);
	write_idx(lab, 0x801, ldims, 1, 3);
}

/* Loading must fail with code and a message holding the path and want. */
static void expect_fail(int code, const char *path, const char *want)
{
	struct dataset d;
	struct kerr e = { "" };
	int ret = idx_load(&d, img, lab, 10, &e);
	CHECK_EQ_INT(ret, code);
	fprintf(stderr, "  -> %s\n", e.msg);
	CHECK_HAS(e.msg, path);
	CHECK_HAS(e.msg, want);
	if (ret == 0)
		dataset_free(&d);
}

static void idx_loads_valid_files(void)
{
	struct dataset d;
	struct kerr e = { "" };
	write_good();
	CHECK_EQ_INT(idx_load(&d, img, lab, 10, &e), 0);
	CHECK_EQ_INT(d.n, 3);
	CHECK_EQ_INT(d.dim, 4);
	CHECK_EQ_INT(d.classes, 10);
	CHECK(d.x[5] == 5.0f / 255.0f);
	CHECK_EQ_INT(d.y[2], 2);
	dataset_free(&d);
}

static void idx_bad_magic(void)
{
	uint32_t idims[3] = { 3, 2, 2 }, ldims[1] = { 3 };
	write_good();
	write_idx(img, 0x802, idims, 3, 12);  /* 2 dimensions claimed */
	expect_fail(K_EDATA, img, "bad magic 0x00000802");
	write_good();
	write_idx(lab, 0x803, ldims, 1, 3);
	expect_fail(K_EDATA, lab, "bad magic");
	write_good();
	CHECK_EQ_INT(tu_write(img, "\x1f\x8b\x08\x00", 4), 0);
	expect_fail(K_EDATA, img, "gzip");
}

static void idx_bad_dims(void)
{
	uint32_t zero[3] = { 3, 0, 2 }, huge[3] = { 3, 70000, 1 }, none[3] = { 0, 2, 2 };
	write_good();
	write_idx(img, 0x803, zero, 3, 0);
	expect_fail(K_EDATA, img, "bad dimensions");
	write_idx(img, 0x803, huge, 3, 210000);
	expect_fail(K_EDATA, img, "bad dimensions");
	write_idx(img, 0x803, none, 3, 0);
	expect_fail(K_EDATA, img, "bad dimensions");
}

static void idx_count_mismatch(void)
{
	uint32_t ldims[1] = { 2 };
	write_good();
	write_idx(lab, 0x801, ldims, 1, 2);
	expect_fail(K_EDATA, img, "count mismatch");
	expect_fail(K_EDATA, lab, "3 images but");
}

static void idx_truncated(void)
{
	uint32_t idims[3] = { 3, 2, 2 }, ldims[1] = { 3 };
	write_good();
	write_idx(img, 0x803, idims, 3, 11);
	expect_fail(K_EDATA, img, "truncated");
	write_good();
	write_idx(lab, 0x801, ldims, 1, 2);
	expect_fail(K_EDATA, lab, "truncated");
	write_good();
	CHECK_EQ_INT(tu_write(img, "\0\0\x08\x03\0\0", 6), 0);
	expect_fail(K_EDATA, img, "truncated");
	write_good();
	CHECK_EQ_INT(tu_write(lab, "", 0), 0);
	expect_fail(K_EDATA, lab, "truncated");
}

static void idx_trailing_bytes(void)
{
	uint32_t idims[3] = { 3, 2, 2 };
	write_good();
	write_idx(img, 0x803, idims, 3, 13);
	expect_fail(K_EDATA, img, "unexpected bytes");
}

static void idx_label_out_of_range(void)
{
	unsigned char b[11] = { 0, 0, 8, 1, 0, 0, 0, 3, 4, 10, 1 };
	write_good();
	CHECK_EQ_INT(tu_write(lab, b, sizeof(b)), 0);
	expect_fail(K_EDATA, lab, "label 10 at index 1 is out of range");
}

static void idx_missing_file(void)
{
	write_good();
	snprintf(lab, sizeof(lab), "%s/does-not-exist", dir);
	expect_fail(K_EIO, lab, "cannot open");
	snprintf(lab, sizeof(lab), "%s/labels", dir);
}

void data_cases(const char *scratch)
{
	dir = scratch;
	snprintf(img, sizeof(img), "%s/images", dir);
	snprintf(lab, sizeof(lab), "%s/labels", dir);
	RUN(idx_loads_valid_files);
	RUN(idx_bad_magic);
	RUN(idx_bad_dims);
	RUN(idx_count_mismatch);
	RUN(idx_truncated);
	RUN(idx_trailing_bytes);
	RUN(idx_label_out_of_range);
	RUN(idx_missing_file);
}
