/* The sync manifest, its digest and the content hash, compiled into both
 * gpurun and the agent so the two sides agree byte for byte (common/delta/).
 * The manifest lists what
 * the remote project folder holds as far as gpurun knows: every file,
 * folder and symlink it sent, with mode, size, mtime and content hash. Its
 * digest is what a no-op sync compares in one round trip.
 *
 * Content hash: BLAKE2b-256 (libb2, librsync's own dependency) over a
 * tree: the file is cut into blocks of sm_block_len(size) bytes, each
 * block is hashed (BLAKE2b-256, which is also librsync's strong sum for
 * that block), and the root is BLAKE2b-256 of the block hashes followed by
 * the size (u64 LE). So a full-strength librsync signature of a version
 * determines its hash, and the blocks of a changed file that match the
 * old signature need no second pass. */
#ifndef GR_SYNC_MANIFEST_H
#define GR_SYNC_MANIFEST_H

#include <blake2.h>
#include <stdint.h>
#include <string.h>

#include "err.h"
#include "util.h"

#define SM_HASH_LEN 32

enum sm_type { SM_FILE = 1, SM_DIR = 2, SM_LINK = 3 };

/* What the agent saw after writing (not in the digest). The size it saw
 * is the entry's own (sm_host_size): the agent writes exactly that many
 * bytes, and a file it hashed again gets the size it hashed. */
struct sm_host {
	uint64_t ino;
	int64_t mtime_ns, ctime_ns;
};

/* 96 bytes, laid out without holes, the pointers and 64-bit fields
 * first: both sides hold a list of these for a tree, the client two when
 * it plans against what it last committed, so each byte here is a byte
 * (or two) a file of their peaks. What only one side needs shares one
 * place (the union): the agent's view of the file, the client's stat
 * identity and block hashes. */
struct sm_entry {
	char *path;        /* relative, '/'-separated (sm_path_ok) */
	char *link;        /* SM_LINK: target as stored; else NULL */
	uint64_t size;     /* SM_FILE */
	int64_t mtime_ns;  /* SM_FILE */
	uint8_t hash[SM_HASH_LEN]; /* SM_FILE: content hash */
	union {            /* each side's own, never in the description */
		struct sm_host host;          /* agent */
		struct {                      /* client */
			uint64_t dev, ino;    /* the local file the scan saw */
			uint8_t *leaves;      /* its block hashes when known (a big
						 file's), malloc'd; the sync frees them */
		};
	};
	uint32_t mode;     /* SM_FILE: permission bits (0777); else 0 */
	uint8_t type;      /* enum sm_type */
	uint8_t flags;     /* client-side state, never sent: SM_F_* */
};

/* The size the host's file had when the agent last described it (its
 * st_size): a file's size, a symlink's target length. */
static inline uint64_t sm_host_size(const struct sm_entry *e)
{
	return e->type == SM_LINK ? (e->link ? strlen(e->link) : 0) : e->size;
}

#define SM_F_UNHASHED 1 /* hash not computed yet (the client hashes what it must) */
#define SM_F_POOLED 4   /* path is in the list's pool (sm_add_pooled), not malloc'd */

struct sm_pool;
struct sm_list {
	struct sm_entry *e;
	size_t n, alloc;
	struct sm_pool *pool; /* paths of sm_add_pooled, freed with the list */
};

/* Append a copy of path (and link); returns the new entry, zeroed. */
struct sm_entry *sm_add(struct sm_list *l, const char *path, uint8_t type);
/* A copy of e's description (path, type, mode, size, mtime, hash, link)
 * at the end of l; each side's own fields (host, dev/ino/leaves) and the
 * flags are left zero, for the caller to copy what its side needs. */
struct sm_entry *sm_add_copy(struct sm_list *l, const struct sm_entry *e);
/* The same with path itself (malloc'd), which the list now owns. */
struct sm_entry *sm_add_take(struct sm_list *l, char *path, uint8_t type);
/* The same with path copied into the list's pool: no malloc header and
 * rounding for each path (17 bytes a path of 31). The entry is marked
 * SM_F_POOLED; it must stay in this list (or one the pool moves to). */
struct sm_entry *sm_add_pooled(struct sm_list *l, const char *path, uint8_t type);
/* Hand from's path pool to to (its entries may then move there). */
void sm_pool_move(struct sm_list *to, struct sm_list *from);
/* Room for more entries without growing (the memory is not touched);
 * give back what sm_add's doubling left unused. */
void sm_reserve(struct sm_list *l, size_t more);
void sm_shrink(struct sm_list *l);
void sm_entry_release(struct sm_entry *e);
void sm_list_free(struct sm_list *l);
/* Sort by path bytes (strcmp), the order scan_tree and the digest use. */
void sm_sort(struct sm_list *l);
/* Binary search in a sorted list; NULL if absent. */
struct sm_entry *sm_find(const struct sm_list *l, const char *path);
/* Same description (type, mode, size, mtime, hash, link)? */
int sm_same(const struct sm_entry *a, const struct sm_entry *b);

/* A manifest given an entry at a time, in order, whole or streamed:
 * each(src, fn, arg) calls fn(arg, e) for every entry; 0, or -1 if it
 * could not give them all (a damaged file: what it gave is not the
 * manifest). sm_list_each gives a list's (src: the list). */
typedef int (*sm_each_fn)(void *src, void (*fn)(void *arg, const struct sm_entry *e), void *arg);
int sm_list_each(void *src, void (*fn)(void *arg, const struct sm_entry *e), void *arg);

/* BLAKE2b-256 over the sorted list's descriptions. */
void sm_digest(const struct sm_list *l, uint8_t out[SM_HASH_LEN]);
/* The same an entry at a time (in list order): init, add each, final. */
struct sm_digest {
	blake2b_state s;
	struct strbuf b;
};
void sm_digest_init(struct sm_digest *d);
void sm_digest_add(struct sm_digest *d, const struct sm_entry *e);
void sm_digest_final(struct sm_digest *d, uint8_t out[SM_HASH_LEN]);

/* Serialise (with_host: also the host fields) / parse. sm_decode appends
 * to l and fails with GR_EPROTO on anything malformed or unsafe. */
void sm_encode(const struct sm_list *l, int with_host, struct strbuf *out);
/* The same, written to fd in pieces of 256 KiB (a manifest of 100k
 * entries is 12 MiB); 0, or -1 with errno set. */
int sm_encode_fd(const struct sm_list *l, int with_host, int fd);
/* The header sm_encode puts before count entries (each sm_put_entry). */
void sm_encode_head(struct strbuf *out, int with_host, uint32_t count);
/* The same an entry at a time, for a list that is never whole in memory
 * (the agent's manifest rewritten as a stream): entries in sorted order;
 * written in pieces of 256 KiB, the count put into the header at the end
 * (fd must be a file opened for writing at offset 0). finish: 0, or -1
 * with errno set (also for a write that failed earlier). */
struct sm_writer {
	int fd, with_host, failed;
	uint32_t n;
	struct strbuf b;
};
void sm_writer_init(struct sm_writer *w, int fd, int with_host);
void sm_writer_add(struct sm_writer *w, const struct sm_entry *e);
int sm_writer_finish(struct sm_writer *w);
int sm_decode(const void *p, size_t n, int with_host, struct sm_list *l,
	      struct gr_err *err);
/* sm_decode of what fd holds (read to its end), in pieces: the file is
 * never in memory whole beside the list it becomes. GR_EIO on a read
 * error, GR_EPROTO as sm_decode. */
int sm_decode_fd(int fd, int with_host, struct sm_list *l, struct gr_err *err);
/* The same without a list: each(arg, entry) for every entry, in order, as
 * it is read and checked (the entry is freed after). A damaged file may
 * be found damaged after some calls: the caller keeps what it made of
 * them only when this returns 0. */
int sm_decode_fd_each(int fd, int with_host,
		      void (*each)(void *arg, const struct sm_entry *e), void *arg,
		      struct gr_err *err);
/* The same pulled an entry at a time, for reading it in step with
 * another stream (the client's scan): open reads the header (0, or the
 * error, also in rc); next gives each entry in turn, checked, valid until
 * the next call, then NULL: at the end (rc 0), or once it is found
 * damaged (rc and err set). With into, each entry stays there instead
 * (sm_decode_fd), and none of them once it fails. fd stays the
 * caller's; close frees the rest. */
struct sm_reader {
	struct fwin w;
	struct sm_list own, *l;
	size_t first;
	uint32_t left;
	int with_host, rc, ended;
	struct gr_err *err;
};
int sm_reader_open(struct sm_reader *r, int fd, int with_host, struct sm_list *into,
		   struct gr_err *err);
const struct sm_entry *sm_reader_next(struct sm_reader *r);
void sm_reader_close(struct sm_reader *r);
/* One entry (as in the encoding), for messages that carry a few. get
 * appends the entry to l; NULL (rd->bad set) if malformed or unsafe. */
struct gr_rd;
void sm_put_entry(struct strbuf *b, const struct sm_entry *e, int with_host);
struct sm_entry *sm_get_entry(struct gr_rd *rd, struct sm_list *l, int with_host);
/* The same with zstd around it, for the wire. */
void sm_encode_z(const struct sm_list *l, struct strbuf *out);
/* Its zstd window (2^this bytes): what a reader of the stream holds, so
 * a manifest of any length is read in bounded memory. */
#define SM_Z_WINDOW_LOG 19
int sm_decode_z(const void *p, size_t n, struct sm_list *l, struct gr_err *err);

/* A relative path gpurun accepts from the other side: not empty, no
 * leading or doubled '/', no "." or ".." component, components of at most
 * 255 bytes, at most 4096 bytes in all. */
int sm_path_ok(const char *path);

/* Block length for a file of this size: the leaf size of the content hash
 * and the block length of the signatures gpurun makes. */
uint32_t sm_block_len(uint64_t size);

/* One block's hash in one call: what thash computes, a piece at a time,
 * for each leaf, and the strong sum of every signature gpurun makes. Each
 * one-shot block hash goes through here. */
void sm_leaf_hash(uint8_t out[SM_HASH_LEN], const void *p, size_t n);

/* Streaming content hash. leaves, if set, receives each block's hash. */
struct thash {
	blake2b_state root, leaf;
	uint64_t size, done;
	uint32_t block, in_leaf;
	void (*on_leaf)(void *arg, uint64_t index, const uint8_t h[SM_HASH_LEN]);
	void *arg;
	uint64_t nleaf;
};
void thash_init(struct thash *t, uint64_t size);
void thash_update(struct thash *t, const void *p, size_t n);
void thash_final(struct thash *t, uint8_t out[SM_HASH_LEN]);
/* The root from block hashes already known (len = number of blocks). */
void thash_from_leaves(const uint8_t *leaves, uint64_t nleaves, uint64_t size,
		       uint8_t out[SM_HASH_LEN]);

/* sync_hash.c. */
/* Hash one local file (content hash, and block hashes if leaves != NULL:
 * a new array of sm_block_len(size)-sized blocks' hashes). */
int sync_hash_file(const char *abspath, uint64_t size, uint8_t hash[SM_HASH_LEN],
		   uint8_t **leaves, struct gr_err *err);
/* The same from an open file (name for messages); the caller closes fd. */
int sync_hash_fd(int fd, const char *name, uint64_t size, uint8_t hash[SM_HASH_LEN],
		 uint8_t **leaves, struct gr_err *err);

/* What an earlier hashing of the file at the same path learnt, so that
 * sync_hash_fd_known need not hash its unchanged blocks again: for each
 * block (of the same length) a fingerprint (fp_len bytes, of fp, a fast
 * hash the caller chooses) and its content-hash leaf. A block whose
 * fingerprint is the one recorded keeps the recorded leaf; the others are
 * hashed. With want_fps, fps_out is made (malloc'd; the caller frees it)
 * to hold every block's fingerprint, nout blocks of block_out bytes, for
 * the next time. reused counts the blocks kept. */
struct sync_known {
	uint32_t block;            /* the block length they were made with */
	uint64_t n;                /* blocks recorded (0: none) */
	const uint8_t *fps, *leaves;
	void *owned;               /* what holds them (the caller's to free) */
	size_t fp_len;
	void (*fp)(uint8_t *out, const void *p, size_t n);
	int want_fps;
	uint8_t *fps_out;
	uint64_t nout, reused;
	uint32_t block_out;
};
int sync_hash_fd_known(int fd, const char *name, uint64_t size, uint8_t hash[SM_HASH_LEN],
		       uint8_t **leaves, struct sync_known *known, struct gr_err *err);

/* librsync's RabinKarp weak sum of one block, as its signatures hold it. */
uint32_t sm_weak_sum(const void *p, size_t n);
uint32_t sm_weak_sum_ref(const void *p, size_t n); /* a byte at a time: the tests' */

/* The remote project folders sync refuses, both sides: "/", home (if
 * given) or any folder above it, system folders and everything below the
 * ones that never hold projects. real: an absolute, clean path. NULL if
 * allowed, else why. */
const char *sm_root_refused(const char *real, const char *home);
/* Collapse "//", "." and ".." of an absolute path, lexically (new string). */
char *sm_clean_path(const char *abs);

/* Hex of a hash (65 bytes with the NUL). */
void sm_hex(const uint8_t h[SM_HASH_LEN], char out[2 * SM_HASH_LEN + 1]);

#endif
