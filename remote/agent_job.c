/* Job and artifact requests (0x40-0x6f): not written yet. */
#include "agent.h"

const struct agent_handler agent_job_handlers[] = {
	{ 0, NULL, NULL },
};

int agent_job_main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return -1; /* not one of ours */
}
