/* gpurun-agent: the only program that touches the host's filesystem and
 * processes on gpurun's behalf. `serve` speaks the framed protocol
 * (proto.h) on stdin/stdout and answers the request tables listed here;
 * the other modes (the job supervisor, the reaper) run a job
 * (agent_job.h), so one upload carries everything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "agent_hash.h"
#include "agent_job.h"
#include "job_pack.h"
#include "sync_agent.h"

static const struct agent_handler *const tables[] = {
	agent_core_handlers, agent_exec_handlers, agent_sync_handlers,
	agent_job_handlers, agent_pull_handlers, NULL,
};

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "serve")) {
		/* Tell the bootstrap script's reader that frames start now. */
		static const char ready[] = "GPURUN-AGENT " GR_AGENT_HASH "\n";
		if (write_full(1, ready, sizeof(ready) - 1) < 0)
			return 1;
		return agent_serve(tables, argc >= 3 ? argv[2] : NULL);
	}
	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		printf("gpurun-agent %s (protocol %d)\n", GR_AGENT_HASH, GR_PROTO_VERSION);
		return 0;
	}
	if (argc >= 2) {
		int rc = agent_job_main(argc, argv);
		if (rc >= 0)
			return rc;
	}
	fprintf(stderr, "usage: gpurun-agent serve [REQUESTS-IN-HEX]\n"
		"gpurun-agent is started by gpurun over ssh; it is not meant to be run by hand\n");
	return 2;
}
