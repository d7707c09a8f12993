/* Reading the project for a sync (cli/sync/sync_open.c): every folder on the
 * way is opened without following a symlink, and the file must be the
 * one the scan saw; and the host's state as the client rebuilds it
 * (cli/sync/sync_steps.c host_view): a folder gone or replaced takes what was
 * below it, a manifest sent whole already holds the changes. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "sync_open.h"
#include "sync_proto.h"
#include "sync_steps.h"

static char tmpdir[] = "/tmp/gpurun-test-sync-open.XXXXXX";

static char *at(const char *rel)
{
	return xasprintf("%s/%s", tmpdir, rel);
}

static void put(const char *rel, const char *data)
{
	char *p = at(rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, data, strlen(data)) < 0)
		abort();
	close(fd);
	free(p);
}

static void stat_of(const char *rel, uint64_t *dev, uint64_t *ino)
{
	struct stat st;
	char *p = at(rel);
	if (lstat(p, &st) < 0)
		abort();
	*dev = st.st_dev;
	*ino = st.st_ino;
	free(p);
}

static void test_opens_the_scanned_file(void)
{
	struct gr_err err = { 0 };
	struct sync_tree *t = sync_tree_open(tmpdir, &err);
	uint64_t dev, ino;
	char buf[16] = "";

	stat_of("d/sub/f", &dev, &ino);
	int fd = sync_tree_open_file(t, "d/sub/f", dev, ino, &err);
	CHECK(fd >= 0);
	CHECK_EQ_INT(read(fd, buf, sizeof(buf) - 1), 2);
	CHECK_STR(buf, "f\n");
	close(fd);
	/* the cached folder and one above it */
	fd = sync_tree_open_file(t, "d/g", 0, 0, &err);
	CHECK(fd >= 0);
	close(fd);
	fd = sync_tree_open_file(t, "top", 0, 0, &err);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ_INT(sync_tree_open_file(t, "d/nope", 0, 0, &err), GR_ENOTFOUND);
	CHECK_EQ_INT(sync_tree_open_file(t, "nope/x", 0, 0, &err), GR_ENOTFOUND);
	sync_tree_close(t);
}

static void test_never_through_a_symlink(void)
{
	struct gr_err err = { 0 };
	struct sync_tree *t = sync_tree_open(tmpdir, &err);
	uint64_t dev, ino;

	stat_of("d/sub/f", &dev, &ino);
	/* the folder is swapped for a symlink to one outside, holding a file
	 * of the same name */
	char *sub = at("d/sub"), *moved = at("moved"), *out = at("outside");
	CHECK_EQ_INT(rename(sub, moved), 0);
	CHECK_EQ_INT(symlink(out, sub), 0);
	CHECK_EQ_INT(sync_tree_open_file(t, "d/sub/f", dev, ino, &err), GR_ECONFLICT);
	CHECK(strstr(err.msg, "above 'd/sub/f' was replaced") != NULL);
	CHECK_EQ_INT(sync_tree_open_file(t, "d/sub/f", 0, 0, &err), GR_ECONFLICT);
	/* the last component a symlink */
	CHECK_EQ_INT(sync_tree_open_file(t, "d/sub", 0, 0, &err), GR_ECONFLICT);
	unlink(sub);
	CHECK_EQ_INT(rename(moved, sub), 0);
	free(sub);
	free(moved);
	free(out);
	sync_tree_close(t);
}

static void test_not_another_file(void)
{
	struct gr_err err = { 0 };
	struct sync_tree *t = sync_tree_open(tmpdir, &err);
	uint64_t dev, ino;

	stat_of("d/g", &dev, &ino);
	/* replaced by a hard link to a file elsewhere: same name, other inode */
	char *g = at("d/g"), *other = at("outside/f");
	unlink(g);
	CHECK_EQ_INT(link(other, g), 0);
	CHECK_EQ_INT(sync_tree_open_file(t, "d/g", dev, ino, &err), GR_ECONFLICT);
	CHECK(strstr(err.msg, "replaced by another file") != NULL);
	/* a FIFO put there: refused, without blocking on the open */
	unlink(g);
	CHECK_EQ_INT(mkfifo(g, 0600), 0);
	CHECK_EQ_INT(sync_tree_open_file(t, "d/g", 0, 0, &err), GR_ECONFLICT);
	unlink(g);
	free(g);
	free(other);
	sync_tree_close(t);
}

static struct sm_entry *add(struct sm_list *l, const char *path, uint8_t type)
{
	struct sm_entry *e = sm_add(l, path, type);
	if (type == SM_FILE) {
		e->mode = 0644;
		e->size = 3;
		memset(e->hash, path[0], SM_HASH_LEN);
	} else if (type == SM_LINK) {
		e->link = xstrdup("/elsewhere");
	}
	return e;
}

static void test_view_drops_what_was_below_a_replaced_folder(void)
{
	struct sm_list known = { 0 }, view = { 0 }, want = { 0 };
	struct host_state h = { 0 };
	struct gr_err err = { 0 };

	add(&known, "d", SM_DIR);
	add(&known, "d-x", SM_FILE);
	add(&known, "d/a", SM_FILE);
	add(&known, "d/s", SM_DIR);
	add(&known, "d/s/b", SM_FILE);
	add(&known, "e", SM_DIR);
	add(&known, "e/c", SM_FILE);
	add(&known, "f", SM_FILE);
	/* d became a symlink, e is gone: only they are listed */
	add(&h.changed, "d", SM_LINK);
	sv_push(&h.missing, "e");
	add(&want, "d", SM_LINK);
	add(&want, "d-x", SM_FILE);
	add(&want, "f", SM_FILE);
	sm_digest(&want, h.digest);
	CHECK_EQ_INT(host_view(&h, &known, &view, &err), 0);
	CHECK_EQ_INT(view.n, 3);
	CHECK(view.n == 3 && view.e[0].type == SM_LINK && !strcmp(view.e[1].path, "d-x"));
	sm_list_free(&view);
	/* a manifest sent whole holds the changes already */
	h.flags = SYNC_STATE_HAS_MANIFEST;
	add(&h.manifest, "d", SM_LINK);
	add(&h.manifest, "d-x", SM_FILE);
	add(&h.manifest, "f", SM_FILE);
	CHECK_EQ_INT(host_view(&h, &known, &view, &err), 0);
	CHECK_EQ_INT(view.n, 3);
	sm_list_free(&view);
	sm_list_free(&known);
	sm_list_free(&want);
	host_state_release(&h);
}

int main(void)
{
	if (!mkdtemp(tmpdir))
		return 1;
	char *d = at("d"), *sub = at("d/sub"), *out = at("outside");
	mkdir(d, 0755);
	mkdir(sub, 0755);
	mkdir(out, 0755);
	put("d/sub/f", "f\n");
	put("d/g", "g\n");
	put("top", "t\n");
	put("outside/f", "SECRET\n");
	RUN(test_opens_the_scanned_file);
	RUN(test_never_through_a_symlink);
	RUN(test_not_another_file);
	RUN(test_view_drops_what_was_below_a_replaced_folder);
	char *cmd = xasprintf("rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
	free(cmd);
	free(d);
	free(sub);
	free(out);
	return T_DONE();
}
