/* Safe filesystem operations under the remote project folder (see
 * sync_fs.h): the agent is the last line of defence, so it checks the
 * folder itself and never resolves a client path through a symlink. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "sync_fs.h"
#include "sync_manifest.h"
#include "sync_proto.h"

static char *real_home(void)
{
	const char *h = getenv("HOME");
	char buf[PATH_MAX];

	if (!h || !*h)
		return xstrdup("/");
	if (realpath(h, buf))
		return xstrdup(buf);
	return sm_clean_path(h);
}

int sfs_open_root(const char *path, int create, int *rootfd, char **real,
		  int *created, struct gr_err *err)
{
	char *clean = NULL, *home = real_home();
	char buf[PATH_MAX];
	const char *why;
	int rc = 0;
	struct stat st;

	*rootfd = -1;
	*real = NULL;
	if (created)
		*created = 0;
	if (path[0] != '/') {
		rc = gr_errf(err, GR_EINVAL, "remote path '%s' is not absolute", path);
		goto out;
	}
	clean = sm_clean_path(path);
	if ((why = sm_root_refused(clean, home))) {
		rc = gr_errf(err, GR_EINVAL, "refusing to sync into '%s': %s", clean, why);
		goto out;
	}
	if (lstat(clean, &st) < 0) {
		if (errno != ENOENT || !create) {
			rc = gr_errf(err, errno == ENOENT ? GR_ENOTFOUND : GR_EIO,
				     "cannot open remote folder '%s': %s", clean, strerror(errno));
			goto out;
		}
		if ((rc = safe_dir_check_path(clean, 1, NULL, err)) < 0 ||
		    (rc = mkdir_p(clean, SAFE_PROJECT_MODE, err)) < 0)
			goto out;
		if (created)
			*created = 1;
	}
	if (!realpath(clean, buf)) {
		rc = gr_errf(err, GR_EIO, "cannot resolve remote folder '%s': %s", clean,
			     strerror(errno));
		goto out;
	}
	if ((why = sm_root_refused(buf, home))) {
		rc = gr_errf(err, GR_EINVAL, "refusing to sync into '%s' ('%s'): %s",
			     clean, buf, why);
		goto out;
	}
	if ((rc = safe_dir_check(buf, 1, err)) < 0)
		goto out;
	*rootfd = open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*rootfd < 0) {
		rc = gr_errf(err, GR_EIO, "cannot open remote folder '%s': %s", buf,
			     strerror(errno));
		goto out;
	}
	*real = xstrdup(buf);
out:
	free(clean);
	free(home);
	return rc;
}

void sfs_dir_init(struct sfs_dir *d, int rootfd)
{
	d->rootfd = rootfd;
	d->path = NULL;
	d->fd = -1;
	d->stage = NULL;
	d->stage_arg = NULL;
}

void sfs_dir_release(struct sfs_dir *d)
{
	if (d->fd >= 0 && d->fd != d->rootfd)
		close(d->fd);
	free(d->path);
	d->path = NULL;
	d->fd = -1;
}

int sfs_parent(struct sfs_dir *d, const char *relpath, const char **base)
{
	const char *slash = strrchr(relpath, '/');
	size_t plen = slash ? (size_t)(slash - relpath) : 0;
	const char *start;
	int fd;

	*base = slash ? slash + 1 : relpath;
	if (!plen)
		return d->rootfd;
	if (d->path && strlen(d->path) == plen && !strncmp(d->path, relpath, plen))
		return d->fd;
	/* Walk down from the cached folder when it is an ancestor, else from
	 * the root, one component at a time, refusing symlinks. */
	size_t cl = d->path ? strlen(d->path) : 0;
	if (d->path && cl && cl < plen && !strncmp(d->path, relpath, cl) && relpath[cl] == '/') {
		fd = d->fd;
		start = relpath + cl + 1;
	} else {
		fd = d->rootfd;
		start = relpath;
	}
	int cur = fd;
	int owned = 0; /* cur is ours to close (not root, not d->fd) */
	while (start < relpath + plen) {
		const char *end = memchr(start, '/', (size_t)(relpath + plen - start));
		if (!end)
			end = relpath + plen;
		char name[256];
		size_t n = (size_t)(end - start);
		if (n == 0 || n >= sizeof(name)) {
			if (owned)
				close(cur);
			errno = EINVAL;
			return -1;
		}
		memcpy(name, start, n);
		name[n] = '\0';
		const char *staged = d->stage ? d->stage(d->stage_arg, relpath,
							 (size_t)(end - relpath)) : NULL;
		int next = openat(cur, staged ? staged : name,
				  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int e = errno;
		if (owned)
			close(cur);
		if (next < 0) {
			errno = e == ELOOP ? ENOTDIR : e;
			return -1;
		}
		cur = next;
		owned = 1;
		start = end + 1;
	}
	sfs_dir_release(d);
	d->path = xstrndup(relpath, plen);
	d->fd = cur;
	return cur;
}

int sfs_tmp_create(int dirfd, char *tmpname, size_t size)
{
	static unsigned long counter;

	for (int tries = 0; tries < 100; tries++) {
		unsigned long n = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
		snprintf(tmpname, size, SYNC_TMP_PREFIX "%ld-%lu", (long)getpid(), n);
		int fd = openat(dirfd, tmpname,
				O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

int sfs_is_tmp_name(const char *name)
{
	return !strncmp(name, SYNC_TMP_PREFIX, strlen(SYNC_TMP_PREFIX));
}

void sfs_clean_tmps(struct sfs_dir *d, const char *reldir)
{
	int fd;

	if (!*reldir) {
		fd = dup(d->rootfd);
	} else {
		char *probe = xasprintf("%s/x", reldir);
		const char *base;
		int pfd = sfs_parent(d, probe, &base);
		fd = pfd < 0 ? -1 : dup(pfd);
		free(probe);
	}
	if (fd < 0)
		return;
	DIR *dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(dir)))
		if (sfs_is_tmp_name(de->d_name))
			rm_tree_at(dirfd(dir), de->d_name);
	closedir(dir);
}

int sfs_lstat(struct sfs_dir *d, const char *relpath, struct stat *st)
{
	const char *base;
	int dfd = sfs_parent(d, relpath, &base);

	if (dfd < 0)
		return -1;
	return fstatat(dfd, base, st, AT_SYMLINK_NOFOLLOW);
}

int sfs_hash_file(struct sfs_dir *d, const char *relpath, uint8_t hash[32],
		  uint64_t *size)
{
	const char *base;
	int dfd = sfs_parent(d, relpath, &base);
	struct stat st;
	struct thash t;
	char *buf;

	if (dfd < 0)
		return -1;
	int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	thash_init(&t, (uint64_t)st.st_size);
	buf = xmalloc(1 << 18);
	for (;;) {
		ssize_t r = read(fd, buf, 1 << 18);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			free(buf);
			errno = e;
			return -1;
		}
		if (r == 0)
			break;
		thash_update(&t, buf, (size_t)r);
		agent_keepalive();
	}
	close(fd);
	free(buf);
	thash_final(&t, hash);
	if (size)
		*size = t.done;
	return 0;
}

int64_t sfs_mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

int64_t sfs_ctime_ns(const struct stat *st)
{
	return (int64_t)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec;
}
