/* The training loop shared by both backends: deterministic batches from the
 * sampler, progress events, metrics.csv, atomic checkpoints and --resume
 * (bit-identical on the CPU), plus the --bench timing loop. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "ckpt.h"
#include "run.h"
#include "banned.h"

/* One backend behind one interface: the CPU reference computes on the host
 * model; CUDA keeps everything on the device and the host model only stages
 * parameters for checkpoints. */
struct backend {
	int device;
	struct mlp *m;
	struct mlp_cuda *c;
	const struct dataset *train, *test;
	float *xb;
	int32_t *yb;
	double loss_sum;   /* CPU: since the last take_stats */
	long correct;
	long step_failed;  /* CPU: first step whose loss was not finite */
};

static void backend_free(struct backend *b)
{
	mlp_free(b->m);
	mlp_cuda_free(b->c);
	free(b->xb);
	free(b->yb);
	memset(b, 0, sizeof(*b));
}

static int backend_init(struct backend *b, int device, const struct mlp_shape *s,
			int batch, const struct dataset *train, const struct dataset *test,
			int tf32, struct kerr *e)
{
	memset(b, 0, sizeof(*b));
	b->device = device;
	b->train = train;
	b->test = test;
	/* On CUDA the host model only stages parameters: batch 1 is enough. */
	b->m = mlp_new(s, device == DEV_CUDA ? 1 : batch, e);
	if (!b->m)
		return K_ENOMEM;
	if (device == DEV_CUDA) {
		b->c = mlp_cuda_new(s, batch, train, test, tf32, e);
		return b->c ? 0 : K_ECUDA;
	}
	b->xb = malloc((size_t)batch * (size_t)s->dims[0] * sizeof(float));
	b->yb = malloc((size_t)batch * sizeof(int32_t));
	if (!b->xb || !b->yb)
		return kerr_set(e, K_ENOMEM, "out of memory for a batch of %d", batch);
	return 0;
}

/* Host model -> device (after init or load). */
static int backend_upload(struct backend *b, struct kerr *e)
{
	if (b->device != DEV_CUDA)
		return 0;
	return mlp_cuda_set_state(b->c, b->m->params, b->m->m, b->m->v, e);
}

/* Device -> host model (before a checkpoint). */
static int backend_download(struct backend *b, struct kerr *e)
{
	if (b->device != DEV_CUDA)
		return 0;
	return mlp_cuda_get_state(b->c, b->m->params, b->m->m, b->m->v, e);
}

static int backend_step(struct backend *b, const int32_t *idx, int B,
			const struct mlp_hparams *hp, long t, struct kerr *e)
{
	double loss;
	long correct = 0;
	if (b->device == DEV_CUDA)
		return mlp_cuda_step(b->c, idx, B, hp, t, e);
	dataset_gather(b->train, idx, B, b->xb, b->yb);
	loss = mlp_train_step(b->m, b->xb, b->yb, B, hp, t, &correct);
	if (!isfinite(loss))
		return kerr_set(e, K_ENONFINITE, "loss is %s at step %ld; stopping (no checkpoint "
				"written for this step)", isnan(loss) ? "nan" : "inf", t);
	b->loss_sum += loss * B;
	b->correct += correct;
	return 0;
}

static int backend_take_stats(struct backend *b, double *loss_sum, long *correct,
			      struct kerr *e)
{
	if (b->device == DEV_CUDA)
		return mlp_cuda_take_stats(b->c, loss_sum, correct, e);
	*loss_sum = b->loss_sum;
	*correct = b->correct;
	b->loss_sum = 0;
	b->correct = 0;
	return 0;
}

static int backend_eval(struct backend *b, double *loss_sum, long *correct, struct kerr *e)
{
	if (b->device == DEV_CUDA)
		return mlp_cuda_eval(b->c, loss_sum, correct, e);
	mlp_eval(b->m, b->test->x, b->test->y, b->test->n, loss_sum, correct);
	return 0;
}

/* ---- files ---- */

static int join(char *buf, size_t cap, const char *dir, const char *name, struct kerr *e)
{
	int n = snprintf(buf, cap, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= cap)
		return kerr_set(e, K_EIO, "path '%s/%s' is too long", dir, name);
	return 0;
}

/* mkdir -p */
static int make_dirs(const char *path, struct kerr *e)
{
	char buf[4096];
	size_t len = strlen(path);
	if (len == 0 || len >= sizeof(buf))
		return kerr_set(e, K_EIO, "bad output folder '%s'", path);
	memcpy(buf, path, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, 0777) != 0 && errno != EEXIST)
			return kerr_errno(e, K_EIO, "cannot create folder '%s'", buf);
		buf[i] = i == len ? '\0' : '/';
	}
	return 0;
}

#define METRICS_HEADER "step,loss,acc,samples_per_s,ms_per_step,test_loss,test_acc\n"

/* Opens out_dir/metrics.csv for appending rows. A fresh run starts it over;
 * a resumed one keeps the rows up to the checkpoint's step and drops later
 * ones (logged after the checkpoint by the run that was interrupted). */
static FILE *metrics_open(const char *out_dir, long keep_upto, struct kerr *e)
{
	char path[4096], tmp[4200], line[512];
	FILE *in = NULL, *out;
	if (join(path, sizeof(path), out_dir, "metrics.csv", e) < 0)
		return NULL;
	if (keep_upto > 0)
		in = fopen(path, "r");
	if (!in) {
		out = fopen(path, "w");
		if (!out || fputs(METRICS_HEADER, out) == EOF || fflush(out) != 0) {
			kerr_errno(e, K_EIO, "cannot write '%s'", path);
			if (out)
				fclose(out);
			return NULL;
		}
		return out;
	}
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	out = fopen(tmp, "w");
	if (!out) {
		kerr_errno(e, K_EIO, "cannot create '%s'", tmp);
		fclose(in);
		return NULL;
	}
	fputs(METRICS_HEADER, out);
	while (fgets(line, sizeof(line), in)) {
		char *end;
		long step = strtol(line, &end, 10);
		if (end != line && *end == ',' && step <= keep_upto)
			fputs(line, out);
	}
	fclose(in);
	if (fclose(out) != 0 || rename(tmp, path) != 0) {
		kerr_errno(e, K_EIO, "cannot rewrite '%s'", path);
		return NULL;
	}
	out = fopen(path, "a");
	if (!out)
		kerr_errno(e, K_EIO, "cannot append to '%s'", path);
	return out;
}

static int save_ckpt(struct backend *b, const struct run_config *cfg,
		     const struct ckpt_meta *meta, struct kerr *e)
{
	char path[4096];
	int ret;
	if (!cfg->out_dir)
		return 0;
	if ((ret = join(path, sizeof(path), cfg->out_dir, "ckpt.bin", e)) < 0)
		return ret;
	if ((ret = backend_download(b, e)) < 0)
		return ret;
	return ckpt_save(path, meta, b->m->params, b->m->m, b->m->v, e);
}

/* ---- resume ---- */

static int check_given(const char *flag, unsigned given, unsigned bit, double want,
		       double have, const char *path, struct kerr *e)
{
	if ((given & bit) && want != have)
		return kerr_set(e, K_EUSAGE, "%s %g conflicts with checkpoint '%s' (%g); drop "
				"the flag to continue the run as it was", flag, want, path, have);
	return 0;
}

/* Loads cfg->resume into the model and *meta after checking it against the
 * data and the flags the user gave. */
static int resume_load(const struct run_config *cfg, const struct dataset *train,
		       struct mlp_shape *shape, struct ckpt_meta *meta,
		       float **p, float **m, float **v, struct kerr *e)
{
	const char *path = cfg->resume;
	char a[128], b[128];
	int ret;
	if ((ret = ckpt_load(path, meta, p, m, v, e)) < 0)
		return ret;
	if ((cfg->given & GIVEN_HIDDEN) && !mlp_shape_equal(shape, &meta->shape))
		return kerr_set(e, K_EUSAGE, "--hidden gives the model %s but checkpoint '%s' "
				"holds %s", mlp_shape_str(shape, a, sizeof(a)), path,
				mlp_shape_str(&meta->shape, b, sizeof(b)));
	if (meta->shape.dims[0] != train->dim ||
	    meta->shape.dims[meta->shape.n_layers] != train->classes)
		return kerr_set(e, K_ECKPT, "checkpoint '%s' holds a %s model but the data has "
				"%d features and %d classes", path,
				mlp_shape_str(&meta->shape, b, sizeof(b)), train->dim,
				train->classes);
	if (meta->data_fp != dataset_fingerprint(train))
		return kerr_set(e, K_ECKPT, "checkpoint '%s' was trained on different data "
				"(fingerprint mismatch); resume with the same data flags", path);
	if ((ret = check_given("--batch", cfg->given, GIVEN_BATCH, cfg->batch, meta->batch, path, e)) < 0 ||
	    (ret = check_given("--lr", cfg->given, GIVEN_LR, cfg->hp.lr, meta->hp.lr, path, e)) < 0 ||
	    (ret = check_given("--wd", cfg->given, GIVEN_WD, cfg->hp.wd, meta->hp.wd, path, e)) < 0 ||
	    (ret = check_given("--seed", cfg->given, GIVEN_SEED, (double)cfg->seed,
			       (double)meta->seed, path, e)) < 0)
		return ret;
	if (meta->batch < 1 || meta->batch > (uint32_t)train->n ||
	    meta->sample_pos != meta->step * meta->batch)
		return kerr_set(e, K_ECKPT, "checkpoint '%s': inconsistent batch %u / step %llu / "
				"position %llu", path, meta->batch, (unsigned long long)meta->step,
				(unsigned long long)meta->sample_pos);
	if ((long)meta->step > cfg->steps)
		return kerr_set(e, K_EUSAGE, "checkpoint '%s' is at step %llu, beyond --steps %ld",
				path, (unsigned long long)meta->step, cfg->steps);
	*shape = meta->shape;
	return 0;
}

/* ---- the run ---- */

int run_train(const struct run_config *cfg, const struct dataset *train,
	      const struct dataset *test, run_event_fn fn, void *ud,
	      struct run_result *res, struct kerr *e)
{
	struct backend b = {0};
	struct sampler smp = {0};
	struct ckpt_meta meta = {0};
	struct mlp_shape shape;
	struct run_event ev;
	float *rp = NULL, *rm = NULL, *rv = NULL;
	int32_t *idx = NULL;
	FILE *metrics = NULL;
	char devname[256] = "cpu";
	long step0 = 0, window_steps = 0, final_correct = -1;
	double t0, final_loss = 0;
	int B, ret;

	memset(res, 0, sizeof(*res));
	if ((ret = mlp_shape_make(&shape, train->dim, cfg->hidden, cfg->n_hidden,
				  train->classes, e)) < 0)
		return ret;
	meta.batch = (uint32_t)cfg->batch;
	meta.seed = cfg->seed;
	meta.hp = cfg->hp;
	meta.data_fp = dataset_fingerprint(train);
	if (cfg->resume) {
		if ((ret = resume_load(cfg, train, &shape, &meta, &rp, &rm, &rv, e)) < 0)
			goto out;
		step0 = (long)meta.step;
	}
	meta.shape = shape;
	B = (int)meta.batch;
	if (B > train->n) {
		ret = kerr_set(e, K_EUSAGE, "--batch %d is larger than the training set (%d examples)",
			       B, train->n);
		goto out;
	}
	if ((ret = backend_init(&b, cfg->device, &shape, B, train, test, cfg->tf32, e)) < 0)
		goto out;
	if (rp) {
		size_t n = b.m->n_params * sizeof(float);
		memcpy(b.m->params, rp, n);
		memcpy(b.m->m, rm, n);
		memcpy(b.m->v, rv, n);
	} else {
		mlp_init_params(b.m, meta.seed);
	}
	if ((ret = backend_upload(&b, e)) < 0)
		goto out;
	if (cfg->device == DEV_CUDA &&
	    (ret = cuda_device_info(devname, sizeof(devname), NULL, e)) < 0)
		goto out;
	if ((ret = sampler_init(&smp, meta.seed, train->n, e)) < 0)
		goto out;
	idx = malloc((size_t)B * sizeof(int32_t));
	if (!idx) {
		ret = kerr_set(e, K_ENOMEM, "out of memory");
		goto out;
	}
	if (cfg->out_dir) {
		if ((ret = make_dirs(cfg->out_dir, e)) < 0)
			goto out;
		if (!(metrics = metrics_open(cfg->out_dir, step0, e))) {
			ret = K_EIO;
			goto out;
		}
	}

	memset(&ev, 0, sizeof(ev));
	ev.kind = RUN_EV_START;
	ev.step = step0;
	ev.total = cfg->steps;
	ev.shape = &shape;
	ev.n_params = b.m->n_params;
	ev.n_train = train->n;
	ev.n_test = test->n;
	ev.batch = B;
	ev.device = devname;
	if (fn)
		fn(&ev, ud);

	t0 = k_now();
	for (long step = step0 + 1; step <= cfg->steps; step++) {
		int log_now = step % cfg->log_every == 0 || step == cfg->steps;
		int eval_now = (cfg->eval_every && step % cfg->eval_every == 0) || step == cfg->steps;
		sampler_batch(&smp, meta.sample_pos, B, idx);
		if ((ret = backend_step(&b, idx, B, &meta.hp, step, e)) < 0)
			goto out;
		meta.step = (uint64_t)step;
		meta.sample_pos += (uint64_t)B;
		window_steps++;
		if (log_now) {
			double loss_sum, dt, n;
			long correct;
			if ((ret = backend_take_stats(&b, &loss_sum, &correct, e)) < 0)
				goto out;
			dt = k_now() - t0;
			n = (double)window_steps * B;
			if (!isfinite(loss_sum)) {
				ret = kerr_set(e, K_ENONFINITE, "loss became %s between steps %ld and "
					       "%ld; stopping (no checkpoint written)",
					       isnan(loss_sum) ? "nan" : "inf",
					       step - window_steps + 1, step);
				goto out;
			}
			memset(&ev, 0, sizeof(ev));
			ev.kind = RUN_EV_LOG;
			ev.step = step;
			ev.total = cfg->steps;
			ev.loss = loss_sum / n;
			ev.acc = correct / n;
			ev.samples_per_s = dt > 0 ? n / dt : 0;
			ev.ms_per_step = dt * 1000.0 / window_steps;
			if (eval_now) {
				if ((ret = backend_eval(&b, &ev.test_loss, &ev.test_correct, e)) < 0)
					goto out;
				if (step == cfg->steps) {  /* reused by the end event */
					final_loss = ev.test_loss;
					final_correct = ev.test_correct;
				}
				ev.has_test = 1;
				ev.test_n = test->n;
				ev.test_loss /= test->n;
				ev.test_acc = (double)ev.test_correct / test->n;
			}
			if (metrics) {
				fprintf(metrics, "%ld,%.6f,%.6f,%.1f,%.4f,", step, ev.loss, ev.acc,
					ev.samples_per_s, ev.ms_per_step);
				if (ev.has_test)
					fprintf(metrics, "%.6f,%.6f\n", ev.test_loss, ev.test_acc);
				else
					fputs(",\n", metrics);
				fflush(metrics);
			}
			if (fn)
				fn(&ev, ud);
			window_steps = 0;
			t0 = k_now();
		}
		if (cfg->ckpt_every && step % cfg->ckpt_every == 0 && step != cfg->steps) {
			if ((ret = save_ckpt(&b, cfg, &meta, e)) < 0)
				goto out;
			t0 = k_now();
		}
	}

	if ((ret = save_ckpt(&b, cfg, &meta, e)) < 0)
		goto out;
	memset(&ev, 0, sizeof(ev));
	ev.kind = RUN_EV_END;
	ev.step = (long)meta.step;
	if (b.device == DEV_CUDA)
		ev.graph = mlp_cuda_graph_state(b.c);
	ev.total = cfg->steps;
	if (final_correct >= 0) {
		ev.test_loss = final_loss;
		ev.test_correct = final_correct;
	} else if ((ret = backend_eval(&b, &ev.test_loss, &ev.test_correct, e)) < 0) {
		goto out;
	}
	if (!isfinite(ev.test_loss)) {
		ret = kerr_set(e, K_ENONFINITE, "held-out loss is %s", isnan(ev.test_loss) ? "nan" : "inf");
		goto out;
	}
	ev.has_test = 1;
	ev.test_n = test->n;
	ev.test_loss /= test->n;
	ev.test_acc = (double)ev.test_correct / test->n;
	res->step = ev.step;
	res->test_loss = ev.test_loss;
	res->test_acc = ev.test_acc;
	res->test_correct = ev.test_correct;
	res->test_n = test->n;
	if (fn)
		fn(&ev, ud);
	ret = 0;
out:
	if (metrics && fclose(metrics) != 0 && ret == 0)
		ret = kerr_errno(e, K_EIO, "cannot write metrics.csv in '%s'", cfg->out_dir);
	free(idx);
	free(rp);
	free(rm);
	free(rv);
	sampler_free(&smp);
	backend_free(&b);
	return ret;
}

int run_bench(const struct run_config *cfg, int in, int classes, int B,
	      long warmup, long steps, struct bench_result *res, struct kerr *e)
{
	struct dataset data = {0};
	struct backend b = {0};
	struct sampler smp = {0};
	struct mlp_shape shape;
	int32_t *idx = NULL;
	double t0, loss;
	long correct;
	uint64_t pos = 0;
	int n = B * 4 > 8192 ? B * 4 : 8192, ret;

	memset(res, 0, sizeof(*res));
	t0 = k_now();
	if (steps < 1 || warmup < 0)
		return kerr_set(e, K_EUSAGE, "--bench-steps must be at least 1");
	if ((ret = mlp_shape_make(&shape, in, cfg->hidden, cfg->n_hidden, classes, e)) < 0)
		return ret;
	if ((ret = dataset_random(&data, n, in, classes, cfg->seed, e)) < 0)
		return ret;
	if ((ret = backend_init(&b, cfg->device, &shape, B, &data, NULL, cfg->tf32, e)) < 0)
		goto out;
	mlp_init_params(b.m, cfg->seed);
	if ((ret = backend_upload(&b, e)) < 0 || (ret = sampler_init(&smp, cfg->seed, n, e)) < 0)
		goto out;
	idx = malloc((size_t)B * sizeof(int32_t));
	if (!idx) {
		ret = kerr_set(e, K_ENOMEM, "out of memory");
		goto out;
	}
	/* The same work per step as training: sampling, gather, step. */
	for (long i = 0; i < warmup + steps; i++) {
		if (i == warmup) {
			if ((ret = backend_take_stats(&b, &loss, &correct, e)) < 0)
				goto out;
			t0 = k_now();
		}
		sampler_batch(&smp, pos, B, idx);
		pos += (uint64_t)B;
		if ((ret = backend_step(&b, idx, B, &cfg->hp, i + 1, e)) < 0)
			goto out;
	}
	if ((ret = backend_take_stats(&b, &loss, &correct, e)) < 0)
		goto out;
	{
		double dt = k_now() - t0;
		res->batch = B;
		res->steps = steps;
		res->ms_per_step = dt * 1000.0 / steps;
		res->samples_per_s = (double)B * steps / dt;
		res->flops_per_s = mlp_step_flops(&shape, B) * steps / dt;
		if (b.device == DEV_CUDA)
			snprintf(res->graph, sizeof(res->graph), "%s", mlp_cuda_graph_state(b.c));
	}
	if (!isfinite(loss))
		ret = kerr_set(e, K_ENONFINITE, "benchmark loss is not finite");
out:
	free(idx);
	sampler_free(&smp);
	backend_free(&b);
	dataset_free(&data);
	return ret;
}
