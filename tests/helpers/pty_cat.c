/* Benchmark helper: the kernel's pty alone, as the job supervisor uses it
 * (remote/job/job_super.c: forkpty with the same raw termios, a
 * non-blocking master read in 64 KiB pieces). Runs `cat FILE` under the
 * pty and copies what it writes to stdout: the floor under any log that
 * goes through a pty, with no network and no log file in the way.
 *   pty_cat FILE */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <stdio.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "util.h"

int main(int argc, char **argv)
{
	struct termios tio = { 0 };
	struct winsize ws = { .ws_row = 50, .ws_col = 200 };
	static char buf[65536];
	int master, status = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: pty_cat FILE\n");
		return 2;
	}
	tio.c_cflag = CS8 | CREAD; /* raw: what the supervisor sets */
	tio.c_cc[VMIN] = 1;
	cfsetispeed(&tio, B38400);
	cfsetospeed(&tio, B38400);
	pid_t pid = forkpty(&master, NULL, &tio, &ws);
	if (pid < 0) {
		perror("forkpty");
		return 1;
	}
	if (pid == 0) {
		execlp("cat", "cat", argv[1], (char *)NULL);
		_exit(127);
	}
	fcntl(master, F_SETFL, O_NONBLOCK);
	for (;;) {
		ssize_t n = read(master, buf, sizeof(buf));
		if (n > 0) {
			if (write_full(1, buf, (size_t)n) < 0)
				return 1;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = { master, POLLIN, 0 };
			poll(&p, 1, -1);
			continue;
		}
		break; /* EIO: cat is gone */
	}
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
