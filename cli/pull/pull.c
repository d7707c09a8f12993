/* Artifact pulls and their safe extraction (see pull.h). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include "art_delta.h"
#include "art_limits.h"
#include "config.h"
#include "pull.h"
#include "job_proto.h"
#include "term_filter.h"

#define PART_SUFFIX ".gpurun-part"
/* Beside a part file of RESUME_MIN bytes or more: "size mtime_s
 * mtime_ns" of the host's file it was begun from, so a pull cut short
 * resumes from what the part holds (PROTOCOL.md, ART_PULL). */
#define INFO_SUFFIX ".gpurun-partinfo"
#define RESUME_MIN (1u << 20)
/* Writeback of a part file is started every this many bytes. */
#define WRITEBACK_STEP (8u << 20)

/* Why name may not be extracted, or NULL when it is fine. */
static const char *bad_name(const char *name)
{
	if (!name || !*name)
		return "it has no name";
	if (name[0] == '/')
		return "its path is absolute";
	for (const char *p = name; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return "its path leads out of the folder ('..')";
		p += n;
		while (*p == '/')
			p++;
	}
	return NULL;
}

/* The folder holding rel below the working folder (dest), opened through
 * no symlink (each folder with O_NOFOLLOW; make: made 0755 where
 * missing): AT_FDCWD for a name without a '/', -1 (errno set) if a
 * folder on the way cannot be made or opened (or is a symlink).
 * *base: rel's last component. */
static int parent_below(const char *rel, int make, const char **base)
{
	const char *part = rel, *slash;
	int dfd = AT_FDCWD;

	while ((slash = strchr(part, '/'))) {
		if (slash == part) { /* "a//b" is "a/b", as libarchive writes it */
			part++;
			continue;
		}
		char *name = xstrndup(part, (size_t)(slash - part));
		int next = make && mkdirat(dfd, name, 0755) < 0 && errno != EEXIST
				   ? -1
				   : openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		free(name);
		if (dfd != AT_FDCWD)
			close(dfd);
		if ((dfd = next) < 0)
			return -1;
		part = slash + 1;
	}
	*base = part;
	return dfd;
}

/* Open rel below the working folder (dest) through no symlink: each
 * folder with O_NOFOLLOW, then the file with flags | O_NOFOLLOW. */
int art_open_below(const char *rel, int flags, mode_t mode)
{
	const char *base;
	int dfd = parent_below(rel, 0, &base), fd = -1;

	if (dfd >= 0 || dfd == AT_FDCWD)
		fd = openat(dfd, base, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	if (dfd >= 0)
		close(dfd);
	return fd;
}

/* Remove the file rel below the working folder, through no symlink: a
 * name the host chose never removes a file a symlink here leads to. */
void art_unlink_below(const char *rel)
{
	const char *base;
	int dfd = parent_below(rel, 0, &base);

	if (dfd >= 0 || dfd == AT_FDCWD)
		(void)unlinkat(dfd, base, 0);
	if (dfd >= 0)
		close(dfd);
}

int art_mkdirs_below(const char *rel)
{
	const char *base;
	int dfd = parent_below(rel, 1, &base);

	if (dfd >= 0)
		close(dfd);
	return dfd == -1 ? -1 : 0;
}

/* The part and info names for final. */
char *art_sibling(const char *final, const char *suffix)
{
	const char *slash = strrchr(final, '/');

	return slash ? xasprintf("%.*s/.%s%s", (int)(slash - final), final, slash + 1, suffix)
		     : xasprintf(".%s%s", final, suffix);
}

static void write_info(const char *info, int64_t size, struct archive_entry *e)
{
	char t[96];
	int n = snprintf(t, sizeof(t), "%lld %lld %ld\n", (long long)size,
			 (long long)archive_entry_mtime(e), (long)archive_entry_mtime_nsec(e));
	int fd = art_open_below(info, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd >= 0) {
		if (write_full(fd, t, (size_t)n) < 0)
			art_unlink_below(info);
		close(fd);
	}
}

/* The value of the entry's xattr key into v (NUL-terminated): 1, 0 if
 * it has none, -1 if it is empty or does not fit. */
static int xattr_value(struct archive_entry *e, const char *key, char *v, size_t vn)
{
	const char *name;
	const void *val;
	size_t len;
	int found = 0;

	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &name, &val, &len) == ARCHIVE_OK) {
		if (strcmp(name, key))
			continue;
		if (!len || len >= vn || memchr(val, '\0', len))
			return -1;
		memcpy(v, val, len);
		v[len] = '\0';
		found = 1;
	}
	return found;
}

/* The offset an entry resumes from (its GR_ART_RESUME_XATTR), 0 if none,
 * -1 if malformed. */
static int64_t resume_offset(struct archive_entry *e)
{
	char v[24];
	long long off = 0;
	int r = xattr_value(e, GR_ART_RESUME_XATTR, v, sizeof(v));

	if (r < 0 || (r && parse_ll(v, 1, INT64_MAX, &off) < 0))
		return -1;
	return off;
}

/* An entry that carries final's bytes from skip on: they go after what
 * its part file holds, which must be exactly skip bytes. The part is
 * kept (cut to what came) when the stream ends early, for the next
 * pull to resume again. */
static int resume_entry(struct archive *in, struct archive_entry *e, const char *final,
			uint64_t skip, int64_t size, struct gr_err *err)
{
	char *part = art_sibling(final, PART_SUFFIX), *info = art_sibling(final, INFO_SUFFIX);
	int fd = art_open_below(part, O_WRONLY, 0), rc = 0, r;
	struct stat st;
	uint64_t got = 0;
	const void *buf;
	size_t len;
	int64_t off;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != skip) {
		rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': the host resumes it at %llu "
			     "bytes, and this pull has no part file of that size", ts(final),
			     (unsigned long long)skip);
		gr_hintf(err, "the next pull fetches it whole");
		art_unlink_below(part);
		art_unlink_below(info);
		goto out;
	}
	while ((r = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK) {
		if (!art_data_ok(off, len, size)) {
			rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': its data runs past "
				     "the %lld bytes its header announced", ts(final), (long long)size);
			art_unlink_below(part);
			art_unlink_below(info);
			goto out;
		}
		for (size_t done = 0; done < len;) {
			ssize_t w = pwrite(fd, (const char *)buf + done, len - done,
					   (off_t)(skip + (uint64_t)off + done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				rc = gr_errf(err, GR_EIO, "cannot write artifact '%s': %s", ts(final),
					     strerror(w < 0 ? errno : ENOSPC));
				goto out;
			}
			done += (size_t)w;
		}
		if ((uint64_t)off == got)
			got += len;
	}
	if (r != ARCHIVE_EOF) {
		/* Cut short: keep what came in order, for the next pull. */
		if (ftruncate(fd, (off_t)(skip + got)) < 0)
			art_unlink_below(part);
		rc = gr_errf(err, GR_EIO, "cannot extract artifact '%s': %s", ts(final),
			     archive_error_string(in) ? archive_error_string(in) : "truncated");
		goto out;
	}
	struct timespec ts2[2] = { { 0, UTIME_OMIT },
				   { archive_entry_mtime(e), archive_entry_mtime_nsec(e) } };
	if (ftruncate(fd, (off_t)(skip + (uint64_t)size)) < 0 ||
	    fchmod(fd, archive_entry_perm(e) & 0755) < 0 || futimens(fd, ts2) < 0 || fsync(fd) < 0 ||
	    rename(part, final) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot write artifact '%s': %s", ts(final), strerror(errno));
		goto out;
	}
	art_unlink_below(info);
out:
	if (fd >= 0)
		close(fd);
	free(part);
	free(info);
	return rc;
}

/* fsync the file at path (relative to the working folder: dest). */
static int fsync_path(const char *path, struct gr_err *err)
{
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), rc = 0;

	if (fd < 0 || fsync(fd) < 0)
		rc = gr_errf(err, GR_EIO, "fsync: %s", strerror(errno));
	if (fd >= 0)
		close(fd);
	return rc;
}

/* Make the renames under dest durable: one syncfs of its file system
 * (cheaper than an fsync of every folder a pull touched). */
static void sync_dest(const char *dest)
{
	int fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		syncfs(fd);
		close(fd);
	}
}

/* The host's tar.zst, decompressed here rather than by libarchive's zstd
 * filter, which takes any window a frame asks for (up to zstd's 128 MiB
 * default, and 2 GiB with long mode): a hostile host could make the
 * client allocate that. Ours are level 3 (2 MiB); more than 8 MiB is
 * refused, as for delta entries (art_delta.c). */
#define ZIN_LEN (1u << 16)
struct zin {
	int fd;
	ZSTD_DStream *z;
	ZSTD_inBuffer in;
	uint8_t ibuf[ZIN_LEN];
	uint8_t *obuf;
	size_t olen;
	int eof;
};

/* Fills the output buffer before it returns, as libarchive's own filter
 * does: a pipe's reads come in pieces, and a block returned per piece
 * meant a write() per piece (0.25 s more on a 256 MiB pull). */
static la_ssize_t zin_read(struct archive *a, void *arg, const void **buf)
{
	struct zin *zi = arg;
	ZSTD_outBuffer o = { zi->obuf, zi->olen, 0 };

	while (o.pos < o.size) {
		if (zi->in.pos == zi->in.size) {
			if (zi->eof)
				break; /* a frame cut short shows as a truncated tar */
			ssize_t r = read(zi->fd, zi->ibuf, ZIN_LEN);
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0) {
				archive_set_error(a, errno, "cannot read the artifacts: %s", strerror(errno));
				return -1;
			}
			zi->eof = r == 0;
			zi->in = (ZSTD_inBuffer){ zi->ibuf, (size_t)r, 0 };
			continue;
		}
		size_t r = ZSTD_decompressStream(zi->z, &o, &zi->in);
		if (ZSTD_isError(r)) {
			archive_set_error(a, EINVAL, "the host's artifact stream is not one gpurun's "
					  "agent makes (zstd: %s)", ZSTD_getErrorName(r));
			return -1;
		}
	}
	*buf = zi->obuf;
	return (la_ssize_t)o.pos;
}

int art_extract_fd(int fd, const char *dest, struct art_limits *lim, uint32_t *files,
		   struct gr_err *err)
{
	struct archive *in = archive_read_new(), *out = archive_write_disk_new();
	struct zin zi = { .fd = fd, .z = ZSTD_createDStream(), .olen = ZSTD_DStreamOutSize() };
	struct archive_entry *e;
	char *part = NULL, *final = NULL, *info = NULL, *keep = NULL;
	uint64_t got = 0;
	int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0, r;

	*files = 0;
	zi.obuf = xmalloc(zi.olen);
	ZSTD_DCtx_setParameter(zi.z, ZSTD_d_windowLogMax, 23);
	archive_read_support_format_tar(in);
	archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_NODOTDOT |
				       ARCHIVE_EXTRACT_SECURE_SYMLINKS |
				       ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
				       ARCHIVE_EXTRACT_TIME);
	if (cwd < 0 || chdir(dest) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot enter '%s': %s", ts(dest), strerror(errno));
		goto out;
	}
	if (archive_read_open(in, &zi, NULL, zin_read, NULL) != ARCHIVE_OK) {
		rc = gr_errf(err, GR_EPROTO, "cannot read the artifacts: %s", archive_error_string(in));
		goto out;
	}
	while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e), *why = bad_name(name);
		mode_t type = archive_entry_filetype(e);

		if (!why && archive_entry_hardlink(e))
			why = "it is a hard link";
		else if (!why && type == AE_IFLNK)
			why = "it is a symbolic link";
		else if (!why && type != AE_IFREG && type != AE_IFDIR)
			why = "it is not a regular file";
		if (why) {
			rc = gr_errf(err, GR_EINVAL, "refusing artifact '%s': %s", name ? ts(name) : "", why);
			gr_hintf(err, "the archive from the host is not one gpurun's agent makes; nothing after it was written");
			goto out;
		}
		if (type == AE_IFDIR)
			continue; /* folders come with the files in them */
		int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
		if ((rc = art_admit(lim, ".", name, size, err)) < 0) {
			gr_hintf(err, "nothing from this entry on was written");
			goto out;
		}
		free(final);
		free(part);
		free(info);
		final = xstrdup(name);
		part = art_sibling(final, PART_SUFFIX);
		info = art_sibling(final, INFO_SUFFIX);
		char dv[128];
		int is_delta = xattr_value(e, GR_ART_DELTA_XATTR, dv, sizeof(dv));
		if (is_delta) {
			if (is_delta < 0) {
				rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': a malformed delta header",
					     ts(final));
				goto out;
			}
			if ((rc = art_delta_entry(in, e, final, size, dv, lim, err)) < 0)
				goto out;
			(*files)++;
			continue;
		}
		int64_t skip = resume_offset(e);
		if (skip < 0) {
			rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': a malformed resume offset",
				     ts(final));
			goto out;
		}
		if (skip > 0) {
			if ((rc = resume_entry(in, e, final, (uint64_t)skip, size, err)) < 0)
				goto out;
			(*files)++;
			continue;
		}
		archive_entry_set_pathname(e, part);
		archive_entry_set_perm(e, archive_entry_perm(e) & 0755);
		if (archive_write_header(out, e) != ARCHIVE_OK) {
			rc = gr_errf(err, GR_EINVAL, "refusing artifact '%s': %s", ts(final),
				     archive_error_string(out));
			goto out;
		}
		/* A large file: note what it is begun from, so a pull cut
		 * short resumes from what its part holds. */
		int resumable = size >= (int64_t)RESUME_MIN;
		if (resumable)
			write_info(info, size, e);
		const void *buf;
		size_t len;
		int64_t off;
		int write_failed = 0;
		/* Start the part's writeback as it comes (SYNC_FILE_RANGE_WRITE
		 * waits for nothing), so the fsync before the rename finds
		 * little left to write: on its own it took ~0.2 s of a 256 MiB
		 * pull's 1.7 s. Any descriptor of the file will do. */
		int wb = size >= (int64_t)WRITEBACK_STEP
				 ? open(part, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
		uint64_t wb_done = 0;
		got = 0;
		while ((r = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK) {
			if (!art_data_ok(off, len, size)) {
				rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': its data runs past "
					     "the %lld bytes its header announced", ts(final), (long long)size);
				archive_write_finish_entry(out);
				art_unlink_below(part);
				art_unlink_below(info);
				goto out;
			}
			if (archive_write_data_block(out, buf, len, off) != ARCHIVE_OK) {
				r = ARCHIVE_FATAL;
				write_failed = 1;
				break;
			}
			if ((uint64_t)off == got)
				got += len;
			if (wb >= 0 && got - wb_done >= WRITEBACK_STEP) {
				(void)sync_file_range(wb, (off_t)wb_done, (off_t)(got - wb_done),
						      SYNC_FILE_RANGE_WRITE);
				wb_done = got;
			}
		}
		if (wb >= 0)
			close(wb);
		if (r != ARCHIVE_EOF || archive_write_finish_entry(out) != ARCHIVE_OK) {
			rc = gr_errf(err, GR_EIO, "cannot extract artifact '%s': %s", ts(final),
				     archive_error_string(r != ARCHIVE_EOF ? in : out)
					     ? archive_error_string(r != ARCHIVE_EOF ? in : out) : "truncated");
			if (resumable && r != ARCHIVE_EOF && !write_failed) {
				/* The stream ended early: keep what came, cut to
				 * it once libarchive lets go of the file. */
				keep = part;
				part = NULL;
			} else {
				art_unlink_below(part);
				art_unlink_below(info);
			}
			goto out;
		}
		/* Durable before it takes the name: a crash leaves the old
		 * copy or the new one, never a torn file under its name. */
		if ((rc = fsync_path(part, err)) < 0) {
			gr_err_prefix(err, "cannot write artifact '%s'", ts(final));
			art_unlink_below(part);
			goto out;
		}
		if (rename(part, final) < 0) {
			rc = gr_errf(err, GR_EIO, "cannot rename '%s' into place: %s", ts(final), strerror(errno));
			art_unlink_below(part);
			goto out;
		}
		if (resumable)
			art_unlink_below(info);
		(*files)++;
	}
	if (r != ARCHIVE_EOF)
		rc = gr_errf(err, GR_EPROTO, "cannot read the artifacts: %s",
			     archive_error_string(in) ? archive_error_string(in) : "truncated");
out:
	/* The renames, durable too (the folders they are in). */
	if (*files)
		sync_dest(cwd >= 0 ? "." : dest);
	archive_read_free(in);
	archive_write_free(out);
	ZSTD_freeDStream(zi.z);
	free(zi.obuf);
	if (keep) { /* closed now: what came in order, and no more */
		int kfd = art_open_below(keep, O_WRONLY, 0);
		if (kfd < 0 || ftruncate(kfd, (off_t)got) < 0)
			art_unlink_below(keep);
		if (kfd >= 0)
			close(kfd);
		free(keep);
	}
	if (cwd >= 0) {
		if (fchdir(cwd) < 0)
			rc = rc ? rc : gr_errf(err, GR_EIO, "cannot return to the working folder: %s", strerror(errno));
		close(cwd);
	}
	free(part);
	free(final);
	free(info);
	return rc;
}

int art_extract_announced(int fd, const char *dest, int min_free_pct, struct art_delta *delta,
			  uint32_t *files, struct gr_err *err)
{
	unsigned char hdr[GR_ART_ANNOUNCE_LEN];
	struct art_limits lim = { .min_free_pct = min_free_pct, .delta = delta };
	ssize_t n = read_full(fd, hdr, sizeof(hdr));
	int rc;

	*files = 0;
	if (n != (ssize_t)sizeof(hdr))
		return gr_errf(err, GR_EPROTO, "the host's artifact stream ended before it began");
	if ((rc = art_announce_parse(hdr, &lim, err)) < 0)
		return rc;
	/* A delta entry is smaller than the file it makes: count the files. */
	if ((rc = art_space_check(dest, lim.bytes + art_delta_targets(delta), lim.files,
				  min_free_pct, err)) < 0) {
		gr_err_prefix(err, "%u file%s to pull", lim.files, lim.files == 1 ? "" : "s");
		return rc;
	}
	return art_extract_fd(fd, dest, &lim, files, err);
}

/* What the client has already: every complete file under dest; and the
 * part files a pull cut short left, with what they were begun from. */
static const char *have_root;
static struct strbuf *have_out, *part_out;
static uint32_t have_n, part_n;
static int have_big;

static int ends_with(const char *s, size_t n, const char *suffix)
{
	size_t k = strlen(suffix);
	return n > k && !strcmp(s + n - k, suffix);
}

/* rel is ".NAME.gpurun-partinfo" in some folder: list NAME's part. */
static void have_part(const char *abs, const char *rel, size_t n)
{
	struct strbuf t = STRBUF_INIT;
	const char *base = strrchr(rel, '/');
	size_t dir = base ? (size_t)(base - rel) + 1 : 0;
	long long size, sec, nsec;
	struct stat st;
	char *part, *name;

	base = rel + dir;
	if (base[0] != '.' || n - dir <= 1 + strlen(INFO_SUFFIX))
		return;
	name = xasprintf("%.*s%.*s", (int)dir, rel, (int)(n - dir - 1 - strlen(INFO_SUFFIX)), base + 1);
	part = xasprintf("%.*s" PART_SUFFIX, (int)(strlen(abs) - strlen(INFO_SUFFIX)), abs);
	if (read_file(abs, &t, NULL) == 0 && t.len < 96 &&
	    sscanf(t.buf, "%lld %lld %lld", &size, &sec, &nsec) == 3 && size > 0 && nsec >= 0 &&
	    nsec < 1000000000 && lstat(part, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size > 0 && st.st_size < size) {
		put_str(part_out, name);
		put_u64(part_out, (uint64_t)st.st_size);
		put_u64(part_out, (uint64_t)size);
		put_u64(part_out, (uint64_t)sec);
		put_u32(part_out, (uint32_t)nsec);
		part_n++;
	}
	sb_release(&t);
	free(part);
	free(name);
}

static int have_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	size_t rl = strlen(have_root);
	if (flag != FTW_F || !S_ISREG(st->st_mode) || strlen(p) <= rl + 1)
		return 0;
	const char *rel = p + rl + 1;
	size_t n = strlen(rel);
	if (ends_with(rel, n, INFO_SUFFIX))
		have_part(p, rel, n);
	if (ends_with(rel, n, PART_SUFFIX) || ends_with(rel, n, INFO_SUFFIX) ||
	    ends_with(rel, n, ART_NODELTA_SUFFIX))
		return 0;
	if ((uint64_t)st->st_size >= JOB_DELTA_MIN)
		have_big = 1;
	put_str(have_out, rel);
	put_u64(have_out, (uint64_t)st->st_size);
	put_u64(have_out, (uint64_t)st->st_mtim.tv_sec);
	put_u32(have_out, (uint32_t)st->st_mtim.tv_nsec);
	have_n++;
	return 0;
}

static int drop_part(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	size_t n = strlen(p);

	if (flag == FTW_F && S_ISREG(st->st_mode) && p[f->base] == '.' &&
	    (ends_with(p, n, PART_SUFFIX) || ends_with(p, n, INFO_SUFFIX) ||
	     ends_with(p, n, ART_NODELTA_SUFFIX)))
		unlink(p);
	return 0;
}

struct art_pull {
	struct gr_conn *c;
	uint32_t id;
	pid_t pid;
	int wfd, rfd;      /* data into the extractor, its result out */
	int broken;        /* the extractor stopped reading */
	int got_data;      /* a DATA frame came (GPURUN_TRACE says when) */
	int failed;        /* the agent answered ERROR */
	struct gr_err agent_err;
	struct art_stats st;
};

uint32_t art_pull_id(const struct art_pull *p)
{
	return p->id;
}

/* delta: the pull may bring files as deltas (it waits for the plan and
 * uploads signatures first: blocking). */
static int pull_start(struct gr_conn *c, const char *project, const char *id,
		      const struct strvec *patterns, const char *dest, int min_free_pct,
		      int delta, struct art_pull **out, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, have = STRBUF_INIT, parts = STRBUF_INIT;
	struct art_delta d = { .n = 0 };
	int dp[2] = { -1, -1 }, rp[2];
	struct art_pull *p;
	pid_t pid;

	if (mkdir_p(dest, 0755, err) < 0)
		return err->code;
	/* One pull at a time into dest, its extraction included: a pull
	 * that follows one just cut short (its extractor still keeping its
	 * part) waits for it, and so do two pulls of one job at once. The
	 * extractor inherits the lock and holds it until it exits. */
	int lk = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lk >= 0)
		while (flock(lk, LOCK_EX) < 0 && errno == EINTR)
			;
	have_root = dest;
	have_out = &have;
	part_out = &parts;
	have_n = part_n = 0;
	have_big = 0;
	nftw(dest, have_one, 16, FTW_PHYS);
	put_str(&pl, project);
	put_str(&pl, id);
	put_u32(&pl, (uint32_t)patterns->n);
	for (size_t i = 0; i < patterns->n; i++)
		put_str(&pl, patterns->v[i] + config_job_dir_prefix(patterns->v[i]));
	put_u32(&pl, have_n);
	sb_add(&pl, have.buf, have.len);
	put_u32(&pl, part_n);
	sb_add(&pl, parts.buf, parts.len);
	sb_release(&have);
	sb_release(&parts);
	if (delta) {
		int rc = art_delta_prepare(c, &pl, project, id, dest, have_big, &d, err);
		if (rc < 0) {
			if (lk >= 0)
				close(lk);
			sb_release(&pl);
			return rc;
		}
	}
	if (pipe2(dp, O_CLOEXEC) < 0 || pipe2(rp, O_CLOEXEC) < 0) {
		int e = errno;
		if (dp[0] >= 0) {
			close(dp[0]);
			close(dp[1]);
		}
		if (lk >= 0)
			close(lk);
		sb_release(&pl);
		art_delta_free(&d);
		return gr_errf(err, GR_EIO, "pipe: %s", strerror(e));
	}
	/* Room for bursts: with 64 KiB, gpurun stalled on the extractor's
	 * every pause (a page-cache write, a new file), and the stream with
	 * it. Best effort: the default size works, only slower. */
	(void)fcntl(dp[1], F_SETPIPE_SZ, 1 << 20);
	pid = fork();
	if (pid < 0) {
		close(dp[0]); close(dp[1]); close(rp[0]); close(rp[1]);
		if (lk >= 0)
			close(lk);
		sb_release(&pl);
		art_delta_free(&d);
		return gr_errf(err, GR_EIO, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		struct gr_err e = { 0 };
		uint32_t files = 0;
		char res[1200];
		int n;

		/* Hold none of gpurun's descriptors (the connection's pipes). */
		for (int fd = 3; fd < 1024; fd++) {
			int basis = 0;
			for (size_t i = 0; i < d.n && !basis; i++)
				basis = d.v[i].fd == fd;
			if (fd != dp[0] && fd != rp[1] && fd != lk && !basis)
				close(fd);
		}
		signal(SIGINT, SIG_IGN); /* gpurun decides what Ctrl-C means */
		if (art_extract_announced(dp[0], dest, min_free_pct, &d, &files, &e) == 0) {
			/* Every file the host sent is whole: a part left is of a
			 * file it no longer sends. */
			nftw(dest, drop_part, 16, FTW_PHYS);
			n = snprintf(res, sizeof(res), "0 %u %u\n", files, art_delta_used(&d));
			/* Drain what is left so the writer never blocks on us. */
			char buf[65536];
			while (read(dp[0], buf, sizeof(buf)) > 0)
				;
		} else {
			/* Refused: stop reading, so gpurun sees the pipe break
			 * and cancels the request rather than take it all. */
			n = snprintf(res, sizeof(res), "1 %s\n%s", e.msg, e.hint);
			close(dp[0]);
		}
		if (write_full(rp[1], res, (size_t)n) < 0)
			_exit(1);
		_exit(0);
	}
	close(dp[0]);
	close(rp[1]);
	if (lk >= 0)
		close(lk);
	p = xcalloc(1, sizeof(*p));
	p->c = c;
	p->pid = pid;
	p->wfd = dp[1];
	p->rfd = rp[0];
	p->id = conn_next_id(c);
	/* flags, and the signatures staged for this pull */
	put_u32(&pl, 0);
	put_str(&pl, d.n ? d.token : "");
	put_u32(&pl, (uint32_t)d.n);
	for (size_t i = 0; i < d.n; i++) {
		put_str(&pl, d.v[i].path);
		put_u32(&pl, d.v[i].index);
	}
	conn_send(c, GR_MSG_ART_PULL, 0, p->id, pl.buf, pl.len);
	sb_release(&pl);
	art_delta_free(&d); /* the extractor has its own copy */
	*out = p;
	return 0;
}

int art_pull_start(struct gr_conn *c, const char *project, const char *id,
		   const struct strvec *patterns, const char *dest, int min_free_pct,
		   struct art_pull **out, struct gr_err *err)
{
	/* Beside a log being followed: no plan round (it would wait for its
	 * answer with the log's frames arriving), whole files. */
	return pull_start(c, project, id, patterns, dest, min_free_pct, 0, out, err);
}

int art_pull_frame(struct art_pull *p, const struct gr_frame *f)
{
	struct gr_rd rd;

	if (f->type == GR_MSG_DATA) {
		if (!p->got_data++)
			gr_trace("pull: first data");
		if (!p->broken && write_full(p->wfd, f->payload, f->len) < 0) {
			/* The extractor refused the rest (it says why): stop the
			 * transfer here rather than receive it for nothing. The
			 * agent answers nothing more to a cancelled request. */
			p->broken = 1;
			conn_send(p->c, GR_MSG_CANCEL, 0, p->id, NULL, 0);
			return 1;
		}
		return 0;
	}
	if (f->type == GR_MSG_ERROR) {
		conn_error_from_frame(f, &p->agent_err);
		p->failed = 1;
		return 1;
	}
	if (f->type == GR_MSG_OK) {
		rd_init(&rd, f->payload, f->len);
		p->st.matched = get_u32(&rd);
		p->st.sent = get_u32(&rd);
		p->st.bytes = get_u64(&rd);
		p->st.written = get_u32(&rd);
		uint32_t n = get_u32(&rd);
		for (uint32_t i = 0; i < n && i < 64 && !rd.bad; i++) {
			char *path = get_str(&rd);
			uint64_t size = get_u64(&rd);
			if (path)
				sv_pushf(&p->st.names, "%s\t%llu", path, (unsigned long long)size);
			free(path);
		}
		n = get_u32(&rd);
		for (uint32_t i = 0; i < n && !rd.bad; i++) {
			char *path = get_str(&rd), *why = get_str(&rd);
			if (path && why && i < 64)
				sv_pushf(&p->st.whole, "%s\t%s", path, why);
			free(path);
			free(why);
		}
		if (rd_done(&rd, &p->agent_err, "ART_PULL") < 0)
			p->failed = 1;
		return 1;
	}
	return 0; /* not ours to judge */
}

static void pull_free(struct art_pull *p, int kill_it)
{
	sv_clear(&p->st.names);
	sv_clear(&p->st.whole);
	if (p->wfd >= 0)
		close(p->wfd);
	if (kill_it)
		kill(p->pid, SIGKILL);
	while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(p->rfd);
	free(p);
}

int art_pull_finish(struct art_pull *p, struct art_stats *st, struct gr_err *err)
{
	struct strbuf res = STRBUF_INIT;
	int rc = 0;

	close(p->wfd);
	p->wfd = -1;
	char buf[4096];
	ssize_t n;
	while ((n = read(p->rfd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		sb_add(&res, buf, (size_t)n);
	}
	if (p->failed) {
		rc = gr_errf(err, p->agent_err.code ? p->agent_err.code : GR_EREMOTE, "%s", p->agent_err.msg);
	} else if (res.len >= 2 && res.buf[0] == '0') {
		unsigned files = 0, deltas = 0;
		res.buf[strcspn(res.buf, "\n")] = '\0';
		if (sscanf(res.buf + 2, "%u %u", &files, &deltas) == 2 && deltas <= files) {
			p->st.extracted = files;
			p->st.deltas = deltas;
		}
	} else if (res.len >= 2) {
		char *nl = strchr(res.buf + 2, '\n');
		if (nl)
			*nl = '\0';
		rc = gr_errf(err, GR_EINVAL, "%s", res.buf + 2);
		if (nl && nl[1])
			gr_hintf(err, "%s", nl + 1);
	} else {
		rc = gr_errf(err, GR_EIO, "the artifact extraction stopped without a word");
	}
	if (st) {
		*st = p->st;
		p->st.names = (struct strvec)STRVEC_INIT;
		p->st.whole = (struct strvec)STRVEC_INIT;
	}
	sb_release(&res);
	pull_free(p, 0);
	return rc;
}

void art_stats_release(struct art_stats *st)
{
	sv_clear(&st->names);
	sv_clear(&st->whole);
}

void art_pull_abort(struct art_pull *p)
{
	if (p)
		pull_free(p, 0); /* closing its input ends it; it removes its part file */
}

int art_pull(struct gr_conn *c, const char *project, const char *id,
	     const struct strvec *patterns, const char *dest, int min_free_pct,
	     struct art_stats *st, struct gr_err *err)
{
	struct art_pull *p;
	struct gr_frame f;
	int rc = pull_start(c, project, id, patterns, dest, min_free_pct, 1, &p, err);

	if (rc < 0)
		return rc;
	for (;;) {
		rc = conn_recv_idle(c, &f, conn_idle_ms(), err);
		if (rc < 0) {
			art_pull_abort(p);
			return rc;
		}
		if (f.id == p->id && art_pull_frame(p, &f))
			break;
	}
	return art_pull_finish(p, st, err);
}
