/* A job's record from its folder, and the jobs of a root: the layer
 * between the store (job_store.h: meta files, spec, ids) and what reads
 * records (the job requests, house-keeping, pull, the backends' stops).
 * Building a record asks the job's backend for its live part
 * (job_backend.h: state). */
#ifndef GR_JOB_RECORD_H
#define GR_JOB_RECORD_H

#include <stdint.h>

#include "job_proto.h"
#include "job_store.h"

#define JOB_LOAD_DU 1 /* fill disk_bytes (walks a running job's folder) */

/* Fill r from the job folder dir (id = its name): the meta files, then
 * what its backend says about its state. GR_ENOTFOUND when it is not a
 * job. r's strings are the caller's (job_rec_clear). */
int job_load(const char *dir, struct job_rec *r, unsigned flags, struct gr_err *err);

/* The state a job's recorded status (key=value lines, st) says by
 * itself, for the backends: "timeout" ([train] time_limit) or
 * "cancelled" (its --after job failed) as the supervisor wrote it in
 * end=, with its reason= into r->reason; else "done" or "failed" by r's
 * exit status. */
const char *job_status_state(const struct strvec *st, struct job_rec *r);

/* Bytes job folder dir holds alone (job_house.h: disk use). ended: cache
 * the answer there. */
uint64_t job_du(const char *dir, int ended);

/* Ids of the jobs under root, newest first (by creation time, then id). */
void job_list_ids(const char *root, struct strvec *ids);

/* Resolve want ("" = latest, an id, a job's name: its newest job with
 * that name, or a unique prefix of an id) to an id. *id is the caller's.
 * GR_ENOTFOUND / GR_EINVAL (ambiguous) with err set. */
int job_resolve(const char *root, const char *want, char **id, struct gr_err *err);

#endif
