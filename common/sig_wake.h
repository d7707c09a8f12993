/* A signal as a byte on a pipe (the self-pipe trick), so a poll loop
 * answers a signal at once instead of after its timeout: the client's
 * train start, attach and exec/shell catch Ctrl-C, SIGTERM, SIGHUP and
 * SIGWINCH so; the agent's loop and the job supervisor SIGCHLD (and the
 * supervisor SIGTERM). One at a time per process: the handler writes to
 * the pipe of the one started last. */
#ifndef GR_SIG_WAKE_H
#define GR_SIG_WAKE_H

#include <signal.h>
#include <stddef.h>

#define SIG_WAKE_MAX 4

struct sig_wake {
	int fd[2];      /* fd[0]: poll it for POLLIN */
	size_t n;
	int sigs[SIG_WAKE_MAX];
	volatile sig_atomic_t caught[SIG_WAKE_MAX]; /* sigs[i] came since the start */
	struct sigaction old[SIG_WAKE_MAX];
};

/* Make the pipe (non-blocking, close-on-exec) and catch sigs[0..n) (n at
 * most SIG_WAKE_MAX) into it, with sigaction's flags (the agent's SIGCHLD:
 * SA_RESTART | SA_NOCLDSTOP): each signal caught writes its number as
 * one byte (none when the pipe is full: earlier bytes wait there). 0, or
 * -1 with errno when the pipe cannot be made (then nothing changed). */
int sig_wake_start(struct sig_wake *w, const int *sigs, size_t n, int flags);
/* The next signal caught, or 0 when none is waiting (never blocks). */
int sig_wake_next(struct sig_wake *w);
/* Read every signal waiting (a loop that only needed waking). */
void sig_wake_drain(struct sig_wake *w);
/* Whether sig came since the start (whether or not it was read). */
int sig_wake_caught(const struct sig_wake *w, int sig);
/* The old handlers back, the pipe closed (signals still in it are lost). */
void sig_wake_stop(struct sig_wake *w);

#endif
