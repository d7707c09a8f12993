/* The CUDA kernels of the MLP and their launchers: fused bias+ReLU forward
 * and backward (with the bias gradient's column sum), softmax cross-entropy
 * (loss, accuracy and gradient in one pass), AdamW, the batch gather, and
 * the cuBLAS matrix products. Every kernel has a plain-C twin in mlp_cpu.c
 * and a test comparing the two (tests/test_gpu.c). */
#include "mlp_kernels.cuh"
#include "banned.h"

int cuda_fail(struct kerr *e, const char *file, int line, const char *call, const char *why)
{
	return kerr_set(e, K_ECUDA, "%s:%d: %s: %s", file, line, call, why);
}

int grid_for(size_t n, int threads)
{
	size_t g = (n + (size_t)threads - 1) / (size_t)threads;
	if (g > 65535 * 8)
		g = 65535 * 8; /* the kernels loop over the rest */
	return g ? (int)g : 1;
}

/* ---- kernels ---- */

/* X[B][D], y[B] = the training examples idx[0..B). */
__global__ void gather_kernel(float *x, int32_t *y, const float *src_x,
			      const int32_t *src_y, const int32_t *idx, int B, int D)
{
	size_t n = (size_t)B * D;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t r = i / D, c = i % D;
		int32_t s = idx[r];
		x[i] = src_x[(size_t)s * D + c];
		if (c == 0)
			y[r] = src_y[s];
	}
}

/* In place act = act + b, then ReLU (x < 0 -> 0, so NaN survives as on the
 * CPU). Four columns per thread when OC allows float4 rows. */
template <bool RELU>
__global__ void bias_relu_forward_kernel(float *act, const float *b, int B, int OC)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t start = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	if (OC % 4 == 0) {
		float4 *a4 = reinterpret_cast<float4 *>(act);
		size_t n4 = (size_t)B * OC / 4;
		for (size_t i = start; i < n4; i += stride) {
			int col = (int)((i * 4) % OC);
			float4 v = a4[i];
			v.x += b[col];
			v.y += b[col + 1];
			v.z += b[col + 2];
			v.w += b[col + 3];
			if (RELU) {
				v.x = v.x < 0.0f ? 0.0f : v.x;
				v.y = v.y < 0.0f ? 0.0f : v.y;
				v.z = v.z < 0.0f ? 0.0f : v.z;
				v.w = v.w < 0.0f ? 0.0f : v.w;
			}
			a4[i] = v;
		}
		return;
	}
	for (size_t i = start; i < (size_t)B * OC; i += stride) {
		float v = act[i] + b[i % OC];
		act[i] = RELU && v < 0.0f ? 0.0f : v;
	}
}

/* dpre = dact masked by act > 0, and per row-block column sums of dpre
 * (into db when there is one row block, else into partial[blockIdx.y]).
 * Block (32, 16): a warp reads 32 consecutive columns of one row. */
#define COLSUM_ROWS 16
template <bool RELU>
__global__ void bias_relu_backward_kernel(float *dpre, float *out, const float *dact,
					  const float *act, int B, int OC, int rows_per_block)
{
	__shared__ float sh[COLSUM_ROWS][33];
	int col = blockIdx.x * 32 + threadIdx.x;
	int row0 = blockIdx.y * rows_per_block;
	int row1 = min(B, row0 + rows_per_block);
	float sum = 0.0f;
	if (col < OC) {
		for (int r = row0 + threadIdx.y; r < row1; r += COLSUM_ROWS) {
			size_t i = (size_t)r * OC + col;
			float g = dact[i];
			if (RELU && !(act[i] > 0.0f))
				g = 0.0f;
			dpre[i] = g;
			sum += g;
		}
	}
	sh[threadIdx.y][threadIdx.x] = sum;
	__syncthreads();
	if (threadIdx.y == 0 && col < OC) {
		float s = 0.0f;
		for (int k = 0; k < COLSUM_ROWS; k++)
			s += sh[k][threadIdx.x];
		out[(size_t)blockIdx.y * OC + col] = s;
	}
}

/* db[c] = sum over row blocks of partial[k][c], in a fixed order. */
__global__ void column_sum_kernel(float *db, const float *partial, int blocks, int OC)
{
	int col = blockIdx.x * blockDim.x + threadIdx.x;
	if (col < OC) {
		float s = 0.0f;
		for (int k = 0; k < blocks; k++)
			s += partial[(size_t)k * OC + col];
		db[col] = s;
	}
}

/* One warp per row: max (first argmax, as the CPU), log-sum-exp, the row's
 * loss and hit, and when dlogits is set the gradient of the mean loss
 * (dlogits may alias logits: every lane reads x[y] before any write). */
__global__ void softmax_ce_kernel(float *dlogits, float *loss_rows, float *hit_rows,
				  const float *logits, const int32_t *labels, int B, int K)
{
	int row = (int)((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32);
	int lane = threadIdx.x % 32;
	if (row >= B)
		return;
	const float *x = logits + (size_t)row * K;
	int y = labels[row];
	float xy = x[y], mx = -INFINITY, sum = 0.0f;
	int arg = K;
	for (int j = lane; j < K; j += 32) {
		float v = x[j];
		if (v > mx || (arg == K && j == lane)) {
			mx = v;
			arg = j;
		}
	}
	for (int off = 16; off > 0; off /= 2) {
		float omx = __shfl_xor_sync(0xffffffffu, mx, off);
		int oarg = __shfl_xor_sync(0xffffffffu, arg, off);
		if (omx > mx || (omx == mx && oarg < arg)) {
			mx = omx;
			arg = oarg;
		}
	}
	for (int j = lane; j < K; j += 32)
		sum += expf(x[j] - mx);
	for (int off = 16; off > 0; off /= 2)
		sum += __shfl_xor_sync(0xffffffffu, sum, off);
	if (lane == 0) {
		loss_rows[row] = logf(sum) - (xy - mx);
		hit_rows[row] = arg == y ? 1.0f : 0.0f;
	}
	if (dlogits) {
		float inv = 1.0f / sum, scale = 1.0f / (float)B;
		float *d = dlogits + (size_t)row * K;
		for (int j = lane; j < K; j += 32) {
			float p = expf(x[j] - mx) * inv;
			d[j] = (p - (j == y ? 1.0f : 0.0f)) * scale;
		}
	}
}

/* stats[0] += sum of loss_rows, stats[1] += sum of hit_rows: one block, a
 * fixed reduction tree in double, so the result is deterministic. */
#define STATS_THREADS 1024
__global__ void stats_kernel(double *stats, const float *loss_rows, const float *hit_rows, int B)
{
	__shared__ double sl[STATS_THREADS], sh[STATS_THREADS];
	double l = 0, h = 0;
	for (int i = threadIdx.x; i < B; i += STATS_THREADS) {
		l += loss_rows[i];
		h += hit_rows[i];
	}
	sl[threadIdx.x] = l;
	sh[threadIdx.x] = h;
	__syncthreads();
	for (int s = STATS_THREADS / 2; s > 0; s /= 2) {
		if ((int)threadIdx.x < s) {
			sl[threadIdx.x] += sl[threadIdx.x + s];
			sh[threadIdx.x] += sh[threadIdx.x + s];
		}
		__syncthreads();
	}
	if (threadIdx.x == 0) {
		stats[0] += sl[0];
		stats[1] += sh[0];
	}
}

/* AdamW, with every multiply and add rounded separately (no FMA
 * contraction) so that it matches adamw_cpu bit for bit. */
__global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n,
			     size_t n_decay, float lr, float b1, float b2, float eps,
			     float wd, float bc1, float bc2, const float *step_args)
{
	/* In a CUDA graph the step's lr and bias corrections change every
	 * launch: they are read from device memory (the same floats). */
	if (step_args) {
		lr = step_args[0];
		bc1 = step_args[1];
		bc2 = step_args[2];
	}
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float gi = g[i], pi = p[i];
		float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(1.0f - b1, gi));
		float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(1.0f - b2, gi), gi));
		float mhat = __fdiv_rn(mi, bc1), vhat = __fdiv_rn(vi, bc2);
		float w = i < n_decay ? wd : 0.0f;
		float upd = __fadd_rn(__fdiv_rn(mhat, __fadd_rn(__fsqrt_rn(vhat), eps)), __fmul_rn(w, pi));
		m[i] = mi;
		v[i] = vi;
		p[i] = __fsub_rn(pi, __fmul_rn(lr, upd));
	}
}

/* ---- launchers, shared by training and the tests ---- */

int gemm_forward(cublasHandle_t h, float *out, const float *inp, const float *W,
			int B, int C, int OC, struct kerr *e)
{
	const float one = 1.0f, zero = 0.0f;
	/* Column-major: out^T[OC][B] = W^T^T . inp^T (W row-major [OC][C]). */
	cublasCheck(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, B, C, &one, W, C, inp, C,
				&zero, out, OC));
	return 0;
}

int gemm_backward(cublasHandle_t h, float *dinp, float *dW, const float *dout,
			 const float *inp, const float *W, int B, int C, int OC, struct kerr *e)
{
	const float one = 1.0f, zero = 0.0f;
	/* dinp[B][C] = dout[B][OC] . W[OC][C] */
	if (dinp)
		cublasCheck(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, C, B, OC, &one, W, C, dout,
					OC, &zero, dinp, C));
	/* dW[OC][C] = dout^T . inp */
	cublasCheck(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, B, &one, inp, C, dout, OC,
				&zero, dW, C));
	return 0;
}

int launch_bias_relu_forward(float *act, const float *b, int B, int OC, int relu,
				    cudaStream_t s, struct kerr *e)
{
	size_t n = (size_t)B * OC / (OC % 4 == 0 ? 4 : 1);
	if (relu)
		bias_relu_forward_kernel<true><<<grid_for(n, 256), 256, 0, s>>>(act, b, B, OC);
	else
		bias_relu_forward_kernel<false><<<grid_for(n, 256), 256, 0, s>>>(act, b, B, OC);
	launchCheck();
	return 0;
}

/* Row blocks of the column sum: enough blocks to fill the GPU at large B,
 * one (no second pass) at small B. */
static int colsum_blocks(int B)
{
	int k = (B + 127) / 128;
	return k < 1 ? 1 : k > COLSUM_MAX_BLOCKS ? COLSUM_MAX_BLOCKS : k;
}

int launch_bias_relu_backward(float *dpre, float *db, float *partial, const float *dact,
				     const float *act, int B, int OC, int relu, cudaStream_t s,
				     struct kerr *e)
{
	int blocks = colsum_blocks(B), rows = (B + blocks - 1) / blocks;
	dim3 grid((unsigned)((OC + 31) / 32), (unsigned)blocks), block(32, COLSUM_ROWS);
	float *out = blocks == 1 ? db : partial;
	if (relu)
		bias_relu_backward_kernel<true><<<grid, block, 0, s>>>(dpre, out, dact, act, B, OC, rows);
	else
		bias_relu_backward_kernel<false><<<grid, block, 0, s>>>(dpre, out, dact, act, B, OC, rows);
	launchCheck();
	if (blocks > 1) {
		column_sum_kernel<<<(OC + 255) / 256, 256, 0, s>>>(db, partial, blocks, OC);
		launchCheck();
	}
	return 0;
}

int launch_softmax_ce(float *dlogits, float *loss_rows, float *hit_rows,
			     const float *logits, const int32_t *labels, int B, int K,
			     double *stats, cudaStream_t s, struct kerr *e)
{
	softmax_ce_kernel<<<(B + 3) / 4, 128, 0, s>>>(dlogits, loss_rows, hit_rows, logits,
						      labels, B, K);
	launchCheck();
	stats_kernel<<<1, STATS_THREADS, 0, s>>>(stats, loss_rows, hit_rows, B);
	launchCheck();
	return 0;
}

int launch_adamw(float *p, const float *g, float *m, float *v, size_t n,
			size_t n_decay, const struct mlp_hparams *hp, long t, cudaStream_t s,
			struct kerr *e)
{
	float bc1, bc2;
	adamw_bias_correction(hp, t, &bc1, &bc2);
	adamw_kernel<<<grid_for(n, 256), 256, 0, s>>>(p, g, m, v, n, n_decay, hp->lr, hp->beta1,
						      hp->beta2, hp->eps, hp->wd, bc1, bc2, NULL);
	launchCheck();
	return 0;
}

int launch_adamw_args(float *p, const float *g, float *m, float *v, size_t n,
		      size_t n_decay, const struct mlp_hparams *hp, const float *step_args,
		      cudaStream_t s, struct kerr *e)
{
	adamw_kernel<<<grid_for(n, 256), 256, 0, s>>>(p, g, m, v, n, n_decay, 0.0f, hp->beta1,
						      hp->beta2, hp->eps, hp->wd, 1.0f, 1.0f,
						      step_args);
	launchCheck();
	return 0;
}

int launch_gather(float *x, int32_t *y, const float *src_x, const int32_t *src_y,
		  const int32_t *idx, int B, int D, cudaStream_t s, struct kerr *e)
{
	gather_kernel<<<grid_for((size_t)B * D, 256), 256, 0, s>>>(x, y, src_x, src_y, idx, B, D);
	launchCheck();
	return 0;
}
