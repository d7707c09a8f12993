/* Keys as OpenSSH writes them: base64 in and out (known_hosts lines,
 * .pub files, fingerprints) and the type name a key blob starts with.
 * Shared by known_hosts and auth, below both. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ssh_int.h"

static const char b64chars[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *b64_encode(const unsigned char *p, size_t n, int pad)
{
	struct strbuf sb = STRBUF_INIT;

	sb_grow(&sb, (n + 2) / 3 * 4 + 1);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		char q[4] = { b64chars[(v >> 18) & 63], b64chars[(v >> 12) & 63],
			      b64chars[(v >> 6) & 63], b64chars[v & 63] };
		size_t keep = i + 2 < n ? 4 : i + 1 < n ? 3 : 2;
		sb_add(&sb, q, keep);
		if (pad)
			for (size_t k = keep; k < 4; k++)
				sb_add(&sb, "=", 1);
	}
	if (!sb.len) {
		sb_release(&sb);
		return xstrdup(""); /* sb_grow alone leaves no terminator */
	}
	return sb_detach(&sb, NULL);
}

int b64_decode(const char *s, size_t n, struct strbuf *out)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t i;

	for (i = 0; i < n && s[i] != '='; i++) {
		const char *c = memchr(b64chars, s[i], 64);
		if (!c || !s[i])
			return -1;
		acc = (acc << 6) | (uint32_t)(c - b64chars);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			unsigned char b = (unsigned char)(acc >> bits);
			sb_add(out, &b, 1);
		}
	}
	for (; i < n; i++)
		if (s[i] != '=')
			return -1;
	return 0;
}

char *ssh_blob_type(const unsigned char *blob, size_t len)
{
	uint32_t n;

	if (len < 4)
		return NULL;
	n = (uint32_t)blob[0] << 24 | (uint32_t)blob[1] << 16 | (uint32_t)blob[2] << 8 | blob[3];
	if (n == 0 || n > len - 4 || n > 64)
		return NULL;
	return xstrndup((const char *)blob + 4, n);
}
