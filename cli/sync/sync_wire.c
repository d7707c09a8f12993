/* The wire of a sync's transfer (sync_xfer.c, sync_xfer_tar.c), below
 * both: frames out, each counted; the requests in flight and the answers
 * they get (errors kept one per file, signatures kept for the cache);
 * DATA framing; and pacing: above a high-water mark we wait for the pipe,
 * reading answers meanwhile, so a file the host refuses stops as soon as
 * it says so. */
#include <stdlib.h>
#include <string.h>

#include "sync_proto.h"
#include "sync_steps.h"
#include "sync_wire.h"

#define HIGH_WATER (1u << 20) /* queued output above this: wait for the pipe... */
#define LOW_WATER (256u << 10) /* ...until below this, so it never runs dry */
#define SIG_MAX (256u << 20)  /* the largest signature taken from the host */

void sync_wire_send(struct sync_xfer *x, uint16_t type, uint16_t flags, uint32_t id,
		    const void *p, size_t n)
{
	conn_send(x->c, type, flags, id, p, n);
	x->wire->out += GR_FRAME_HDR + n;
}

size_t sync_wire_add_req(struct sync_xfer *x, uint32_t id, int kind, size_t item)
{
	x->reqs = xrealloc(x->reqs, (x->nreqs + 1) * sizeof(*x->reqs));
	struct sync_wire_req *r = &x->reqs[x->nreqs];
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->kind = kind;
	r->item = item;
	return x->nreqs++;
}

static struct sync_wire_req *find_req(struct sync_xfer *x, uint32_t id)
{
	for (size_t i = x->nreqs; i-- > 0;)
		if (x->reqs[i].id == id)
			return &x->reqs[i];
	return NULL;
}

struct sm_entry *sync_wire_entry(struct sync_xfer *x, size_t item)
{
	return &x->local->e[x->plan->files[item].local];
}

void sync_wire_add_error(struct sync_xfer *x, const char *path, int kind, const char *msg,
			 uint64_t size)
{
	if (kind != SYNC_ERR_LOCAL && (kind < SYNC_ERR_OTHER || kind > SYNC_ERR_IN_THE_WAY))
		kind = SYNC_ERR_OTHER; /* a kind from the host we do not know */
	/* One per file: a later, more precise word on it replaces the first. */
	for (size_t i = 0; path && i < x->nerrs; i++) {
		struct sync_error *e = &x->errs[i];
		if (e->path && !strcmp(e->path, path)) {
			free(e->msg);
			e->msg = sync_tame(msg);
			if (kind != SYNC_ERR_OTHER)
				e->kind = kind;
			return;
		}
	}
	x->errs = xrealloc(x->errs, (x->nerrs + 1) * sizeof(*x->errs));
	x->errs[x->nerrs++] = (struct sync_error){ path ? xstrdup(path) : NULL, kind,
						   sync_tame(msg), size };
	if (kind == SYNC_ERR_NOSPACE)
		x->nospace = 1; /* what is left would not fit either */
}

/* The optimistic OPEN's answer: the session goes on (what it says about
 * the folder is noted), or it ended there because the host is not as
 * planned for. */
static void session_state(struct sync_xfer *x, struct sync_wire_req *r, const struct gr_frame *f)
{
	struct host_state h = { 0 };
	struct gr_err e = { 0 };

	if (f->flags & GR_F_END) {
		x->rejected = r->done = r->failed = 1;
		x->fatal = gr_errf(x->err, GR_ECONFLICT, "the host changed since the last sync");
		return;
	}
	sb_add(&r->data, f->payload, f->len);
	if (parse_state((const uint8_t *)r->data.buf, r->data.len, &h, &e) == 0) {
		x->host_free = h.free;
		free(x->host_root);
		x->host_root = h.root ? sync_tame(h.root) : NULL;
	}
	host_state_release(&h);
	sb_release(&r->data);
}

static void dispatch(struct sync_xfer *x, const struct gr_frame *f)
{
	struct sync_wire_req *r = find_req(x, f->id);
	struct gr_err e = { 0 };

	x->wire->in += GR_FRAME_HDR + f->len;
	if (!r || r->done)
		return; /* late frames of something finished */
	if (f->type == GR_MSG_DATA && (r->kind == SYNC_RQ_SIG || r->kind == SYNC_RQ_SESSION)) {
		/* A signature, or the first part of a long answer. */
		if (r->data.len + f->len > (r->kind == SYNC_RQ_SIG ? SIG_MAX : SYNC_ANSWER_MAX))
			x->fatal = gr_errf(x->err, GR_EPROTO, "protocol error: the host's answer "
					   "is larger than %u MiB", SYNC_ANSWER_MAX >> 20);
		else
			sb_add(&r->data, f->payload, f->len);
		return;
	}
	if (r->kind == SYNC_RQ_SESSION && f->type == SYNC_MSG_STATE) {
		session_state(x, r, f);
		return;
	}
	if (f->type == GR_MSG_ERROR) {
		int code = conn_error_from_frame(f, &e);
		struct gr_rd rd;
		rd_init(&rd, f->payload, f->len);
		get_u32(&rd);
		free(get_str(&rd));
		uint32_t kind = rd.n >= 4 ? get_u32(&rd) : SYNC_ERR_OTHER; /* sync's own word on it */
		r->failed = r->done = 1;
		if (r->kind == SYNC_RQ_FILE) {
			struct sm_entry *l = sync_wire_entry(x, r->item);
			sync_wire_revert(x, r->item);
			sync_wire_add_error(x, l->path, (int)kind, e.msg, l->size);
		} else if (r->kind == SYNC_RQ_TAR) {
			sync_wire_add_error(x, NULL, (int)kind, e.msg, 0);
		} else if (r->kind == SYNC_RQ_SESSION && !x->fatal) {
			/* The session is over: nothing more can land. */
			*x->err = e;
			x->fatal = code;
		}
		return;
	}
	if (f->type == GR_MSG_OK) {
		sb_add(&r->ans, f->payload, f->len);
		r->done = 1;
	}
}

/* Read every answer already here, without waiting. */
int sync_wire_poll(struct sync_xfer *x)
{
	struct gr_frame f;
	int rc;

	while (!x->fatal && (rc = conn_recv(x->c, &f, 0, x->err)) == 1)
		dispatch(x, &f);
	if (rc < 0)
		x->fatal = rc;
	return x->fatal;
}

static int silent_too_long(struct sync_xfer *x)
{
	if (now_ms() - conn_last_io(x->c) < (uint64_t)x->idle_ms)
		return 0;
	x->fatal = gr_errf(x->err, GR_ETIMEOUT, "the host took nothing and sent nothing for %d s",
			   x->idle_ms / 1000);
	gr_hintf(x->err, "the agent on the host may be stuck, or the network gone; "
		 "GPURUN_IO_TIMEOUT sets how long gpurun waits");
	return x->fatal;
}

int sync_wire_pace(struct sync_xfer *x)
{
	int rc;

	if (x->fatal)
		return x->fatal;
	if ((rc = sync_wire_poll(x)) < 0) /* writes what the transport takes now */
		return rc;
	if (conn_pending(x->c) > HIGH_WATER) {
		/* Wait for room, a millisecond at a time, reading answers. */
		uint64_t t0 = now_ns();
		while (conn_pending(x->c) > LOW_WATER) {
			struct gr_frame f;
			rc = conn_recv(x->c, &f, 1, x->err);
			if (rc < 0)
				return x->fatal = rc;
			if (rc == 1)
				dispatch(x, &f);
			if (x->fatal || silent_too_long(x))
				return x->fatal;
		}
		x->paced_ns += now_ns() - t0;
	}
	return 0;
}

/* Wait for one more answer. */
int sync_wire_wait_one(struct sync_xfer *x)
{
	struct gr_frame f;
	int rc = conn_recv_idle(x->c, &f, x->idle_ms, x->err);

	if (rc < 0)
		return x->fatal = rc;
	dispatch(x, &f);
	return x->fatal;
}

int sync_wire_data_add(struct sync_wire_data *fb, const void *p, size_t n)
{
	sb_add(&fb->b, p, n);
	if (fb->b.len < SYNC_WIRE_FRAME)
		return 0;
	sync_wire_send(fb->x, GR_MSG_DATA, 0, fb->id, fb->b.buf, fb->b.len);
	sb_reset(&fb->b);
	return sync_wire_pace(fb->x);
}

void sync_wire_data_end(struct sync_wire_data *fb)
{
	sync_wire_send(fb->x, GR_MSG_DATA, GR_F_END, fb->id, fb->b.buf, fb->b.len);
	sb_release(&fb->b);
}

void sync_wire_keep_sig(struct sync_xfer *x, const uint8_t hash[SM_HASH_LEN], struct strbuf *sig)
{
	x->sigs = xrealloc(x->sigs, (x->nsigs + 1) * sizeof(*x->sigs));
	struct sync_wire_sig *s = &x->sigs[x->nsigs++];
	memcpy(s->hash, hash, SM_HASH_LEN);
	s->sig = *sig;
	memset(sig, 0, sizeof(*sig));
}

void sync_wire_revert(struct sync_xfer *x, size_t item)
{
	if (x->nreverted == x->areverted) {
		x->areverted = x->areverted ? 2 * x->areverted : 16;
		x->reverted = xrealloc(x->reverted, x->areverted * sizeof(*x->reverted));
	}
	x->reverted[x->nreverted++] = (uint32_t)item;
}
