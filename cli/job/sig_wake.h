/* A signal as a byte on a pipe (the self-pipe trick), so a poll loop
 * answers Ctrl-C, SIGTERM, SIGHUP or SIGWINCH at once instead of after
 * its timeout: train's start, the attach to a job and exec/shell each
 * catch their signals through one of these. One at a time per process:
 * the handler writes to the pipe of the one started last. */
#ifndef GR_SIG_WAKE_H
#define GR_SIG_WAKE_H

#include <signal.h>
#include <stddef.h>

#define SIG_WAKE_MAX 4

struct sig_wake {
	int fd[2];      /* fd[0]: poll it for POLLIN */
	size_t n;
	int sigs[SIG_WAKE_MAX];
	struct sigaction old[SIG_WAKE_MAX];
};

/* Make the pipe (non-blocking, close-on-exec) and catch sigs[0..n) (n at
 * most SIG_WAKE_MAX) into it: each signal caught writes its number as
 * one byte (none when the pipe is full: earlier bytes wait there). 0, or
 * -1 with errno when the pipe cannot be made (then nothing changed). */
int sig_wake_start(struct sig_wake *w, const int *sigs, size_t n);
/* The next signal caught, or 0 when none is waiting (never blocks). */
int sig_wake_next(struct sig_wake *w);
/* The old handlers back, the pipe closed (signals still in it are lost). */
void sig_wake_stop(struct sig_wake *w);

#endif
