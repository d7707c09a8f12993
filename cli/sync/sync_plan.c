/* The sync plan: a merge of the local and the host's manifests (see
 * sync_plan.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sync_plan.h"
#include "sync_proto.h"


static void push_idx(size_t **v, size_t *n, size_t i)
{
	*v = xrealloc(*v, (*n + 1) * sizeof(**v));
	(*v)[(*n)++] = i;
}

static void send_file(struct sync_plan *p, const struct sm_list *local, size_t i,
		      const struct sm_entry *r, uint64_t delta_min,
		      int (*have_sig)(void *, const uint8_t *), void *arg)
{
	const struct sm_entry *l = &local->e[i];
	/* (a host's list is far below 2^30 entries: SM_MAX_DECODED) */
	struct sync_item it = { .local = (uint32_t)i, .how = HOW_TAR,
				.prev = r ? (uint32_t)(r - p->remote->e) + 1 : 0 };

	if (r && r->type == SM_FILE && l->size >= delta_min && r->size >= SYNC_DELTA_BASE_MIN)
		it.how = have_sig && have_sig(arg, r->hash) ? HOW_DELTA : HOW_DELTA_SIG;
	p->files = xrealloc(p->files, (p->nfiles + 1) * sizeof(*p->files));
	p->files[p->nfiles++] = it;
	p->send_bytes += l->size;
}

/* Bring local entry i (absent on the host, or of another type there) over. */
static void add_new(struct sync_plan *p, const struct sm_list *local, size_t i,
		    const struct sm_entry *r, uint64_t delta_min,
		    int (*have_sig)(void *, const uint8_t *), void *arg)
{
	const struct sm_entry *l = &local->e[i];

	if (l->type == SM_DIR)
		sv_push(&p->mkdirs, l->path);
	else if (l->type == SM_LINK)
		push_idx(&p->links, &p->nlinks, i);
	else
		send_file(p, local, i, r, delta_min, have_sig, arg);
}

void sync_plan_build(const struct sm_list *local, const struct sm_list *remote,
		     uint64_t delta_min, int (*have_sig)(void *arg, const uint8_t *hash),
		     void *arg, struct sync_plan *p)
{
	size_t i = 0, j = 0;
	struct strvec del = STRVEC_INIT;

	memset(p, 0, sizeof(*p));
	p->remote = remote;
	while (i < local->n || j < remote->n) {
		int c = i >= local->n ? 1 : j >= remote->n ? -1
			: strcmp(local->e[i].path, remote->e[j].path);
		if (c > 0) { /* only on the host */
			sv_push(&del, remote->e[j++].path);
			continue;
		}
		if (c < 0) { /* only here (or the host has it as it is) */
			if (!(local->e[i].flags & SM_F_SAME))
				add_new(p, local, i, NULL, delta_min, have_sig, arg);
			i++;
			continue;
		}
		const struct sm_entry *l = &local->e[i], *r = &remote->e[j];
		if (l->type != r->type) {
			/* A folder on either side must go first; a file and a
			 * symlink replace each other by rename. */
			if (l->type == SM_DIR || r->type == SM_DIR)
				sv_push(&del, r->path);
			add_new(p, local, i, r, delta_min, have_sig, arg);
		} else if (l->type == SM_LINK) {
			if (strcmp(l->link, r->link))
				push_idx(&p->links, &p->nlinks, i);
		} else if (l->type == SM_FILE) {
			if (memcmp(l->hash, r->hash, SM_HASH_LEN) || l->size != r->size)
				send_file(p, local, i, r, delta_min, have_sig, arg);
			else if (l->mode != r->mode || l->mtime_ns != r->mtime_ns)
				push_idx(&p->meta, &p->nmeta, i);
		}
		i++;
		j++;
	}
	/* Children sort after their parents: reversed, they come first. */
	for (size_t k = del.n; k-- > 0;)
		sv_push(&p->deletes, del.v[k]);
	sv_clear(&del);
}

/* One merge of local and host for sync_plan_keep_ignored. With out NULL
 * it only counts: the entries the new list would hold (returned), *kept,
 * *changed. With out (room for that count, made by the first pass) and m
 * it fills them. ign: one bit per host entry, ignored()'s answer, which
 * the first pass asks for (entries on the host alone) and the second
 * reads, so both passes see the same. */
static size_t keep_pass(const struct sm_list *local, const struct sm_list *host,
			int (*ignored)(void *arg, const char *path, int is_dir), void *arg,
			uint8_t *ign, struct sm_entry *out, size_t *m, size_t *kept, int *changed)
{
	size_t i = 0, j = 0, n = 0;

	*kept = 0;
	*changed = 0;
	while (i < local->n || j < host->n) {
		const struct sm_entry *l = i < local->n ? &local->e[i] : NULL;
		const struct sm_entry *h = j < host->n ? &host->e[j] : NULL;
		int c = !l ? 1 : !h ? -1 : strcmp(l->path, h->path);
		if (c <= 0 && !(l->flags & SM_F_KEPT)) { /* ours: as it is */
			if (out) {
				out[n] = *l;
				if (m)
					m[n] = i;
			}
			n++;
			i++;
			j += c == 0;
			continue;
		}
		if (c < 0) { /* kept before, gone from the host since */
			*changed = 1;
			i++;
			continue;
		}
		/* On the host only (or kept before). */
		i += c == 0;
		if (!out && ignored(arg, h->path, h->type == SM_DIR))
			ign[j / 8] |= (uint8_t)(1u << (j % 8));
		int is_ignored = ign[j / 8] >> (j % 8) & 1;
		j++;
		if (!is_ignored) {
			*changed |= c == 0; /* kept before, synced again now */
			continue;
		}
		*changed = 1;
		if (out) {
			struct sm_entry *e = &out[n];
			memset(e, 0, sizeof(*e));
			e->path = xstrdup(h->path);
			e->type = h->type;
			e->mode = h->mode;
			e->size = h->size;
			e->mtime_ns = h->mtime_ns;
			memcpy(e->hash, h->hash, SM_HASH_LEN);
			e->link = h->link ? xstrdup(h->link) : NULL;
			e->flags = SM_F_KEPT;
			if (m)
				m[n] = SIZE_MAX;
		}
		n++;
		(*kept)++;
	}
	return n;
}

/* Two passes, so that in the usual case (nothing to keep) no second list
 * is made at all, and otherwise one of the exact size: a copy of 100k
 * entries grown by doubling cost 16 MiB beside the original. */
size_t sync_plan_keep_ignored(struct sm_list *local, const struct sm_list *host,
			      int (*ignored)(void *arg, const char *path, int is_dir), void *arg,
			      size_t **map)
{
	size_t kept, n;
	int changed;
	uint8_t *ign = xcalloc(host->n / 8 + 1, 1);

	if (map)
		*map = NULL;
	n = keep_pass(local, host, ignored, arg, ign, NULL, NULL, &kept, &changed);
	if (!changed) { /* nothing to keep: local stays as it was */
		free(ign);
		return 0;
	}
	struct sm_list out = { xcalloc(n ? n : 1, sizeof(*out.e)), 0, n ? n : 1, local->pool };
	/* (the entries' paths stay in local's pool) */
	size_t *m = map ? xcalloc(n ? n : 1, sizeof(*m)) : NULL;
	size_t again;
	int changed2;
	out.n = keep_pass(local, host, ignored, arg, ign, out.e, m, &again, &changed2);
	free(ign);
	/* The entries moved to out: release only the kept-before ones. */
	for (size_t k = 0; k < local->n; k++)
		if (local->e[k].flags & SM_F_KEPT)
			sm_entry_release(&local->e[k]);
	free(local->e);
	*local = out;
	if (map)
		*map = m;
	return again;
}

void sync_plan_free(struct sync_plan *p)
{
	sv_clear(&p->deletes);
	sv_clear(&p->mkdirs);
	free(p->links);
	free(p->files);
	free(p->meta);
	memset(p, 0, sizeof(*p));
}

int sync_plan_empty(const struct sync_plan *p)
{
	return !p->deletes.n && !p->mkdirs.n && !p->nlinks && !p->nfiles && !p->nmeta;
}

char *sync_quote(const char *path)
{
	struct strbuf b = STRBUF_INIT;
	int plain = 1;

	for (const unsigned char *c = (const unsigned char *)path; *c && plain; c++)
		plain = *c >= 0x20 && *c < 0x7f && *c != '"' && *c != '\\';
	if (plain)
		return xstrdup(path);
	sb_adds(&b, "\"");
	for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
		switch (*c) {
		case '\n': sb_adds(&b, "\\n"); break;
		case '\t': sb_adds(&b, "\\t"); break;
		case '"': sb_adds(&b, "\\\""); break;
		case '\\': sb_adds(&b, "\\\\"); break;
		default:
			if (*c < 0x20 || *c >= 0x7f)
				sb_addf(&b, "\\%03o", *c);
			else
				sb_add(&b, c, 1);
		}
	}
	sb_adds(&b, "\"");
	return sb_detach(&b, NULL);
}

static void line(struct strbuf *out, const char *verb, const char *path, const char *suffix)
{
	char *q = sync_quote(path);

	sb_addf(out, "%s %s%s\n", verb, q, suffix);
	free(q);
}

void sync_plan_list(const struct sync_plan *p, const struct sm_list *local,
		    struct strbuf *out)
{
	for (size_t i = 0; i < p->deletes.n; i++)
		line(out, "delete", p->deletes.v[i], "");
	for (size_t i = 0; i < p->mkdirs.n; i++)
		line(out, "send", p->mkdirs.v[i], "/");
	for (size_t i = 0; i < p->nlinks; i++)
		line(out, "send", local->e[p->links[i]].path, "");
	for (size_t i = 0; i < p->nfiles; i++)
		line(out, "send", local->e[p->files[i].local].path, "");
	for (size_t i = 0; i < p->nmeta; i++)
		line(out, "update", local->e[p->meta[i]].path, "");
}

static int by_bytes(const void *a, const void *b)
{
	const struct sync_folder_size *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes < y->bytes ? 1 : -1;
	return strcmp(x->name, y->name);
}

size_t sync_plan_largest(const struct sync_plan *p, const struct sm_list *local,
			 struct sync_folder_size *out, size_t n)
{
	struct sync_folder_size *all = NULL;
	size_t nall = 0;

	for (size_t i = 0; i < p->nfiles; i++) {
		const struct sm_entry *e = &local->e[p->files[i].local];
		const char *slash = strchr(e->path, '/');
		char *name = slash ? xstrndup(e->path, (size_t)(slash - e->path) + 1)
				   : xstrdup("(top level)");
		size_t k;
		for (k = 0; k < nall && strcmp(all[k].name, name); k++)
			;
		if (k == nall) {
			all = xrealloc(all, (nall + 1) * sizeof(*all));
			all[nall++] = (struct sync_folder_size){ name, 0 };
		} else {
			free(name);
		}
		all[k].bytes += e->size;
	}
	if (nall > 1)
		qsort(all, nall, sizeof(*all), by_bytes);
	size_t got = nall < n ? nall : n;
	for (size_t k = 0; k < nall; k++) {
		if (k < got)
			out[k] = all[k];
		else
			free(all[k].name);
	}
	free(all);
	return got;
}
