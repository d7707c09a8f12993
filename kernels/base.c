/* Error buffer, RNG helpers, clock and checked number parsing for the
 * kernels/ trainer (see base.h). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "banned.h"

int k_exit_code(int err)
{
	switch (err) {
	case K_OK: return EXIT_OK;
	case K_EUSAGE: return EXIT_USAGE;
	case K_ENONFINITE: return EXIT_NONFINITE;
	case K_ECUDA: return EXIT_CUDA;
	default: return EXIT_ERROR;
	}
}

static void kerr_vset(struct kerr *e, const char *fmt, va_list ap, const char *tail)
{
	size_t cap = sizeof(e->msg);
	int n = vsnprintf(e->msg, cap, fmt, ap);
	if (n < 0) {
		snprintf(e->msg, cap, "(error message could not be formatted)");
		return;
	}
	if (tail && (size_t)n < cap)
		n += snprintf(e->msg + n, cap - (size_t)n, ": %s", tail);
	if ((size_t)n >= cap)
		memcpy(e->msg + cap - 4, "...", 4);
}

int kerr_set(struct kerr *e, int code, const char *fmt, ...)
{
	va_list ap;
	if (!e)
		return code;
	va_start(ap, fmt);
	kerr_vset(e, fmt, ap, NULL);
	va_end(ap);
	return code;
}

int kerr_errno(struct kerr *e, int code, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;
	if (!e)
		return code;
	va_start(ap, fmt);
	kerr_vset(e, fmt, ap, strerror(saved));
	va_end(ap);
	return code;
}

uint32_t rng_below(uint64_t *s, uint32_t n)
{
	uint64_t m = (rng_next(s) >> 32) * (uint64_t)n;
	uint32_t low = (uint32_t)m;
	if (low < n) {
		uint32_t threshold = (uint32_t)(-n) % n;
		while (low < threshold) {
			m = (rng_next(s) >> 32) * (uint64_t)n;
			low = (uint32_t)m;
		}
	}
	return (uint32_t)(m >> 32);
}

double k_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t k_fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

int k_parse_long(const char *flag, const char *s, long lo, long hi, long *out,
		 struct kerr *e)
{
	char *end;
	long v;
	errno = 0;
	v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || errno == ERANGE)
		return kerr_set(e, K_EUSAGE, "%s: '%s' is not an integer", flag, s);
	if (v < lo || v > hi)
		return kerr_set(e, K_EUSAGE, "%s: %ld is out of range [%ld, %ld]",
				flag, v, lo, hi);
	*out = v;
	return 0;
}

int k_parse_u64(const char *flag, const char *s, uint64_t *out, struct kerr *e)
{
	char *end;
	unsigned long long v;
	if (*s == '-' || *s == '\0')
		return kerr_set(e, K_EUSAGE, "%s: '%s' is not a non-negative integer", flag, s);
	errno = 0;
	v = strtoull(s, &end, 0);
	if (*end != '\0' || errno == ERANGE)
		return kerr_set(e, K_EUSAGE, "%s: '%s' is not a non-negative integer", flag, s);
	*out = (uint64_t)v;
	return 0;
}

int k_parse_float(const char *flag, const char *s, double lo, double hi,
		  float *out, struct kerr *e)
{
	char *end;
	double v;
	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
		return kerr_set(e, K_EUSAGE, "%s: '%s' is not a finite number", flag, s);
	if (v < lo || v > hi)
		return kerr_set(e, K_EUSAGE, "%s: %g is out of range [%g, %g]", flag, v, lo, hi);
	*out = (float)v;
	return 0;
}
