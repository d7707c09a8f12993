/* The plain-C reference of every op of the MLP (matmul forward/backward,
 * fused bias+ReLU forward/backward, softmax cross-entropy, AdamW) and the
 * model built from them. It is both the CPU backend and the specification
 * that the CUDA kernels are tested against, so it favours clarity and
 * determinism; the matmul is still cache-aware because CI trains with it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "mlp.h"
#include "banned.h"

/* ---- shapes ---- */

int mlp_shape_make(struct mlp_shape *s, int in, const int *hidden, int n_hidden,
		   int classes, struct kerr *e)
{
	if (n_hidden < 0 || n_hidden + 1 > MLP_MAX_LAYERS)
		return kerr_set(e, K_EUSAGE, "too many hidden layers (%d, at most %d)",
				n_hidden, MLP_MAX_LAYERS - 1);
	if (in < 1 || in > MLP_MAX_DIM)
		return kerr_set(e, K_EUSAGE, "input width %d out of range [1, %d]", in, MLP_MAX_DIM);
	if (classes < 2 || classes > MLP_MAX_DIM)
		return kerr_set(e, K_EUSAGE, "class count %d out of range [2, %d]",
				classes, MLP_MAX_DIM);
	memset(s, 0, sizeof(*s));
	s->n_layers = n_hidden + 1;
	s->dims[0] = in;
	for (int i = 0; i < n_hidden; i++) {
		if (hidden[i] < 1 || hidden[i] > MLP_MAX_DIM)
			return kerr_set(e, K_EUSAGE, "hidden width %d out of range [1, %d]",
					hidden[i], MLP_MAX_DIM);
		s->dims[i + 1] = hidden[i];
	}
	s->dims[s->n_layers] = classes;
	return 0;
}

int mlp_shape_equal(const struct mlp_shape *a, const struct mlp_shape *b)
{
	if (a->n_layers != b->n_layers)
		return 0;
	for (int i = 0; i <= a->n_layers; i++)
		if (a->dims[i] != b->dims[i])
			return 0;
	return 1;
}

const char *mlp_shape_str(const struct mlp_shape *s, char *buf, size_t cap)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i <= s->n_layers && used < cap; i++) {
		int n = snprintf(buf + used, cap - used, "%s%d", i ? "-" : "", s->dims[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	return buf;
}

size_t mlp_n_weights(const struct mlp_shape *s)
{
	size_t n = 0;
	for (int l = 0; l < s->n_layers; l++)
		n += (size_t)s->dims[l] * (size_t)s->dims[l + 1];
	return n;
}

size_t mlp_n_params(const struct mlp_shape *s)
{
	size_t n = mlp_n_weights(s);
	for (int l = 0; l < s->n_layers; l++)
		n += (size_t)s->dims[l + 1];
	return n;
}

size_t mlp_w_offset(const struct mlp_shape *s, int l)
{
	size_t off = 0;
	for (int i = 0; i < l; i++)
		off += (size_t)s->dims[i] * (size_t)s->dims[i + 1];
	return off;
}

size_t mlp_b_offset(const struct mlp_shape *s, int l)
{
	size_t off = mlp_n_weights(s);
	for (int i = 0; i < l; i++)
		off += (size_t)s->dims[i + 1];
	return off;
}

int mlp_max_width(const struct mlp_shape *s)
{
	int w = 0;
	for (int i = 1; i <= s->n_layers; i++)
		if (s->dims[i] > w)
			w = s->dims[i];
	return w;
}

double mlp_step_flops(const struct mlp_shape *s, int B)
{
	double f = 0;
	for (int l = 0; l < s->n_layers; l++) {
		double mn = (double)s->dims[l] * s->dims[l + 1];
		f += 2.0 * B * mn * (l == 0 ? 2 : 3);
	}
	return f;
}

/* ---- ops ---- */

/* c[0..n) += a0*b0 + a1*b1 + a2*b2 + a3*b3, in blocks of 8 so that gcc -O2
 * (whose "very cheap" cost model needs a known trip count) vectorises it. */
static void row_axpy4(float *restrict c, const float *restrict b0,
		      const float *restrict b1, const float *restrict b2,
		      const float *restrict b3, float a0, float a1, float a2,
		      float a3, int n)
{
	int j = 0;
	for (; j + 8 <= n; j += 8)
		for (int u = 0; u < 8; u++)
			c[j + u] += a0 * b0[j + u] + a1 * b1[j + u] +
				    a2 * b2[j + u] + a3 * b3[j + u];
	for (; j < n; j++)
		c[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
}

static void row_axpy1(float *restrict c, const float *restrict b, float a, int n)
{
	int j = 0;
	for (; j + 8 <= n; j += 8)
		for (int u = 0; u < 8; u++)
			c[j + u] += a * b[j + u];
	for (; j < n; j++)
		c[j] += a * b[j];
}

/* C[M][N] = sum_k A(i,k) * Bm[k][N] with A(i,k) = A[i*sai + k*sak]: i-k-j
 * order so the inner loop streams rows of Bm and C; k is blocked so that a
 * panel of Bm stays in cache across all rows i. The summation order depends
 * only on the shapes, so results are reproducible. */
static void gemm_ikj(float *restrict C, const float *restrict A, size_t sai,
		     size_t sak, const float *restrict Bm, int M, int N, int K)
{
	int kb_size = (int)((32768 / (size_t)(N > 0 ? N : 1)) & ~(size_t)3);
	if (kb_size < 4)
		kb_size = 4;
	memset(C, 0, (size_t)M * (size_t)N * sizeof(*C));
	for (int kb = 0; kb < K; kb += kb_size) {
		int kend = kb + kb_size < K ? kb + kb_size : K;
		for (int i = 0; i < M; i++) {
			float *c = C + (size_t)i * N;
			const float *a = A + (size_t)i * sai;
			int k = kb;
			for (; k + 4 <= kend; k += 4) {
				const float *b0 = Bm + (size_t)k * N;
				row_axpy4(c, b0, b0 + N, b0 + 2 * (size_t)N, b0 + 3 * (size_t)N,
					  a[k * sak], a[(k + 1) * sak], a[(k + 2) * sak],
					  a[(k + 3) * sak], N);
			}
			for (; k < kend; k++)
				row_axpy1(c, Bm + (size_t)k * N, a[k * sak], N);
		}
	}
}

void matmul_forward_cpu(float *out, const float *inp, const float *W,
			int B, int C, int OC, float *wt)
{
	/* out = inp . W^T; transposing W (C*OC work, small next to B*C*OC)
	 * turns the product into the streaming i-k-j form. */
	for (int o = 0; o < OC; o++)
		for (int c = 0; c < C; c++)
			wt[(size_t)c * OC + o] = W[(size_t)o * C + c];
	gemm_ikj(out, inp, (size_t)C, 1, wt, B, OC, C);
}

void matmul_backward_cpu(float *dinp, float *dW, const float *dout,
			 const float *inp, const float *W, int B, int C, int OC)
{
	if (dinp)
		gemm_ikj(dinp, dout, (size_t)OC, 1, W, B, C, OC);
	gemm_ikj(dW, dout, 1, (size_t)OC, inp, OC, C, B);
}

void bias_relu_forward_cpu(float *act, const float *b, int B, int OC, int relu)
{
	for (int i = 0; i < B; i++) {
		float *row = act + (size_t)i * OC;
		for (int o = 0; o < OC; o++) {
			float x = row[o] + b[o];
			/* x < 0, not !(x > 0): a NaN must survive to the loss check */
			row[o] = relu && x < 0.0f ? 0.0f : x;
		}
	}
}

void bias_relu_backward_cpu(float *dpre, float *db, const float *dact,
			    const float *act, int B, int OC, int relu)
{
	memset(db, 0, (size_t)OC * sizeof(*db));
	for (int i = 0; i < B; i++) {
		size_t row = (size_t)i * OC;
		for (int o = 0; o < OC; o++) {
			float g = dact[row + o];
			if (relu && !(act[row + o] > 0.0f))
				g = 0.0f;
			dpre[row + o] = g;
			db[o] += g;
		}
	}
}

double softmax_ce_cpu(float *dlogits, long *correct, const float *logits,
		      const int32_t *labels, int B, int K)
{
	double total = 0.0;
	long hits = 0;
	for (int i = 0; i < B; i++) {
		const float *x = logits + (size_t)i * K;
		int y = labels[i], arg = 0;
		float maxv = x[0], sum = 0.0f, xy = x[y];
		for (int j = 1; j < K; j++)
			if (x[j] > maxv) {
				maxv = x[j];
				arg = j;
			}
		for (int j = 0; j < K; j++)
			sum += expf(x[j] - maxv);
		total += (double)(logf(sum) - (xy - maxv));
		hits += arg == y;
		if (dlogits) {
			float inv = 1.0f / sum, scale = 1.0f / (float)B;
			float *d = dlogits + (size_t)i * K;
			for (int j = 0; j < K; j++) {
				float p = expf(x[j] - maxv) * inv;
				d[j] = (p - (j == y ? 1.0f : 0.0f)) * scale;
			}
		}
	}
	if (correct)
		*correct = hits;
	return total / B;
}

void adamw_bias_correction(const struct mlp_hparams *hp, long t, float *bc1, float *bc2)
{
	*bc1 = (float)(1.0 - pow((double)hp->beta1, (double)t));
	*bc2 = (float)(1.0 - pow((double)hp->beta2, (double)t));
}

void adamw_cpu(float *p, const float *g, float *m, float *v, size_t n,
	       size_t n_decay, const struct mlp_hparams *hp, long t)
{
	float bc1, bc2;
	float b1 = hp->beta1, b2 = hp->beta2;
	adamw_bias_correction(hp, t, &bc1, &bc2);
	for (size_t i = 0; i < n; i++) {
		float gi = g[i];
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		float mhat = mi / bc1, vhat = vi / bc2;
		float wd = i < n_decay ? hp->wd : 0.0f;
		m[i] = mi;
		v[i] = vi;
		p[i] -= hp->lr * (mhat / (sqrtf(vhat) + hp->eps) + wd * p[i]);
	}
}

void mlp_cpu_flush_denormals(void)
{
#if defined(__SSE2__)
	_mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ (bit 15) | DAZ (bit 6) */
#elif defined(__aarch64__)
	uint64_t fpcr;
	__asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
	fpcr |= (uint64_t)1 << 24; /* FZ */
	__asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
#endif
}

/* ---- the model ---- */

struct mlp *mlp_new(const struct mlp_shape *s, int max_batch, struct kerr *e)
{
	struct mlp *m = calloc(1, sizeof(*m));
	size_t width, wt = 0;
	if (!m)
		goto nomem;
	m->shape = *s;
	m->max_batch = max_batch;
	m->n_params = mlp_n_params(s);
	m->n_weights = mlp_n_weights(s);
	width = (size_t)mlp_max_width(s);
	for (int l = 0; l < s->n_layers; l++) {
		size_t sz = (size_t)s->dims[l] * (size_t)s->dims[l + 1];
		if (sz > wt)
			wt = sz;
	}
	m->params = calloc(m->n_params, sizeof(float));
	m->grads = calloc(m->n_params, sizeof(float));
	m->m = calloc(m->n_params, sizeof(float));
	m->v = calloc(m->n_params, sizeof(float));
	m->d0 = calloc((size_t)max_batch * width, sizeof(float));
	m->d1 = calloc((size_t)max_batch * width, sizeof(float));
	m->wt = calloc(wt, sizeof(float));
	if (!m->params || !m->grads || !m->m || !m->v || !m->d0 || !m->d1 || !m->wt)
		goto nomem;
	for (int l = 1; l <= s->n_layers; l++) {
		m->acts[l] = calloc((size_t)max_batch * (size_t)s->dims[l], sizeof(float));
		if (!m->acts[l])
			goto nomem;
	}
	return m;
nomem:
	mlp_free(m);
	kerr_set(e, K_ENOMEM, "out of memory allocating the model (%zu parameters, batch %d)",
		 mlp_n_params(s), max_batch);
	return NULL;
}

void mlp_free(struct mlp *m)
{
	if (!m)
		return;
	free(m->params);
	free(m->grads);
	free(m->m);
	free(m->v);
	free(m->d0);
	free(m->d1);
	free(m->wt);
	for (int l = 0; l <= MLP_MAX_LAYERS; l++)
		free(m->acts[l]);
	free(m);
}

void mlp_init_params(struct mlp *m, uint64_t seed)
{
	const struct mlp_shape *s = &m->shape;
	uint64_t st = rng_stream(seed, 1);
	for (int l = 0; l < s->n_layers; l++) {
		float bound = (float)(1.0 / sqrt((double)s->dims[l]));
		float *W = m->params + mlp_w_offset(s, l);
		float *b = m->params + mlp_b_offset(s, l);
		size_t nw = (size_t)s->dims[l] * (size_t)s->dims[l + 1];
		for (size_t i = 0; i < nw; i++)
			W[i] = (2.0f * rng_uniform(&st) - 1.0f) * bound;
		for (int i = 0; i < s->dims[l + 1]; i++)
			b[i] = (2.0f * rng_uniform(&st) - 1.0f) * bound;
	}
	memset(m->m, 0, m->n_params * sizeof(float));
	memset(m->v, 0, m->n_params * sizeof(float));
	memset(m->grads, 0, m->n_params * sizeof(float));
}

const float *mlp_forward(struct mlp *m, const float *x, int B)
{
	const struct mlp_shape *s = &m->shape;
	const float *in = x;
	for (int l = 0; l < s->n_layers; l++) {
		float *out = m->acts[l + 1];
		matmul_forward_cpu(out, in, m->params + mlp_w_offset(s, l), B,
				   s->dims[l], s->dims[l + 1], m->wt);
		bias_relu_forward_cpu(out, m->params + mlp_b_offset(s, l), B,
				      s->dims[l + 1], l < s->n_layers - 1);
		in = out;
	}
	return in;
}

double mlp_loss_and_grad(struct mlp *m, const float *x, const int32_t *y, int B,
			 long *correct)
{
	const struct mlp_shape *s = &m->shape;
	const float *logits = mlp_forward(m, x, B);
	float *dout = m->d0, *dnext = m->d1;
	double loss = softmax_ce_cpu(dout, correct, logits, y, B, s->dims[s->n_layers]);
	for (int l = s->n_layers - 1; l >= 0; l--) {
		const float *inp = l == 0 ? x : m->acts[l];
		float *tmp;
		bias_relu_backward_cpu(dout, m->grads + mlp_b_offset(s, l), dout,
				       m->acts[l + 1], B, s->dims[l + 1], l < s->n_layers - 1);
		matmul_backward_cpu(l == 0 ? NULL : dnext, m->grads + mlp_w_offset(s, l),
				    dout, inp, m->params + mlp_w_offset(s, l), B,
				    s->dims[l], s->dims[l + 1]);
		tmp = dout;
		dout = dnext;
		dnext = tmp;
	}
	return loss;
}

double mlp_train_step(struct mlp *m, const float *x, const int32_t *y, int B,
		      const struct mlp_hparams *hp, long t, long *correct)
{
	double loss = mlp_loss_and_grad(m, x, y, B, correct);
	adamw_cpu(m->params, m->grads, m->m, m->v, m->n_params, m->n_weights, hp, t);
	return loss;
}

void mlp_eval(struct mlp *m, const float *x, const int32_t *y, int n,
	      double *loss_sum, long *correct)
{
	const struct mlp_shape *s = &m->shape;
	int K = s->dims[s->n_layers];
	double total = 0.0;
	long hits = 0;
	for (int i = 0; i < n; i += m->max_batch) {
		int B = n - i < m->max_batch ? n - i : m->max_batch;
		long c = 0;
		const float *logits = mlp_forward(m, x + (size_t)i * s->dims[0], B);
		total += softmax_ce_cpu(NULL, &c, logits, y + i, B, K) * B;
		hits += c;
	}
	*loss_sum = total;
	*correct = hits;
}
