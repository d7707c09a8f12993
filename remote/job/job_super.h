/* The steps a job's supervisor runs (job_super.c), for the backends
 * (job_backend.h): the local backend runs them all on the host; the
 * Slurm backend runs setup and build on the login node and hands the job
 * to sbatch there, or runs them in the job's allocation, then the
 * command (through srun for several tasks). The supervisor writes what
 * the steps print to the job's log and its end to .gpurun/status. */
#ifndef GR_JOB_SUPER_H
#define GR_JOB_SUPER_H

#include "job_store.h"

struct job_sup_mode {
	int setup_build;     /* run [setup] (when it must) and [build] here */
	int run;             /* then the command here; else hand_on */
	int take_gpus;       /* choose GPUs with gpurun's locks (local);
				else the scheduler chose them */
	/* When run is 0: hand the job on (submit it), writing notes to the
	 * log through log_fd. Returns 0 when handed on (the supervisor then
	 * ends without a status: the job goes on elsewhere), else the wait
	 * status to record. */
	int (*hand_on)(const char *dir, const struct job_spec *spec, int log_fd);
	/* argv put before the command's (srun ... for several tasks). */
	const struct strvec *launcher;
	const char *gpus_shown;   /* the `run` file's gpus when take_gpus is 0 */
	const char *ctr_gpus;     /* host GPU indices a container gets when
				     take_gpus is 0 (Slurm's SLURM_JOB_GPUS);
				     NULL: not restricted */
	const struct strvec *ctr_env; /* more K=V a container gets (by name:
					 they are in our environment) */
	const char *status_extra; /* more key=value lines for .gpurun/status */
	const char *cmd_prefix;   /* shell lines put before the run step's
				     command when it goes through the shell
				     (not argv, not a container); NULL: none */
};

/* Run the job in dir as mode says. lockfd: the job's flock'ed lock, held
 * until the end (-1: none); readyfd: gets "ok\n" once the job's files are
 * read, or why not (-1: errors go to stderr). Returns 0 (the job's end is
 * in its status), or 1 when the job's folder cannot be used. */
int job_supervise_mode(const char *dir, int lockfd, int readyfd, const struct job_sup_mode *mode);

/* `gpurun-agent supervise DIR LOCKFD READYFD`: the local backend's. */
int job_supervise(int argc, char **argv);

#endif
