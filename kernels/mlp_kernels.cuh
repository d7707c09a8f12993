/* Internal interface between the CUDA kernels (mlp_kernels.cu) and the CUDA
 * backend (mlp_cuda.cu): the checking macros and the launchers. Launchers
 * enqueue on stream s and return 0 or K_ECUDA with file:line in e. */
#ifndef KERNELS_MLP_KERNELS_CUH
#define KERNELS_MLP_KERNELS_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include "mlp.h"

int cuda_fail(struct kerr *e, const char *file, int line, const char *call, const char *why);

/* Every CUDA and cuBLAS call goes through one of these; they need a
 * struct kerr *e in scope and return K_ECUDA from an int function. */
#define cudaCheck(call) do { cudaError_t err_ = (call); if (err_ != cudaSuccess) \
	return cuda_fail(e, __FILE__, __LINE__, #call, cudaGetErrorString(err_)); } while (0)
#define cublasCheck(call) do { cublasStatus_t st_ = (call); if (st_ != CUBLAS_STATUS_SUCCESS) \
	return cuda_fail(e, __FILE__, __LINE__, #call, cublasGetStatusString(st_)); } while (0)
/* After a launch: configuration errors show up here, not at the launch. */
#define launchCheck() cudaCheck(cudaGetLastError())

/* Blocks for n items at threads per block, capped (kernels grid-stride). */
int grid_for(size_t n, int threads);

/* Scratch the bias backward needs: COLSUM_MAX_BLOCKS * OC floats. */
#define COLSUM_MAX_BLOCKS 64

/* Same contracts as the *_cpu functions in mlp.h, on device pointers. */
int gemm_forward(cublasHandle_t h, float *out, const float *inp, const float *W,
		 int B, int C, int OC, struct kerr *e);
int gemm_backward(cublasHandle_t h, float *dinp, float *dW, const float *dout,
		  const float *inp, const float *W, int B, int C, int OC, struct kerr *e);
int launch_bias_relu_forward(float *act, const float *b, int B, int OC, int relu,
			     cudaStream_t s, struct kerr *e);
int launch_bias_relu_backward(float *dpre, float *db, float *partial, const float *dact,
			      const float *act, int B, int OC, int relu, cudaStream_t s,
			      struct kerr *e);
/* Row losses and hits into loss_rows/hit_rows ([B] each), their sums added
 * to stats[0..1] (double); dlogits (may be NULL, may alias logits) gets the
 * gradient of the mean loss. */
int launch_softmax_ce(float *dlogits, float *loss_rows, float *hit_rows,
		      const float *logits, const int32_t *labels, int B, int K,
		      double *stats, cudaStream_t s, struct kerr *e);
int launch_adamw(float *p, const float *g, float *m, float *v, size_t n, size_t n_decay,
		 const struct mlp_hparams *hp, long t, cudaStream_t s, struct kerr *e);
/* The same, with lr, bc1 and bc2 read on the device from step_args[0..2]
 * (what a CUDA graph of the step needs). */
int launch_adamw_args(float *p, const float *g, float *m, float *v, size_t n,
		      size_t n_decay, const struct mlp_hparams *hp, const float *step_args,
		      cudaStream_t s, struct kerr *e);
int launch_gather(float *x, int32_t *y, const float *src_x, const int32_t *src_y,
		  const int32_t *idx, int B, int D, cudaStream_t s, struct kerr *e);

#endif
