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

#include "gemm_cpu.h"
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

/* OpenMP only where each output element is computed whole by one thread
 * (rows, column blocks, elements), so results are the same bits for any
 * thread count; small ops stay on one thread (starting the team costs
 * microseconds). Without -fopenmp the pragmas vanish. */
#ifdef _OPENMP
#define OMP_STR(x) #x
#define OMP_FOR_IF(cond) _Pragma(OMP_STR(omp parallel for schedule(static) if (cond)))
#else
#define OMP_FOR_IF(cond)
#endif
#define ELEMWISE_PAR_MIN (1L << 17)
#define COL_BLOCK 64

void matmul_forward_cpu(float *out, const float *inp, const float *W,
			int B, int C, int OC)
{
	/* out = inp . W^T: W read as W^T through strides, packed by gemm_cpu */
	struct gemm_mat a = { inp, (size_t)C, 1 }, w = { W, 1, (size_t)C };
	gemm_cpu(out, &a, &w, B, OC, C);
}

void matmul_backward_cpu(float *dinp, float *dW, const float *dout,
			 const float *inp, const float *W, int B, int C, int OC)
{
	struct gemm_mat d = { dout, (size_t)OC, 1 }, w = { W, (size_t)C, 1 };
	struct gemm_mat dt = { dout, 1, (size_t)OC }, x = { inp, (size_t)C, 1 };
	if (dinp)
		gemm_cpu(dinp, &d, &w, B, C, OC);
	gemm_cpu(dW, &dt, &x, OC, C, B);
}

void bias_relu_forward_cpu(float *act, const float *b, int B, int OC, int relu)
{
	OMP_FOR_IF((long)B * OC >= ELEMWISE_PAR_MIN)
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
	/* Threads take blocks of columns, so each db[o] is summed by one
	 * thread over i = 0..B-1 in order, whatever the thread count. */
	int nblk = (OC + COL_BLOCK - 1) / COL_BLOCK;
	memset(db, 0, (size_t)OC * sizeof(*db));
	OMP_FOR_IF((long)B * OC >= ELEMWISE_PAR_MIN)
	for (int blk = 0; blk < nblk; blk++) {
		int o0 = blk * COL_BLOCK, o1 = o0 + COL_BLOCK < OC ? o0 + COL_BLOCK : OC;
		for (int i = 0; i < B; i++) {
			size_t row = (size_t)i * OC;
			for (int o = o0; o < o1; o++) {
				float g = dact[row + o];
				if (relu && !(act[row + o] > 0.0f))
					g = 0.0f;
				dpre[row + o] = g;
				db[o] += g;
			}
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

/* AdamW on p[lo..hi) with weight decay w (0 past the decayed prefix: the
 * product w * p is still taken, as on the GPU, so a NaN stays a NaN). Each
 * operation is rounded on its own in this order, as adamw_kernel does. */
static void adamw_range(float *restrict p, const float *restrict g, float *restrict m,
			float *restrict v, size_t lo, size_t hi, float lr, float b1,
			float b2, float eps, float w, float bc1, float bc2)
{
	for (size_t i = lo; i < hi; i++) {
		float gi = g[i], pi = p[i];
		float mi = b1 * m[i] + (1.0f - b1) * gi;
		float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
		float mhat = mi / bc1, vhat = vi / bc2;
		m[i] = mi;
		v[i] = vi;
		p[i] = pi - lr * (mhat / (sqrtf(vhat) + eps) + w * pi);
	}
}

void adamw_cpu(float *p, const float *g, float *m, float *v, size_t n,
	       size_t n_decay, const struct mlp_hparams *hp, long t)
{
	const float lr = hp->lr, b1 = hp->beta1, b2 = hp->beta2, eps = hp->eps, wd = hp->wd;
	const size_t chunk = 8192;
	const long nchunks = (long)((n + chunk - 1) / chunk);
	float bc1, bc2;
	adamw_bias_correction(hp, t, &bc1, &bc2);
	/* Element-wise: any split across threads gives the same bits. */
	OMP_FOR_IF(n >= ELEMWISE_PAR_MIN)
	for (long c = 0; c < nchunks; c++) {
		size_t lo = (size_t)c * chunk, hi = n - lo < chunk ? n : lo + chunk;
		size_t mid = n_decay < lo ? lo : n_decay > hi ? hi : n_decay;
		adamw_range(p, g, m, v, lo, mid, lr, b1, b2, eps, wd, bc1, bc2);
		adamw_range(p, g, m, v, mid, hi, lr, b1, b2, eps, 0.0f, bc1, bc2);
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
	size_t width;
	if (!m)
		goto nomem;
	m->shape = *s;
	m->max_batch = max_batch;
	m->n_params = mlp_n_params(s);
	m->n_weights = mlp_n_weights(s);
	width = (size_t)mlp_max_width(s);
	m->params = calloc(m->n_params, sizeof(float));
	m->grads = calloc(m->n_params, sizeof(float));
	m->m = calloc(m->n_params, sizeof(float));
	m->v = calloc(m->n_params, sizeof(float));
	m->d0 = calloc((size_t)max_batch * width, sizeof(float));
	m->d1 = calloc((size_t)max_batch * width, sizeof(float));
	if (!m->params || !m->grads || !m->m || !m->v || !m->d0 || !m->d1)
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
				   s->dims[l], s->dims[l + 1]);
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
