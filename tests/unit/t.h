/* A tiny unit-test harness: one binary per tests/unit/test_*.c, each case
 * prints "ok - NAME", "not ok - NAME" or "skip - NAME (skipped: WHY)";
 * tests/run.sh counts those lines. Header-only on purpose. */
#ifndef GR_T_H
#define GR_T_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_failed_cases, t_case_failed;
static const char *t_skip_why;

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
	t_case_failed = 1; } } while (0)
#define CHECK_EQ_INT(a, b) do { long long t_a_ = (long long)(a), t_b_ = (long long)(b); \
	if (t_a_ != t_b_) { fprintf(stderr, "  %s:%d: %s == %lld, expected %lld\n", \
		__FILE__, __LINE__, #a, t_a_, t_b_); t_case_failed = 1; } } while (0)
#define CHECK_STR(a, b) do { const char *t_a_ = (a), *t_b_ = (b); \
	if (!t_a_ || !t_b_ || strcmp(t_a_, t_b_)) { \
		fprintf(stderr, "  %s:%d: %s == \"%s\", expected \"%s\"\n", __FILE__, __LINE__, \
			#a, t_a_ ? t_a_ : "(null)", t_b_ ? t_b_ : "(null)"); t_case_failed = 1; } } while (0)
/* Inside a case: mark it skipped with a reason and return. */
#define SKIP(why) do { t_skip_why = (why); return; } while (0)

#define RUN(fn) do { t_case_failed = 0; t_skip_why = NULL; fn(); \
	if (t_skip_why) { printf("skip - %s (skipped: %s)\n", #fn, t_skip_why); } \
	else if (t_case_failed) { printf("not ok - %s\n", #fn); t_failed_cases++; } \
	else { printf("ok - %s\n", #fn); } \
	fflush(stdout); } while (0)

#define T_DONE() (t_failed_cases ? 1 : 0)

#endif
