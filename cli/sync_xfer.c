/* Carrying out a sync plan over one connection (see sync_xfer.h). The tar
 * stream is written by libarchive (pax, zstd filter, no padding after the
 * last block) straight into DATA frames; large files go through
 * sync_delta. Output is paced: above a high-water mark we flush, and
 * answers are read between chunks, so signatures arriving meanwhile are
 * used as soon as the tar is done. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "sync_delta.h"
#include "sync_index.h"
#include "sync_proto.h"
#include "sync_xfer.h"

#define FRAME_DATA (256u << 10)
#define HIGH_WATER (1u << 20) /* queued output above this: wait for the pipe... */
#define LOW_WATER (256u << 10) /* ...until below this, so it never runs dry */
#define READ_CHUNK (256u << 10)
#define TAR_LEVEL 3            /* zstd level of the tar stream */
#define FAST_LEVEL (-50)       /* for what does not compress: about a memcpy */
#define PROBE_MIN (256u << 10) /* files this large are probed first */
#define PROBE_LEN (64u << 10)

enum { RQ_TAR = 1, RQ_FILE, RQ_SIG, RQ_COMMIT };

struct xreq {
	uint32_t id;
	int kind;
	size_t item;         /* plan->files index (FILE, SIG) */
	int done, failed;
	struct strbuf data;  /* SIG: the signature; COMMIT: the answer */
	char *msg;           /* ERROR's message */
};

struct xsig {
	uint8_t hash[SM_HASH_LEN];
	struct strbuf sig;
};

static void xsend(struct sync_xfer *x, uint16_t type, uint16_t flags, uint32_t id,
		  const void *p, size_t n)
{
	conn_send(x->c, type, flags, id, p, n);
	x->wire->out += GR_FRAME_HDR + n;
}

static struct xreq *add_req(struct sync_xfer *x, uint32_t id, int kind, size_t item)
{
	x->reqs = xrealloc(x->reqs, (x->nreqs + 1) * sizeof(*x->reqs));
	struct xreq *r = &x->reqs[x->nreqs++];
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->kind = kind;
	r->item = item;
	return r;
}

static struct xreq *find_req(struct sync_xfer *x, uint32_t id)
{
	/* The session's id is reused by COMMIT: prefer what is not done. */
	for (size_t i = x->nreqs; i-- > 0;)
		if (x->reqs[i].id == id && !x->reqs[i].done)
			return &x->reqs[i];
	return NULL;
}

static const char *item_path(struct sync_xfer *x, size_t item)
{
	return x->local->e[x->plan->files[item].local].path;
}

static void add_error(struct sync_xfer *x, const char *path, const char *msg)
{
	sv_pushf(&x->errors, "'%s': %s", path, msg);
}

static void dispatch(struct sync_xfer *x, const struct gr_frame *f)
{
	struct xreq *r = find_req(x, f->id);
	struct gr_err e = { 0 };

	x->wire->in += GR_FRAME_HDR + f->len;
	if (!r)
		return; /* late frames of something finished */
	if (r->kind == RQ_COMMIT && f->type == SYNC_MSG_STATE) {
		/* The answer to an optimistic OPEN: the session goes on, or it
		 * ended there because the host is not as planned for. */
		if (f->flags & GR_F_END) {
			x->rejected = r->done = r->failed = 1;
			x->fatal = gr_errf(x->err, GR_ECONFLICT, "the host changed since the last sync");
		}
		return;
	}
	if (f->type == GR_MSG_ERROR) {
		int code = conn_error_from_frame(f, &e);
		r->failed = r->done = 1;
		r->msg = xstrdup(e.msg);
		if (r->kind == RQ_FILE) {
			add_error(x, item_path(x, r->item), e.msg);
		} else if (r->kind == RQ_TAR) {
			sv_pushf(&x->errors, "the tar stream failed: %s", e.msg);
		} else if (r->kind == RQ_COMMIT && !x->fatal) {
			/* The session is over: nothing more can land. */
			*x->err = e;
			x->fatal = code;
		}
		return;
	}
	if (f->type == GR_MSG_DATA && r->kind == RQ_SIG) {
		sb_add(&r->data, f->payload, f->len);
		return;
	}
	if (f->type == GR_MSG_OK) {
		sb_add(&r->data, f->payload, f->len);
		r->done = 1;
	}
}

/* Read every answer already here, without waiting. */
static int poll_frames(struct sync_xfer *x)
{
	struct gr_frame f;
	int rc;

	while ((rc = conn_recv(x->c, &f, 0, x->err)) == 1)
		dispatch(x, &f);
	if (rc < 0)
		x->fatal = rc;
	return rc < 0 ? rc : 0;
}

static int pace(struct sync_xfer *x)
{
	int rc;

	if (x->fatal)
		return x->fatal;
	if ((rc = poll_frames(x)) < 0) /* writes what the transport takes now */
		return rc;
	while (conn_pending(x->c) > HIGH_WATER) {
		/* Wait for room, a millisecond at a time, reading answers. */
		while (conn_pending(x->c) > LOW_WATER) {
			struct gr_frame f;
			rc = conn_recv(x->c, &f, 1, x->err);
			if (rc < 0)
				return x->fatal = rc;
			if (rc == 1)
				dispatch(x, &f);
		}
	}
	return 0;
}

/* Wait for one more answer. */
static int wait_one(struct sync_xfer *x)
{
	struct gr_frame f;
	int rc = conn_recv(x->c, &f, -1, x->err);

	if (rc < 0)
		return x->fatal = rc;
	dispatch(x, &f);
	return x->fatal;
}

/* DATA frames for one stream, FRAME_DATA bytes at a time. */
struct fbuf {
	struct sync_xfer *x;
	uint32_t id;
	struct strbuf b;
};

static int fbuf_add(struct fbuf *fb, const void *p, size_t n)
{
	sb_add(&fb->b, p, n);
	if (fb->b.len < FRAME_DATA)
		return 0;
	xsend(fb->x, GR_MSG_DATA, 0, fb->id, fb->b.buf, fb->b.len);
	sb_reset(&fb->b);
	return pace(fb->x);
}

static void fbuf_end(struct fbuf *fb)
{
	xsend(fb->x, GR_MSG_DATA, GR_F_END, fb->id, fb->b.buf, fb->b.len);
	sb_release(&fb->b);
}

static void keep_sig(struct sync_xfer *x, const uint8_t hash[SM_HASH_LEN], struct strbuf *sig)
{
	x->sigs = xrealloc(x->sigs, (x->nsigs + 1) * sizeof(*x->sigs));
	struct xsig *s = &x->sigs[x->nsigs++];
	memcpy(s->hash, hash, SM_HASH_LEN);
	s->sig = *sig;
	memset(sig, 0, sizeof(*sig));
}

static void send_ops(struct sync_xfer *x)
{
	const struct sync_plan *p = x->plan;
	struct strbuf b = STRBUF_INIT;
	uint32_t n = (uint32_t)(p->deletes.n + p->mkdirs.n + p->nlinks);

	if (!n)
		return;
	put_u32(&b, n);
	for (size_t i = 0; i < p->deletes.n; i++) {
		put_u8(&b, SYNC_OP_DELETE);
		put_str(&b, p->deletes.v[i]);
	}
	for (size_t i = 0; i < p->mkdirs.n; i++) {
		put_u8(&b, SYNC_OP_MKDIR);
		put_str(&b, p->mkdirs.v[i]);
	}
	for (size_t i = 0; i < p->nlinks; i++) {
		const struct sm_entry *e = &x->local->e[p->links[i]];
		put_u8(&b, SYNC_OP_SYMLINK);
		put_str(&b, e->path);
		put_str(&b, e->link);
	}
	xsend(x, SYNC_MSG_OPS, 0, x->sid, b.buf, b.len);
	sb_release(&b);
}

/* FILE streams: the header goes with the first bytes (a declined delta
 * sends nothing and becomes a whole file). */
struct fsink {
	struct fbuf fb;
	size_t item;
	int kind, started;
};

static void file_header(struct fsink *fs)
{
	struct sync_xfer *x = fs->fb.x;
	const struct sync_item *it = &x->plan->files[fs->item];
	const struct sm_entry *l = &x->local->e[it->local];
	static const uint8_t zero[SM_HASH_LEN];
	struct strbuf b = STRBUF_INIT;

	put_u32(&b, x->sid);
	put_u8(&b, (uint8_t)fs->kind);
	put_str(&b, l->path);
	put_bytes(&b, fs->kind == SYNC_FILE_DELTA ? it->remote->hash : zero, SM_HASH_LEN);
	put_bytes(&b, l->hash, SM_HASH_LEN);
	put_u64(&b, l->size);
	put_u32(&b, l->mode);
	put_u64(&b, (uint64_t)l->mtime_ns);
	xsend(x, SYNC_MSG_FILE, 0, fs->fb.id, b.buf, b.len);
	sb_release(&b);
	fs->started = 1;
}

static int fsink_cb(void *arg, const void *p, size_t n)
{
	struct fsink *fs = arg;

	if (fs->fb.x->fatal)
		return -1;
	if (!fs->started)
		file_header(fs);
	return fbuf_add(&fs->fb, p, n) < 0 ? -1 : 0;
}

static int prog_cb(void *arg, uint64_t n)
{
	sync_progress_add(arg, n);
	return 0;
}

/* One large file, as a delta against old (a signature) or whole. */
static int do_file(struct sync_xfer *x, size_t item, const struct sync_sig *old)
{
	const struct sync_item *it = &x->plan->files[item];
	const struct sm_entry *l = &x->local->e[it->local];
	char *abs = xasprintf("%s/%s", x->root, l->path);
	struct fsink fs = { { x, conn_next_id(x->c), STRBUF_INIT }, item, 0, 0 };
	struct sync_send in = { abs, l->size, l->hash, x->leaves ? x->leaves[it->local] : NULL,
				old, fsink_cb, &fs };
	struct sync_send_res res = { 0 };
	struct gr_err e = { 0 };
	int rc;

	res.progress = prog_cb;
	res.parg = x->prog;
	fs.kind = old ? SYNC_FILE_DELTA : SYNC_FILE_WHOLE;
	rc = sync_send_file(&in, &res, &e);
	if (!rc && res.declined) {
		sb_release(&res.sig);
		memset(&res, 0, sizeof(res));
		res.progress = prog_cb;
		res.parg = x->prog;
		in.old = NULL;
		fs.kind = SYNC_FILE_WHOLE;
		rc = sync_send_file(&in, &res, &e);
	}
	if (x->fatal) {
		rc = x->fatal;
		goto out;
	}
	if (rc < 0) {
		/* The host keeps its version of this one. */
		if (fs.started)
			xsend(x, GR_MSG_CANCEL, 0, fs.fb.id, NULL, 0);
		x->revert[it->local] = 1;
		if (rc == GR_ECONFLICT)
			sv_pushf(&x->warnings, "%s; it goes with the next sync", e.msg);
		else
			add_error(x, l->path, e.msg);
		rc = 0;
		goto out;
	}
	if (!fs.started)
		file_header(&fs);
	fbuf_end(&fs.fb);
	add_req(x, fs.fb.id, RQ_FILE, item);
	if (fs.kind == SYNC_FILE_DELTA)
		x->files_delta++;
	else
		x->files_whole++;
	x->literal += res.literal;
	x->matched += res.matched;
	if (res.sig.len)
		keep_sig(x, l->hash, &res.sig);
	rc = pace(x);
out:
	sb_release(&fs.fb.b);
	sb_release(&res.sig);
	free(abs);
	return rc;
}

/* The tar stream's compression: ours, not libarchive's filter, so a file
 * that does not compress (a dataset, a checkpoint) goes through at a fast
 * level instead of costing a full search for matches (zstd level 3 spent
 * about 0.1 s of CPU on a 100 MB random file). A level change ends the
 * zstd frame; the agent's reader takes concatenated frames. */
struct tarz {
	struct fbuf fb;
	ZSTD_CCtx *z, *probe;
	int level;
	uint8_t out[1u << 17];
	uint8_t scratch[PROBE_LEN + PROBE_LEN / 64 + 1024];
};

static int fbuf_emit(void *arg, const void *p, size_t n)
{
	return fbuf_add(arg, p, n);
}

static int tarz_write(struct tarz *tz, const void *p, size_t n, ZSTD_EndDirective end)
{
	return sync_zstd_feed(tz->z, p, n, end, tz->out, sizeof(tz->out), fbuf_emit, &tz->fb);
}

static int tarz_level(struct tarz *tz, int level)
{
	if (level == tz->level)
		return 0;
	if (tarz_write(tz, NULL, 0, ZSTD_e_end) < 0)
		return -1;
	tz->level = level;
	return ZSTD_isError(ZSTD_CCtx_setParameter(tz->z, ZSTD_c_compressionLevel, level)) ? -1 : 0;
}

/* Does this sample compress by at least 3%? (zstd level 1: ~0.1 ms) */
static int compresses(struct tarz *tz, const void *p, size_t n)
{
	if (n > PROBE_LEN)
		n = PROBE_LEN;
	size_t c = ZSTD_compressCCtx(tz->probe, tz->scratch, sizeof(tz->scratch), p, n, 1);
	return ZSTD_isError(c) || c * 100 < n * 97;
}

static la_ssize_t tar_write(struct archive *a, void *arg, const void *p, size_t n)
{
	struct tarz *tz = arg;

	(void)a;
	if (tarz_write(tz, p, n, ZSTD_e_continue) < 0)
		return -1;
	return (la_ssize_t)n;
}

/* One file into the tar: exactly the planned size, hashed as read (unless
 * its block hashes are known: then only the weak sums for the signature). */
static int tar_one(struct sync_xfer *x, struct archive *a, struct tarz *tz, size_t item,
		   uint8_t *buf)
{
	const struct sync_item *it = &x->plan->files[item];
	struct sm_entry *l = &x->local->e[it->local];
	const uint8_t *leaves = x->leaves ? x->leaves[it->local] : NULL;
	char *abs = xasprintf("%s/%s", x->root, l->path);
	int fd = open(abs, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	int big = l->size >= x->delta_min, rc = 0, changed = 0;
	int unhashed = l->flags & SM_F_UNHASHED;
	struct sigmaker m;
	struct thash t;
	uint8_t hash[SM_HASH_LEN];

	free(abs);
	if (fd < 0) {
		x->revert[it->local] = 1;
		if (errno == ENOENT)
			sv_pushf(&x->warnings, "'%s' was deleted while being sent", l->path);
		else
			add_error(x, l->path, strerror(errno));
		return 0;
	}
	struct archive_entry *ae = archive_entry_new();
	archive_entry_copy_pathname(ae, l->path);
	archive_entry_set_size(ae, (la_int64_t)l->size);
	archive_entry_set_filetype(ae, AE_IFREG);
	archive_entry_set_perm(ae, (mode_t)l->mode);
	archive_entry_set_mtime(ae, (time_t)(l->mtime_ns / 1000000000LL),
				(long)(l->mtime_ns % 1000000000LL));
	if (archive_write_header(a, ae) != ARCHIVE_OK) {
		rc = x->fatal ? x->fatal : gr_errf(x->err, GR_EIO, "cannot write the tar stream: %s",
						   archive_error_string(a));
		goto out;
	}
	if (big)
		sigmaker_init(&m, l->size, leaves);
	else
		thash_init(&t, l->size);
	for (uint64_t done = 0; done < l->size;) {
		size_t want = l->size - done < READ_CHUNK ? (size_t)(l->size - done) : READ_CHUNK;
		ssize_t r = read(fd, buf, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) { /* shorter than planned: zeros, and say so */
			memset(buf, 0, want);
			r = (ssize_t)want;
			changed = 1;
		}
		if (big)
			sigmaker_update(&m, buf, (size_t)r);
		else
			thash_update(&t, buf, (size_t)r);
		if (!done && l->size >= PROBE_MIN && !compresses(tz, buf, (size_t)r) &&
		    tarz_level(tz, FAST_LEVEL) < 0) {
			rc = x->fatal ? x->fatal : gr_errf(x->err, GR_EIO, "cannot compress the tar stream");
			break;
		}
		if (archive_write_data(a, buf, (size_t)r) != r) {
			rc = x->fatal ? x->fatal : gr_errf(x->err, GR_EIO,
							   "cannot write the tar stream: %s",
							   archive_error_string(a));
			break;
		}
		done += (uint64_t)r;
		sync_progress_add(x->prog, (uint64_t)r);
	}
	if (!rc && tarz_level(tz, TAR_LEVEL) < 0)
		rc = x->fatal ? x->fatal : gr_errf(x->err, GR_EIO, "cannot compress the tar stream");
	struct strbuf sig = STRBUF_INIT;
	if (big) {
		sigmaker_final(&m, &sig, hash);
		sigmaker_release(&m);
	} else {
		thash_final(&t, hash);
	}
	if (!rc) {
		if (!unhashed && (changed || memcmp(hash, l->hash, SM_HASH_LEN)))
			/* The host gets what was read; the next sync sees the rest. */
			sv_pushf(&x->warnings, "'%s' changed while being sent; run 'gpurun sync' again",
				 l->path);
		memcpy(l->hash, hash, SM_HASH_LEN);
		l->flags &= (uint8_t)~SM_F_UNHASHED;
		if (sig.len)
			keep_sig(x, hash, &sig);
		x->files_tar++;
	}
	sb_release(&sig);
out:
	archive_entry_free(ae);
	close(fd);
	return rc;
}

static int do_tar(struct sync_xfer *x)
{
	struct tarz *tz = NULL;
	struct strbuf pl = STRBUF_INIT;
	struct archive *a = NULL;
	uint8_t *buf = NULL;
	int rc = 0, any = 0;

	for (size_t i = 0; i < x->plan->nfiles && !any; i++)
		any = x->plan->files[i].how == HOW_TAR;
	if (!any)
		return 0;
	tz = xcalloc(1, sizeof(*tz));
	tz->fb = (struct fbuf){ x, conn_next_id(x->c), STRBUF_INIT };
	tz->z = ZSTD_createCCtx();
	tz->probe = ZSTD_createCCtx();
	tz->level = TAR_LEVEL;
	if (!tz->z || !tz->probe)
		abort(); /* out of memory */
	ZSTD_CCtx_setParameter(tz->z, ZSTD_c_compressionLevel, TAR_LEVEL);
	put_u32(&pl, x->sid);
	xsend(x, SYNC_MSG_TAR, 0, tz->fb.id, pl.buf, pl.len);
	add_req(x, tz->fb.id, RQ_TAR, 0);
	a = archive_write_new();
	if (archive_write_set_format_pax(a) != ARCHIVE_OK ||
	    /* names are bytes: no charset conversion, whatever the locale */
	    archive_write_set_options(a, "hdrcharset=BINARY") != ARCHIVE_OK ||
	    /* no blocking: every write goes straight to tar_write */
	    archive_write_set_bytes_per_block(a, 0) != ARCHIVE_OK ||
	    archive_write_open2(a, tz, NULL, tar_write, NULL, NULL) != ARCHIVE_OK) {
		rc = gr_errf(x->err, GR_EIO, "cannot start the tar stream: %s",
			     archive_error_string(a));
		goto out;
	}
	buf = xmalloc(READ_CHUNK);
	for (size_t i = 0; i < x->plan->nfiles && !rc; i++)
		if (x->plan->files[i].how == HOW_TAR)
			rc = tar_one(x, a, tz, i, buf);
	if (!rc && archive_write_close(a) != ARCHIVE_OK)
		rc = x->fatal ? x->fatal : gr_errf(x->err, GR_EIO, "cannot finish the tar stream: %s",
						   archive_error_string(a));
	if (!rc && tarz_write(tz, NULL, 0, ZSTD_e_end) < 0)
		rc = x->fatal ? x->fatal : gr_errf(x->err, GR_EIO, "cannot finish the tar stream");
	if (!rc)
		fbuf_end(&tz->fb);
	gr_trace("sync: tar stream written");
out:
	if (a)
		archive_write_free(a);
	free(buf);
	if (tz) {
		sb_release(&tz->fb.b);
		ZSTD_freeCCtx(tz->z);
		ZSTD_freeCCtx(tz->probe);
		free(tz);
	}
	sb_release(&pl);
	return rc ? rc : pace(x);
}

static void ask_sig(struct sync_xfer *x, size_t item)
{
	const struct sync_item *it = &x->plan->files[item];
	struct strbuf b = STRBUF_INIT;
	uint32_t id = conn_next_id(x->c);

	put_u32(&b, x->sid);
	put_str(&b, x->local->e[it->local].path);
	xsend(x, SYNC_MSG_SIG, 0, id, b.buf, b.len);
	add_req(x, id, RQ_SIG, item);
	x->files_sig++;
	sb_release(&b);
}

/* A large file whose signature came from the cache or the host. */
static int delta_with(struct sync_xfer *x, size_t item, const struct strbuf *raw)
{
	struct sync_sig sig;

	if (raw && sync_sig_parse(raw->buf, raw->len, &sig) == 0)
		return do_file(x, item, &sig);
	return do_file(x, item, NULL);
}

static void build_expect(struct sync_xfer *x)
{
	for (size_t i = 0; i < x->local->n; i++) {
		const struct sm_entry *src = &x->local->e[i];
		if (x->revert[i]) {
			src = NULL;
			for (size_t k = 0; k < x->plan->nfiles; k++)
				if (x->plan->files[k].local == i)
					src = x->plan->files[k].prev;
			if (!src || src->type == SM_DIR)
				continue; /* nothing there now */
		}
		struct sm_entry *e = sm_add(&x->expect, x->local->e[i].path, src->type);
		e->mode = src->mode;
		e->size = src->size;
		e->mtime_ns = src->mtime_ns;
		memcpy(e->hash, src->hash, SM_HASH_LEN);
		e->link = src->link ? xstrdup(src->link) : NULL;
	}
}

static void send_commit(struct sync_xfer *x)
{
	struct strbuf b = STRBUF_INIT;
	uint8_t digest[SM_HASH_LEN];

	build_expect(x);
	sm_digest(&x->expect, digest);
	put_u32(&b, (uint32_t)x->plan->nmeta);
	for (size_t i = 0; i < x->plan->nmeta; i++) {
		const struct sm_entry *e = &x->local->e[x->plan->meta[i]];
		put_str(&b, e->path);
		put_u32(&b, e->mode);
		put_u64(&b, (uint64_t)e->mtime_ns);
	}
	put_bytes(&b, digest, SM_HASH_LEN);
	xsend(x, SYNC_MSG_COMMIT, 0, x->sid, b.buf, b.len);
	sb_release(&b);
}

static int parse_commit(struct sync_xfer *x, struct xreq *r)
{
	struct gr_rd rd;
	size_t n = 0;

	rd_init(&rd, r->data.buf, r->data.len);
	const uint8_t *d = get_bytes(&rd, &n);
	if (d && n == SM_HASH_LEN)
		memcpy(x->digest, d, SM_HASH_LEN);
	else
		rd.bad = 1;
	for (uint32_t i = 0, k = get_u32(&rd); i < k && !rd.bad; i++) {
		char *path = get_str(&rd), *msg = get_str(&rd);
		if (path && msg)
			add_error(x, path, msg);
		free(path);
		free(msg);
	}
	for (uint32_t i = 0, k = get_u32(&rd); i < k && !rd.bad; i++) {
		char *w = get_str(&rd);
		if (w)
			sv_push(&x->warnings, w);
		free(w);
	}
	return rd_done(&rd, x->err, "SYNC_COMMIT answer");
}

int sync_xfer_run(struct sync_xfer *x, struct gr_err *err)
{
	const struct sync_plan *p = x->plan;
	int rc = 0;

	x->err = err;
	x->revert = xcalloc(x->local->n ? x->local->n : 1, 1);
	add_req(x, x->sid, RQ_COMMIT, 0); /* the session: STATE, errors, COMMIT's answer */
	send_ops(x);
	rc = poll_frames(x); /* OPEN (when optimistic) and the ops leave now */
	for (size_t i = 0; i < p->nfiles; i++)
		if (p->files[i].how == HOW_DELTA_SIG)
			ask_sig(x, i);
	if (!rc && x->files_sig)
		rc = poll_frames(x); /* the requests that need an answer go first */
	/* The tar first: its small files are unpacked while deltas stream. */
	if (!rc)
		rc = do_tar(x);
	for (size_t i = 0; i < p->nfiles && !rc; i++) {
		if (p->files[i].how != HOW_DELTA)
			continue;
		struct strbuf raw = STRBUF_INIT;
		int have = sync_sig_load(x->root, p->files[i].remote->hash, &raw) == 0;
		rc = delta_with(x, i, have ? &raw : NULL);
		sb_release(&raw);
	}
	/* Deltas for which the host sends its signature, as they come. */
	for (size_t k = 0; k < x->nreqs && !rc; k++) {
		if (x->reqs[k].kind != RQ_SIG)
			continue;
		while (!x->reqs[k].done && !rc)
			rc = wait_one(x);
		if (rc)
			break;
		struct xreq r = x->reqs[k]; /* delta_with may move x->reqs */
		rc = delta_with(x, r.item, r.failed ? NULL : &r.data);
	}
	if (!rc) {
		send_commit(x);
		gr_trace("sync: commit sent");
		for (size_t k = 0; k < x->nreqs && !rc; k++)
			while (!x->reqs[k].done && !rc)
				rc = wait_one(x);
	}
	if (!rc && x->fatal)
		rc = x->fatal;
	if (!rc && !x->reqs[0].failed && (rc = parse_commit(x, &x->reqs[0])) == 0)
		x->committed = 1;
	gr_trace("sync: commit answered");
	return rc;
}

void sync_xfer_save_sigs(struct sync_xfer *x)
{
	for (size_t i = 0; i < x->nsigs; i++)
		sync_sig_save(x->root, x->sigs[i].hash, x->sigs[i].sig.buf, x->sigs[i].sig.len, NULL);
}

void sync_xfer_release(struct sync_xfer *x)
{
	for (size_t i = 0; i < x->nreqs; i++) {
		sb_release(&x->reqs[i].data);
		free(x->reqs[i].msg);
	}
	free(x->reqs);
	for (size_t i = 0; i < x->nsigs; i++)
		sb_release(&x->sigs[i].sig);
	free(x->sigs);
	free(x->revert);
	sv_clear(&x->warnings);
	sv_clear(&x->errors);
	sm_list_free(&x->expect);
}
