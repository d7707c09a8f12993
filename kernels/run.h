/* A training run: the loop over steps on either backend, progress events,
 * metrics.csv, checkpoints and --resume; and the --bench measurement. Never
 * prints: main() renders the events it is handed. */
#ifndef KERNELS_RUN_H
#define KERNELS_RUN_H

#include <stdint.h>

#include "base.h"
#include "data.h"
#include "mlp.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { DEV_AUTO = 0, DEV_CPU = 1, DEV_CUDA = 2 };

/* Flags the user set explicitly: on --resume they must agree with the
 * checkpoint, the others are taken from it. */
enum {
	GIVEN_HIDDEN = 1u << 0,
	GIVEN_BATCH = 1u << 1,
	GIVEN_LR = 1u << 2,
	GIVEN_WD = 1u << 3,
	GIVEN_SEED = 1u << 4,
};

struct run_config {
	int n_hidden;
	int hidden[MLP_MAX_LAYERS];
	long steps;                 /* total steps, counting those before a resume */
	int batch;
	struct mlp_hparams hp;
	uint64_t seed;
	int device;                 /* DEV_CPU or DEV_CUDA (main resolves auto) */
	int tf32;
	long log_every, eval_every, ckpt_every;  /* 0 disables eval/ckpt */
	const char *out_dir;        /* NULL: no metrics.csv, no checkpoints */
	const char *resume;         /* checkpoint to continue from, or NULL */
	unsigned given;             /* GIVEN_* */
};

enum { RUN_EV_START, RUN_EV_LOG, RUN_EV_END };

struct run_event {
	int kind;
	long step, total;
	/* RUN_EV_START */
	const struct mlp_shape *shape;
	size_t n_params;
	int n_train, n_test, batch;
	const char *device;
	/* RUN_EV_LOG: training averages since the previous log */
	double loss, acc, samples_per_s, ms_per_step;
	/* RUN_EV_LOG when evaluated at this step, and RUN_EV_END */
	int has_test;
	double test_loss, test_acc;
	long test_correct;
	int test_n;
	/* RUN_EV_END on CUDA: whether steps replayed a CUDA graph, and why not */
	const char *graph;
};

typedef void (*run_event_fn)(const struct run_event *ev, void *ud);

struct run_result {
	long step;
	double test_loss, test_acc;
	long test_correct;
	int test_n;
};

/* Trains on train, evaluates on test (both non-empty, same dim/classes).
 * Events go to fn (may be NULL). Writes out_dir/metrics.csv and
 * out_dir/ckpt.bin (every ckpt_every steps and at the end) when out_dir is
 * set. Returns 0, or K_EUSAGE (flag/checkpoint conflict), K_ECKPT, K_EIO,
 * K_ENOMEM, K_ENONFINITE (loss NaN/Inf; no checkpoint is written then) or
 * K_ECUDA, with the message in e. */
int run_train(const struct run_config *cfg, const struct dataset *train,
	      const struct dataset *test, run_event_fn fn, void *ud,
	      struct run_result *res, struct kerr *e);

struct bench_result {
	int batch;
	long steps;
	double samples_per_s, ms_per_step, flops_per_s;
	char graph[96];  /* CUDA: mlp_cuda_graph_state after the run */
};

/* Times steps training steps (after warmup untimed ones) of the model
 * cfg->hidden on random data of in features and classes classes at batch B,
 * on cfg->device. */
int run_bench(const struct run_config *cfg, int in, int classes, int B,
	      long warmup, long steps, struct bench_result *res, struct kerr *e);

#ifdef __cplusplus
}
#endif

#endif
