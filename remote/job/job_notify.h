/* [notify] command on the host: run once a job has ended, by the
 * supervisor that recorded its end, so it runs with the laptop shut.
 * Called after the job's GPUs are let go, so a slow command never holds
 * one. */
#ifndef GR_JOB_NOTIFY_H
#define GR_JOB_NOTIFY_H

/* Seconds the command may run when GPURUN_NOTIFY_TIMEOUT (1-86400)
 * does not say otherwise; then its whole process group is killed. */
#define JOB_NOTIFY_TIMEOUT_S 60
/* Bytes of its output kept in .gpurun/notify.log per run. */
#define JOB_NOTIFY_LOG_MAX (64 * 1024)

/* For the ended job in folder dir: when its spec has a notify_command,
 * run it as `/bin/sh -c CMD` in dir, in a session of its own, stdin
 * /dev/null, with the environment the caller has plus GPURUN_JOB_ID,
 * _NAME, _STATE (what status shows), _EXIT (the exit code gpurun would
 * exit with; empty when none), _DURATION (whole seconds from creation to
 * end; empty when unknown), _DIR and _GROUP; the job's values reach it
 * only through the environment. Its stdout and stderr are appended to
 * .gpurun/notify.log (at most JOB_NOTIFY_LOG_MAX bytes), then one line
 * with how it ended: "[gpurun] notify command: exit N", "... killed
 * after N s" or "... could not run: WHY". Waits at most the time limit
 * (and a moment to reap it); reports nothing to the caller. */
void job_notify_end(const char *dir);

#endif
