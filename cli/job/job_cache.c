/* The .gpurun/jobs cache: the jobs this project started, newest first,
 * so ids resolve and complete without a connection (see job_client.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "job_client.h"
#include "sync.h"

struct cache_line {
	char *id, *state;
	long long start;
	char *name; /* "" when the job has none */
};

/* Newest first. A stable insertion sort: among jobs started in the same
 * second, the ones just recorded (placed first) stay first. */
static void sort_cache(struct cache_line *l, size_t n)
{
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && l[j - 1].start < l[j].start; j--) {
			struct cache_line t = l[j];
			l[j] = l[j - 1];
			l[j - 1] = t;
		}
}

/* A state fit for the cache's tab-separated lines: a short lowercase word. */
static int state_word_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (!n || n > 32)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || s[i] == '-' || s[i] == '_'))
			return 0;
	return 1;
}

void job_cache_update(const char *root, const struct job_rec *recs, size_t n)
{
	char *dir = xasprintf("%s/.gpurun", root), *path = xasprintf("%s/jobs", dir);
	char *lock = xasprintf("%s/jobs.lock", dir);
	struct strbuf old = STRBUF_INIT, out = STRBUF_INIT;
	struct cache_line *l = NULL;
	size_t nl = 0;
	char *save = NULL;
	int lfd = -1;

	if (sync_state_dir(root, "", NULL) < 0)
		goto out;
	/* Read, merge, write: under a lock, so a train ending in the
	 * background and a command starting now do not lose each other's
	 * lines. */
	lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (lfd >= 0)
		while (flock(lfd, LOCK_EX) < 0 && errno == EINTR)
			;
	for (size_t i = 0; i < n; i++) {
		const struct job_rec *r = &recs[i];
		uint64_t t = r->start_ms ? r->start_ms : r->created_ms;
		if (!job_id_ok(r->id))
			continue;
		l = xrealloc(l, (nl + 1) * sizeof(*l));
		l[nl++] = (struct cache_line){ xstrdup(r->id),
			xstrdup(state_word_ok(r->state) ? r->state : "unknown"), (long long)(t / 1000),
			xstrdup(r->name && job_name_ok(r->name) ? r->name : "") };
	}
	read_file(path, &old, NULL);
	for (char *line = strtok_r(old.buf ? old.buf : (char *)"", "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		char *t3 = t2 ? strchr(t2 + 1, '\t') : NULL;
		long long start;
		size_t j;
		if (!t2)
			continue;
		*t1 = *t2 = '\0';
		if (t3)
			*t3 = '\0'; /* the name, since issue 15 */
		if (!job_id_ok(line) || !state_word_ok(t1 + 1) || parse_ll(t2 + 1, 0, 1LL << 40, &start) < 0)
			continue;
		for (j = 0; j < nl && strcmp(l[j].id, line); j++)
			;
		if (j < nl)
			continue; /* superseded by what we were given */
		l = xrealloc(l, (nl + 1) * sizeof(*l));
		l[nl++] = (struct cache_line){ xstrdup(line), xstrdup(t1 + 1), start,
					       xstrdup(t3 && job_name_ok(t3 + 1) ? t3 + 1 : "") };
	}
	sort_cache(l, nl);
	for (size_t i = 0; i < nl && i < 200; i++)
		sb_addf(&out, "%s\t%s\t%lld%s%s\n", l[i].id, l[i].state, l[i].start,
			*l[i].name ? "\t" : "", l[i].name);
	write_file_atomic(path, out.buf ? out.buf : "", out.len, 0644, NULL);
out:
	for (size_t i = 0; i < nl; i++) {
		free(l[i].id);
		free(l[i].state);
		free(l[i].name);
	}
	free(l);
	sb_release(&old);
	sb_release(&out);
	free(dir);
	free(path);
	free(lock);
	if (lfd >= 0)
		close(lfd);
}

void job_cache_forget(const char *root, const struct strvec *ids)
{
	char *path = xasprintf("%s/.gpurun/jobs", root);
	struct strbuf old = STRBUF_INIT, out = STRBUF_INIT;
	char *save = NULL;

	if (!ids->n || read_file(path, &old, NULL) < 0)
		goto out;
	for (char *line = strtok_r(old.buf ? old.buf : (char *)"", "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		size_t j;
		for (j = 0; j < ids->n; j++)
			if (!strncmp(line, ids->v[j], strlen(ids->v[j])) && line[strlen(ids->v[j])] == '\t')
				break;
		if (j == ids->n)
			sb_addf(&out, "%s\n", line);
	}
	write_file_atomic(path, out.buf ? out.buf : "", out.len, 0644, NULL);
out:
	sb_release(&old);
	sb_release(&out);
	free(path);
}
