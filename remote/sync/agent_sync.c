/* Sync requests (0x20-0x3f, common/proto/sync_proto.h): OPEN answers the state of
 * the remote project folder in one round trip (manifest digest, files
 * changed behind our back) and keeps a session open; OPS, TAR, FILE and
 * SIG stream changes into temp files; COMMIT renames them into place and
 * writes the manifest last. Spec: PROTOCOL.md, section "Sync". */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "sync_agent.h"
#include "sync_apply.h"
#include "sync_proto.h"

static int sess_frame(struct agent *a, uint32_t id, void *st, const struct gr_frame *f,
		      struct gr_err *err)
{
	struct sync_session *s = st;
	struct gr_rd rd;

	rd_init(&rd, f->payload, f->len);
	if (f->type == SYNC_MSG_OPS)
		return sync_apply_ops(s, &rd, err);
	if (f->type == SYNC_MSG_COMMIT) {
		int rc = sync_commit(a, s, &rd, err);
		if (rc == 0)
			agent_stream_close(a, id);
		return rc;
	}
	return gr_errf(err, GR_EPROTO, "unexpected %s frame in a sync session",
		       proto_msg_name(f->type));
}

static void sess_close(struct agent *a, uint32_t id, void *st)
{
	(void)a;
	(void)id;
	sync_session_free(st);
}

static const struct agent_stream_ops session_ops = {
	.on_frame = sess_frame,
	.on_close = sess_close,
};

/* Never answered: a malformed one is ignored (the OPEN still comes). */
static int h_prepare(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	struct gr_err ignored = { 0 };
	char *path = get_str(rd);
	uint32_t flags = get_u32(rd);

	(void)a;
	(void)id;
	(void)err;
	sync_apply_busy = agent_keepalive;
	if (path && rd_done(rd, &ignored, "SYNC_PREPARE") == 0)
		sync_session_prepare(path, flags);
	free(path);
	return 0;
}

static int h_open(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	sync_apply_busy = agent_keepalive;
	char *path = get_str(rd);
	uint32_t flags = get_u32(rd);
	size_t elen = 0, llen = 0;
	const uint8_t *expect = get_bytes(rd, &elen);
	const uint8_t *local = get_bytes(rd, &llen);
	struct sync_session *s = NULL;
	int rc;

	if ((rc = rd_done(rd, err, "SYNC_OPEN")) < 0)
		goto out;
	if ((elen && elen != SYNC_DIGEST_LEN) || llen != SYNC_DIGEST_LEN) {
		rc = gr_errf(err, GR_EPROTO, "protocol error: malformed SYNC_OPEN");
		goto out;
	}
	if (sync_session_current()) {
		rc = gr_errf(err, GR_EPROTO, "a sync session is already open on this connection");
		goto out;
	}
	safe_perms_preserve(flags & SYNC_OPEN_PRESERVE_PERMS);
	rc = sync_session_open(a, id, path, flags, elen ? expect : NULL, local, &s, err);
	if (rc < 0 || !s)
		goto out;
	agent_stream_open(a, id, &session_ops, s);
out:
	free(path);
	return rc;
}

static int tar_data(struct agent *a, uint32_t id, void *st, const uint8_t *p, size_t n,
		    int end, struct gr_err *err)
{
	struct sync_session *s = st;
	struct strbuf pl = STRBUF_INIT;
	uint32_t files = 0;
	int rc;

	if (s != sync_session_current() || !s->tar)
		return gr_errf(err, GR_EPROTO, "the sync session is gone");
	untar_feed(s->tar, p, n, end);
	/* A worker that stopped early (the disk is full): say so now, so
	 * the client stops sending the rest. */
	if (!end && !untar_stopped(s->tar))
		return 0;
	int kind = SYNC_ERR_OTHER;
	rc = untar_finish(s->tar, &files, &kind, err);
	untar_free(s->tar);
	s->tar = NULL;
	if (rc < 0) {
		sync_fail(a, id, rc, kind, err->msg);
		agent_stream_close(a, id);
		return 0;
	}
	put_u32(&pl, files);
	agent_ok(a, id, pl.buf, pl.len);
	sb_release(&pl);
	agent_stream_close(a, id);
	return 0;
}

static void tar_close(struct agent *a, uint32_t id, void *st)
{
	struct sync_session *s = st;

	(void)a;
	(void)id;
	if (s == sync_session_current() && s->tar) {
		untar_free(s->tar);
		s->tar = NULL;
	}
}

static const struct agent_stream_ops tar_ops = {
	.on_data = tar_data,
	.on_close = tar_close,
};

static int h_tar(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err)
{
	uint32_t sid = get_u32(rd);
	struct sync_session *s = sync_session_get(sid);
	int rc;

	if ((rc = rd_done(rd, err, "SYNC_TAR")) < 0)
		return rc;
	if (!s)
		return gr_errf(err, GR_EPROTO, "no sync session %u", sid);
	if (s->tar)
		return gr_errf(err, GR_EPROTO, "a tar stream is already open");
	sync_stage_freeze(s); /* its worker looks staged folders up */
	s->tar = untar_start(s);
	agent_stream_open(a, id, &tar_ops, s);
	return 0;
}

const struct agent_handler agent_sync_handlers[] = {
	{ SYNC_MSG_OPEN, "sync-open", h_open },
	{ SYNC_MSG_PREPARE, "sync-prepare", h_prepare },
	{ SYNC_MSG_TAR, "sync-tar", h_tar },
	{ SYNC_MSG_FILE, "sync-file", sync_h_file },
	{ SYNC_MSG_SIG, "sync-sig", sync_h_sig },
	{ 0, NULL, NULL },
};
