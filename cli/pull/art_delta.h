/* Pull by delta, the client's half (PROTOCOL.md, ART_PULL: deltas). A
 * large file the pull will bring has a basis here: the copy in
 * runs/<job>/ (the same job pulled again), else the newest copy of that
 * path in another job's runs/ folder (a later run of the same script).
 * One plan round asks the agent which files it would send (skipped when
 * there is no basis anywhere); for each with a basis the client uploads
 * the librsync signature of the basis (ART_SIG, in pieces), and the agent
 * answers with a delta entry, which is applied here against the basis
 * with its output capped at the size the host announced and checked
 * against the host's content hash before it takes the file's name. */
#ifndef GR_ART_DELTA_H
#define GR_ART_DELTA_H

#include <stdint.h>
#include <sys/stat.h>

#include "ctx.h"

struct archive;
struct archive_entry;
struct art_limits;

/* A file with a basis the agent has a signature of. */
struct art_basis {
	char *path;          /* relative, in runs/<job>/ */
	char *from;          /* the basis, for messages */
	int fd;              /* the basis, open for reading */
	uint64_t target;     /* the host's size, as planned */
	struct stat st;      /* the basis when its signature was made */
	uint32_t block;      /* the signature's block length */
	uint8_t *leaves;     /* its block hashes at that length (NULL: not kept) */
	uint32_t *weak;      /* and its weak sums (kept with leaves) */
	uint32_t index;      /* its signature's on the host */
	int used;            /* a delta entry came for it */
};

struct art_delta {
	char token[17];      /* names this pull's staged signatures */
	struct art_basis *v; /* sorted by path */
	size_t n;
	char *sigdir;        /* absolute: .gpurun/pull-sigs (art_sigcache.h) */
};
void art_delta_free(struct art_delta *d);

/* Before a pull into dest: if a file it may bring has a basis, ask the
 * agent for its plan (req: the ART_PULL payload up to its flags) and
 * upload the bases' signatures. d gets the files that may come as deltas
 * (none if anything failed but the connection). have_big: a file of
 * JOB_DELTA_MIN or more is in dest. 0, or GR_ESSH / GR_EIO when the
 * connection failed (err set). */
int art_delta_prepare(struct gr_conn *c, const struct strbuf *req, const char *project,
		      const char *id, const char *dest, int have_big, struct art_delta *d,
		      struct gr_err *err);

/* The full-strength librsync signature of b's basis (b->fd, b->st),
 * cut in blocks of b->block (the length the host's file of b->target
 * bytes has: sm_block_len), so the host finds blocks that stayed in
 * place by their hashes alone (sync_delta.c). Taken from sigdir's cache
 * when it has that version of the basis (sigdir may be NULL), else read
 * and hashed. Appended to sig; the block hashes and weak sums into
 * b->leaves and b->weak (freed by art_delta_free). 1 if it came from the
 * cache, 0 if it was made, -1 if the basis could not be read whole. */
int art_delta_sign(struct art_basis *b, const char *sigdir, struct strbuf *sig);

/* The total of the planned sizes of the files in d (for the free-space
 * check: a delta's entry is smaller than what it writes). */
uint64_t art_delta_targets(const struct art_delta *d);
/* How many of d's files came as deltas (after a pull that ended well:
 * each delta entry marks its basis used). */
uint32_t art_delta_used(const struct art_delta *d);

/* Extract a delta entry (its GR_ART_DELTA_XATTR value in value) for final,
 * relative to the working folder, size: the entry's size. 0 when written
 * and renamed into place; GR_EPROTO for an entry the client did not ask
 * for, a malformed or overlong delta, or a result whose hash is not the
 * host's (then the file stays as it was, and the next pull fetches it
 * whole); GR_EIO on a disk error or a stream cut short. */
int art_delta_entry(struct archive *in, struct archive_entry *e, const char *final,
		    int64_t size, const char *value, struct art_limits *lim, struct gr_err *err);

#endif
