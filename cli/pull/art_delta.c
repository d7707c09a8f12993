/* Pull by delta on the client (see art_delta.h). */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "art_delta.h"
#include "art_limits.h"
#include "art_sigcache.h"
#include "compat.h"
#include "pull_below.h"
#include "job_proto.h"
#include "sync_apply.h"
#include "sync_delta.h"
#include "term.h"

#define BASES_MAX 256            /* files one pull takes as deltas (open fds) */
#define LEAVES_KEEP (32u << 20)  /* block hashes kept for the check, in all */
#define SIG_PIECE (2u << 20)     /* ART_SIG chunk */
#define READ_LEN (1u << 20)

void art_delta_free(struct art_delta *d)
{
	for (size_t i = 0; i < d->n; i++) {
		free(d->v[i].path);
		free(d->v[i].from);
		free(d->v[i].leaves);
		free(d->v[i].weak);
		if (d->v[i].fd >= 0)
			close(d->v[i].fd);
	}
	free(d->v);
	d->v = NULL;
	d->n = 0;
	free(d->sigdir);
	d->sigdir = NULL;
}

uint64_t art_delta_targets(const struct art_delta *d)
{
	uint64_t t = 0;

	for (size_t i = 0; d && i < d->n; i++)
		t += d->v[i].target;
	return t;
}

uint32_t art_delta_used(const struct art_delta *d)
{
	uint32_t n = 0;

	for (size_t i = 0; d && i < d->n; i++)
		n += d->v[i].used != 0;
	return n;
}

/* ---- is there a basis anywhere? ---- */

static int big_found;

static int big_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)p;
	(void)f;
	if (flag == FTW_F && S_ISREG(st->st_mode) && (uint64_t)st->st_size >= JOB_DELTA_MIN)
		big_found = 1;
	return big_found;
}

/* runs/ (dest's parent) and dest's own name in it. */
static char *runs_of(const char *dest, const char **self)
{
	const char *slash = strrchr(dest, '/');

	*self = slash ? slash + 1 : dest;
	return slash ? xasprintf("%.*s", (int)(slash - dest), dest) : xstrdup(".");
}

/* Another job's folder in runs/ holding a large file? */
static int other_big(const char *dest)
{
	const char *self;
	char *runs = runs_of(dest, &self);
	DIR *d = opendir(runs);
	struct dirent *de;

	big_found = 0;
	while (d && !big_found && (de = readdir(d))) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, self))
			continue;
		char *sub = xasprintf("%s/%s", runs, de->d_name);
		nftw(sub, big_one, 16, FTW_PHYS);
		free(sub);
	}
	if (d)
		closedir(d);
	free(runs);
	return big_found;
}

/* ---- finding a basis and signing it ---- */

/* The basis of path: dest's copy, else the newest in another job's folder. */
static int find_basis(const char *dest, const char *path, struct stat *st, char **from)
{
	const char *self;
	char *runs, *note = art_sibling(path, ART_NODELTA_SUFFIX), *nabs;
	int fd;
	struct stat nst;

	nabs = xasprintf("%s/%s", dest, note);
	free(note);
	if (lstat(nabs, &nst) == 0) { /* a delta of it failed: whole this time */
		free(nabs);
		return -1;
	}
	free(nabs);
	if ((fd = art_open_under(dest, path, st)) >= 0) {
		*from = xasprintf("%s/%s", dest, path);
		return fd;
	}
	runs = runs_of(dest, &self);
	DIR *d = opendir(runs);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' || !strcmp(de->d_name, self))
			continue;
		char *root = xasprintf("%s/%s", runs, de->d_name);
		struct stat s2;
		int f2 = art_open_under(root, path, &s2);
		if (f2 >= 0 && (fd < 0 || s2.st_mtime > st->st_mtime ||
				(s2.st_mtime == st->st_mtime &&
				 GR_ST_MTIME_NSEC(&s2) > GR_ST_MTIME_NSEC(st)))) {
			if (fd >= 0)
				close(fd);
			fd = f2;
			*st = s2;
			free(*from);
			*from = xasprintf("%s/%s", root, path);
		} else if (f2 >= 0) {
			close(f2);
		}
		free(root);
	}
	if (d)
		closedir(d);
	free(runs);
	return fd;
}

/* Weak sums and block hashes of blocks [first, last) of the basis. */
struct sign_part {
	int fd;
	uint64_t size, first, last;
	uint32_t block;
	uint32_t *weak;
	uint8_t *lv;
	int failed;
};

static void *sign_range(void *arg)
{
	struct sign_part *s = arg;
	size_t per = READ_LEN / s->block ? READ_LEN / s->block : 1;
	uint8_t *buf = xmalloc(per * s->block);

	for (uint64_t k = s->first; k < s->last && !s->failed;) {
		uint64_t off = k * s->block, nb = s->last - k < per ? s->last - k : per;
		size_t want = s->size - off < nb * s->block ? (size_t)(s->size - off) : nb * s->block;
		ssize_t r = pread(s->fd, buf, want, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)want) {
			s->failed = 1; /* changed meanwhile: no delta */
			break;
		}
		for (size_t p = 0; p < want; p += s->block, k++) {
			size_t len = want - p < s->block ? want - p : s->block;
			s->weak[k] = sm_weak_sum(buf + p, len);
			sm_leaf_hash(s->lv + k * SM_HASH_LEN, buf + p, len);
		}
	}
	free(buf);
	return NULL;
}

int art_delta_sign(struct art_basis *b, const char *sigdir, struct strbuf *sig)
{
	uint64_t size = (uint64_t)b->st.st_size, n = (size + b->block - 1) / b->block;
	uint32_t *weak = xmalloc((n ? n : 1) * sizeof(*weak));
	uint8_t *lv = xmalloc(n ? n * SM_HASH_LEN : 1);
	int rc = 0;

	if (art_sigcache_load(sigdir, &b->st, b->block, weak, lv) == 0) {
		rc = 1;
		goto done;
	}
	/* Blocks are independent: two threads on large files, as the
	 * content hash does (sync_index.c). */
	uint64_t mid = size >= (8u << 20) ? n / 2 : n;
	struct sign_part p[2] = { { b->fd, size, 0, mid, b->block, weak, lv, 0 },
				  { b->fd, size, mid, n, b->block, weak, lv, 0 } };
	pthread_t th;
	int threaded = mid < n && pthread_create(&th, NULL, sign_range, &p[1]) == 0;

	sign_range(&p[0]);
	if (threaded)
		pthread_join(th, NULL);
	else
		sign_range(&p[1]);
	if (p[0].failed || p[1].failed) {
		free(weak);
		free(lv);
		return -1;
	}
done:
	sync_sig_build(sig, b->block, n, weak, lv);
	free(b->leaves);
	free(b->weak);
	b->leaves = lv;
	b->weak = weak;
	return rc;
}

/* Stage sig on the host as signature index of this pull. */
static int upload(struct gr_conn *c, const char *project, const char *id, const char *token,
		  uint32_t index, const struct strbuf *sig, struct gr_err *err)
{
	for (size_t off = 0; off < sig->len || !off; off += SIG_PIECE) {
		struct strbuf pl = STRBUF_INIT;
		size_t n = sig->len - off < SIG_PIECE ? sig->len - off : SIG_PIECE;
		put_str(&pl, project);
		put_str(&pl, id);
		put_str(&pl, token);
		put_u32(&pl, index);
		put_u64(&pl, off);
		put_bytes(&pl, sig->buf + off, n);
		int rc = conn_request(c, GR_MSG_ART_SIG, pl.buf, pl.len, NULL, err);
		sb_release(&pl);
		if (rc < 0)
			return rc;
		if (off + n >= sig->len)
			break;
	}
	return 0;
}

static int cmp_basis(const void *x, const void *y)
{
	return strcmp(((const struct art_basis *)x)->path, ((const struct art_basis *)y)->path);
}

static int fatal(int rc)
{
	return rc == GR_ESSH || rc == GR_EIO || rc == GR_ETIMEOUT;
}

/* <root>/.gpurun/pull-sigs for dest = <root>/runs/<job>, absolute (the
 * extractor works inside dest); NULL if .gpurun is not there. */
static char *sigdir_of(const char *dest)
{
	const char *self;
	char *runs = runs_of(dest, &self), *root = runs_of(runs, &self);
	char *state = xasprintf("%s/.gpurun", root), *abs = realpath(state, NULL), *dir = NULL;

	if (abs)
		dir = xasprintf("%s/pull-sigs", abs);
	free(abs);
	free(state);
	free(root);
	free(runs);
	return dir;
}

int art_delta_prepare(struct gr_conn *c, const struct strbuf *req, const char *project,
		      const char *id, const char *dest, int have_big, struct art_delta *d,
		      struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, plan = STRBUF_INIT;
	struct gr_err e = { 0 };
	uint64_t kept = 0;
	int rc = 0;

	memset(d, 0, sizeof(*d));
	if (!have_big && !other_big(dest))
		return 0; /* no basis anywhere: no plan round */
	/* The plan: which large files the pull would bring. */
	sb_add(&pl, req->buf, req->len);
	put_u32(&pl, GR_ART_PLAN_ONLY);
	put_str(&pl, "");
	put_u32(&pl, 0);
	rc = conn_request(c, GR_MSG_ART_PULL, pl.buf, pl.len, &plan, &e);
	sb_release(&pl);
	if (rc < 0) {
		if (fatal(rc)) {
			*err = e;
			sb_release(&plan);
			return rc;
		}
		sb_release(&plan);
		return 0; /* an agent that cannot plan: whole files */
	}
	struct gr_rd rd;
	rd_init(&rd, plan.buf, plan.len);
	uint32_t n = get_u32(&rd);
	if (n > JOB_DELTA_SIGS_MAX)
		rd.bad = 1;
	for (uint32_t i = 0; i < n && !rd.bad; i++) {
		char *path = get_str(&rd);
		uint64_t size = get_u64(&rd);
		struct stat st;
		char *from = NULL;
		int fd;
		if (!path || rd.bad || !sm_path_ok(path) || d->n >= BASES_MAX ||
		    (fd = find_basis(dest, path, &st, &from)) < 0) {
			free(path);
			continue;
		}
		if (!d->n)
			d->v = xcalloc(BASES_MAX, sizeof(*d->v));
		d->v[d->n++] = (struct art_basis){ .path = path, .from = from, .fd = fd,
						   .target = size, .st = st,
						   .block = sm_block_len(size) };
	}
	if (!rd.bad && rd_done(&rd, &e, "ART_PULL") < 0)
		rd.bad = 1; /* bytes after the list */
	sb_release(&plan);
	gr_trace("pull: plan answered (%zu to sign)", d->n);
	if (rd.bad || !d->n) {
		art_delta_free(d);
		return 0;
	}
	/* Each basis's signature, staged on the host under a fresh token. */
	uint8_t rnd[8];
	int ufd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (ufd < 0 || read_full(ufd, rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd)) {
		if (ufd >= 0)
			close(ufd);
		art_delta_free(d);
		return 0;
	}
	close(ufd);
	for (int i = 0; i < 8; i++)
		snprintf(d->token + 2 * i, 3, "%02x", rnd[i]);
	size_t kept_n = 0;
	d->sigdir = sigdir_of(dest);
	for (size_t i = 0; i < d->n; i++) {
		struct art_basis *b = &d->v[i];
		struct strbuf sig = STRBUF_INIT;
		int how = art_delta_sign(b, d->sigdir, &sig);
		if (how < 0 || sig.len > JOB_DELTA_SIG_MAX ||
		    (rc = upload(c, project, id, d->token, (uint32_t)kept_n, &sig, &e)) < 0) {
			sb_release(&sig);
			free(b->leaves);
			free(b->weak);
			b->leaves = NULL;
			b->weak = NULL;
			if (rc < 0 && fatal(rc)) {
				*err = e;
				art_delta_free(d);
				return rc;
			}
			rc = 0;
			close(b->fd); /* no delta for this one */
			free(b->path);
			free(b->from);
			*b = (struct art_basis){ .fd = -1 };
			continue;
		}
		uint64_t lvn = (sig.len - 12) / (4 + SM_HASH_LEN) * SM_HASH_LEN;
		gr_trace("pull: %s %s (%zu bytes of signature)", how ? "uploaded the cached signature of"
			 : "signed and uploaded", ts(b->path), sig.len);
		sb_release(&sig);
		if (kept + lvn <= LEAVES_KEEP) {
			kept += lvn;
		} else {
			free(b->leaves);
			free(b->weak);
			b->leaves = NULL;
			b->weak = NULL;
		}
		b->index = (uint32_t)kept_n;
		d->v[kept_n++] = *b;
		if (kept_n - 1 != i)
			*b = (struct art_basis){ .fd = -1 };
	}
	d->n = kept_n;
	if (!d->n) {
		art_delta_free(d);
		return 0;
	}
	qsort(d->v, d->n, sizeof(*d->v), cmp_basis);
	return 0;
}

/* ---- a delta entry ---- */

static int unhex(const char *h, uint8_t *out, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int v = 0;
		for (int j = 0; j < 2; j++) {
			char ch = h[2 * i + j];
			int x = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
			if (x < 0)
				return -1;
			v = v << 4 | x;
		}
		out[i] = (uint8_t)v;
	}
	return h[2 * n] ? -1 : 0;
}

/* "SIZE HASH": the file's size and content hash. */
static int parse_value(const char *v, uint64_t *target, uint8_t hash[SM_HASH_LEN])
{
	const char *sp = strchr(v, ' ');
	char num[24];
	long long t;

	if (!sp || sp == v || (size_t)(sp - v) >= sizeof(num))
		return -1;
	memcpy(num, v, (size_t)(sp - v));
	num[sp - v] = '\0';
	if (parse_ll(num, 0, INT64_MAX, &t) < 0)
		return -1;
	*target = (uint64_t)t;
	return unhex(sp + 1, hash, SM_HASH_LEN);
}

static struct art_basis *basis_of(const struct art_delta *d, const char *path)
{
	struct art_basis key = { .path = (char *)path };

	return d && d->n ? bsearch(&key, d->v, d->n, sizeof(key), cmp_basis) : NULL;
}

/* The delta failed: leave a note, so the next pull takes the file whole. */
static void note_nodelta(const char *final)
{
	char *note = art_sibling(final, ART_NODELTA_SUFFIX);
	int fd = art_open_below(note, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd >= 0)
		close(fd);
	free(note);
}

/* Is the basis still the file the signature was made of? Then its block
 * hashes stand for the blocks copied in place. */
static int basis_same(const struct art_basis *b)
{
	struct stat st;

	return b->leaves && fstat(b->fd, &st) == 0 && st.st_size == b->st.st_size &&
	       st.st_mtime == b->st.st_mtime &&
	       GR_ST_MTIME_NSEC(&st) == GR_ST_MTIME_NSEC(&b->st) &&
	       st.st_ctime == b->st.st_ctime &&
	       GR_ST_CTIME_NSEC(&st) == GR_ST_CTIME_NSEC(&b->st) && st.st_ino == b->st.st_ino;
}

/* The signature of the file a delta just made (fd, renamed into place):
 * its block hashes are made; the weak sums of blocks copied in place are
 * the basis's, the others are read back (what the delta sent). Kept for
 * the next pull of it (art_sigcache.h). */
static void keep_signature(const char *sigdir, int fd, uint64_t size, uint32_t blk,
			   const uint32_t *bweak, const uint8_t *reuse, const uint8_t *leaves)
{
	uint64_t nb = (size + blk - 1) / blk;
	uint32_t *weak = xmalloc((nb ? nb : 1) * sizeof(*weak));
	uint8_t *buf = xmalloc(blk);

	for (uint64_t k = 0; k < nb; k++) {
		if (reuse[k]) {
			weak[k] = bweak[k];
			continue;
		}
		size_t len = size - k * blk < blk ? (size_t)(size - k * blk) : blk;
		if (pread(fd, buf, len, (off_t)(k * blk)) != (ssize_t)len)
			goto out;
		weak[k] = sm_weak_sum(buf, len);
	}
	art_sigcache_store(sigdir, fd, blk, weak, leaves);
out:
	free(buf);
	free(weak);
}

int art_delta_entry(struct archive *in, struct archive_entry *e, const char *final,
		    int64_t size, const char *value, struct art_limits *lim, struct gr_err *err)
{
	struct art_basis *b = basis_of(lim->delta, final);
	char *part = art_sibling(final, ART_PART_SUFFIX), *info = art_sibling(final, ART_INFO_SUFFIX);
	uint8_t want[SM_HASH_LEN], got_hash[SM_HASH_LEN];
	uint64_t target = 0, got = 0, wb_done = 0;
	ZSTD_DStream *z = NULL;
	uint8_t *zout = NULL, *leaves = NULL, *reuse = NULL;
	struct dapply dp;
	int fd = -1, rc = 0, r, zend = 0, have_dp = 0;
	const void *buf;
	size_t len;
	int64_t off;

	if (!b || b->used || b->fd < 0) {
		rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': the host sends a delta "
			     "this pull did not ask for", ts(final));
		goto out;
	}
	b->used = 1;
	if (parse_value(value, &target, want) < 0) {
		rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': a malformed delta header",
			     ts(final));
		goto out;
	}
	/* The room it takes is the file's size, not the delta's. */
	if ((rc = art_space_check(".", target, 1, lim->min_free_pct, err)) < 0) {
		gr_err_prefix(err, "no room for artifact '%s'", ts(final));
		goto out;
	}
	art_unlink_below(info); /* a delta is not resumed: a part of a whole file is stale */
	/* (a delta's file may be new here: its basis is another job's) */
	fd = art_mkdirs_below(part) < 0 ? -1 : art_open_below(part, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0) {
		rc = gr_errf(err, GR_EIO, "cannot write artifact '%s': %s", ts(final), strerror(errno));
		goto out;
	}
	dapply_init(&dp, b->fd, (uint64_t)b->st.st_size, fd, target);
	have_dp = 1;
	z = ZSTD_createDStream();
	/* The host picks the window: ours are 2 MiB (sync_delta.c's level);
	 * more than 8 MiB is refused, not allocated (zstd allows 128 MiB). */
	ZSTD_DCtx_setParameter(z, ZSTD_d_windowLogMax, 23);
	zout = xmalloc(ZSTD_DStreamOutSize());
	while ((r = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK) {
		if (!art_data_ok(off, len, size) || (uint64_t)off != got) {
			rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': its data runs past "
				     "the %lld bytes its header announced", ts(final), (long long)size);
			goto fail;
		}
		got += len;
		ZSTD_inBuffer zi = { buf, len, 0 };
		for (;;) {
			ZSTD_outBuffer zo = { zout, ZSTD_DStreamOutSize(), 0 };
			size_t zr = ZSTD_decompressStream(z, &zo, &zi);
			if (ZSTD_isError(zr)) {
				rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': a corrupt delta (%s)",
					     ts(final), ZSTD_getErrorName(zr));
				goto fail;
			}
			zend = zr == 0;
			if (zo.pos && dapply_feed(&dp, zout, zo.pos) < 0) {
				rc = gr_errf(err, dp.errnum ? GR_EIO : GR_EPROTO,
					     "refusing artifact '%s': %s", ts(final), dp.err);
				goto fail;
			}
			/* Writeback as it is made (as for whole files, pull.c):
			 * the fsync before the rename finds little left. */
			if (dp.out - wb_done >= (8u << 20)) {
				compat_writeback(fd, (off_t)wb_done, (off_t)(dp.out - wb_done));
				wb_done = dp.out;
			}
			if (zi.pos == zi.size && zo.pos < zo.size)
				break;
		}
	}
	if (r != ARCHIVE_EOF) {
		rc = gr_errf(err, GR_EIO, "cannot extract artifact '%s': %s", ts(final),
			     archive_error_string(in) ? archive_error_string(in) : "truncated");
		goto drop;
	}
	if (got != (uint64_t)size || !zend || !dp.done || dp.out != target) {
		rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': the delta is incomplete "
			     "(%llu of %llu bytes made)", ts(final), (unsigned long long)dp.out,
			     (unsigned long long)target);
		goto fail;
	}
	/* The content hash of what came out: blocks copied in place keep the
	 * basis's block hashes (made from these very bytes), the rest is read
	 * back and hashed. */
	uint32_t blk = sm_block_len(target);
	uint64_t nb = (target + blk - 1) / blk;
	int known = blk == b->block && basis_same(b);
	leaves = xmalloc(nb ? nb * SM_HASH_LEN : 1);
	reuse = xcalloc(nb ? nb : 1, 1);
	if (known)
		dapply_reusable_at(&dp, target, blk, reuse);
	if (sync_hash_blocks(fd, target, known ? b->leaves : NULL, known ? reuse : NULL, leaves) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot read back artifact '%s': %s", ts(final),
			     strerror(errno));
		goto drop;
	}
	thash_from_leaves(leaves, nb, target, got_hash);
	if (memcmp(got_hash, want, SM_HASH_LEN)) {
		rc = gr_errf(err, GR_EPROTO, "artifact '%s' did not come out as the host has it: "
			     "the delta against '%s' gives another content hash", ts(final), ts(b->from));
		goto fail;
	}
	struct timespec tv[2] = { { 0, UTIME_OMIT },
				  { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
	if (fchmod(fd, archive_entry_perm(e) & 0755) < 0 || futimens(fd, tv) < 0 || fsync(fd) < 0 ||
	    rename(part, final) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot write artifact '%s': %s", ts(final), strerror(errno));
		goto drop;
	}
	char *note = art_sibling(final, ART_NODELTA_SUFFIX);
	art_unlink_below(note);
	free(note);
	if (known && b->weak)
		keep_signature(lim->delta->sigdir, fd, target, blk, b->weak, reuse, leaves);
	goto out;
fail:
	/* A delta that does not give the host's file: the copy here stays as
	 * it was, and the next pull fetches the file whole. */
	note_nodelta(final);
	gr_hintf(err, "'%s' is as it was; the next pull fetches it whole", ts(final));
drop:
	art_unlink_below(part);
out:
	if (fd >= 0)
		close(fd);
	if (have_dp)
		dapply_release(&dp);
	ZSTD_freeDStream(z);
	free(zout);
	free(leaves);
	free(reuse);
	free(part);
	free(info);
	return rc;
}
