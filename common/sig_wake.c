/* The one signal self-pipe of both binaries (see sig_wake.h). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "compat.h"
#include "sig_wake.h"

static struct sig_wake *volatile current;

static void on_signal(int sig)
{
	int e = errno;
	struct sig_wake *w = current;
	unsigned char c = (unsigned char)sig;

	if (!w)
		return;
	for (size_t i = 0; i < w->n; i++)
		if (w->sigs[i] == sig)
			w->caught[i] = 1;
	if (write(w->fd[1], &c, 1) < 0) {
		/* full: the loop will see an earlier byte */
	}
	errno = e;
}

int sig_wake_start(struct sig_wake *w, const int *sigs, size_t n, int flags)
{
	struct sigaction sa = { 0 };

	w->n = 0;
	if (n > SIG_WAKE_MAX) {
		errno = EINVAL;
		return -1;
	}
	if (compat_pipe_cloexec(w->fd, 1) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		w->sigs[i] = sigs[i];
		w->caught[i] = 0;
	}
	w->n = n;
	current = w;
	sa.sa_handler = on_signal;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < n; i++)
		sigaction(sigs[i], &sa, &w->old[i]);
	return 0;
}

int sig_wake_next(struct sig_wake *w)
{
	unsigned char c;

	return read(w->fd[0], &c, 1) == 1 ? c : 0;
}

void sig_wake_drain(struct sig_wake *w)
{
	char buf[64];

	while (read(w->fd[0], buf, sizeof(buf)) > 0)
		;
}

int sig_wake_caught(const struct sig_wake *w, int sig)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->sigs[i] == sig)
			return w->caught[i];
	return 0;
}

void sig_wake_stop(struct sig_wake *w)
{
	for (size_t i = 0; i < w->n; i++)
		sigaction(w->sigs[i], &w->old[i], NULL);
	w->n = 0;
	current = NULL;
	close(w->fd[0]);
	close(w->fd[1]);
	w->fd[0] = w->fd[1] = -1;
}
