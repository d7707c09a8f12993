/* Test helpers (see util.h). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "tests/util.h"
#include "banned.h"

float *tu_randn(int n, unsigned long long seed)
{
	uint64_t st = rng_stream(seed, 99);
	float *a = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
	if (!a)
		abort();
	for (int i = 0; i < n; i++) {
		/* Irwin-Hall: the sum of 12 uniforms minus 6 is close to N(0, 1). */
		float s = -6.0f;
		for (int k = 0; k < 12; k++)
			s += rng_uniform(&st);
		a[i] = s;
	}
	return a;
}

int tu_mkscratch(char *buf, size_t cap)
{
	const char *tmp = getenv("TMPDIR");
	int n = snprintf(buf, cap, "%s/kernels-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (n < 0 || (size_t)n >= cap || !mkdtemp(buf))
		return -1;
	return 0;
}

static void rm_tree(const char *dir, int depth)
{
	DIR *d = opendir(dir);
	struct dirent *ent;
	char path[4096];
	if (!d)
		return;
	while ((ent = readdir(d))) {
		struct stat st;
		int n;
		if (!strcmp(ent->d_name, ".") || !strcmp(ent->d_name, ".."))
			continue;
		n = snprintf(path, sizeof(path), "%s/%s", dir, ent->d_name);
		if (n < 0 || (size_t)n >= sizeof(path))
			continue;
		if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (depth < 3)
				rm_tree(path, depth + 1);
		} else {
			unlink(path);
		}
	}
	closedir(d);
	rmdir(dir);
}

void tu_rmscratch(const char *dir)
{
	rm_tree(dir, 0);
}

int tu_files_equal(const char *a, const char *b)
{
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	int same = fa && fb;
	while (same) {
		int ca = getc(fa), cb = getc(fb);
		if (ca != cb)
			same = 0;
		if (ca == EOF || cb == EOF)
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

int tu_flip_byte(const char *path, long off)
{
	FILE *f = fopen(path, "r+b");
	int c, ret = -1;
	if (!f)
		return -1;
	if (fseek(f, off, SEEK_SET) == 0 && (c = getc(f)) != EOF &&
	    fseek(f, off, SEEK_SET) == 0 && putc(c ^ 0xff, f) != EOF)
		ret = 0;
	if (fclose(f) != 0)
		ret = -1;
	return ret;
}

int tu_write(const char *path, const void *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	int ret = 0;
	if (!f)
		return -1;
	if (n && fwrite(p, 1, n, f) != n)
		ret = -1;
	if (fclose(f) != 0)
		ret = -1;
	return ret;
}
