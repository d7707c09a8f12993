/* A watcher's sync without the walk (sync_incr.h): the local manifest is
 * what the watcher's last sync committed (.gpurun/remote-KEY, untouched
 * since: its identity is checked) with the paths inotify reported since
 * that sync's scan looked at again, each as the walk would see it
 * (scan_probe). Whatever a list of paths cannot settle walks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compat.h"
#include "ignore.h"
#include "sync.h"
#include "sync_incr.h"
#include "sync_index.h"
#include "sync_plan.h"
#include "sync_proto.h"

#define SM_F_GONE 32 /* (here only) the entry at a reported path: dropped */

static int state_id(const char *root, const char *key, struct sync_incr_id *id)
{
	char *path = xasprintf("%s/%s/remote-%s", root, SYNC_STATE_DIR, key);
	struct stat st;
	int ok = lstat(path, &st) == 0 && S_ISREG(st.st_mode);

	free(path);
	memset(id, 0, sizeof(*id));
	if (!ok)
		return 0;
	id->dev = st.st_dev;
	id->ino = st.st_ino;
	id->size = (uint64_t)st.st_size;
	id->mtime_ns = (int64_t)st.st_mtime * 1000000000 + GR_ST_MTIME_NSEC(&st);
	id->ctime_ns = (int64_t)st.st_ctime * 1000000000 + GR_ST_CTIME_NSEC(&st);
	return 1;
}

void sync_incr_committed(struct sync_incr *in, const char *root, const char *key, int ok)
{
	in->have_state = ok && state_id(root, key, &in->state);
	if (!in->have_state)
		sync_incr_keep(in, NULL, NULL);
}

static void list_drop(struct sync_incr *in)
{
	sm_list_free(&in->list);
	in->have_list = 0;
}

void sync_incr_keep(struct sync_incr *in, struct sm_list *l, const uint8_t digest[SM_HASH_LEN])
{
	list_drop(in);
	if (!l)
		return;
	/* As sm_decode_fd would make it from remote-KEY: the description
	 * and nothing of this side's. */
	for (size_t i = 0; i < l->n; i++) {
		struct sm_entry *e = &l->e[i];
		free(e->leaves);
		e->leaves = NULL;
		e->dev = e->ino = 0;
		e->flags &= SM_F_POOLED;
	}
	in->list = *l;
	*l = (struct sm_list){ 0 };
	memcpy(in->list_digest, digest, SM_HASH_LEN);
	in->have_list = 1;
}

void sync_incr_forget(struct sync_incr *in)
{
	in->have_state = 0;
	list_drop(in);
	ignore_free(in->ig);
	in->ig = NULL;
}

void sync_incr_release(struct sync_incr *in)
{
	sync_incr_forget(in);
	sv_clear(&in->paths);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The folder holding path is in l as a folder (the root always is). */
static int parent_listed(const struct sm_list *l, const char *path)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		return 1;
	char *dir = xstrndup(path, (size_t)(slash - path));
	const struct sm_entry *e = sm_find(l, dir);
	free(dir);
	return e && e->type == SM_DIR && !(e->flags & SM_F_GONE);
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct sm_entry *)a)->path, ((const struct sm_entry *)b)->path);
}

int sync_incr_build(struct sync_incr *in, const char *root, const char *key,
		    const struct scan_opts *so, struct sm_list *out, struct sm_list *old,
		    uint8_t digest[SM_HASH_LEN], size_t *nchanged)
{
	struct sync_incr_id now;
	struct gr_err e = { 0 };
	struct sm_list add = { 0 };
	int fd = -1, ok = 0;
	size_t base;

	*nchanged = 0;
	sm_list_free(out);
	sm_list_free(old);
	if (!in->usable || !in->have_state || !state_id(root, key, &now) ||
	    memcmp(&now, &in->state, sizeof(now)))
		return 0;
	if (in->have_list) { /* (remote-KEY is as the last sync left it) */
		*out = in->list;
		in->list = (struct sm_list){ 0 };
		in->have_list = 0;
		memcpy(digest, in->list_digest, SM_HASH_LEN);
	} else {
		if ((fd = sync_rstate_open(root, key)) < 0 || sm_decode_fd(fd, 0, out, &e) < 0)
			goto out;
		sm_digest(out, digest);
	}
	base = out->n;
	for (size_t i = 0; i < base; i++)
		out->e[i].flags &= SM_F_POOLED;
	qsort(in->paths.v, in->paths.n, sizeof(*in->paths.v), cmp_str);
	for (size_t i = 0; i < in->paths.n; i++) {
		const char *p = in->paths.v[i];
		struct scan_entry s;
		if (i && !strcmp(p, in->paths.v[i - 1]))
			continue;
		struct sm_entry *old = sm_find(out, p);
		if (old && old->type == SM_DIR)
			goto out; /* a folder that is something else now */
		int r = scan_probe(&in->ig, root, so, p, &s, &e);
		if (r == SCAN_PROBE_WALK)
			goto out;
		if (old)
			old->flags |= SM_F_GONE;
		(*nchanged)++;
		if (r != SCAN_PROBE_KEPT)
			continue;
		/* As sync_scan_manifest's lm_add: what cannot be carried is
		 * left out. */
		if (sm_path_ok(s.path) && !sync_unsendable(s.path) &&
		    (s.type != SCAN_SYMLINK || (s.link && *s.link))) {
			struct sm_entry *m = sm_add(&add, s.path,
						    s.type == SCAN_SYMLINK ? SM_LINK : SM_FILE);
			if (s.type == SCAN_SYMLINK) {
				m->link = s.link;
				s.link = NULL;
			} else {
				m->mode = s.mode & 0777;
				m->size = s.size;
				m->mtime_ns = s.mtime_ns;
				m->dev = s.dev;
				m->ino = s.ino;
				m->flags = SM_F_UNHASHED;
			}
		}
		free(s.path);
		free(s.link);
	}
	/* Every new entry's folder must be one the last sync listed. */
	for (size_t i = 0; i < add.n; i++)
		if (!parent_listed(out, add.e[i].path))
			goto out;
	/* The entries replaced go to old (as committed); the new ones are
	 * merged in, both lists being sorted (a sort of the whole costs
	 * more than the rest of this). */
	size_t keep = 0;
	for (size_t i = 0; i < out->n; i++) {
		struct sm_entry *x = &out->e[i];
		if (x->flags & SM_F_GONE) {
			struct sm_entry *c = sm_add(old, x->path, x->type);
			c->mode = x->mode;
			c->size = x->size;
			c->mtime_ns = x->mtime_ns;
			memcpy(c->hash, x->hash, SM_HASH_LEN);
			c->link = x->link ? xstrdup(x->link) : NULL;
			sm_entry_release(x);
			continue;
		}
		out->e[keep++] = *x;
	}
	out->n = keep;
	/* What stays is on the host as it is (run_known_diff's mark). */
	for (size_t i = 0; i < out->n; i++)
		out->e[i].flags |= SM_F_SAME;
	if (add.n > 1)
		qsort(add.e, add.n, sizeof(*add.e), cmp_entry);
	sm_reserve(out, add.n);
	size_t i = out->n, j = add.n, k = out->n + add.n;
	while (j > 0) { /* from the end, in place */
		if (i > 0 && strcmp(out->e[i - 1].path, add.e[j - 1].path) > 0)
			out->e[--k] = out->e[--i];
		else
			out->e[--k] = add.e[--j];
	}
	out->n += add.n;
	if (add.n) /* (moved: add must not free them) */
		memset(add.e, 0, add.n * sizeof(*add.e));
	add.n = 0;
	ok = 1;
out:
	if (fd >= 0)
		close(fd);
	sm_list_free(&add);
	if (!ok) {
		sm_list_free(out);
		sm_list_free(old);
	}
	return ok;
}
