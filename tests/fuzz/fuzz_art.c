/* libFuzzer target: a pull's archive from the host (any tar bytes, sent
 * zstd'd as the agent sends them) extracted by art_extract_fd into a
 * fresh runs/JOB folder on a tmpfs. Beside that folder lies another one
 * ("outside") with files the archive must never touch, and the runs
 * folder holds what a user might have there: a symlink to outside, a
 * folder, and a part file a cut pull left (so resumed entries can land).
 * After each input, whatever art_extract_fd said: outside is as it was,
 * nothing else appeared beside the two folders, the working folder is
 * the one before, and every file in runs is a regular file or folder
 * (or the user's symlink, where it was). Seeds: corpus/art/, from
 * corpus/make_art_seeds.py; FUZZ_ART_SAY=1 says what each input did. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "art_limits.h"
#include "pull.h"
#include "pull_extract.h"

static char root[PATH_MAX], dest[PATH_MAX + 8], outside[PATH_MAX + 8], cwd0[PATH_MAX];
/* (the part and info names a pull would use for victim and x: a write or
 * unlink through the user's symlink would meet them) */
static const char *const outside_files[] = { "victim", ".victim.gpurun-part",
					     ".victim.gpurun-partinfo", ".x.gpurun-part",
					     ".x.gpurun-partinfo", NULL };

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_art: %s\n", what);
		abort();
	}
}

static void rm_rf(const char *p)
{
	(void)rm_tree_at(AT_FDCWD, p); /* (opens up folders an archive made without access) */
}

static void put(const char *dir, const char *name, const char *text)
{
	char p[PATH_MAX * 2];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
	check(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text), "set-up write");
	close(fd);
}

static void clean_up(void)
{
	rm_rf(root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	check(getcwd(cwd0, sizeof(cwd0)) != NULL, "getcwd");
	snprintf(root, sizeof(root), "/dev/shm/fuzz_art.%d", (int)getpid());
	rm_rf(root);
	check(mkdir(root, 0700) == 0, "mkdir root");
	atexit(clean_up);
	snprintf(dest, sizeof(dest), "%s/runs", root);
	snprintf(outside, sizeof(outside), "%s/outside", root);
	return 0;
}

static void set_up(void)
{
	char p[PATH_MAX * 2];

	rm_rf(dest);
	rm_rf(outside);
	check(mkdir(dest, 0700) == 0 && mkdir(outside, 0700) == 0, "mkdir");
	for (int i = 0; outside_files[i]; i++)
		put(outside, outside_files[i], "keep");
	snprintf(p, sizeof(p), "%s/link", dest);
	check(symlink("../outside", p) == 0, "symlink");
	snprintf(p, sizeof(p), "%s/sub", dest);
	check(mkdir(p, 0700) == 0, "mkdir sub");
	put(dest, ".r.bin.gpurun-part", "abc"); /* a pull of r.bin cut after 3 bytes */
}

static void check_after(void)
{
	char p[PATH_MAX * 2], buf[16], here[PATH_MAX];
	struct stat st;
	int n = 0;

	check(getcwd(here, sizeof(here)) && !strcmp(here, cwd0), "the working folder moved");
	/* outside: exactly its files, each as it was */
	DIR *d = opendir(outside);
	check(d != NULL, "outside is gone");
	for (struct dirent *e; (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		int known = 0;
		for (int i = 0; outside_files[i]; i++)
			known |= !strcmp(e->d_name, outside_files[i]);
		if (!known)
			fprintf(stderr, "fuzz_art: outside/%s appeared\n", e->d_name);
		check(known, "a file appeared outside the runs folder");
		n++;
	}
	closedir(d);
	for (int i = 0; outside_files[i]; i++) {
		snprintf(p, sizeof(p), "%s/%s", outside, outside_files[i]);
		int fd = open(p, O_RDONLY | O_NOFOLLOW);
		if (fd < 0)
			fprintf(stderr, "fuzz_art: outside/%s is gone\n", outside_files[i]);
		check(fd >= 0, "a file outside the runs folder is gone");
		ssize_t r = read(fd, buf, sizeof(buf));
		close(fd);
		check(r == 4 && !memcmp(buf, "keep", 4), "a file outside the runs folder changed");
	}
	check(n == (int)(sizeof(outside_files) / sizeof(*outside_files)) - 1, "outside changed");
	/* beside runs and outside: nothing */
	d = opendir(root);
	check(d != NULL, "the fuzz folder is gone");
	for (struct dirent *e; (e = readdir(d));)
		check(!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
			      !strcmp(e->d_name, "runs") || !strcmp(e->d_name, "outside"),
		      "something appeared beside the runs folder");
	closedir(d);
	/* the user's symlink, if still there, is the user's */
	snprintf(p, sizeof(p), "%s/link", dest);
	if (lstat(p, &st) == 0 && S_ISLNK(st.st_mode)) {
		char t[64];
		ssize_t k = readlink(p, t, sizeof(t) - 1);
		check(k == 10 && !memcmp(t, "../outside", 10), "the user's symlink changed");
	}
}

static int no_links(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	if (flag == FTW_SL && strcmp(p + strlen(p) - 5, "/link"))
		fprintf(stderr, "fuzz_art: a symlink %s\n", p);
	check(flag != FTW_SL || !strcmp(p + strlen(p) - 5, "/link"), "the archive made a symlink");
	check(flag == FTW_SL || flag == FTW_D || flag == FTW_DNR || S_ISREG(st->st_mode),
	      "the archive made something that is not a file or folder");
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > (64u << 10))
		return 0;
	size_t cap = ZSTD_compressBound(size);
	void *z = malloc(cap ? cap : 1);
	size_t zn = ZSTD_compress(z, cap, data, size, 1);
	check(!ZSTD_isError(zn), "zstd");
	int fd = memfd_create("art", 0);
	check(fd >= 0 && write(fd, z, zn) == (ssize_t)zn && lseek(fd, 0, SEEK_SET) == 0, "memfd");
	free(z);

	set_up();
	struct art_limits lim = { .files = 16, .bytes = 1u << 20, .min_free_pct = 0 };
	uint32_t files = 0;
	struct gr_err err = { 0 };
	int rc = art_extract_fd(fd, dest, &lim, &files, &err);
	if (getenv("FUZZ_ART_SAY")) /* to check the seeds */
		fprintf(stderr, "fuzz_art: %u files; %s\n", files, rc ? err.msg : "accepted");
	gr_err_clear(&err);
	close(fd);
	check_after();
	nftw(dest, no_links, 16, FTW_PHYS);
	return 0;
}
