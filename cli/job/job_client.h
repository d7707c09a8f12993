/* The client side of the job requests (common/proto/job_proto.h): start, list,
 * status, stop, GPU report; the local cache of recent jobs that shell
 * completion reads (.gpurun/jobs). How a job looks on screen is
 * job_show.h. Functions return 0 or a GR_E* code with err set. */
#ifndef GR_JOB_CLIENT_H
#define GR_JOB_CLIENT_H

#include <stdint.h>
#include <stdio.h>

#include "ctx.h"
#include "job_proto.h"

/* The JOB_START spec (job_proto.h, JOB_SPEC_KEYS) for this project's
 * configuration: pairs appended to spec (v[2i] key, v[2i+1] value).
 * force_setup: run [setup] command even if nothing changed. */
void job_spec_from_config(const struct gr_config *cfg, int force_setup, struct strvec *spec);

/* Start a job in project (the [remote] path) from spec. *id is the
 * caller's; *others (NULL: not wanted) gets the project's other jobs that
 * are not over, the caller's to job_recs_free; *warn the host's warning
 * about the start (NULL: none), the caller's to show and free. */
int job_start(struct gr_conn *c, const char *project, const struct strvec *spec, char **id,
	      struct job_rec **others, size_t *nothers, char **warn, struct gr_err *err);
/* job_start, given up at once (GR_ECANCEL) when intr_fd is readable.
 * follow_id (NULL: not wanted): the host is asked to follow the new job's
 * log under the start's request id (JOB_START_FOLLOW), which goes here:
 * its frames (as JOB_LOG's) wait on the connection for job_attach
 * (attach_opts.log_id). */
int job_start_intr(struct gr_conn *c, const char *project, const struct strvec *spec, char **id,
		   struct job_rec **others, size_t *nothers, int intr_fd, char **warn,
		   uint32_t *follow_id, struct gr_err *err);

/* train's start (train_start.c): job_start, answering SIGINT, SIGTERM and
 * SIGHUP at once while the host starts the job: GR_ECANCEL, err saying
 * that the host goes on starting it (gpurun detached) and how to find it.
 * On success SIGINT, SIGTERM and SIGHUP are left blocked (one caught
 * meanwhile pending again), for job_attach to unblock. */
int job_start_train(struct gr_ctx *ctx, const struct strvec *spec, char **id,
		    struct job_rec **others, size_t *nothers, char **warn, uint32_t *follow_id);

/* 0 when id has the shape gpurun's agent makes (job_id_ok); else
 * GR_EPROTO with err naming the host as the source of the bad id. Every id
 * the host sends passes here before it is used in a path, the cache or a
 * message. */
int job_id_check(const char *id, struct gr_err *err);
/* The checks a record from the host must pass: its id, its name (empty
 * or job_name_ok) and its commit and diff hash (hex). */
int job_rec_check(const struct job_rec *r, struct gr_err *err);

/* Jobs newest first (id NULL or "" = all, limit 0 = all) and the host's
 * GPU report, asked for together (one round trip: `gpurun status`).
 * *recs (the caller's to job_recs_free) and g (job_gpus_free) are the
 * caller's to free whatever the result. disk_total (may be NULL): bytes
 * the project's jobs hold on the host in all. */
struct job_gpus;
struct job_list_ask {
	const char *project, *id;  /* id NULL or "": all */
	uint32_t limit;
	uint32_t list_id, gpus_id; /* set once the two requests are sent */
};
/* A conn_opts.early hook (arg: a job_list_ask): the two requests go
 * inside the command that starts the agent, so their answers follow its
 * HELLO (a round trip less; ctx_connect_early). Not called: they are
 * sent on the open connection when asked. */
void job_list_ask_early(void *arg, struct gr_conn *c, struct strbuf *frames);
int job_list_gpus(struct gr_conn *c, struct job_list_ask *a, struct job_rec **recs, size_t *n,
		  uint64_t *disk_total, struct job_gpus *g, struct gr_err *err);
/* The same two requests, their answers' payloads appended to list and
 * gpus as they came (a pool's probe hands them to its parent). */
int job_list_gpus_raw(struct gr_conn *c, struct job_list_ask *a, struct strbuf *list,
		      struct strbuf *gpus, struct gr_err *err);
/* Parse a JOB_LIST answer; every record checked. *recs is the caller's. */
int job_list_parse(const void *p, size_t len, struct job_rec **recs, size_t *n,
		   uint64_t *disk_total, struct gr_err *err);
void job_recs_free(struct job_rec *recs, size_t n);
/* One job ("" or NULL = the latest; a unique prefix works too). */
int job_status(struct gr_conn *c, const char *project, const char *id,
	       struct job_rec *r, struct gr_err *err);

struct job_stop_report {
	struct job_rec rec;
	uint32_t nterm;
	int killed;              /* SIGKILL was needed */
	struct strvec survivors; /* "PID COMM" */
	struct strvec gpu_holders; /* "PID GPU" */
	struct strvec ctr_stopped; /* containers stopped and removed */
	struct strvec ctr_left;    /* containers still there */
	char *ctr_err;           /* the runtime did not answer: why */
};
void job_stop_report_free(struct job_stop_report *s);
/* Send STOP and read its answer (stop_parse: for a reply already read). */
int job_stop(struct gr_conn *c, const char *project, const char *id, int grace_s,
	     struct job_stop_report *s, struct gr_err *err);
void job_stop_payload(struct strbuf *pl, const char *project, const char *id, int grace_s);
int job_stop_parse(const void *p, size_t n, struct job_stop_report *s, struct gr_err *err);

/* Removal (JOB_RM, JOB_PRUNE): what each job became. */
struct job_rm_item {
	char *id;     /* as asked (rm) or removed (prune) */
	int removed;
	char *why;    /* rm: the full id when removed, else why not */
	uint64_t bytes;
};
struct job_rm_report {
	struct job_rm_item *v;
	size_t n;
	uint64_t freed;  /* in all, the shared store's included */
	uint32_t kept;   /* prune: jobs left */
};
void job_rm_report_free(struct job_rm_report *r);
int job_rm(struct gr_conn *c, const char *project, const struct strvec *ids,
	   struct job_rm_report *r, struct gr_err *err);
/* keep 0 / older_s 0: no such limit. */
int job_prune(struct gr_conn *c, const char *project, uint32_t keep, uint64_t older_s,
	      int dry_run, struct job_rm_report *r, struct gr_err *err);

/* What a job's command would find through shell (JOB_ENV): pairs
 * appended to kv (v[2i] key, v[2i+1] value). */
int job_env(struct gr_conn *c, const char *project, const char *shell, struct strvec *kv,
	    struct gr_err *err);
/* PROBE: what the host offers a job (project folder path, with slurm the
 * cluster's part too), as name/value pairs pushed onto kv in turn: cc,
 * make, nvcc, nvidia-smi (their paths or ""), path, path_exists,
 * free_bytes, and sbatch, squeue, slurm_partitions, slurm_error. 0, or a
 * GR_E* code with err set (GR_EPROTO: a malformed answer). */
int job_probe(struct gr_conn *c, const char *path, int slurm, struct strvec *kv,
	      struct gr_err *err);
/* CONTAINER_CHECK: what a job's container would get on the host (runtime
 * auto/podman/docker, image), as key/value pairs (job_container.h). */
int job_container_check(struct gr_conn *c, const char *project, const char *runtime,
			const char *image, struct strvec *kv, struct gr_err *err);

struct job_gpu {
	uint32_t index, util;
	uint64_t mem_used, mem_total;
	char *uuid, *name, *locked_by;
};
struct job_gpu_app {
	uint32_t pid;
	uint64_t mem;
	char *gpu_uuid, *name, *job;
};
struct job_gpus {
	int have_smi;
	char *error;
	struct job_gpu *gpus;
	size_t ngpus;
	struct job_gpu_app *apps;
	size_t napps;
	uint32_t queued;        /* jobs of every account waiting in the box's line */
};
void job_gpus_payload(struct strbuf *pl, const char *project);
int job_gpus_parse(const void *p, size_t n, struct job_gpus *g, struct gr_err *err);
void job_gpus_free(struct job_gpus *g);

/* Record recs in <root>/.gpurun/jobs ("ID\tSTATE\tSTART_UNIX[\tNAME]",
 * newest first, at most 200 lines): entries are added or updated, others kept.
 * Best effort: a failure is silent (it is only a cache). */
void job_cache_update(const char *root, const struct job_rec *recs, size_t n);
/* Drop ids (removed from the host) from the cache. */
void job_cache_forget(const char *root, const struct strvec *ids);

/* For commands: connect, and turn "no such job" into a helpful error. */
int job_ctx_status(struct gr_ctx *ctx, const char *id, struct job_rec *r);

/* Every job of project, newest first (JOB_LIST without GPUs). */
int job_list_all(struct gr_conn *c, const char *project, struct job_rec **recs, size_t *n,
		 struct gr_err *err);

/* What a command's JOB argument names (job_pick.c): "" or NULL the latest
 * job, an id or a unique prefix that job, a name its newest job; a word
 * of a name's shape that names no job, every job of the sweep of that
 * group (train --sweep, the record's group), newest first. An exact name
 * wins over a group of the same name. Connects first. 0, or a GR_E* code
 * with ctx->err set (GR_ENOTFOUND: no such job or group). */
struct job_pick {
	struct job_rec *recs; /* one job, or the group's (job_pick_free) */
	size_t n;
	char *group;          /* the argument, when it named a group; else NULL */
};
int job_pick(struct gr_ctx *ctx, const char *want, struct job_pick *p);
/* The same among all (a job list, newest first), for a word of a name's
 * shape: the records picked are moved out of all (left zeroed there). */
int job_pick_in(struct job_rec *all, size_t n, const char *want, struct job_pick *p,
		struct gr_err *err);
void job_pick_free(struct job_pick *p);

#endif
