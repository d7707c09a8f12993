/* sync_diff_changes (sync_diff.h): a walk read against the state, where
 * the host changed since that state, planned without a list of the tree.
 * What the host holds is the state but at the paths its changes touch,
 * so only those paths join what differs (run_partial's lists). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync_diff.h"
#include "sync_index_rd.h"
#include "sync_plan.h"

/* changed's entry at path, as the walk below reaches it (in order). */
static const struct sm_entry *at_path(const struct sm_list *changed, size_t *c, const char *path)
{
	while (*c < changed->n && strcmp(changed->e[*c].path, path) < 0)
		(*c)++;
	return *c < changed->n && !strcmp(changed->e[*c].path, path) ? &changed->e[*c] : NULL;
}

/* A copy for local of the entry at e's path: no scan's stat identity, no
 * block hashes (the sync makes them where it needs them). */
static struct sm_entry *local_copy(struct sm_list *local, const struct sm_entry *e, uint8_t flags)
{
	struct sm_entry *c = sm_add_copy(local, e);

	c->flags = flags;
	return c;
}

int sync_diff_changes(const struct sync_scan_diff *d, int state_fd, const struct sync_index *idx,
		      const struct sm_list *changed, int (*gone)(void *garg, const char *path),
		      void *garg, int (*ignored)(void *arg, const char *path, int is_dir), void *arg,
		      struct sm_list *local, struct sm_list *differ, struct sm_list *view,
		      uint8_t digest[SM_HASH_LEN])
{
	size_t nl = local->n, nd = differ->n, n = 0, c = 0, cd = 0, j = 0;
	uint8_t *in_state = xcalloc(changed->n / 8 + 1, 1); /* changed's at a state's path */
	const struct sm_entry *k;
	struct sm_reader kr;
	struct sm_digest dg;
	struct idx_rd ir;

	sm_list_free(view);
	if (lseek(state_fd, 0, SEEK_SET) != 0 || sm_reader_open(&kr, state_fd, 0, NULL, NULL) < 0) {
		sm_reader_close(&kr);
		free(in_state);
		return 1;
	}
	idx_open(&ir, idx ? idx->path : "");
	sm_digest_init(&dg);
	for (; (k = sm_reader_next(&kr)); n++) {
		/* The host's digest: its new entries in their places, the
		 * state's that it holds as they were. */
		while (cd < changed->n && strcmp(changed->e[cd].path, k->path) < 0)
			sm_digest_add(&dg, &changed->e[cd++]);
		const struct sm_entry *ch = at_path(changed, &c, k->path);
		if (ch) {
			in_state[c / 8] |= (uint8_t)(1u << (c % 8));
			sm_digest_add(&dg, ch);
			cd = c + 1;
		}
		if (!ch && !gone(garg, k->path)) {
			sm_digest_add(&dg, k);
			continue;
		}
		/* A path the host changed. Where the state's entry differs
		 * here already, local's entry (if any) is in local. */
		while (j < nd && strcmp(differ->e[j].path, k->path) < 0)
			j++;
		if (j < nd && !strcmp(differ->e[j].path, k->path))
			continue;
		sm_add_copy(differ, k); /* (replaced by local's, or gone) */
		if (sync_diff_same(d, n)) {
			/* local holds the state's entry as it is */
			struct sm_entry *e = local_copy(local, k, 0);
			const struct idx_entry *x = k->type == SM_FILE && d->devs <= 1
							    ? idx_seek(&ir, k->path) : NULL;
			if (idx_holds(x, k)) {
				e->ino = x->ino;
				e->dev = d->dev;
			}
		} else if (ch) {
			/* local lacks it and it is ignored here (else differ
			 * would hold it): the host's new one stays */
			local_copy(local, ch, SM_F_KEPT);
		}
	}
	while (cd < changed->n)
		sm_digest_add(&dg, &changed->e[cd++]);
	sm_digest_final(&dg, digest);
	idx_close(&ir);
	int rc = kr.rc;
	sm_reader_close(&kr);
	if (rc < 0 || n != d->nstate) {
		for (size_t i = nl; i < local->n; i++)
			sm_entry_release(&local->e[i]);
		for (size_t i = nd; i < differ->n; i++)
			sm_entry_release(&differ->e[i]);
		local->n = nl;
		differ->n = nd;
		free(in_state);
		return 1;
	}
	/* The host's new entries where the state has none: ignored here and
	 * lacking here, they stay. (before: local as it came, sorted) */
	struct sm_list before = { local->e, nl, nl, NULL };
	for (size_t i = 0; i < changed->n; i++) {
		const struct sm_entry *e = &changed->e[i];
		if (in_state[i / 8] >> (i % 8) & 1)
			continue;
		sm_add_copy(view, e);
		if (!sm_find(&before, e->path) && ignored(arg, e->path, e->type == SM_DIR))
			local_copy(local, e, SM_F_KEPT);
	}
	/* What the host holds at the state's paths that differ: its new
	 * entry, none, or the state's. */
	for (size_t i = 0; i < differ->n; i++) {
		const struct sm_entry *e = &differ->e[i];
		const struct sm_entry *ch = sm_find(changed, e->path);
		if (ch)
			sm_add_copy(view, ch);
		else if (!gone(garg, e->path))
			sm_add_copy(view, e);
	}
	free(in_state);
	sm_sort(local);
	sm_sort(differ);
	sm_sort(view);
	return 0;
}
