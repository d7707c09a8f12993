/* Terminal modes (see term.h), with one saved state so that whatever mode
 * gpurun put the terminal in, the user gets theirs back. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "term.h"

static struct termios saved;
static volatile sig_atomic_t saved_fd = -1;
static int atexit_done;

static void restore_at_exit(void)
{
	term_restore(0);
}

int term_is_ours(int fd)
{
	pid_t pg;

	if (!isatty(fd))
		return 0;
	pg = tcgetpgrp(fd);
	return pg > 0 && pg == getpgrp();
}

int term_set(int fd, enum term_mode mode)
{
	struct termios t;

	if (!term_is_ours(fd))
		return -1;
	if (saved_fd < 0) {
		if (tcgetattr(fd, &saved) < 0)
			return -1;
		saved_fd = fd;
		if (!atexit_done) {
			atexit(restore_at_exit);
			atexit_done = 1;
		}
	} else if (saved_fd != fd) {
		return -1;
	}
	t = saved;
	switch (mode) {
	case TERM_RAW:
		/* OpenSSH's enter_raw_mode: the remote pty does the work. */
		t.c_iflag |= IGNPAR;
		t.c_iflag &= ~(unsigned)(ISTRIP | INLCR | IGNCR | ICRNL | IXON | IXANY | IXOFF | IUCLC);
		t.c_lflag &= ~(unsigned)(ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHONL | IEXTEN);
		t.c_oflag &= ~(unsigned)OPOST;
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		break;
	case TERM_KEY:
		t.c_lflag &= ~(unsigned)(ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHONL | IEXTEN);
		t.c_cc[VMIN] = 1;
		t.c_cc[VTIME] = 0;
		break;
	case TERM_NO_ECHOCTL:
		t.c_lflag &= ~(unsigned)ECHOCTL;
		break;
	}
	if (tcsetattr(fd, TCSADRAIN, &t) < 0)
		return -1;
	return 0;
}

void term_restore(int discard_input)
{
	int fd = saved_fd, e = errno;

	if (fd < 0)
		return;
	if (discard_input)
		tcflush(fd, TCIFLUSH);
	tcsetattr(fd, TCSADRAIN, &saved);
	saved_fd = -1;
	errno = e;
}

int term_size(unsigned *rows, unsigned *cols)
{
	struct winsize ws;

	for (int fd = 0; fd <= 2; fd++)
		if (isatty(fd) && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
			*rows = ws.ws_row;
			*cols = ws.ws_col;
			return 0;
		}
	return -1;
}
