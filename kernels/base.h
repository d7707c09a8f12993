/* Shared plumbing of the kernels/ trainer: error codes and message buffer,
 * a deterministic counter-based RNG, a monotonic clock and checked number
 * parsing. Self-contained so that kernels/ builds alone on a GPU box. */
#ifndef KERNELS_BASE_H
#define KERNELS_BASE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes returned by every module (0 is success). main() maps them to
 * exit codes; see README.md "Exit codes". */
enum {
	K_OK = 0,
	K_EUSAGE = -1,     /* a flag or a flag/checkpoint conflict     -> exit 2 */
	K_EDATA = -2,      /* a data file is malformed                 -> exit 1 */
	K_EIO = -3,        /* open/read/write/rename failed            -> exit 1 */
	K_ENOMEM = -4,     /* allocation failed                        -> exit 1 */
	K_ECKPT = -5,      /* a checkpoint is malformed or mismatched  -> exit 1 */
	K_ENONFINITE = -6, /* the loss became NaN or Inf               -> exit 3 */
	K_ECUDA = -7,      /* no CUDA device, or a CUDA/cuBLAS failure -> exit 4 */
};

/* Exit codes of kernels/train, documented in README.md. */
enum {
	EXIT_OK = 0,
	EXIT_ERROR = 1,
	EXIT_USAGE = 2,
	EXIT_NONFINITE = 3,
	EXIT_CUDA = 4,
};

int k_exit_code(int err);

/* The last error's message, written by the module that failed; modules never
 * print. Messages are lowercase, name the subject in quotes, cause last. */
struct kerr {
	char msg[512];
};

/* Formats into e->msg (truncating with "..." if needed) and returns code. */
int kerr_set(struct kerr *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same, with ": strerror(errno)" appended (errno read on entry). */
int kerr_errno(struct kerr *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* splitmix64: a tiny generator whose whole state is one u64, so that the
 * state can be derived from (seed, purpose, counter) and stored in a
 * checkpoint without ceremony. */
static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

/* A state for an independent stream: seed and stream id mixed. */
static inline uint64_t rng_stream(uint64_t seed, uint64_t stream)
{
	uint64_t s = seed ^ (stream * 0xD1B54A32D192ED03ull);
	return rng_next(&s);
}

/* Uniform in [0, 1) with 24 random bits, exactly representable. */
static inline float rng_uniform(uint64_t *s)
{
	return (float)(rng_next(s) >> 40) * (1.0f / 16777216.0f);
}

/* Uniform integer in [0, n), unbiased (Lemire's rejection). */
uint32_t rng_below(uint64_t *s, uint32_t n);

/* Seconds on a monotonic clock. */
double k_now(void);

/* FNV-1a 64-bit over n bytes, continuing from h (start with K_FNV_INIT). */
#define K_FNV_INIT 0xcbf29ce484222325ull
uint64_t k_fnv1a(uint64_t h, const void *p, size_t n);

/* Checked parsing: the whole string must be a number within [lo, hi].
 * Return 0 or K_EUSAGE (message names the flag). */
int k_parse_long(const char *flag, const char *s, long lo, long hi, long *out,
		 struct kerr *e);
int k_parse_u64(const char *flag, const char *s, uint64_t *out, struct kerr *e);
int k_parse_float(const char *flag, const char *s, double lo, double hi,
		  float *out, struct kerr *e);

#ifdef __cplusplus
}
#endif

#endif
