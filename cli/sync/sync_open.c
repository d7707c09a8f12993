/* Opening project files one folder at a time, never through a symlink
 * (see sync_open.h). The last folder reached is kept open: the files of a
 * sync come in path order, so most opens take one openat. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sync_open.h"
#include "util.h"

struct sync_tree {
	int rootfd;
	char *dir;   /* relative path of dirfd ("" for the root) */
	size_t dirlen;
	int dirfd;
};

struct sync_tree *sync_tree_open(const char *root, struct gr_err *err)
{
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0) {
		gr_errf(err, GR_EIO, "cannot open folder '%s': %s", root, strerror(errno));
		return NULL;
	}
	struct sync_tree *t = xcalloc(1, sizeof(*t));
	t->rootfd = t->dirfd = fd;
	t->dir = xstrdup("");
	return t;
}

void sync_tree_close(struct sync_tree *t)
{
	if (!t)
		return;
	if (t->dirfd != t->rootfd)
		close(t->dirfd);
	close(t->rootfd);
	free(t->dir);
	free(t);
}

static void set_dir(struct sync_tree *t, const char *path, size_t len, int fd)
{
	if (t->dirfd != t->rootfd)
		close(t->dirfd);
	free(t->dir);
	t->dir = xstrndup(path, len);
	t->dirlen = len;
	t->dirfd = fd;
}

/* The folder holding relpath (plen bytes of it), opened from the cached
 * folder when that is an ancestor, else from the root. -1 with errno. */
static int parent_fd(struct sync_tree *t, const char *relpath, size_t plen)
{
	const char *start = relpath;
	int cur = t->rootfd;

	if (!plen)
		return t->rootfd;
	if (t->dirlen == plen && !memcmp(t->dir, relpath, plen))
		return t->dirfd;
	if (t->dirlen && t->dirlen < plen && !memcmp(t->dir, relpath, t->dirlen) &&
	    relpath[t->dirlen] == '/') {
		cur = t->dirfd;
		start = relpath + t->dirlen + 1;
	}
	/* One folder at a time, never through a symlink (util.c). */
	int fd = walk_below(cur, start, (size_t)(relpath + plen - start), 0);
	if (fd < 0 || fd == cur)
		return fd;
	set_dir(t, relpath, plen, fd);
	return fd;
}

int sync_tree_open_file(struct sync_tree *t, const char *relpath, uint64_t dev, uint64_t ino,
			struct gr_err *err)
{
	const char *slash = strrchr(relpath, '/');
	size_t plen = slash ? (size_t)(slash - relpath) : 0;
	struct stat st;
	int dfd = parent_fd(t, relpath, plen), fd;

	if (dfd < 0) {
		if (errno == ENOENT)
			return gr_errf(err, GR_ENOTFOUND, "'%s' was deleted", relpath);
		if (errno == ENOTDIR || errno == ELOOP)
			return gr_errf(err, GR_ECONFLICT, "a folder above '%s' was replaced "
				       "(by a symlink or a file)", relpath);
		return gr_errf(err, GR_EIO, "cannot open the folder of '%s': %s", relpath,
			       strerror(errno));
	}
	/* O_NONBLOCK: a FIFO put there meanwhile must not block the open. */
	fd = openat(dfd, slash ? slash + 1 : relpath,
		    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return gr_errf(err, GR_ENOTFOUND, "'%s' was deleted", relpath);
		if (errno == ELOOP)
			return gr_errf(err, GR_ECONFLICT, "'%s' was replaced by a symlink", relpath);
		return gr_errf(err, GR_EIO, "cannot open '%s': %s", relpath, strerror(errno));
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (ino && ((uint64_t)st.st_dev != dev || (uint64_t)st.st_ino != ino))) {
		close(fd);
		return gr_errf(err, GR_ECONFLICT, "'%s' was replaced by another file", relpath);
	}
	/* Reads block as usual from here on. */
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0)
		fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	return fd;
}
