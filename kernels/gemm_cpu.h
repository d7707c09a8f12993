/* The CPU reference's matrix product (gemm_cpu.c), used by mlp_cpu.c. */
#ifndef KERNELS_GEMM_CPU_H
#define KERNELS_GEMM_CPU_H

/* A strided view of a matrix: element (r, c) is p[r * s0 + c * s1]. */
struct gemm_mat {
	const float *p;
	size_t s0, s1;
};

/* C[M][N] (row-major, overwritten) = A[M][K] . B[K][N]. Each element is
 * the sum over k = 0..K-1 in order, every product and sum rounded on its
 * own, whatever the thread count. Runs on the OpenMP team when the product
 * is large enough; call it from outside a parallel region. */
void gemm_cpu(float *C, const struct gemm_mat *A, const struct gemm_mat *B,
	      int M, int N, int K);

#endif
