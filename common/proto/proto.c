/* Frame encoding and bounds-checked decoding (see proto.h, PROTOCOL.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

static void be16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

void proto_hdr_encode(uint8_t out[GR_FRAME_HDR], uint32_t len, uint16_t type,
		      uint16_t flags, uint32_t id)
{
	be32(out, len);
	be16(out + 4, type);
	be16(out + 6, flags);
	be32(out + 8, id);
}

int proto_parse(const uint8_t *buf, size_t n, struct gr_frame *f,
		size_t *consumed, struct gr_err *err)
{
	uint32_t len;

	if (n < GR_FRAME_HDR)
		return 0;
	len = rd32(buf);
	if (len > GR_FRAME_MAX)
		return gr_errf(err, GR_EPROTO,
			       "protocol error: frame of %u bytes exceeds the %u-byte limit",
			       len, GR_FRAME_MAX);
	f->type = rd16(buf + 4);
	if (f->type == 0)
		return gr_errf(err, GR_EPROTO, "protocol error: frame of type 0");
	if (n - GR_FRAME_HDR < len)
		return 0;
	f->len = len;
	f->flags = rd16(buf + 6);
	f->id = rd32(buf + 8);
	f->payload = buf + GR_FRAME_HDR;
	*consumed = GR_FRAME_HDR + (size_t)len;
	return 1;
}

void proto_frame_append(struct strbuf *out, uint16_t type, uint16_t flags,
			uint32_t id, const void *payload, size_t n)
{
	uint8_t hdr[GR_FRAME_HDR];

	/* The peer refuses it and the stream is lost: a bug on this side,
	 * shown where it is made rather than as the peer's protocol error. */
	if (n > GR_FRAME_MAX) {
		fprintf(stderr, "gpurun: BUG: a frame of %zu bytes (type 0x%02x), above the %u-byte limit\n",
			n, type, GR_FRAME_MAX);
		abort();
	}
	proto_hdr_encode(hdr, (uint32_t)n, type, flags, id);
	sb_add(out, hdr, sizeof(hdr));
	sb_add(out, payload, n);
}

void put_u8(struct strbuf *b, uint8_t v) { sb_add(b, &v, 1); }
void put_u16(struct strbuf *b, uint16_t v) { uint8_t p[2]; be16(p, v); sb_add(b, p, 2); }
void put_u32(struct strbuf *b, uint32_t v) { uint8_t p[4]; be32(p, v); sb_add(b, p, 4); }
void put_u64(struct strbuf *b, uint64_t v)
{
	put_u32(b, (uint32_t)(v >> 32));
	put_u32(b, (uint32_t)v);
}
void put_bytes(struct strbuf *b, const void *p, size_t n)
{
	put_u32(b, (uint32_t)n);
	sb_add(b, p, n);
}
void put_str(struct strbuf *b, const char *s) { put_bytes(b, s, strlen(s)); }

void rd_init(struct gr_rd *r, const void *p, size_t n)
{
	r->p = p;
	r->n = n;
	r->bad = 0;
}

static const uint8_t *take(struct gr_rd *r, size_t k)
{
	const uint8_t *p;

	if (r->bad || r->n < k) {
		r->bad = 1;
		return NULL;
	}
	p = r->p;
	r->p += k;
	r->n -= k;
	return p;
}

uint8_t get_u8(struct gr_rd *r) { const uint8_t *p = take(r, 1); return p ? p[0] : 0; }
uint16_t get_u16(struct gr_rd *r) { const uint8_t *p = take(r, 2); return p ? rd16(p) : 0; }
uint32_t get_u32(struct gr_rd *r) { const uint8_t *p = take(r, 4); return p ? rd32(p) : 0; }
uint64_t get_u64(struct gr_rd *r)
{
	uint64_t hi = get_u32(r);
	return hi << 32 | get_u32(r);
}

const uint8_t *get_bytes(struct gr_rd *r, size_t *len)
{
	uint32_t n = get_u32(r);
	const uint8_t *p = take(r, n);

	*len = p ? n : 0;
	return p;
}

char *get_str(struct gr_rd *r)
{
	size_t n;
	const uint8_t *p = get_bytes(r, &n);

	if (!p)
		return NULL;
	if (memchr(p, '\0', n)) {
		r->bad = 1;
		return NULL;
	}
	return xstrndup((const char *)p, n);
}

int rd_done(struct gr_rd *r, struct gr_err *err, const char *what)
{
	if (r->bad || r->n)
		return gr_errf(err, GR_EPROTO, "protocol error: malformed %s (%s)", what,
			       r->bad ? "truncated" : "trailing bytes");
	return 0;
}

void proto_error_payload(struct strbuf *b, int code, const char *msg)
{
	put_u32(b, (uint32_t)code);
	put_str(b, msg);
}

const char *proto_msg_name(uint16_t type)
{
	switch (type) {
	case GR_MSG_HELLO: return "HELLO";
	case GR_MSG_OK: return "OK";
	case GR_MSG_ERROR: return "ERROR";
	case GR_MSG_DATA: return "DATA";
	case GR_MSG_CANCEL: return "CANCEL";
	case GR_MSG_PING: return "PING";
	case GR_MSG_PROBE: return "PROBE";
	case GR_MSG_KEEPALIVE: return "KEEPALIVE";
	case GR_MSG_EXEC: return "EXEC";
	case GR_MSG_STDOUT: return "STDOUT";
	case GR_MSG_STDERR: return "STDERR";
	case GR_MSG_EXIT: return "EXIT";
	case GR_MSG_STDIN: return "STDIN";
	case GR_MSG_SIGNAL: return "SIGNAL";
	case GR_MSG_WINSIZE: return "WINSIZE";
	}
	if (type >= GR_MSG_SYNC_FIRST && type <= GR_MSG_SYNC_LAST)
		return "SYNC*";
	if (type >= GR_MSG_JOB_FIRST && type <= GR_MSG_JOB_LAST)
		return "JOB*";
	if (type >= GR_MSG_ART_FIRST && type <= GR_MSG_ART_LAST)
		return "ART*";
	return "?";
}
