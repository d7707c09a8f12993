/* The ignore matcher on hand-written tricky cases: each case is a pattern
 * list, a path, file or folder, and the expected answer. Every case is
 * checked three ways: patterns as [sync] exclude (root-anchored, in
 * memory), patterns in a .gitignore on disk (a sub-folder base), and,
 * where git is installed, against `git check-ignore --no-index -v` on the
 * same tree, including which line decided. Plus wildmatch on its own. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"
#include "ignore.h"
#include "util.h"
#include "wildmatch.h"

struct icase {
	const char *pats; /* lines of a .gitignore */
	const char *path;
	int is_dir;
	int want;         /* 1 ignored */
};

#define F 0
#define D 1
static const struct icase cases[] = {
	/* basename patterns match at any depth */
	{ "*.o", "a.o", F, 1 },
	{ "*.o", "x/y/a.o", F, 1 },
	{ "*.o", "a.o", D, 1 },
	{ "*.o", "a.c", F, 0 },
	{ "*.O", "a.o", F, 0 },
	{ "foo", "x/foo", D, 1 },
	{ "foo", "x/foo/bar", F, 1 },
	/* trailing slash: folders only */
	{ "*.o/", "a.o", F, 0 },
	{ "*.o/", "x/a.o", D, 1 },
	{ "foo/", "foo", F, 0 },
	{ "foo/", "foo/bar", F, 1 },
	{ "foo//", "foo", D, 0 },
	/* a leading or middle slash anchors to the .gitignore's folder */
	{ "/a", "a", F, 1 },
	{ "/a", "b/a", F, 0 },
	{ "a/b", "a/b", F, 1 },
	{ "a/b", "x/a/b", F, 0 },
	{ "doc/*.txt", "doc/a.txt", F, 1 },
	{ "doc/*.txt", "doc/x/a.txt", F, 0 },
	{ "a/*/c", "a/b/c", F, 1 },
	{ "a/*/c", "a/b/d/c", F, 0 },
	{ "/*", "top", F, 1 },
	{ "/*.c", "x/a.c", F, 0 },
	{ "./foo", "foo", F, 0 },
	/* ** as a component */
	{ "**/foo", "foo", F, 1 },
	{ "**/foo", "x/y/foo", F, 1 },
	{ "**/foo/bar", "x/foo/bar", F, 1 },
	{ "**/foo/bar", "foo/bar", F, 1 },
	{ "a/**/b", "a/b", F, 1 },
	{ "a/**/b", "a/x/y/b", F, 1 },
	{ "a/**/b", "a/xb", F, 0 },
	{ "abc/**", "abc", D, 0 },
	{ "abc/**", "abc/x/y", F, 1 },
	{ "a/**/", "a/b", D, 1 },
	{ "a/**/", "a/b", F, 0 },
	{ "a/**/", "a/b/c", F, 1 },
	{ "**", "anything/at/all", F, 1 },
	{ "/**", "x", F, 1 },
	{ "a/**/**/b", "a/b", F, 1 },
	{ "a/**/**/b", "a/x/y/z/b", F, 1 },
	{ "**/**", "x/y", F, 1 },
	/* ** not a whole component: one star (plus git's prefix shortcut) */
	{ "a**b", "axyb", F, 1 },
	{ "a**b", "a/b", F, 0 },
	{ "a/**b", "a/xb", F, 1 },
	{ "a/**b", "a/x/b", F, 0 },
	{ "foo**/bar", "foo/bar", F, 1 },
	{ "foo**/bar", "fooX/bar", F, 1 },
	{ "foo**/bar", "foo/x/y/bar", F, 1 },
	{ "x/foo**/bar", "x/foo/y/bar", F, 1 },
	{ "*/", "x/y", F, 1 },
	{ "*/", "y", F, 0 },
	/* escapes, comments, trailing spaces */
	{ "\\#foo", "#foo", F, 1 },
	{ "#foo", "#foo", F, 0 },
	{ "\\!foo", "!foo", F, 1 },
	{ "foo\\ ", "foo ", F, 1 },
	{ "foo  ", "foo", F, 1 },
	{ "foo  ", "foo ", F, 0 },
	{ "foo\\  ", "foo ", F, 1 },
	{ "foo \\ ", "foo  ", F, 1 },
	{ "foo\t", "foo\t", F, 1 },
	{ "foo\\", "foo\\", F, 0 },
	{ "\\*", "*", F, 1 },
	{ "\\*", "a", F, 0 },
	{ "\\a", "a", F, 1 },
	{ "foo\r", "foo", F, 1 },
	{ "\\[a]", "[a]", F, 1 },
	/* ? and character classes */
	{ "?", "a", F, 1 },
	{ "?", "ab", F, 0 },
	{ "a?c", "a/c", F, 0 },
	{ "x/a?c", "x/a/c", F, 0 },
	{ "[a-c]x", "bx", F, 1 },
	{ "[a-c]x", "dx", F, 0 },
	{ "[!a-c]x", "dx", F, 1 },
	{ "[^a-c]x", "ax", F, 0 },
	{ "[]]x", "]x", F, 1 },
	{ "[!]]x", "ax", F, 1 },
	{ "[a-]x", "-x", F, 1 },
	{ "[-a]x", "-x", F, 1 },
	{ "[a-c-e]x", "-x", F, 1 },
	{ "[a-c-e]x", "dx", F, 0 },
	{ "[\\]]x", "]x", F, 1 },
	{ "[\\-]x", "-x", F, 1 },
	{ "[[:alpha:]]1", "q1", F, 1 },
	{ "[[:alpha:]]1", "11", F, 0 },
	{ "[[:digit:][:upper:]]z", "Qz", F, 1 },
	{ "[[:digit:][:upper:]]z", "7z", F, 1 },
	{ "[[:digit:][:upper:]]z", "qz", F, 0 },
	{ "[[:space:]]x", " x", F, 1 },
	{ "[[:space:]]x", "\vx", F, 0 },
	{ "[[:punct:]]x", "_x", F, 1 },
	{ "[[:xdigit:]]x", "fx", F, 1 },
	{ "[[:xdigit:]]x", "gx", F, 0 },
	{ "[[:cntrl:]]x", "\001x", F, 1 },
	{ "[[:graph:]]x", " x", F, 0 },
	{ "[[:print:]]x", " x", F, 1 },
	{ "[[:blank:]]x", "\tx", F, 1 },
	{ "[[:lower:]]x", "Ax", F, 0 },
	{ "[[:alnum:]_]x", "_x", F, 1 },
	{ "[[:bogus:]]x", "ax", F, 0 },
	{ "[[:alpha]x", "ax", F, 1 },
	{ "[[:alpha]x", ":x", F, 1 },
	{ "[ab", "[ab", F, 0 },
	{ "a[", "a[", F, 0 },
	{ "x/[!a]b", "x/cb", F, 1 },
	{ "[\xc3\xa9]", "\xc3\xa9", F, 0 },
	{ "\xc3\xa9*", "\xc3\xa9t\xc3\xa9", F, 1 },
	{ "*[\x80-\xff]*", "caf\xc3\xa9", F, 1 },
	/* negation and order: the last matching line wins */
	{ "*.o\n!keep.o", "keep.o", F, 0 },
	{ "*.o\n!keep.o", "x.o", F, 1 },
	{ "!keep.o\n*.o", "keep.o", F, 1 },
	{ "foo\n!foo/", "foo", F, 1 },
	{ "foo\n!foo/", "foo", D, 0 },
	{ "*\n!*/\n!*.c", "x/a.c", F, 0 },
	{ "*\n!*/\n!*.c", "x/a.h", F, 1 },
	{ "!", "!", F, 0 },
	{ "/", "x", D, 0 },
	/* a file inside an ignored folder cannot be re-included */
	{ "build/\n!build/keep", "build/keep", F, 1 },
	{ "build\n!build/keep", "build/keep", F, 1 },
	{ "build/*\n!build/keep", "build/keep", F, 0 },
	{ "build/*\n!build/keep", "build/x", F, 1 },
	{ "/*\n!/src/", "src/a/b.c", F, 0 },
	{ "/*\n!/src/", "lib/a.c", F, 1 },
	{ "a/\n!a/b/", "a/b/c", F, 1 },
};

static const char *tmpdir;
static int have_git;

static void write_path(const char *path, const char *data, size_t n)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || write_full(fd, data, n) < 0) {
		fprintf(stderr, "  cannot write %s: %s\n", path, strerror(errno));
		abort();
	}
	close(fd);
}

/* mkdir -p for rel's parents under base, then rel itself as file/dir. */
static void make_path(const char *base, const char *rel, int is_dir)
{
	char *p = xasprintf("%s/%s", base, rel);

	for (char *s = p + strlen(base) + 1; *s; s++)
		if (*s == '/') {
			*s = '\0';
			mkdir(p, 0755);
			*s = '/';
		}
	if (is_dir)
		mkdir(p, 0755);
	else
		write_path(p, "", 0);
	free(p);
}

/* Split "a\nb" into patterns for the extra list. */
static size_t split_lines(const char *pats, char ***out)
{
	char *copy = xstrdup(pats), *save = NULL, *tok;
	struct strvec sv = STRVEC_INIT;

	/* strtok_r would merge empty lines; patterns never have them here */
	for (tok = strtok_r(copy, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save))
		sv_push(&sv, tok);
	free(copy);
	*out = sv.v;
	return sv.n;
}

static void cases_in_memory(void)
{
	char *empty = xasprintf("%s/empty", tmpdir);

	mkdir(empty, 0755);
	for (size_t i = 0; i < GR_ARRAY_SIZE(cases); i++) {
		const struct icase *c = &cases[i];
		struct ignore *ig = NULL;
		struct ignore_match m;
		struct gr_err err = { 0 };
		char **pats = NULL;
		size_t np = split_lines(c->pats, &pats);

		CHECK_EQ_INT(ignore_new(&ig, empty, (const char *const *)pats, np, &err), 0);
		int got = ig ? ignore_path(ig, c->path, c->is_dir, &m, &err) : -1;
		if (got != c->want) {
			fprintf(stderr, "  case %zu: patterns [%s] path '%s'%s: got %d, want %d\n",
				i, c->pats, c->path, c->is_dir ? "/" : "", got, c->want);
			t_case_failed = 1;
		}
		ignore_free(ig);
		for (size_t k = 0; k < np; k++)
			free(pats[k]);
		free(pats);
	}
	free(empty);
}

struct seen {
	int ignored;
	char *source, *pattern;
	int line;
};

static struct seen *mine;
static struct strbuf git_in;

/* The same cases from c<N>/.gitignore files in one tree; remembers which
 * rule decided each, for the comparison with git. */
static void cases_on_disk(void)
{
	char *repo = xasprintf("%s/repo", tmpdir);
	struct ignore *ig = NULL;
	struct gr_err err = { 0 };

	mine = xcalloc(GR_ARRAY_SIZE(cases), sizeof(*mine));

	mkdir(repo, 0755);
	for (size_t i = 0; i < GR_ARRAY_SIZE(cases); i++) {
		char *dir = xasprintf("%s/c%zu", repo, i), *gi = xasprintf("%s/.gitignore", dir);
		char *rel = xasprintf("c%zu/%s", i, cases[i].path);

		mkdir(dir, 0755);
		write_path(gi, cases[i].pats, strlen(cases[i].pats));
		make_path(repo, rel, cases[i].is_dir);
		sb_add(&git_in, rel, strlen(rel) + 1);
		free(dir);
		free(gi);
		free(rel);
	}
	CHECK_EQ_INT(ignore_new(&ig, repo, NULL, 0, &err), 0);
	for (size_t i = 0; ig && i < GR_ARRAY_SIZE(cases); i++) {
		struct ignore_match m = { 0 };
		char *rel = xasprintf("c%zu/%s", i, cases[i].path);
		int got = ignore_path(ig, rel, cases[i].is_dir, &m, &err);

		if (got != cases[i].want) {
			fprintf(stderr, "  on disk, case %zu: patterns [%s] path '%s': got %d, want %d\n",
				i, cases[i].pats, rel, got, cases[i].want);
			t_case_failed = 1;
		}
		mine[i].ignored = got;
		mine[i].source = m.source ? xstrdup(m.source) : NULL;
		mine[i].pattern = m.pattern ? xstrdup(m.pattern) : NULL;
		mine[i].line = m.line;
		free(rel);
	}
	ignore_free(ig);
	free(repo);
}

static void cases_match_git(void)
{
	char *repo = xasprintf("%s/repo", tmpdir), *cmd;
	struct strbuf out = STRBUF_INIT;
	struct gr_err err = { 0 };

	if (!have_git) {
		free(repo);
		SKIP("git is not installed");
	}
	/* One git call for every case: -z -v -n gives, per path, source,
	 * line, pattern and path, NUL-separated (empty fields: no match). */
	cmd = xasprintf("cd '%s' && git init -q . && git check-ignore --no-index -v -n -z --stdin "
			"<'%s/in' >'%s/out'", repo, tmpdir, tmpdir);
	char *inpath = xasprintf("%s/in", tmpdir), *outpath = xasprintf("%s/out", tmpdir);
	write_path(inpath, git_in.buf, git_in.len);
	int rc = system(cmd);
	CHECK(WIFEXITED(rc) && (WEXITSTATUS(rc) == 0 || WEXITSTATUS(rc) == 1));
	CHECK_EQ_INT(read_file(outpath, &out, &err), 0);
	free(cmd);
	free(inpath);
	free(outpath);
	const char *p = out.buf ? out.buf : "", *end = p + out.len;
	size_t compared = 0;
	for (size_t i = 0; i < GR_ARRAY_SIZE(cases) && p < end; i++) {
		const char *f[4];

		for (int k = 0; k < 4; k++) {
			f[k] = p;
			p += strlen(p) + 1;
		}
		int git_ignored = f[0][0] && f[2][0] != '!';
		if (git_ignored != mine[i].ignored) {
			fprintf(stderr, "  git disagrees, case %zu: patterns [%s] path '%s': git %d "
				"(%s:%s '%s'), gpurun %d\n", i, cases[i].pats, f[3], git_ignored,
				f[0], f[1], f[2], mine[i].ignored);
			t_case_failed = 1;
		} else if (f[0][0] && (!mine[i].source || strcmp(mine[i].source, f[0]) ||
				       mine[i].line != (int)strtol(f[1], NULL, 10) ||
				       strcmp(mine[i].pattern, f[2]))) {
			fprintf(stderr, "  git names another rule, case %zu '%s': git %s:%s '%s', "
				"gpurun %s:%d '%s'\n", i, f[3], f[0], f[1], f[2],
				mine[i].source ? mine[i].source : "-", mine[i].line,
				mine[i].pattern ? mine[i].pattern : "-");
			t_case_failed = 1;
		} else if (!f[0][0] && mine[i].source) {
			fprintf(stderr, "  case %zu '%s': git found no rule, gpurun %s:%d\n", i, f[3],
				mine[i].source, mine[i].line);
			t_case_failed = 1;
		}
		compared++;
	}
	CHECK_EQ_INT(compared, GR_ARRAY_SIZE(cases));
	printf("# %zu cases compared with git check-ignore\n", compared);
	free(repo);
	sb_release(&out);
}

struct wcase {
	const char *pat, *text;
	unsigned flags;
	int match;
};

#define P WM_PATHNAME
#define C WM_CASEFOLD
static const struct wcase wcases[] = {
	{ "foo", "foo", 0, 1 },
	{ "foo", "bar", 0, 0 },
	{ "", "", 0, 1 },
	{ "???", "foo", 0, 1 },
	{ "*f", "foo", 0, 0 },
	{ "*", "a/b", 0, 1 },
	{ "*", "a/b", P, 0 },
	{ "**", "a/b", P, 1 },
	{ "a/*", "a/b/c", P, 0 },
	{ "a/**", "a/b/c", P, 1 },
	{ "**/c", "c", P, 1 },
	{ "**/c", "a/b/c", P, 1 },
	{ "a/**/c", "a/c", P, 1 },
	{ "a/**/c", "a/b/x/c", P, 1 },
	{ "a**c", "a/b/c", P, 0 },
	{ "a**c", "a/b/c", 0, 1 },
	{ "*/b", "a/b", P, 1 },
	{ "*/b", "/b", P, 1 },
	{ "?", "/", P, 0 },
	{ "?", "/", 0, 1 },
	{ "[/]", "/", P, 0 },
	{ "[!a]", "/", 0, 1 },
	{ "\\", "\\", 0, 0 },
	{ "\\*", "*", 0, 1 },
	{ "[\\*]", "*", 0, 1 },
	{ "[a-z]", "M", C, 1 },
	{ "[A-Z]", "m", C, 1 },
	{ "[[:upper:]]", "m", C, 1 },
	{ "FOO", "foo", C, 1 },
	{ "\\F", "f", C, 0 },
	{ "*.C", "x.c", C, 1 },
	{ "[x]", "X", C, 1 },
	{ "[X]", "X", C, 0 },
	{ "[", "[", 0, 0 },
	{ "[]", "]", 0, 0 },
	{ "[!]", "a", 0, 0 },
	{ "[[:]", "[", 0, 1 },
	{ "[[:", "[", 0, 0 },
	{ "-*-*-*-*-*-*-12-*-*-*-m-*-*-*", "-adobe-courier-bold-o-normal--12-120-75-75-m-70-iso8859-1", 0, 1 },
	{ "-*-*-*-*-*-*-12-*-*-*-m-*-*-*", "-adobe-courier-bold-o-normal--12-120-75-75-X-70-iso8859-1", 0, 0 },
	{ "XXX/*/*/*/*/*/*/12/*/*/*/m/*/*/*", "XXX/adobe/courier/bold/o/normal//12/120/75/75/m/70/iso8859/1", P, 1 },
	{ "**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txt", P, 1 },
	{ "**/*a*b*g*n*t", "abcd/abcdefg/abcdefghijk/abcdefghijklmnop.txtz", P, 0 },
	{ "*a*b*c*d*e*f*g*h*i*j*k*l*m*n*o*p*q*r*s*t*u*v*w*x*y*z*", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 0, 0 },
};

static void wildmatch_table(void)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(wcases); i++) {
		const struct wcase *w = &wcases[i];
		int got = wildmatch(w->pat, w->text, w->flags) == WM_MATCH;

		if (got != w->match) {
			fprintf(stderr, "  wildmatch('%s', '%s', %u) = %d, want %d\n", w->pat,
				w->text, w->flags, got, w->match);
			t_case_failed = 1;
		}
	}
}

/* A .gitignore with CRLF line ends, a BOM, a comment and blank lines:
 * line numbers still count every line. */
static void file_format(void)
{
	char *root = xasprintf("%s/fmt", tmpdir), *gi = xasprintf("%s/fmt/.gitignore", tmpdir);
	static const char text[] = "\xef\xbb\xbf*.o\r\n\r\n# comment\n\n!keep.o\r\nlast";
	struct ignore *ig = NULL;
	struct ignore_match m = { 0 };
	struct gr_err err = { 0 };

	mkdir(root, 0755);
	write_path(gi, text, sizeof(text) - 1);
	CHECK_EQ_INT(ignore_new(&ig, root, NULL, 0, &err), 0);
	CHECK_EQ_INT(ignore_path(ig, "a.o", 0, &m, &err), 1);
	CHECK_EQ_INT(m.line, 1);
	CHECK_STR(m.pattern, "*.o");
	CHECK_EQ_INT(ignore_path(ig, "keep.o", 0, &m, &err), 0);
	CHECK_EQ_INT(m.line, 5);
	CHECK_STR(m.source, ".gitignore");
	CHECK_EQ_INT(ignore_path(ig, "last", 0, &m, &err), 1);
	CHECK_EQ_INT(m.line, 6);
	CHECK_EQ_INT(ignore_path(ig, "# comment", 0, &m, &err), 0);
	ignore_free(ig);
	free(root);
	free(gi);
}

int main(void)
{
	char tmpl[] = "/tmp/gpurun-test-ignore.XXXXXX";

	tmpdir = mkdtemp(tmpl);
	if (!tmpdir) {
		perror("mkdtemp");
		return 1;
	}
	/* Keep the user's own git config and global excludes out of it. */
	setenv("HOME", tmpdir, 1);
	unsetenv("XDG_CONFIG_HOME");
	setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
	unsetenv("GIT_DIR");
	unsetenv("GIT_WORK_TREE");
	have_git = system("git --version >/dev/null 2>&1") == 0;

	RUN(wildmatch_table);
	RUN(cases_in_memory);
	RUN(cases_on_disk);
	RUN(cases_match_git);
	RUN(file_format);

	for (size_t i = 0; i < GR_ARRAY_SIZE(cases); i++) {
		free(mine[i].source);
		free(mine[i].pattern);
	}
	free(mine);
	sb_release(&git_in);

	char *rm = xasprintf("rm -rf '%s'", tmpdir);
	if (!t_failed_cases && system(rm) != 0)
		fprintf(stderr, "  could not remove %s\n", tmpdir);
	free(rm);
	return T_DONE();
}
