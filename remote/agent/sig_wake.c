/* The signal self-pipe (see sig_wake.h): one for the agent's loop and the
 * supervisor's, which were two copies of the same dozen lines. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "sig_wake.h"

static int wake_pipe[2] = { -1, -1 };

int sig_wake_open(void)
{
	return pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK);
}

void sig_wake(void)
{
	int e = errno;

	if (write(wake_pipe[1], "w", 1) < 0) {
		/* the pipe is full: a wake-up is pending already */
	}
	errno = e;
}

int sig_wake_fd(void)
{
	return wake_pipe[0];
}

void sig_wake_drain(void)
{
	char buf[64];

	while (read(wake_pipe[0], buf, sizeof(buf)) > 0)
		;
}
