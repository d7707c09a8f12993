/* Safe extraction of a pull's tar.zst into runs/<job>/ (see
 * pull_extract.h): the names checked, each file written to its part and
 * renamed into place once whole and durable, a large file's part kept
 * when the stream is cut short, for the next pull to resume. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "art_delta.h"
#include "art_limits.h"
#include "compat.h"
#include "job_proto.h"
#include "pull_below.h"
#include "pull_extract.h"
#include "term.h"

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
	char *part = art_sibling(final, ART_PART_SUFFIX), *info = art_sibling(final, ART_INFO_SUFFIX);
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
 * (cheaper than an fsync of every folder a pull touched; see compat.h for
 * what the fallback promises). */
static void sync_dest(const char *dest)
{
	int fd = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd >= 0) {
		(void)compat_syncfs(fd);
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
		part = art_sibling(final, ART_PART_SUFFIX);
		info = art_sibling(final, ART_INFO_SUFFIX);
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
		int resumable = size >= (int64_t)ART_RESUME_MIN;
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
				compat_writeback(wb, (off_t)wb_done, (off_t)(got - wb_done));
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
