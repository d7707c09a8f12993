/* The sync manifest code is shared with the agent and lives in remote/ (the
 * agent is built from remote/, the client from cli/): compiled in here once. */
#include "sync_manifest.c"
