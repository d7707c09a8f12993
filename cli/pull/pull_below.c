/* The filesystem below a pull's destination: opens, removals and folders
 * through no symlink, the hidden siblings, and the scan of what is there
 * (see pull_below.h). Below the extraction and the delta's half, which
 * both write through it. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compat.h"
#include "job_proto.h"
#include "pull_below.h"

/* The folder holding rel below dirfd, opened through no symlink (make:
 * its folders made where missing): dirfd for a name without a '/', -1
 * (errno set) if a folder on the way cannot be made or opened (or is a
 * symlink). *base: rel's last component. */
static int parent_below(int dirfd, const char *rel, int make, const char **base)
{
	const char *slash = strrchr(rel, '/');

	*base = slash ? slash + 1 : rel;
	return walk_below(dirfd, rel, slash ? (size_t)(slash - rel) : 0, make);
}

static void close_below(int dfd)
{
	if (dfd >= 0)
		close(dfd);
}

int art_open_below(const char *rel, int flags, mode_t mode)
{
	const char *base;
	int dfd = parent_below(AT_FDCWD, rel, 0, &base), fd = -1;

	if (dfd >= 0 || dfd == AT_FDCWD)
		fd = openat(dfd, base, flags | O_NOFOLLOW | O_CLOEXEC, mode);
	close_below(dfd);
	return fd;
}

/* A name the host chose never removes a file a symlink here leads to. */
void art_unlink_below(const char *rel)
{
	const char *base;
	int dfd = parent_below(AT_FDCWD, rel, 0, &base);

	if (dfd >= 0 || dfd == AT_FDCWD)
		(void)unlinkat(dfd, base, 0);
	close_below(dfd);
}

int art_mkdirs_below(const char *rel)
{
	const char *base;
	int dfd = parent_below(AT_FDCWD, rel, 1, &base);

	close_below(dfd);
	return dfd == -1 ? -1 : 0;
}

char *art_sibling(const char *final, const char *suffix)
{
	const char *slash = strrchr(final, '/');

	return slash ? xasprintf("%.*s/.%s%s", (int)(slash - final), final, slash + 1, suffix)
		     : xasprintf(".%s%s", final, suffix);
}

int art_open_under(const char *root, const char *rel, struct stat *st)
{
	int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC), dfd, fd = -1;
	const char *base;

	if (rfd < 0)
		return -1;
	dfd = parent_below(rfd, rel, 0, &base);
	/* O_NONBLOCK: a FIFO put there must not block the open. */
	if (dfd >= 0)
		fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (dfd != rfd)
		close_below(dfd);
	close(rfd);
	if (fd >= 0 && (fstat(fd, st) < 0 || !S_ISREG(st->st_mode) || !st->st_size)) {
		close(fd);
		return -1;
	}
	/* Reads block as usual from here on. */
	int fl = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}

/* ---- what dest holds already ---- */

static const char *have_root;
static struct art_have *have;

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
	if (base[0] != '.' || n - dir <= 1 + strlen(ART_INFO_SUFFIX))
		return;
	name = xasprintf("%.*s%.*s", (int)dir, rel, (int)(n - dir - 1 - strlen(ART_INFO_SUFFIX)),
			 base + 1);
	part = xasprintf("%.*s" ART_PART_SUFFIX, (int)(strlen(abs) - strlen(ART_INFO_SUFFIX)), abs);
	if (read_file(abs, &t, NULL) == 0 && t.len < 96 &&
	    sscanf(t.buf, "%lld %lld %lld", &size, &sec, &nsec) == 3 && size > 0 && nsec >= 0 &&
	    nsec < 1000000000 && lstat(part, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size > 0 && st.st_size < size) {
		put_str(&have->parts, name);
		put_u64(&have->parts, (uint64_t)st.st_size);
		put_u64(&have->parts, (uint64_t)size);
		put_u64(&have->parts, (uint64_t)sec);
		put_u32(&have->parts, (uint32_t)nsec);
		have->nparts++;
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
	if (ends_with(rel, n, ART_INFO_SUFFIX))
		have_part(p, rel, n);
	if (ends_with(rel, n, ART_PART_SUFFIX) || ends_with(rel, n, ART_INFO_SUFFIX) ||
	    ends_with(rel, n, ART_NODELTA_SUFFIX))
		return 0;
	if ((uint64_t)st->st_size >= JOB_DELTA_MIN)
		have->big = 1;
	put_str(&have->files, rel);
	put_u64(&have->files, (uint64_t)st->st_size);
	put_u64(&have->files, (uint64_t)st->st_mtime);
	put_u32(&have->files, (uint32_t)GR_ST_MTIME_NSEC(st));
	have->nfiles++;
	return 0;
}

void art_have_scan(const char *dest, struct art_have *h)
{
	*h = (struct art_have){ .files = STRBUF_INIT, .parts = STRBUF_INIT };
	have_root = dest;
	have = h;
	nftw(dest, have_one, 16, FTW_PHYS);
	have = NULL;
	have_root = NULL;
}

void art_have_release(struct art_have *h)
{
	sb_release(&h->files);
	sb_release(&h->parts);
}

static int drop_part(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	size_t n = strlen(p);

	if (flag == FTW_F && S_ISREG(st->st_mode) && p[f->base] == '.' &&
	    (ends_with(p, n, ART_PART_SUFFIX) || ends_with(p, n, ART_INFO_SUFFIX) ||
	     ends_with(p, n, ART_NODELTA_SUFFIX)))
		unlink(p);
	return 0;
}

void art_drop_parts(const char *dest)
{
	nftw(dest, drop_part, 16, FTW_PHYS);
}
