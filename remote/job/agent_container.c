/* The agent's CONTAINER_CHECK (job_proto.h): what a job's container would
 * get on this host, for `gpurun doctor` (job_container.h, job_ctr_check).
 * It runs the runtime's client, so in a forked helper. */
#include <stdlib.h>
#include <string.h>

#include "agent_job.h"
#include "agent.h"
#include "job_container.h"

struct ctr_arg {
	char *runtime, *image;
};

static int check_fn(void *arg, int data_fd, struct strbuf *pl, struct gr_err *err)
{
	struct ctr_arg *s = arg;
	struct strvec kv = STRVEC_INIT;

	(void)data_fd;
	(void)err;
	job_ctr_check(s->runtime, s->image, &kv);
	put_u32(pl, (uint32_t)(kv.n / 2));
	for (size_t i = 0; i < kv.n; i++)
		put_str(pl, kv.v[i]);
	sv_clear(&kv);
	return 0;
}

int agent_ctr_check(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err)
{
	char *project = get_str(rd);
	struct ctr_arg s = { get_str(rd), get_str(rd) };
	int rc = rd_done(rd, err, "CONTAINER_CHECK");

	if (rc == 0 && strcmp(s.runtime, "auto") && strcmp(s.runtime, "podman") &&
	    strcmp(s.runtime, "docker"))
		rc = gr_errf(err, GR_EINVAL, "unknown container runtime '%s' (auto, podman or docker)",
			     s.runtime);
	if (rc == 0)
		rc = agent_helper_start(a, rid, 0, 1, check_fn, &s, err);
	free(project);
	free(s.runtime);
	free(s.image);
	return rc;
}
