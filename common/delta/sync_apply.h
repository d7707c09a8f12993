/* Applying a librsync delta on the agent without copying through user
 * space: the delta stream (librsync's format: magic, LITERAL and COPY
 * commands, END) is parsed here, COPY becomes copy_file_range from the old
 * file into the temp file, LITERAL a write. Blocks the delta copied in
 * place keep their hashes from the version's cached block hashes
 * (.gpurun/sync-leaves/<hash>), so only what changed is hashed again.
 * rs_patch stays the reference: the unit tests check both agree. */
#ifndef GR_SYNC_APPLY_H
#define GR_SYNC_APPLY_H

#include <stdint.h>
#include <stddef.h>

#include "sync_manifest.h"

/* Large files (at least this big) keep their block hashes on the host. */
#define SYNC_LEAVES_MIN (1u << 20)

/* Called now and then during long work here (copying, hashing a large
 * file): the agent sets its keepalive; NULL elsewhere (the unit tests). */
extern void (*sync_apply_busy)(void);

struct dapply {
	int basefd, outfd;
	uint64_t base_size, max_out, out;
	int state, done;
	uint8_t op, par[16];
	size_t need, have;
	uint64_t lit_left;
	struct { uint64_t off, len; } *same; /* output ranges copied in place */
	size_t nsame, asame;
	char err[160];
	int errnum;      /* errno of a failed read or write, 0 for a bad delta */
};

void dapply_init(struct dapply *d, int basefd, uint64_t base_size, int outfd, uint64_t max_out);
/* Feed delta bytes; -1 with d->err set on a malformed delta or I/O error. */
int dapply_feed(struct dapply *d, const uint8_t *p, size_t n);
void dapply_release(struct dapply *d);

/* The block hashes of the file fd (size bytes) into leaves: blocks whose
 * hash is known (reuse[k]) are taken from known, the others read and
 * hashed, on two threads for large files. -1 with errno on a read error. */
int sync_hash_blocks(int fd, uint64_t size, const uint8_t *known, const uint8_t *reuse,
		     uint8_t *leaves);

/* Which blocks of the output a delta left in place, given the base's size:
 * reuse[k] = 1 when block k lies in one same-offset COPY and has the same
 * length in both versions. */
void dapply_reusable(const struct dapply *d, uint64_t size, uint8_t *reuse);
/* The same for blocks of b bytes in both versions (the old version's
 * block hashes were made at that length). */
void dapply_reusable_at(const struct dapply *d, uint64_t size, uint32_t b, uint8_t *reuse);

/* The cached block hashes of a version (statefd: the .gpurun folder).
 * Returns a new array of *n hashes, or NULL. */
uint8_t *sync_leaves_load(int statefd, const uint8_t hash[SM_HASH_LEN], uint64_t size);
void sync_leaves_save(int statefd, const uint8_t hash[SM_HASH_LEN], const uint8_t *leaves,
		      uint64_t n);
/* Remove cached block hashes of versions the manifest no longer holds. */
void sync_leaves_gc(int statefd, const struct sm_list *man);
/* The same with the hex hashes to keep (sorted here, in place). */
void sync_leaves_gc_want(int statefd, struct strvec *want);

#endif
