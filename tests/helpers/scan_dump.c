/* Test helper: print what scan_tree would sync (one path per line, '/'
 * after folders; -z for NUL-separated), explain paths like `sync --why`,
 * or time repeated scans. The oracle tests compare its output with git's.
 *   scan_dump [-z] [-l] [--include-git] [--exclude PAT]... ROOT
 *   scan_dump [--exclude PAT]... --why PATH... ROOT
 *   scan_dump --bench N ROOT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ignore.h"
#include "scan.h"
#include "util.h"

static int usage(void)
{
	fprintf(stderr, "usage: scan_dump [-z] [-l] [--include-git] [--exclude PAT]... "
		"[--why PATH]... [--bench N] ROOT\n");
	return 2;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	struct strvec excl = STRVEC_INIT, why = STRVEC_INIT;
	struct scan_opts o = { 0 };
	struct gr_err err = { 0 };
	struct scan_entry *e = NULL;
	size_t n = 0;
	int zero = 0, longfmt = 0, bench = 0, ret = 0, i;
	const char *root = NULL;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-z"))
			zero = 1;
		else if (!strcmp(argv[i], "-l"))
			longfmt = 1;
		else if (!strcmp(argv[i], "--include-git"))
			o.include_git = 1;
		else if (!strcmp(argv[i], "--exclude") && i + 1 < argc)
			sv_push(&excl, argv[++i]);
		else if (!strcmp(argv[i], "--why") && i + 1 < argc)
			sv_push(&why, argv[++i]);
		else if (!strcmp(argv[i], "--bench") && i + 1 < argc) {
			long long v;

			if (parse_ll(argv[++i], 1, 100000, &v) < 0)
				return usage();
			bench = (int)v;
		} else if (argv[i][0] == '-' || root)
			return usage();
		else
			root = argv[i];
	}
	if (!root)
		return usage();
	o.extra = (const char *const *)excl.v;
	o.nextra = excl.n;

	if (why.n) {
		for (size_t k = 0; k < why.n; k++) {
			struct strbuf out = STRBUF_INIT;
			int r = ignore_explain(root, &o, why.v[k], &out, &err);

			if (r < 0) {
				fprintf(stderr, "scan_dump: %s\n", err.msg);
				ret = 1;
			} else {
				fputs(out.buf ? out.buf : "", stdout);
			}
			sb_release(&out);
		}
		goto out;
	}
	if (bench) {
		uint64_t *t = xcalloc((size_t)bench, sizeof(*t));

		for (int k = 0; k < bench; k++) {
			uint64_t t0 = now_ns();

			if (scan_tree(root, &o, &e, &n, &err) < 0) {
				fprintf(stderr, "scan_dump: %s\n", err.msg);
				free(t);
				ret = 1;
				goto out;
			}
			t[k] = now_ns() - t0;
			if (k + 1 < bench) {
				scan_free(e, n);
				e = NULL;
			}
		}
		qsort(t, (size_t)bench, sizeof(*t), cmp_u64);
		printf("scan: %zu entries, %d runs, best %.2f ms, median %.2f ms\n", n, bench,
		       (double)t[0] / 1e6, (double)t[bench / 2] / 1e6);
		free(t);
		goto out;
	}
	if (scan_tree(root, &o, &e, &n, &err) < 0) {
		fprintf(stderr, "scan_dump: %s\n", err.msg);
		if (err.hint[0])
			fprintf(stderr, "hint: %s\n", err.hint);
		ret = 1;
		goto out;
	}
	for (size_t k = 0; k < n; k++) {
		if (longfmt)
			printf("%c %04o %llu ", e[k].type == SCAN_DIR ? 'd' :
			       e[k].type == SCAN_SYMLINK ? 'l' : 'f', (unsigned)e[k].mode,
			       (unsigned long long)e[k].size);
		fputs(e[k].path, stdout);
		if (e[k].type == SCAN_DIR)
			putchar('/');
		if (longfmt && e[k].link)
			printf(" -> %s", e[k].link);
		putchar(zero ? '\0' : '\n');
	}
out:
	scan_free(e, n);
	sv_clear(&excl);
	sv_clear(&why);
	return ret;
}
