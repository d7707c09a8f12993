/* A project folder on a shared host must be the user's alone. The agent
 * refuses one that another user could change (and so plant a GNUmakefile,
 * a .pth file, a conftest.py the build or job then runs as the user), the
 * way sshd's StrictModes judges ~/.ssh; it makes new project folders
 * 0700, and unless asked to preserve them it gives synced files and
 * folders only their owner's permission bits, so a .env is not readable
 * by every account on the box. */
#ifndef GR_SAFE_DIR_H
#define GR_SAFE_DIR_H

#include <stdint.h>
#include <sys/types.h>

#include "err.h"

#define SAFE_PROJECT_MODE 0700 /* a project folder the agent creates */

/* real: an absolute path without symlinks (realpath's). Refuses it when it
 * or a parent up to the user's home (when real is below it) or up to "/"
 * is owned by someone other than the user or root, or is writable by
 * group or others; a parent (not real itself) may be so writable when it
 * has the sticky bit (as /tmp). is_project: real is the project folder;
 * 0 for an existing ancestor checked before the folder is created. 0, or
 * GR_EINVAL with err naming the folder and how to fix it. */
int safe_dir_check(const char *real, int is_project, struct gr_err *err);

/* Check the project folder path (absolute): the deepest part that exists
 * before it is created, all of it after (see sfs_open_root). resolved
 * (may be NULL): the checked path, symlinks resolved, when all of it
 * exists (caller frees; else NULL): use it rather than path, so no link
 * is followed again after the check. */
int safe_dir_check_path(const char *path, int is_project, char **resolved,
			struct gr_err *err);

/* [sync] preserve_perms, as this connection's SYNC_OPEN said. */
void safe_perms_preserve(int on);
/* The mode a synced file gets on the host for the client's mode: the
 * owner's bits only (execute kept), or all of mode & 0777 when
 * preserving. */
mode_t safe_file_mode(uint32_t mode);
/* The mode for a folder sync creates: 0700, or 0755 when preserving. */
mode_t safe_dir_mode(void);

#endif
