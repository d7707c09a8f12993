/* What `--json` writes besides strings (those go through json_strn,
 * common/util.h, the one string writer): times as RFC 3339, and the
 * NDJSON event stream of `train --json` and `logs -f --json` on stdout,
 * one object a line, the job's log cut into `log` events. The schema is
 * the README's, "Output, colour and scripting". */
#ifndef GR_JSON_OUT_H
#define GR_JSON_OUT_H

#include <stddef.h>
#include <stdint.h>

#include "util.h"

/* "2026-11-27T19:49:17.561Z": a Unix ms time in UTC, into buf (at least
 * JSON_TIME_MAX bytes). */
#define JSON_TIME_MAX 32
const char *json_time(uint64_t ms, char *buf, size_t n);
/* json_time as a JSON string, or null for 0 (unknown, not yet). */
void json_add_time(struct strbuf *o, uint64_t ms);

/* An event: o is reset to `{"event": "EVENT", "time": "<now>"`; add
 * `, "key": value` pairs, then jev_emit closes it and writes the line
 * to stdout whole. 0, or -1 with errno (stdout is gone). */
void jev_begin(struct strbuf *o, const char *event);
int jev_emit(struct strbuf *o);

/* The log as `log` events: {"line": TEXT, "end": HOW}, HOW being "lf"
 * (a newline ended it; a \r\n too, the \r dropped), "cr" (a carriage
 * return alone: a progress bar redrawing its line, which the next line
 * replaces on a terminal), "cut" (JSON_LOG_MAX bytes without an end: the
 * line goes on in the next event; never cut inside a UTF-8 character)
 * or "eof" (the log ended, or we stopped following, mid-line). A line
 * carries at most JSON_LOG_MAX bytes of the log. */
#define JSON_LOG_MAX 16384
struct json_log {
	struct strbuf line;   /* the line so far, without its end */
	int cr;               /* its last byte was a \r (not yet known: \r\n?) */
	struct strbuf ev;
};
/* 0, or -1 with errno (stdout is gone). */
int json_log_feed(struct json_log *l, const void *p, size_t n);
/* What is held goes out as "eof" (or "cr"). 0 or -1 as above. */
int json_log_finish(struct json_log *l);
void json_log_release(struct json_log *l);

#endif
