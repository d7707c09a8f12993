/* Every CUDA kernel against its CPU reference with an explicit tolerance
 * (the worst difference is printed), and whole training steps compared end
 * to end. Without a usable GPU each case is a skip with the reason; with
 * KERNELS_REQUIRE_GPU=1 (gpu_check.sh) a missing GPU is a failure. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "mlp.h"
#include "run.h"
#include "tests/t.h"
#include "tests/util.h"
#include "banned.h"

/* NULL when the GPU cases can run, else why not. */
static const char *gpu_skip_reason(void)
{
	static char why[600];
	struct kerr e = { "" };
	if (!cuda_compiled()) {
		/* make test says which nvcc it found (empty: none). */
		const char *nvcc = getenv("KERNELS_NVCC");
		if (nvcc && !*nvcc)
			return "nvcc not found";
		return "CPU-only build (NO_CUDA=1 or SAN=1); on a GPU host run make -C kernels gpu-test";
	}
	if (cuda_device_count(&e) > 0)
		return NULL;
	if (getenv("KERNELS_REQUIRE_GPU")) {
		fprintf(stderr, "  KERNELS_REQUIRE_GPU is set but: %s\n", e.msg);
		t_case_failed = 1;
		snprintf(why, sizeof(why), "%s", e.msg);
		return why;
	}
	fprintf(stderr, "  %s\n", e.msg);
	return "no GPU";
}

#define GPU_OR_SKIP() do { const char *why_ = gpu_skip_reason(); \
	if (why_) { if (!t_case_failed) SKIP(why_); return; } } while (0)

/* Worst |a - b| over n, and whether every one is within atol + rtol*|b|. */
static int compare(const char *what, const float *gpu, const float *cpu, size_t n,
		   double atol, double rtol)
{
	double worst = 0, worst_rel = 0;
	size_t at = 0;
	int ok = 1;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)gpu[i] - cpu[i]);
		if (!(d <= atol + rtol * fabs(cpu[i])))
			ok = 0;
		if (d > worst || d != d) {
			worst = d;
			at = i;
		}
		if (fabs(cpu[i]) > 1e-6 && d / fabs(cpu[i]) > worst_rel)
			worst_rel = d / fabs(cpu[i]);
	}
	fprintf(stderr, "  %-22s worst |gpu-cpu| %.3g at %zu (gpu %.9g cpu %.9g), worst rel %.3g; "
		"tolerance %.1g + %.1g*|cpu| -> %s\n", what, worst, at, n ? gpu[at] : 0.0,
		n ? cpu[at] : 0.0, worst_rel, atol, rtol, ok ? "ok" : "FAIL");
	return ok;
}

static float *scaled_randn(int n, unsigned long long seed, float scale)
{
	float *a = tu_randn(n, seed);
	for (int i = 0; i < n; i++)
		a[i] *= scale;
	return a;
}

static void gpu_matmul_forward(void)
{
	static const int shapes[][3] = { { 7, 13, 10 }, { 64, 784, 1024 }, { 300, 1024, 10 } };
	GPU_OR_SKIP();
	for (int s = 0; s < 3; s++) {
		int B = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
		float *inp = tu_randn(B * C, 1), *W = scaled_randn(OC * C, 2, 1.0f / sqrtf((float)C));
		float *cpu = malloc(sizeof(float) * B * OC), *gpu = malloc(sizeof(float) * B * OC);
		struct kerr e = { "" };
		char what[64];
		matmul_forward_cpu(cpu, inp, W, B, C, OC);
		CHECK_EQ_INT(cuda_test_matmul_forward(gpu, inp, W, B, C, OC, &e), 0);
		snprintf(what, sizeof(what), "out %dx%dx%d", B, C, OC);
		CHECK(compare(what, gpu, cpu, (size_t)B * OC, 1e-5, 1e-4));
		free(inp); free(W); free(cpu); free(gpu);
	}
}

static void gpu_matmul_backward(void)
{
	static const int shapes[][3] = { { 7, 13, 10 }, { 256, 784, 1024 } };
	GPU_OR_SKIP();
	for (int s = 0; s < 2; s++) {
		int B = shapes[s][0], C = shapes[s][1], OC = shapes[s][2];
		float *inp = tu_randn(B * C, 3), *W = scaled_randn(OC * C, 4, 1.0f / sqrtf((float)C));
		float *dout = scaled_randn(B * OC, 5, 1.0f / (float)B);
		float *ci = malloc(sizeof(float) * B * C), *gi = malloc(sizeof(float) * B * C);
		float *cw = malloc(sizeof(float) * OC * C), *gw = malloc(sizeof(float) * OC * C);
		struct kerr e = { "" };
		matmul_backward_cpu(ci, cw, dout, inp, W, B, C, OC);
		CHECK_EQ_INT(cuda_test_matmul_backward(gi, gw, dout, inp, W, B, C, OC, &e), 0);
		CHECK(compare("dinp", gi, ci, (size_t)B * C, 1e-6, 1e-4));
		CHECK(compare("dW", gw, cw, (size_t)OC * C, 1e-6, 1e-4));
		free(inp); free(W); free(dout); free(ci); free(gi); free(cw); free(gw);
	}
}

static void gpu_bias_relu_forward(void)
{
	/* 1024 columns take the float4 path, 1027 the scalar one. */
	static const int shapes[][2] = { { 129, 1024 }, { 129, 1027 }, { 3, 10 } };
	GPU_OR_SKIP();
	for (int s = 0; s < 3; s++) {
		int B = shapes[s][0], OC = shapes[s][1];
		for (int relu = 0; relu <= 1; relu++) {
			float *x = tu_randn(B * OC, 6), *b = tu_randn(OC, 7);
			float *g = malloc(sizeof(float) * B * OC);
			struct kerr e = { "" };
			char what[64];
			memcpy(g, x, sizeof(float) * B * OC);
			bias_relu_forward_cpu(x, b, B, OC, relu);
			CHECK_EQ_INT(cuda_test_bias_relu_forward(g, b, B, OC, relu, &e), 0);
			/* One IEEE addition and a comparison: exact on both sides. */
			snprintf(what, sizeof(what), "%s %dx%d", relu ? "bias+relu" : "bias", B, OC);
			CHECK(compare(what, g, x, (size_t)B * OC, 0, 0));
			free(x); free(b); free(g);
		}
	}
}

static void gpu_bias_relu_backward(void)
{
	static const int shapes[][2] = { { 5, 10 }, { 4096, 1024 }, { 333, 77 } };
	GPU_OR_SKIP();
	for (int s = 0; s < 3; s++) {
		int B = shapes[s][0], OC = shapes[s][1];
		for (int relu = 0; relu <= 1; relu++) {
			float *dact = tu_randn(B * OC, 8), *act = tu_randn(B * OC, 9);
			float *cd = malloc(sizeof(float) * B * OC), *gd = malloc(sizeof(float) * B * OC);
			float *cb = malloc(sizeof(float) * OC), *gb = malloc(sizeof(float) * OC);
			struct kerr e = { "" };
			char what[64];
			for (int i = 0; i < B * OC; i++)
				if (act[i] < 0)
					act[i] = 0;  /* a real post-ReLU activation */
			bias_relu_backward_cpu(cd, cb, dact, act, B, OC, relu);
			CHECK_EQ_INT(cuda_test_bias_relu_backward(gd, gb, dact, act, B, OC, relu, &e), 0);
			snprintf(what, sizeof(what), "dpre %dx%d relu %d", B, OC, relu);
			CHECK(compare(what, gd, cd, (size_t)B * OC, 0, 0));
			snprintf(what, sizeof(what), "db %dx%d relu %d", B, OC, relu);
			/* Summation orders differ (sequential on the CPU, a tree
			 * of partial sums on the GPU): rounding grows as sqrt(B). */
			CHECK(compare(what, gb, cb, (size_t)OC, 1e-5 * sqrt(B), 1e-4));
			free(dact); free(act); free(cd); free(gd); free(cb); free(gb);
		}
	}
}

static void gpu_softmax_ce(void)
{
	static const int shapes[][2] = { { 7, 10 }, { 4096, 10 }, { 33, 1000 } };
	GPU_OR_SKIP();
	for (int s = 0; s < 3; s++) {
		int B = shapes[s][0], K = shapes[s][1];
		float *logits = scaled_randn(B * K, 10, 4.0f);
		float *cd = malloc(sizeof(float) * B * K), *gd = malloc(sizeof(float) * B * K);
		int32_t *y = malloc(sizeof(int32_t) * B);
		double closs, gloss;
		long cc, gc;
		struct kerr e = { "" };
		for (int i = 0; i < B; i++)
			y[i] = (i * 7 + 3) % K;
		closs = softmax_ce_cpu(cd, &cc, logits, y, B, K);
		CHECK_EQ_INT(cuda_test_softmax_ce(gd, &gloss, &gc, logits, y, B, K, &e), 0);
		fprintf(stderr, "  softmax %dx%d: loss gpu %.9g cpu %.9g (diff %.3g, tol 1e-5); "
			"correct gpu %ld cpu %ld\n", B, K, gloss, closs, fabs(gloss - closs), gc, cc);
		CHECK(fabs(gloss - closs) <= 1e-5 * (1 + fabs(closs)));
		CHECK_EQ_INT(gc, cc);
		/* p - 1 cancels for a confident label: an absolute floor of
		 * 1e-6 of the 1/B scale. */
		CHECK(compare("dlogits", gd, cd, (size_t)B * K, 1e-6 / B, 1e-5));
		free(logits); free(cd); free(gd); free(y);
	}
}

static void gpu_adamw(void)
{
	int n = 100003, nd = 60000;
	struct mlp_hparams hp = { .lr = 1e-3f, .wd = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f };
	float *p, *g, *m, *v, *gp, *gm, *gv;
	struct kerr e = { "" };
	GPU_OR_SKIP();
	p = tu_randn(n, 11);
	g = tu_randn(n, 12);
	m = scaled_randn(n, 13, 0.01f);
	v = tu_randn(n, 14);
	gp = malloc(sizeof(float) * n);
	gm = malloc(sizeof(float) * n);
	gv = malloc(sizeof(float) * n);
	for (int i = 0; i < n; i++)
		v[i] = v[i] * v[i] * 1e-4f;
	memcpy(gp, p, sizeof(float) * n);
	memcpy(gm, m, sizeof(float) * n);
	memcpy(gv, v, sizeof(float) * n);
	adamw_cpu(p, g, m, v, (size_t)n, (size_t)nd, &hp, 7);
	CHECK_EQ_INT(cuda_test_adamw(gp, g, gm, gv, (size_t)n, (size_t)nd, &hp, 7, &e), 0);
	/* The kernel rounds every operation as the C code does: expected
	 * bit-identical; the tolerance only absorbs a compiler surprise. */
	CHECK(compare("params", gp, p, (size_t)n, 1e-7, 1e-6));
	CHECK(compare("m", gm, m, (size_t)n, 1e-9, 1e-6));
	CHECK(compare("v", gv, v, (size_t)n, 1e-12, 1e-6));
	free(p); free(g); free(m); free(v); free(gp); free(gm); free(gv);
}

/* ||gpu - cpu|| / ||cpu||, printed with the worst entry; robust to a few
 * entries that differ for a discrete reason (see below). */
static int compare_norm(const char *what, const float *gpu, const float *cpu, size_t n,
			double tol)
{
	double d2 = 0, c2 = 0, worst = 0, r;
	for (size_t i = 0; i < n; i++) {
		double d = (double)gpu[i] - cpu[i];
		d2 += d * d;
		c2 += (double)cpu[i] * cpu[i];
		if (fabs(d) > worst || d != d)
			worst = fabs(d);
	}
	r = sqrt(d2 / (c2 > 0 ? c2 : 1));
	fprintf(stderr, "  %-22s normwise relative difference %.3g (tolerance %.1g), worst "
		"|gpu-cpu| %.3g -> %s\n", what, r, tol, worst, r <= tol ? "ok" : "FAIL");
	return r <= tol;
}

/* Step 1 of AdamW moves each parameter by lr * g / (|g| + eps) (m and v
 * start at 0, the bias corrections cancel) plus the decay. Where |g| is
 * near eps (a sum that cancels), the rounding difference of the gradient,
 * tiny as an absolute error, changes that ratio by up to
 * |dg| / (min |g| + eps), and the parameter by lr times that, at most 2 lr
 * (a turned sign). Each parameter is held to that bound, derived from its
 * own gradients, plus rounding; the worst use of the bound is printed. */
static int compare_step1(const float *gp, const float *cp, const float *gg, const float *cg,
			 size_t n, float lr)
{
	double worst = 0, worst_d = 0;
	size_t at = 0, bad = 0;
	for (size_t i = 0; i < n; i++) {
		double dg = fabs((double)gg[i] - cg[i]);
		double gmin = fmin(fabs(gg[i]), fabs(cg[i]));
		double r = dg / (gmin + 1e-8);
		double tol = 1e-6 + 1e-5 * fabs(cp[i]) + lr * (r < 2 ? r : 2);
		double d = fabs((double)gp[i] - cp[i]);
		if (!(d <= tol))
			bad++;
		if (d / tol > worst || d != d) {
			worst = d / tol;
			worst_d = d;
			at = i;
		}
	}
	fprintf(stderr, "  %-22s worst |gpu-cpu| %.3g at %zu (grad gpu %.3g cpu %.3g): %.2f of "
		"its bound; %zu over -> %s\n", "step 1 params", worst_d, at, n ? gg[at] : 0.0,
		n ? cg[at] : 0.0, worst, bad, bad ? "FAIL" : "ok");
	return bad == 0;
}

/* Hidden units active on the GPU but not on the CPU or the other way: a
 * pre-activation within rounding of 0 flips its ReLU, and then that
 * example's gradient through the unit differs by a whole term, honestly. */
static long relu_flips(struct mlp_cuda *gpu, const struct mlp *cpu, int B, struct kerr *e)
{
	long flips = 0;
	for (int l = 1; l < cpu->shape.n_layers; l++) {
		size_t n = (size_t)B * cpu->shape.dims[l];
		float *a = malloc(n * sizeof(float));
		if (mlp_cuda_get_acts(gpu, l, a, B, e) < 0) {
			free(a);
			return -1;
		}
		for (size_t i = 0; i < n; i++)
			flips += (a[i] > 0.0f) != (cpu->acts[l][i] > 0.0f);
		free(a);
	}
	return flips;
}

/* One whole training step from the same state on both backends: loss,
 * ReLU masks, gradients, then parameters and AdamW state; then 20 more
 * steps and the held-out evaluation. */
static void gpu_train_step_end_to_end(void)
{
	static const int hidden[] = { 256, 128 };
	struct mlp_hparams hp = { .lr = 1e-3f, .wd = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f };
	struct dataset tr, te;
	struct mlp_shape s;
	struct mlp *cpu = NULL, *host = NULL;
	struct mlp_cuda *gpu = NULL;
	struct sampler smp;
	struct kerr e = { "" };
	int B = 128;
	int32_t *idx, *y;
	float *x;
	double closs = 0, gloss = 0, cev, gev;
	long cc = 0, gc = 0, cec, gec;
	GPU_OR_SKIP();
	idx = malloc(sizeof(int32_t) * B);
	y = malloc(sizeof(int32_t) * B);
	CHECK_EQ_INT(synthetic_make(&tr, &te, 4000, 5, 0.25, NULL), 0);
	x = malloc(sizeof(float) * B * tr.dim);
	CHECK_EQ_INT(mlp_shape_make(&s, tr.dim, hidden, 2, tr.classes, NULL), 0);
	cpu = mlp_new(&s, B, NULL);
	host = mlp_new(&s, 1, NULL);
	gpu = mlp_cuda_new(&s, B, &tr, &te, 0, &e);
	CHECK(gpu != NULL);
	if (!gpu) {
		fprintf(stderr, "  %s\n", e.msg);
		goto out;
	}
	mlp_init_params(cpu, 9);
	CHECK_EQ_INT(mlp_cuda_set_state(gpu, cpu->params, cpu->m, cpu->v, &e), 0);
	CHECK_EQ_INT(sampler_init(&smp, 9, tr.n, NULL), 0);
	for (long t = 1; t <= 21; t++) {
		long c = 0;
		sampler_batch(&smp, (uint64_t)(t - 1) * B, B, idx);
		dataset_gather(&tr, idx, B, x, y);
		closs += mlp_train_step(cpu, x, y, B, &hp, t, &c) * B;
		cc += c;
		CHECK_EQ_INT(mlp_cuda_step(gpu, idx, B, &hp, t, &e), 0);
		if (t == 1) {
			long flips = relu_flips(gpu, cpu, B, &e);
			size_t n = cpu->n_params;
			CHECK_EQ_INT(mlp_cuda_get_grads(gpu, host->grads, &e), 0);
			CHECK_EQ_INT(mlp_cuda_get_state(gpu, host->params, host->m, host->v, &e), 0);
			CHECK_EQ_INT(mlp_cuda_take_stats(gpu, &gloss, &gc, &e), 0);
			fprintf(stderr, "  step 1: loss gpu %.9g cpu %.9g (tol 1e-5); correct gpu %ld "
				"cpu %ld; ReLU masks differing by rounding: %ld\n", gloss / B, closs / B,
				gc, cc, flips);
			CHECK(flips >= 0);
			CHECK(fabs(gloss - closs) / B <= 1e-5);
			CHECK(compare_norm("step 1 grads", host->grads, cpu->grads, n, flips ? 3e-2 : 1e-4));
			if (flips == 0) {
				CHECK(compare("step 1 grads", host->grads, cpu->grads, n, 1e-7, 1e-3));
				CHECK(compare_step1(host->params, cpu->params, host->grads, cpu->grads, n,
						    hp.lr));
				CHECK(compare("step 1 adam m", host->m, cpu->m, n, 1e-9, 1e-3));
				CHECK(compare("step 1 adam v", host->v, cpu->v, n, 1e-12, 2e-3));
			} else {
				/* A flipped term can turn an update's sign: 2 lr at most. */
				CHECK(compare("step 1 params", host->params, cpu->params, n,
					      2.5 * hp.lr, 0));
			}
			closs = 0;
			cc = 0;
		}
	}
	CHECK_EQ_INT(mlp_cuda_take_stats(gpu, &gloss, &gc, &e), 0);
	fprintf(stderr, "  steps 2-21: mean loss gpu %.6f cpu %.6f (tol 1e-3)\n", gloss / (20.0 * B),
		closs / (20.0 * B));
	CHECK(fabs(gloss - closs) / (20.0 * B) <= 1e-3);
	CHECK_EQ_INT(mlp_cuda_get_state(gpu, host->params, NULL, NULL, &e), 0);
	CHECK(compare_norm("step 21 params", host->params, cpu->params, cpu->n_params, 1e-3));
	mlp_eval(cpu, te.x, te.y, te.n, &cev, &cec);
	CHECK_EQ_INT(mlp_cuda_eval(gpu, &gev, &gec, &e), 0);
	fprintf(stderr, "  held-out: loss gpu %.6f cpu %.6f (tol 1e-3), correct gpu %ld cpu %ld "
		"of %d (tol 1%%)\n", gev / te.n, cev / te.n, gec, cec, te.n);
	CHECK(fabs(gev - cev) / te.n <= 1e-3);
	CHECK(labs(gec - cec) <= te.n / 100);
	sampler_free(&smp);
out:
	mlp_cuda_free(gpu);
	mlp_free(cpu);
	mlp_free(host);
	free(idx); free(y); free(x);
	dataset_free(&tr);
	dataset_free(&te);
}

/* A step replayed from its CUDA graph is the same work as the step
 * launched kernel by kernel: the same params, m, v and loss sums (the same
 * bits, printed; within rounding, checked), across a change of batch size
 * (a second capture). When a GPU is
 * there the graph must really be on: a silent fallback would make the
 * benchmark time the launches instead. */
static void gpu_graph_matches_eager(void)
{
	static const int hidden[] = { 256, 128 };
	struct mlp_hparams hp = { .lr = 2e-3f, .wd = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f };
	struct dataset tr, te;
	struct mlp_shape s;
	struct mlp *init = NULL, *ga = NULL, *eb = NULL;
	struct mlp_cuda *g = NULL, *k = NULL;
	struct sampler smp;
	struct kerr e = { "" };
	int B = 96;
	int32_t *idx;
	double gl = 0, kl = 0;
	long gc = 0, kc = 0;
	size_t bytes;
	GPU_OR_SKIP();
	idx = malloc(sizeof(int32_t) * B);
	CHECK_EQ_INT(synthetic_make(&tr, &te, 3000, 3, 0.2, NULL), 0);
	CHECK_EQ_INT(mlp_shape_make(&s, tr.dim, hidden, 2, tr.classes, NULL), 0);
	init = mlp_new(&s, 1, NULL);
	ga = mlp_new(&s, 1, NULL);
	eb = mlp_new(&s, 1, NULL);
	mlp_init_params(init, 5);
	bytes = init->n_params * sizeof(float);
	g = mlp_cuda_new(&s, B, &tr, &te, 0, &e);
	k = g ? mlp_cuda_new(&s, B, &tr, &te, 0, &e) : NULL;
	CHECK(g && k);
	if (!g || !k) {
		fprintf(stderr, "  %s\n", e.msg);
		goto out;
	}
	mlp_cuda_set_graph(g, 1);
	mlp_cuda_set_graph(k, 0);
	CHECK_EQ_INT(mlp_cuda_set_state(g, init->params, init->m, init->v, &e), 0);
	CHECK_EQ_INT(mlp_cuda_set_state(k, init->params, init->m, init->v, &e), 0);
	CHECK_EQ_INT(sampler_init(&smp, 5, tr.n, NULL), 0);
	for (long t = 1; t <= 40; t++) {
		int b = t <= 30 ? B : 64;  /* a new batch size: captured again */
		sampler_batch(&smp, (uint64_t)(t - 1) * B, b, idx);
		CHECK_EQ_INT(mlp_cuda_step(g, idx, b, &hp, t, &e), 0);
		CHECK_EQ_INT(mlp_cuda_step(k, idx, b, &hp, t, &e), 0);
	}
	fprintf(stderr, "  graph: %s; eager: %s\n", mlp_cuda_graph_state(g), mlp_cuda_graph_state(k));
	CHECK(!strncmp(mlp_cuda_graph_state(g), "on", 2));
	CHECK_EQ_INT(mlp_cuda_take_stats(g, &gl, &gc, &e), 0);
	CHECK_EQ_INT(mlp_cuda_take_stats(k, &kl, &kc, &e), 0);
	CHECK_EQ_INT(mlp_cuda_get_state(g, ga->params, ga->m, ga->v, &e), 0);
	CHECK_EQ_INT(mlp_cuda_get_state(k, eb->params, eb->m, eb->v, &e), 0);
	fprintf(stderr, "  40 steps: loss sum graph %.9g eager %.9g; params %s, m %s, v %s\n", gl,
		kl, memcmp(ga->params, eb->params, bytes) ? "DIFFER" : "identical",
		memcmp(ga->m, eb->m, bytes) ? "DIFFER" : "identical",
		memcmp(ga->v, eb->v, bytes) ? "DIFFER" : "identical");
	/* The same kernels on the same data give the same bits, unless cuBLAS
	 * picks another algorithm inside a capture: then rounding only. A
	 * stale lr or bias correction in the graph is far outside this. */
	CHECK(fabs(gl - kl) <= 1e-6 * fabs(kl) && labs(gc - kc) <= 2);
	CHECK(compare_norm("graph params", ga->params, eb->params, init->n_params, 1e-6));
	CHECK(compare_norm("graph adam m", ga->m, eb->m, init->n_params, 1e-5));
	CHECK(compare_norm("graph adam v", ga->v, eb->v, init->n_params, 1e-5));
	sampler_free(&smp);
out:
	mlp_cuda_free(g);
	mlp_cuda_free(k);
	mlp_free(init);
	mlp_free(ga);
	mlp_free(eb);
	free(idx);
	dataset_free(&tr);
	dataset_free(&te);
}

static void gpu_training_converges(void)
{
	struct dataset tr, te;
	struct run_config c;
	struct run_result res, cres;
	struct kerr e = { "" };
	GPU_OR_SKIP();
	memset(&c, 0, sizeof(c));
	c.n_hidden = 2;
	c.hidden[0] = c.hidden[1] = 256;
	c.steps = 1500;
	c.batch = 64;
	c.hp = (struct mlp_hparams){ 3e-3f, 0.01f, 0.9f, 0.999f, 1e-8f };
	c.seed = 1;
	c.device = DEV_CUDA;
	c.log_every = 100;
	CHECK_EQ_INT(synthetic_make(&tr, &te, 6000, 1, 0.2, NULL), 0);
	CHECK_EQ_INT(run_train(&c, &tr, &te, NULL, NULL, &res, &e), 0);
	c.device = DEV_CPU;
	CHECK_EQ_INT(run_train(&c, &tr, &te, NULL, NULL, &cres, &e), 0);
	fprintf(stderr, "  held-out acc cuda %.4f (%ld/%d), cpu %.4f (%ld/%d); tol 1%% %s\n",
		res.test_acc, res.test_correct, res.test_n, cres.test_acc, cres.test_correct,
		cres.test_n, e.msg);
	/* Learns (chance is 1/8), and as well as the CPU does. */
	CHECK(res.test_acc >= 0.8);
	CHECK(fabs(res.test_acc - cres.test_acc) <= 0.01);
	dataset_free(&tr);
	dataset_free(&te);
}

/* Our kernels use no atomics and cuBLAS promises run-to-run identical
 * results on one GPU model, so the CUDA path should be deterministic too:
 * two runs, and a run resumed halfway, end in the same checkpoint bytes. */
static const char *gpu_scratch;

static int gpu_run_into(struct run_config c, const struct dataset *tr,
			const struct dataset *te, const char *name, char *ckpt, size_t cap)
{
	char dir[4200];
	struct run_result res;
	struct kerr e = { "" };
	int ret;
	snprintf(dir, sizeof(dir), "%s/%s", gpu_scratch, name);
	snprintf(ckpt, cap, "%s/ckpt.bin", dir);
	c.out_dir = dir;
	ret = run_train(&c, tr, te, NULL, NULL, &res, &e);
	if (ret)
		fprintf(stderr, "  %s: %s\n", name, e.msg);
	return ret;
}

static void gpu_run_is_deterministic(void)
{
	struct dataset tr, te;
	struct run_config c;
	char a[4300], b[4300], h[4300];
	GPU_OR_SKIP();
	memset(&c, 0, sizeof(c));
	c.n_hidden = 2;
	c.hidden[0] = c.hidden[1] = 256;
	c.steps = 200;
	c.batch = 96;
	c.hp = (struct mlp_hparams){ 1e-3f, 0.01f, 0.9f, 0.999f, 1e-8f };
	c.seed = 4;
	c.device = DEV_CUDA;
	c.log_every = 50;
	CHECK_EQ_INT(synthetic_make(&tr, &te, 3000, 1, 0.2, NULL), 0);
	CHECK_EQ_INT(gpu_run_into(c, &tr, &te, "gpu-a", a, sizeof(a)), 0);
	CHECK_EQ_INT(gpu_run_into(c, &tr, &te, "gpu-b", b, sizeof(b)), 0);
	c.steps = 100;
	CHECK_EQ_INT(gpu_run_into(c, &tr, &te, "gpu-h", h, sizeof(h)), 0);
	c.steps = 200;
	c.resume = h;
	CHECK_EQ_INT(gpu_run_into(c, &tr, &te, "gpu-h", h, sizeof(h)), 0);
	fprintf(stderr, "  two cuda runs: %s; 100 + resume 100 vs 200: %s\n",
		tu_files_equal(a, b) ? "identical" : "DIFFER",
		tu_files_equal(a, h) ? "identical" : "DIFFER");
	CHECK(tu_files_equal(a, b));
	CHECK(tu_files_equal(a, h));
	dataset_free(&tr);
	dataset_free(&te);
}

void gpu_tests(const char *scratch)
{
	gpu_scratch = scratch;
	RUN(gpu_matmul_forward);
	RUN(gpu_matmul_backward);
	RUN(gpu_bias_relu_forward);
	RUN(gpu_bias_relu_backward);
	RUN(gpu_softmax_ce);
	RUN(gpu_adamw);
	RUN(gpu_train_step_end_to_end);
	RUN(gpu_graph_matches_eager);
	RUN(gpu_training_converges);
	RUN(gpu_run_is_deterministic);
}
