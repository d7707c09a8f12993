/* Datasets for the trainer: the IDX loader (MNIST, Fashion-MNIST) with full
 * validation, the deterministic synthetic generator, the held-out split and
 * the sampler that derives each batch from (seed, position) alone, so that
 * a resumed run sees exactly the batches an uninterrupted one would. */
#ifndef KERNELS_DATA_H
#define KERNELS_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

struct dataset {
	int n;          /* examples */
	int dim;        /* features per example */
	int classes;    /* labels are in [0, classes) */
	float *x;       /* [n][dim], owned */
	int32_t *y;     /* [n], owned */
};

/* Frees x and y and zeroes d; d itself is the caller's (NULL ok). */
void dataset_free(struct dataset *d);

/* Loads an IDX image file (magic 0x00000803: n x rows x cols unsigned bytes,
 * scaled to [0, 1]) and its label file (magic 0x00000801). Rejects a bad
 * magic, zero or huge dimensions, truncated or over-long files, a count
 * mismatch and any label >= classes with K_EDATA and a message naming the
 * file; K_EIO when a file cannot be read. On success *out owns the data. */
int idx_load(struct dataset *out, const char *images, const char *labels,
	     int classes, struct kerr *e);

/* The synthetic problem: SYN_DIM features uniform in [-1, 1], of which the
 * first six decide one of SYN_CLASSES classes through three binary features
 * that are each not linearly separable:
 *   ring:  x0^2 + x1^2 > 0.64  (outside a disc)
 *   xor:   x2 * x3 > 0          (same sign)
 *   slab:  |x4 + x5| > 0.5      (outside a band)
 * class = 4*ring + 2*xor + slab; the other features are noise. Points within
 * SYN_MARGIN of a boundary are redrawn, so the classes are cleanly learnable
 * by an MLP, while a linear model cannot do much better than chance.
 * Generated from seed alone, bit-identically on any IEEE machine (only
 * +, *, and comparisons). n examples; the last holdout fraction goes to
 * test. K_EUSAGE if n is too small to leave both parts non-empty. */
#define SYN_DIM 10
#define SYN_CLASSES 8
#define SYN_MARGIN 0.02f
int synthetic_make(struct dataset *train, struct dataset *test, long n,
		   uint64_t seed, double holdout, struct kerr *e);

/* Moves the last holdout fraction of *all into *test, the rest into *train
 * (all is consumed). K_EUSAGE if either part would be empty. */
int dataset_split(struct dataset *all, struct dataset *train, struct dataset *test,
		  double holdout, struct kerr *e);

/* Random uniform features and labels, for the benchmark. */
int dataset_random(struct dataset *d, int n, int dim, int classes, uint64_t seed,
		   struct kerr *e);

/* FNV-1a over the shape, features and labels: a checkpoint records it so
 * that --resume on different data is refused. */
uint64_t dataset_fingerprint(const struct dataset *d);

/* Copies examples idx[0..B) into x[B][dim] and y[B]. */
void dataset_gather(const struct dataset *d, const int32_t *idx, int B,
		    float *x, int32_t *y);

/* Example order: epoch e is a Fisher-Yates permutation drawn from a stream
 * of (seed, e); the stream position pos = step * batch fixes the batch. */
struct sampler {
	uint64_t seed;
	int n;
	long epoch;      /* the epoch perm holds, -1 before the first */
	int32_t *perm;   /* [n], owned */
};

int sampler_init(struct sampler *s, uint64_t seed, int n, struct kerr *e);
void sampler_free(struct sampler *s);
/* idx[i] = the example at stream position pos + i, for i < B. */
void sampler_batch(struct sampler *s, uint64_t pos, int B, int32_t *idx);

#ifdef __cplusplus
}
#endif

#endif
