/* Which job a request names (agent_job_find.c); agent_job.h hands it on
 * to the request files. */
#ifndef GR_AGENT_JOB_FIND_H
#define GR_AGENT_JOB_FIND_H

#include "agent.h"

/* The folder holding a project's jobs (the project given as the client
 * wrote it): named after the project folder and a hash of its real path.
 * Returns a new string. */
char *job_root(const char *project);

/* Read "str project, str id" and find the job's folder (*dir, new). */
int agent_find_job(struct gr_rd *rd, char **dir, struct gr_err *err);

#endif
