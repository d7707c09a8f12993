/* The host's tools: where a program is (PATH, then CUDA's usual home,
 * which is rarely on a non-login PATH). */
#ifndef GR_RUN_H
#define GR_RUN_H

#include "util.h"

/* The program's full path (new string), or NULL when it is not found. */
char *run_which(const char *prog);

#endif
