/* The client's one signal self-pipe (see sig_wake.h). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "sig_wake.h"

static volatile sig_atomic_t wake_fd = -1;

static void on_signal(int sig)
{
	int e = errno;
	unsigned char c = (unsigned char)sig;

	if (write(wake_fd, &c, 1) < 0) {
		/* full: the loop will see an earlier byte */
	}
	errno = e;
}

int sig_wake_start(struct sig_wake *w, const int *sigs, size_t n)
{
	struct sigaction sa = { 0 };

	w->n = 0;
	if (n > SIG_WAKE_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (pipe2(w->fd, O_CLOEXEC | O_NONBLOCK) < 0)
		return -1;
	wake_fd = w->fd[1];
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < n; i++) {
		w->sigs[i] = sigs[i];
		sigaction(sigs[i], &sa, &w->old[i]);
	}
	w->n = n;
	return 0;
}

int sig_wake_next(struct sig_wake *w)
{
	unsigned char c;

	return read(w->fd[0], &c, 1) == 1 ? c : 0;
}

void sig_wake_stop(struct sig_wake *w)
{
	for (size_t i = 0; i < w->n; i++)
		sigaction(w->sigs[i], &w->old[i], NULL);
	w->n = 0;
	wake_fd = -1;
	close(w->fd[0]);
	close(w->fd[1]);
	w->fd[0] = w->fd[1] = -1;
}
