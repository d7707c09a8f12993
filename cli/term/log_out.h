/* A job's log on its way to the terminal, and gpurun's own status lines
 * (pulls, reconnects) beside it: the log goes to its fd as it comes, and a
 * status line goes to stderr only where the log is at the start of a
 * line, so it never splits one; until then it is held. */
#ifndef GR_LOG_OUT_H
#define GR_LOG_OUT_H

#include <stddef.h>

#include "util.h"

struct log_out {
	int fd;             /* the log's destination */
	int mid_line;       /* the log's last byte was not a newline */
	int after_cr;       /* ... it was a carriage return (a progress bar) */
	int err_tty;        /* the log and stderr are terminals: a line ending in \r
			       may be erased */
	struct strbuf held; /* status lines waiting for a line boundary */
};

void log_out_init(struct log_out *lo, int fd);
void log_out_release(struct log_out *lo);

/* Write log bytes; held status lines go out at the first line boundary
 * in them. 0, or -1 with errno set (the log's fd failed). */
int log_out_write(struct log_out *lo, const void *p, size_t n);

/* A status line ("gpurun: " is prepended, a newline appended): now, if
 * the log is at a line boundary, else held. */
void log_out_notice(struct log_out *lo, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Make room on the terminal for something that cannot wait (a prompt):
 * ends the log's current line on stderr if it is mid-line. */
void log_out_break(struct log_out *lo);

/* The end: held status lines go out now, after a line break if the log
 * stopped mid-line (on a terminal shared with stderr, a line break in any
 * case, so that what follows starts a line). */
void log_out_flush(struct log_out *lo);

#endif
