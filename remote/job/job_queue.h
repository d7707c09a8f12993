/* The line for GPUs on one box, across accounts (issue 33). A job that
 * must wait for GPUs takes a ticket: a file queue-<id> in its user's GPU
 * lock folder (job_gpu.c: <base>/gpurun-locks-<uid>, seen by every
 * account), flock'ed by its supervisor while it waits, and holding what
 * it waits for (a count, or indices). Its place is the file's ctime,
 * which the kernel sets and no user can move back; ties go by uid, then
 * name. A ticket whose flock is gone (its supervisor died) is nobody's.
 *
 * The rule: a job may try for GPUs only when no earlier live ticket
 * stands in its way. A count stands in everyone's way (first come, first
 * served: a job that needs 2 GPUs is not passed by a stream of 1-GPU
 * jobs); a list of indices stands in the way of a list that shares one,
 * and a later count leaves those indices alone (avoid).
 *
 * No polling: a waiting job sleeps until the ticket in its way goes (an
 * inotify watch on that one file), or, at the head, until a GPU lock is
 * let go (watches on the lock folders), or its own folder changes
 * (`gpurun stop`), with a long timeout as a safety net. So one job's end
 * wakes the few it concerns, not every waiter. Past the user's inotify
 * instances (128 by default) a waiter looks each second instead, at one
 * file or the locks' few. Blocking; the supervisor's. */
#ifndef GR_JOB_QUEUE_H
#define GR_JOB_QUEUE_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "err.h"

struct gpu_queue {
	int fd;                 /* the ticket, flock'ed; -1: none */
	char name[48];          /* queue-<id>, in this user's lock folder */
	struct timespec at;     /* its ctime: the place in line */
};

struct gpu_queue_turn {
	int go;                 /* nothing earlier stands in the way: try */
	size_t place;           /* 1 + the live tickets before this one */
	char *behind;           /* !go: "job ID" or "job ID (USER)" in the way */
	char *behind_wants;     /* and what it waits for ("2", "0,1") */
	char *watch;            /* !go: that ticket's path, to wait on */
	uint32_t avoid[64];     /* indices earlier lists wait for */
	size_t navoid;
};

/* Take a ticket for job_id waiting for spec (a count or indices). 0, or
 * a GR_E* code with err set (the lock folder cannot be used). */
int gpu_queue_join(struct gpu_queue *q, const char *job_id, const char *spec,
		   struct gr_err *err);
/* Where the ticket stands now. */
void gpu_queue_turn(const struct gpu_queue *q, const char *spec, struct gpu_queue_turn *t);
void gpu_queue_turn_free(struct gpu_queue_turn *t);
/* What the GPU locks look like now (who holds which): a new string, to
 * compare after a failed try, so the wait does not miss a lock let go
 * between the try and the watch. */
char *gpu_queue_locks_seen(void);
/* Sleep up to ms, until what t says to wait for changes (go: the GPU
 * locks differ from seen; else the ticket in the way is gone), meta_dir
 * (the job's .gpurun) changes, or wake_fd is readable. */
void gpu_queue_wait(const struct gpu_queue_turn *t, const char *seen, const char *meta_dir,
		    int wake_fd, int ms);
/* Let the ticket go (the job got its GPUs, or gave up). */
void gpu_queue_leave(struct gpu_queue *q);

/* For status: job_id's place in its box's line (this user's ticket), 0
 * when it holds no live one. One scan of the folders serves every call
 * within 500 ms. */
size_t gpu_queue_place(const char *job_id);
/* How many jobs, of every account, wait in the box's line now (a pool's
 * client picks the box with the shortest). */
size_t gpu_queue_waiting(void);

#endif
