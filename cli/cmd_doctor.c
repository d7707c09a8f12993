/* gpurun doctor: not written yet (see the open issues). */
#include "gpurun.h"

const struct gr_opt cmd_doctor_opts[] = { { 0 } };

int cmd_doctor(int argc, char **argv, struct gr_ctx *ctx)
{
	(void)argc;
	(void)argv;
	return gr_errf(&ctx->err, GR_EUNSUPP, "'gpurun doctor' is not implemented yet");
}
