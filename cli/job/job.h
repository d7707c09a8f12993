/* The face of cli/job/ to the commands: the client half of the job
 * requests (job_client.h), how a job looks on screen (job_show.h),
 * following one (job_attach.h), exec (remote_exec.h), the train spec
 * (train_spec.h) and two jobs' snapshots compared (job_snapdiff.h). */
#ifndef GR_JOB_H
#define GR_JOB_H

#include "job_client.h"
#include "job_show.h"
#include "job_attach.h"
#include "remote_exec.h"
#include "train_spec.h"
#include "job_snapdiff.h"

#endif
