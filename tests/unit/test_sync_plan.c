/* The sync plan: what is deleted (children first), created (parents
 * first), sent and how, or only updated, for every kind of change; and
 * the listing helpers (git-style quoting, largest folders). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "sync_plan.h"

static struct sm_entry *file(struct sm_list *l, const char *path, uint64_t size, int h)
{
	struct sm_entry *e = sm_add(l, path, SM_FILE);
	e->mode = 0644;
	e->size = size;
	e->mtime_ns = 1000;
	memset(e->hash, h, SM_HASH_LEN);
	return e;
}

static void link_(struct sm_list *l, const char *path, const char *target)
{
	sm_add(l, path, SM_LINK)->link = xstrdup(target);
}

static int cached_7(void *arg, const uint8_t *hash)
{
	(void)arg;
	return hash[0] == 7;
}

static const char *listing(const struct sync_plan *p, const struct sm_list *local,
			   struct strbuf *b)
{
	sb_reset(b);
	sync_plan_list(p, local, b);
	return b->buf ? b->buf : "";
}

static void test_identical_is_empty(void)
{
	struct sm_list l = { 0 }, r = { 0 };
	struct sync_plan p;

	for (struct sm_list *x = &l; x; x = x == &l ? &r : NULL) {
		sm_add(x, "d", SM_DIR);
		file(x, "d/f", 10, 1);
		link_(x, "ln", "d/f");
	}
	sync_plan_build(&l, &r, 1 << 20, NULL, NULL, &p);
	CHECK(sync_plan_empty(&p));
	CHECK_EQ_INT(p.send_bytes, 0);
	sync_plan_free(&p);
	sm_list_free(&l);
	sm_list_free(&r);
}

static void test_every_change(void)
{
	struct sm_list l = { 0 }, r = { 0 };
	struct strbuf b = STRBUF_INIT;
	struct sync_plan p;

	/* host */
	sm_add(&r, "gone", SM_DIR);
	file(&r, "gone/a", 1, 1);
	sm_add(&r, "gone/sub", SM_DIR);
	file(&r, "gone/sub/b", 1, 1);
	file(&r, "edit", 5, 1);
	file(&r, "chmod", 5, 1);
	file(&r, "flip", 5, 1);          /* becomes a folder */
	sm_add(&r, "flop", SM_DIR);      /* becomes a file */
	file(&r, "flop/x", 5, 1);
	link_(&r, "ln", "old");
	link_(&r, "ln2file", "x");
	file(&r, "file2ln", 5, 1);
	sm_sort(&r);
	/* here */
	file(&l, "edit", 6, 2);
	file(&l, "chmod", 5, 1)->mode = 0755;
	sm_add(&l, "flip", SM_DIR);
	file(&l, "flip/in", 1, 3);
	file(&l, "flop", 1, 3);
	link_(&l, "ln", "new");
	file(&l, "ln2file", 1, 3);
	link_(&l, "file2ln", "y");
	sm_add(&l, "newdir", SM_DIR);
	sm_add(&l, "newdir/empty", SM_DIR);
	file(&l, "added", 3, 4);
	sm_sort(&l);

	sync_plan_build(&l, &r, 1 << 20, NULL, NULL, &p);
	CHECK_EQ_INT(p.deletes.n, 7);
	/* children before their folders */
	const char *want_del[] = { "gone/sub/b", "gone/sub", "gone/a", "gone", "flop/x", "flop", "flip" };
	for (size_t i = 0; i < 7 && i < p.deletes.n; i++)
		CHECK_STR(p.deletes.v[i], want_del[i]);
	CHECK_EQ_INT(p.mkdirs.n, 3);
	CHECK_STR(p.mkdirs.n >= 3 ? p.mkdirs.v[0] : "", "flip");
	CHECK_STR(p.mkdirs.n >= 3 ? p.mkdirs.v[1] : "", "newdir");
	CHECK_STR(p.mkdirs.n >= 3 ? p.mkdirs.v[2] : "", "newdir/empty");
	CHECK_EQ_INT(p.nlinks, 2);
	CHECK_EQ_INT(p.nmeta, 1);
	CHECK_STR(l.e[p.meta[0]].path, "chmod");
	CHECK_EQ_INT(p.nfiles, 5); /* added, edit, flip/in, flop, ln2file */
	CHECK_EQ_INT(p.send_bytes, 3 + 6 + 1 + 1 + 1);
	for (size_t i = 0; i < p.nfiles; i++)
		CHECK_EQ_INT(p.files[i].how, HOW_TAR);
	const char *s = listing(&p, &l, &b);
	CHECK(strstr(s, "delete gone/sub/b\n") != NULL);
	CHECK(strstr(s, "send newdir/empty/\n") != NULL);
	CHECK(strstr(s, "send file2ln\n") != NULL);
	CHECK(strstr(s, "update chmod\n") != NULL);
	CHECK(strstr(s, "send edit\n") != NULL);
	sync_plan_free(&p);
	sm_list_free(&l);
	sm_list_free(&r);
	sb_release(&b);
}

static void test_mtime_only_is_update(void)
{
	struct sm_list l = { 0 }, r = { 0 };
	struct sync_plan p;

	file(&r, "f", 5, 1);
	file(&l, "f", 5, 1)->mtime_ns = 2000;
	sync_plan_build(&l, &r, 1 << 20, NULL, NULL, &p);
	CHECK_EQ_INT(p.nmeta, 1);
	CHECK_EQ_INT(p.nfiles, 0);
	sync_plan_free(&p);
	sm_list_free(&l);
	sm_list_free(&r);
}

static void test_large_files_go_as_deltas(void)
{
	struct sm_list l = { 0 }, r = { 0 };
	struct sync_plan p;

	file(&r, "cached", 5 << 20, 7);   /* a signature of the host's version is here */
	file(&r, "uncached", 5 << 20, 8);
	file(&r, "tinybase", 100, 7);     /* too small to be a base */
	file(&l, "cached", 5 << 20, 9);
	file(&l, "uncached", 5 << 20, 9);
	file(&l, "tinybase", 5 << 20, 9);
	file(&l, "new-big", 5 << 20, 9);
	file(&l, "small", 100, 9);
	sm_sort(&l);
	sm_sort(&r);
	sync_plan_build(&l, &r, 1 << 20, cached_7, NULL, &p);
	CHECK_EQ_INT(p.nfiles, 5);
	for (size_t i = 0; i < p.nfiles; i++) {
		const char *path = l.e[p.files[i].local].path;
		int how = p.files[i].how;
		if (!strcmp(path, "cached"))
			CHECK_EQ_INT(how, HOW_DELTA);
		else if (!strcmp(path, "uncached"))
			CHECK_EQ_INT(how, HOW_DELTA_SIG);
		else
			CHECK_EQ_INT(how, HOW_TAR);
		if (how != HOW_TAR)
			CHECK(sync_item_remote(&p, &p.files[i]) &&
			      sync_item_remote(&p, &p.files[i])->type == SM_FILE);
	}
	sync_plan_free(&p);
	sm_list_free(&l);
	sm_list_free(&r);
}

static void test_empty_host(void)
{
	struct sm_list l = { 0 }, r = { 0 };
	struct sync_plan p;

	sm_add(&l, "a", SM_DIR);
	file(&l, "a/b", 4, 1);
	link_(&l, "c", "a/b");
	sync_plan_build(&l, &r, 1 << 20, NULL, NULL, &p);
	CHECK_EQ_INT(p.mkdirs.n, 1);
	CHECK_EQ_INT(p.nfiles, 1);
	CHECK_EQ_INT(p.nlinks, 1);
	CHECK_EQ_INT(p.deletes.n, 0);
	sync_plan_free(&p);
	/* and the reverse: everything goes */
	sync_plan_build(&r, &l, 1 << 20, NULL, NULL, &p);
	CHECK_EQ_INT(p.deletes.n, 3);
	CHECK_STR(p.deletes.n == 3 ? p.deletes.v[0] : "", "c");
	CHECK_STR(p.deletes.n == 3 ? p.deletes.v[1] : "", "a/b");
	CHECK_STR(p.deletes.n == 3 ? p.deletes.v[2] : "", "a");
	sync_plan_free(&p);
	sm_list_free(&l);
}

static void test_quote(void)
{
	char *q;

	q = sync_quote("plain/name with space.txt");
	CHECK_STR(q, "plain/name with space.txt");
	free(q);
	q = sync_quote("new\nline\t\"q\"\\");
	CHECK_STR(q, "\"new\\nline\\t\\\"q\\\"\\\\\"");
	free(q);
	q = sync_quote("bad\xff\xfe");
	CHECK_STR(q, "\"bad\\377\\376\"");
	free(q);
}

static void test_largest(void)
{
	struct sm_list l = { 0 }, r = { 0 };
	struct sync_plan p;
	struct sync_folder_size top[5];

	file(&l, "data/a", 500, 1);
	file(&l, "data/sub/b", 600, 1);
	file(&l, "src/x", 10, 1);
	file(&l, "root.bin", 50, 1);
	sm_sort(&l);
	sync_plan_build(&l, &r, 1 << 20, NULL, NULL, &p);
	size_t n = sync_plan_largest(&p, &l, top, 5);
	CHECK_EQ_INT(n, 3);
	CHECK_STR(top[0].name, "data/");
	CHECK_EQ_INT(top[0].bytes, 1100);
	CHECK_STR(top[1].name, "(top level)");
	CHECK_STR(top[2].name, "src/");
	for (size_t i = 0; i < n; i++)
		free(top[i].name);
	n = sync_plan_largest(&p, &l, top, 1);
	CHECK_EQ_INT(n, 1);
	free(top[0].name);
	sync_plan_free(&p);
	sm_list_free(&l);
}

static int ignored_data(void *arg, const char *path, int is_dir)
{
	(void)arg;
	(void)is_dir;
	return !strncmp(path, "data", 4) && (!path[4] || path[4] == '/');
}

/* What the host has and this side ignores stays there: it joins the
 * local list as the host has it, so nothing is deleted and the expected
 * manifest (the local list) keeps it; kept entries are recomputed from
 * the next host view. */
static void test_keep_ignored(void)
{
	struct sm_list l = { 0 }, r = { 0 }, r2 = { 0 };
	struct sync_plan p;
	struct strbuf b = STRBUF_INIT;
	size_t *map = NULL;

	file(&l, "a", 10, 1);
	file(&l, "z", 10, 2);
	file(&r, "a", 10, 1);
	sm_add(&r, "data", SM_DIR);
	file(&r, "data/train.bin", 100, 3);
	file(&r, "gone", 10, 4); /* deleted here, not ignored: deleted there */
	file(&r, "z", 10, 2);
	CHECK_EQ_INT(sync_plan_keep_ignored(&l, &r, ignored_data, NULL, &map), 2);
	CHECK(map != NULL);
	CHECK_EQ_INT(l.n, 4);
	CHECK_STR(l.e[1].path, "data");
	CHECK_STR(l.e[2].path, "data/train.bin");
	CHECK(l.e[2].flags & SM_F_KEPT);
	CHECK(l.e[2].hash[0] == 3 && l.e[2].size == 100);
	CHECK(map && map[0] == 0 && map[1] == SIZE_MAX && map[2] == SIZE_MAX && map[3] == 1);
	free(map);
	sync_plan_build(&l, &r, 1 << 20, NULL, NULL, &p);
	CHECK_STR(listing(&p, &l, &b), "delete gone\n");
	sync_plan_free(&p);
	/* Next time the host no longer has data/: the kept entries go. */
	file(&r2, "a", 10, 1);
	file(&r2, "z", 10, 2);
	CHECK_EQ_INT(sync_plan_keep_ignored(&l, &r2, ignored_data, NULL, &map), 0);
	CHECK(map != NULL);
	CHECK_EQ_INT(l.n, 2);
	CHECK_STR(l.e[0].path, "a");
	CHECK_STR(l.e[1].path, "z");
	free(map);
	/* And nothing to keep: the list is left as it was. */
	CHECK_EQ_INT(sync_plan_keep_ignored(&l, &r2, ignored_data, NULL, &map), 0);
	CHECK(map == NULL);
	sb_release(&b);
	sm_list_free(&l);
	sm_list_free(&r);
	sm_list_free(&r2);
}

/* The plan against the host's entries that differ from local's (or that
 * local lacks), local's others marked SM_F_SAME, is the plan against all
 * of them (sync's plan against its last committed state, known_diff). */
static void test_same_left_out(void)
{
	struct sm_list l = { 0 }, r = { 0 }, d = { 0 };
	struct strbuf b1 = STRBUF_INIT, b2 = STRBUF_INIT;
	struct sync_plan full, diff;

	for (struct sm_list *x = &l; x; x = x == &l ? &r : NULL) { /* on both, the same */
		sm_add(x, "keep", SM_DIR);
		file(x, "keep/a", 3, 1);
		file(x, "keep/big", 2 << 20, 7);
		link_(x, "keep/ln", "a");
		file(x, "z", 1, 1);
	}
	file(&r, "big", 2 << 20, 7);     /* edited: a delta against it */
	file(&l, "big", 2 << 20, 8);
	file(&r, "gone", 1, 1);
	file(&r, "keep/a-old", 1, 1);
	sm_add(&l, "new", SM_DIR);
	file(&l, "new/f", 4, 2);
	file(&l, "keep/mode", 5, 1)->mode = 0755;
	file(&r, "keep/mode", 5, 1);
	sm_sort(&l);
	sm_sort(&r);
	for (size_t i = 0, j = 0; j < r.n; j++) { /* what known_diff keeps */
		while (i < l.n && strcmp(l.e[i].path, r.e[j].path) < 0)
			i++;
		if (i < l.n && sm_same(&l.e[i], &r.e[j]))
			continue;
		struct sm_entry *e = sm_add(&d, r.e[j].path, r.e[j].type);
		e->mode = r.e[j].mode;
		e->size = r.e[j].size;
		e->mtime_ns = r.e[j].mtime_ns;
		memcpy(e->hash, r.e[j].hash, SM_HASH_LEN);
		e->link = r.e[j].link ? xstrdup(r.e[j].link) : NULL;
	}
	CHECK_EQ_INT(d.n, 4); /* big, gone, keep/a-old, keep/mode */
	sync_plan_build(&l, &r, 1 << 20, cached_7, NULL, &full);
	for (size_t i = 0; i < l.n; i++)
		if (!sm_find(&d, l.e[i].path) && sm_find(&r, l.e[i].path))
			l.e[i].flags |= SM_F_SAME;
	sync_plan_build(&l, &d, 1 << 20, cached_7, NULL, &diff);
	CHECK_STR(listing(&diff, &l, &b2), listing(&full, &l, &b1));
	CHECK_EQ_INT(diff.nfiles, full.nfiles);
	CHECK_EQ_INT(diff.send_bytes, full.send_bytes);
	for (size_t i = 0; i < diff.nfiles && i < full.nfiles; i++) {
		const struct sm_entry *a = sync_item_remote(&full, &full.files[i]);
		const struct sm_entry *c = sync_item_remote(&diff, &diff.files[i]);
		CHECK_EQ_INT(diff.files[i].local, full.files[i].local);
		CHECK_EQ_INT(diff.files[i].how, full.files[i].how);
		CHECK(!a == !c);
		if (a && c)
			CHECK(!memcmp(a->hash, c->hash, SM_HASH_LEN) && !strcmp(a->path, c->path));
	}
	CHECK_EQ_INT(full.nfiles, 2); /* big (a delta, its signature cached), new/f */
	CHECK(full.nfiles == 2 && full.files[0].how == HOW_DELTA);
	sync_plan_free(&full);
	sync_plan_free(&diff);
	sm_list_free(&l);
	sm_list_free(&r);
	sm_list_free(&d);
	sb_release(&b1);
	sb_release(&b2);
}

int main(void)
{
	RUN(test_identical_is_empty);
	RUN(test_every_change);
	RUN(test_mtime_only_is_update);
	RUN(test_large_files_go_as_deltas);
	RUN(test_empty_host);
	RUN(test_quote);
	RUN(test_largest);
	RUN(test_keep_ignored);
	RUN(test_same_left_out);
	return T_DONE();
}
