/* The agent's delta applier (remote/sync_apply.c: bounded COPY and
 * LITERAL, copy_file_range, block hashes kept where blocks stayed in
 * place) applies pull deltas on the client too (art_delta.c): compiled in
 * here once. */
#include "sync_apply.c"
