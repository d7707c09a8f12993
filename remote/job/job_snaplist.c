/* A job's snapshot record, and what rerun and diff do with it (see
 * job_snaplist.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job_proto.h"
#include "job_snap.h"
#include "job_snaplist.h"
#include "sync_manifest.h"

#define REC_MAGIC "GRS1"

static int64_t ns_of(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- the record ---- */

static int rec_walk(int dfd, const char *rel, struct strbuf *out, struct gr_err *err)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		close(dfd);
		return gr_errf(err, GR_EIO, "cannot list '%s' in the job's folder: %s",
			       *rel ? rel : ".", strerror(errno));
	}
	while (rc == 0 && (e = readdir(d))) {
		struct stat st;
		char type;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!*rel && !strcmp(e->d_name, ".gpurun"))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		type = S_ISDIR(st.st_mode) ? 'd' : S_ISREG(st.st_mode) ? 'f' : S_ISLNK(st.st_mode) ? 'l' : 0;
		if (!type)
			continue; /* a fifo or a socket: no snapshot makes one */
		char *sub = *rel ? xasprintf("%s/%s", rel, e->d_name) : xstrdup(e->d_name);
		sb_addf(out, "%c %o %" PRIu64 " %" PRId64 " %" PRIu64 " %s", type,
			(unsigned)(st.st_mode & 07777), (uint64_t)st.st_size, ns_of(st.st_mtim),
			(uint64_t)st.st_ino, sub);
		sb_add(out, "", 1);
		if (type == 'd') {
			int sfd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			rc = sfd < 0 ? gr_errf(err, GR_EIO, "cannot open '%s' in the job's folder: %s", sub,
					       strerror(errno))
				     : rec_walk(sfd, sub, out, err); /* closes sfd */
		}
		free(sub);
	}
	closedir(d);
	return rc;
}

int job_snap_record(const char *dir, struct gr_err *err)
{
	struct strbuf out = STRBUF_INIT;
	char *p = job_meta(dir, JOB_SNAP_RECORD);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc;

	sb_add(&out, REC_MAGIC, sizeof(REC_MAGIC));
	if (fd < 0)
		rc = gr_errf(err, GR_EIO, "cannot open '%s': %s", dir, strerror(errno));
	else
		rc = rec_walk(fd, "", &out, err); /* closes fd */
	if (rc == 0)
		rc = write_file_atomic(p, out.buf, out.len, 0600, err);
	if (rc < 0)
		gr_err_prefix(err, "cannot record the job's snapshot");
	sb_release(&out);
	free(p);
	return rc;
}

void job_snap_recs_free(struct snap_recs *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].path);
	free(l->v);
	*l = (struct snap_recs){ 0 };
}

/* One entry "T MODE SIZE MTIME INO PATH" into r: 0, or -1 when malformed. */
static int rec_parse(const char *s, struct snap_rec *r)
{
	unsigned long long mode, size, ino;
	long long mtime;
	char type, *end;

	type = s[0];
	if ((type != 'd' && type != 'f' && type != 'l') || s[1] != ' ')
		return -1;
	s += 2;
	errno = 0;
	mode = strtoull(s, &end, 8);
	if (end == s || *end != ' ' || mode > 07777)
		return -1;
	s = end + 1;
	size = strtoull(s, &end, 10);
	if (end == s || *end != ' ')
		return -1;
	s = end + 1;
	mtime = strtoll(s, &end, 10);
	if (end == s || *end != ' ')
		return -1;
	s = end + 1;
	ino = strtoull(s, &end, 10);
	if (end == s || *end != ' ' || errno)
		return -1;
	s = end + 1;
	/* Clean and relative, and never gpurun's own files. */
	if (!sm_path_ok(s) || !strcmp(s, ".gpurun") || !strncmp(s, ".gpurun/", 8))
		return -1;
	*r = (struct snap_rec){ type, (uint32_t)mode, size, ino, mtime, xstrdup(s) };
	return 0;
}

int job_snap_recs_read(const char *dir, struct snap_recs *l, struct gr_err *err)
{
	struct strbuf b = STRBUF_INIT;
	char *p = job_meta(dir, JOB_SNAP_RECORD);
	size_t off = sizeof(REC_MAGIC), cap = 0;
	int rc;

	*l = (struct snap_recs){ 0 };
	if (access(p, F_OK) < 0 && errno == ENOENT) {
		free(p);
		return gr_errf(err, GR_ENOTFOUND, "no record of the job's snapshot");
	}
	rc = read_file(p, &b, err);
	free(p);
	if (rc < 0)
		return rc;
	if (b.len < off || memcmp(b.buf, REC_MAGIC, sizeof(REC_MAGIC)))
		rc = GR_EINVAL;
	while (rc == 0 && off < b.len) {
		size_t n = strnlen(b.buf + off, b.len - off);
		if (off + n == b.len) {
			rc = GR_EINVAL; /* cut short */
			break;
		}
		if (l->n == cap) {
			cap = cap ? 2 * cap : 256;
			l->v = xrealloc(l->v, cap * sizeof(*l->v));
		}
		if (rec_parse(b.buf + off, &l->v[l->n]) < 0)
			rc = GR_EINVAL;
		else
			l->n++;
		off += n + 1;
	}
	sb_release(&b);
	if (rc < 0) {
		job_snap_recs_free(l);
		return gr_errf(err, GR_EINVAL, "the record of the job's snapshot is damaged");
	}
	return 0;
}

/* The folder holding rel below root (walk_below: no symlink followed)
 * and rel's last component in *base: an fd to close unless it is root. */
static int parent_of(int root, const char *rel, const char **base)
{
	const char *slash = strrchr(rel, '/');

	*base = slash ? slash + 1 : rel;
	return slash ? walk_below(root, rel, (size_t)(slash - rel), 0) : root;
}

static void close_not(int fd, int root)
{
	if (fd >= 0 && fd != root)
		close(fd);
}

/* ---- rerun ---- */

/* One entry of the record from src into dst (both open job folders). */
static int rerun_one(int src, int dst, const struct snap_rec *r, struct strvec *changed,
		     struct strvec *gone, struct gr_err *err)
{
	const char *sb, *db;
	int sp = parent_of(src, r->path, &sb), dp = parent_of(dst, r->path, &db), rc = 0;
	struct stat st;
	uint64_t bytes = 0;

	if (dp < 0) {
		rc = gr_errf(err, GR_EIO, "cannot open the folder of '%s' in the new job: %s", r->path,
			     strerror(errno));
		goto out;
	}
	if (r->type == 'd') {
		if (mkdirat(dp, db, (mode_t)((r->mode & 07777) | 0700)) < 0 && errno != EEXIST)
			rc = gr_errf(err, GR_EIO, "cannot create '%s' in the new job: %s", r->path,
				     strerror(errno));
		goto out;
	}
	if (sp < 0 || fstatat(sp, sb, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    (r->type == 'l' && !S_ISLNK(st.st_mode)) || (r->type == 'f' && !S_ISREG(st.st_mode))) {
		sv_push(gone, r->path);
		goto out;
	}
	if (r->type == 'l') {
		char target[4096];
		ssize_t n = readlinkat(sp, sb, target, sizeof(target) - 1);
		if (n < 0) {
			sv_push(gone, r->path);
			goto out;
		}
		target[n] = '\0';
		if (symlinkat(target, dp, db) < 0)
			rc = gr_errf(err, GR_EIO, "cannot create '%s' in the new job: %s", r->path,
				     strerror(errno));
		goto out;
	}
	if ((uint64_t)st.st_ino != r->ino || (uint64_t)st.st_size != r->size ||
	    ns_of(st.st_mtim) != r->mtime_ns)
		sv_push(changed, r->path);
	/* As job_snapshot: what the store or the project shares, and what is
	 * large, is linked; a copy of the job's own is copied. */
	if ((st.st_nlink > 1 || (uint64_t)st.st_size > SNAP_COPY_MAX) && linkat(sp, sb, dp, db, 0) == 0)
		goto out;
	int in = openat(sp, sb, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0) {
		sv_push(gone, r->path);
		goto out;
	}
	rc = job_snap_copy_file(in, dp, db, st.st_mode, &st.st_mtim, r->path, &bytes, err);
	close(in);
out:
	close_not(sp, src);
	close_not(dp, dst);
	return rc;
}

static void name_some(struct strbuf *w, const struct strvec *v)
{
	for (size_t i = 0; i < v->n && i < 5; i++)
		sb_addf(w, "%s%s", i ? ", " : "", v->v[i]);
	if (v->n > 5)
		sb_addf(w, ", ... (%zu in all)", v->n);
}

int job_snap_rerun(const char *from, const char *dst, char **warn, struct gr_err *err)
{
	struct snap_recs l;
	struct strvec changed = STRVEC_INIT, gone = STRVEC_INIT;
	int src = -1, out = -1, rc;

	*warn = NULL;
	if ((rc = job_snap_recs_read(from, &l, err)) < 0)
		return rc;
	src = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	out = open(dst, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (src < 0 || out < 0) {
		rc = gr_errf(err, GR_EIO, "cannot open '%s': %s", src < 0 ? from : dst, strerror(errno));
		goto done;
	}
	for (size_t i = 0; i < l.n && rc == 0; i++)
		rc = rerun_one(src, out, &l.v[i], &changed, &gone, err);
	if (rc == 0 && (changed.n || gone.n)) {
		struct strbuf w = STRBUF_INIT;
		if (changed.n) {
			sb_addf(&w, "%zu file%s of the job's snapshot changed in its folder after it "
				"started (the job wrote %s); the rerun has %s as %s now: ", changed.n,
				changed.n == 1 ? "" : "s", changed.n == 1 ? "it" : "them",
				changed.n == 1 ? "it" : "them", changed.n == 1 ? "it is" : "they are");
			name_some(&w, &changed);
		}
		if (gone.n) {
			sb_addf(&w, "%s%zu path%s of the job's snapshot %s gone from its folder, so "
				"not in the rerun's: ", w.len ? "; " : "", gone.n, gone.n == 1 ? "" : "s",
				gone.n == 1 ? "is" : "are");
			name_some(&w, &gone);
		}
		*warn = sb_detach(&w, NULL);
	}
done:
	if (src >= 0)
		close(src);
	if (out >= 0)
		close(out);
	sv_clear(&changed);
	sv_clear(&gone);
	job_snap_recs_free(&l);
	return rc;
}

/* ---- diff ---- */

void job_snap_conf(const struct job_spec *spec, struct strvec *lines)
{
	static const char *const skip[] = { "argv", "name", "group", "after", "rerun_of", "term" };

	for (size_t i = 0; i + 1 < spec->kv.n; i += 2) {
		const char *k = spec->kv.v[i], *v = spec->kv.v[i + 1];
		size_t s;
		for (s = 0; s < GR_ARRAY_SIZE(skip) && strcmp(skip[s], k); s++)
			;
		if (s < GR_ARRAY_SIZE(skip))
			continue;
		if (!strcmp(k, "env"))
			sv_pushf(lines, "env %.*s", (int)strcspn(v, "="), v);
		else
			sv_pushf(lines, "%s = %s", k, v);
	}
}

static int rec_cmp(const void *a, const void *b)
{
	return strcmp(((const struct snap_rec *)a)->path, ((const struct snap_rec *)b)->path);
}

/* What the listing says of one entry now. */
struct cur {
	char type;
	uint32_t mode;
	uint64_t size, dev, ino;
	int64_t mtime_ns;
	char hash[2 * SM_HASH_LEN + 80];
};

/* Stat (and hash) path below root into c: 0, or -1 when it is gone or of
 * another kind than recorded. reuse: the same path in the other job, its
 * hash taken when it is the same file. */
static int cur_of(int root, const struct snap_rec *r, const struct cur *reuse, struct cur *c)
{
	const char *base;
	int p = parent_of(root, r->path, &base), rc = -1;
	struct stat st;
	uint8_t h[SM_HASH_LEN];

	memset(c, 0, sizeof(*c));
	if (p < 0 || fstatat(p, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		goto out;
	c->type = S_ISDIR(st.st_mode) ? 'd' : S_ISREG(st.st_mode) ? 'f' : S_ISLNK(st.st_mode) ? 'l' : 0;
	if (c->type != r->type)
		goto out;
	c->mode = (uint32_t)(st.st_mode & 07777);
	c->size = (uint64_t)st.st_size;
	c->dev = (uint64_t)st.st_dev;
	c->ino = (uint64_t)st.st_ino;
	c->mtime_ns = ns_of(st.st_mtim);
	rc = 0;
	if (c->type == 'd')
		goto out;
	if (reuse && reuse->type == c->type && reuse->dev == c->dev && reuse->ino == c->ino &&
	    reuse->size == c->size && reuse->mtime_ns == c->mtime_ns) {
		memcpy(c->hash, reuse->hash, sizeof(c->hash));
		goto out;
	}
	if (c->type == 'l') {
		char target[4096];
		ssize_t n = readlinkat(p, base, target, sizeof(target));
		if (n < 0) {
			rc = -1;
			goto out;
		}
		sm_leaf_hash(h, target, (size_t)n);
		sm_hex(h, c->hash);
		goto out;
	}
	int fd = c->size <= JOB_SNAP_HASH_MAX ? openat(p, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
	if (fd >= 0 && sync_hash_fd(fd, r->path, c->size, h, NULL, NULL) == 0)
		sm_hex(h, c->hash);
	else /* too large to read for a diff, or unreadable: its identity */
		snprintf(c->hash, sizeof(c->hash), "ino-%" PRIu64 "-%" PRIu64 "-%" PRIu64 "-%" PRId64,
			 c->dev, c->ino, c->size, c->mtime_ns);
	if (fd >= 0)
		close(fd);
out:
	close_not(p, root);
	return rc;
}

static int flush_to(int fd, struct strbuf *b, size_t over, struct gr_err *err)
{
	if (b->len <= over)
		return 0;
	if (write_full(fd, b->buf, b->len) < 0)
		return gr_errf(err, GR_EIO, "cannot send the listing: %s", strerror(errno));
	sb_reset(b);
	return 0;
}

/* One job's part: str id, conf lines, entries (sorted by path). other:
 * the other job's entries (sorted) and what they are now, or NULL. */
static int list_one(const char *id, const char *dir, struct snap_recs *l, struct cur *now,
		    const struct snap_recs *other, const struct cur *other_now, int fd,
		    struct strbuf *b, struct gr_err *err)
{
	struct job_spec sp = { STRVEC_INIT };
	struct strvec conf = STRVEC_INIT;
	int root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), rc = 0;
	size_t j = 0;
	uint32_t n = 0;

	if (root < 0)
		return gr_errf(err, GR_EIO, "cannot open '%s': %s", dir, strerror(errno));
	job_spec_read(dir, &sp, NULL);
	job_snap_conf(&sp, &conf);
	job_spec_free(&sp);
	put_str(b, id);
	put_u32(b, (uint32_t)conf.n);
	for (size_t i = 0; i < conf.n; i++)
		put_str(b, conf.v[i]);
	sv_clear(&conf);
	for (size_t i = 0; i < l->n; i++) {
		const struct cur *reuse = NULL;
		while (other && j < other->n && strcmp(other->v[j].path, l->v[i].path) < 0)
			j++;
		if (other && j < other->n && !strcmp(other->v[j].path, l->v[i].path) && other_now[j].type)
			reuse = &other_now[j];
		if (cur_of(root, &l->v[i], reuse, &now[i]) == 0)
			n++;
	}
	put_u32(b, n);
	for (size_t i = 0; i < l->n && rc == 0; i++) {
		const struct cur *c = &now[i];
		if (!c->type)
			continue;
		put_str(b, l->v[i].path);
		put_u8(b, (uint8_t)c->type);
		put_u32(b, c->mode);
		put_u64(b, c->type == 'd' ? 0 : c->size);
		put_str(b, c->hash);
		rc = flush_to(fd, b, 64 * 1024, err);
	}
	close(root);
	return rc;
}

int job_snap_list_write(const char *ida, const char *dira, const char *idb,
			const char *dirb, int fd, struct gr_err *err)
{
	struct snap_recs a = { 0 }, b = { 0 };
	struct cur *na = NULL, *nb = NULL;
	struct strbuf out = STRBUF_INIT;
	int rc;

	if ((rc = job_snap_recs_read(dira, &a, err)) < 0 || (rc = job_snap_recs_read(dirb, &b, err)) < 0)
		goto out;
	qsort(a.v, a.n, sizeof(*a.v), rec_cmp);
	qsort(b.v, b.n, sizeof(*b.v), rec_cmp);
	na = xcalloc(a.n + 1, sizeof(*na));
	nb = xcalloc(b.n + 1, sizeof(*nb));
	if ((rc = list_one(ida, dira, &a, na, NULL, NULL, fd, &out, err)) == 0 &&
	    (rc = list_one(idb, dirb, &b, nb, &a, na, fd, &out, err)) == 0)
		rc = flush_to(fd, &out, 0, err);
out:
	free(na);
	free(nb);
	job_snap_recs_free(&a);
	job_snap_recs_free(&b);
	sb_release(&out);
	return rc;
}

int job_snap_read_put(const char *dir, const struct strvec *paths, struct strbuf *pl,
		      struct gr_err *err)
{
	struct snap_recs l;
	size_t total = 0;
	int root, rc;

	if ((rc = job_snap_recs_read(dir, &l, err)) < 0)
		return rc;
	qsort(l.v, l.n, sizeof(*l.v), rec_cmp);
	root = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0) {
		job_snap_recs_free(&l);
		return gr_errf(err, GR_EIO, "cannot open '%s': %s", dir, strerror(errno));
	}
	put_u32(pl, (uint32_t)paths->n);
	for (size_t i = 0; i < paths->n; i++) {
		struct snap_rec key = { .path = paths->v[i] };
		const struct snap_rec *r = bsearch(&key, l.v, l.n, sizeof(*l.v), rec_cmp);
		struct strbuf got = STRBUF_INIT;
		int ok = 0;
		const char *base;
		int p = r && r->type != 'd' ? parent_of(root, r->path, &base) : -1;
		if (p >= 0 && r->type == 'l') {
			char target[4096];
			ssize_t n = readlinkat(p, base, target, sizeof(target));
			if (n >= 0) {
				sb_add(&got, target, (size_t)n);
				ok = 1;
			}
		} else if (p >= 0) {
			int fd = openat(p, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
			struct stat st;
			if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
			    (uint64_t)st.st_size <= JOB_SNAP_FILE_MAX) {
				/* What it held when asked: a file growing meanwhile
				 * gives its first st_size bytes. */
				sb_grow(&got, (size_t)st.st_size);
				ssize_t n = read_full(fd, got.buf, (size_t)st.st_size);
				if (n >= 0) {
					got.len = (size_t)n;
					ok = 1;
				}
			}
			if (fd >= 0)
				close(fd);
		}
		close_not(p, root);
		if (ok && total + got.len > JOB_SNAP_READ_MAX)
			ok = 0;
		put_u8(pl, (uint8_t)ok);
		put_bytes(pl, ok ? got.buf : "", ok ? got.len : 0);
		if (ok)
			total += got.len;
		sb_release(&got);
	}
	close(root);
	job_snap_recs_free(&l);
	return 0;
}
