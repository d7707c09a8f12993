/* The steps of a job, whichever backend runs them (job_backend.h):
 *   setup  [setup] command, in the project folder, where its results
 *          (a .venv, a conda env) stay: it runs when its command, the
 *          shell or the content of its inputs changed since it last
 *          succeeded, one job of the project at a time;
 *   build  [build] command, in the job's own folder (its snapshot), so two
 *          jobs never build in the same folder;
 *   run    [train] command, in the job's folder.
 * Each step runs through the same shell (JOB_SPEC "shell"): "sh" is
 * /bin/sh -c; "login" is the user's login shell as a login, interactive
 * shell (-l -i -c), so ~/.profile and ~/.bashrc apply (conda init, a venv
 * activated there), as VS Code's remote does to find the environment. */
#ifndef GR_JOB_STEPS_H
#define GR_JOB_STEPS_H

#include "job_store.h"

enum job_step { JOB_STEP_SETUP, JOB_STEP_BUILD, JOB_STEP_RUN };

extern const char *const job_step_names[]; /* "setup", "build", "run" */

/* The user's login shell: $SHELL if absolute, else the passwd entry's,
 * else /bin/sh. */
const char *job_login_shell(void);

/* The argv that runs cmd through shell mode ("sh" or "login"), appended
 * to argv: the one place a step's command line is made on the host. In a
 * container, job_ctr_run_argv() (job_container.h) makes it instead. */
void job_step_argv(const char *shell, const char *cmd, struct strvec *argv);

/* The argv that runs args (train -- CMD ARGS) as they are, never
 * re-split: execvp'd directly with "sh"; with "login" through the login
 * shell, which sets up the environment and then `exec "$@"`s them. */
void job_step_exec_argv(const char *shell, const struct strvec *args, struct strvec *argv);

/* 1 if shell is a mode job_step_argv knows. */
int job_shell_valid(const char *shell);

/* JOB_SPEC "output": where a step's stdout and stderr go. "pty" (the
 * default, also ""): the step's terminal, so programs line-buffer and
 * draw progress bars as on a console; the kernel's pty moves about 4 KiB
 * a wakeup (30-125 MB/s here). "pipe": one pipe for both, in the order
 * written (~1 GB/s); the pty stays the step's controlling terminal, so
 * /dev/tty and job control work as before. 1 if output is one of them. */
int job_output_valid(const char *output);
int job_output_pipe(const char *output);

/* What a step's environment gains with output = pipe, unless the
 * spec's env (K=V words) already sets the name: PYTHONUNBUFFERED=1, so
 * python writes each line as it is done, as it does on a terminal.
 * Appends K=V words to out (which may be env itself); nothing for a
 * pty. */
void job_output_env(const char *output, const struct strvec *env, struct strvec *out);

/* The key that decides whether setup must run again: BLAKE2b of the shell
 * mode, the command, the container image and runtime (if any) and, for
 * each input (a path or glob relative to the
 * project folder; sorted matches), its path and content; a missing input
 * counts as missing. Hex in out. */
void job_setup_key(const char *project, const struct job_spec *s, char out[65]);

/* The project's setup lock (<project>/.gpurun/setup.lock): an fd holding
 * a flock, -1 with err set, or -2 when stopped() said to give up. Waits
 * while another job holds it: `waiting` (if set) is called once with that
 * job's id (or ""), stopped (if set) every half second. */
int job_setup_lock(const char *project, const char *job_id,
		   void (*waiting)(void *arg, const char *holder), int (*stopped)(void *arg),
		   void *arg, struct gr_err *err);
void job_setup_unlock(int fd);

/* The stamp of the last setup that succeeded in project ("" if none);
 * *out is the caller's. */
char *job_setup_stamp(const char *project);
int job_setup_stamp_write(const char *project, const char *key, struct gr_err *err);

#endif
