/* Bounds on what a pull writes (see art_limits.h). */
#include <errno.h>
#include <string.h>
#include <sys/statvfs.h>

#include "art_limits.h"
#include "job_proto.h"
#include "term.h"

static uint64_t be(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

int art_announce_parse(const unsigned char *hdr, struct art_limits *lim, struct gr_err *err)
{
	if (memcmp(hdr, GR_ART_MAGIC, 4))
		return gr_errf(err, GR_EPROTO, "the host sent artifacts without announcing their size");
	lim->files = (uint32_t)be(hdr + 4, 4);
	lim->bytes = be(hdr + 8, 8);
	lim->files_seen = 0;
	lim->bytes_seen = 0;
	return 0;
}

int art_space_check(const char *dir, uint64_t need, uint32_t files, int min_free_pct,
		    struct gr_err *err)
{
	struct statvfs v;
	char a[32], b[32], c[32], d[32];

	if (statvfs(dir, &v) < 0)
		return gr_errf(err, GR_EIO, "cannot check the free space in '%s': %s", ts(dir),
			       strerror(errno));
	uint64_t unit = v.f_frsize ? v.f_frsize : v.f_bsize;
	uint64_t avail = (uint64_t)v.f_bavail * unit, total = (uint64_t)v.f_blocks * unit;
	uint64_t keep = total / 100 * (uint64_t)min_free_pct;

	if (need > avail || avail - need < keep) {
		gr_errf(err, GR_EIO, "%s needed, and '%s' has %s free of %s; [artifacts] min_free "
			"keeps %d%% (%s) free", fmt_size(need, a, sizeof(a)), ts(dir),
			fmt_size(avail, b, sizeof(b)), fmt_size(total, c, sizeof(c)), min_free_pct,
			fmt_size(keep, d, sizeof(d)));
		gr_hintf(err, "free some space, pull fewer files ([artifacts] pull), or lower [artifacts] min_free");
		return GR_EIO;
	}
	/* Inodes too, where the filesystem counts them (btrfs says 0). */
	if (v.f_files && files && (uint64_t)files >= (uint64_t)v.f_favail) {
		gr_errf(err, GR_EIO, "%u files needed, and '%s' has room for %llu more", files, ts(dir),
			(unsigned long long)v.f_favail);
		return GR_EIO;
	}
	return 0;
}

int art_admit(struct art_limits *lim, const char *dir, const char *name, int64_t size,
	      struct gr_err *err)
{
	char a[32], b[32], c[32];

	if (size < 0)
		return gr_errf(err, GR_EPROTO, "refusing artifact '%s': it has no size", ts(name));
	if (lim->files_seen >= lim->files)
		return gr_errf(err, GR_EPROTO, "refusing artifact '%s': the host announced %u file%s "
			       "and sends more", ts(name), lim->files, lim->files == 1 ? "" : "s");
	if ((uint64_t)size > lim->bytes - lim->bytes_seen)
		return gr_errf(err, GR_EPROTO, "refusing artifact '%s' (%s): larger than the host "
			       "announced (%s in all, %s left)", ts(name),
			       fmt_size((uint64_t)size, a, sizeof(a)), fmt_size(lim->bytes, b, sizeof(b)),
			       fmt_size(lim->bytes - lim->bytes_seen, c, sizeof(c)));
	int rc = art_space_check(dir, (uint64_t)size, 1, lim->min_free_pct, err);
	if (rc < 0) {
		gr_err_prefix(err, "no room for artifact '%s'", ts(name));
		return rc;
	}
	lim->files_seen++;
	lim->bytes_seen += (uint64_t)size;
	return 0;
}

int art_data_ok(int64_t off, uint64_t len, int64_t size)
{
	return off >= 0 && size >= 0 && (uint64_t)off <= (uint64_t)size &&
	       len <= (uint64_t)size - (uint64_t)off;
}
