/* The CUDA backend's interface in a build without nvcc: every entry point
 * reports that CUDA is not compiled in, so the trainer runs on the CPU and
 * the GPU tests skip with a reason. */
#include <stddef.h>

#include "mlp.h"
#include "banned.h"

#define NO_CUDA_MSG "this build has no CUDA (nvcc was not found when it was built)"

int cuda_compiled(void)
{
	return 0;
}

int cuda_device_count(struct kerr *e)
{
	kerr_set(e, K_ECUDA, NO_CUDA_MSG);
	return 0;
}

int cuda_device_info(char *name, size_t cap, double *peak_fp32, struct kerr *e)
{
	(void)name;
	(void)cap;
	(void)peak_fp32;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

struct mlp_cuda *mlp_cuda_new(const struct mlp_shape *s, int max_batch,
			      const struct dataset *train, const struct dataset *test,
			      int tf32, struct kerr *e)
{
	(void)s;
	(void)max_batch;
	(void)train;
	(void)test;
	(void)tf32;
	kerr_set(e, K_ECUDA, NO_CUDA_MSG);
	return NULL;
}

void mlp_cuda_free(struct mlp_cuda *c)
{
	(void)c;
}

int mlp_cuda_set_state(struct mlp_cuda *c, const float *params, const float *m,
		       const float *v, struct kerr *e)
{
	(void)c;
	(void)params;
	(void)m;
	(void)v;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int mlp_cuda_get_state(struct mlp_cuda *c, float *params, float *m, float *v,
		       struct kerr *e)
{
	(void)c;
	(void)params;
	(void)m;
	(void)v;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int mlp_cuda_step(struct mlp_cuda *c, const int32_t *idx, int B,
		  const struct mlp_hparams *hp, long t, struct kerr *e)
{
	(void)c;
	(void)idx;
	(void)B;
	(void)hp;
	(void)t;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int mlp_cuda_set_graph(struct mlp_cuda *c, int on)
{
	(void)c;
	(void)on;
	return 0;
}

const char *mlp_cuda_graph_state(const struct mlp_cuda *c)
{
	(void)c;
	return "off (no CUDA)";
}

int mlp_cuda_take_stats(struct mlp_cuda *c, double *loss_sum, long *correct,
			struct kerr *e)
{
	(void)c;
	(void)loss_sum;
	(void)correct;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int mlp_cuda_eval(struct mlp_cuda *c, double *loss_sum, long *correct, struct kerr *e)
{
	(void)c;
	(void)loss_sum;
	(void)correct;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int mlp_cuda_get_grads(struct mlp_cuda *c, float *grads, struct kerr *e)
{
	(void)c;
	(void)grads;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int mlp_cuda_get_acts(struct mlp_cuda *c, int l, float *out, int B, struct kerr *e)
{
	(void)c;
	(void)l;
	(void)out;
	(void)B;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int cuda_test_matmul_forward(float *out, const float *inp, const float *W,
			     int B, int C, int OC, struct kerr *e)
{
	(void)out;
	(void)inp;
	(void)W;
	(void)B;
	(void)C;
	(void)OC;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int cuda_test_matmul_backward(float *dinp, float *dW, const float *dout,
			      const float *inp, const float *W, int B, int C, int OC,
			      struct kerr *e)
{
	(void)dinp;
	(void)dW;
	(void)dout;
	(void)inp;
	(void)W;
	(void)B;
	(void)C;
	(void)OC;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int cuda_test_bias_relu_forward(float *act, const float *b, int B, int OC, int relu,
				struct kerr *e)
{
	(void)act;
	(void)b;
	(void)B;
	(void)OC;
	(void)relu;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int cuda_test_bias_relu_backward(float *dpre, float *db, const float *dact,
				 const float *act, int B, int OC, int relu,
				 struct kerr *e)
{
	(void)dpre;
	(void)db;
	(void)dact;
	(void)act;
	(void)B;
	(void)OC;
	(void)relu;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int cuda_test_softmax_ce(float *dlogits, double *loss, long *correct,
			 const float *logits, const int32_t *labels, int B, int K,
			 struct kerr *e)
{
	(void)dlogits;
	(void)loss;
	(void)correct;
	(void)logits;
	(void)labels;
	(void)B;
	(void)K;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}

int cuda_test_adamw(float *p, const float *g, float *m, float *v, size_t n,
		    size_t n_decay, const struct mlp_hparams *hp, long t,
		    struct kerr *e)
{
	(void)p;
	(void)g;
	(void)m;
	(void)v;
	(void)n;
	(void)n_decay;
	(void)hp;
	(void)t;
	return kerr_set(e, K_ECUDA, NO_CUDA_MSG);
}
