/* Pull by delta, the agent's half (PROTOCOL.md, ART_PULL: deltas): the
 * client uploads the librsync signature of the copy it holds of a file
 * (ART_SIG, staged in the job's .gpurun/pull-sig/), and the packer sends
 * that file as a zstd-compressed librsync delta against it (made by the
 * sync engine's sync_send_file: blocks in place found by their hashes,
 * librsync's rolling search for the rest), with the hash of the whole
 * file, or whole when a delta would not be smaller. */
#ifndef GR_JOB_DELTA_H
#define GR_JOB_DELTA_H

#include <stdint.h>

#include "err.h"
#include "job_proto.h"
#include "sync_manifest.h"

/* JOB_DELTA_MIN, JOB_DELTA_SIG_MAX, JOB_DELTA_SIGS_MAX: in job_proto.h,
 * which the client shares. */

/* A token is 16 lowercase hex digits the client picks per pull. */
int job_delta_token_ok(const char *token);

/* The staged signature index of token (new string); the folder is the
 * job folder's .gpurun/pull-sig. */
char *job_delta_sig_path(const char *jobdir, const char *token, uint32_t index);

/* ART_SIG: write n bytes at off of signature index (of token) for the job
 * in jobdir. 0, or GR_EPROTO / GR_EIO with err set. */
int job_delta_stage(const char *jobdir, const char *token, uint32_t index, uint64_t off,
		    const void *p, size_t n, struct gr_err *err);

/* Remove token's staged signatures, and any left by pulls that ended
 * more than a day ago (token NULL: only those). */
void job_delta_gc(const char *jobdir, const char *token);

/* *why: when not made, why (a static string). The delta of the first size bytes of fd (name: for messages) against
 * the signature in sigpath, into a new unlinked temp file in the folder
 * tmpfd. 1 when made: *out (open, at offset 0), *dsize its length, hash
 * the content hash of those size bytes; 0 when it would not be smaller
 * or the signature is unusable (send the file whole); -1 on an error
 * reading or writing (send it whole too). */
int job_delta_make(int fd, uint64_t size, const char *name, const char *sigpath, int tmpfd,
		   int *out, uint64_t *dsize, uint8_t hash[SM_HASH_LEN], const char **why);

#endif
