/* Large files on the client: a librsync delta against the signature of the
 * version the host holds (or the whole file), zstd-compressed, and the
 * full-strength signature of the version sent, for the cache.
 *
 * The delta takes a short cut librsync cannot: the cached signature has
 * full 32-byte strong sums, which are exactly the content hash's block
 * hashes, so blocks that did not move are found by comparing hashes we
 * already have (no rolling checksum over them, no second read); only the
 * blocks that differ go through librsync's rolling search (rs_delta_begin,
 * rs_job_iter), and the result is one valid librsync delta stream the
 * agent applies with rs_patch_begin. */
#ifndef GR_SYNC_DELTA_H
#define GR_SYNC_DELTA_H

#include <stdint.h>
#include <zstd.h>

#include "sync_manifest.h"

/* A parsed librsync signature (RS_RK_BLAKE2_SIG_MAGIC). */
struct sync_sig {
	uint32_t magic, block, strong;
	uint64_t n;               /* blocks */
	const uint8_t *data;      /* n * (4 + strong): weak (BE) then strong sum */
	const void *raw;
	size_t rawlen;
};
/* 0, or -1 if it is not a signature we can use. Points into p. */
int sync_sig_parse(const void *p, size_t n, struct sync_sig *s);

/* Build a full-strength signature from weak sums and block hashes. */
void sync_sig_build(struct strbuf *out, uint32_t block, uint64_t n,
		    const uint32_t *weak, const uint8_t *leaves);

/* Makes a file's full-strength signature (and content hash) from its
 * bytes in order, for files that are read anyway (tar, whole). */
struct sigmaker {
	uint64_t size, done, nb, k;
	uint32_t block, part_len;
	uint32_t *weak;
	uint8_t *leaves, *part;
	const uint8_t *given;  /* block hashes known already: only weak sums made */
	void (*fp)(uint8_t *out, const void *p, size_t n); /* sigmaker_fps */
	size_t fp_len;
	uint8_t *fps;          /* each block's fingerprint, when fp is set */
};
/* given: the file's block hashes if known (not copied, must outlive m). */
void sigmaker_init(struct sigmaker *m, uint64_t size, const uint8_t *given);
/* Also make each block's fingerprint with fp (fp_len bytes, at most 64)
 * into m->fps (the caller's sync_known for the next hashing). */
void sigmaker_fps(struct sigmaker *m, void (*fp)(uint8_t *out, const void *p, size_t n),
		  size_t fp_len);
void sigmaker_update(struct sigmaker *m, const void *p, size_t n);
/* The signature into sig (if not NULL), the content hash into hash. */
void sigmaker_final(struct sigmaker *m, struct strbuf *sig, uint8_t hash[SM_HASH_LEN]);
void sigmaker_release(struct sigmaker *m);

/* Where compressed bytes go; non-zero stops the send. */
typedef int (*sync_sink)(void *arg, const void *p, size_t n);

struct sync_send {
	int fd;                      /* the file, open for reading (the caller's) */
	const char *name;            /* its path, for messages */
	uint64_t size;               /* as planned */
	const uint8_t *hash;         /* content hash as planned */
	const uint8_t *leaves;       /* its block hashes if known, else NULL */
	const struct sync_sig *old;  /* the host version's signature; NULL: whole */
	sync_sink sink;
	void *arg;
};

struct sync_send_res {
	int declined;       /* a delta would not shrink it: nothing was sent */
	uint64_t literal;   /* bytes sent as literals (whole: the size) */
	uint64_t matched;   /* bytes the host copies from its version */
	uint64_t zbytes;    /* compressed bytes given to the sink */
	struct strbuf sig;  /* full-strength signature of the version sent */
	int (*progress)(void *arg, uint64_t bytes); /* optional, set by caller */
	void *parg;
};

/* Send one file as a delta (in->old set) or whole. GR_ECONFLICT if the
 * file no longer matches the plan (changed meanwhile; then nothing has
 * been given to the sink if it was found before the first byte). */
int sync_send_file(const struct sync_send *in, struct sync_send_res *out,
		   struct gr_err *err);

/* Feed n bytes (end: ZSTD_e_continue or ZSTD_e_end) through z, handing
 * each piece of output (staged in buf) to emit; 0, or -1 if zstd or emit
 * failed. (The tar stream uses it too.) */
int sync_zstd_feed(ZSTD_CCtx *z, const void *p, size_t n, ZSTD_EndDirective end,
		   uint8_t *buf, size_t bufsz, int (*emit)(void *arg, const void *p, size_t n),
		   void *arg);

/* A zstd frame of raw (stored) blocks, for data that does not compress.
 * Any zstd reader takes it, and the bytes are copied once, by emit,
 * instead of through zstd's input and output buffers and the caller's
 * (a 2 GiB first sync made three extra copies of it at zstd's fastest
 * level). zraw_begin writes the frame's header, zraw_put the data in
 * blocks of up to 128 KiB, zraw_end the empty last block. Each returns 0,
 * or -1 if emit failed. */
struct zraw {
	int (*emit)(void *arg, const void *p, size_t n);
	void *arg;
};
int zraw_begin(const struct zraw *r);
int zraw_put(const struct zraw *r, const void *p, size_t n);
int zraw_end(const struct zraw *r);

#endif
