/* What a sync knows of the host: before it asks, the last committed
 * state (.gpurun/remote-KEY) read against the local list, whole or where
 * they differ, and what the host keeps that is ignored here; after, where
 * the host is not in that state, its manifest (run_host_diff) or its
 * changes (run_host_changes) read the same way (sync_run.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sync_diff.h"
#include "sync_run.h"
#include "sync_steps.h"

/* Is path (on the host) ignored here? Then the sync leaves it there. */
int run_ignored_here(void *arg, const char *path, int is_dir)
{
	struct run *r = arg;
	struct gr_err e = { 0 };

	if (ignore_builtin(path, r->so.include_git))
		return 1;
	if (!r->ig) {
		if (ignore_new(&r->ig, r->ctx->cfg->root, r->so.extra, r->so.nextra, &e) < 0)
			return 0;
		ignore_set_include_git(r->ig, r->so.include_git);
		ignore_set_include(r->ig, r->so.include, r->so.ninclude);
		ignore_set_persist(r->ig, r->so.persist, r->so.npersist);
	}
	return ignore_path(r->ig, path, is_dir, NULL, &e) == 1;
}

/* A file sync_scan_diff must hash (sync_hash_entry, the tree open). */
int run_rehash_racy(void *arg, struct sm_entry *m)
{
	struct run *r = arg;
	struct gr_err e = { 0 };

	return sync_hash_entry(r->tree, r->ctx->cfg->root, m, NULL, &r->hs, &e);
}

/* What the host holds and this side ignores stays on the host (and in
 * the local list, as the host has it). */
void run_keep_ignored(struct run *r, const struct sm_list *host)
{
	sync_plan_keep_ignored(&r->local, host, run_ignored_here, r, NULL);
}

/* The last committed state, read as it streams by: a no-op sync never
 * holds it (held beside the local list it was half the client's peak). */
struct known_walk {
	struct run *r;
	size_t i;                /* local's cursor */
	struct sm_list host_only; /* entries local lacks */
	struct sm_digest d;
};

static void known_entry(void *arg, const struct sm_entry *h)
{
	struct known_walk *k = arg;
	const struct sm_list *l = &k->r->local;

	sm_digest_add(&k->d, h);
	while (k->i < l->n && strcmp(l->e[k->i].path, h->path) < 0)
		k->i++;
	if (k->i >= l->n || strcmp(l->e[k->i].path, h->path))
		sm_add_copy(&k->host_only, h);
	else if (l->e[k->i].flags & SM_F_UNHASHED)
		sync_hash_mark(k->r->ctx->cfg, &l->e[k->i], h);
}

/* Before the connection: the state's digest, what it holds that is
 * ignored here joins local (run_keep_ignored: only the entries local lacks
 * can matter, as local keeps nothing yet), and the files here it says
 * must be compared are marked (sync_hash_mark: no copy of its entries is
 * held for that). The state stays open for known_read. */
void run_known_scan(struct run *r)
{
	struct known_walk k = { .r = r };

	r->have_known = 0;
	if (r->known_fd < 0 && (r->known_fd = sync_rstate_open(r->ctx->cfg->root, r->key)) < 0)
		return;
	if (lseek(r->known_fd, 0, SEEK_SET) != 0) {
		close(r->known_fd);
		r->known_fd = -1;
		return;
	}
	sm_digest_init(&k.d);
	r->have_known = sm_decode_fd_each(r->known_fd, 0, known_entry, &k, NULL) == 0;
	sm_digest_final(&k.d, r->known_digest);
	if (r->have_known) {
		run_keep_ignored(r, &k.host_only);
	} else {
		for (size_t i = 0; i < r->local.n; i++) /* (a damaged state) */
			r->local.e[i].flags &= (uint8_t)~SM_F_COMPARE;
		close(r->known_fd);
		r->known_fd = -1;
	}
	sm_list_free(&k.host_only);
}

/* Walk again whole (the local list made by sync_scan_manifest). */
static int walk_again(struct run *r)
{
	int rc;

	sync_diff_free(&r->diff);
	if ((rc = sync_scan_manifest(r->ctx->cfg->root, &r->so, r->idx, &r->local, &r->hs,
				     &r->ctx->err)) < 0) {
		sync_index_free(r->idx); /* nothing to save: the scan did not finish */
		r->idx = NULL;
		return rc;
	}
	run_known_scan(r);
	return 0;
}

/* A file changed here (local's, unhashed) is hashed if known's at its
 * path may be the same (sync_hash_mark). */
static void mark_compare(struct run *r)
{
	size_t j = 0;

	for (size_t i = 0; i < r->local.n; i++) {
		struct sm_entry *e = &r->local.e[i];
		if (!(e->flags & SM_F_UNHASHED))
			continue;
		while (j < r->known.n && strcmp(r->known.e[j].path, e->path) < 0)
			j++;
		if (j < r->known.n && !strcmp(r->known.e[j].path, e->path))
			sync_hash_mark(r->ctx->cfg, e, &r->known.e[j]);
	}
}

int run_partial(struct run *r)
{
	if (sync_diff_partial(&r->diff, r->known_fd, run_ignored_here, r, &r->local, &r->known))
		return 0;
	r->partial = 1;
	r->have_known = 1;
	r->known_loaded = 1;
	memcpy(r->known_digest, r->diff.digest, SM_HASH_LEN);
	r->hs.files_cached += r->diff.cached;
	r->diff.cached = 0; /* (counted: sync_diff_whole may count them after) */
	mark_compare(r);
	gr_trace("sync: only what differs: %zu entries here, %zu of the state's", r->local.n,
		 r->known.n);
	return 1;
}

static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* sync_spool_diff's seen: the local entries at the paths the host says
 * changed there (h->missing sorted), for warn_host_changes. */
static void seen_change(void *arg, const struct sm_entry *m)
{
	struct run *r = arg;
	const struct host_state *h = r->host;
	const char *p = m->path;

	if (sm_find(&h->changed, p) ||
	    (h->missing.n && bsearch(&p, h->missing.v, h->missing.n, sizeof(*h->missing.v),
				     cmp_path)))
		sm_add_copy(&r->at_changes, m);
}

/* The host sent its manifest (to a file: sync_host.h), which is not the
 * state known here, if any: local read against it, only what differs is
 * held (as after a walk read against remote-KEY: run_partial), the host's
 * manifest standing in for remote-KEY. Local is the walk's spool, or the
 * whole that the walk read against remote-KEY stands for (streamed, or
 * partial: another clone synced since, say), its entries as remote-KEY
 * has them with no stat identity: then no index is written from them
 * (the old one still holds those files). 0; 1 where it cannot be (the
 * manifest is then loaded into h->manifest for the list); or an error. */
int run_host_diff(struct run *r, struct host_state *h)
{
	const struct gr_config *cfg = r->ctx->cfg;
	struct sync_merged here = run_merged(r, &r->local);
	struct sync_scan_diff d;
	int fd = r->hf.fd, rc;

	r->hf.fd = -1;
	if (h->missing.n > 1)
		qsort(h->missing.v, h->missing.n, sizeof(*h->missing.v), cmp_path);
	r->host = h;
	if (r->spooled)
		rc = sync_spool_diff(sync_spool_each_walk, &r->spool, cfg->root, r->idx, fd,
				     run_ignored_here, run_rehash_racy, seen_change, r, &d);
	else
		rc = sync_spool_diff(sync_merged_each_here, &here, NULL, r->idx, fd,
				     run_ignored_here, run_rehash_racy, seen_change, r, &d);
	r->host = NULL;
	if (rc == 0 && memcmp(d.digest, h->digest, SM_HASH_LEN)) {
		sync_diff_free(&d);
		close(fd);
		rc = gr_errf(&r->ctx->err, GR_EPROTO,
			     "the host's sync manifest does not match its digest");
		gr_hintf(&r->ctx->err, "run 'gpurun sync' again");
		return rc;
	}
	if (rc == 0) {
		gr_trace("sync: %s read against the host's manifest: %zu entries, %zu differ%s",
			 r->spooled ? "the spool" : "the walk", d.entries, d.kept.n,
			 d.lacking ? ", some gone" : "");
		/* The host's manifest is the state now. */
		sync_diff_free(&r->diff);
		r->diff = d;
		if (r->known_fd >= 0)
			close(r->known_fd);
		r->known_fd = fd;
		for (size_t i = 0; i < r->local.n; i++) /* (resolve_hashes's) */
			free(r->local.e[i].leaves);
		sm_list_free(&r->local);
		sm_list_free(&r->known);
		r->partial = r->streamed = 0;
		if (run_partial(r)) {
			r->spooled = 0; /* (read: what differs is held) */
			r->diff.devs = 2; /* (never sync_diff_whole: sync_spool_diff says why) */
			return 0;
		}
		/* (cannot be: the file was read whole just now) */
		rc = gr_errf(&r->ctx->err, GR_EIO, "cannot read the host's manifest in .gpurun");
		gr_hintf(&r->ctx->err, "run 'gpurun sync' again");
		return rc;
	}
	gr_trace("sync: the host's manifest cannot be read against %s: a list",
		 r->spooled ? "the spool" : "the walk");
	sm_list_free(&r->at_changes);
	rc = lseek(fd, 0, SEEK_SET) == 0 ? sm_decode_fd(fd, 0, &h->manifest, &r->ctx->err)
					 : gr_errf(&r->ctx->err, GR_EIO, "cannot read the host's "
						   "manifest in .gpurun: %s", strerror(errno));
	close(fd);
	sm_sort(&h->manifest);
	return rc < 0 ? rc : 1;
}

/* The host changed since the state (it sent its changes, not its
 * manifest): only the paths it changed join what differs
 * (sync_diff_changes), and r->view gets what it holds there, for the
 * plan. 0; 1 where that cannot be (then run_local_whole: the list); or
 * an error (the host's digest is not the state's with its changes). */
int run_host_changes(struct run *r, const struct host_state *h)
{
	struct host_gone g;
	uint8_t digest[SM_HASH_LEN];
	int rc;

	if (!r->partial) {
		r->diff.cached = 0; /* (a no-op walk's: counted) */
		if (!run_partial(r))
			return 1;
	}
	host_gone_init(&g, h);
	rc = sync_diff_changes(&r->diff, r->known_fd, r->idx, &h->changed, host_gone, &g,
			       run_ignored_here, r, &r->local, &r->known, &r->view, digest);
	host_gone_release(&g);
	if (rc)
		return 1;
	if (memcmp(digest, h->digest, SM_HASH_LEN)) {
		sync_rstate_drop(r->ctx->cfg->root, r->key);
		gr_errf(&r->ctx->err, GR_EPROTO,
			"the host's sync manifest does not match what gpurun last sent");
		gr_hintf(&r->ctx->err, "run 'gpurun sync' again");
		return GR_EPROTO;
	}
	gr_trace("sync: the host changed since the state (%zu changed, %zu gone): %zu entries "
		 "here, %zu of the state's, %zu of the host's", h->changed.n, h->missing.n,
		 r->local.n, r->known.n, r->view.n);
	return 0;
}

struct sync_merged run_merged(struct run *r, const struct sm_list *local)
{
	return (struct sync_merged){ &r->diff, r->known_fd, &r->known, local };
}

/* The local list, for a sync that needs it after all: made from what the
 * walk kept and the state (or, where it cannot be, by a walk again),
 * then read against the state as run_known_scan does. */
int run_local_whole(struct run *r)
{
	const struct gr_config *cfg = r->ctx->cfg;

	if (r->spooled) {
		r->spooled = 0;
		int rc = sync_spool_load(&r->spool, &r->local, &r->ctx->err);
		gr_trace("sync: local made from the spool (%zu entries)", r->local.n);
		return rc;
	}
	if (!r->streamed)
		return 0;
	r->streamed = 0;
	if (r->partial) {
		/* The host is not in the state after all: what the walk kept
		 * goes back to it, hashed now, for the list (block hashes are
		 * made again where needed). */
		r->partial = 0;
		for (size_t i = 0; i < r->local.n; i++) {
			free(r->local.e[i].leaves);
			r->local.e[i].leaves = NULL;
		}
		r->diff.kept = r->local; /* (emptied by run_partial) */
		memset(&r->local, 0, sizeof(r->local));
		r->known_loaded = 0;
	}
	sm_list_free(&r->known);
	if (sync_diff_whole(&r->diff, r->idx, r->known_fd, &r->local, &r->known, &r->hs,
			    &r->ctx->err)) {
		gr_trace("sync: the state or the index changed: walking again");
		return walk_again(r);
	}
	gr_trace("sync: local made whole (%zu entries; %zu of the state's differ)", r->local.n,
		 r->known.n);
	/* run_known_scan's and run_known_diff's work, from what differs alone: the
	 * state's entries local lacks stay if ignored here, and a file
	 * changed here is hashed if the state's may be the same. */
	struct sm_list host_only = { 0 };
	size_t i = 0;
	for (size_t j = 0; j < r->known.n; j++) {
		const struct sm_entry *h = &r->known.e[j];
		while (i < r->local.n && strcmp(r->local.e[i].path, h->path) < 0)
			i++;
		if (i >= r->local.n || strcmp(r->local.e[i].path, h->path))
			sm_add_copy(&host_only, h);
		else
			sync_hash_mark(cfg, &r->local.e[i], h);
	}
	r->have_known = 1;
	r->known_loaded = 1;
	memcpy(r->known_digest, r->diff.digest, SM_HASH_LEN);
	run_keep_ignored(r, &host_only);
	sm_list_free(&host_only);
	/* (what it kept is the state's as it is: as run_known_diff leaves it) */
	size_t keep = 0;
	i = 0;
	for (size_t j = 0; j < r->known.n; j++) {
		struct sm_entry *h = &r->known.e[j];
		while (i < r->local.n && strcmp(r->local.e[i].path, h->path) < 0)
			i++;
		if (i < r->local.n && (r->local.e[i].flags & SM_F_KEPT) &&
		    sm_same(&r->local.e[i], h)) {
			r->local.e[i].flags |= SM_F_SAME;
			sm_entry_release(h);
			continue;
		}
		r->known.e[keep++] = *h;
	}
	r->known.n = keep;
	return 0;
}

/* The same for a sync without the walk: the committed state is local
 * but for the entries at the reported paths (r->known, as run_known_diff
 * leaves it; local's others are SM_F_SAME, sync_incr_build): what local
 * lacks and is ignored here stays, as run_keep_ignored keeps it, and a
 * changed file is hashed if the committed one may be the same. */
void run_known_from_incr(struct run *r)
{
	r->have_known = 1;
	r->known_loaded = 1;
	run_keep_ignored(r, &r->known);
	mark_compare(r);
}

/* For a sync without the walk, local's digest without a digest of it
 * all (~65 ms at 300k entries): local is the committed state but for its
 * entries not SM_F_SAME, and known holds the committed ones they
 * replaced (run_known_from_incr): if those are the same, so is the digest;
 * else it differs, and stays unset (zeros: the host cannot be in that
 * state as far as OPEN says; the changes go optimistic). */
void run_incr_digest(struct run *r)
{
	const struct sm_list *k = &r->known;
	size_t j = 0;
	int same = 1;

	memset(r->local_digest, 0, SM_HASH_LEN);
	for (size_t i = 0; i < r->local.n && same; i++) {
		const struct sm_entry *e = &r->local.e[i];
		if (e->flags & SM_F_SAME)
			continue;
		same = j < k->n && !strcmp(e->path, k->e[j].path) && sm_same(e, &k->e[j]);
		j++;
	}
	if (same && j == k->n)
		memcpy(r->local_digest, r->known_digest, SM_HASH_LEN);
}

/* The entries of the last committed state that differ from local's at
 * their path (or that local lacks); the local entries it holds as they
 * are get SM_F_SAME instead of a copy. */
struct diff_walk {
	struct run *r;
	size_t i;
};

static void diff_entry(void *arg, const struct sm_entry *h)
{
	struct diff_walk *k = arg;
	struct sm_list *l = &k->r->local;

	while (k->i < l->n && strcmp(l->e[k->i].path, h->path) < 0)
		k->i++;
	if (k->i < l->n && sm_same(&l->e[k->i], h))
		l->e[k->i].flags |= SM_F_SAME;
	else
		sm_add_copy(&k->r->known, h);
}

void run_forget_same(struct run *r)
{
	for (size_t i = 0; i < r->local.n; i++)
		r->local.e[i].flags &= (uint8_t)~SM_F_SAME;
}

/* The last committed state, for a plan against it: whole (run_known_load),
 * or (diff: run_known_diff) only where local differs from it, local's
 * entries marked SM_F_SAME where it does not. A small edit then holds
 * one list, not two (the second was 150 bytes a file of its peak). */
static int known_read(struct run *r, int diff)
{
	struct diff_walk k = { .r = r };

	if (!r->have_known || r->known_loaded == 1 + !diff)
		return 0;
	sm_list_free(&r->known);
	run_forget_same(r);
	r->known_loaded = 1 + !diff;
	if (lseek(r->known_fd, 0, SEEK_SET) == 0 &&
	    (diff ? sm_decode_fd_each(r->known_fd, 0, diff_entry, &k, &r->ctx->err)
		  : sm_decode_fd(r->known_fd, 0, &r->known, &r->ctx->err)) == 0)
		return 0;
	sm_list_free(&r->known);
	run_forget_same(r);
	sync_rstate_drop(r->ctx->cfg->root, r->key);
	gr_errf(&r->ctx->err, GR_EIO, "cannot read what the last sync left on the host "
		"(.gpurun/remote-%s)", r->key);
	gr_hintf(&r->ctx->err, "run 'gpurun sync' again");
	return GR_EIO;
}

int run_known_load(struct run *r)
{
	return known_read(r, 0);
}

int run_known_diff(struct run *r)
{
	return known_read(r, 1);
}
