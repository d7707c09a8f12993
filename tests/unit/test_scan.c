/* scan_tree's entries (types, sizes, modes, links, order), the ignore API
 * contracts the sync engine relies on (ignore_check vs ignore_path,
 * loading order, [sync] exclude line numbers), `--why` wording, git's
 * config reader and the index reader (checked against git ls-files). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"
#include "gitconfig.h"
#include "gitindex.h"
#include "ignore.h"
#include "scan.h"
#include "util.h"

static char *tmpdir;
static int have_git;

static char *tpath(const char *rel)
{
	return xasprintf("%s/%s", tmpdir, rel);
}

static void put(const char *rel, const char *data)
{
	char *p = tpath(rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write_full(fd, data, strlen(data)) < 0)
		abort();
	close(fd);
	free(p);
}

static void mk(const char *rel)
{
	char *p = tpath(rel);

	mkdir(p, 0755);
	free(p);
}

static int sh(const char *fmt, const char *arg)
{
	char *cmd = xasprintf(fmt, arg);
	int rc = system(cmd);

	free(cmd);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static const struct scan_entry *find(const struct scan_entry *e, size_t n, const char *path)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(e[i].path, path))
			return &e[i];
	return NULL;
}

static void scan_entries_and_order(void)
{
	struct scan_entry *e = NULL;
	struct gr_err err = { 0 };
	struct scan_opts o = { 0 };
	const struct scan_entry *x;
	char *root = tpath("s1"), *lnk = tpath("s1/ln");
	size_t n = 0;

	mk("s1");
	mk("s1/d");
	mk("s1/d-e");
	mk("s1/empty");
	mk("s1/.gpurun");
	put("s1/.gpurun/state", "x");
	put("s1/d/f", "hello");
	put("s1/d-e/g", "");
	put("s1/run.sh", "#!/bin/sh\n");
	put("s1/.gitignore", "*.tmp\n");
	put("s1/junk.tmp", "");
	chmod(root, 0755);
	{
		char *p = tpath("s1/run.sh");
		chmod(p, 0755);
		free(p);
	}
	CHECK_EQ_INT(symlink("d/f", lnk), 0);
	CHECK_EQ_INT(scan_tree(root, &o, &e, &n, &err), 0);
	for (size_t i = 1; i < n; i++)
		CHECK(strcmp(e[i - 1].path, e[i].path) < 0);
	CHECK_EQ_INT(n, 8); /* .gitignore d d-e d-e/g d/f empty ln run.sh */
	CHECK_STR(e[0].path, ".gitignore");
	CHECK_STR(e[1].path, "d");
	CHECK_STR(e[2].path, "d-e");
	CHECK_STR(e[4].path, "d/f");
	x = find(e, n, "d/f");
	CHECK(x && x->type == SCAN_FILE && x->size == 5 && x->mode == 0644 && x->ino && x->mtime_ns > 0);
	x = find(e, n, "run.sh");
	CHECK(x && x->mode == 0755);
	x = find(e, n, "ln");
	CHECK(x && x->type == SCAN_SYMLINK && x->link && !strcmp(x->link, "d/f") && x->size == 3);
	x = find(e, n, "empty");
	CHECK(x && x->type == SCAN_DIR && !x->link);
	CHECK(!find(e, n, "junk.tmp"));
	CHECK(!find(e, n, ".gpurun"));
	scan_free(e, n);

	/* extra patterns ([sync] exclude) */
	const char *ex[] = { "d/", "*.sh" };
	o.extra = ex;
	o.nextra = 2;
	CHECK_EQ_INT(scan_tree(root, &o, &e, &n, &err), 0);
	CHECK(!find(e, n, "d") && !find(e, n, "d/f") && !find(e, n, "run.sh") && find(e, n, "d-e/g"));
	scan_free(e, n);

	CHECK_EQ_INT(scan_tree("/nonexistent/gpurun", &o, &e, &n, &err), GR_ENOTFOUND);
	CHECK(strstr(err.msg, "/nonexistent/gpurun") != NULL);
	scan_free(NULL, 0);
	free(root);
	free(lnk);
}

static int order_each(void *arg, const struct scan_entry *e)
{
	struct strvec *v = arg;

	sv_push(v, e->path);
	return 0;
}

static int cmp_strp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* scan_tree_each itself comes in path order (what the sync's merge with
 * the index and the host's list reads as a stream): folders whose names
 * are prefixes of their siblings' ("a", "a-b", "a.txt", "a!"), a
 * folder's content after those siblings, folders within folders, many
 * entries in one folder (readdir's order is the hash's). */
static void scan_each_in_path_order(void)
{
	static const char *const dirs[] = { "o", "o/a", "o/a-b", "o/a/a", "o/a/a.b", "o/a/a/z",
					    "o/ab", "o/a0", "o/b", "o/b/c-d", "o/b/c" };
	static const char *const files[] = { "o/a.txt", "o/a!", "o/a-b/x", "o/a/a-", "o/a/a/y",
					     "o/a/a.b/q", "o/ab/k", "o/a0/m", "o/b.py", "o/b/c-d/e",
					     "o/b/c/f", "o/b/c.x", "o/a/a0" };
	struct strvec got = STRVEC_INIT;
	struct gr_err err = { 0 };
	struct scan_opts o = { 0 };
	char *root = tpath("o");

	for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++)
		mk(dirs[i]);
	for (size_t i = 0; i < sizeof(files) / sizeof(*files); i++)
		put(files[i], "x");
	for (int i = 0; i < 300; i++) {
		char rel[64];
		snprintf(rel, sizeof(rel), "o/b/n%d", i * 7919 % 1000);
		put(rel, "");
	}
	CHECK_EQ_INT(scan_tree_each(root, &o, order_each, &got, &err), 0);
	CHECK_EQ_INT(got.n, sizeof(dirs) / sizeof(*dirs) - 1 + sizeof(files) / sizeof(*files) + 300);
	size_t bad = 0;
	for (size_t i = 1; i < got.n; i++)
		if (strcmp(got.v[i - 1], got.v[i]) >= 0 && !bad++)
			fprintf(stderr, "# out of order: '%s' then '%s'\n", got.v[i - 1], got.v[i]);
	CHECK_EQ_INT(bad, 0);
	/* (the same set as sorted: nothing lost on the way) */
	char **sorted = xmalloc(got.n * sizeof(*sorted));
	memcpy(sorted, got.v, got.n * sizeof(*sorted));
	qsort(sorted, got.n, sizeof(*sorted), cmp_strp);
	for (size_t i = 1; i < got.n; i++)
		CHECK(strcmp(sorted[i - 1], sorted[i]) < 0);
	free(sorted);
	sv_clear(&got);
	free(root);
}

/* A folder the rules ignore, entered only for what [sync] include names
 * in it: the scan finds that first, and still says it in path order
 * (the folder at its place, what it keeps at the place of "out/"). */
static void scan_held_in_path_order(void)
{
	static const char *const include[] = { "out/keep.txt", "out/sub/" };
	struct strvec got = STRVEC_INIT;
	struct gr_err err = { 0 };
	struct scan_opts o = { 0 };
	char *root = tpath("s6");

	mk("s6");
	put("s6/.gitignore", "out/\nnone/\n");
	mk("s6/out");
	mk("s6/out/sub");
	mk("s6/out/sub/a");
	mk("s6/none");      /* ignored, holds nothing included: not said at all */
	mk("s6/out-x");
	put("s6/out/keep.txt", "k");
	put("s6/out/junk", "j");
	put("s6/out/sub/a-", "1");
	put("s6/out/sub/a/b", "2");
	put("s6/none/keep.txt", "n");
	put("s6/out-x/f", "f");
	put("s6/out.txt", "t");
	put("s6/zz", "z");
	o.include = include;
	o.ninclude = GR_ARRAY_SIZE(include);
	CHECK_EQ_INT(scan_tree_each(root, &o, order_each, &got, &err), 0);
	static const char *const want[] = { ".gitignore", "out", "out-x", "out-x/f", "out.txt",
					      "out/keep.txt", "out/sub", "out/sub/a", "out/sub/a-",
					      "out/sub/a/b", "zz" };
	CHECK_EQ_INT(got.n, GR_ARRAY_SIZE(want));
	for (size_t i = 0; i < got.n && i < GR_ARRAY_SIZE(want); i++)
		if (strcmp(got.v[i], want[i])) {
			fprintf(stderr, "# at %zu: got '%s', want '%s'\n", i, got.v[i], want[i]);
			CHECK(0);
			break;
		}
	sv_clear(&got);
	free(root);
}

/* ignore_check does not look at parents; ignore_path does. Loading a deep
 * folder first loads its parents. */
static void check_vs_path(void)
{
	struct ignore *ig = NULL;
	struct ignore_match m = { 0 };
	struct gr_err err = { 0 };
	char *root = tpath("s2");
	const char *ex[] = { "# comment", "", "*.tmp", "!keep.tmp" };

	mk("s2");
	mk("s2/build");
	mk("s2/a");
	mk("s2/a/b");
	put("s2/.gitignore", "build/\n");
	put("s2/a/b/.gitignore", "x\n");
	CHECK_EQ_INT(ignore_new(&ig, root, ex, 4, &err), 0);
	CHECK_EQ_INT(ignore_load_dir(ig, "a/b", &err), 0); /* loads "" and "a" too */
	CHECK_EQ_INT(ignore_check(ig, "build", 1, &m), 1);
	CHECK_STR(m.source, ".gitignore");
	CHECK_EQ_INT(m.line, 1);
	CHECK_EQ_INT(ignore_check(ig, "build/f", 0, &m), 0);
	CHECK(m.source == NULL);
	CHECK_EQ_INT(ignore_path(ig, "build/f", 0, &m, &err), 1);
	CHECK_STR(m.pattern, "build/");
	CHECK_EQ_INT(ignore_check(ig, "a/b/x", 0, &m), 1);
	CHECK_STR(m.source, "a/b/.gitignore");
	CHECK_EQ_INT(ignore_check(ig, "a/x", 0, &m), 0);
	CHECK_EQ_INT(ignore_check(ig, "y.tmp", 0, &m), 1);
	CHECK_STR(m.source, "[sync] exclude");
	CHECK_EQ_INT(m.line, 3);
	CHECK_EQ_INT(ignore_check(ig, "keep.tmp", 0, &m), 0);
	CHECK_EQ_INT(m.line, 4);
	CHECK_EQ_INT(m.negated, 1);
	CHECK_EQ_INT(ignore_check(ig, "build/", 0, &m), 1); /* trailing '/' means a folder */
	CHECK_EQ_INT(ignore_check(ig, ".git", 1, &m), 1);
	CHECK_STR(m.source, "(built-in)");
	CHECK_EQ_INT(ignore_builtin(".gpurun/x", 0), 1);
	CHECK_EQ_INT(ignore_builtin("a/.gpurun", 0), 0);
	CHECK_EQ_INT(ignore_builtin("a/.git/x", 0), 1);
	CHECK_EQ_INT(ignore_builtin("a/.git/x", 1), 0);
	CHECK_EQ_INT(ignore_builtin(".gitx", 0), 0);
	/* paths that do not exist are fine */
	CHECK_EQ_INT(ignore_path(ig, "no/such/dir/x", 0, &m, &err), 0);
	ignore_free(ig);
	ignore_free(NULL);
	free(root);
}

static void explain_wording(void)
{
	struct strbuf out = STRBUF_INIT;
	struct gr_err err = { 0 };
	struct scan_opts o = { 0 };
	char *root = tpath("s3"), *abs;

	mk("s3");
	mk("s3/sub");
	mk("s3/build");
	put("s3/.gitignore", "*.o\nbuild/\n!build/keep\n");
	put("s3/sub/.gitignore", "!keep.o\n");
	put("s3/a.o", "");
	put("s3/sub/keep.o", "");
	put("s3/data.csv", "");
	put("s3/build/keep", "");
	put("s3/new\nline", "");
	CHECK_EQ_INT(ignore_explain(root, &o, "a.o", &out, &err), 1);
	CHECK_STR(out.buf, "ignored: 'a.o' by .gitignore:1 '*.o'\n");
	sb_reset(&out);
	CHECK_EQ_INT(ignore_explain(root, &o, "./sub//keep.o", &out, &err), 0);
	CHECK_STR(out.buf, "synced: 'sub/keep.o' re-included by sub/.gitignore:1 '!keep.o'\n"
			   "note: it overrides .gitignore:1 '*.o'\n");
	sb_reset(&out);
	CHECK_EQ_INT(ignore_explain(root, &o, "data.csv", &out, &err), 0);
	CHECK_STR(out.buf, "synced: 'data.csv' (no rule matches)\n");
	sb_reset(&out);
	CHECK_EQ_INT(ignore_explain(root, &o, "build/keep", &out, &err), 1);
	CHECK(!strncmp(out.buf, "ignored: 'build/keep' because folder 'build/' is ignored by "
		       ".gitignore:2 'build/'\nnote: .gitignore:3 '!build/keep' cannot re-include it",
		       strlen("ignored: 'build/keep' because folder 'build/' is ignored by "
			      ".gitignore:2 'build/'\nnote: .gitignore:3 '!build/keep' cannot re-include it")));
	sb_reset(&out);
	CHECK_EQ_INT(ignore_explain(root, &o, "new\nline", &out, &err), 0);
	CHECK_STR(out.buf, "synced: 'new\\nline' (no rule matches)\n");
	sb_reset(&out);
	abs = xasprintf("%s/sub/keep.o", root);
	CHECK_EQ_INT(ignore_explain(root, &o, abs, &out, &err), 0);
	CHECK(strstr(out.buf, "'sub/keep.o'") != NULL);
	sb_reset(&out);
	CHECK_EQ_INT(ignore_explain(root, &o, "/etc/passwd", &out, &err), GR_EINVAL);
	CHECK(strstr(err.msg, "outside the project") != NULL);
	CHECK_EQ_INT(ignore_explain(root, &o, "../x", &out, &err), GR_EINVAL);
	CHECK_EQ_INT(ignore_explain(root, &o, ".gpurun/cache", &out, &err), 1);
	CHECK(strstr(out.buf, "local state") != NULL);
	sb_reset(&out);
	o.include_git = 1;
	CHECK_EQ_INT(ignore_explain(root, &o, ".git/HEAD", &out, &err), 0);
	CHECK(strstr(out.buf, "include_git") != NULL);
	sb_release(&out);
	free(abs);
	free(root);
}

static void gitconfig_reader(void)
{
	struct gitcfg c = { 0 };
	char *p = tpath("cfg"), *inc = tpath("cfg-inc");

	put("cfg",
	    "# comment\n"
	    "[user]\n\tname = x\n"
	    "[core \"sub\"]\n\texcludesFile = /wrong\n"
	    "[Core]\n"
	    "\tExcludesFile = \"/a b/\\\"q\\\"\" ; comment\n"
	    "\tignorecase\n"
	    "[include]\n\tpath = cfg-inc\n");
	put("cfg-inc", "[core]\n  excludesfile = /inc/path   \\\n  more # c\n");
	CHECK_EQ_INT(gitcfg_read_file(&c, p, 0), 0);
	CHECK_STR(c.excludes_file, "/inc/path     more");
	if (have_git) {
		char *cmd = xasprintf("test \"$(git config -f '%s' core.excludesfile)\" = "
				      "'/inc/path     more'", inc);
		CHECK_EQ_INT(system(cmd), 0);
		free(cmd);
	}
	CHECK_STR(c.ignore_case, "true");
	gitcfg_free(&c);
	put("cfg-inc", "");
	CHECK_EQ_INT(gitcfg_read_file(&c, p, 0), 0);
	CHECK_STR(c.excludes_file, "/a b/\"q\"");
	gitcfg_free(&c);
	CHECK_EQ_INT(gitcfg_read_file(&c, "/nonexistent/cfg", 0), -1);
	CHECK_EQ_INT(gitcfg_bool("Yes"), 1);
	CHECK_EQ_INT(gitcfg_bool("off"), 0);
	CHECK_EQ_INT(gitcfg_bool(""), 0);
	CHECK_EQ_INT(gitcfg_bool("2"), 1);
	CHECK_EQ_INT(gitcfg_bool("maybe"), -1);
	if (have_git) {
		/* git must read the same value */
		char *cmd = xasprintf("test \"$(git config -f '%s' core.excludesfile)\" = '/a b/\"q\"'", p);
		CHECK_EQ_INT(system(cmd), 0);
		free(cmd);
	}
	gitcfg_free(&c);
	free(p);
	free(inc);
}

/* The index reader against `git ls-files` for versions 2, 3 and 4. */
static void index_versions(void)
{
	char *repo = tpath("ix");

	if (!have_git)
		SKIP("git is not installed");
	mk("ix");
	mk("ix/dir");
	mk("ix/dir/sub");
	put("ix/a", "");
	put("ix/dir/b", "");
	put("ix/dir/sub/c", "");
	put("ix/dir-x", "");
	put("ix/long-name-that-shares-a-prefix-with-another-long-name-1", "");
	put("ix/long-name-that-shares-a-prefix-with-another-long-name-2", "");
	CHECK_EQ_INT(sh("cd '%s' && git init -q . && git add a dir long-* && git add -N dir-x", repo), 0);
	for (int v = 2; v <= 4; v++) {
		struct gitindex ix;
		struct gr_err err = { 0 };
		char *cmd = xasprintf("cd '%s' && git update-index --index-version %d", repo, v);
		char *index = tpath("ix/.git/index");

		CHECK_EQ_INT(system(cmd), 0);
		free(cmd);
		CHECK_EQ_INT(gitindex_read(&ix, index, 20, &err), 0);
		CHECK_EQ_INT(ix.n, 6);
		CHECK(gitindex_has(&ix, "a", 1));
		CHECK(gitindex_has(&ix, "dir/sub/c", 9));
		CHECK(gitindex_has(&ix, "dir-x", 5));
		const char *ln = "long-name-that-shares-a-prefix-with-another-long-name-2";
		CHECK(gitindex_has(&ix, ln, strlen(ln)));
		CHECK(!gitindex_has(&ix, "dir", 3));
		CHECK(gitindex_has_under(&ix, "dir", 3));
		CHECK(gitindex_has_under(&ix, "dir/sub", 7));
		CHECK(!gitindex_has_under(&ix, "dir/su", 6));
		CHECK(!gitindex_has_under(&ix, "a", 1));
		gitindex_free(&ix);
		free(index);
	}
	/* garbage is an error, not a crash */
	{
		struct gitindex ix;
		struct gr_err err = { 0 };
		char *bad = tpath("badindex");

		put("badindex", "DIRC\0\0\0\2\0\0\0\5 short");
		CHECK(gitindex_read(&ix, bad, 20, &err) < 0);
		CHECK_EQ_INT(gitindex_read(&ix, "/nonexistent/index", 20, &err), GR_ENOTFOUND);
		free(bad);
	}
	free(repo);
}

/* An ignore file we may not read must stop the scan: syncing without its
 * rules could send what the user meant to keep private. */
static void unreadable_ignore_file(void)
{
	char *root = tpath("s4"), *gi = tpath("s4/.gitignore");
	pid_t pid;
	int status;

	mk("s4");
	put("s4/.gitignore", "secret\n");
	put("s4/secret", "");
	chmod(gi, 0);
	chmod(tmpdir, 0755);
	chmod(root, 0755);
	pid = fork();
	if (pid == 0) {
		struct scan_entry *e = NULL;
		struct gr_err err = { 0 };
		size_t n = 0;
		int r;

		if (geteuid() == 0 && (setgid(65534) < 0 || setuid(65534) < 0))
			_exit(3);
		setenv("HOME", tmpdir, 1);
		r = scan_tree(root, NULL, &e, &n, &err);
		scan_free(e, n);
		_exit(r == GR_EIO && strstr(err.msg, "cannot read '.gitignore'") ? 0 : 1);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	chmod(gi, 0644);
	free(root);
	free(gi);
}

/* [sync] include and [train] persist: what the scan sends, what it looks
 * inside, and --why's words for them. */
static void include_and_persist(void)
{
	static const char *const include[] = { "data/", "build/keep.bin", "*.npz", "!data/tmp/" };
	static const char *const persist[] = { "checkpoints/", ".venv/" };
	struct scan_opts o = { 0 };
	struct scan_entry *e = NULL;
	struct gr_err err = { 0 };
	struct strbuf out = STRBUF_INIT;
	char *root = tpath("s5");
	size_t n = 0;

	mk("s5");
	put("s5/.gitignore", "data/\nbuild/\n*.npz\n.venv/\n*.tmp\n");
	mk("s5/data");
	mk("s5/data/tmp");
	mk("s5/data/sub");
	put("s5/data/train.bin", "d");
	put("s5/data/x.tmp", "t");     /* ignored by *.tmp, but inside an included folder */
	put("s5/data/tmp/junk", "j");  /* taken back by !data/tmp/ */
	put("s5/data/sub/y", "y");
	mk("s5/build");
	mk("s5/build/deep");
	put("s5/build/keep.bin", "k"); /* named by an anchored include in an ignored folder */
	put("s5/build/other.o", "o");
	put("s5/build/deep/z.npz", "n"); /* unanchored: not looked for inside build/ */
	put("s5/model.npz", "n");      /* unanchored, reached anyway: sent */
	mk("s5/checkpoints");
	put("s5/checkpoints/a.pt", "c");
	mk("s5/.venv");
	put("s5/.venv/pyvenv.cfg", "v");
	mk("s5/runs");                 /* ignored, nothing included inside */
	put("s5/runs/r", "r");
	put("s5/train.py", "p");
	o.include = include;
	o.ninclude = GR_ARRAY_SIZE(include);
	o.persist = persist;
	o.npersist = GR_ARRAY_SIZE(persist);
	static const char *const extra[] = { "runs/" };
	o.extra = extra;
	o.nextra = 1;
	CHECK(scan_tree(root, &o, &e, &n, &err) == 0);
	static const char *const want[] = {
		".gitignore", "build", "build/keep.bin", "data", "data/sub", "data/sub/y",
		"data/train.bin", "data/x.tmp", "model.npz", "train.py",
	};
	CHECK_EQ_INT(n, GR_ARRAY_SIZE(want));
	for (size_t i = 0; i < n && i < GR_ARRAY_SIZE(want); i++)
		CHECK_STR(e[i].path, want[i]);
	scan_free(e, n);

	CHECK_EQ_INT(ignore_explain(root, &o, "data/x.tmp", &out, &err), 0);
	CHECK_STR(out.buf, "synced: 'data/x.tmp' because folder 'data/' is included by [sync] include:1 'data/'\n"
			   "note: without it, folder 'data/' is ignored by .gitignore:1 'data/'\n");
	sb_reset(&out);
	CHECK_EQ_INT(ignore_explain(root, &o, "build/keep.bin", &out, &err), 0);
	CHECK_STR(out.buf, "synced: 'build/keep.bin' included by [sync] include:2 'build/keep.bin'\n"
			   "note: without it, folder 'build/' is ignored by .gitignore:2 'build/'\n");
	sb_reset(&out);
	CHECK_EQ_INT(ignore_explain(root, &o, "data/tmp/junk", &out, &err), 1);
	CHECK(out.buf && strstr(out.buf, "ignored: 'data/tmp/junk' because folder 'data/' is ignored by .gitignore:1"));
	sb_reset(&out);
	CHECK_EQ_INT(ignore_explain(root, &o, "checkpoints/a.pt", &out, &err), 1);
	CHECK_STR(out.buf, "ignored: 'checkpoints/a.pt' because folder 'checkpoints/' is a persistent path "
			   "([train] persist 'checkpoints/'): it lives in the project folder on the host, "
			   "shared by every job, and is never synced\n");
	sb_reset(&out);
	sb_release(&out);
	free(root);
}

int main(void)
{
	char tmpl[] = "/tmp/gpurun-test-scan.XXXXXX";

	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	tmpdir = tmpl;
	setenv("HOME", tmpdir, 1);
	unsetenv("XDG_CONFIG_HOME");
	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
	unsetenv("GIT_DIR");
	have_git = system("git --version >/dev/null 2>&1") == 0;

	RUN(scan_entries_and_order);
	RUN(scan_each_in_path_order);
	RUN(scan_held_in_path_order);
	RUN(check_vs_path);
	RUN(explain_wording);
	RUN(gitconfig_reader);
	RUN(index_versions);
	RUN(unreadable_ignore_file);
	RUN(include_and_persist);

	if (!t_failed_cases)
		sh("rm -rf '%s'", tmpdir);
	return T_DONE();
}
