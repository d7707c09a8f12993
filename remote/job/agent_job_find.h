/* Which job a request names (agent_job_find.c); agent_job.h hands it on
 * to the request files. */
#ifndef GR_AGENT_JOB_FIND_H
#define GR_AGENT_JOB_FIND_H

#include "agent.h"

/* The folder holding every project's jobs on this host: [remote] jobs_dir
 * as HELLO said (~ is the home folder), else agent_cache_dir()/jobs. A
 * relative one is refused, and so is one (or a folder above it) that
 * another account could change (safe_dir.h): they would own the jobs.
 * *out new; 0 or GR_EINVAL. Nothing is created. */
int job_base(char **out, struct gr_err *err);

/* The folder holding a project's jobs (the project given as the client
 * wrote it), in job_base(): named after the project folder and a hash of
 * its real path. *out new; 0, or job_base's error. */
int job_root(const char *project, char **out, struct gr_err *err);

/* Read "str project, str id" and find the job's folder (*dir, new). */
int agent_find_job(struct gr_rd *rd, char **dir, struct gr_err *err);

#endif
