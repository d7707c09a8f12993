/* Log bytes and status lines that never split each other (see log_out.h).
 * A line boundary is after a newline; on a terminal also after a carriage
 * return (a progress bar redrawing itself): the status line then erases
 * the bar's text, and the bar redraws below it. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log_out.h"

void log_out_init(struct log_out *lo, int fd)
{
	memset(lo, 0, sizeof(*lo));
	lo->fd = fd;
	lo->err_tty = isatty(fd) && isatty(2);
}

void log_out_release(struct log_out *lo)
{
	sb_release(&lo->held);
}

static void emit_held(struct log_out *lo)
{
	if (!lo->held.len)
		return;
	if (lo->after_cr && lo->err_tty && write_full(2, "\033[K", 3) < 0) {
		/* stderr is gone: nothing to tell */
	}
	if (write_full(2, lo->held.buf, lo->held.len) < 0) {
		/* likewise */
	}
	sb_reset(&lo->held);
}

/* Where in p[0..n) the first line boundary ends (index after it), or 0. */
static size_t first_boundary(const struct log_out *lo, const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] == '\n' || (p[i] == '\r' && lo->err_tty && (i + 1 == n || p[i + 1] != '\n')))
			return i + 1;
	return 0;
}

static void note_end(struct log_out *lo, const char *p, size_t n)
{
	if (!n)
		return;
	lo->mid_line = p[n - 1] != '\n';
	lo->after_cr = p[n - 1] == '\r';
}

int log_out_write(struct log_out *lo, const void *data, size_t n)
{
	const char *p = data;
	size_t cut;

	if (lo->held.len && (cut = first_boundary(lo, p, n)) > 0) {
		if (write_full(lo->fd, p, cut) < 0)
			return -1;
		note_end(lo, p, cut);
		emit_held(lo);
		p += cut;
		n -= cut;
	}
	if (n && write_full(lo->fd, p, n) < 0)
		return -1;
	note_end(lo, p, n);
	return 0;
}

void log_out_notice(struct log_out *lo, const char *fmt, ...)
{
	va_list ap;

	sb_adds(&lo->held, "gpurun: ");
	va_start(ap, fmt);
	sb_vaddf(&lo->held, fmt, ap);
	va_end(ap);
	sb_adds(&lo->held, "\n");
	if (!lo->mid_line || (lo->after_cr && lo->err_tty))
		emit_held(lo);
}

void log_out_break(struct log_out *lo)
{
	if (lo->mid_line && write_full(2, "\n", 1) < 0) {
		/* stderr is gone */
	}
	lo->mid_line = lo->after_cr = 0;
}

void log_out_flush(struct log_out *lo)
{
	/* On a shared terminal, what gpurun says next starts a line too. */
	if (!lo->held.len && !lo->err_tty)
		return;
	log_out_break(lo);
	emit_held(lo);
}
