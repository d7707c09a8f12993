/* The multilayer perceptron: shapes, parameter layout, the plain-C reference
 * of every op (mlp_cpu.c) and the CUDA backend's interface (mlp_cuda.cu, or
 * mlp_nocuda.c in a build without nvcc). The CPU ops are the specification
 * the CUDA kernels are tested against.
 *
 * Layout (row-major, PyTorch's nn.Linear convention): layer l maps
 * dims[l] -> dims[l+1] with W_l[dims[l+1]][dims[l]] and b_l[dims[l+1]].
 * All parameters live in one flat array: every W_l first (they get weight
 * decay), then every b_l (they do not). Gradients, AdamW m and v share it. */
#ifndef KERNELS_MLP_H
#define KERNELS_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MLP_MAX_LAYERS 8   /* linear layers, hidden ones plus the classifier */
#define MLP_MAX_DIM 65536  /* widest layer accepted */

struct mlp_shape {
	int n_layers;                    /* linear layers (hidden + 1) */
	int dims[MLP_MAX_LAYERS + 1];    /* dims[0] input ... dims[n_layers] classes */
};

struct mlp_hparams {
	float lr, wd, beta1, beta2, eps;
};

/* Fills s from input width, hidden widths and class count; K_EUSAGE when
 * a width is out of range or there are too many layers. */
int mlp_shape_make(struct mlp_shape *s, int in, const int *hidden, int n_hidden,
		   int classes, struct kerr *e);
int mlp_shape_equal(const struct mlp_shape *a, const struct mlp_shape *b);
/* "784-1024-1024-10" into buf; returns buf. */
const char *mlp_shape_str(const struct mlp_shape *s, char *buf, size_t cap);
size_t mlp_n_params(const struct mlp_shape *s);
size_t mlp_n_weights(const struct mlp_shape *s);  /* the decayed prefix */
size_t mlp_w_offset(const struct mlp_shape *s, int l);
size_t mlp_b_offset(const struct mlp_shape *s, int l);
int mlp_max_width(const struct mlp_shape *s);
/* Floating-point operations of one training step at batch B (forward,
 * weight gradients and input gradients of every layer but the first). */
double mlp_step_flops(const struct mlp_shape *s, int B);

/* ---- CPU reference ops (mlp_cpu.c) ---- */

/* out[B][OC] = inp[B][C] . W[OC][C]^T. */
void matmul_forward_cpu(float *out, const float *inp, const float *W,
			int B, int C, int OC);
/* dinp[B][C] = dout[B][OC] . W[OC][C] (skipped when dinp is NULL);
 * dW[OC][C] = dout^T . inp (overwritten, not accumulated). */
void matmul_backward_cpu(float *dinp, float *dW, const float *dout,
			 const float *inp, const float *W, int B, int C, int OC);
/* In place: act = act + b, then max(act, 0) when relu. */
void bias_relu_forward_cpu(float *act, const float *b, int B, int OC, int relu);
/* dpre = dact * (act > 0) (or dact when !relu), db = column sums of dpre;
 * dpre may alias dact. act is the forward output (post-ReLU). */
void bias_relu_backward_cpu(float *dpre, float *db, const float *dact,
			    const float *act, int B, int OC, int relu);
/* Mean softmax cross-entropy of logits[B][K] against labels; when dlogits
 * is not NULL it receives d(mean loss)/d(logits) (may alias logits).
 * *correct (if not NULL) counts rows whose first argmax is the label. */
double softmax_ce_cpu(float *dlogits, long *correct, const float *logits,
		      const int32_t *labels, int B, int K);
/* One AdamW step (t is 1-based) over n params; the first n_decay get
 * decoupled weight decay. */
void adamw_cpu(float *p, const float *g, float *m, float *v, size_t n,
	       size_t n_decay, const struct mlp_hparams *hp, long t);
/* The bias-correction factors both backends use: 1 - beta^t. */
void adamw_bias_correction(const struct mlp_hparams *hp, long t, float *bc1, float *bc2);

/* Flushes denormal floats to zero on this thread (x86 FTZ+DAZ, AArch64
 * FZ). Late in training tiny gradients and second moments turn denormal
 * and each operation on them costs ~100x; CI time nearly halves. Results
 * change only below 1.2e-38, deterministically. main() and the tests call
 * it first; the CUDA build flushes too (nvcc -ftz=true), which keeps the
 * backends alike. */
void mlp_cpu_flush_denormals(void);

/* ---- the model on the CPU ---- */

struct mlp {
	struct mlp_shape shape;
	int max_batch;
	size_t n_params, n_weights;
	float *params, *grads, *m, *v;      /* n_params each; m, v zeroed */
	float *acts[MLP_MAX_LAYERS + 1];    /* acts[l] for l >= 1: [max_batch][dims[l]] */
	float *d0, *d1;                     /* ping-pong gradient buffers */
};

/* NULL on allocation failure (message in e). Free with mlp_free (NULL ok). */
struct mlp *mlp_new(const struct mlp_shape *s, int max_batch, struct kerr *e);
void mlp_free(struct mlp *m);
/* PyTorch's nn.Linear default: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for W and b,
 * drawn from a stream of seed; m and v are zeroed. */
void mlp_init_params(struct mlp *m, uint64_t seed);
/* Forward of x[B][dims[0]]; returns the logits (inside m->acts). */
const float *mlp_forward(struct mlp *m, const float *x, int B);
/* A whole training step: forward, loss, backward, AdamW at step t.
 * Returns the mean loss (NaN/Inf are returned, not hidden). */
double mlp_train_step(struct mlp *m, const float *x, const int32_t *y, int B,
		      const struct mlp_hparams *hp, long t, long *correct);
/* Forward and backward only (gradients in m->grads); the loss is returned. */
double mlp_loss_and_grad(struct mlp *m, const float *x, const int32_t *y, int B,
			 long *correct);
/* Sum of per-example losses and count of correct over n examples. */
void mlp_eval(struct mlp *m, const float *x, const int32_t *y, int n,
	      double *loss_sum, long *correct);

/* ---- the CUDA backend (mlp_cuda.cu; stubs in mlp_nocuda.c) ---- */

struct dataset;
struct mlp_cuda;

/* 1 when this binary was compiled with nvcc. */
int cuda_compiled(void);
/* Number of usable CUDA devices (honours CUDA_VISIBLE_DEVICES); 0 with the
 * reason in e when there is none. */
int cuda_device_count(struct kerr *e);
/* "NVIDIA H200 (sm_90, 132 SMs)" and the FP32 peak in FLOP/s of device 0. */
int cuda_device_info(char *name, size_t cap, double *peak_fp32, struct kerr *e);

/* Uploads the datasets (test may be NULL) and allocates buffers for batches
 * up to max_batch. tf32 allows TF32 tensor cores in cuBLAS. NULL on failure
 * (K_ECUDA in e). Free with mlp_cuda_free (NULL ok). */
struct mlp_cuda *mlp_cuda_new(const struct mlp_shape *s, int max_batch,
			      const struct dataset *train, const struct dataset *test,
			      int tf32, struct kerr *e);
void mlp_cuda_free(struct mlp_cuda *c);
/* Host <-> device copies of params, m and v (n_params floats each; m and v
 * may be NULL in get_state). */
int mlp_cuda_set_state(struct mlp_cuda *c, const float *params, const float *m,
		       const float *v, struct kerr *e);
int mlp_cuda_get_state(struct mlp_cuda *c, float *params, float *m, float *v,
		       struct kerr *e);
/* One training step on the training examples idx[0..B) (asynchronous). */
int mlp_cuda_step(struct mlp_cuda *c, const int32_t *idx, int B,
		  const struct mlp_hparams *hp, long t, struct kerr *e);
/* Whether steps replay a captured CUDA graph (default on; the environment's
 * KERNELS_CUDA_GRAPH=0 turns it off): set_graph switches (tests), and
 * graph_state says "on (...)", "off (why)" or "not captured yet". */
int mlp_cuda_set_graph(struct mlp_cuda *c, int on);
const char *mlp_cuda_graph_state(const struct mlp_cuda *c);
/* Waits, returns the loss sum and correct count since the last call, resets. */
int mlp_cuda_take_stats(struct mlp_cuda *c, double *loss_sum, long *correct,
			struct kerr *e);
/* Loss sum and correct count over the uploaded test set. */
int mlp_cuda_eval(struct mlp_cuda *c, double *loss_sum, long *correct, struct kerr *e);
/* Copies the gradients of the last step to host (for tests). */
int mlp_cuda_get_grads(struct mlp_cuda *c, float *grads, struct kerr *e);
/* Copies the outputs of layer l (1..n_layers) of the last forward, B rows,
 * to host (for tests: which ReLUs were active). */
int mlp_cuda_get_acts(struct mlp_cuda *c, int l, float *out, int B, struct kerr *e);

/* Single-kernel entry points for the CPU-vs-CUDA tests: host arrays in,
 * host arrays out, same contracts as the *_cpu functions above. */
int cuda_test_matmul_forward(float *out, const float *inp, const float *W,
			     int B, int C, int OC, struct kerr *e);
int cuda_test_matmul_backward(float *dinp, float *dW, const float *dout,
			      const float *inp, const float *W, int B, int C, int OC,
			      struct kerr *e);
int cuda_test_bias_relu_forward(float *act, const float *b, int B, int OC, int relu,
				struct kerr *e);
int cuda_test_bias_relu_backward(float *dpre, float *db, const float *dact,
				 const float *act, int B, int OC, int relu,
				 struct kerr *e);
int cuda_test_softmax_ce(float *dlogits, double *loss, long *correct,
			 const float *logits, const int32_t *labels, int B, int K,
			 struct kerr *e);
int cuda_test_adamw(float *p, const float *g, float *m, float *v, size_t n,
		    size_t n_decay, const struct mlp_hparams *hp, long t,
		    struct kerr *e);

#ifdef __cplusplus
}
#endif

#endif
