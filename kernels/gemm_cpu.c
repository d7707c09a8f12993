/* The CPU reference's matrix product: a cache-blocked GEMM over packed
 * panels (the BLIS/GotoBLAS layout) with a register-tiled micro-kernel in
 * GCC vector extensions, split across OpenMP threads by output tiles. Plain
 * C: no intrinsics, no BLAS. Every output element is summed by one thread,
 * k = 0, 1, ..., K-1 in order, each product and each sum rounded on its own
 * (no FMA), so the result does not depend on the blocking, the vector
 * width or the thread count (README.md, Numerics). */
#include <stddef.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "gemm_cpu.h"
#include "banned.h"

/* Vector width (floats) from what the compiler may use, and the register
 * tile: MR rows by NV vectors, MR * NV accumulators plus NV loads and one
 * broadcast in the register file (32 zmm with AVX-512, 16 otherwise). With
 * AVX-512, 8 x 2 measured as fast as 12 x 2 at batch 4096 and 5% faster at
 * batch 64 (64 rows: no partial tile); 14 x 2 and 8 x 3 were slower. */
#if defined(__AVX512F__)
#define VW 16
#define MR 8
#elif defined(__AVX__)
#define VW 8
#define MR 6
#else
#define VW 4
#define MR 6
#endif
#define NV 2
#define NR (NV * VW)
/* Cache blocking: a KC x NR sliver of B stays in L1 while the micro-kernel
 * walks an MC x KC block of A (L2); the KC x NC panel of B is reused by
 * every block of A. */
#define KC 256
#define MC (MR * 16)
#define NC (NR * 16)
/* Below this many multiply-adds a product runs on one thread: starting the
 * team costs more than it saves. */
#define GEMM_PAR_MIN (1L << 18)

typedef float vf __attribute__((vector_size(VW * sizeof(float))));

/* Packing buffers, one set per thread: static, so the product needs no
 * allocation and cannot fail. */
static _Thread_local float pack_a[MC * KC] __attribute__((aligned(64)));
static _Thread_local float pack_b[KC * NC] __attribute__((aligned(64)));

static inline vf vload(const float *p)
{
	vf v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void vstore(float *p, vf v)
{
	memcpy(p, &v, sizeof(v));
}

/* c[MR][NR] (row stride ldc) = (first ? 0 : c) + sum over p < kc of
 * a[p][0..MR) x b[p][0..NR), summed in order of p. */
static void micro_kernel(int kc, const float *restrict a, const float *restrict b,
			 float *restrict c, size_t ldc, int first)
{
	vf acc[MR][NV];
	for (int i = 0; i < MR; i++)
		for (int v = 0; v < NV; v++)
			acc[i][v] = first ? (vf){ 0 } : vload(c + i * ldc + v * VW);
	for (int p = 0; p < kc; p++) {
		vf bv[NV];
		for (int v = 0; v < NV; v++)
			bv[v] = vload(b + (size_t)p * NR + v * VW);
		for (int i = 0; i < MR; i++) {
			float ai = a[(size_t)p * MR + i];   /* broadcast by GCC */
			for (int v = 0; v < NV; v++)
				acc[i][v] += bv[v] * ai;
		}
	}
	for (int i = 0; i < MR; i++)
		for (int v = 0; v < NV; v++)
			vstore(c + i * ldc + v * VW, acc[i][v]);
}

/* A tile at the edge of C (mr < MR or nr < NR) goes through a full tile on
 * the stack; the packed panels are zero-padded, so the kernel is the same. */
static void edge_kernel(int kc, const float *a, const float *b, float *c, size_t ldc,
			int first, int mr, int nr)
{
	float t[MR * NR] __attribute__((aligned(64)));
	if (!first)
		for (int i = 0; i < mr; i++)
			memcpy(t + i * NR, c + i * ldc, (size_t)nr * sizeof(float));
	micro_kernel(kc, a, b, t, NR, first);
	for (int i = 0; i < mr; i++)
		memcpy(c + i * ldc, t + i * NR, (size_t)nr * sizeof(float));
}

/* ap[MR-row sliver][p][i] = A(m0 + i, k0 + p), zero past row m1. */
static void pack_a_block(float *restrict ap, const struct gemm_mat *A, int m0, int m1,
			 int k0, int kc)
{
	for (int t = m0; t < m1; t += MR) {
		int mr = m1 - t < MR ? m1 - t : MR;
		if (A->s1 == 1) {          /* rows contiguous in k */
			for (int i = 0; i < mr; i++) {
				const float *src = A->p + (size_t)(t + i) * A->s0 + k0;
				for (int p = 0; p < kc; p++)
					ap[(size_t)p * MR + i] = src[p];
			}
		} else {
			for (int p = 0; p < kc; p++) {
				const float *src = A->p + (size_t)(k0 + p) * A->s1;
				for (int i = 0; i < mr; i++)
					ap[(size_t)p * MR + i] = src[(size_t)(t + i) * A->s0];
			}
		}
		for (int i = mr; i < MR; i++)
			for (int p = 0; p < kc; p++)
				ap[(size_t)p * MR + i] = 0.0f;
		ap += (size_t)MR * kc;
	}
}

/* bp[NR-column sliver][p][j] = B(k0 + p, n0 + j), zero past column n1. */
static void pack_b_panel(float *restrict bp, const struct gemm_mat *B, int n0, int n1,
			 int k0, int kc)
{
	for (int s = n0; s < n1; s += NR) {
		int nr = n1 - s < NR ? n1 - s : NR;
		if (B->s1 == 1) {          /* rows of B contiguous in n */
			for (int p = 0; p < kc; p++) {
				const float *src = B->p + (size_t)(k0 + p) * B->s0 + s;
				float *dst = bp + (size_t)p * NR;
				memcpy(dst, src, (size_t)nr * sizeof(float));
				for (int j = nr; j < NR; j++)
					dst[j] = 0.0f;
			}
		} else {                   /* columns of B contiguous in k (W^T) */
			for (int j = 0; j < nr; j++) {
				const float *src = B->p + (size_t)(s + j) * B->s1 + (size_t)k0 * B->s0;
				for (int p = 0; p < kc; p++)
					bp[(size_t)p * NR + j] = src[(size_t)p * B->s0];
			}
			for (int p = 0; p < kc; p++)
				for (int j = nr; j < NR; j++)
					bp[(size_t)p * NR + j] = 0.0f;
		}
		bp += (size_t)NR * kc;
	}
}

/* C[m0..m1)[n0..n1) of the product on this thread. */
static void gemm_range(float *C, const struct gemm_mat *A, const struct gemm_mat *B,
		       int K, int N, int m0, int m1, int n0, int n1)
{
	for (int jc = n0; jc < n1; jc += NC) {
		int jend = n1 - jc < NC ? n1 : jc + NC;
		for (int pc = 0; pc < K; pc += KC) {
			int kc = K - pc < KC ? K - pc : KC;
			pack_b_panel(pack_b, B, jc, jend, pc, kc);
			for (int ic = m0; ic < m1; ic += MC) {
				int iend = m1 - ic < MC ? m1 : ic + MC;
				pack_a_block(pack_a, A, ic, iend, pc, kc);
				for (int jr = jc; jr < jend; jr += NR) {
					int nr = jend - jr < NR ? jend - jr : NR;
					const float *b = pack_b + (size_t)(jr - jc) * kc;
					for (int ir = ic; ir < iend; ir += MR) {
						int mr = iend - ir < MR ? iend - ir : MR;
						const float *a = pack_a + (size_t)(ir - ic) * kc;
						float *c = C + (size_t)ir * N + jr;
						if (mr == MR && nr == NR)
							micro_kernel(kc, a, b, c, (size_t)N, pc == 0);
						else
							edge_kernel(kc, a, b, c, (size_t)N, pc == 0, mr, nr);
					}
				}
			}
		}
	}
}

/* Part t of nt: an equal share of whole tiles (of size unit) of n. */
static void share(int n, int unit, int t, int nt, int *lo, int *hi)
{
	int units = (n + unit - 1) / unit;
	int a = (int)((long)units * t / nt), b = (int)((long)units * (t + 1) / nt);
	*lo = a * unit < n ? a * unit : n;
	*hi = b * unit < n ? b * unit : n;
}

void gemm_cpu(float *C, const struct gemm_mat *A, const struct gemm_mat *B,
	      int M, int N, int K)
{
	if (M <= 0 || N <= 0)
		return;
	if (K <= 0) {
		memset(C, 0, (size_t)M * (size_t)N * sizeof(*C));
		return;
	}
	/* Work units of whole tiles along the wider side, never along K (each
	 * output's sum stays in one unit, in one order), handed out
	 * dynamically: which thread takes a unit changes no bit, and a thread
	 * that the OS preempts (a busy machine) holds up at most one unit. */
	int split_n = (N + NR - 1) / NR >= (M + MR - 1) / MR;
	int tiles = split_n ? (N + NR - 1) / NR : (M + MR - 1) / MR;
	int units = 1;
#ifdef _OPENMP
	if ((long)M * N * K >= GEMM_PAR_MIN)
		units = omp_get_max_threads() * 4;
#endif
	if (units > tiles)
		units = tiles;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) if (units > 1)
#endif
	for (int u = 0; u < units; u++) {
		int lo, hi;
		share(split_n ? N : M, split_n ? NR : MR, u, units, &lo, &hi);
		if (lo >= hi)
			continue;
		if (split_n)
			gemm_range(C, A, B, K, N, 0, M, lo, hi);
		else
			gemm_range(C, A, B, K, N, lo, hi, 0, N);
	}
}
