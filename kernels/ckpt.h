/* Checkpoints: everything needed to continue a run bit-identically (shape,
 * step, seed and sampler position, hyperparameters, data fingerprint,
 * parameters, AdamW m and v), little-endian, with a trailing FNV-1a
 * checksum; written to a temporary file, fsynced and renamed into place.
 * The byte layout is documented in README.md "Checkpoint format". */
#ifndef KERNELS_CKPT_H
#define KERNELS_CKPT_H

#include <stdint.h>

#include "base.h"
#include "mlp.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKPT_MAGIC "GPURUNCK"
#define CKPT_VERSION 1

struct ckpt_meta {
	struct mlp_shape shape;
	uint32_t batch;
	uint64_t step;        /* optimizer steps taken (AdamW's t) */
	uint64_t seed;        /* training seed: init and example order */
	uint64_t sample_pos;  /* sampler stream position (step * batch) */
	uint64_t data_fp;     /* dataset_fingerprint of the training set */
	struct mlp_hparams hp;
};

/* Writes path atomically (path.tmp.PID, fsync, rename, fsync of the folder).
 * params, m and v hold mlp_n_params(&meta->shape) floats each.
 * Returns 0 or K_EIO with the message in e. */
int ckpt_save(const char *path, const struct ckpt_meta *meta, const float *params,
	      const float *m, const float *v, struct kerr *e);

/* Reads and verifies path: magic, version, shape limits, exact size and
 * checksum. On success the three arrays are malloc'ed and owned by the
 * caller (free each). K_EIO when unreadable, K_ECKPT when malformed. */
int ckpt_load(const char *path, struct ckpt_meta *meta, float **params,
	      float **m, float **v, struct kerr *e);

#ifdef __cplusplus
}
#endif

#endif
