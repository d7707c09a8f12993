/* Sync requests (0x20-0x3f): not written yet. */
#include "agent.h"

const struct agent_handler agent_sync_handlers[] = {
	{ 0, NULL, NULL },
};
