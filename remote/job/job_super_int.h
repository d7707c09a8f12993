/* Inside the job supervisor (job_super.c, job_super_io.c), and for the
 * job house's model test: the supervisor's state, its signal pipe, and
 * the writers of the job's log and status. Not for other modules: they
 * use job_super.h. */
#ifndef GR_JOB_SUPER_INT_H
#define GR_JOB_SUPER_INT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "job_container.h"
#include "job_steps.h"
#include "job_store.h"
#include "sig_wake.h"

struct job_sup_mode; /* job_super.h */

struct sup {
	const char *dir, *id, *project;
	struct job_spec spec;
	int log_fd;
	const struct job_sup_mode *mode;
	const char *status_extra; /* the mode's: more lines for the status */
	struct job_ctr ctr; /* the job's container (job_container.h) */
	int has_ctr;
	int setup_ran;      /* setup ran in this job, and succeeded */
	uint64_t created_ms;
	/* issue 33 */
	const char *end;    /* how it ended, when not by its status alone:
			       "timeout" (its time limit) or "cancelled" (what it
			       waited for failed); NULL */
	char *end_reason;   /* why, one line (the status's reason) */
	unsigned tries;     /* runs of the command so far */
};

/* SIGCHLD and SIGTERM wake sup_nap and the step loop (sig_wake.h); a
 * SIGTERM is remembered (sig_wake_caught). */
extern struct sig_wake sup_wake;
uint64_t sup_wall_ms(void);
/* Sleep up to ms, waking early on a signal. */
void sup_nap(int ms);
/* SIGTERM came, or `gpurun stop` marked the job stopped. */
int sup_stop_asked(struct sup *s);

/* Output the log could not take (a full disk): said in the log once there
 * is room, else in the status as log_lost=N. One count per process. */
extern uint64_t sup_log_lost;
/* Append to the job's log; what a full disk refuses is counted. */
void sup_log_write(int log_fd, const char *buf, size_t n);
/* A line of gpurun's own in the job's log. */
void sup_note(struct sup *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A container's terminal (-t) turns each \n into \r\n: undo that, so a
 * log reads the same inside a container as outside (a lone \r stays).
 * *cr: a \r ended the last piece. The bytes put in out (up to n + 1). */
size_t sup_crlf_undo(int *cr, const char *in, size_t n, char *out);
/* A \r held back by the CRLF undoing of a container's terminal, out now. */
void sup_flush_cr(int *cr, int log_fd);
/* Copy what a step wrote to the log: from its pty (cr: undo a container
 * terminal's \r\n), or from its pipe, a line gathered up to 2 ms. 0
 * while open, 1 once every writer closed it. */
int sup_pump(int master, int log_fd, int *cr);
/* A line that reaches the pipe in pieces waits this long (in all) for
 * its end before it goes to the log: python without a buffer
 * (PYTHONUNBUFFERED) writes print(a, b) as "a", " ", "b", "\n", and
 * each write to the log wakes the agent, which then gathers for 5 ms
 * (agent_job_log.c): one write per line keeps a line's latency. */
#define PIPE_GATHER_US 2000
int sup_pump_pipe(int fd, int log_fd);

/* Take, at the start, the block the end's status may need on a full disk. */
void sup_status_room_take(const char *dir);
/* Record the job's end (exit status, step reached); on a full disk waits
 * for room up to sup_status_wait_ms (a week; the model test sets 0),
 * holding the job's lock, so the job reads running meanwhile, not lost. */
extern uint64_t sup_status_wait_ms;
void sup_write_status(struct sup *s, int status, enum job_step step);

/* Before the command (job_super_wait.c). Each returns 0 to go on, else
 * the wait status to end with (s->end set when it is not a stop). */
/* [train]'s --after: wait until the job it names has ended (with 0 for
 * ID:ok); a dependency that fails or is gone ends this one cancelled. */
int sup_wait_after(struct sup *s);
/* Its wait, for the job whose folder is other (id other_id; want_ok:
 * ID:ok); the job house's model test calls it directly. */
int sup_wait_job(struct sup *s, const char *other, const char *other_id, int want_ok);
/* GPUs for spec, in the box's line (job_queue.h): the job is "queued"
 * meanwhile, its place and what it waits for in the log and in
 * .gpurun/queued. On 0: *gpus, *restrict_, the lock fds. */
int sup_take_gpus(struct sup *s, const char *spec, char **gpus, int *restrict_, int **fds,
		  size_t *nfds);
/* .gpurun/queued: why the job waits (NULL: it no longer does). */
void sup_set_queued(struct sup *s, const char *why);

#endif
