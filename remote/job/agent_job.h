/* The agent's job requests: their table, the agent binary's job modes,
 * and what the request files share (agent_job_find.c: which job a request
 * names). The face of remote/job/ to remote/main.c and remote/pull/. */
#ifndef GR_AGENT_JOB_H
#define GR_AGENT_JOB_H

#include "agent.h"

/* job_root, agent_find_job. */
#include "agent_job_find.h"
#include "job_store.h"
#include "job_record.h"
#include "job_steps.h"
#include "job_glob.h"
#include "job_snap.h"

/* JOB_LOG, in agent_job_log.c. */
int agent_job_log(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);

/* Handlers in agent_job_house.c. */
int agent_job_rm(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);
int agent_job_prune(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);
int agent_job_env(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);
/* In agent_container.c. */
int agent_ctr_check(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);
/* PROBE, in agent_probe.c. */
int agent_job_probe(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);

/* In agent_job_snap.c: rerun and diff. job_rerun_spec turns a JOB_START
 * spec naming rerun_of (and maybe name) into that job's spec, *from its
 * folder (new), whose snapshot the new job gets (job_snaplist.h). */
int agent_job_snap_list(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);
int agent_job_snap_read(struct agent *a, uint32_t rid, struct gr_rd *rd, struct gr_err *err);
int job_rerun_spec(const char *project, struct job_spec *spec, char **from, struct gr_err *err);

/* The job requests, and the other modes of the agent binary (the job
 * supervisor, the reaper): the exit status, or -1 when argv names none. */
extern const struct agent_handler agent_job_handlers[];
int agent_job_main(int argc, char **argv);

#endif
