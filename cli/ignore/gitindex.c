/* Reader for the path names in git's index file (see git's
 * Documentation/gitformat-index.txt): header "DIRC", version 2-4, entries
 * with fixed stat data, object id, flags and a name (padded in v2/v3,
 * prefix-compressed in v4), then extensions and a checksum. Only names
 * are kept; every length is checked against the file's size. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compat.h"
#include "gitindex.h"
#include "util.h"

#define IX_STAT_BYTES 40 /* ctime, mtime, dev, ino, mode, uid, gid, size */
#define IX_EXTENDED 0x4000
#define IX_NAMEMASK 0x0fff

static uint32_t be32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* git's offset varint (varint.c): 7 bits a byte, +1 per continuation. */
static int ix_varint(const unsigned char **pp, const unsigned char *end, uint64_t *out)
{
	const unsigned char *p = *pp;
	uint64_t v;
	unsigned char c;

	if (p >= end)
		return -1;
	c = *p++;
	v = c & 127;
	while (c & 128) {
		v += 1;
		if (!v || (v >> 57) || p >= end)
			return -1;
		c = *p++;
		v = (v << 7) + (c & 127);
	}
	*pp = p;
	*out = v;
	return 0;
}

static int ix_cmp(const void *a, const void *b, void *base)
{
	return strcmp((const char *)base + *(const size_t *)a,
		      (const char *)base + *(const size_t *)b);
}

int gitindex_read(struct gitindex *ix, const char *path, int hashlen, struct gr_err *err)
{
	struct strbuf file = STRBUF_INIT, names = STRBUF_INIT, prev = STRBUF_INIT;
	const unsigned char *p, *end;
	uint32_t version, count;
	size_t *off = NULL, n = 0;
	int ret;

	memset(ix, 0, sizeof(*ix));
	ret = read_file(path, &file, err);
	if (ret < 0)
		goto out;
	ret = gr_errf(err, GR_EINVAL, "cannot read '%s': not a valid git index", path);
	if (file.len < 12 + (size_t)hashlen || memcmp(file.buf, "DIRC", 4))
		goto out;
	p = (const unsigned char *)file.buf;
	end = p + file.len - hashlen; /* the trailing checksum */
	version = be32(p + 4);
	count = be32(p + 8);
	if (version < 2 || version > 4) {
		ret = gr_errf(err, GR_EUNSUPP, "cannot read '%s': index version %u is not supported",
			      path, version);
		goto out;
	}
	if (count > (size_t)(end - p) / (IX_STAT_BYTES + hashlen + 2))
		goto out;
	off = xmalloc(sizeof(*off) * (count ? count : 1));
	p += 12;
	for (uint32_t i = 0; i < count; i++) {
		const unsigned char *entry = p, *name, *nul;
		size_t fixed = IX_STAT_BYTES + (size_t)hashlen + 2, len;
		unsigned flags;

		if ((size_t)(end - p) < fixed)
			goto out;
		flags = (unsigned)p[fixed - 2] << 8 | p[fixed - 1];
		if (flags & IX_EXTENDED) {
			if (version < 3)
				goto out;
			fixed += 2;
			if ((size_t)(end - p) < fixed)
				goto out;
		}
		p += fixed;
		if (version == 4) {
			uint64_t strip;

			if (ix_varint(&p, end, &strip) < 0 || strip > prev.len)
				goto out;
			nul = memchr(p, '\0', (size_t)(end - p));
			if (!nul)
				goto out;
			prev.len -= (size_t)strip;
			sb_add(&prev, p, (size_t)(nul - p));
			p = nul + 1;
			name = (const unsigned char *)prev.buf;
			len = prev.len;
		} else {
			nul = memchr(p, '\0', (size_t)(end - p));
			if (!nul)
				goto out;
			name = p;
			len = (size_t)(nul - p);
			if ((flags & IX_NAMEMASK) != IX_NAMEMASK && len != (flags & IX_NAMEMASK))
				goto out;
			/* Entries are padded with 1-8 NULs to a multiple of 8. */
			size_t size = ((size_t)(p - entry) + len + 8) & ~(size_t)7;

			if ((size_t)(end - entry) < size)
				goto out;
			p = entry + size;
		}
		if (!len)
			goto out;
		/* Stages 1-3 of a conflict repeat the name: keep one. */
		if (n && strlen(names.buf + off[n - 1]) == len &&
		    !memcmp(names.buf + off[n - 1], name, len))
			continue;
		off[n++] = names.len;
		sb_add(&names, name, len);
		sb_add(&names, "", 1);
	}
	/* Extensions: a split index keeps its entries in another file. */
	while ((size_t)(end - p) >= 8) {
		uint32_t sz = be32(p + 4);

		if (!memcmp(p, "link", 4)) {
			ret = gr_errf(err, GR_EUNSUPP, "cannot read '%s': split index is not supported",
				      path);
			goto out;
		}
		if (sz > (size_t)(end - p) - 8)
			goto out;
		p += 8 + sz;
	}
	/* The index is sorted already; sort again so lookups never depend on
	 * a writer getting it right. */
	compat_qsort_r(off, n, sizeof(*off), ix_cmp, names.buf ? names.buf : "");
	ix->names = sb_detach(&names, NULL);
	ix->off = off;
	ix->n = n;
	off = NULL;
	ret = 0;
	gr_err_clear(err);
out:
	free(off);
	sb_release(&file);
	sb_release(&names);
	sb_release(&prev);
	return ret;
}

void gitindex_free(struct gitindex *ix)
{
	if (!ix)
		return;
	free(ix->names);
	free(ix->off);
	memset(ix, 0, sizeof(*ix));
}

/* First entry not below path[0..len) in byte order. */
static size_t ix_lower_bound(const struct gitindex *ix, const char *path, size_t len)
{
	size_t lo = 0, hi = ix->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const char *s = ix->names + ix->off[mid];
		size_t slen = strlen(s);
		int c = memcmp(s, path, slen < len ? slen : len);

		if (c < 0 || (c == 0 && slen < len))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int gitindex_has(const struct gitindex *ix, const char *path, size_t len)
{
	size_t i;

	if (!ix || !ix->n)
		return 0;
	i = ix_lower_bound(ix, path, len);
	return i < ix->n && strlen(ix->names + ix->off[i]) == len &&
	       !memcmp(ix->names + ix->off[i], path, len);
}

int gitindex_has_under(const struct gitindex *ix, const char *dir, size_t len)
{
	const char *s;
	size_t i;

	if (!ix || !ix->n)
		return 0;
	if (!len)
		return 1;
	/* Entries inside dir start with "dir/" and sort together from there. */
	char *key = xmalloc(len + 2);
	memcpy(key, dir, len);
	key[len] = '/';
	key[len + 1] = '\0';
	i = ix_lower_bound(ix, key, len + 1);
	free(key);
	if (i >= ix->n)
		return 0;
	s = ix->names + ix->off[i];
	return !strncmp(s, dir, len) && s[len] == '/';
}
