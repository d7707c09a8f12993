/* The filesystem below a pull's destination, runs/<job>/: every name
 * there comes from the host, so each is reached one folder at a time
 * with O_NOFOLLOW (walk_below, util.h), and a symlink put in the folder
 * never leads a write or a removal out of it. Also the hidden siblings a
 * pull keeps beside a file (its part, the note of what the part was
 * begun from, the note that a delta failed) and the scan of what the
 * folder holds already, which the request tells the host. The folder's
 * own header (pull.h is cli/pull's face). */
#ifndef GR_PULL_BELOW_H
#define GR_PULL_BELOW_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "util.h"

/* A file being written, until it is whole and renamed to its name. */
#define ART_PART_SUFFIX ".gpurun-part"
/* Beside a part file of ART_RESUME_MIN bytes or more: "size mtime_s
 * mtime_ns" of the host's file it was begun from, so a pull cut short
 * resumes from what the part holds (PROTOCOL.md, ART_PULL). */
#define ART_INFO_SUFFIX ".gpurun-partinfo"
#define ART_RESUME_MIN (1u << 20)
/* The note beside a file whose delta failed: the next pull takes it whole. */
#define ART_NODELTA_SUFFIX ".gpurun-nodelta"

/* rel below the working folder, opened through no symlink (each folder
 * with O_NOFOLLOW, then the file with flags | O_NOFOLLOW); -1 on failure. */
int art_open_below(const char *rel, int flags, mode_t mode);
/* Remove the file rel below the working folder, through no symlink. */
void art_unlink_below(const char *rel);
/* The folders of rel below the working folder, made (0755) where missing,
 * through no symlink. 0, or -1 with errno. */
int art_mkdirs_below(const char *rel);
/* The hidden sibling ".NAME<suffix>" of final (new string). */
char *art_sibling(const char *final, const char *suffix);
/* The regular, non-empty file rel below the folder root (root itself
 * may be a symlink: it is a folder this client chose), opened for
 * reading through no symlink; -1 if there is none. st: its stat. */
int art_open_under(const char *root, const char *rel, struct stat *st);

/* What dest holds already, as ART_PULL tells the host: its complete
 * files (files: str path, u64 size, u64 mtime_s, u32 mtime_ns; nfiles of
 * them) and the parts a pull cut short left with what they were begun
 * from (parts: str path, u64 have, u64 size, u64 mtime_s, u32 mtime_ns).
 * big: a complete file of JOB_DELTA_MIN bytes or more is there. */
struct art_have {
	struct strbuf files, parts;
	uint32_t nfiles, nparts;
	int big;
};
/* Fill h (zeroed, or released) from dest; release with art_have_release. */
void art_have_scan(const char *dest, struct art_have *h);
void art_have_release(struct art_have *h);
/* Remove the parts and notes a pull left in dest (after a pull that
 * ended well: every file the host sent is whole). */
void art_drop_parts(const char *dest);

#endif
