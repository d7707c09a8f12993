/* IDX loading with validation, the synthetic dataset, the held-out split and
 * the deterministic sampler (see data.h for the contracts). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"
#include "banned.h"

#define IDX_MAGIC_IMAGES 0x00000803u
#define IDX_MAGIC_LABELS 0x00000801u
#define IDX_MAX_SIDE 65535u
#define IDX_MAX_COUNT 0x7fffffffu

void dataset_free(struct dataset *d)
{
	if (!d)
		return;
	free(d->x);
	free(d->y);
	memset(d, 0, sizeof(*d));
}

static int dataset_alloc(struct dataset *d, int n, int dim, int classes, struct kerr *e)
{
	memset(d, 0, sizeof(*d));
	d->x = malloc((size_t)n * (size_t)dim * sizeof(float));
	d->y = malloc((size_t)n * sizeof(int32_t));
	if (!d->x || !d->y) {
		dataset_free(d);
		return kerr_set(e, K_ENOMEM, "out of memory for %d examples of %d features", n, dim);
	}
	d->n = n;
	d->dim = dim;
	d->classes = classes;
	return 0;
}

/* ---- IDX ---- */

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads the whole file at path into *buf (caller frees). */
static int read_whole(const char *path, unsigned char **buf, size_t *len, struct kerr *e)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	unsigned char *b = NULL;
	size_t n;
	int ret = 0;
	*buf = NULL;
	*len = 0;
	if (!f)
		return kerr_errno(e, K_EIO, "cannot open '%s'", path);
	if (fstat(fileno(f), &st) < 0) {
		ret = kerr_errno(e, K_EIO, "cannot stat '%s'", path);
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = kerr_set(e, K_EDATA, "'%s' is not a regular file", path);
		goto out;
	}
	n = (size_t)st.st_size;
	b = malloc(n ? n : 1);
	if (!b) {
		ret = kerr_set(e, K_ENOMEM, "out of memory reading '%s' (%zu bytes)", path, n);
		goto out;
	}
	if (n && fread(b, 1, n, f) != n) {
		ret = ferror(f) ? kerr_errno(e, K_EIO, "cannot read '%s'", path)
				: kerr_set(e, K_EIO, "cannot read '%s': file shrank while reading", path);
		goto out;
	}
	*buf = b;
	*len = n;
	b = NULL;
out:
	free(b);
	fclose(f);
	return ret;
}

/* Checks the magic and header of an IDX file of ndims dimensions and that
 * the payload is exactly the product of the dimensions; fills dims (all 0
 * when the header is bad, so no caller ever reads them unset). */
static int idx_check(const char *path, const unsigned char *b, size_t len,
		     uint32_t magic, const char *what, int ndims, uint32_t *dims,
		     struct kerr *e)
{
	size_t header = 4 + 4 * (size_t)ndims;
	uint64_t payload = 1;
	uint32_t got;
	for (int i = 0; i < ndims; i++)
		dims[i] = 0;
	if (len >= 2 && b[0] == 0x1f && b[1] == 0x8b)
		return kerr_set(e, K_EDATA, "'%s' is gzip-compressed; decompress it first "
				"(gunzip -k '%s')", path, path);
	if (len < 4)
		return kerr_set(e, K_EDATA, "'%s': truncated: %zu bytes, an IDX header needs %zu",
				path, len, header);
	got = be32(b);
	if (got != magic)
		return kerr_set(e, K_EDATA, "'%s': bad magic 0x%08x, expected 0x%08x (IDX %s: "
				"unsigned bytes, %d dimension%s)", path, got, magic, what,
				ndims, ndims > 1 ? "s" : "");
	if (len < header)
		return kerr_set(e, K_EDATA, "'%s': truncated: %zu bytes, an IDX header needs %zu",
				path, len, header);
	for (int i = 0; i < ndims; i++) {
		dims[i] = be32(b + 4 + 4 * i);
		if (dims[i] == 0)
			return kerr_set(e, K_EDATA, "'%s': bad dimensions: dimension %d is 0",
					path, i);
		if (i == 0 && dims[i] > IDX_MAX_COUNT)
			return kerr_set(e, K_EDATA, "'%s': bad dimensions: count %u is too large",
					path, dims[i]);
		if (i > 0 && dims[i] > IDX_MAX_SIDE)
			return kerr_set(e, K_EDATA, "'%s': bad dimensions: side %u exceeds %u",
					path, dims[i], IDX_MAX_SIDE);
		payload *= dims[i];
	}
	if (len - header < payload)
		return kerr_set(e, K_EDATA, "'%s': truncated: the header promises %llu bytes of "
				"data but only %zu follow it", path,
				(unsigned long long)payload, len - header);
	if (len - header > payload)
		return kerr_set(e, K_EDATA, "'%s': %llu unexpected bytes after the %llu bytes "
				"of data the header promises", path,
				(unsigned long long)(len - header - payload),
				(unsigned long long)payload);
	return 0;
}

int idx_load(struct dataset *out, const char *images, const char *labels,
	     int classes, struct kerr *e)
{
	unsigned char *ib = NULL, *lb = NULL;
	size_t ilen, llen;
	uint32_t idims[3], ldims[1];
	struct dataset d = {0};
	int ret;
	size_t dim;

	memset(out, 0, sizeof(*out));
	if ((ret = read_whole(images, &ib, &ilen, e)) < 0)
		goto out;
	if ((ret = idx_check(images, ib, ilen, IDX_MAGIC_IMAGES, "images", 3, idims, e)) < 0)
		goto out;
	if ((ret = read_whole(labels, &lb, &llen, e)) < 0)
		goto out;
	if ((ret = idx_check(labels, lb, llen, IDX_MAGIC_LABELS, "labels", 1, ldims, e)) < 0)
		goto out;
	if (idims[0] != ldims[0]) {
		ret = kerr_set(e, K_EDATA, "count mismatch: '%s' has %u images but '%s' has %u labels",
			       images, idims[0], labels, ldims[0]);
		goto out;
	}
	dim = (size_t)idims[1] * idims[2];
	if (dim > (size_t)INT_MAX / 4) {
		ret = kerr_set(e, K_EDATA, "'%s': bad dimensions: %ux%u is too large",
			       images, idims[1], idims[2]);
		goto out;
	}
	for (uint32_t i = 0; i < ldims[0]; i++) {
		if (lb[8 + i] >= classes) {
			ret = kerr_set(e, K_EDATA, "'%s': label %u at index %u is out of range "
				       "(expected 0..%d; see --classes)", labels, lb[8 + i], i,
				       classes - 1);
			goto out;
		}
	}
	if ((ret = dataset_alloc(&d, (int)idims[0], (int)dim, classes, e)) < 0)
		goto out;
	for (size_t i = 0; i < (size_t)d.n * dim; i++)
		d.x[i] = (float)ib[16 + i] * (1.0f / 255.0f);
	for (int i = 0; i < d.n; i++)
		d.y[i] = lb[8 + i];
	*out = d;
out:
	free(ib);
	free(lb);
	return ret;
}

/* ---- synthetic ---- */

/* 4*ring + 2*xor + slab, or -1 when the point is too close to a boundary. */
static int synthetic_label(const float *x)
{
	float r2 = x[0] * x[0] + x[1] * x[1];
	float s = x[4] + x[5];
	float as = s < 0 ? -s : s;
	if (fabsf(r2 - 0.64f) < 2.0f * 0.8f * SYN_MARGIN)
		return -1;
	if (fabsf(x[2]) < SYN_MARGIN || fabsf(x[3]) < SYN_MARGIN)
		return -1;
	if (fabsf(as - 0.5f) < SYN_MARGIN)
		return -1;
	return 4 * (r2 > 0.64f) + 2 * ((x[2] > 0) == (x[3] > 0)) + (as > 0.5f);
}

int synthetic_make(struct dataset *train, struct dataset *test, long n,
		   uint64_t seed, double holdout, struct kerr *e)
{
	struct dataset all;
	uint64_t st = rng_stream(seed, 3);
	int ret;
	if (n < 2 || n > 100000000)
		return kerr_set(e, K_EUSAGE, "--synthetic: %ld examples out of range [2, 100000000]", n);
	if ((ret = dataset_alloc(&all, (int)n, SYN_DIM, SYN_CLASSES, e)) < 0)
		return ret;
	for (int i = 0; i < all.n; i++) {
		float *x = all.x + (size_t)i * SYN_DIM;
		int label;
		do {
			for (int j = 0; j < SYN_DIM; j++)
				x[j] = 2.0f * rng_uniform(&st) - 1.0f;
			label = synthetic_label(x);
		} while (label < 0);
		all.y[i] = label;
	}
	return dataset_split(&all, train, test, holdout, e);
}

int dataset_split(struct dataset *all, struct dataset *train, struct dataset *test,
		  double holdout, struct kerr *e)
{
	long ntest = lround(all->n * holdout);
	int ret;
	if (ntest < 1 || ntest >= all->n) {
		ret = kerr_set(e, K_EUSAGE, "cannot hold out %g of %d examples: both the "
			       "training and the held-out part must be non-empty",
			       holdout, all->n);
		dataset_free(all);
		return ret;
	}
	memset(train, 0, sizeof(*train));
	if ((ret = dataset_alloc(test, (int)ntest, all->dim, all->classes, e)) < 0) {
		dataset_free(all);
		return ret;
	}
	memcpy(test->x, all->x + (size_t)(all->n - ntest) * all->dim,
	       (size_t)ntest * all->dim * sizeof(float));
	memcpy(test->y, all->y + (all->n - ntest), (size_t)ntest * sizeof(int32_t));
	/* The training part keeps the original arrays; shrink them in place. */
	*train = *all;
	train->n = all->n - (int)ntest;
	memset(all, 0, sizeof(*all));
	return 0;
}

int dataset_random(struct dataset *d, int n, int dim, int classes, uint64_t seed,
		   struct kerr *e)
{
	uint64_t st = rng_stream(seed, 4);
	int ret = dataset_alloc(d, n, dim, classes, e);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < (size_t)n * dim; i++)
		d->x[i] = rng_uniform(&st);
	for (int i = 0; i < n; i++)
		d->y[i] = (int32_t)rng_below(&st, (uint32_t)classes);
	return 0;
}

uint64_t dataset_fingerprint(const struct dataset *d)
{
	uint32_t hdr[3] = { (uint32_t)d->n, (uint32_t)d->dim, (uint32_t)d->classes };
	uint64_t h = k_fnv1a(K_FNV_INIT, hdr, sizeof(hdr));
	h = k_fnv1a(h, d->x, (size_t)d->n * d->dim * sizeof(float));
	return k_fnv1a(h, d->y, (size_t)d->n * sizeof(int32_t));
}

void dataset_gather(const struct dataset *d, const int32_t *idx, int B,
		    float *x, int32_t *y)
{
	for (int i = 0; i < B; i++) {
		memcpy(x + (size_t)i * d->dim, d->x + (size_t)idx[i] * d->dim,
		       (size_t)d->dim * sizeof(float));
		y[i] = d->y[idx[i]];
	}
}

/* ---- sampler ---- */

int sampler_init(struct sampler *s, uint64_t seed, int n, struct kerr *e)
{
	memset(s, 0, sizeof(*s));
	s->perm = malloc((size_t)n * sizeof(int32_t));
	if (!s->perm)
		return kerr_set(e, K_ENOMEM, "out of memory for a permutation of %d", n);
	s->seed = seed;
	s->n = n;
	s->epoch = -1;
	return 0;
}

void sampler_free(struct sampler *s)
{
	if (!s)
		return;
	free(s->perm);
	memset(s, 0, sizeof(*s));
}

static void sampler_fill(struct sampler *s, long epoch)
{
	uint64_t st = rng_stream(rng_stream(s->seed, 2), (uint64_t)epoch);
	for (int i = 0; i < s->n; i++)
		s->perm[i] = i;
	for (int i = s->n - 1; i > 0; i--) {
		int j = (int)rng_below(&st, (uint32_t)i + 1);
		int32_t t = s->perm[i];
		s->perm[i] = s->perm[j];
		s->perm[j] = t;
	}
	s->epoch = epoch;
}

void sampler_batch(struct sampler *s, uint64_t pos, int B, int32_t *idx)
{
	for (int i = 0; i < B; i++) {
		uint64_t p = pos + (uint64_t)i;
		long epoch = (long)(p / (uint64_t)s->n);
		if (epoch != s->epoch)
			sampler_fill(s, epoch);
		idx[i] = s->perm[p % (uint64_t)s->n];
	}
}
