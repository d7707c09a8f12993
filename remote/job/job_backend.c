/* The table of job backends (job_backend.h): one line per backend. */
#include <string.h>

#include "job_backend.h"
#include "job_store.h"

static const struct job_backend *const backends[] = {
	&job_backend_local,
	&job_backend_slurm,
};

const struct job_backend *job_backend_find(const char *name)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(backends); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}

const struct job_backend *job_backend_of(const char *dir)
{
	struct strvec kv = STRVEC_INIT;
	char *p = job_meta(dir, "job");
	const struct job_backend *b = NULL;

	if (job_kv_read(p, &kv, NULL) == 0)
		b = job_backend_find(job_kv_get(&kv, "backend") ? job_kv_get(&kv, "backend")
							       : JOB_BACKEND_DEFAULT);
	sv_clear(&kv);
	free(p);
	return b;
}

void job_backends_refresh(const char *root)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(backends); i++)
		if (backends[i]->refresh)
			backends[i]->refresh(root);
}

int job_backend_main(int argc, char **argv)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(backends); i++) {
		int rc = backends[i]->main ? backends[i]->main(argc, argv) : -1;
		if (rc >= 0)
			return rc;
	}
	return -1;
}
