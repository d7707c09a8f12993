/* Shared by the agent's job request files (agent_job.c, agent_job_house.c). */
#ifndef GR_AGENT_JOB_H
#define GR_AGENT_JOB_H

#include "agent.h"

/* The folder holding a project's jobs (the project given as the client
 * wrote it): named after the project folder and a hash of its real path.
 * Returns a new string. */
char *job_root(const char *project);

/* Handlers in agent_job_house.c. */
int agent_job_rm(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);
int agent_job_prune(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);
int agent_job_env(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);
/* In agent_container.c. */
int agent_ctr_check(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);

#endif
