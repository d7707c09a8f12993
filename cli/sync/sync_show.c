/* What a sync shows the user, and the one question it asks: the size
 * warning with its largest folders and "Send it?", the summary line, what
 * the ignore rules left out, --stats, --dry-run's listing, and notices.
 * The engine (sync.c, sync_steps.c) calls these through struct sync_show,
 * which the commands hand it; they never print themselves. */
#include <stdio.h>
#include <stdlib.h>

#include "ignore.h"
#include "sync.h"
#include "sync_plan.h"
#include "term.h"

static void say(void *arg, const char *msg)
{
	(void)arg;
	fprintf(stderr, "gpurun: %s\n", msg);
}

/* Above [sync] warn_size: show the total and the largest folders, and ask
 * (on a terminal) or refuse (elsewhere). */
static int too_big(void *arg, const struct sync_plan *p, const struct sm_list *local,
		   uint64_t limit, struct gr_err *err)
{
	struct gr_ctx *ctx = arg;
	struct sync_folder_size top[5];
	char a[32], b[32];

	size_t n = sync_plan_largest(p, local, top, 5);
	fprintf(stderr, "gpurun: this sync sends %s, more than [sync] warn_size (%s); largest folders:\n",
		fmt_size(p->send_bytes, a, sizeof(a)), fmt_size(limit, b, sizeof(b)));
	for (size_t i = 0; i < n; i++) {
		char *q = sync_quote(top[i].name);
		fprintf(stderr, "  %10s  %s\n", fmt_size(top[i].bytes, a, sizeof(a)), q);
		free(q);
		free(top[i].name);
	}
	if (!ctx->interactive) {
		gr_errf(err, GR_ECANCEL, "not sending %s without confirmation",
			fmt_size(p->send_bytes, a, sizeof(a)));
		gr_hintf(err, "pass --yes to send it, or exclude the big folders in "
			 ".gpurunignore or [sync] exclude");
		return GR_ECANCEL;
	}
	fprintf(stderr, "Send it? [y/N] ");
	fflush(stderr);
	char ans[16] = "";
	if (!fgets(ans, sizeof(ans), stdin) || (ans[0] != 'y' && ans[0] != 'Y')) {
		gr_errf(err, GR_ECANCEL, "sync cancelled");
		return GR_ECANCEL;
	}
	return 0;
}


static void summary(const struct sync_opts *o, const struct sync_stats *st,
	     const struct scan_ignored *ig)
{
	char w[32];
	unsigned long long sent = st->files_sent;

	if (o->quiet)
		return;
	fmt_size(st->bytes_wire, w, sizeof(w));
	if (o->dry_run)
		fprintf(stderr, "would send %llu file%s, %s; delete %llu; update %llu (%.1f s)\n",
			sent, sent == 1 ? "" : "s", fmt_size(st->bytes_total, w, sizeof(w)),
			(unsigned long long)st->files_deleted, (unsigned long long)st->files_updated,
			st->seconds);
	else
		fprintf(stderr, "synced %llu file%s (%llu deleted), %s on the wire, %.2f s%s\n",
			sent, sent == 1 ? "" : "s", (unsigned long long)st->files_deleted,
			w, st->seconds, st->up_to_date ? " (up to date)" : "");
	if (!ig || !(ig->files + ig->dirs))
		return;
	/* What was not sent, and where to ask why: data that git ignores
	 * stays here unless [sync] include names it. */
	struct strbuf sb = STRBUF_INIT;
	char b[32];
	sb_addf(&sb, "left out by the ignore rules: %llu file%s (%s)", (unsigned long long)ig->files,
		ig->files == 1 ? "" : "s", fmt_size(ig->bytes, b, sizeof(b)));
	if (ig->dirs) {
		sb_addf(&sb, "%s %llu folder%s (", ig->walk_dirs ? ", counting those in" : " and",
			(unsigned long long)ig->dirs, ig->dirs == 1 ? "" : "s");
		for (size_t i = 0; i < ig->names.n; i++) {
			char *q = sync_quote(ig->names.v[i]);
			sb_addf(&sb, "%s%s", i ? ", " : "", q);
			free(q);
		}
		sb_adds(&sb, ig->dirs > ig->names.n ? ", ...)" : ")");
	}
	fprintf(stderr, "%s\nhint: 'gpurun sync --why PATH' names the rule; [sync] include sends "
		"what git ignores\n", sb.buf);
	sb_release(&sb);
}

static void print_stats(const struct sync_stats *st)
{
	printf("entries: %llu (%llu files hashed, %llu bytes, %llu of them in blocks "
	       "unchanged since the last hashing; %llu from the cache)\n",
	       (unsigned long long)st->entries, (unsigned long long)st->files_hashed,
	       (unsigned long long)st->bytes_hashed, (unsigned long long)st->bytes_reused,
	       (unsigned long long)st->files_cached);
	printf("sent: %llu files (%llu in the tar, %llu as deltas, %llu whole), %llu updated, "
	       "%llu deleted, %llu signatures asked\n",
	       (unsigned long long)st->files_sent, (unsigned long long)st->files_tar,
	       (unsigned long long)st->files_delta, (unsigned long long)st->files_whole,
	       (unsigned long long)st->files_updated, (unsigned long long)st->files_deleted,
	       (unsigned long long)st->sigs_asked);
	printf("content: %llu bytes (%llu literal, %llu matched)\n",
	       (unsigned long long)st->bytes_total, (unsigned long long)st->bytes_literal,
	       (unsigned long long)st->bytes_matched);
	printf("wire: %llu bytes (%llu sent, %llu received)\n",
	       (unsigned long long)st->bytes_wire, (unsigned long long)st->wire_out,
	       (unsigned long long)st->wire_in);
}

static void listing(void *arg, const char *text, size_t len)
{
	(void)arg;
	fwrite(text, 1, len, stdout);
	fflush(stdout);
}

static void done(void *arg, const struct sync_opts *o, const struct sync_stats *st,
		 const struct scan_ignored *ig)
{
	(void)arg;
	summary(o, st, ig);
	if (o->stats)
		print_stats(st);
}

const struct sync_show sync_show_default = { say, too_big, listing, done };
