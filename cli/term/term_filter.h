/* Bytes from the host on the user's terminal. The host is not trusted
 * with the laptop, and a terminal obeys what it is sent: OSC 52 writes the
 * clipboard, OSC 0 the window title, DCS and friends talk to the terminal
 * itself. Two tools:
 *
 * - A streaming filter for logs and remote output, with `less -R` as the
 *   reference: text, UTF-8, \t \n \r \b, SGR colour (CSI ... m) and the
 *   cursor-movement and erase-line CSI sequences progress bars use
 *   (CSI n A/B/C/D/E/F/G, CSI n K) pass; OSC, DCS, SOS, PM, APC (content
 *   and all), every other escape sequence, C0 and C1 controls and DEL are
 *   dropped; bytes that are not UTF-8 become U+FFFD. Its state carries
 *   across chunks, so a sequence split between two LOG_DATA frames is
 *   judged whole. It never holds more than TF_SEQ_MAX bytes.
 * - An escape for one-line strings (job states, GPU names, the agent's
 *   messages): control bytes, bytes that are not UTF-8, C1 controls and
 *   the bidi overrides show as \xNN, so nothing can move the cursor, fake
 *   a line or reorder the text.
 *
 * Used only on a terminal: in a pipe or file the bytes pass unchanged. */
#ifndef GR_TERM_FILTER_H
#define GR_TERM_FILTER_H

#include <stddef.h>

#include "util.h"

#define TF_SEQ_MAX 64 /* longest CSI kept whole; longer ones are dropped */

struct term_filter {
	int state;
	unsigned char seq[TF_SEQ_MAX]; /* the pending CSI or UTF-8 sequence */
	size_t nseq;
	int need;                      /* UTF-8 continuation bytes still due */
};

void tf_init(struct term_filter *f);
/* Append the safe form of p[0..n) to out (a sequence not yet complete is
 * held in f until the bytes that end it arrive). */
void tf_feed(struct term_filter *f, const void *p, size_t n, struct strbuf *out);
/* The stream ended: a partial UTF-8 character becomes U+FFFD, a partial
 * escape sequence is dropped; f is ready for a new stream. */
void tf_finish(struct term_filter *f, struct strbuf *out);

/* Write p[0..n) to fd through f when f is not NULL, else unchanged.
 * Returns write_full's result. */
int tf_write(struct term_filter *f, int fd, const void *p, size_t n);

/* The length of the valid UTF-8 character (U+0080 or above) starting
 * the NUL-terminated s, or 0 when s does not start with one. */
size_t u8_char_len(const char *s);

/* Append s escaped for one line of a terminal (see above). */
void ts_add(struct strbuf *sb, const char *s);
/* s escaped, in one of 8 rotating buffers: valid until 8 more calls, for
 * printf arguments (`fprintf(stderr, "%s %s\n", ts(a), ts(b))`). Returns
 * s itself when it needs no escaping. Single-threaded callers only. */
const char *ts(const char *s);

#endif
