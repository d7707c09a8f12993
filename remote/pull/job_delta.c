/* Pull by delta on the agent (see job_delta.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "job_delta.h"
#include "sync_apply.h"
#include "sync_delta.h"
#include "util.h"

#define SIG_DIR ".gpurun/pull-sig"
#define STALE_S (24 * 3600)

int job_delta_token_ok(const char *token)
{
	if (!token || strlen(token) != 16)
		return 0;
	for (const char *p = token; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return 0;
	return 1;
}

char *job_delta_sig_path(const char *jobdir, const char *token, uint32_t index)
{
	return xasprintf("%s/" SIG_DIR "/%s-%u", jobdir, token, index);
}

int job_delta_stage(const char *jobdir, const char *token, uint32_t index, uint64_t off,
		    const void *p, size_t n, struct gr_err *err)
{
	if (!job_delta_token_ok(token) || index >= JOB_DELTA_SIGS_MAX || off > JOB_DELTA_SIG_MAX ||
	    n > JOB_DELTA_SIG_MAX - off)
		return gr_errf(err, GR_EPROTO, "refusing a signature chunk (token, index or size "
			       "out of range)");
	char *dir = xasprintf("%s/" SIG_DIR, jobdir), name[40];
	int dfd = -1, fd = -1, rc = 0;

	/* Never through a symlink: the job can write in its folder. */
	snprintf(name, sizeof(name), "%s-%u", token, index);
	if ((mkdir(dir, 0700) < 0 && errno != EEXIST) ||
	    (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    (fd = openat(dfd, name, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (off ? 0 : O_TRUNC),
			 0600)) < 0 ||
	    pwrite_full(fd, p, n, off) < 0)
		rc = gr_errf(err, GR_EIO, "cannot stage a signature in '%s': %s", dir, strerror(errno));
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	free(dir);
	return rc;
}

void job_delta_gc(const char *jobdir, const char *token)
{
	char *dir = xasprintf("%s/" SIG_DIR, jobdir);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	size_t tl = token ? strlen(token) : 0;
	time_t now = time(NULL);
	DIR *d;
	struct dirent *de;

	free(dir);
	if (dfd < 0 || !(d = fdopendir(dfd))) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((de = readdir(d))) {
		struct stat st;
		if (de->d_name[0] == '.')
			continue;
		if ((token && !strncmp(de->d_name, token, tl) && de->d_name[tl] == '-') ||
		    (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		     st.st_mtime + STALE_S < now))
			unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

static int to_fd(void *arg, const void *p, size_t n)
{
	return write_full(*(int *)arg, p, n) < 0 ? -1 : 0;
}

int job_delta_make(int fd, uint64_t size, const char *name, const char *sigpath, int tmpfd,
		   int *out, uint64_t *dsize, uint8_t hash[SM_HASH_LEN], const char **why)
{
	struct strbuf raw = STRBUF_INIT;
	struct sync_sig sig;
	struct sync_send_res res = { 0 };
	struct gr_err err = { 0 };
	uint8_t *leaves = NULL;
	struct stat st;
	int dfd = -1, rc = 0;

	*out = -1;
	*why = "it changed since it was planned";
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != size)
		return 0; /* changed since it was planned: whole, cut at its size */
	*why = "the client's signature is unusable";
	int sfd = open(sigpath, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat sst;
	if (sfd < 0 || fstat(sfd, &sst) < 0 || !S_ISREG(sst.st_mode) ||
	    (uint64_t)sst.st_size > JOB_DELTA_SIG_MAX) {
		if (sfd >= 0)
			close(sfd);
		return 0;
	}
	sb_grow(&raw, (size_t)sst.st_size);
	ssize_t got = read_full(sfd, raw.buf, (size_t)sst.st_size);
	close(sfd);
	if (got != (ssize_t)sst.st_size || sync_sig_parse(raw.buf, (size_t)got, &sig) < 0)
		goto out; /* unusable: whole */
	raw.len = (size_t)got;
	/* The block hashes and the content hash, in one read (two threads). */
	*why = "it could not be read";
	if (sync_hash_fd(fd, name, size, hash, &leaves, &err) < 0) {
		rc = -1;
		goto out;
	}
	dfd = openat(tmpfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (dfd < 0) {
		char tmpl[] = "pull-delta-XXXXXX";
		/* no O_TMPFILE here: a named temp file, unlinked at once */
		for (int i = 0; i < 20 && dfd < 0; i++) {
			snprintf(tmpl, sizeof(tmpl), "pull-delta-%06x", (unsigned)(rand() & 0xffffff));
			dfd = openat(tmpfd, tmpl, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		}
		if (dfd < 0) {
			*why = "no temp file for the delta";
			rc = -1;
			goto out;
		}
		unlinkat(tmpfd, tmpl, 0);
	}
	struct sync_send in = { fd, name, size, hash, leaves, &sig, to_fd, &dfd };
	if (sync_send_file(&in, &res, &err) < 0 || res.declined) {
		*why = res.declined ? "a delta would not be smaller" : "the delta could not be made";
		rc = res.declined ? 0 : -1;
		goto out;
	}
	/* Worth it only when clearly smaller than the file. */
	*why = "a delta would not be smaller";
	if (res.zbytes * 10 >= size * 9 || lseek(dfd, 0, SEEK_SET) != 0)
		goto out;
	*why = NULL;
	*out = dfd;
	*dsize = res.zbytes;
	dfd = -1;
	rc = 1;
out:
	if (dfd >= 0)
		close(dfd);
	sb_release(&res.sig);
	sb_release(&raw);
	free(leaves);
	return rc;
}
