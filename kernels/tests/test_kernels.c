/* Tests of the CPU reference and the trainer: finite-difference gradient
 * checks of every op and of the whole model, learning on the synthetic set,
 * checkpoints and bit-identical resume, every bad-data case, NaN detection;
 * then the CUDA-vs-CPU cases of test_gpu.c (skipped with a reason without
 * a GPU). One line per case on stdout; details on stderr. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ckpt.h"
#include "data.h"
#include "mlp.h"
#include "run.h"
#include "tests/t.h"
#include "tests/util.h"
#include "banned.h"

T_DEFINE_STATE;
static char scratch[4096];

/* ---- gradient checks ---- */

/* |a - n| relative to their size. Near-zero gradients are measured against
 * floor (a hundredth of the tensor's largest gradient) instead: there the
 * float32 rounding of the loss, not the gradient, dominates. */
static double rel_err(double a, double n, double floor)
{
	double s = fabs(a) + fabs(n);
	return fabs(a - n) / (s > floor ? s : floor);
}

static double grad_floor(const float *g, size_t n)
{
	double mx = 0;
	for (size_t i = 0; i < n; i++)
		if (fabs(g[i]) > mx)
			mx = fabs(g[i]);
	return mx > 1e-6 ? 1e-2 * mx : 1e-8;
}

/* L = sum(R * out) in double: a loss whose gradient w.r.t. out is R. */
static double dot_loss(const float *out, const float *R, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)out[i] * R[i];
	return s;
}

static double gradcheck_matmul_shape(int B, int C, int OC)
{
	float *inp = tu_randn(B * C, 1), *W = tu_randn(OC * C, 2), *R = tu_randn(B * OC, 3);
	float *out = malloc(sizeof(float) * B * OC);
	float *dinp = malloc(sizeof(float) * B * C), *dW = malloc(sizeof(float) * OC * C);
	/* The loss is linear in every input: a large step has no truncation
	 * error and keeps float32 rounding small next to the difference. */
	const float eps = 0.5f;
	double worst = 0;
	matmul_backward_cpu(dinp, dW, R, inp, W, B, C, OC);
	for (int which = 0; which < 2; which++) {
		float *p = which ? W : inp, *g = which ? dW : dinp;
		int n = which ? OC * C : B * C;
		double floor = grad_floor(g, (size_t)n);
		for (int i = 0; i < n; i++) {
			float keep = p[i];
			double lp, lm;
			p[i] = keep + eps;
			matmul_forward_cpu(out, inp, W, B, C, OC);
			lp = dot_loss(out, R, (size_t)B * OC);
			p[i] = keep - eps;
			matmul_forward_cpu(out, inp, W, B, C, OC);
			lm = dot_loss(out, R, (size_t)B * OC);
			p[i] = keep;
			double r = rel_err(g[i], (lp - lm) / (2.0 * eps), floor);
			if (r > worst)
				worst = r;
		}
	}
	free(inp); free(W); free(R); free(out); free(dinp); free(dW);
	return worst;
}

static void gradcheck_matmul(void)
{
	/* Odd sizes reach the scalar tails, wide ones the 8-wide blocks. */
	double w1 = gradcheck_matmul_shape(3, 5, 7), w2 = gradcheck_matmul_shape(9, 21, 17);
	double worst = w1 > w2 ? w1 : w2;
	fprintf(stderr, "  matmul: worst relative error %.3g (tolerance 1e-3)\n", worst);
	CHECK(worst < 1e-3);
}

static void matmul_forward_matches_naive(void)
{
	int B = 7, C = 37, OC = 19;
	float *inp = tu_randn(B * C, 4), *W = tu_randn(OC * C, 5);
	float *out = malloc(sizeof(float) * B * OC);
	double worst = 0;
	matmul_forward_cpu(out, inp, W, B, C, OC);
	for (int b = 0; b < B; b++)
		for (int o = 0; o < OC; o++) {
			double s = 0;
			for (int c = 0; c < C; c++)
				s += (double)inp[b * C + c] * W[o * C + c];
			double d = fabs(s - out[b * OC + o]);
			if (d > worst)
				worst = d;
		}
	fprintf(stderr, "  matmul forward vs double dot products: worst abs diff %.3g (tol 1e-4)\n", worst);
	CHECK(worst < 1e-4);
	free(inp); free(W); free(out);
}

/* The documented numerics of the CPU matmul: each output is the float sum
 * over k in order, every product and sum rounded on its own (this file is
 * built with -ffp-contract=off too), so a naive loop gives the same bits,
 * whatever the tiling, the vector width or the thread count. The shapes
 * cross the edges of the register tile and the KC = 256 block of k, and
 * the three calls cover the forward, input-gradient and weight-gradient
 * forms (strided operands). */
static int set_threads(int n)
{
#ifdef _OPENMP
	omp_set_num_threads(n);
	return 1;
#else
	return n == 1;
#endif
}

static int max_threads(void)
{
#ifdef _OPENMP
	return omp_get_max_threads();
#else
	return 1;
#endif
}

static void matmul_bits_sequential_any_threads(void)
{
	static const int shapes[][3] = { { 7, 13, 10 }, { 61, 300, 97 }, { 130, 517, 33 } };
	long mismatches = 0, checked = 0;
	int saved = max_threads();
	for (int s = 0; s < 3; s++) {
		int B = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
		float *inp = tu_randn(B * C, 11), *W = tu_randn(OC * C, 12), *dout = tu_randn(B * OC, 13);
		float *out = malloc(sizeof(float) * B * OC), *dinp = malloc(sizeof(float) * B * C);
		float *dW = malloc(sizeof(float) * OC * C);
		for (int nt = 1; nt <= 3; nt++) {
			if (!set_threads(nt))
				continue;
			matmul_forward_cpu(out, inp, W, B, C, OC);
			matmul_backward_cpu(dinp, dW, dout, inp, W, B, C, OC);
			for (int b = 0; b < B; b++)
				for (int o = 0; o < OC; o++) {
					float acc = 0.0f;
					for (int c = 0; c < C; c++)
						acc += inp[b * C + c] * W[o * C + c];
					mismatches += memcmp(&acc, &out[b * OC + o], sizeof(acc)) != 0;
					checked++;
				}
			for (int b = 0; b < B; b++)
				for (int c = 0; c < C; c++) {
					float acc = 0.0f;
					for (int o = 0; o < OC; o++)
						acc += dout[b * OC + o] * W[o * C + c];
					mismatches += memcmp(&acc, &dinp[b * C + c], sizeof(acc)) != 0;
					checked++;
				}
			for (int o = 0; o < OC; o++)
				for (int c = 0; c < C; c++) {
					float acc = 0.0f;
					for (int b = 0; b < B; b++)
						acc += dout[b * OC + o] * inp[b * C + c];
					mismatches += memcmp(&acc, &dW[o * C + c], sizeof(acc)) != 0;
					checked++;
				}
		}
		free(inp); free(W); free(dout); free(out); free(dinp); free(dW);
	}
	set_threads(saved);
	fprintf(stderr, "  matmul vs in-order float sums, 1-3 threads: %ld of %ld outputs differ\n",
		mismatches, checked);
	CHECK(mismatches == 0);
}

/* A whole training step (every op, parallel where large) gives the same
 * parameters, gradients and moments on 1, 2 and 3 threads. */
static void train_step_same_bits_any_threads(void)
{
	static const int hidden[] = { 400, 200 };
	const int B = 100, steps = 3;
	struct mlp_shape sh;
	struct mlp_hparams hp = { 1e-3f, 0.01f, 0.9f, 0.999f, 1e-8f };
	struct kerr e = { "" };
	float *ref = NULL, *x = tu_randn(B * 120, 21);
	int32_t y[100];
	size_t n = 0;
	int differ = 0, runs = 0, saved = max_threads();
#ifndef _OPENMP
	SKIP("built without OpenMP (OPENMP=)");
#endif
	for (int i = 0; i < B; i++)
		y[i] = (i * 7) % 10;
	CHECK_EQ_INT(mlp_shape_make(&sh, 120, hidden, 2, 10, &e), 0);
	for (int nt = 1; nt <= 3; nt++) {
		struct mlp *m;
		if (!set_threads(nt))
			continue;
		m = mlp_new(&sh, B, &e);
		CHECK(m != NULL);
		if (!m)
			break;
		mlp_init_params(m, 5);
		for (long t = 1; t <= steps; t++)
			mlp_train_step(m, x, y, B, &hp, t, NULL);
		n = m->n_params;
		if (!ref) {
			ref = malloc(4 * n * sizeof(float));
			memcpy(ref, m->params, n * sizeof(float));
			memcpy(ref + n, m->grads, n * sizeof(float));
			memcpy(ref + 2 * n, m->m, n * sizeof(float));
			memcpy(ref + 3 * n, m->v, n * sizeof(float));
		} else {
			differ += memcmp(ref, m->params, n * sizeof(float)) != 0;
			differ += memcmp(ref + n, m->grads, n * sizeof(float)) != 0;
			differ += memcmp(ref + 2 * n, m->m, n * sizeof(float)) != 0;
			differ += memcmp(ref + 3 * n, m->v, n * sizeof(float)) != 0;
		}
		runs++;
		mlp_free(m);
	}
	set_threads(saved);
	fprintf(stderr, "  %d steps of 120-400-200-10 at batch %d on 1..%d threads: %d of %d "
		"arrays differ from 1 thread\n", steps, B, runs, differ, 4 * (runs - 1));
	CHECK(differ == 0);
	free(ref);
	free(x);
}

static void gradcheck_bias_relu(void)
{
	int B = 6, OC = 11;
	const float eps = 1e-3f;
	double worst = 0;
	for (int relu = 0; relu <= 1; relu++) {
		float *x = tu_randn(B * OC, 6), *b = tu_randn(OC, 7), *R = tu_randn(B * OC, 8);
		float *act = malloc(sizeof(float) * B * OC), *dx = malloc(sizeof(float) * B * OC);
		float *db = malloc(sizeof(float) * OC);
		/* Keep pre-activations off the kink, where the derivative jumps. */
		for (int i = 0; i < B * OC; i++)
			if (fabsf(x[i] + b[i % OC]) < 0.1f)
				x[i] += 0.3f;
		memcpy(act, x, sizeof(float) * B * OC);
		bias_relu_forward_cpu(act, b, B, OC, relu);
		bias_relu_backward_cpu(dx, db, R, act, B, OC, relu);
		for (int which = 0; which < 2; which++) {
			float *p = which ? b : x, *g = which ? db : dx;
			int n = which ? OC : B * OC;
			double floor = grad_floor(g, (size_t)n);
			for (int i = 0; i < n; i++) {
				float keep = p[i];
				double lp, lm;
				p[i] = keep + eps;
				memcpy(act, x, sizeof(float) * B * OC);
				bias_relu_forward_cpu(act, b, B, OC, relu);
				lp = dot_loss(act, R, (size_t)B * OC);
				p[i] = keep - eps;
				memcpy(act, x, sizeof(float) * B * OC);
				bias_relu_forward_cpu(act, b, B, OC, relu);
				lm = dot_loss(act, R, (size_t)B * OC);
				p[i] = keep;
				double r = rel_err(g[i], (lp - lm) / (2.0 * eps), floor);
				if (r > worst)
					worst = r;
			}
		}
		free(x); free(b); free(R); free(act); free(dx); free(db);
	}
	fprintf(stderr, "  bias+relu (and bias only): worst relative error %.3g (tolerance 1e-3)\n", worst);
	CHECK(worst < 1e-3);
}

static void gradcheck_softmax_ce(void)
{
	int B = 6, K = 5;
	float *logits = tu_randn(B * K, 9), *d = malloc(sizeof(float) * B * K);
	int32_t y[6] = { 0, 4, 2, 2, 1, 3 };
	const float eps = 3e-3f;
	double worst = 0, loss, floor;
	long correct;
	for (int i = 0; i < B * K; i++)
		logits[i] *= 3.0f;
	loss = softmax_ce_cpu(d, &correct, logits, y, B, K);
	floor = grad_floor(d, (size_t)B * K);
	for (int i = 0; i < B * K; i++) {
		float keep = logits[i];
		double lp, lm;
		logits[i] = keep + eps;
		lp = softmax_ce_cpu(NULL, NULL, logits, y, B, K);
		logits[i] = keep - eps;
		lm = softmax_ce_cpu(NULL, NULL, logits, y, B, K);
		logits[i] = keep;
		double r = rel_err(d[i], (lp - lm) / (2.0 * eps), floor);
		if (r > worst)
			worst = r;
	}
	fprintf(stderr, "  softmax cross-entropy (loss %.4f): worst relative error %.3g "
		"(tolerance 1e-2)\n", loss, worst);
	CHECK(worst < 1e-2);
	CHECK(isfinite(loss) && loss > 0);
	free(logits);
	free(d);
}

/* Which hidden units are active: a perturbation that flips one crosses a
 * ReLU kink, where a finite difference is meaningless. */
static uint64_t relu_pattern(const struct mlp *m, int B)
{
	uint64_t h = K_FNV_INIT;
	for (int l = 1; l < m->shape.n_layers; l++)
		for (int i = 0; i < B * m->shape.dims[l]; i++) {
			unsigned char on = m->acts[l][i] > 0.0f;
			h = k_fnv1a(h, &on, 1);
		}
	return h;
}

static void gradcheck_model(void)
{
	static const int hidden[] = { 9, 7 };
	struct mlp_shape s;
	struct mlp *m;
	int B = 5;
	float *x = tu_randn(B * 6, 10);
	int32_t y[5] = { 0, 3, 1, 2, 3 };
	const float eps = 3e-3f;
	double worst = 0, floor;
	int skipped = 0;
	uint64_t base;
	CHECK_EQ_INT(mlp_shape_make(&s, 6, hidden, 2, 4, NULL), 0);
	m = mlp_new(&s, B, NULL);
	CHECK(m != NULL);
	if (!m)
		return;
	mlp_init_params(m, 42);
	mlp_loss_and_grad(m, x, y, B, NULL);
	base = relu_pattern(m, B);
	floor = grad_floor(m->grads, m->n_params);
	for (size_t i = 0; i < m->n_params; i++) {
		float keep = m->params[i];
		double lp, lm;
		int kink;
		m->params[i] = keep + eps;
		mlp_forward(m, x, B);
		kink = relu_pattern(m, B) != base;
		lp = softmax_ce_cpu(NULL, NULL, m->acts[s.n_layers], y, B, 4);
		m->params[i] = keep - eps;
		mlp_forward(m, x, B);
		kink |= relu_pattern(m, B) != base;
		lm = softmax_ce_cpu(NULL, NULL, m->acts[s.n_layers], y, B, 4);
		m->params[i] = keep;
		if (kink) {
			skipped++;
			continue;
		}
		double r = rel_err(m->grads[i], (lp - lm) / (2.0 * eps), floor);
		if (r > worst)
			worst = r;
	}
	fprintf(stderr, "  whole model 6-9-7-4, each parameter: %zu params, %d skipped at ReLU "
		"kinks, worst relative error %.3g (tolerance 1e-2)\n", m->n_params, skipped, worst);
	CHECK(worst < 1e-2);
	CHECK(skipped < (int)m->n_params / 5);
	/* Per layer, along the layer's own gradient direction: the directional
	 * derivative is then the gradient's norm, it sums many entries and so
	 * float32 noise matters far less and the tolerance can be tight. */
	for (int t = 0; t < 2 * s.n_layers; t++) {
		int l = t / 2, is_b = t % 2;
		size_t off = is_b ? mlp_b_offset(&s, l) : mlp_w_offset(&s, l);
		size_t n = is_b ? (size_t)s.dims[l + 1] : (size_t)s.dims[l] * s.dims[l + 1];
		float *d = malloc(n * sizeof(float)), *keep = malloc(n * sizeof(float));
		double analytic = 0, numeric = 0, norm = 0, r;
		float step = 3e-3f;
		memcpy(keep, m->params + off, n * sizeof(float));
		for (size_t i = 0; i < n; i++)
			norm += (double)m->grads[off + i] * m->grads[off + i];
		norm = sqrt(norm);
		for (size_t i = 0; i < n; i++) {
			d[i] = (float)(m->grads[off + i] / norm);
			analytic += (double)m->grads[off + i] * d[i];
		}
		for (int tries = 0; tries < 6; tries++, step /= 3) {
			double lp, lm;
			int kink;
			for (size_t i = 0; i < n; i++)
				m->params[off + i] = keep[i] + step * d[i];
			mlp_forward(m, x, B);
			kink = relu_pattern(m, B) != base;
			lp = softmax_ce_cpu(NULL, NULL, m->acts[s.n_layers], y, B, 4);
			for (size_t i = 0; i < n; i++)
				m->params[off + i] = keep[i] - step * d[i];
			mlp_forward(m, x, B);
			kink |= relu_pattern(m, B) != base;
			lm = softmax_ce_cpu(NULL, NULL, m->acts[s.n_layers], y, B, 4);
			numeric = (lp - lm) / (2.0 * step);
			if (!kink)
				break;
		}
		memcpy(m->params + off, keep, n * sizeof(float));
		r = rel_err(analytic, numeric, 1e-6);
		fprintf(stderr, "  layer %d %s: directional derivative analytic %.6g numeric %.6g, "
			"relative error %.3g (tolerance 1e-3)\n", l, is_b ? "b" : "W", analytic,
			numeric, r);
		CHECK(r < 1e-3);
		free(d);
		free(keep);
	}
	mlp_free(m);
	free(x);
}

static void adamw_matches_formula(void)
{
	struct mlp_hparams hp = { .lr = 0.01f, .wd = 0.1f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f };
	float p[4] = { 1, -2, 0.5f, 3 }, g[4] = { 0.1f, -0.2f, 0.0f, 1.0f };
	float m[4] = { 0 }, v[4] = { 0 };
	double worst = 0;
	for (long t = 1; t <= 3; t++) {
		float pe[4], me[4], ve[4];
		for (int i = 0; i < 4; i++) {
			double mi = 0.9 * m[i] + 0.1 * g[i], vi = 0.999 * v[i] + 0.001 * g[i] * g[i];
			double mh = mi / (1 - pow(0.9, t)), vh = vi / (1 - pow(0.999, t));
			double wd = i < 2 ? 0.1 : 0.0;
			pe[i] = (float)(p[i] - 0.01 * (mh / (sqrt(vh) + 1e-8) + wd * p[i]));
			me[i] = (float)mi;
			ve[i] = (float)vi;
		}
		adamw_cpu(p, g, m, v, 4, 2, &hp, t);
		for (int i = 0; i < 4; i++) {
			double d = fabs(p[i] - pe[i]) + fabs(m[i] - me[i]) + fabs(v[i] - ve[i]);
			if (d > worst)
				worst = d;
		}
	}
	fprintf(stderr, "  adamw vs double formula: worst abs diff %.3g (tol 1e-6)\n", worst);
	CHECK(worst < 1e-6);
}

/* ---- data ---- */

static void synthetic_is_deterministic_and_balanced(void)
{
	struct dataset a, at, b, bt, c, ct;
	int counts[SYN_CLASSES] = { 0 };
	CHECK_EQ_INT(synthetic_make(&a, &at, 2000, 7, 0.25, NULL), 0);
	CHECK_EQ_INT(synthetic_make(&b, &bt, 2000, 7, 0.25, NULL), 0);
	CHECK_EQ_INT(synthetic_make(&c, &ct, 2000, 8, 0.25, NULL), 0);
	CHECK_EQ_INT(a.n, 1500);
	CHECK_EQ_INT(at.n, 500);
	CHECK(dataset_fingerprint(&a) == dataset_fingerprint(&b));
	CHECK(dataset_fingerprint(&at) == dataset_fingerprint(&bt));
	CHECK(dataset_fingerprint(&a) != dataset_fingerprint(&c));
	for (int i = 0; i < a.n; i++)
		counts[a.y[i]]++;
	for (int k = 0; k < SYN_CLASSES; k++) {
		fprintf(stderr, "  class %d: %d examples\n", k, counts[k]);
		CHECK(counts[k] > a.n / SYN_CLASSES / 3);
	}
	dataset_free(&a); dataset_free(&at); dataset_free(&b); dataset_free(&bt);
	dataset_free(&c); dataset_free(&ct);
}

static void sampler_epochs_are_permutations(void)
{
	struct sampler s, s2;
	int n = 37, B = 5;
	int32_t idx[5], idx2[5];
	int seen[3][37];
	memset(seen, 0, sizeof(seen));
	CHECK_EQ_INT(sampler_init(&s, 3, n, NULL), 0);
	CHECK_EQ_INT(sampler_init(&s2, 3, n, NULL), 0);
	for (uint64_t pos = 0; pos + B <= 3 * (uint64_t)n; pos += B) {
		sampler_batch(&s, pos, B, idx);
		for (int i = 0; i < B; i++)
			seen[(pos + i) / n][idx[i]]++;
	}
	for (int e = 0; e < 2; e++)
		for (int i = 0; i < n; i++)
			CHECK_EQ_INT(seen[e][i], 1);
	/* Random access (as after a resume) gives the same batch. */
	sampler_batch(&s, 70, B, idx);
	sampler_batch(&s2, 0, B, idx2);
	sampler_batch(&s2, 70, B, idx2);
	CHECK(memcmp(idx, idx2, sizeof(idx)) == 0);
	sampler_free(&s);
	sampler_free(&s2);
}


/* ---- training ---- */

struct losses { double first, last; int logs; };

static void collect(const struct run_event *ev, void *ud)
{
	struct losses *l = ud;
	if (ev->kind != RUN_EV_LOG)
		return;
	if (l->logs++ == 0)
		l->first = ev->loss;
	l->last = ev->loss;
}

static struct run_config small_config(int n_hidden, int width, long steps)
{
	struct run_config c;
	memset(&c, 0, sizeof(c));
	c.n_hidden = n_hidden;
	for (int i = 0; i < n_hidden; i++)
		c.hidden[i] = width;
	c.steps = steps;
	c.batch = 64;
	c.hp = (struct mlp_hparams){ .lr = 3e-3f, .wd = 0.01f, .beta1 = 0.9f,
				     .beta2 = 0.999f, .eps = 1e-8f };
	c.seed = 1;
	c.device = DEV_CPU;
	c.log_every = 100;
	return c;
}

/* The training budget the learning tests share. */
#define LEARN_N 8000
#define LEARN_STEPS 3000

static void train_learns_synthetic(void)
{
	struct dataset tr, te;
	struct run_config c = small_config(2, 64, LEARN_STEPS);
	struct run_result res;
	struct losses l = { 0, 0, 0 };
	struct kerr e = { "" };
	struct mlp_shape s;
	struct mlp *m;
	double loss0, t0;
	long correct0;
	int ret;
	CHECK_EQ_INT(synthetic_make(&tr, &te, LEARN_N, 1, 0.2, NULL), 0);
	/* Untrained: at chance (1/8). */
	CHECK_EQ_INT(mlp_shape_make(&s, tr.dim, c.hidden, c.n_hidden, tr.classes, NULL), 0);
	m = mlp_new(&s, 256, NULL);
	mlp_init_params(m, c.seed);
	mlp_eval(m, te.x, te.y, te.n, &loss0, &correct0);
	mlp_free(m);
	t0 = k_now();
	ret = run_train(&c, &tr, &te, collect, &l, &res, &e);
	CHECK_EQ_INT(ret, 0);
	if (ret)
		fprintf(stderr, "  %s\n", e.msg);
	fprintf(stderr, "  untrained: held-out acc %.4f, loss %.4f (chance 0.125)\n",
		(double)correct0 / te.n, loss0 / te.n);
	fprintf(stderr, "  trained %ld steps in %.2fs: train loss %.4f -> %.4f, held-out acc "
		"%.4f (%ld/%d), loss %.4f\n", res.step, k_now() - t0, l.first, l.last,
		res.test_acc, res.test_correct, res.test_n, res.test_loss);
	CHECK((double)correct0 / te.n < 0.25);
	CHECK(l.last < l.first / 4);
	CHECK(res.test_acc >= 0.95);
	dataset_free(&tr);
	dataset_free(&te);
}

static void synthetic_not_linearly_separable(void)
{
	struct dataset tr, te;
	struct run_config c = small_config(0, 0, LEARN_STEPS);
	struct run_result res;
	struct kerr e = { "" };
	CHECK_EQ_INT(synthetic_make(&tr, &te, LEARN_N, 1, 0.2, NULL), 0);
	CHECK_EQ_INT(run_train(&c, &tr, &te, NULL, NULL, &res, &e), 0);
	fprintf(stderr, "  linear model (no hidden layer), same budget: held-out acc %.4f "
		"(must stay below 0.6)\n", res.test_acc);
	CHECK(res.test_acc < 0.6);
	dataset_free(&tr);
	dataset_free(&te);
}

/* Trains with c into scratch/name and returns the path of its ckpt.bin. */
static int train_into(struct run_config c, const struct dataset *tr, const struct dataset *te,
		      const char *name, char *ckpt, size_t cap)
{
	char dir[4200];
	struct run_result res;
	struct kerr e = { "" };
	int ret;
	snprintf(dir, sizeof(dir), "%s/%s", scratch, name);
	snprintf(ckpt, cap, "%s/ckpt.bin", dir);
	c.out_dir = dir;
	ret = run_train(&c, tr, te, NULL, NULL, &res, &e);
	if (ret)
		fprintf(stderr, "  %s: %s\n", name, e.msg);
	return ret;
}

static void resume_is_bit_identical(void)
{
	struct dataset tr, te;
	struct run_config c = small_config(2, 32, 300);
	char full[4300], half[4300], resumed[4300], again[4300];
	CHECK_EQ_INT(synthetic_make(&tr, &te, 1000, 2, 0.2, NULL), 0);
	c.batch = 48; /* 800 / 48 is not whole: batches straddle epochs */
	c.ckpt_every = 100;
	CHECK_EQ_INT(train_into(c, &tr, &te, "full", full, sizeof(full)), 0);
	CHECK_EQ_INT(train_into(c, &tr, &te, "again", again, sizeof(again)), 0);
	c.steps = 150;
	CHECK_EQ_INT(train_into(c, &tr, &te, "half", half, sizeof(half)), 0);
	c.steps = 300;
	c.resume = half;
	c.given = 0;
	CHECK_EQ_INT(train_into(c, &tr, &te, "resumed", resumed, sizeof(resumed)), 0);
	CHECK(tu_files_equal(full, again));
	CHECK(tu_files_equal(full, resumed));
	fprintf(stderr, "  300 steps vs 150 + resume 150: checkpoints %s\n",
		tu_files_equal(full, resumed) ? "byte-identical" : "DIFFER");
	/* Flags that contradict the checkpoint are refused, not ignored. */
	c.batch = 32;
	c.given = GIVEN_BATCH;
	CHECK_EQ_INT(train_into(c, &tr, &te, "conflict", again, sizeof(again)), K_EUSAGE);
	dataset_free(&tr);
	dataset_free(&te);
}

static void ckpt_round_trip(void)
{
	static const int hidden[] = { 5, 3 };
	struct ckpt_meta meta = { 0 }, got;
	float *p, *m, *v, *gp, *gm, *gv;
	char path[4200];
	size_t n;
	struct kerr e = { "" };
	CHECK_EQ_INT(mlp_shape_make(&meta.shape, 4, hidden, 2, 3, NULL), 0);
	n = mlp_n_params(&meta.shape);
	p = tu_randn((int)n, 11);
	m = tu_randn((int)n, 12);
	v = tu_randn((int)n, 13);
	p[0] = -0.0f;
	v[1] = INFINITY;
	meta.batch = 17;
	meta.step = 123456789012ull;
	meta.seed = 0xfeedfacecafebeefull;
	meta.sample_pos = meta.step * 17;
	meta.data_fp = 0x0123456789abcdefull;
	meta.hp = (struct mlp_hparams){ 1e-3f, 0.01f, 0.9f, 0.999f, 1e-8f };
	snprintf(path, sizeof(path), "%s/rt.bin", scratch);
	CHECK_EQ_INT(ckpt_save(path, &meta, p, m, v, &e), 0);
	CHECK_EQ_INT(ckpt_load(path, &got, &gp, &gm, &gv, &e), 0);
	CHECK(mlp_shape_equal(&got.shape, &meta.shape));
	CHECK(got.batch == meta.batch && got.step == meta.step && got.seed == meta.seed);
	CHECK(got.sample_pos == meta.sample_pos && got.data_fp == meta.data_fp);
	CHECK(memcmp(&got.hp, &meta.hp, sizeof(meta.hp)) == 0);
	CHECK(gp && memcmp(gp, p, n * sizeof(float)) == 0);
	CHECK(gm && memcmp(gm, m, n * sizeof(float)) == 0);
	CHECK(gv && memcmp(gv, v, n * sizeof(float)) == 0);
	free(gp); free(gm); free(gv);
	/* One flipped bit anywhere is caught by the checksum. */
	CHECK_EQ_INT(tu_flip_byte(path, 200), 0);
	CHECK_EQ_INT(ckpt_load(path, &got, &gp, &gm, &gv, &e), K_ECKPT);
	CHECK_HAS(e.msg, "checksum");
	CHECK_EQ_INT(ckpt_save(path, &meta, p, m, v, &e), 0);
	CHECK_EQ_INT(truncate(path, 150), 0);
	CHECK_EQ_INT(ckpt_load(path, &got, &gp, &gm, &gv, &e), K_ECKPT);
	CHECK_HAS(e.msg, "truncated");
	CHECK_EQ_INT(tu_write(path, "not a checkpoint at all", 23), 0);
	CHECK_EQ_INT(ckpt_load(path, &got, &gp, &gm, &gv, &e), K_ECKPT);
	CHECK_HAS(e.msg, "bad magic");
	free(p); free(m); free(v);
}

static void nan_loss_stops_the_run(void)
{
	struct dataset tr, te;
	struct run_config c = small_config(1, 16, 200);
	struct run_result res;
	struct kerr e = { "" };
	char dir[4200], ck[4300];
	struct stat st;
	int ret;
	CHECK_EQ_INT(synthetic_make(&tr, &te, 500, 3, 0.2, NULL), 0);
	snprintf(dir, sizeof(dir), "%s/nan", scratch);
	snprintf(ck, sizeof(ck), "%s/ckpt.bin", dir);
	c.out_dir = dir;
	c.hp.lr = 1e30f;
	ret = run_train(&c, &tr, &te, NULL, NULL, &res, &e);
	fprintf(stderr, "  lr 1e30: %s\n", e.msg);
	CHECK_EQ_INT(ret, K_ENONFINITE);
	CHECK_HAS(e.msg, "at step");
	CHECK(stat(ck, &st) != 0);
	dataset_free(&tr);
	dataset_free(&te);
}

void data_cases(const char *scratch);
void gpu_tests(const char *scratch);

int main(void)
{
	mlp_cpu_flush_denormals(); /* as train does */
	if (tu_mkscratch(scratch, sizeof(scratch)) < 0) {
		printf("not ok - scratch_folder\n");
		return 1;
	}
	RUN(gradcheck_matmul);
	RUN(matmul_forward_matches_naive);
	RUN(matmul_bits_sequential_any_threads);
	RUN(train_step_same_bits_any_threads);
	RUN(gradcheck_bias_relu);
	RUN(gradcheck_softmax_ce);
	RUN(gradcheck_model);
	RUN(adamw_matches_formula);
	RUN(synthetic_is_deterministic_and_balanced);
	RUN(sampler_epochs_are_permutations);
	data_cases(scratch);
	RUN(train_learns_synthetic);
	RUN(synthetic_not_linearly_separable);
	RUN(ckpt_round_trip);
	RUN(resume_is_bit_identical);
	RUN(nan_loss_stops_the_run);
	gpu_tests(scratch);
	if (t_failed_cases == 0)
		tu_rmscratch(scratch);
	else
		fprintf(stderr, "scratch kept in %s\n", scratch);
	return t_failed_cases ? 1 : 0;
}
