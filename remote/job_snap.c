/* The per-job snapshot of the project tree (see job_snap.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "job_snap.h"
#include "util.h"

struct snap {
	int64_t fresh_after_ns;
	struct snap_stats *st;
	struct gr_err *err;
};

static int copy_file(struct snap *s, int sdfd, int ddfd, const char *name,
		     const struct stat *st, const char *rel)
{
	int in = openat(sdfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), out = -1, rc = 0;
	char buf[65536];

	if (in < 0)
		return errno == ENOENT ? 0 : gr_errf(s->err, GR_EIO, "cannot read '%s': %s", rel, strerror(errno));
	out = openat(ddfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st->st_mode & 07777);
	if (out < 0) {
		rc = gr_errf(s->err, GR_EIO, "cannot create '%s' in the snapshot: %s", rel, strerror(errno));
		goto out;
	}
	for (;;) {
		ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
		if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
			n = read(in, buf, sizeof(buf));
			if (n > 0 && write_full(out, buf, (size_t)n) < 0)
				n = -1;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = gr_errf(s->err, GR_EIO, "cannot copy '%s' into the snapshot: %s", rel, strerror(errno));
			goto out;
		}
		if (n == 0)
			break;
		s->st->bytes_copied += (uint64_t)n;
	}
	struct timespec ts[2] = { st->st_atim, st->st_mtim };
	futimens(out, ts);
	s->st->copied++;
out:
	if (out >= 0)
		close(out);
	close(in);
	return rc;
}

static int walk(struct snap *s, int sdfd, int ddfd, const char *rel)
{
	DIR *d = fdopendir(sdfd);
	struct dirent *e;
	int rc = 0;

	if (!d) {
		close(sdfd);
		return gr_errf(s->err, GR_EIO, "cannot list '%s': %s", *rel ? rel : ".", strerror(errno));
	}
	while (rc == 0 && (e = readdir(d))) {
		struct stat st;
		char *sub;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone meanwhile */
		sub = *rel ? xasprintf("%s/%s", rel, e->d_name) : xstrdup(e->d_name);
		if (S_ISDIR(st.st_mode)) {
			if (mkdirat(ddfd, e->d_name, (st.st_mode & 07777) | 0700) < 0) {
				rc = gr_errf(s->err, GR_EIO, "cannot create '%s' in the snapshot: %s", sub, strerror(errno));
			} else {
				int a = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				int b = openat(ddfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (a < 0 || b < 0) {
					rc = gr_errf(s->err, GR_EIO, "cannot open '%s': %s", sub, strerror(errno));
					if (a >= 0)
						close(a);
				} else {
					rc = walk(s, a, b, sub); /* closes a */
				}
				if (b >= 0)
					close(b);
			}
		} else if (S_ISLNK(st.st_mode)) {
			char target[4096];
			ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
			if (n >= 0) {
				target[n] = '\0';
				if (symlinkat(target, ddfd, e->d_name) < 0)
					rc = gr_errf(s->err, GR_EIO, "cannot create '%s' in the snapshot: %s", sub, strerror(errno));
			}
		} else if (S_ISREG(st.st_mode)) {
			int64_t mt = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
			int link_it = (uint64_t)st.st_size > SNAP_COPY_MAX && mt < s->fresh_after_ns;
			if (link_it && linkat(dirfd(d), e->d_name, ddfd, e->d_name, 0) == 0)
				s->st->linked++;
			else
				rc = copy_file(s, dirfd(d), ddfd, e->d_name, &st, sub);
		}
		free(sub);
	}
	closedir(d);
	return rc;
}

int job_snapshot(const char *src, const char *dst, uint32_t fresh_ms,
		 struct snap_stats *st, struct gr_err *err)
{
	struct timespec now;
	struct snap s = { 0, st, err };
	int a, b, rc;

	*st = (struct snap_stats){ 0 };
	clock_gettime(CLOCK_REALTIME, &now);
	s.fresh_after_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec - (int64_t)fresh_ms * 1000000;
	if (mkdir(dst, 0755) < 0)
		return gr_errf(err, GR_EIO, "cannot create '%s': %s", dst, strerror(errno));
	a = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (a < 0)
		return gr_errf(err, GR_EIO, "cannot open '%s': %s", src, strerror(errno));
	b = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (b < 0) {
		close(a);
		return gr_errf(err, GR_EIO, "cannot open '%s': %s", dst, strerror(errno));
	}
	rc = walk(&s, a, b, "");
	close(b);
	return rc;
}
