/* kernels/train: trains an MLP classifier on IDX or synthetic data, on the
 * GPU (CUDA) or the CPU reference, printing progress lines that gpurun
 * streams live; --bench times training steps. Flags, output, exit codes:
 * README.md. This file is only the command line: parsing, device choice,
 * rendering events, exit codes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "mlp.h"
#include "run.h"
#include "banned.h"

#define PROG "train"
#ifdef _OPENMP
#define OPENMP_BUILT 1
#else
#define OPENMP_BUILT 0
#endif

struct opts {
	struct run_config run;
	long synthetic;
	uint64_t data_seed;
	const char *data_dir;
	const char *train_images, *train_labels, *test_images, *test_labels;
	long classes;
	float holdout;
	int bench;
	int bench_batches[8], n_bench_batches;
	long bench_steps, bench_input, bench_classes;
};

static const char usage_text[] =
"usage: train [options]\n"
"\n"
"Trains a multilayer perceptron classifier (ReLU, softmax cross-entropy,\n"
"AdamW) on the GPU with CUDA, or on the CPU with the plain-C reference.\n"
"\n"
"data (one source):\n"
"  --synthetic N          N generated examples (10 features, 8 classes, not\n"
"                         linearly separable); the last --holdout are held out\n"
"  --data DIR             IDX files in DIR: train-images-idx3-ubyte,\n"
"                         train-labels-idx1-ubyte and, if present,\n"
"                         t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte\n"
"  --train-images FILE, --train-labels FILE\n"
"  --test-images FILE, --test-labels FILE   IDX files given one by one\n"
"  --classes K            labels are 0..K-1 (IDX; default 10)\n"
"  --holdout F            fraction held out when no test files (default 0.2)\n"
"  --data-seed S          seed of the synthetic data (default 1)\n"
"\n"
"model and training:\n"
"  --hidden LIST          hidden widths, e.g. 1024,1024 (default); 'none' for\n"
"                         a linear model\n"
"  --steps N              total optimizer steps (default 1000)\n"
"  --batch B              batch size (default 128)\n"
"  --lr F                 AdamW learning rate (default 0.001)\n"
"  --wd F                 AdamW weight decay on weights (default 0.01)\n"
"  --seed S               seed of initialisation and example order (default 1)\n"
"  --device auto|cpu|cuda where to train (default auto: CUDA if a device is\n"
"                         visible, else the CPU)\n"
"  --tf32                 let cuBLAS use TF32 tensor cores (default: full FP32)\n"
"\n"
"output:\n"
"  --out DIR              metrics.csv and ckpt.bin go here (default out)\n"
"  --resume CKPT          continue the run saved in CKPT (bit-identical on CPU)\n"
"  --log-every N          progress line every N steps (default 100)\n"
"  --eval-every N         held-out evaluation every N steps (default: at end)\n"
"  --ckpt-every N         checkpoint every N steps (default: at end)\n"
"\n"
"benchmark:\n"
"  --bench                time training steps on random data, then exit\n"
"  --bench-batches LIST   batch sizes (default 64,4096)\n"
"  --bench-steps N        timed steps per batch size (default 200 on CUDA,\n"
"                         3 on the CPU)\n"
"  --bench-input N, --bench-classes K   model input and output (784, 10)\n"
"\n"
"  --version              build information\n"
"  -h, --help             this text\n"
"\n"
"exit status: 0 success, 1 error (data, files, checkpoint), 2 usage,\n"
"3 loss became NaN or Inf, 4 CUDA unavailable or failed.\n";

static int usage_error(const char *msg)
{
	fprintf(stderr, PROG ": %s\n", msg);
	fprintf(stderr, "usage: train [options]; see 'train --help'\n");
	return EXIT_USAGE;
}

/* "1024,1024" -> widths; "none" -> no hidden layer. */
static int parse_list(const char *flag, const char *s, int *out, int cap, int *n,
		      long lo, long hi, struct kerr *e)
{
	char item[32];
	*n = 0;
	if (!strcmp(s, "none") && !strcmp(flag, "--hidden"))
		return 0;
	while (1) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		long v;
		int ret;
		if (*n == cap)
			return kerr_set(e, K_EUSAGE, "%s: at most %d values", flag, cap);
		if (len == 0 || len >= sizeof(item))
			return kerr_set(e, K_EUSAGE, "%s: bad list '%s'", flag, s);
		memcpy(item, s, len);
		item[len] = '\0';
		if ((ret = k_parse_long(flag, item, lo, hi, &v, e)) < 0)
			return ret;
		out[(*n)++] = (int)v;
		if (!comma)
			return 0;
		s = comma + 1;
	}
}

static void opts_defaults(struct opts *o)
{
	static const int hidden[] = { 1024, 1024 };
	memset(o, 0, sizeof(*o));
	o->run.n_hidden = 2;
	memcpy(o->run.hidden, hidden, sizeof(hidden));
	o->run.steps = 1000;
	o->run.batch = 128;
	o->run.hp = (struct mlp_hparams){ .lr = 1e-3f, .wd = 0.01f, .beta1 = 0.9f,
					  .beta2 = 0.999f, .eps = 1e-8f };
	o->run.seed = 1;
	o->run.device = DEV_AUTO;
	o->run.log_every = 100;
	o->run.out_dir = "out";
	o->classes = 10;
	o->holdout = 0.2f;
	o->data_seed = 1;
	o->bench_batches[0] = 64;
	o->bench_batches[1] = 4096;
	o->n_bench_batches = 2;
	o->bench_input = 784;
	o->bench_classes = 10;
}

/* Returns 0, K_EUSAGE, or 1 when the program should exit 0 (help/version). */
static int parse_args(struct opts *o, int argc, char **argv, struct kerr *e)
{
	struct run_config *r = &o->run;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *eq;
		char flag[64];
		long v;
		int ret = 0;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(usage_text, stdout);
			return 1;
		}
		if (!strcmp(a, "--version")) {
			printf(PROG " (gpurun kernels) checkpoint v1, cuda %s, openmp %s\n",
			       cuda_compiled() ? "yes" : "no", OPENMP_BUILT ? "yes" : "no");
			return 1;
		}
		if (!strcmp(a, "--bench")) {
			o->bench = 1;
			continue;
		}
		if (!strcmp(a, "--tf32")) {
			r->tf32 = 1;
			continue;
		}
		if (strncmp(a, "--", 2) != 0)
			return kerr_set(e, K_EUSAGE, "unexpected argument '%s'", a);
		eq = strchr(a, '=');
		if (eq) {
			size_t len = (size_t)(eq - a);
			if (len >= sizeof(flag))
				return kerr_set(e, K_EUSAGE, "unknown option '%s'", a);
			memcpy(flag, a, len);
			flag[len] = '\0';
			val = eq + 1;
		} else {
			int n = snprintf(flag, sizeof(flag), "%s", a);
			if (n < 0 || (size_t)n >= sizeof(flag))
				return kerr_set(e, K_EUSAGE, "unknown option '%s'", a);
			if (i + 1 >= argc)
				return kerr_set(e, K_EUSAGE, "option '%s' needs a value", a);
			val = argv[++i];
		}
		if (!strcmp(flag, "--synthetic"))
			ret = k_parse_long(flag, val, 2, 100000000, &o->synthetic, e);
		else if (!strcmp(flag, "--data"))
			o->data_dir = val;
		else if (!strcmp(flag, "--train-images"))
			o->train_images = val;
		else if (!strcmp(flag, "--train-labels"))
			o->train_labels = val;
		else if (!strcmp(flag, "--test-images"))
			o->test_images = val;
		else if (!strcmp(flag, "--test-labels"))
			o->test_labels = val;
		else if (!strcmp(flag, "--classes"))
			ret = k_parse_long(flag, val, 2, 256, &o->classes, e);
		else if (!strcmp(flag, "--holdout"))
			ret = k_parse_float(flag, val, 1e-6, 0.9, &o->holdout, e);
		else if (!strcmp(flag, "--data-seed"))
			ret = k_parse_u64(flag, val, &o->data_seed, e);
		else if (!strcmp(flag, "--hidden")) {
			ret = parse_list(flag, val, r->hidden, MLP_MAX_LAYERS - 1, &r->n_hidden,
					 1, MLP_MAX_DIM, e);
			r->given |= GIVEN_HIDDEN;
		} else if (!strcmp(flag, "--steps"))
			ret = k_parse_long(flag, val, 0, 1000000000, &r->steps, e);
		else if (!strcmp(flag, "--batch")) {
			ret = k_parse_long(flag, val, 1, 1 << 20, &v, e);
			r->batch = (int)v;
			r->given |= GIVEN_BATCH;
		} else if (!strcmp(flag, "--lr")) {
			ret = k_parse_float(flag, val, 0, 1e30, &r->hp.lr, e);
			r->given |= GIVEN_LR;
		} else if (!strcmp(flag, "--wd")) {
			ret = k_parse_float(flag, val, 0, 1e30, &r->hp.wd, e);
			r->given |= GIVEN_WD;
		} else if (!strcmp(flag, "--seed")) {
			ret = k_parse_u64(flag, val, &r->seed, e);
			r->given |= GIVEN_SEED;
		} else if (!strcmp(flag, "--device")) {
			if (!strcmp(val, "auto"))
				r->device = DEV_AUTO;
			else if (!strcmp(val, "cpu"))
				r->device = DEV_CPU;
			else if (!strcmp(val, "cuda"))
				r->device = DEV_CUDA;
			else
				ret = kerr_set(e, K_EUSAGE, "--device: '%s' is not auto, cpu or cuda", val);
		} else if (!strcmp(flag, "--out"))
			r->out_dir = val;
		else if (!strcmp(flag, "--resume"))
			r->resume = val;
		else if (!strcmp(flag, "--log-every"))
			ret = k_parse_long(flag, val, 1, 1000000000, &r->log_every, e);
		else if (!strcmp(flag, "--eval-every"))
			ret = k_parse_long(flag, val, 0, 1000000000, &r->eval_every, e);
		else if (!strcmp(flag, "--ckpt-every"))
			ret = k_parse_long(flag, val, 0, 1000000000, &r->ckpt_every, e);
		else if (!strcmp(flag, "--bench-batches"))
			ret = parse_list(flag, val, o->bench_batches, 8, &o->n_bench_batches,
					 1, 1 << 20, e);
		else if (!strcmp(flag, "--bench-steps"))
			ret = k_parse_long(flag, val, 1, 1000000, &o->bench_steps, e);
		else if (!strcmp(flag, "--bench-input"))
			ret = k_parse_long(flag, val, 1, MLP_MAX_DIM, &o->bench_input, e);
		else if (!strcmp(flag, "--bench-classes"))
			ret = k_parse_long(flag, val, 2, MLP_MAX_DIM, &o->bench_classes, e);
		else
			return kerr_set(e, K_EUSAGE, "unknown option '%s'", flag);
		if (ret < 0)
			return ret;
		if (!strcmp(val, "") && strcmp(flag, "--hidden") != 0)
			return kerr_set(e, K_EUSAGE, "option '%s' needs a value", flag);
	}
	return 0;
}

/* Loads the data the flags name into train and test. */
static int load_data(const struct opts *o, struct dataset *train, struct dataset *test,
		     struct kerr *e)
{
	char ti[4096], tl[4096], vi[4096], vl[4096];
	const char *train_images = o->train_images, *train_labels = o->train_labels;
	const char *test_images = o->test_images, *test_labels = o->test_labels;
	int sources = (o->synthetic > 0) + (o->data_dir != NULL) +
		      (o->train_images || o->train_labels);
	int ret;
	if (sources != 1)
		return kerr_set(e, K_EUSAGE, sources ? "give one data source: --synthetic, --data "
				"or --train-images/--train-labels"
				: "no data: give --synthetic N, --data DIR or --train-images/--train-labels");
	if (o->synthetic > 0)
		return synthetic_make(train, test, o->synthetic, o->data_seed, o->holdout, e);
	if (o->data_dir) {
		snprintf(ti, sizeof(ti), "%s/train-images-idx3-ubyte", o->data_dir);
		snprintf(tl, sizeof(tl), "%s/train-labels-idx1-ubyte", o->data_dir);
		snprintf(vi, sizeof(vi), "%s/t10k-images-idx3-ubyte", o->data_dir);
		snprintf(vl, sizeof(vl), "%s/t10k-labels-idx1-ubyte", o->data_dir);
		if (strlen(o->data_dir) > 4000)
			return kerr_set(e, K_EUSAGE, "--data: path too long");
		train_images = ti;
		train_labels = tl;
		{
			FILE *f = fopen(vi, "rb");
			if (f) {
				fclose(f);
				test_images = vi;
				test_labels = vl;
			}
		}
	}
	if (!train_images || !train_labels)
		return kerr_set(e, K_EUSAGE, "--train-images and --train-labels go together");
	if (!test_images != !test_labels)
		return kerr_set(e, K_EUSAGE, "--test-images and --test-labels go together");
	if (!test_images) {
		struct dataset all;
		if ((ret = idx_load(&all, train_images, train_labels, (int)o->classes, e)) < 0)
			return ret;
		return dataset_split(&all, train, test, o->holdout, e);
	}
	if ((ret = idx_load(train, train_images, train_labels, (int)o->classes, e)) < 0)
		return ret;
	if ((ret = idx_load(test, test_images, test_labels, (int)o->classes, e)) < 0) {
		dataset_free(train);
		return ret;
	}
	if (test->dim != train->dim) {
		ret = kerr_set(e, K_EDATA, "'%s' has %d pixels per image but '%s' has %d",
			       test_images, test->dim, train_images, train->dim);
		dataset_free(train);
		dataset_free(test);
	}
	return ret;
}

/* auto -> cuda or cpu, with a one-line note when falling back. */
static int resolve_device(int *device, struct kerr *e)
{
	struct kerr why;
	int n;
	if (*device == DEV_CPU)
		return 0;
	if (!cuda_compiled()) {
		if (*device == DEV_CUDA)
			return kerr_set(e, K_ECUDA, "--device cuda: this build has no CUDA "
					"(nvcc was not found when it was built)");
		fprintf(stderr, PROG ": note: built without CUDA; training on the cpu\n");
		*device = DEV_CPU;
		return 0;
	}
	n = cuda_device_count(&why);
	if (n > 0) {
		*device = DEV_CUDA;
		return 0;
	}
	if (*device == DEV_CUDA)
		return kerr_set(e, K_ECUDA, "--device cuda: %s", why.msg);
	fprintf(stderr, PROG ": note: %s; training on the cpu\n", why.msg);
	*device = DEV_CPU;
	return 0;
}

static void print_event(const struct run_event *ev, void *ud)
{
	char shape[256];
	(void)ud;
	switch (ev->kind) {
	case RUN_EV_START:
		printf("model %s | %zu params | device %s | train %d | test %d | batch %d | "
		       "steps %ld/%ld\n", mlp_shape_str(ev->shape, shape, sizeof(shape)),
		       ev->n_params, ev->device, ev->n_train, ev->n_test, ev->batch,
		       ev->step, ev->total);
		break;
	case RUN_EV_LOG:
		printf("step %ld/%ld | loss %.4f | acc %.3f | %.0f samples/s | %.3f ms/step",
		       ev->step, ev->total, ev->loss, ev->acc, ev->samples_per_s, ev->ms_per_step);
		if (ev->has_test)
			printf(" | test_loss %.4f | test_acc %.4f", ev->test_loss, ev->test_acc);
		putchar('\n');
		break;
	case RUN_EV_END:
		if (ev->graph)
			printf("cuda graph %s\n", ev->graph);
		printf("held-out accuracy %.4f (%ld/%d) | loss %.4f | step %ld\n", ev->test_acc,
		       ev->test_correct, ev->test_n, ev->test_loss, ev->step);
		break;
	}
	/* Read live through a pipe over SSH: never sit in a buffer. */
	fflush(stdout);
}

static int bench(const struct opts *o, struct kerr *e)
{
	const struct run_config *r = &o->run;
	double peak = 0;
	char name[256] = "cpu", shape_s[256];
	struct mlp_shape shape;
	int ret;
	long steps = o->bench_steps ? o->bench_steps : (r->device == DEV_CUDA ? 200 : 3);
	long warmup = r->device == DEV_CUDA ? 20 : 1;
	if ((ret = mlp_shape_make(&shape, (int)o->bench_input, r->hidden, r->n_hidden,
				  (int)o->bench_classes, e)) < 0)
		return ret;
	if (r->device == DEV_CUDA && (ret = cuda_device_info(name, sizeof(name), &peak, e)) < 0)
		return ret;
	for (int i = 0; i < o->n_bench_batches; i++) {
		struct bench_result b;
		if ((ret = run_bench(r, (int)o->bench_input, (int)o->bench_classes,
				     o->bench_batches[i], warmup, steps, &b, e)) < 0)
			return ret;
		printf("bench | device %s | model %s | batch %d | %.0f samples/s | %.3f ms/step | "
		       "%.2f GFLOP/s", name, mlp_shape_str(&shape, shape_s, sizeof(shape_s)),
		       b.batch, b.samples_per_s, b.ms_per_step, b.flops_per_s * 1e-9);
		if (peak > 0)
			printf(" | %.1f%% of fp32 peak %.1f TFLOP/s", 100.0 * b.flops_per_s / peak,
			       peak * 1e-12);
		if (b.graph[0])
			printf(" | cuda graph %s", b.graph);
		putchar('\n');
		fflush(stdout);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct dataset train = {0}, test = {0};
	struct run_result res;
	struct kerr e = { "" };
	int ret;

	mlp_cpu_flush_denormals();
	opts_defaults(&o);
	ret = parse_args(&o, argc, argv, &e);
	if (ret == 1)
		return EXIT_OK;
	if (ret < 0)
		return usage_error(e.msg);
	if ((ret = resolve_device(&o.run.device, &e)) < 0)
		goto fail;
	if (o.bench) {
		if ((ret = bench(&o, &e)) < 0)
			goto fail;
		return EXIT_OK;
	}
	if ((ret = load_data(&o, &train, &test, &e)) < 0)
		goto fail;
	ret = run_train(&o.run, &train, &test, print_event, NULL, &res, &e);
	dataset_free(&train);
	dataset_free(&test);
	if (ret < 0)
		goto fail;
	return EXIT_OK;
fail:
	if (ret == K_EUSAGE)
		return usage_error(e.msg);
	fprintf(stderr, PROG ": %s\n", e.msg);
	if (ret == K_ENONFINITE)
		fprintf(stderr, "hint: lower --lr (now %g) or check the data\n", o.run.hp.lr);
	else if (ret == K_ECUDA)
		fprintf(stderr, "hint: use --device cpu to train on the CPU\n");
	return k_exit_code(ret);
}
