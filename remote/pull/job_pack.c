/* Pack a job's artifacts as tar.zst (see job_pack.h). Only regular files
 * travel: a symlink in the job folder is not followed (but for the
 * persistent paths gpurun made), so a job cannot make gpurun send files
 * from outside its folder and the project's. The walk plans (which files,
 * how big) so the stream can open with what it will hold; then exactly
 * those are packed, however the files change meanwhile. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "job_delta.h"
#include "agent_job.h"
#include "job_pack.h"
#include "job_proto.h"
#include "sync_delta.h"
#include "util.h"

static int S_ISLNK_AT(int dfd, const char *name)
{
	struct stat st;

	return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
}

/* The archive's compression is ours, not libarchive's filter, so a file
 * that does not compress (a checkpoint of float weights, mostly) goes
 * through in raw blocks (zraw, sync_delta.h: written straight from the
 * read buffer) instead of a full search for matches, as sync's sender
 * does (cli/sync/sync_xfer_tar.c): a 1 GiB random file took ~3 s of CPU at
 * level 3 here. Each change ends a zstd frame; the client's reader takes
 * concatenated frames. */
#define PACK_LEVEL 3
#define RAW_LEVEL INT32_MIN
#define PROBE_MIN (256u << 10) /* files this large are probed first */
#define PROBE_LEN (64u << 10)
#define READ_CHUNK (256u << 10)

struct zout {
	ZSTD_CCtx *z, *probe;
	int level, fd, failed;
	struct zraw raw;
	uint8_t out[1u << 17];
	uint8_t scratch[PROBE_LEN + PROBE_LEN / 64 + 1024];
};

static int zout_emit(void *arg, const void *p, size_t n)
{
	return write_full(((struct zout *)arg)->fd, p, n);
}

static int zout_feed(struct zout *zo, const void *p, size_t n, ZSTD_EndDirective end)
{
	ZSTD_inBuffer in = { p, n, 0 };

	if (zo->failed)
		return -1;
	if (zo->level == RAW_LEVEL) {
		int rc = zraw_put(&zo->raw, p, n);
		if (!rc && end == ZSTD_e_end) {
			zo->level = PACK_LEVEL; /* the zstd context's level never changed */
			rc = zraw_end(&zo->raw);
		}
		if (rc < 0)
			zo->failed = 1;
		return rc;
	}
	for (;;) {
		ZSTD_outBuffer out = { zo->out, sizeof(zo->out), 0 };
		size_t left = ZSTD_compressStream2(zo->z, &out, &in, end);
		if (ZSTD_isError(left) || (out.pos && write_full(zo->fd, zo->out, out.pos) < 0)) {
			zo->failed = 1;
			return -1;
		}
		if (end == ZSTD_e_end ? left == 0 : in.pos == in.size)
			return 0;
	}
}

static int zout_level(struct zout *zo, int level)
{
	if (level == zo->level)
		return 0;
	if (zout_feed(zo, NULL, 0, ZSTD_e_end) < 0)
		return -1;
	zo->level = level;
	if (level == RAW_LEVEL) {
		if (zraw_begin(&zo->raw) < 0)
			zo->failed = 1;
		return zo->failed ? -1 : 0;
	}
	return ZSTD_isError(ZSTD_CCtx_setParameter(zo->z, ZSTD_c_compressionLevel, level)) ? -1 : 0;
}

/* Does this sample compress by at least 3%? (zstd level 1: ~0.1 ms) */
static int compresses(struct zout *zo, const void *p, size_t n)
{
	if (n > PROBE_LEN)
		n = PROBE_LEN;
	size_t c = ZSTD_compressCCtx(zo->probe, zo->scratch, sizeof(zo->scratch), p, n, 1);
	return ZSTD_isError(c) || c * 100 < n * 97;
}

static la_ssize_t zout_write(struct archive *a, void *arg, const void *p, size_t n)
{
	(void)a;
	return zout_feed(arg, p, n, ZSTD_e_continue) < 0 ? -1 : (la_ssize_t)n;
}

struct planned {
	char *rel;
	uint64_t size;
	uint64_t skip; /* the client has the first skip bytes (a resumed pull) */
	const struct pack_sig *sig; /* the client's copy, to send a delta against */
	int dfd;       /* the delta, made before the announcement (-1: whole) */
	uint64_t dsize;
	uint8_t hash[SM_HASH_LEN]; /* the file's content hash, for the delta */
	struct stat st;            /* the file as the delta was made of it */
	const char *why;           /* with a signature, sent whole: why */
};

struct packer {
	struct archive *a;
	const struct pack_opts *o;
	const char *const *pat;
	size_t npat;
	struct pack_have *have;
	size_t nhave;
	struct pack_stats *st;
	struct gr_err *err;
	struct zout *zo;
	struct planned *plan;    /* what the walk found to send, in its order */
	size_t nplan, aplan;
	uint64_t plan_bytes;
};

static int cmp_have(const void *x, const void *y)
{
	return strcmp(((const struct pack_have *)x)->path, ((const struct pack_have *)y)->path);
}

static int unchanged(struct packer *p, const char *rel, const struct stat *st)
{
	struct pack_have key = { .path = (char *)rel };
	struct pack_have *h = p->nhave ? bsearch(&key, p->have, p->nhave, sizeof(*h), cmp_have) : NULL;

	return h && h->size == (uint64_t)st->st_size && h->mtime_s == (int64_t)st->st_mtim.tv_sec &&
	       h->mtime_ns == (uint32_t)st->st_mtim.tv_nsec;
}

static int arc_fail(struct packer *p, const char *what)
{
	return gr_errf(p->err, GR_EIO, "cannot pack artifacts (%s): %s", what,
		       archive_error_string(p->a) ? archive_error_string(p->a) : "unknown error");
}

/* Modified at or after since_ms? A file system that keeps whole seconds
 * only (no nanoseconds at all) is compared by the second. */
static int since(const struct stat *st, uint64_t ms)
{
	if (!st->st_mtim.tv_nsec)
		return (uint64_t)st->st_mtim.tv_sec >= ms / 1000;
	return (uint64_t)st->st_mtim.tv_sec * 1000 + (uint64_t)st->st_mtim.tv_nsec / 1000000 >= ms;
}

/* In a persistent path: modified while the job ran? */
static int in_window(const struct pack_opts *o, const struct stat *st)
{
	return since(st, o->since_ms) && (!o->until_ms || !since(st, o->until_ms + 1000));
}

static int is_persist(const struct pack_opts *o, const char *rel)
{
	return o && o->persist && job_persist_is(o->persist, rel);
}

static int cmp_part(const void *x, const void *y)
{
	return strcmp(((const struct pack_part *)x)->path, ((const struct pack_part *)y)->path);
}

static int cmp_sig(const void *x, const void *y)
{
	return strcmp(((const struct pack_sig *)x)->path, ((const struct pack_sig *)y)->path);
}

/* How much of rel the client holds already from a pull cut short: what
 * its part file holds, if it was begun from the file as it is now (same
 * size and mtime); else 0. */
static uint64_t resumable(const struct pack_opts *o, const char *rel, const struct stat *st)
{
	struct pack_part key = { .path = (char *)rel };
	const struct pack_part *h = o->nparts ? bsearch(&key, o->parts, o->nparts, sizeof(*h), cmp_part)
					      : NULL;

	if (!h || h->size != (uint64_t)st->st_size || h->mtime_s != (int64_t)st->st_mtim.tv_sec ||
	    h->mtime_ns != (uint32_t)st->st_mtim.tv_nsec || h->have >= h->size)
		return 0;
	return h->have;
}

/* First pass: a file the patterns select; planned unless the client has
 * it already (or, in a persistent path, unless this job modified it).
 * Nothing is read yet: a stat (never through a link but a persistent
 * path's own) tells what the plan needs. */
static int add_file(struct packer *p, int dfd, const char *name, const char *rel, int shared,
		    int follow)
{
	struct stat st;

	if (fstatat(dfd, name, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : gr_errf(p->err, GR_EIO, "cannot stat '%s': %s", rel, strerror(errno));
	if (!S_ISREG(st.st_mode) || (shared && !in_window(p->o, &st)))
		return 0;
	p->st->matched++;
	if (unchanged(p, rel, &st))
		return 0;
	if (p->nplan == p->aplan) {
		p->aplan = p->aplan ? 2 * p->aplan : 64;
		p->plan = xrealloc(p->plan, p->aplan * sizeof(*p->plan));
	}
	uint64_t skip = resumable(p->o, rel, &st);
	struct pack_sig key = { .path = (char *)rel };
	const struct pack_sig *sig = p->o->nsigs && !skip && (uint64_t)st.st_size >= JOB_DELTA_MIN
		? bsearch(&key, p->o->sigs, p->o->nsigs, sizeof(key), cmp_sig) : NULL;
	p->plan[p->nplan++] = (struct planned){ .rel = xstrdup(rel), .size = (uint64_t)st.st_size,
						.skip = skip, .sig = sig, .dfd = -1 };
	p->plan_bytes += (uint64_t)st.st_size - skip;
	return 0;
}

/* rel below the folder root, opened one component at a time, never
 * through a link but a persistent path's own (the walk followed only
 * those; if another link appeared since, the file is left out). -1 when
 * it cannot be opened so. */
static int open_below(struct packer *p, int root, const char *rel)
{
	char *copy = xstrdup(rel), *part = copy, *slash;
	int dfd = root, fd = -1, shared = 0;

	while ((slash = strchr(part, '/'))) {
		*slash = '\0';
		int follow = !shared && is_persist(p->o, copy);
		int next = openat(dfd, part, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (follow ? 0 : O_NOFOLLOW));
		shared = shared || follow;
		*slash = '/';
		if (dfd != root)
			close(dfd);
		dfd = next;
		if (dfd < 0)
			break;
		part = slash + 1;
	}
	if (dfd >= 0)
		fd = openat(dfd, part, O_RDONLY | O_CLOEXEC |
			    (!shared && is_persist(p->o, rel) ? 0 : O_NOFOLLOW));
	if (dfd >= 0 && dfd != root)
		close(dfd);
	free(copy);
	return fd;
}

/* A file as a delta (PROTOCOL.md, ART_PULL: deltas): an entry of the
 * delta's size carrying the file's size and content hash. */
static int pack_delta(struct packer *p, const struct planned *pl)
{
	static char buf[READ_CHUNK];
	struct archive_entry *e = archive_entry_new();
	char v[32 + 2 * SM_HASH_LEN + 2], hex[2 * SM_HASH_LEN + 1];
	int rc = 0;

	sm_hex(pl->hash, hex);
	int n = snprintf(v, sizeof(v), "%llu %s", (unsigned long long)pl->size, hex);
	archive_entry_set_pathname(e, pl->rel);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, pl->st.st_mode & 0755);
	archive_entry_set_size(e, (la_int64_t)pl->dsize);
	archive_entry_xattr_add_entry(e, GR_ART_DELTA_XATTR, v, (size_t)n);
	archive_entry_set_mtime(e, pl->st.st_mtim.tv_sec, pl->st.st_mtim.tv_nsec);
	if (archive_write_header(p->a, e) != ARCHIVE_OK) {
		rc = arc_fail(p, pl->rel);
		goto out;
	}
	/* zstd already: it does not shrink again */
	if (zout_level(p->zo, RAW_LEVEL) < 0) {
		rc = gr_errf(p->err, GR_EIO, "cannot send the artifacts: %s", strerror(errno));
		goto out;
	}
	for (uint64_t left = pl->dsize; left > 0;) {
		size_t want = left > sizeof(buf) ? sizeof(buf) : (size_t)left;
		ssize_t r = read(pl->dfd, buf, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) { /* cannot be: the client finds the hash wrong */
			memset(buf, 0, want);
			r = (ssize_t)want;
		}
		if (archive_write_data(p->a, buf, (size_t)r) != r) {
			rc = arc_fail(p, pl->rel);
			goto out;
		}
		left -= (uint64_t)r;
	}
	if (zout_level(p->zo, PACK_LEVEL) < 0) {
		rc = gr_errf(p->err, GR_EIO, "cannot send the artifacts: %s", strerror(errno));
		goto out;
	}
	p->st->sent++;
	p->st->bytes += pl->dsize;
	p->st->deltas++;
out:
	archive_entry_free(e);
	return rc;
}

/* Before the announcement: the deltas of the files the client sent
 * signatures for, each into a temp file, so their sizes are known. One
 * that would not be smaller goes whole. */
static void make_deltas(struct packer *p, int root)
{
	for (size_t i = 0; i < p->nplan; i++) {
		struct planned *pl = &p->plan[i];
		if (!pl->sig || p->o->tmpfd < 0)
			continue;
		int fd = open_below(p, root, pl->rel);
		pl->why = "it could not be opened";
		if (fd < 0)
			continue;
		if (fstat(fd, &pl->st) == 0 && S_ISREG(pl->st.st_mode) &&
		    job_delta_make(fd, pl->size, pl->rel, pl->sig->sigpath, p->o->tmpfd, &pl->dfd,
				   &pl->dsize, pl->hash, &pl->why) == 1)
			p->plan_bytes -= pl->size - pl->dsize;
		close(fd);
	}
}

/* The plan only: which files could go as deltas (large, not resumed). */
static void put_plan(struct packer *p, struct strbuf *out)
{
	uint32_t n = 0;
	struct strbuf list = STRBUF_INIT;

	for (size_t i = 0; i < p->nplan && n < JOB_DELTA_SIGS_MAX && list.len < (2u << 20); i++) {
		if (p->plan[i].skip || p->plan[i].size < JOB_DELTA_MIN)
			continue;
		put_str(&list, p->plan[i].rel);
		put_u64(&list, p->plan[i].size);
		n++;
	}
	put_u32(out, n);
	sb_add(out, list.buf, list.len);
	sb_release(&list);
}

/* Second pass: one planned file, never more of it than announced (a file
 * that grew since is cut at its planned size). */
static int pack_file(struct packer *p, int root, const struct planned *pl)
{
	struct archive_entry *e = NULL;
	struct stat st;
	static char buf[READ_CHUNK]; /* one packer per process (a helper) */
	int fd = open_below(p, root, pl->rel), rc = 0;

	if (pl->dfd >= 0) { /* the delta made before the announcement */
		if (fd >= 0)
			close(fd);
		return pack_delta(p, pl);
	}
	if (fd < 0)
		return 0; /* gone since it was planned: less than announced */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		goto out;
	if ((uint64_t)st.st_size > pl->size)
		st.st_size = (off_t)pl->size;
	/* Resumed: only the bytes past what the client has, from the
	 * offset the entry names; the file was planned unchanged since its
	 * part was begun. One that shrank below that offset since is left
	 * out (the next pull fetches it again). */
	uint64_t skip = pl->skip;
	if (skip > (uint64_t)st.st_size || (skip && lseek(fd, (off_t)skip, SEEK_SET) != (off_t)skip))
		goto out; /* shrank since it was planned: less than announced */
	st.st_size -= (off_t)skip;
	e = archive_entry_new();
	archive_entry_set_pathname(e, pl->rel);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, st.st_mode & 0755);
	archive_entry_set_size(e, st.st_size);
	if (skip) {
		char v[32];
		int n = snprintf(v, sizeof(v), "%llu", (unsigned long long)skip);
		archive_entry_xattr_add_entry(e, GR_ART_RESUME_XATTR, v, (size_t)n);
	}
	archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
	if (archive_write_header(p->a, e) != ARCHIVE_OK) {
		rc = arc_fail(p, pl->rel);
		goto out;
	}
	/* Send exactly the size in the header: a file that shrinks while we
	 * read is padded with zeros (its mtime changed, so the next pull
	 * fetches it again); one that grows is cut at the header's size. */
	for (int64_t left = st.st_size; left > 0;) {
		size_t want = left > (int64_t)sizeof(buf) ? sizeof(buf) : (size_t)left;
		ssize_t r = read(fd, buf, want);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			memset(buf, 0, want);
			r = (ssize_t)want;
		}
		if (left == st.st_size && st.st_size >= (off_t)PROBE_MIN &&
		    !compresses(p->zo, buf, (size_t)r) && zout_level(p->zo, RAW_LEVEL) < 0) {
			rc = gr_errf(p->err, GR_EIO, "cannot send the artifacts: %s", strerror(errno));
			goto out;
		}
		if (archive_write_data(p->a, buf, (size_t)r) != r) {
			rc = arc_fail(p, pl->rel);
			goto out;
		}
		left -= r;
	}
	if (zout_level(p->zo, PACK_LEVEL) < 0) {
		rc = gr_errf(p->err, GR_EIO, "cannot send the artifacts: %s", strerror(errno));
		goto out;
	}
	p->st->sent++;
	p->st->bytes += (uint64_t)st.st_size;
out:
	archive_entry_free(e);
	close(fd);
	return rc;
}

static int wanted(struct packer *p, const char *rel, int *descend)
{
	*descend = 0;
	for (size_t i = 0; i < p->npat; i++) {
		if (job_glob_match(p->pat[i], rel))
			return 1;
		if (job_glob_may_descend(p->pat[i], rel))
			*descend = 1;
	}
	return 0;
}

/* Walk dfd (relative path prefix rel, "" at the top). all: every file
 * below is wanted (a pattern named this folder). shared: inside a
 * persistent path. */
static int walk(struct packer *p, int dfd, const char *rel, int all, int shared)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;
	struct strvec names = STRVEC_INIT;
	int rc = 0;

	if (!d) {
		close(dfd);
		return gr_errf(p->err, GR_EIO, "cannot list '%s': %s", *rel ? rel : ".", strerror(errno));
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		    !(!*rel && !strcmp(de->d_name, ".gpurun")))
			sv_push(&names, de->d_name);
	/* Sorted, so the archive's order is stable. */
	for (size_t i = 1; i < names.n; i++)
		for (size_t j = i; j > 0 && strcmp(names.v[j - 1], names.v[j]) > 0; j--) {
			char *t = names.v[j];
			names.v[j] = names.v[j - 1];
			names.v[j - 1] = t;
		}
	for (size_t i = 0; i < names.n && rc == 0; i++) {
		char *sub = *rel ? xasprintf("%s/%s", rel, names.v[i]) : xstrdup(names.v[i]);
		struct stat st;
		int descend = 0, want;

		int follow = !shared && S_ISLNK_AT(dirfd(d), names.v[i]) && is_persist(p->o, sub);
		if (fstatat(dirfd(d), names.v[i], &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) == 0) {
			want = all || wanted(p, sub, &descend);
			if (S_ISREG(st.st_mode) && want) {
				rc = add_file(p, dirfd(d), names.v[i], sub, shared || follow, follow);
			} else if (S_ISDIR(st.st_mode) && (want || descend)) {
				int sfd = openat(dirfd(d), names.v[i], O_RDONLY | O_DIRECTORY | O_CLOEXEC |
						 (follow ? 0 : O_NOFOLLOW));
				if (sfd >= 0)
					rc = walk(p, sfd, sub, want, shared || follow);
			}
		}
		free(sub);
	}
	sv_clear(&names);
	closedir(d);
	return rc;
}

int job_pack(const char *dir, const char *const *patterns, size_t npat,
	     struct pack_have *have, size_t nhave, const struct pack_opts *o, int out_fd,
	     struct pack_stats *st, struct gr_err *err)
{
	static const struct pack_opts none = { .tmpfd = -1 };
	struct packer p = { NULL, o ? o : &none, patterns, npat, have, nhave, st, err, NULL, NULL, 0, 0, 0 };
	unsigned char hdr[GR_ART_ANNOUNCE_LEN];
	struct zout *zo = xcalloc(1, sizeof(*zo));
	int rc = 0, dfd;

	*st = (struct pack_stats){ 0 };
	if (nhave)
		qsort(have, nhave, sizeof(*have), cmp_have);
	if (p.o->nparts)
		qsort(p.o->parts, p.o->nparts, sizeof(*p.o->parts), cmp_part);
	if (p.o->nsigs)
		qsort(p.o->sigs, p.o->nsigs, sizeof(*p.o->sigs), cmp_sig);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return gr_errf(err, GR_EIO, "cannot open '%s': %s", dir, strerror(errno));
	if ((rc = walk(&p, dfd, "", 0, 0)) < 0)
		goto out;
	if (p.o->plan) {
		put_plan(&p, p.o->plan);
		goto out;
	}
	if (p.o->nsigs) {
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			make_deltas(&p, dfd);
			close(dfd);
		}
	}
	/* The announcement (PROTOCOL.md, ART_PULL): "GRA1", u32 files,
	 * u64 bytes, big-endian. */
	memcpy(hdr, GR_ART_MAGIC, 4);
	for (int i = 0; i < 4; i++)
		hdr[4 + i] = (unsigned char)((uint32_t)p.nplan >> (24 - 8 * i));
	for (int i = 0; i < 8; i++)
		hdr[8 + i] = (unsigned char)(p.plan_bytes >> (56 - 8 * i));
	if (write_full(out_fd, hdr, sizeof(hdr)) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot send the artifacts: %s", strerror(errno));
		goto out;
	}
	zo->z = ZSTD_createCCtx();
	zo->probe = ZSTD_createCCtx();
	if (!zo->z || !zo->probe)
		abort(); /* out of memory */
	zo->level = PACK_LEVEL;
	zo->fd = out_fd;
	zo->raw = (struct zraw){ zout_emit, zo };
	ZSTD_CCtx_setParameter(zo->z, ZSTD_c_compressionLevel, PACK_LEVEL);
	p.zo = zo;
	p.a = archive_write_new();
	if (archive_write_set_format_pax(p.a) != ARCHIVE_OK ||
	    /* no blocking: every write goes straight into the zstd stream,
	     * with no zero padding after the last entry's end blocks */
	    archive_write_set_bytes_per_block(p.a, 0) != ARCHIVE_OK ||
	    archive_write_open2(p.a, zo, NULL, zout_write, NULL, NULL) != ARCHIVE_OK) {
		rc = arc_fail(&p, "start");
		goto out;
	}
	if (p.nplan) { /* else an empty archive */
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0) {
			rc = gr_errf(err, GR_EIO, "cannot open '%s': %s", dir, strerror(errno));
			goto out;
		}
		for (size_t i = 0; i < p.nplan && rc == 0; i++)
			rc = pack_file(&p, dfd, &p.plan[i]);
		close(dfd);
		if (rc < 0)
			goto out;
	}
	/* Files the client sent a signature for that went whole, and why. */
	if (p.o->whole)
		for (size_t i = 0; i < p.nplan; i++)
			if (p.plan[i].sig && p.plan[i].dfd < 0)
				sv_pushf(p.o->whole, "%s\t%s", p.plan[i].rel,
					 p.plan[i].why ? p.plan[i].why : "not planned as a delta");
	if (archive_write_close(p.a) != ARCHIVE_OK)
		rc = arc_fail(&p, "finish");
	else if (zout_feed(zo, NULL, 0, ZSTD_e_end) < 0)
		rc = gr_errf(err, GR_EIO, "cannot send the artifacts: %s", strerror(errno));
out:
	if (p.a)
		archive_write_free(p.a);
	ZSTD_freeCCtx(zo->z);
	ZSTD_freeCCtx(zo->probe);
	free(zo);
	for (size_t i = 0; i < p.nplan; i++) {
		free(p.plan[i].rel);
		if (p.plan[i].dfd >= 0)
			close(p.plan[i].dfd);
	}
	free(p.plan);
	return rc;
}

/* ---- what the job wrote ---- */

struct wctx {
	const struct pack_opts *o;
	size_t max;
	struct written *w;
	struct strvec all;
	struct strvec sizes;
};

/* Folders whose files are no job's output to name: environments (a
 * setup's, job_snap.h) and caches, so what the job wrote lists, and the
 * client's hint names, the job's own files. */
static int not_output(int dfd, const char *name, int follow)
{
	static const char *const caches[] = { "__pycache__", ".cache", ".pytest_cache",
					      ".mypy_cache", ".ruff_cache", ".ipynb_checkpoints",
					      "node_modules", ".git" };
	size_t n = strlen(name);

	for (size_t i = 0; i < GR_ARRAY_SIZE(caches); i++)
		if (!strcmp(name, caches[i]))
			return 1;
	if (n > 9 && !strcmp(name + n - 9, ".egg-info"))
		return 1;
	if (follow) {
		/* A persistent path is a link: look at what it leads to. */
		int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		int env = fd >= 0 && (faccessat(fd, "pyvenv.cfg", F_OK, 0) == 0 ||
				      faccessat(fd, "conda-meta", F_OK, 0) == 0);
		if (fd >= 0)
			close(fd);
		return env;
	}
	return job_snap_is_env(dfd, name);
}

static void wwalk(struct wctx *c, int dfd, const char *rel, int shared)
{
	DIR *d = fdopendir(dfd);
	struct dirent *de;

	if (!d) {
		close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    (!*rel && !strcmp(de->d_name, ".gpurun")))
			continue;
		char *sub = *rel ? xasprintf("%s/%s", rel, de->d_name) : xstrdup(de->d_name);
		int follow = !shared && S_ISLNK_AT(dirfd(d), de->d_name) && is_persist(c->o, sub);
		struct stat st;
		if (fstatat(dirfd(d), de->d_name, &st, follow ? 0 : AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISREG(st.st_mode) &&
			    ((shared || follow) ? in_window(c->o, &st) : since(&st, c->o->since_ms))) {
				c->w->total++;
				sv_push(&c->all, sub);
				sv_pushf(&c->sizes, "%llu", (unsigned long long)st.st_size);
			} else if (S_ISDIR(st.st_mode) && !not_output(dirfd(d), de->d_name, follow)) {
				int sfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
						 (follow ? 0 : O_NOFOLLOW));
				if (sfd >= 0)
					wwalk(c, sfd, sub, shared || follow);
			}
		}
		free(sub);
	}
	closedir(d);
}

struct wpair {
	const char *path, *size;
};

static int cmp_wpair(const void *a, const void *b)
{
	return strcmp(((const struct wpair *)a)->path, ((const struct wpair *)b)->path);
}

void job_written(const char *dir, const struct pack_opts *o, size_t max, struct written *w)
{
	static const struct pack_opts none = { .tmpfd = -1 };
	struct wctx c = { o ? o : &none, max, w, STRVEC_INIT, STRVEC_INIT };
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	*w = (struct written){ STRVEC_INIT, NULL, 0 };
	if (fd >= 0)
		wwalk(&c, fd, "", 0);
	struct wpair *v = xcalloc(c.all.n ? c.all.n : 1, sizeof(*v));
	for (size_t i = 0; i < c.all.n; i++)
		v[i] = (struct wpair){ c.all.v[i], c.sizes.v[i] };
	if (c.all.n > 1)
		qsort(v, c.all.n, sizeof(*v), cmp_wpair);
	w->sizes = xcalloc(max ? max : 1, sizeof(*w->sizes));
	for (size_t i = 0; i < c.all.n && i < max; i++) {
		long long n = 0;
		parse_ll(v[i].size, 0, (long long)(~0ULL >> 1), &n);
		sv_push(&w->paths, v[i].path);
		w->sizes[i] = (uint64_t)n;
	}
	free(v);
	sv_clear(&c.all);
	sv_clear(&c.sizes);
}

void job_written_free(struct written *w)
{
	sv_clear(&w->paths);
	free(w->sizes);
	*w = (struct written){ STRVEC_INIT, NULL, 0 };
}
