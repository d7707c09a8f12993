/* The batched AES-CTR of cli/ssh/ssh_ctr.c against OpenSSL unbatched: the same
 * bytes, and the same return values, over random splits of the stream, in
 * both directions, for each key size; a context keyed again starts the new
 * key's stream (no keystream of the old key is ever used after); a freed
 * context's keystream is gone; a CBC context is not batched; and
 * GPURUN_SSH_CTR_BATCH=0 turns it off. The contexts are set up the way
 * libssh2 1.10 does (EVP_CIPHER_CTX_new, EVP_CipherInit, EVP_Cipher per
 * block, EVP_CIPHER_CTX_free): this binary's calls reach the shim as
 * libssh2's do in gpurun. The reference contexts use EVP_CipherInit_ex,
 * which the shim leaves alone. */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ssh_int.h"
#include "t.h"

#define LEN (1u << 20)

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng >> 16);
}

static void fill(unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)next();
}

/* Mostly one block at a time, as libssh2 calls it; sometimes more, an
 * odd length, or nothing. */
static unsigned split(void)
{
	uint32_t r = next() % 100;
	if (r < 80)
		return 16;
	if (r < 85)
		return 0;
	if (r < 95)
		return 1 + next() % 40;
	return 1 + next() % 70000;
}

static EVP_CIPHER_CTX *ref_ctx(const EVP_CIPHER *c, const unsigned char *key,
			       const unsigned char *iv, int enc)
{
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	CHECK(EVP_CipherInit_ex(x, c, NULL, key, iv, enc) == 1);
	return x;
}

/* In a child, before anything here decides: the switch turns it off. */
static void test_env_switch_off(void)
{
	pid_t pid = fork();
	if (pid == 0) {
		setenv("GPURUN_SSH_CTR_BATCH", "0", 1);
		_exit(ssh_ctr_batching() == 0 ? 0 : 1);
	}
	int st = 0;
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_on_for_this_libssh2(void)
{
	unsetenv("GPURUN_SSH_CTR_BATCH");
	if (!ssh_ctr_batching())
		SKIP("the libssh2 here is not 1.10.x: the shim passes through");
}

static void same_stream(const EVP_CIPHER *c, int enc)
{
	unsigned char key[32], iv[16];
	unsigned char *in = malloc(LEN), *a = malloc(LEN), *b = malloc(LEN);

	fill(key, sizeof(key));
	fill(iv, sizeof(iv));
	fill(in, LEN);
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new(), *r = ref_ctx(c, key, iv, enc);
	CHECK(EVP_CipherInit(x, c, key, iv, enc) == 1);
	CHECK(EVP_CIPHER_CTX_get_app_data(x) != NULL);      /* batched */
	CHECK(EVP_CIPHER_CTX_get_app_data(r) == NULL);      /* not */
	size_t off = 0, bad = 0;
	while (off < LEN) {
		size_t n = split();
		if (n > LEN - off)
			n = LEN - off;
		int rx = EVP_Cipher(x, a + off, in + off, (unsigned)n);
		int rr = EVP_Cipher(r, b + off, in + off, (unsigned)n);
		if (rx != rr)
			bad++;
		off += n;
	}
	CHECK_EQ_INT(bad, 0);
	CHECK(memcmp(a, b, LEN) == 0);
	/* In place, as libssh2 does it. */
	memcpy(a, in, 4096);
	memcpy(b, in, 4096);
	for (size_t i = 0; i < 4096; i += 16) {
		CHECK(EVP_Cipher(x, a + i, a + i, 16) > 0);
		CHECK(EVP_Cipher(r, b + i, b + i, 16) > 0);
	}
	CHECK(memcmp(a, b, 4096) == 0);
	EVP_CIPHER_CTX_free(x);
	EVP_CIPHER_CTX_free(r);
	free(in);
	free(a);
	free(b);
}

static void test_same_bytes_aes128(void) { same_stream(EVP_aes_128_ctr(), 1); }
static void test_same_bytes_aes192(void) { same_stream(EVP_aes_192_ctr(), 1); }
static void test_same_bytes_aes256_decrypt(void) { same_stream(EVP_aes_256_ctr(), 0); }

/* n bytes of in through x (batched) and r (reference) a block at a time,
 * as libssh2 calls it: the same bytes out. Frees both. */
static void same_blocks(EVP_CIPHER_CTX *x, EVP_CIPHER_CTX *r, const unsigned char *in, size_t n)
{
	unsigned char *a = malloc(n), *b = malloc(n);

	for (size_t i = 0; i < n; i += 16) {
		CHECK(EVP_Cipher(x, a + i, in + i, 16) > 0);
		CHECK(EVP_Cipher(r, b + i, in + i, 16) > 0);
	}
	CHECK(memcmp(a, b, n) == 0);
	EVP_CIPHER_CTX_free(x);
	EVP_CIPHER_CTX_free(r);
	free(a);
	free(b);
}

/* Keyed again mid-stream (and mid-keystream): what follows is the new
 * key's stream from its IV, as from a fresh context. */
static void rekey(int same_cipher)
{
	const EVP_CIPHER *c = EVP_aes_128_ctr();
	unsigned char k1[16], k2[16], iv1[16], iv2[16], in[4096], a[16];

	fill(k1, 16);
	fill(k2, 16);
	fill(iv1, 16);
	fill(iv2, 16);
	fill(in, sizeof(in));
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	CHECK(EVP_CipherInit(x, c, k1, iv1, 1) == 1);
	for (int i = 0; i < 10; i++)
		CHECK(EVP_Cipher(x, a, in, 16) > 0);
	/* A NULL cipher keeps the context's: OpenSSL resets nothing then. */
	CHECK(EVP_CipherInit(x, same_cipher ? NULL : c, k2, iv2, 1) == 1);
	CHECK(EVP_CIPHER_CTX_get_app_data(x) != NULL);
	EVP_CIPHER_CTX *r = ref_ctx(c, k2, iv2, 1);
	same_blocks(x, r, in, sizeof(in));
}

static void test_rekey_drops_keystream(void) { rekey(0); }
static void test_rekey_same_cipher_drops_keystream(void) { rekey(1); }

/* Freed and made again (malloc may hand back the same address): the new
 * context starts from its own key, and has no keystream until keyed. */
static void test_free_then_new(void)
{
	const EVP_CIPHER *c = EVP_aes_256_ctr();
	unsigned char k[32], iv[16], in[256];

	for (int round = 0; round < 50; round++) {
		fill(k, sizeof(k));
		fill(iv, sizeof(iv));
		fill(in, sizeof(in));
		EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
		CHECK(EVP_CIPHER_CTX_get_app_data(x) == NULL);
		CHECK(EVP_CipherInit(x, c, k, iv, 1) == 1);
		EVP_CIPHER_CTX *r = ref_ctx(c, k, iv, 1);
		same_blocks(x, r, in, sizeof(in));
	}
}

/* CBC is chained: not a keystream, never batched. */
static void test_cbc_passes_through(void)
{
	const EVP_CIPHER *c = EVP_aes_128_cbc();
	unsigned char k[16], iv[16], in[1024];

	fill(k, 16);
	fill(iv, 16);
	fill(in, sizeof(in));
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new(), *r = ref_ctx(c, k, iv, 1);
	CHECK(EVP_CipherInit(x, c, k, iv, 1) == 1);
	CHECK(EVP_CIPHER_CTX_get_app_data(x) == NULL);
	EVP_CIPHER_CTX_set_padding(x, 0);
	EVP_CIPHER_CTX_set_padding(r, 0);
	same_blocks(x, r, in, sizeof(in));
}

int main(void)
{
	RUN(test_env_switch_off);
	RUN(test_on_for_this_libssh2);
	if (!ssh_ctr_batching())
		return T_DONE();
	RUN(test_same_bytes_aes128);
	RUN(test_same_bytes_aes192);
	RUN(test_same_bytes_aes256_decrypt);
	RUN(test_rekey_drops_keystream);
	RUN(test_rekey_same_cipher_drops_keystream);
	RUN(test_free_then_new);
	RUN(test_cbc_passes_through);
	return T_DONE();
}
