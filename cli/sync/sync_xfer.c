/* Carrying out a sync plan over one connection (see sync_xfer.h): ops,
 * large files (sync_delta), COMMIT; the tar stream is sync_xfer_tar.c,
 * the requests in flight and paced output sync_wire.c. Answers are read
 * between chunks, so signatures arriving meanwhile are used as soon as
 * the tar is done. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync_delta.h"
#include "sync_index.h"
#include "sync_proto.h"
#include "sync_steps.h"
#include "sync_wire.h"

#define OPS_FRAME (256u << 10) /* OPS payloads are cut at about this size */

/* OPS frames, each cut near OPS_FRAME bytes (a tree of 100,000 folders
 * makes megabytes of them): deletions children first, folders parents
 * first, symlinks, then the mode/time-only changes COMMIT applies. */
struct opsbuf {
	struct sync_xfer *x;
	struct strbuf b;
	uint32_t n;
};

static void ops_flush(struct opsbuf *o)
{
	struct strbuf pl = STRBUF_INIT;

	if (!o->n)
		return;
	put_u32(&pl, o->n);
	sb_add(&pl, o->b.buf, o->b.len);
	sync_wire_send(o->x, SYNC_MSG_OPS, 0, o->x->sid, pl.buf, pl.len);
	sb_release(&pl);
	sb_reset(&o->b);
	o->n = 0;
}

static void ops_next(struct opsbuf *o, uint8_t op, const char *path)
{
	if (o->b.len >= OPS_FRAME)
		ops_flush(o);
	put_u8(&o->b, op);
	put_str(&o->b, path);
	o->n++;
}

static void send_ops(struct sync_xfer *x)
{
	const struct sync_plan *p = x->plan;
	struct opsbuf o = { x, STRBUF_INIT, 0 };

	for (size_t i = 0; i < p->deletes.n; i++)
		ops_next(&o, SYNC_OP_DELETE, p->deletes.v[i]);
	for (size_t i = 0; i < p->mkdirs.n; i++)
		ops_next(&o, SYNC_OP_MKDIR, p->mkdirs.v[i]);
	for (size_t i = 0; i < p->nlinks; i++) {
		const struct sm_entry *e = &x->local->e[p->links[i]];
		ops_next(&o, SYNC_OP_SYMLINK, e->path);
		put_str(&o.b, e->link);
	}
	for (size_t i = 0; i < p->nmeta; i++) {
		const struct sm_entry *e = &x->local->e[p->meta[i]];
		ops_next(&o, SYNC_OP_META, e->path);
		put_u32(&o.b, e->mode);
		put_u64(&o.b, (uint64_t)e->mtime_ns);
	}
	ops_flush(&o);
	sb_release(&o.b);
}

/* FILE streams: the header goes with the first bytes (a declined delta
 * sends nothing and becomes a whole file), and the request is registered
 * with it, so an early answer (the host refuses the file) is seen while
 * the rest is still being read, and stops it. */
struct fsink {
	struct sync_wire_data fb;
	size_t item, req;
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
	put_bytes(&b, fs->kind == SYNC_FILE_DELTA ? sync_item_remote(x->plan, it)->hash : zero,
		  SM_HASH_LEN);
	put_bytes(&b, l->hash, SM_HASH_LEN);
	put_u64(&b, l->size);
	put_u32(&b, l->mode);
	put_u64(&b, (uint64_t)l->mtime_ns);
	sync_wire_send(x, SYNC_MSG_FILE, 0, fs->fb.id, b.buf, b.len);
	sb_release(&b);
	fs->req = sync_wire_add_req(x, fs->fb.id, SYNC_RQ_FILE, fs->item);
	fs->started = 1;
}

static int fsink_cb(void *arg, const void *p, size_t n)
{
	struct fsink *fs = arg;
	struct sync_xfer *x = fs->fb.x;

	if (x->fatal)
		return -1;
	if (!fs->started)
		file_header(fs);
	if (x->reqs[fs->req].done) /* answered before the end: refused */
		return -1;
	return sync_wire_data_add(&fs->fb, p, n) < 0 || x->reqs[fs->req].done ? -1 : 0;
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
	struct fsink fs = { { x, conn_next_id(x->c), STRBUF_INIT }, item, 0, 0, 0 };
	struct sync_send_res res = { 0 };
	struct gr_err e = { 0 };
	uint64_t shown = x->prog->done;
	int rc, fd;

	if (x->nospace) { /* it would not fit either: the host keeps its version */
		sync_wire_revert(x, item);
		return 0;
	}
	fd = sync_tree_open_file(x->tree, l->path, l->dev, l->ino, &e);
	if (fd < 0) {
		rc = fd;
		goto failed;
	}
	struct sync_send in = { fd, l->path, l->size, l->hash,
				l->leaves, old, fsink_cb, &fs };
	res.progress = prog_cb;
	res.parg = x->prog;
	fs.kind = old ? SYNC_FILE_DELTA : SYNC_FILE_WHOLE;
	rc = sync_send_file(&in, &res, &e);
	if (!rc && res.declined) {
		/* What the probe read is read again, whole: show it once. */
		x->prog->done = shown;
		sb_release(&res.sig);
		memset(&res, 0, sizeof(res));
		res.progress = prog_cb;
		res.parg = x->prog;
		in.old = NULL;
		fs.kind = SYNC_FILE_WHOLE;
		rc = sync_send_file(&in, &res, &e);
	}
	close(fd);
	if (x->fatal) {
		rc = x->fatal;
		goto out;
	}
	if (fs.started && x->reqs[fs.req].failed) {
		/* The host refused it (sync_wire.c noted why); it keeps its version. */
		sync_wire_revert(x, item);
		rc = 0;
		goto out;
	}
	if (rc < 0)
		goto failed;
	if (!fs.started)
		file_header(&fs);
	sync_wire_data_end(&fs.fb);
	if (fs.kind == SYNC_FILE_DELTA)
		x->files_delta++;
	else
		x->files_whole++;
	x->literal += res.literal;
	x->matched += res.matched;
	if (res.sig.len)
		sync_wire_keep_sig(x, l->hash, &res.sig);
	rc = sync_wire_pace(x);
	goto out;
failed:
	/* The host keeps its version of this one. */
	if (fs.started) {
		sync_wire_send(x, GR_MSG_CANCEL, 0, fs.fb.id, NULL, 0);
		x->reqs[fs.req].done = x->reqs[fs.req].failed = 1; /* no answer comes */
	}
	sync_wire_revert(x, item);
	if (rc == GR_ECONFLICT || rc == GR_ENOTFOUND)
		sv_pushf(&x->warnings, "%s; not sent (the next sync sends what is there then)",
			 e.msg);
	else
		sync_wire_add_error(x, l->path, SYNC_ERR_LOCAL, e.msg, l->size);
	rc = 0;
out:
	sb_release(&fs.fb.b);
	sb_release(&res.sig);
	return rc;
}

static void ask_sig(struct sync_xfer *x, size_t item)
{
	const struct sync_item *it = &x->plan->files[item];
	struct strbuf b = STRBUF_INIT;
	uint32_t id = conn_next_id(x->c);

	put_u32(&b, x->sid);
	put_str(&b, x->local->e[it->local].path);
	sync_wire_send(x, SYNC_MSG_SIG, 0, id, b.buf, b.len);
	sync_wire_add_req(x, id, SYNC_RQ_SIG, item);
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

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

/* x->reverted sorted, each once (items are in the order of their local
 * entries); how many. */
static size_t reverted_sorted(struct sync_xfer *x)
{
	uint32_t *rev = x->reverted;
	size_t n = 0;

	qsort(rev, x->nreverted, sizeof(*rev), cmp_u32);
	for (size_t i = 0; i < x->nreverted; i++)
		if (!n || rev[n - 1] != rev[i])
			rev[n++] = rev[i];
	return n;
}

/* What the host holds after the COMMIT: local, but for the files that
 * went back to what the host had (revert). With none reverted that is
 * local itself (the fields the manifest holds are the same): no copy,
 * which at 100k files was 17 MiB of the client's peak. */
static void build_expect(struct sync_xfer *x)
{
	const struct sync_item *f = x->plan->files;
	uint32_t *rev = x->reverted;
	size_t n = 0, k = 0;

	if (!x->nreverted) {
		x->expected = x->local;
		return;
	}
	n = reverted_sorted(x);
	x->expected = &x->expect;
	sm_reserve(&x->expect, x->local->n);
	for (size_t i = 0; i < x->local->n; i++) {
		const struct sm_entry *src = &x->local->e[i];
		while (k < n && f[rev[k]].local < i)
			k++;
		if (k < n && f[rev[k]].local == i) {
			src = sync_item_prev(x->plan, &f[rev[k]]);
			if (!src || src->type == SM_DIR)
				continue; /* nothing there now */
		}
		sm_add_copy(&x->expect, src); /* (the host's is at the same path) */
	}
}

/* COMMIT goes first, its expect empty (no agent ever read it: the
 * client compares the digests, PROTOCOL.md), and what the host should
 * then hold is digested while the agent commits: at 300k entries each
 * takes ~50-100 ms. */
static void send_commit(struct sync_xfer *x)
{
	struct strbuf b = STRBUF_INIT;
	struct gr_err e = { 0 };

	put_bytes(&b, x->expect_digest, 0);
	sync_wire_send(x, SYNC_MSG_COMMIT, 0, x->sid, b.buf, b.len);
	sb_release(&b);
	conn_pump(x->c, &e); /* (a failure shows in the wait that follows) */
	if (x->windows) { /* (what each window sent, digested as it went) */
		x->windows->digest(x->windows->arg, x->expect_digest);
		x->expected = x->local;
		return;
	}
	build_expect(x);
	if (x->whole_digest)
		x->whole_digest(x->whole_arg, x->expected, x->expect_digest);
	else
		sm_digest(x->expected, x->expect_digest);
}

static int parse_commit(struct sync_xfer *x, struct sync_wire_req *r)
{
	struct gr_rd rd;
	size_t n = 0;

	sb_add(&r->data, r->ans.buf, r->ans.len); /* after its long part, if any */
	rd_init(&rd, r->data.buf, r->data.len);
	const uint8_t *d = get_bytes(&rd, &n);
	if (d && n == SM_HASH_LEN)
		memcpy(x->digest, d, SM_HASH_LEN);
	else
		rd.bad = 1;
	for (uint32_t i = 0, k = get_u32(&rd); i < k && !rd.bad; i++) {
		char *path = get_str(&rd);
		uint32_t kind = get_u32(&rd);
		char *msg = get_str(&rd);
		if (path && msg && sm_path_ok(path)) {
			const struct sm_entry *l = sm_find(x->local, path);
			sync_wire_add_error(x, path, (int)kind, msg, l && l->type == SM_FILE ? l->size : 0);
		} else {
			rd.bad = 1;
		}
		free(path);
		free(msg);
	}
	for (uint32_t i = 0, k = get_u32(&rd); i < k && !rd.bad; i++) {
		char *w = get_str(&rd), *t = w ? sync_tame(w) : NULL;
		if (t)
			sv_push(&x->warnings, t);
		free(w);
		free(t);
	}
	return rd_done(&rd, x->err, "SYNC_COMMIT answer");
}

/* COMMIT and its answer (and every other answer before it). */
static int commit(struct sync_xfer *x, int rc)
{
	if (!rc) {
		send_commit(x);
		gr_trace("sync: commit sent");
		for (size_t k = 0; k < x->nreqs && !rc; k++)
			while (!x->reqs[k].done && !rc)
				rc = sync_wire_wait_one(x);
	}
	if (!rc && x->fatal)
		rc = x->fatal;
	if (!rc && !x->reqs[0].failed && (rc = parse_commit(x, &x->reqs[0])) == 0)
		x->committed = 1;
	gr_trace("sync: commit answered");
	return rc;
}

/* The plan a window at a time (x->windows): every window's folders and
 * links first (the agent stages folders before a file stream begins),
 * then every window's files in one tar; each window's entries are
 * handed back as sent. What is held is one window. */
static int run_windows(struct sync_xfer *x)
{
	const struct sync_windows *w = x->windows;
	const struct sync_plan *whole = x->plan;
	struct sm_list *none = x->local, win = { 0 };
	struct sync_plan p = { 0 };
	struct sync_tar t = { 0 };
	int rc, k = 0, open = 0;

	rc = w->rewind(w->arg, x->err);
	while (!rc && (k = w->next(w->arg, &win, &p, x->err)) > 0) {
		x->plan = &p;
		x->local = &win;
		send_ops(x);
		rc = sync_wire_poll(x);
		sync_plan_free(&p);
		sm_list_free(&win);
	}
	if (!rc && k < 0)
		rc = k;
	sm_list_free(&win); /* (a window cut short) */
	if (!rc)
		rc = w->rewind(w->arg, x->err);
	if (!rc && w->nfiles)
		open = (rc = sync_xfer_tar_open(x, &t)) == 0 || t.tz;
	while (!rc && (k = w->next(w->arg, &win, &p, x->err)) > 0) {
		x->plan = &p;
		x->local = &win;
		x->nreverted = 0;
		if (open)
			rc = sync_xfer_tar_files(x, &t);
		if (!rc)
			w->sent(w->arg, &win, &p, x->reverted, x->nreverted ? reverted_sorted(x) : 0);
		for (size_t i = 0; i < win.n; i++)
			free(win.e[i].leaves);
		sync_plan_free(&p);
		sm_list_free(&win);
	}
	if (!rc && k < 0)
		rc = k;
	sm_list_free(&win); /* (a window cut short) */
	x->nreverted = 0;
	x->plan = whole;
	x->local = none;
	if (open)
		rc = sync_xfer_tar_close(x, &t, rc);
	return commit(x, rc);
}

int sync_xfer_run(struct sync_xfer *x, struct gr_err *err)
{
	const struct sync_plan *p = x->plan;
	int rc = 0;

	x->err = err;
	sync_wire_add_req(x, x->sid, SYNC_RQ_SESSION, 0); /* STATE, errors, COMMIT's answer */
	if (x->windows)
		return run_windows(x);
	send_ops(x);
	rc = sync_wire_poll(x); /* OPEN (when optimistic) and the ops leave now */
	for (size_t i = 0; i < p->nfiles; i++)
		if (p->files[i].how == HOW_DELTA_SIG)
			ask_sig(x, i);
	if (!rc && x->files_sig)
		rc = sync_wire_poll(x); /* the requests that need an answer go first */
	/* The tar first: its small files are unpacked while deltas stream. */
	if (!rc)
		rc = sync_xfer_tar(x);
	for (size_t i = 0; i < p->nfiles && !rc; i++) {
		if (p->files[i].how != HOW_DELTA)
			continue;
		struct strbuf raw = STRBUF_INIT;
		int have = sync_sig_load(x->root, sync_item_remote(p, &p->files[i])->hash, &raw) == 0;
		rc = delta_with(x, i, have ? &raw : NULL);
		sb_release(&raw);
	}
	/* Deltas for which the host sends its signature, as they come. */
	for (size_t k = 0; k < x->nreqs && !rc; k++) {
		if (x->reqs[k].kind != SYNC_RQ_SIG)
			continue;
		while (!x->reqs[k].done && !rc)
			rc = sync_wire_wait_one(x);
		if (rc)
			break;
		struct sync_wire_req r = x->reqs[k]; /* delta_with may move x->reqs */
		rc = delta_with(x, r.item, r.failed ? NULL : &r.data);
	}
	return commit(x, rc);
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
		sb_release(&x->reqs[i].ans);
	}
	free(x->reqs);
	for (size_t i = 0; i < x->nsigs; i++)
		sb_release(&x->sigs[i].sig);
	free(x->sigs);
	free(x->reverted);
	for (size_t i = 0; i < x->nerrs; i++) {
		free(x->errs[i].path);
		free(x->errs[i].msg);
	}
	free(x->errs);
	free(x->host_root);
	sv_clear(&x->warnings);
	sm_list_free(&x->expect);
}
