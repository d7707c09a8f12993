/* PROBE (PROTOCOL.md): what this host offers a job, for `gpurun doctor`:
 * the tools a build and a run use, the project folder and its free space,
 * and with [remote] scheduler = slurm the cluster's tools and partitions. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "agent_job.h"
#include "job_slurm.h"
#include "agent.h"

int agent_job_probe(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	static const char *const tools[] = { "cc", "make", "nvcc", "nvidia-smi" };
	char *path = get_str(rd);
	uint8_t slurm = get_u8(rd);
	struct strbuf pl = STRBUF_INIT;
	struct statvfs vfs;
	int rc = rd_done(rd, err, "PROBE");

	if (rc < 0) {
		free(path);
		return rc;
	}
	char *full = agent_path(path);
	int exists = access(full, F_OK) == 0;
	put_u32(&pl, GR_ARRAY_SIZE(tools) + 3 + (slurm ? 4 : 0));
	for (size_t i = 0; i < GR_ARRAY_SIZE(tools); i++) {
		char *w = run_which(tools[i]);
		put_str(&pl, tools[i]);
		put_str(&pl, w ? w : "");
		free(w);
	}
	put_str(&pl, "path");
	put_str(&pl, full);
	put_str(&pl, "path_exists");
	put_str(&pl, exists ? "1" : "0");
	char freebuf[32] = "";
	if (statvfs(exists ? full : agent_home(), &vfs) == 0)
		snprintf(freebuf, sizeof(freebuf), "%llu",
			 (unsigned long long)vfs.f_bavail * vfs.f_frsize);
	put_str(&pl, "free_bytes");
	put_str(&pl, freebuf);
	if (slurm)
		job_slurm_probe(&pl);
	agent_ok(a, id, pl.buf, pl.len);
	sb_release(&pl);
	free(full);
	free(path);
	return 0;
}

