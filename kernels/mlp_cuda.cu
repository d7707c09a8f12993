/* The CUDA backend of the trainer (the mlp_cuda_* interface of mlp.h): the
 * datasets live on the device, a step uploads only the batch's indices
 * through a ring of pinned buffers, and everything else (gather, forward,
 * loss, backward, AdamW) is enqueued on one stream without a host sync;
 * statistics are accumulated on the device and read at log time. Also the
 * single-kernel entry points the CPU-vs-CUDA tests call.
 *
 * A step is captured once as a CUDA graph (per batch size) and replayed:
 * two calls per step (the copy of the indices and the step's AdamW
 * arguments, then the graph) instead of ~20 launches. KERNELS_CUDA_GRAPH=0
 * turns it off; a capture that fails falls back to launching each kernel,
 * and mlp_cuda_graph_state says which ran and why. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"
#include "mlp_kernels.cuh"
#include "banned.h"

#define IDX_RING 8
/* Floats after the indices in a step's upload: lr, bc1, bc2 and padding. */
#define STEP_ARGS 4
/* cuBLAS's own workspace (its recommendation for Hopper); owned here so
 * that a graph capture never makes cuBLAS allocate. */
#define BLAS_WORKSPACE (32u << 20)

struct mlp_cuda {
	struct mlp_shape s;
	int max_batch, max_width;
	size_t n_params, n_weights;
	cublasHandle_t blas;
	cudaStream_t stream;
	float *params, *grads, *m, *v;
	float *acts[MLP_MAX_LAYERS + 1];  /* acts[0]: the gathered batch */
	float *d0, *d1, *partial;
	float *loss_rows, *hit_rows;
	int32_t *labels;
	double *stats, *eval_stats;       /* [2] each: loss sum, hits */
	float *train_x, *test_x;
	int32_t *train_y, *test_y;
	int n_train, n_test;
	int32_t *idx_dev[IDX_RING], *idx_host[IDX_RING];
	cudaEvent_t idx_done[IDX_RING];
	int idx_used[IDX_RING];
	long ring_pos;
	void *blas_ws;
	/* The captured step: step_dev holds max_batch indices then STEP_ARGS
	 * floats; graph_B and graph_hp are what it was captured for. */
	int32_t *step_dev;
	int use_graph, graph_B;
	struct mlp_hparams graph_hp;
	cudaGraph_t graph;
	cudaGraphExec_t graph_exec;
	char graph_why[160];
};

int cuda_compiled(void)
{
	return 1;
}

int cuda_device_count(struct kerr *e)
{
	int n = 0;
	cudaError_t err = cudaGetDeviceCount(&n);
	if (err != cudaSuccess) {
		kerr_set(e, K_ECUDA, "no CUDA device available (cudaGetDeviceCount: %s)",
			 cudaGetErrorString(err));
		return 0;
	}
	if (n == 0) {
		const char *vis = getenv("CUDA_VISIBLE_DEVICES");
		kerr_set(e, K_ECUDA, "no CUDA device visible%s%s%s", vis ? " (CUDA_VISIBLE_DEVICES='" : "",
			 vis ? vis : "", vis ? "')" : "");
	}
	return n;
}

/* FP32 lanes per SM by compute capability, for the peak FLOP/s figure. */
static int fp32_per_sm(int major, int minor)
{
	if (major == 7 || (major == 8 && minor == 0) || (major == 6 && minor == 0))
		return 64;
	return 128;
}

int cuda_device_info(char *name, size_t cap, double *peak_fp32, struct kerr *e)
{
	struct cudaDeviceProp prop;
	int dev, khz = 0;
	cudaCheck(cudaGetDevice(&dev));
	cudaCheck(cudaGetDeviceProperties(&prop, dev));
	cudaCheck(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
	if (name)
		snprintf(name, cap, "cuda:%d %s (sm_%d%d, %d SMs)", dev, prop.name, prop.major,
			 prop.minor, prop.multiProcessorCount);
	if (peak_fp32)
		*peak_fp32 = 2.0 * prop.multiProcessorCount * fp32_per_sm(prop.major, prop.minor) *
			     (double)khz * 1e3;
	return 0;
}

/* ---- the backend ---- */

void mlp_cuda_free(struct mlp_cuda *c)
{
	if (!c)
		return;
	/* Best effort: a failed free during clean-up has nowhere to go. */
	if (c->stream)
		cudaStreamSynchronize(c->stream);
	if (c->graph_exec)
		cudaGraphExecDestroy(c->graph_exec);
	if (c->graph)
		cudaGraphDestroy(c->graph);
	cudaFree(c->step_dev);
	cudaFree(c->blas_ws);
	cudaFree(c->params);
	cudaFree(c->grads);
	cudaFree(c->m);
	cudaFree(c->v);
	for (int l = 0; l <= MLP_MAX_LAYERS; l++)
		cudaFree(c->acts[l]);
	cudaFree(c->d0);
	cudaFree(c->d1);
	cudaFree(c->partial);
	cudaFree(c->loss_rows);
	cudaFree(c->hit_rows);
	cudaFree(c->labels);
	cudaFree(c->stats);
	cudaFree(c->eval_stats);
	cudaFree(c->train_x);
	cudaFree(c->train_y);
	cudaFree(c->test_x);
	cudaFree(c->test_y);
	for (int i = 0; i < IDX_RING; i++) {
		cudaFree(c->idx_dev[i]);
		cudaFreeHost(c->idx_host[i]);
		if (c->idx_done[i])
			cudaEventDestroy(c->idx_done[i]);
	}
	if (c->blas)
		cublasDestroy(c->blas);
	if (c->stream)
		cudaStreamDestroy(c->stream);
	free(c);
}

static int upload(void **dst, const void *src, size_t bytes, cudaStream_t s, struct kerr *e)
{
	cudaCheck(cudaMalloc(dst, bytes ? bytes : 1));
	if (bytes)
		cudaCheck(cudaMemcpyAsync(*dst, src, bytes, cudaMemcpyHostToDevice, s));
	return 0;
}

static int cuda_setup(struct mlp_cuda *c, const struct dataset *train,
		      const struct dataset *test, int tf32, struct kerr *e)
{
	const struct mlp_shape *s = &c->s;
	size_t B = (size_t)c->max_batch, W = (size_t)c->max_width, bytes = c->n_params * sizeof(float);
	int ret;
	cudaCheck(cudaSetDevice(0));
	cudaCheck(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
	cublasCheck(cublasCreate(&c->blas));
	cublasCheck(cublasSetStream(c->blas, c->stream));
	cublasCheck(cublasSetMathMode(c->blas, tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
	cudaCheck(cudaMalloc(&c->blas_ws, BLAS_WORKSPACE));
	cublasCheck(cublasSetWorkspace(c->blas, c->blas_ws, BLAS_WORKSPACE));
	cudaCheck(cudaMalloc((void **)&c->step_dev, B * sizeof(int32_t) + STEP_ARGS * sizeof(float)));
	cudaCheck(cudaMalloc((void **)&c->params, bytes));
	cudaCheck(cudaMalloc((void **)&c->grads, bytes));
	cudaCheck(cudaMalloc((void **)&c->m, bytes));
	cudaCheck(cudaMalloc((void **)&c->v, bytes));
	for (int l = 0; l <= s->n_layers; l++)
		cudaCheck(cudaMalloc((void **)&c->acts[l], B * (size_t)s->dims[l] * sizeof(float)));
	cudaCheck(cudaMalloc((void **)&c->d0, B * W * sizeof(float)));
	cudaCheck(cudaMalloc((void **)&c->d1, B * W * sizeof(float)));
	cudaCheck(cudaMalloc((void **)&c->partial, COLSUM_MAX_BLOCKS * W * sizeof(float)));
	cudaCheck(cudaMalloc((void **)&c->loss_rows, B * sizeof(float)));
	cudaCheck(cudaMalloc((void **)&c->hit_rows, B * sizeof(float)));
	cudaCheck(cudaMalloc((void **)&c->labels, B * sizeof(int32_t)));
	cudaCheck(cudaMalloc((void **)&c->stats, 2 * sizeof(double)));
	cudaCheck(cudaMalloc((void **)&c->eval_stats, 2 * sizeof(double)));
	cudaCheck(cudaMemsetAsync(c->stats, 0, 2 * sizeof(double), c->stream));
	cudaCheck(cudaMemsetAsync(c->grads, 0, bytes, c->stream));
	for (int i = 0; i < IDX_RING; i++) {
		cudaCheck(cudaMalloc((void **)&c->idx_dev[i], B * sizeof(int32_t)));
		cudaCheck(cudaMallocHost((void **)&c->idx_host[i],
					 B * sizeof(int32_t) + STEP_ARGS * sizeof(float)));
		memset(c->idx_host[i], 0, B * sizeof(int32_t) + STEP_ARGS * sizeof(float));
		cudaCheck(cudaEventCreateWithFlags(&c->idx_done[i], cudaEventDisableTiming));
	}
	c->n_train = train->n;
	if ((ret = upload((void **)&c->train_x, train->x, (size_t)train->n * train->dim * sizeof(float),
			  c->stream, e)) < 0 ||
	    (ret = upload((void **)&c->train_y, train->y, (size_t)train->n * sizeof(int32_t),
			  c->stream, e)) < 0)
		return ret;
	if (test) {
		c->n_test = test->n;
		if ((ret = upload((void **)&c->test_x, test->x,
				  (size_t)test->n * test->dim * sizeof(float), c->stream, e)) < 0 ||
		    (ret = upload((void **)&c->test_y, test->y, (size_t)test->n * sizeof(int32_t),
				  c->stream, e)) < 0)
			return ret;
	}
	cudaCheck(cudaStreamSynchronize(c->stream));
	return 0;
}

struct mlp_cuda *mlp_cuda_new(const struct mlp_shape *s, int max_batch,
			      const struct dataset *train, const struct dataset *test,
			      int tf32, struct kerr *e)
{
	struct mlp_cuda *c = (struct mlp_cuda *)calloc(1, sizeof(*c));
	if (!c) {
		kerr_set(e, K_ENOMEM, "out of memory");
		return NULL;
	}
	c->s = *s;
	c->max_batch = max_batch;
	c->max_width = mlp_max_width(s);
	c->n_params = mlp_n_params(s);
	c->n_weights = mlp_n_weights(s);
	{
		const char *g = getenv("KERNELS_CUDA_GRAPH");
		c->use_graph = !(g && !strcmp(g, "0"));
		snprintf(c->graph_why, sizeof(c->graph_why), "%s",
			 c->use_graph ? "not captured yet" : "off (KERNELS_CUDA_GRAPH=0)");
	}
	if (cuda_setup(c, train, test, tf32, e) < 0) {
		mlp_cuda_free(c);
		return NULL;
	}
	return c;
}

int mlp_cuda_set_state(struct mlp_cuda *c, const float *params, const float *m,
		       const float *v, struct kerr *e)
{
	size_t bytes = c->n_params * sizeof(float);
	cudaCheck(cudaMemcpyAsync(c->params, params, bytes, cudaMemcpyHostToDevice, c->stream));
	cudaCheck(cudaMemcpyAsync(c->m, m, bytes, cudaMemcpyHostToDevice, c->stream));
	cudaCheck(cudaMemcpyAsync(c->v, v, bytes, cudaMemcpyHostToDevice, c->stream));
	cudaCheck(cudaStreamSynchronize(c->stream));
	return 0;
}

int mlp_cuda_get_state(struct mlp_cuda *c, float *params, float *m, float *v, struct kerr *e)
{
	size_t bytes = c->n_params * sizeof(float);
	cudaCheck(cudaMemcpyAsync(params, c->params, bytes, cudaMemcpyDeviceToHost, c->stream));
	if (m)
		cudaCheck(cudaMemcpyAsync(m, c->m, bytes, cudaMemcpyDeviceToHost, c->stream));
	if (v)
		cudaCheck(cudaMemcpyAsync(v, c->v, bytes, cudaMemcpyDeviceToHost, c->stream));
	cudaCheck(cudaStreamSynchronize(c->stream));
	return 0;
}

int mlp_cuda_get_grads(struct mlp_cuda *c, float *grads, struct kerr *e)
{
	cudaCheck(cudaMemcpyAsync(grads, c->grads, c->n_params * sizeof(float),
				  cudaMemcpyDeviceToHost, c->stream));
	cudaCheck(cudaStreamSynchronize(c->stream));
	return 0;
}

int mlp_cuda_get_acts(struct mlp_cuda *c, int l, float *out, int B, struct kerr *e)
{
	if (l < 1 || l > c->s.n_layers || B > c->max_batch)
		return kerr_set(e, K_ECUDA, "mlp_cuda_get_acts: layer %d / batch %d out of range", l, B);
	cudaCheck(cudaMemcpyAsync(out, c->acts[l], (size_t)B * c->s.dims[l] * sizeof(float),
				  cudaMemcpyDeviceToHost, c->stream));
	cudaCheck(cudaStreamSynchronize(c->stream));
	return 0;
}

/* Logits of x[B] into acts[n_layers]. */
static int cuda_forward(struct mlp_cuda *c, const float *x, int B, struct kerr *e)
{
	const struct mlp_shape *s = &c->s;
	const float *in = x;
	int ret;
	for (int l = 0; l < s->n_layers; l++) {
		float *out = c->acts[l + 1];
		if ((ret = gemm_forward(c->blas, out, in, c->params + mlp_w_offset(s, l), B,
					s->dims[l], s->dims[l + 1], e)) < 0 ||
		    (ret = launch_bias_relu_forward(out, c->params + mlp_b_offset(s, l), B,
						    s->dims[l + 1], l < s->n_layers - 1, c->stream,
						    e)) < 0)
			return ret;
		in = out;
	}
	return 0;
}

/* Everything a step enqueues after its indices are on the device: gather,
 * forward, loss, backward, AdamW (its lr and bias corrections from
 * step_args on the device when not NULL, else from hp and t). */
static int step_body(struct mlp_cuda *c, const int32_t *idx_dev, int B,
		     const struct mlp_hparams *hp, long t, const float *step_args, struct kerr *e)
{
	const struct mlp_shape *s = &c->s;
	int L = s->n_layers, ret;
	float *dout = c->d0, *dnext = c->d1;
	if ((ret = launch_gather(c->acts[0], c->labels, c->train_x, c->train_y, idx_dev,
				 B, s->dims[0], c->stream, e)) < 0 ||
	    (ret = cuda_forward(c, c->acts[0], B, e)) < 0 ||
	    (ret = launch_softmax_ce(dout, c->loss_rows, c->hit_rows, c->acts[L], c->labels, B,
				     s->dims[L], c->stats, c->stream, e)) < 0)
		return ret;
	for (int l = L - 1; l >= 0; l--) {
		float *tmp;
		if ((ret = launch_bias_relu_backward(dout, c->grads + mlp_b_offset(s, l), c->partial,
						     dout, c->acts[l + 1], B, s->dims[l + 1],
						     l < L - 1, c->stream, e)) < 0 ||
		    (ret = gemm_backward(c->blas, l == 0 ? NULL : dnext,
					 c->grads + mlp_w_offset(s, l), dout, c->acts[l],
					 c->params + mlp_w_offset(s, l), B, s->dims[l],
					 s->dims[l + 1], e)) < 0)
			return ret;
		tmp = dout;
		dout = dnext;
		dnext = tmp;
	}
	if (step_args)
		return launch_adamw_args(c->params, c->grads, c->m, c->v, c->n_params,
					 c->n_weights, hp, step_args, c->stream, e);
	return launch_adamw(c->params, c->grads, c->m, c->v, c->n_params, c->n_weights, hp, t,
			    c->stream, e);
}

static void graph_drop(struct mlp_cuda *c)
{
	if (c->graph_exec)
		cudaGraphExecDestroy(c->graph_exec);
	if (c->graph)
		cudaGraphDestroy(c->graph);
	c->graph_exec = NULL;
	c->graph = NULL;
	c->graph_B = 0;
}

/* Captures step_body for batch B into c->graph_exec. On failure the graph
 * is turned off for good (the reason in graph_why) and 0 is returned: the
 * caller launches the step itself. Only a failure to leave capture mode is
 * an error. */
static int graph_capture(struct mlp_cuda *c, int B, const struct mlp_hparams *hp,
			 struct kerr *e)
{
	struct kerr ce = { "" };
	cudaGraph_t g = NULL;
	cudaError_t err;
	int ret;
	graph_drop(c);
	err = cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal);
	if (err != cudaSuccess) {
		snprintf(c->graph_why, sizeof(c->graph_why), "off (cudaStreamBeginCapture: %s)",
			 cudaGetErrorString(err));
		(void)cudaGetLastError();
		c->use_graph = 0;
		return 0;
	}
	ret = step_body(c, c->step_dev, B, hp, 0,
			(const float *)(c->step_dev + c->max_batch), &ce);
	err = cudaStreamEndCapture(c->stream, &g);
	if (ret == 0 && err == cudaSuccess && g)
		err = cudaGraphInstantiate(&c->graph_exec, g, 0);
	if (ret < 0 || err != cudaSuccess || !g) {
		snprintf(c->graph_why, sizeof(c->graph_why), "off (capture failed: %s)",
			 ret < 0 ? ce.msg : cudaGetErrorString(err));
		if (g)
			cudaGraphDestroy(g);
		c->graph_exec = NULL;
		(void)cudaGetLastError();
		c->use_graph = 0;
		/* Still capturing would make every later call fail. */
		cudaStreamCaptureStatus st;
		cudaCheck(cudaStreamIsCapturing(c->stream, &st));
		if (st != cudaStreamCaptureStatusNone)
			return kerr_set(e, K_ECUDA, "CUDA graph capture could not be ended");
		return 0;
	}
	c->graph = g;
	c->graph_B = B;
	c->graph_hp = *hp;
	snprintf(c->graph_why, sizeof(c->graph_why), "on (one graph a step)");
	return 0;
}

int mlp_cuda_step(struct mlp_cuda *c, const int32_t *idx, int B,
		  const struct mlp_hparams *hp, long t, struct kerr *e)
{
	int slot = (int)(c->ring_pos++ % IDX_RING), ret;
	int32_t *host = c->idx_host[slot];
	float *args = (float *)(host + c->max_batch);
	if (B < 1 || B > c->max_batch)
		return kerr_set(e, K_ECUDA, "mlp_cuda_step: batch %d is outside 1..%d", B,
				c->max_batch);
	/* The pinned slot is free once its previous upload has completed. */
	if (c->idx_used[slot])
		cudaCheck(cudaEventSynchronize(c->idx_done[slot]));
	memcpy(host, idx, (size_t)B * sizeof(int32_t));
	if (!c->use_graph) {
		cudaCheck(cudaMemcpyAsync(c->idx_dev[slot], host, (size_t)B * sizeof(int32_t),
					  cudaMemcpyHostToDevice, c->stream));
		cudaCheck(cudaEventRecord(c->idx_done[slot], c->stream));
		c->idx_used[slot] = 1;
		return step_body(c, c->idx_dev[slot], B, hp, t, NULL, e);
	}
	/* Graph: the indices and this step's AdamW arguments go to the one
	 * device buffer the graph reads (the stream orders it after the
	 * previous replay). */
	args[0] = hp->lr;
	adamw_bias_correction(hp, t, &args[1], &args[2]);
	args[3] = 0.0f;
	cudaCheck(cudaMemcpyAsync(c->step_dev, host,
				  (size_t)c->max_batch * sizeof(int32_t) + STEP_ARGS * sizeof(float),
				  cudaMemcpyHostToDevice, c->stream));
	cudaCheck(cudaEventRecord(c->idx_done[slot], c->stream));
	c->idx_used[slot] = 1;
	if (!c->graph_exec || c->graph_B != B || c->graph_hp.beta1 != hp->beta1 ||
	    c->graph_hp.beta2 != hp->beta2 || c->graph_hp.eps != hp->eps ||
	    c->graph_hp.wd != hp->wd) {
		if ((ret = graph_capture(c, B, hp, e)) < 0)
			return ret;
		if (!c->use_graph)
			return step_body(c, c->step_dev, B, hp, t, NULL, e);
	}
	cudaCheck(cudaGraphLaunch(c->graph_exec, c->stream));
	return 0;
}

int mlp_cuda_set_graph(struct mlp_cuda *c, int on)
{
	graph_drop(c);
	c->use_graph = on;
	snprintf(c->graph_why, sizeof(c->graph_why), "%s", on ? "not captured yet" : "off");
	return 0;
}

const char *mlp_cuda_graph_state(const struct mlp_cuda *c)
{
	return c->graph_why;
}

static int read_stats(struct mlp_cuda *c, double *dev, double *loss_sum, long *correct,
		      struct kerr *e)
{
	double h[2];
	cudaCheck(cudaMemcpyAsync(h, dev, sizeof(h), cudaMemcpyDeviceToHost, c->stream));
	cudaCheck(cudaMemsetAsync(dev, 0, sizeof(h), c->stream));
	cudaCheck(cudaStreamSynchronize(c->stream));
	*loss_sum = h[0];
	*correct = (long)h[1];
	return 0;
}

int mlp_cuda_take_stats(struct mlp_cuda *c, double *loss_sum, long *correct, struct kerr *e)
{
	return read_stats(c, c->stats, loss_sum, correct, e);
}

int mlp_cuda_eval(struct mlp_cuda *c, double *loss_sum, long *correct, struct kerr *e)
{
	const struct mlp_shape *s = &c->s;
	int L = s->n_layers, ret;
	if (!c->test_x)
		return kerr_set(e, K_ECUDA, "no held-out set was uploaded");
	cudaCheck(cudaMemsetAsync(c->eval_stats, 0, 2 * sizeof(double), c->stream));
	for (int i = 0; i < c->n_test; i += c->max_batch) {
		int B = c->n_test - i < c->max_batch ? c->n_test - i : c->max_batch;
		if ((ret = cuda_forward(c, c->test_x + (size_t)i * s->dims[0], B, e)) < 0 ||
		    (ret = launch_softmax_ce(NULL, c->loss_rows, c->hit_rows, c->acts[L],
					     c->test_y + i, B, s->dims[L], c->eval_stats,
					     c->stream, e)) < 0)
			return ret;
	}
	return read_stats(c, c->eval_stats, loss_sum, correct, e);
}

/* ---- single-kernel entry points for the tests ---- */

/* Device allocations of one test call, all freed together. */
struct scratch {
	void *p[8];
	int n;
	cublasHandle_t blas;
};

template <typename T>
static int scratch_in(struct scratch *sc, T **dst, const void *src, size_t bytes, struct kerr *e)
{
	cudaCheck(cudaMalloc((void **)dst, bytes ? bytes : 1));
	sc->p[sc->n++] = *dst;
	if (src)
		cudaCheck(cudaMemcpy(*dst, src, bytes, cudaMemcpyHostToDevice));
	return 0;
}

static void scratch_free(struct scratch *sc)
{
	for (int i = 0; i < sc->n; i++)
		cudaFree(sc->p[i]);
	if (sc->blas)
		cublasDestroy(sc->blas);
}

static int to_host(void *dst, const void *src, size_t bytes, struct kerr *e)
{
	cudaCheck(cudaDeviceSynchronize());
	cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
	return 0;
}

static int matmul_forward_test(struct scratch *sc, float *out, const float *inp, const float *W,
			       int B, int C, int OC, struct kerr *e)
{
	float *di, *dw, *dout;
	int ret;
	cublasCheck(cublasCreate(&sc->blas));
	if ((ret = scratch_in(sc, &di, inp, sizeof(float) * B * C, e)) < 0 ||
	    (ret = scratch_in(sc, &dw, W, sizeof(float) * OC * C, e)) < 0 ||
	    (ret = scratch_in(sc, &dout, NULL, sizeof(float) * B * OC, e)) < 0 ||
	    (ret = gemm_forward(sc->blas, dout, di, dw, B, C, OC, e)) < 0)
		return ret;
	return to_host(out, dout, sizeof(float) * B * OC, e);
}

int cuda_test_matmul_forward(float *out, const float *inp, const float *W,
			     int B, int C, int OC, struct kerr *e)
{
	struct scratch sc = {};
	int ret = matmul_forward_test(&sc, out, inp, W, B, C, OC, e);
	scratch_free(&sc);
	return ret;
}

static int matmul_backward_test(struct scratch *sc, float *dinp, float *dW, const float *dout,
				const float *inp, const float *W, int B, int C, int OC,
				struct kerr *e)
{
	float *ddo, *di, *dw, *ddi, *ddw;
	int ret;
	cublasCheck(cublasCreate(&sc->blas));
	if ((ret = scratch_in(sc, &ddo, dout, sizeof(float) * B * OC, e)) < 0 ||
	    (ret = scratch_in(sc, &di, inp, sizeof(float) * B * C, e)) < 0 ||
	    (ret = scratch_in(sc, &dw, W, sizeof(float) * OC * C, e)) < 0 ||
	    (ret = scratch_in(sc, &ddi, NULL, sizeof(float) * B * C, e)) < 0 ||
	    (ret = scratch_in(sc, &ddw, NULL, sizeof(float) * OC * C, e)) < 0 ||
	    (ret = gemm_backward(sc->blas, ddi, ddw, ddo, di, dw, B, C, OC, e)) < 0 ||
	    (ret = to_host(dinp, ddi, sizeof(float) * B * C, e)) < 0)
		return ret;
	return to_host(dW, ddw, sizeof(float) * OC * C, e);
}

int cuda_test_matmul_backward(float *dinp, float *dW, const float *dout,
			      const float *inp, const float *W, int B, int C, int OC,
			      struct kerr *e)
{
	struct scratch sc = {};
	int ret = matmul_backward_test(&sc, dinp, dW, dout, inp, W, B, C, OC, e);
	scratch_free(&sc);
	return ret;
}

static int bias_relu_forward_test(struct scratch *sc, float *act, const float *b, int B,
				  int OC, int relu, struct kerr *e)
{
	float *da, *db;
	int ret;
	if ((ret = scratch_in(sc, &da, act, sizeof(float) * B * OC, e)) < 0 ||
	    (ret = scratch_in(sc, &db, b, sizeof(float) * OC, e)) < 0 ||
	    (ret = launch_bias_relu_forward(da, db, B, OC, relu, 0, e)) < 0)
		return ret;
	return to_host(act, da, sizeof(float) * B * OC, e);
}

int cuda_test_bias_relu_forward(float *act, const float *b, int B, int OC, int relu,
				struct kerr *e)
{
	struct scratch sc = {};
	int ret = bias_relu_forward_test(&sc, act, b, B, OC, relu, e);
	scratch_free(&sc);
	return ret;
}

static int bias_relu_backward_test(struct scratch *sc, float *dpre, float *db,
				   const float *dact, const float *act, int B, int OC, int relu,
				   struct kerr *e)
{
	float *dd, *da, *ddb, *part;
	int ret;
	if ((ret = scratch_in(sc, &dd, dact, sizeof(float) * B * OC, e)) < 0 ||
	    (ret = scratch_in(sc, &da, act, sizeof(float) * B * OC, e)) < 0 ||
	    (ret = scratch_in(sc, &ddb, NULL, sizeof(float) * OC, e)) < 0 ||
	    (ret = scratch_in(sc, &part, NULL, sizeof(float) * COLSUM_MAX_BLOCKS * OC, e)) < 0 ||
	    (ret = launch_bias_relu_backward(dd, ddb, part, dd, da, B, OC, relu, 0, e)) < 0 ||
	    (ret = to_host(dpre, dd, sizeof(float) * B * OC, e)) < 0)
		return ret;
	return to_host(db, ddb, sizeof(float) * OC, e);
}

int cuda_test_bias_relu_backward(float *dpre, float *db, const float *dact,
				 const float *act, int B, int OC, int relu,
				 struct kerr *e)
{
	struct scratch sc = {};
	int ret = bias_relu_backward_test(&sc, dpre, db, dact, act, B, OC, relu, e);
	scratch_free(&sc);
	return ret;
}

static int softmax_ce_test(struct scratch *sc, float *dlogits, double *loss, long *correct,
			   const float *logits, const int32_t *labels, int B, int K,
			   struct kerr *e)
{
	float *dl, *rows, *hits;
	int32_t *dy;
	double *stats, h[2] = { 0, 0 };
	int ret;
	if ((ret = scratch_in(sc, &dl, logits, sizeof(float) * B * K, e)) < 0 ||
	    (ret = scratch_in(sc, &dy, labels, sizeof(int32_t) * B, e)) < 0 ||
	    (ret = scratch_in(sc, &rows, NULL, sizeof(float) * B, e)) < 0 ||
	    (ret = scratch_in(sc, &hits, NULL, sizeof(float) * B, e)) < 0 ||
	    (ret = scratch_in(sc, &stats, h, sizeof(h), e)) < 0)
		return ret;
	/* In place, as in training: dlogits overwrites the logits. */
	if ((ret = launch_softmax_ce(dl, rows, hits, dl, dy, B, K, stats, 0, e)) < 0 ||
	    (ret = to_host(dlogits, dl, sizeof(float) * B * K, e)) < 0 ||
	    (ret = to_host(h, stats, sizeof(h), e)) < 0)
		return ret;
	*loss = h[0] / B;
	*correct = (long)h[1];
	return 0;
}

int cuda_test_softmax_ce(float *dlogits, double *loss, long *correct,
			 const float *logits, const int32_t *labels, int B, int K,
			 struct kerr *e)
{
	struct scratch sc = {};
	int ret = softmax_ce_test(&sc, dlogits, loss, correct, logits, labels, B, K, e);
	scratch_free(&sc);
	return ret;
}

static int adamw_test(struct scratch *sc, float *p, const float *g, float *m, float *v,
		      size_t n, size_t n_decay, const struct mlp_hparams *hp, long t,
		      struct kerr *e)
{
	float *dp, *dg, *dm, *dv;
	int ret;
	if ((ret = scratch_in(sc, &dp, p, sizeof(float) * n, e)) < 0 ||
	    (ret = scratch_in(sc, &dg, g, sizeof(float) * n, e)) < 0 ||
	    (ret = scratch_in(sc, &dm, m, sizeof(float) * n, e)) < 0 ||
	    (ret = scratch_in(sc, &dv, v, sizeof(float) * n, e)) < 0 ||
	    (ret = launch_adamw(dp, dg, dm, dv, n, n_decay, hp, t, 0, e)) < 0 ||
	    (ret = to_host(p, dp, sizeof(float) * n, e)) < 0 ||
	    (ret = to_host(m, dm, sizeof(float) * n, e)) < 0)
		return ret;
	return to_host(v, dv, sizeof(float) * n, e);
}

int cuda_test_adamw(float *p, const float *g, float *m, float *v, size_t n,
		    size_t n_decay, const struct mlp_hparams *hp, long t,
		    struct kerr *e)
{
	struct scratch sc = {};
	int ret = adamw_test(&sc, p, g, m, v, n, n_decay, hp, t, e);
	scratch_free(&sc);
	return ret;
}
