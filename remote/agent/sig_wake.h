/* A signal's wake-up for a poll loop (the self-pipe trick): a handler
 * writes a byte, the loop polls the read end and drains it. The agent's
 * loop is woken so by SIGCHLD, the job supervisor's by SIGCHLD and
 * SIGTERM; each is its own process, so one pipe a process. */
#ifndef GR_SIG_WAKE_H
#define GR_SIG_WAKE_H

/* Make the pipe (non-blocking, close-on-exec). 0, or -1 with errno. */
int sig_wake_open(void);
/* From a signal handler (async-signal-safe; errno kept): wake the loop.
 * A full pipe has a wake-up pending already. */
void sig_wake(void);
/* The end to poll for POLLIN. */
int sig_wake_fd(void);
/* Read every pending wake-up. */
void sig_wake_drain(void);

#endif
