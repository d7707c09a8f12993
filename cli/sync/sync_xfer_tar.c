/* The tar.zst stream of a sync (see sync_xfer.h): written by libarchive
 * (pax, no padding after the last block) into our own zstd stream, straight
 * into DATA frames. Every file is opened through the project folder
 * (sync_open.h) and must still be the file the scan saw. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "sync_delta.h"
#include "sync_fp.h"
#include "sync_proto.h"
#include "sync_wire.h"

#define READ_CHUNK (256u << 10)
#define RAW_LEVEL INT32_MIN    /* for what does not compress: raw blocks (zraw) */
#define PROBE_MIN (256u << 10) /* files this large are probed first */
#define PROBE_LEN (64u << 10)

/* The tar stream's compression: ours, not libarchive's filter, so a file
 * that does not compress (a dataset, a checkpoint) goes through in raw
 * blocks instead of costing a full search for matches (zstd level 3 spent
 * about 0.1 s of CPU on a 100 MB random file; even its fastest level
 * copied each byte three times). A change ends the zstd frame; the
 * agent's reader takes concatenated frames.
 *
 * What compresses goes at a level that follows the link, as zstd --adapt
 * does. Every ADAPT_WINDOW bytes: if the sender spent more than half the
 * time waiting for the transport, the link is what limits, and the level
 * goes up a step (to LEVEL_MAX); if it spent less than a fifth, twice in
 * a row, the CPU is, and it goes down (to LEVEL_MIN). (Twice: for a window
 * after a step up, the buffers on the way, a few MB, hide a slow link.)
 * It starts at LEVEL_MIN; a slow link shows in the first window, as the
 * transport's queue holds 1 MiB. On loopback, level 3 compressed the
 * bench's source files at 128 MB/s and level 1 at 237 MB/s, for 7% more
 * bytes: the 3,000-file first sync (where both ends share two cores)
 * used ~75 ms less CPU of ~2 s, and took 3-5% less time. On a 100 Mbit
 * link level 3 saves those bytes. */
#define LEVEL_MIN 1
#define LEVEL_MAX 3
#define ADAPT_WINDOW (4u << 20)

struct tarz {
	struct sync_wire_data fb;
	size_t req;          /* the TAR request (x->reqs index) */
	int dead;            /* the stream was abandoned: write nothing more */
	ZSTD_CCtx *z, *probe;
	int level;           /* the current one: zlevel or RAW_LEVEL */
	int zlevel;          /* the zstd context's */
	uint64_t win_in, win_t0, win_paced; /* the window: bytes in, start, x->paced_ns then */
	int quiet;           /* windows in a row that hardly waited */
	struct zraw raw;
	uint8_t out[1u << 17];
	uint8_t scratch[PROBE_LEN + PROBE_LEN / 64 + 1024];
};

static int data_emit(void *arg, const void *p, size_t n)
{
	return sync_wire_data_add(arg, p, n);
}

static void window_start(struct tarz *tz)
{
	tz->win_in = 0;
	tz->win_t0 = now_ns();
	tz->win_paced = tz->fb.x->paced_ns;
}

static int tarz_level(struct tarz *tz, int level);

/* A window's end: the level for the next one (see struct tarz). */
static int adapt(struct tarz *tz)
{
	uint64_t dt = now_ns() - tz->win_t0, waited = tz->fb.x->paced_ns - tz->win_paced;
	int level = tz->zlevel;

	tz->quiet = waited * 5 < dt ? tz->quiet + 1 : 0;
	if (waited * 2 > dt && level < LEVEL_MAX)
		level++;
	else if (tz->quiet >= 2 && level > LEVEL_MIN)
		level--;
	if (level < tz->zlevel)
		tz->quiet = 0;
	if (level != tz->zlevel)
		gr_trace("sync: tar level %d (waited for the link %llu of %llu ms)", level,
			 (unsigned long long)(waited / 1000000), (unsigned long long)(dt / 1000000));
	window_start(tz);
	return tarz_level(tz, level);
}

static int tarz_write(struct tarz *tz, const void *p, size_t n, ZSTD_EndDirective end)
{
	if (tz->dead) /* abandoned: nothing more goes on that stream */
		return 0;
	if (tz->level == RAW_LEVEL) {
		if (zraw_put(&tz->raw, p, n) < 0)
			return -1;
		if (end != ZSTD_e_end)
			return 0;
		tz->level = tz->zlevel;
		window_start(tz); /* the raw bytes' time is not the compressor's */
		return zraw_end(&tz->raw);
	}
	if (sync_zstd_feed(tz->z, p, n, end, tz->out, sizeof(tz->out), data_emit, &tz->fb) < 0)
		return -1;
	tz->win_in += n;
	return tz->win_in >= ADAPT_WINDOW && end == ZSTD_e_continue ? adapt(tz) : 0;
}

/* The level: RAW_LEVEL, or a zstd level (ends the zstd frame when it
 * changes). */
static int tarz_level(struct tarz *tz, int level)
{
	if (level == tz->level)
		return 0;
	if (tarz_write(tz, NULL, 0, ZSTD_e_end) < 0)
		return -1;
	tz->level = level;
	if (level == RAW_LEVEL)
		return tz->dead ? 0 : zraw_begin(&tz->raw);
	tz->zlevel = level;
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
	const uint8_t *leaves = l->leaves;
	struct gr_err e = { 0 };
	int fd = sync_tree_open_file(x->tree, l->path, l->dev, l->ino, &e);
	int big = l->size >= x->delta_min, rc = 0, changed = 0, stopped = 0;
	int unhashed = l->flags & SM_F_UNHASHED;
	struct sigmaker m;
	struct thash t;
	uint8_t hash[SM_HASH_LEN];

	if (fd < 0) {
		sync_wire_revert(x, item);
		if (fd == GR_ENOTFOUND)
			sv_pushf(&x->warnings, "'%s' was deleted while being sent", l->path);
		else if (fd == GR_ECONFLICT)
			sv_pushf(&x->warnings, "%s while gpurun ran; not sent (the next sync "
				 "sends what is there then)", e.msg);
		else
			sync_wire_add_error(x, l->path, SYNC_ERR_LOCAL, e.msg, l->size);
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
	if (big) {
		sigmaker_init(&m, l->size, leaves);
		if (!leaves) /* (else sync_hash_entry recorded them) */
			sigmaker_fps(&m, sync_fp, SYNC_FP_LEN);
	} else {
		thash_init(&t, l->size);
	}
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
		    tarz_level(tz, RAW_LEVEL) < 0) {
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
		if (x->reqs[tz->req].failed) { /* the host ended the stream: it says why */
			stopped = tz->dead = 1;
			break;
		}
	}
	if (!rc && tarz_level(tz, tz->zlevel) < 0)
		rc = x->fatal ? x->fatal : gr_errf(x->err, GR_EIO, "cannot compress the tar stream");
	struct strbuf sig = STRBUF_INIT;
	if (big) {
		sigmaker_final(&m, &sig, hash);
		/* What the next hashing of an edit here can skip (sync_fp.h). */
		if (m.fps && !rc && !stopped && !changed && m.k == m.nb)
			sync_fp_save(x->root, l->path, m.block, m.k, m.fps, m.leaves);
		sigmaker_release(&m);
	} else {
		thash_final(&t, hash);
	}
	if (!rc && stopped) {
		sync_wire_revert(x, item);
	} else if (!rc) {
		if (!unhashed && (changed || memcmp(hash, l->hash, SM_HASH_LEN)))
			/* The host gets what was read; the next sync sees the rest. */
			sv_pushf(&x->warnings, "'%s' changed while being sent; run 'gpurun sync' again",
				 l->path);
		memcpy(l->hash, hash, SM_HASH_LEN);
		l->flags &= (uint8_t)~SM_F_UNHASHED;
		if (sig.len)
			sync_wire_keep_sig(x, hash, &sig);
		x->files_tar++;
	}
	sb_release(&sig);
out:
	archive_entry_free(ae);
	close(fd);
	return rc;
}

static int tar_stopped(struct sync_xfer *x, struct tarz *tz)
{
	return x->reqs[tz->req].failed || x->nospace;
}

int sync_xfer_tar_open(struct sync_xfer *x, struct sync_tar *t)
{
	struct tarz *tz;
	struct strbuf pl = STRBUF_INIT;
	struct archive *a;

	memset(t, 0, sizeof(*t));
	t->tz = tz = xcalloc(1, sizeof(*tz));
	tz->fb = (struct sync_wire_data){ x, conn_next_id(x->c), STRBUF_INIT };
	tz->z = ZSTD_createCCtx();
	tz->probe = ZSTD_createCCtx();
	tz->level = tz->zlevel = LEVEL_MIN;
	tz->raw = (struct zraw){ data_emit, &tz->fb };
	if (!tz->z || !tz->probe)
		abort(); /* out of memory */
	ZSTD_CCtx_setParameter(tz->z, ZSTD_c_compressionLevel, LEVEL_MIN);
	window_start(tz);
	put_u32(&pl, x->sid);
	sync_wire_send(x, SYNC_MSG_TAR, 0, tz->fb.id, pl.buf, pl.len);
	sb_release(&pl);
	tz->req = sync_wire_add_req(x, tz->fb.id, SYNC_RQ_TAR, 0);
	t->a = a = archive_write_new();
	t->buf = xmalloc(READ_CHUNK);
	if (archive_write_set_format_pax(a) != ARCHIVE_OK ||
	    /* names are bytes: no charset conversion, whatever the locale */
	    archive_write_set_options(a, "hdrcharset=BINARY") != ARCHIVE_OK ||
	    /* no blocking: every write goes straight to tar_write */
	    archive_write_set_bytes_per_block(a, 0) != ARCHIVE_OK ||
	    archive_write_open2(a, tz, NULL, tar_write, NULL, NULL) != ARCHIVE_OK)
		return gr_errf(x->err, GR_EIO, "cannot start the tar stream: %s",
			       archive_error_string(a));
	return 0;
}

int sync_xfer_tar_files(struct sync_xfer *x, struct sync_tar *t)
{
	int rc = 0;

	for (size_t i = 0; i < x->plan->nfiles && !rc; i++) {
		if (x->plan->files[i].how != HOW_TAR)
			continue;
		if (tar_stopped(x, t->tz)) /* the host keeps what it has */
			sync_wire_revert(x, i);
		else
			rc = tar_one(x, t->a, t->tz, i, t->buf);
	}
	return rc;
}

int sync_xfer_tar_close(struct sync_xfer *x, struct sync_tar *t, int rc)
{
	struct tarz *tz = t->tz;
	struct archive *a = t->a;

	if (!tz)
		return rc;
	if (!rc && tar_stopped(x, tz)) {
		tz->dead = 1; /* nothing more goes on that stream */
		goto out;
	}
	if (!rc && archive_write_close(a) != ARCHIVE_OK)
		rc = x->fatal ? x->fatal : gr_errf(x->err, GR_EIO, "cannot finish the tar stream: %s",
						   archive_error_string(a));
	if (!rc && tarz_write(tz, NULL, 0, ZSTD_e_end) < 0)
		rc = x->fatal ? x->fatal : gr_errf(x->err, GR_EIO, "cannot finish the tar stream");
	if (!rc)
		sync_wire_data_end(&tz->fb);
	gr_trace("sync: tar stream written");
out:
	tz->dead = 1;
	if (a)
		archive_write_free(a);
	free(t->buf);
	sb_release(&tz->fb.b);
	ZSTD_freeCCtx(tz->z);
	ZSTD_freeCCtx(tz->probe);
	free(tz);
	memset(t, 0, sizeof(*t));
	return rc ? rc : sync_wire_pace(x);
}

int sync_xfer_tar(struct sync_xfer *x)
{
	struct sync_tar t;
	int rc, any = 0;

	for (size_t i = 0; i < x->plan->nfiles && !any; i++)
		any = x->plan->files[i].how == HOW_TAR;
	if (!any)
		return 0;
	if ((rc = sync_xfer_tar_open(x, &t)) == 0)
		rc = sync_xfer_tar_files(x, &t);
	return sync_xfer_tar_close(x, &t, rc);
}
