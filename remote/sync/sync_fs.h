/* The agent's filesystem layer for sync: everything below the remote
 * project folder is reached with openat() one component at a time with
 * O_NOFOLLOW, so no write, rename or deletion ever goes through a symlink
 * or leaves the folder, whatever the paths the client sends. */
#ifndef GR_SYNC_FS_H
#define GR_SYNC_FS_H

#include <stdint.h>
#include <sys/stat.h>

#include "err.h"
#include "util.h"

/* Resolve the configured project folder (after agent_path), create it if
 * create is set, and refuse the folders sync must never write into: "/",
 * $HOME itself or any folder above it, and system folders (/etc, /usr,
 * /bin, /var, ... and, for the ones that are never a project's home,
 * anything below them). On success *rootfd is an O_DIRECTORY fd and
 * *real the resolved path (caller frees). *created says it was made. */
int sfs_open_root(const char *path, int create, int *rootfd, char **real,
		  int *created, struct gr_err *err);

/* A cache of the last parent folder opened, one per thread. A folder
 * being built under a temp name (sync_agent.h: staged folders) is reached
 * through stage: given a relative path's first len bytes, it returns the
 * temp name that component has on the disk, or NULL. */
struct sfs_dir {
	int rootfd;
	char *path;  /* relative path of fd ("" for the root) */
	int fd;
	const char *(*stage)(void *arg, const char *relpath, size_t len);
	void *stage_arg;
};
void sfs_dir_init(struct sfs_dir *d, int rootfd);
void sfs_dir_release(struct sfs_dir *d);

/* Open the parent folder of relpath (never following a symlink); returns
 * its fd (owned by d, valid until the next call) and sets *base to the last
 * component (points into relpath). -1 with errno set on failure
 * (ELOOP/ENOTDIR when a component is a symlink or not a folder). */
int sfs_parent(struct sfs_dir *d, const char *relpath, const char **base);

/* A fresh temp file in dirfd named SYNC_TMP_PREFIX<pid>-<n>; returns the
 * fd (O_RDWR, mode 0600) and the name in tmpname (size >= 64). */
int sfs_tmp_create(int dirfd, char *tmpname, size_t size);
int sfs_is_tmp_name(const char *name);

/* Remove every stray temp file, and temp folder with all it holds, in
 * the folder at relpath. */
void sfs_clean_tmps(struct sfs_dir *d, const char *reldir);

/* lstat relpath without following symlinks anywhere. */
int sfs_lstat(struct sfs_dir *d, const char *relpath, struct stat *st);

/* Content hash of the regular file at relpath (0, or -1 with errno). */
int sfs_hash_file(struct sfs_dir *d, const char *relpath, uint8_t hash[32],
		  uint64_t *size);

int64_t sfs_mtime_ns(const struct stat *st);
int64_t sfs_ctime_ns(const struct stat *st);

#endif
