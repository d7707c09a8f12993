/* Frame parsing: whole, truncated, oversized and garbage frames. */
#include "t.h"
#include "proto.h"

static void whole_frame_roundtrip(void)
{
	struct strbuf b = STRBUF_INIT, pl = STRBUF_INIT;
	struct gr_frame f;
	size_t used;

	put_u32(&pl, 42);
	put_str(&pl, "hello");
	proto_frame_append(&b, GR_MSG_EXEC, GR_F_END, 7, pl.buf, pl.len);
	CHECK_EQ_INT(proto_parse((uint8_t *)b.buf, b.len, &f, &used, NULL), 1);
	CHECK_EQ_INT(used, b.len);
	CHECK_EQ_INT(f.type, GR_MSG_EXEC);
	CHECK_EQ_INT(f.flags, GR_F_END);
	CHECK_EQ_INT(f.id, 7);
	struct gr_rd rd;
	rd_init(&rd, f.payload, f.len);
	CHECK_EQ_INT(get_u32(&rd), 42);
	char *s = get_str(&rd);
	CHECK_STR(s, "hello");
	free(s);
	CHECK_EQ_INT(rd_done(&rd, NULL, "x"), 0);
	sb_release(&b);
	sb_release(&pl);
}

static void truncated_needs_more(void)
{
	struct strbuf b = STRBUF_INIT;
	struct gr_frame f;
	size_t used;

	proto_frame_append(&b, GR_MSG_DATA, 0, 1, "abcdef", 6);
	for (size_t n = 0; n < b.len; n++)
		CHECK_EQ_INT(proto_parse((uint8_t *)b.buf, n, &f, &used, NULL), 0);
	sb_release(&b);
}

static void oversized_is_an_error(void)
{
	uint8_t hdr[GR_FRAME_HDR];
	struct gr_frame f;
	struct gr_err err = { 0 };
	size_t used;

	proto_hdr_encode(hdr, GR_FRAME_MAX + 1, GR_MSG_DATA, 0, 1);
	CHECK_EQ_INT(proto_parse(hdr, sizeof(hdr), &f, &used, &err), GR_EPROTO);
	CHECK(strstr(err.msg, "exceeds") != NULL);
	proto_hdr_encode(hdr, 0xffffffffu, GR_MSG_DATA, 0, 1);
	CHECK_EQ_INT(proto_parse(hdr, sizeof(hdr), &f, &used, &err), GR_EPROTO);
}

static void type_zero_is_garbage(void)
{
	uint8_t hdr[GR_FRAME_HDR] = { 0 };
	struct gr_frame f;
	size_t used;

	CHECK_EQ_INT(proto_parse(hdr, sizeof(hdr), &f, &used, NULL), GR_EPROTO);
}

static void reader_bounds(void)
{
	struct strbuf pl = STRBUF_INIT;
	struct gr_rd rd;
	size_t n;

	put_u32(&pl, 1000); /* claims 1000 bytes, has 3 */
	sb_add(&pl, "abc", 3);
	rd_init(&rd, pl.buf, pl.len);
	CHECK(get_bytes(&rd, &n) == NULL);
	CHECK(rd.bad);
	CHECK_EQ_INT(get_u64(&rd), 0);
	CHECK_EQ_INT(rd_done(&rd, NULL, "x"), GR_EPROTO);
	sb_reset(&pl);
	put_bytes(&pl, "a\0b", 3); /* a string may not hold NUL */
	rd_init(&rd, pl.buf, pl.len);
	CHECK(get_str(&rd) == NULL);
	CHECK(rd.bad);
	sb_reset(&pl);
	put_u8(&pl, 1);
	put_u8(&pl, 2);
	rd_init(&rd, pl.buf, pl.len);
	get_u8(&rd);
	CHECK_EQ_INT(rd_done(&rd, NULL, "x"), GR_EPROTO); /* trailing byte */
	sb_release(&pl);
}

static void two_frames_back_to_back(void)
{
	struct strbuf b = STRBUF_INIT;
	struct gr_frame f;
	size_t used, off = 0;

	proto_frame_append(&b, GR_MSG_STDOUT, 0, 3, "x", 1);
	proto_frame_append(&b, GR_MSG_EXIT, GR_F_END, 3, "yz", 2);
	CHECK_EQ_INT(proto_parse((uint8_t *)b.buf, b.len, &f, &used, NULL), 1);
	CHECK_EQ_INT(f.type, GR_MSG_STDOUT);
	off += used;
	CHECK_EQ_INT(proto_parse((uint8_t *)b.buf + off, b.len - off, &f, &used, NULL), 1);
	CHECK_EQ_INT(f.type, GR_MSG_EXIT);
	CHECK_EQ_INT(f.len, 2);
	sb_release(&b);
}

int main(void)
{
	RUN(whole_frame_roundtrip);
	RUN(truncated_needs_more);
	RUN(oversized_is_an_error);
	RUN(type_zero_is_garbage);
	RUN(reader_bounds);
	RUN(two_frames_back_to_back);
	return T_DONE();
}
