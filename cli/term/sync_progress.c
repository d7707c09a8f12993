/* The sync progress bar (see sync_progress.h). */
#include <stdio.h>

#include "sync_progress.h"
#include "util.h"

#define REDRAW_NS 100000000ull

void sync_progress_start(struct sync_progress *p, int enabled, uint64_t total)
{
	p->enabled = enabled && total > 0;
	p->total = total;
	p->done = 0;
	p->start_ns = p->last_ns = now_ns();
	p->drawn = 0;
}

static void draw(struct sync_progress *p, uint64_t now)
{
	char done[32], total[32], rate[32], eta[32] = "";
	double secs = (double)(now - p->start_ns) / 1e9;
	double r = secs > 0 ? (double)p->done / secs : 0;
	int pct = p->total ? (int)(100.0 * (double)p->done / (double)p->total) : 100;
	char bar[21];

	if (pct > 100)
		pct = 100;
	for (int i = 0; i < 20; i++)
		bar[i] = i < pct / 5 ? '#' : '.';
	bar[20] = '\0';
	fmt_size(p->done, done, sizeof(done));
	fmt_size(p->total, total, sizeof(total));
	fmt_size((uint64_t)r, rate, sizeof(rate));
	if (r > 0 && p->done < p->total)
		snprintf(eta, sizeof(eta), ", ETA %.0f s", (double)(p->total - p->done) / r);
	fprintf(stderr, "\rsync [%s] %3d%% %s / %s, %s/s%s\033[K", bar, pct, done, total,
		rate, eta);
	fflush(stderr);
	p->drawn = 1;
}

void sync_progress_add(struct sync_progress *p, uint64_t bytes)
{
	uint64_t now;

	p->done += bytes;
	if (!p->enabled)
		return;
	now = now_ns();
	if (now - p->last_ns < REDRAW_NS)
		return;
	p->last_ns = now;
	draw(p, now);
}

void sync_progress_clear(struct sync_progress *p)
{
	if (p->enabled && p->drawn) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	p->drawn = 0;
}
