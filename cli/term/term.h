/* The local terminal's modes for what gpurun does on it: raw for a remote
 * pty (`exec -t`, `shell`), one key at a time without echo for the
 * train prompt, and no "^C" echo while a log streams. One saved state,
 * restored on every path: by the caller, and at exit as a last resort. */
#ifndef GR_TERM_H
#define GR_TERM_H

#include "term_filter.h"
#include "log_out.h"
#include "sync_progress.h"
#include "json_out.h"

enum term_mode {
	TERM_RAW,      /* as ssh -t: no echo, no line editing, no signals from
			  keys, no output processing; bytes go through as typed */
	TERM_KEY,      /* single keys: no echo, no line editing, no signals from
			  keys (Ctrl-C arrives as 0x03); output processed as usual */
	TERM_NO_ECHOCTL, /* as it was, but a Ctrl-C is not echoed as "^C" */
};

/* Is fd a terminal whose foreground process group is ours? (Changing the
 * modes of a terminal we are in the background of would stop us.) */
int term_is_ours(int fd);

/* Put fd (a terminal of ours) in mode, remembering the modes it had the
 * first time (term_restore goes back to those). 0, or -1 when fd is not
 * our terminal or the modes cannot be set (nothing changed then). */
int term_set(int fd, enum term_mode mode);

/* Back to the modes term_set first saw; discard_input also throws away
 * what was typed and not read (so no key reaches the shell). Idempotent,
 * async-signal-safe; a no-op when nothing was changed. */
void term_restore(int discard_input);

/* The window size of the first of fds 0, 1, 2 that is a terminal: 0 and
 * rows/cols set, or -1. */
int term_size(unsigned *rows, unsigned *cols);

#endif
