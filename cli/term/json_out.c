/* Times and NDJSON events for --json (see json_out.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "json_out.h"

const char *json_time(uint64_t ms, char *buf, size_t n)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char day[24];

	if (!gmtime_r(&s, &tm) || !strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm))
		snprintf(day, sizeof(day), "1970-01-01T00:00:00");
	snprintf(buf, n, "%s.%03uZ", day, (unsigned)(ms % 1000));
	return buf;
}

void json_add_time(struct strbuf *o, uint64_t ms)
{
	char t[JSON_TIME_MAX];

	if (!ms) {
		sb_adds(o, "null");
		return;
	}
	sb_addf(o, "\"%s\"", json_time(ms, t, sizeof(t)));
}

void jev_begin(struct strbuf *o, const char *event)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	sb_reset(o);
	sb_adds(o, "{\"event\": ");
	json_str(o, event);
	sb_adds(o, ", \"time\": ");
	json_add_time(o, (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000);
}

int jev_emit(struct strbuf *o)
{
	sb_adds(o, "}\n");
	/* stdio's buffer first: nothing else of ours is on stdout, but keep
	 * the order if something ever is. */
	fflush(stdout);
	return write_full(1, o->buf, o->len);
}

/* One log event of the first n bytes held, then those bytes dropped. */
static int log_event(struct json_log *l, size_t n, const char *end)
{
	jev_begin(&l->ev, "log");
	sb_adds(&l->ev, ", \"line\": ");
	json_strn(&l->ev, l->line.buf ? l->line.buf : "", n);
	sb_addf(&l->ev, ", \"end\": \"%s\"", end);
	memmove(l->line.buf, l->line.buf + n, l->line.len - n);
	l->line.len -= n;
	l->line.buf[l->line.len] = '\0';
	return jev_emit(&l->ev);
}

/* Where to cut a line of JSON_LOG_MAX bytes: before a UTF-8 character
 * that the cut would split. */
static size_t cut_at(const struct json_log *l)
{
	const unsigned char *p = (const unsigned char *)l->line.buf;
	size_t n = JSON_LOG_MAX, lead = n;

	for (size_t k = 1; k <= 3 && (p[n - k] & 0xc0) == 0x80; k++)
		lead = n - k - 1;
	if (lead < n && p[lead] >= 0xc0) {
		size_t need = p[lead] >= 0xf0 ? 4 : p[lead] >= 0xe0 ? 3 : 2;
		if (lead + need > n && utf8_len(p + lead, l->line.len - lead) == need)
			return lead;
	} else if (p[n - 1] >= 0xc0 && utf8_len(p + n - 1, l->line.len - (n - 1)))
		return n - 1;
	return n;
}

/* The line ends (how: end): what is held goes out, cut where longer. */
static int line_end(struct json_log *l, const char *end)
{
	while (l->line.len > JSON_LOG_MAX)
		if (log_event(l, cut_at(l), "cut") < 0)
			return -1;
	return log_event(l, l->line.len, end);
}

int json_log_feed(struct json_log *l, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		if (l->cr) {
			l->cr = 0;
			if (b[i] == '\n') {
				if (line_end(l, "lf") < 0)
					return -1;
				continue;
			}
			if (line_end(l, "cr") < 0)
				return -1;
		}
		if (b[i] == '\n') {
			if (line_end(l, "lf") < 0)
				return -1;
			continue;
		}
		if (b[i] == '\r') {
			l->cr = 1;
			continue;
		}
		/* A run of ordinary bytes at once. */
		size_t j = i;
		while (j < n && b[j] != '\n' && b[j] != '\r')
			j++;
		sb_add(&l->line, b + i, j - i);
		i = j - 1;
		/* Cut once the character across the cut is whole here. */
		while (l->line.len >= JSON_LOG_MAX + 4)
			if (log_event(l, cut_at(l), "cut") < 0)
				return -1;
	}
	return 0;
}

int json_log_finish(struct json_log *l)
{
	int rc = 0;

	if (l->cr || l->line.len)
		rc = line_end(l, l->cr ? "cr" : "eof");
	l->cr = 0;
	return rc;
}

void json_log_release(struct json_log *l)
{
	sb_release(&l->line);
	sb_release(&l->ev);
}
