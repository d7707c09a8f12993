/* Batched AES-CTR for libssh2 1.10.
 *
 * libssh2 1.10 (Debian 12's) encrypts and decrypts a packet one cipher
 * block at a time: one EVP_Cipher call, and a copy, per 16 bytes. OpenSSL
 * 3 spends ~35 ns on each call (`openssl speed -evp aes-128-ctr -bytes
 * 16`: 457 MB/s, against 7.3 GB/s at 16 KiB), so a 256 MiB pull spent
 * 0.9 s of the client's 1.6 s of CPU in libcrypto (perf, issue 13). In CTR
 * mode the cipher is a keystream XORed with the data, and the keystream
 * depends only on the key and the counter. So for the contexts libssh2
 * sets up for CTR we make the keystream 32 KiB at a time, with OpenSSL's
 * own AES (one EVP_Cipher call over zeros, which also moves the context's
 * counter past it), and answer each 16-byte call from it. Bytes out are
 * the same bytes, in the same order: the test compares them with an
 * unbatched context over random splits.
 *
 * How: this file defines EVP_CipherInit, EVP_Cipher and
 * EVP_CIPHER_CTX_free. The executable's definitions come first in symbol
 * lookup, so libssh2's calls reach them; they reach OpenSSL's through
 * dlsym(RTLD_NEXT). A keystream belongs to one context (its app_data,
 * which neither libssh2 nor OpenSSL uses), is made only after an
 * EVP_CipherInit with a key, is dropped by the next EVP_CipherInit or
 * EVP_CIPHER_CTX_free of that context, and is wiped when dropped. That is
 * libssh2 1.10's whole use of these contexts (its imports: new, CipherInit,
 * Cipher, free), so the batching is on only for a libssh2 of 1.10.x, and
 * off with GPURUN_SSH_CTR_BATCH=0 (the bench's control). Anything else
 * passes straight through. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <libssh2.h>
#include <openssl/evp.h>

#include "compat.h"
#include "ssh_int.h"
#include "util.h"

#define KS_LEN (32u << 10)
#define KS_MAGIC 0x6b73637472u /* "kcstr" */

struct keystream {
	uint64_t magic;
	size_t off, len; /* unused keystream is buf[off, len) */
	int ret_full;    /* OpenSSL returns the length (1 for legacy ciphers) */
	unsigned char buf[KS_LEN];
};

typedef int (*init_fn)(EVP_CIPHER_CTX *, const EVP_CIPHER *, const unsigned char *,
		       const unsigned char *, int);
typedef int (*cipher_fn)(EVP_CIPHER_CTX *, unsigned char *, const unsigned char *, unsigned int);
typedef void (*free_fn)(EVP_CIPHER_CTX *);

static init_fn real_init;
static cipher_fn real_cipher;
static free_fn real_free;
static int batching;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void find_real(void)
{
	const char *env = getenv("GPURUN_SSH_CTR_BATCH");

	real_init = (init_fn)dlsym(RTLD_NEXT, "EVP_CipherInit");
	real_cipher = (cipher_fn)dlsym(RTLD_NEXT, "EVP_Cipher");
	real_free = (free_fn)dlsym(RTLD_NEXT, "EVP_CIPHER_CTX_free");
	/* 1.10.x only: the call pattern above is that version's. */
	batching = real_init && real_cipher && real_free &&
		   libssh2_version(0x010a00) && !libssh2_version(0x010b00) &&
		   !(env && strcmp(env, "0") == 0);
}

int ssh_ctr_batching(void)
{
	pthread_once(&once, find_real);
	return batching;
}

static struct keystream *ks_of(const EVP_CIPHER_CTX *ctx)
{
	struct keystream *ks = ctx ? EVP_CIPHER_CTX_get_app_data(ctx) : NULL;

	return ks && ks->magic == KS_MAGIC ? ks : NULL;
}

static void ks_drop(EVP_CIPHER_CTX *ctx)
{
	struct keystream *ks = ks_of(ctx);

	if (ks) {
		compat_explicit_bzero(ks, sizeof(*ks));
		free(ks);
		EVP_CIPHER_CTX_set_app_data(ctx, NULL);
	}
}

int EVP_CipherInit(EVP_CIPHER_CTX *ctx, const EVP_CIPHER *cipher, const unsigned char *key,
		   const unsigned char *iv, int enc)
{
	int rc;

	pthread_once(&once, find_real);
	if (!real_init)
		return 0;
	ks_drop(ctx);
	rc = real_init(ctx, cipher, key, iv, enc);
	/* Only a context keyed for CTR here (a NULL cipher keeps the one it
	 * has, and OpenSSL resets nothing then: the drop above is what keeps
	 * the old key's keystream from being used), and not one some other
	 * code hangs its own data on. */
	const EVP_CIPHER *c = cipher ? cipher : EVP_CIPHER_CTX_get0_cipher(ctx);
	if (rc == 1 && batching && key && c && EVP_CIPHER_get_mode(c) == EVP_CIPH_CTR_MODE &&
	    !EVP_CIPHER_CTX_get_app_data(ctx)) {
		struct keystream *ks = malloc(sizeof(*ks));
		if (ks) {
			ks->magic = KS_MAGIC;
			ks->off = ks->len = 0;
			ks->ret_full = -1;
			EVP_CIPHER_CTX_set_app_data(ctx, ks);
		}
	}
	return rc;
}

void EVP_CIPHER_CTX_free(EVP_CIPHER_CTX *ctx)
{
	pthread_once(&once, find_real);
	ks_drop(ctx);
	if (real_free)
		real_free(ctx);
}

/* out = in ^ k, a word at a time (out may be in). */
static void xor_into(unsigned char *out, const unsigned char *in, const unsigned char *k, size_t n)
{
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		uint64_t a, b;
		memcpy(&a, in + i, 8);
		memcpy(&b, k + i, 8);
		a ^= b;
		memcpy(out + i, &a, 8);
	}
	for (; i < n; i++)
		out[i] = in[i] ^ k[i];
}

int EVP_Cipher(EVP_CIPHER_CTX *ctx, unsigned char *out, const unsigned char *in, unsigned int inl)
{
	/* A keystream exists only after our EVP_CipherInit ran find_real. */
	struct keystream *ks = in && out ? ks_of(ctx) : NULL;
	unsigned int done = 0;

	if (!ks) {
		pthread_once(&once, find_real);
		return real_cipher ? real_cipher(ctx, out, in, inl) : -1;
	}
	while (done < inl) {
		if (ks->off == ks->len) {
			memset(ks->buf, 0, KS_LEN);
			int r = real_cipher(ctx, ks->buf, ks->buf, KS_LEN);
			if (r != (int)KS_LEN && r != 1) {
				/* Failed: the context's state is OpenSSL's to
				 * report; stop batching it. */
				ks_drop(ctx);
				return r;
			}
			ks->ret_full = r == 1 ? 1 : 0;
			ks->off = 0;
			ks->len = KS_LEN;
		}
		size_t n = ks->len - ks->off;
		if (n > inl - done)
			n = inl - done;
		xor_into(out + done, in + done, ks->buf + ks->off, n);
		ks->off += n;
		done += (unsigned int)n;
	}
	/* What OpenSSL would have said for this call. */
	return ks->ret_full == 1 ? 1 : (int)inl;
}
