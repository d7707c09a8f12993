/* The test harness of kernels/ (a standalone copy of tests/unit/t.h's
 * conventions): each case prints "ok - NAME", "not ok - NAME" or
 * "skip - NAME (skipped: WHY)" on stdout, diagnostics go to stderr, and
 * the project-wide runner counts the lines. */
#ifndef KERNELS_T_H
#define KERNELS_T_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shared by every test file; exactly one defines them (T_DEFINE_STATE). */
extern int t_failed_cases, t_case_failed;
extern const char *t_skip_why;
#define T_DEFINE_STATE int t_failed_cases, t_case_failed; const char *t_skip_why

#define CHECK(cond) do { if (!(cond)) { \
	fprintf(stderr, "  %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
	t_case_failed = 1; } } while (0)
#define CHECK_EQ_INT(a, b) do { long long t_a_ = (long long)(a), t_b_ = (long long)(b); \
	if (t_a_ != t_b_) { fprintf(stderr, "  %s:%d: %s == %lld, expected %lld\n", \
		__FILE__, __LINE__, #a, t_a_, t_b_); t_case_failed = 1; } } while (0)
/* The message must contain the substring. */
#define CHECK_HAS(msg, sub) do { const char *t_m_ = (msg), *t_s_ = (sub); \
	if (!strstr(t_m_, t_s_)) { fprintf(stderr, "  %s:%d: message \"%s\" lacks \"%s\"\n", \
		__FILE__, __LINE__, t_m_, t_s_); t_case_failed = 1; } } while (0)
/* Inside a case: mark it skipped with a reason and return. */
#define SKIP(why) do { t_skip_why = (why); return; } while (0)

#define RUN(fn) do { t_case_failed = 0; t_skip_why = NULL; \
	fprintf(stderr, "# %s\n", #fn); fn(); \
	if (t_skip_why) printf("skip - %s (skipped: %s)\n", #fn, t_skip_why); \
	else if (t_case_failed) { printf("not ok - %s\n", #fn); t_failed_cases++; } \
	else { printf("ok - %s\n", #fn); } \
	fflush(stdout); fflush(stderr); } while (0)

#endif
