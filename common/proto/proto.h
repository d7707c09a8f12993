/* The wire protocol between gpurun and gpurun-agent (spec: PROTOCOL.md).
 * Both sides compile this in. Frames are length-prefixed and typed and
 * carry a request id so requests pipeline; every length read from the wire
 * is bounds-checked before use. */
#ifndef GR_PROTO_H
#define GR_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"
#include "util.h"

#define GR_PROTO_VERSION 1
#define GR_FRAME_HDR 12u
#define GR_FRAME_MAX (4u << 20) /* largest payload either side accepts */
/* Requests the client may put in the bootstrap command (bytes, before hex). */
#define GR_EARLY_MAX (16u * 1024)

/* Frame types. Ranges belong to modules: a module adds types only in its
 * own range, and the agent answers only what its handler tables list. */
enum gr_msg {
	/* core 0x01-0x0f (remote/agent/agent.c) */
	GR_MSG_HELLO = 0x01,  /* c->a: u32 version; a->c: u32 version, str hash, str arch, str home, u32 pid */
	GR_MSG_OK = 0x02,     /* a->c: request done; payload defined per request */
	GR_MSG_ERROR = 0x03,  /* a->c: i32 code (GR_E*), str message; ends the request */
	GR_MSG_DATA = 0x04,   /* either way: a chunk of the stream opened by request id */
	GR_MSG_CANCEL = 0x05, /* c->a: abandon request id */
	GR_MSG_PING = 0x06,   /* c->a: answered by OK (round-trip measure, keepalive) */
	GR_MSG_PROBE = 0x07,  /* c->a: str path; a->c OK: see PROTOCOL.md (doctor) */
	GR_MSG_KEEPALIVE = 0x08, /* a->c, id 0, empty: busy with local work (conn swallows it) */
	/* exec 0x10-0x1f (remote/agent/agent_exec.c) */
	GR_MSG_EXEC = 0x10,   /* c->a: str cwd, u32 argc, str argv..., u32 envc, str env...,
			       * u32 flags (GR_EXEC_*), str term, u16 rows, u16 cols */
	GR_MSG_STDOUT = 0x11, /* a->c: bytes the command wrote to stdout */
	GR_MSG_STDERR = 0x12, /* a->c: bytes the command wrote to stderr */
	GR_MSG_EXIT = 0x13,   /* a->c: u8 signalled, i32 code; ends the request */
	GR_MSG_STDIN = 0x14,  /* c->a: bytes for the command's stdin; END flag closes it */
	GR_MSG_SIGNAL = 0x15, /* c->a: u32 signal number to the command's process group */
	GR_MSG_WINSIZE = 0x16, /* c->a: u16 rows, u16 cols of the command's pty */
	/* sync 0x20-0x3f (remote/sync/agent_sync.c) */
	GR_MSG_SYNC_FIRST = 0x20,
	GR_MSG_SYNC_LAST = 0x3f,
	/* jobs 0x40-0x5f (remote/job/agent_job.c) */
	GR_MSG_JOB_FIRST = 0x40,
	GR_MSG_JOB_LAST = 0x5f,
	/* artifacts 0x60-0x6f (remote/job/agent_job.c) */
	GR_MSG_ART_FIRST = 0x60,
	GR_MSG_ART_LAST = 0x6f,
};

/* EXEC's flags. */
enum gr_exec_flags {
	GR_EXEC_PTY = 1,   /* run under a pty: one output stream, TERM and size set */
	GR_EXEC_LOGIN = 2, /* run the user's login shell (argv empty) */
};

enum gr_frame_flags {
	GR_F_END = 1, /* the last frame of this request's stream */
};

struct gr_frame {
	uint32_t len;   /* payload length, <= GR_FRAME_MAX */
	uint16_t type;
	uint16_t flags;
	uint32_t id;    /* request id, chosen by the client; 0 = none */
	const uint8_t *payload; /* points into the caller's buffer */
};

/* Encode a 12-byte header: u32 len, u16 type, u16 flags, u32 id (big-endian). */
void proto_hdr_encode(uint8_t out[GR_FRAME_HDR], uint32_t len, uint16_t type,
		      uint16_t flags, uint32_t id);

/* Try to parse one frame from buf[0..n). Returns 1 and fills f and
 * *consumed when a whole frame is there, 0 when more bytes are needed,
 * GR_EPROTO (err set) for an oversized length or an unknown type 0. */
int proto_parse(const uint8_t *buf, size_t n, struct gr_frame *f,
		size_t *consumed, struct gr_err *err);

/* Append a whole frame (header + payload) to out. */
void proto_frame_append(struct strbuf *out, uint16_t type, uint16_t flags,
			uint32_t id, const void *payload, size_t n);

/* Payload writers: append big-endian integers and length-prefixed byte
 * strings (u32 length, then bytes) to a strbuf. */
void put_u8(struct strbuf *b, uint8_t v);
void put_u16(struct strbuf *b, uint16_t v);
void put_u32(struct strbuf *b, uint32_t v);
void put_u64(struct strbuf *b, uint64_t v);
void put_bytes(struct strbuf *b, const void *p, size_t n);
void put_str(struct strbuf *b, const char *s);

/* Payload reader: every get_* checks the remaining length; on a short
 * payload it sets r->bad, returns 0 / NULL, and later reads fail too.
 * Check r->bad (or rd_done) once after a sequence of reads. */
struct gr_rd {
	const uint8_t *p;
	size_t n;
	int bad;
};
void rd_init(struct gr_rd *r, const void *p, size_t n);
uint8_t get_u8(struct gr_rd *r);
uint16_t get_u16(struct gr_rd *r);
uint32_t get_u32(struct gr_rd *r);
uint64_t get_u64(struct gr_rd *r);
/* A byte string: pointer into the payload and its length (not copied). */
const uint8_t *get_bytes(struct gr_rd *r, size_t *len);
/* A string without NUL bytes, copied into a new allocation (caller frees);
 * a string holding a NUL byte marks the reader bad. */
char *get_str(struct gr_rd *r);
/* 0 when every read succeeded and nothing is left over, else GR_EPROTO. */
int rd_done(struct gr_rd *r, struct gr_err *err, const char *what);

/* Error payload helpers: ERROR carries i32 code + message. */
void proto_error_payload(struct strbuf *b, int code, const char *msg);

const char *proto_msg_name(uint16_t type);

#endif
