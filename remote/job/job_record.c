/* A job's record (struct job_rec, job_rec.h) from its folder: the meta
 * files the store keeps (job_store.h), then the live part its backend
 * says (job_backend.h: state), and what the folder costs on disk; and
 * the jobs of a root, listed newest first and resolved from what a user
 * typed. The store below knows no backend: this is the one place a
 * record is put together, for the requests, the house-keeping and the
 * backends' own stops alike. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "job_backend.h"
#include "job_record.h"

/* ---- disk use ---- */

/* Blocks of what dfd's tree holds alone. */
static uint64_t du_at(int dfd)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	uint64_t sum = 0;

	if (!d) {
		close(dfd);
		return 0;
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			sum += (uint64_t)st.st_blocks * 512;
			int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				sum += du_at(sub);
		} else if (st.st_nlink == 1) {
			sum += (uint64_t)st.st_blocks * 512;
		}
	}
	closedir(d);
	return sum;
}

uint64_t job_du(const char *dir, int ended)
{
	struct strvec kv = STRVEC_INIT;
	char *p = job_meta(dir, "du");
	uint64_t bytes;
	int fd;

	if (ended && job_kv_read(p, &kv, NULL) == 0 && job_kv_get(&kv, "bytes")) {
		bytes = job_kv_u64(&kv, "bytes");
		goto out;
	}
	/* The cache is part of what it measures: there first, with the same
	 * size in blocks as its final text, but not a cache yet: when the
	 * final text finds no room (a full disk: the rename needs a second
	 * block for a moment), the next call measures again rather than
	 * believe a size of 0. */
	if (ended)
		write_file_atomic(p, "pending\n", 8, 0644, NULL);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	bytes = 0;
	if (fd >= 0) {
		struct stat st;
		if (fstat(fd, &st) == 0)
			bytes = (uint64_t)st.st_blocks * 512;
		bytes += du_at(fd);
	}
	if (ended) {
		char *t = xasprintf("bytes=%llu\n", (unsigned long long)bytes);
		write_file_atomic(p, t, strlen(t), 0644, NULL);
		free(t);
	}
out:
	sv_clear(&kv);
	free(p);
	return bytes;
}

/* ---- the record ---- */

/* What the client said about the job when it started it (issue 15): its
 * name, whether its command is an argv, and the code it came from. */
static void job_load_spec(const char *dir, struct job_rec *r)
{
	struct job_spec sp = { STRVEC_INIT };
	struct strvec argv = STRVEC_INIT;

	if (job_spec_read(dir, &sp, NULL) == 0) {
		r->name = xstrdup(job_spec_get(&sp, "name", ""));
		job_spec_list(&sp, "argv", &argv);
		r->command_is_argv = argv.n > 0;
		r->git_commit = xstrdup(job_spec_get(&sp, "git_commit", ""));
		r->git_branch = xstrdup(job_spec_get(&sp, "git_branch", ""));
		r->git_dirty = !strcmp(job_spec_get(&sp, "git_dirty", ""), "1");
		r->git_diff = xstrdup(job_spec_get(&sp, "git_diff", ""));
		r->after = xstrdup(job_spec_get(&sp, "after", ""));
		r->group = xstrdup(job_spec_get(&sp, "group", ""));
		r->time_limit = strtoull(job_spec_get(&sp, "time_limit", "0"), NULL, 10);
		r->retries = (uint32_t)strtoul(job_spec_get(&sp, "retries", "0"), NULL, 10);
		r->rerun_of = xstrdup(job_spec_get(&sp, "rerun_of", ""));
	}
	sv_clear(&argv);
	job_spec_free(&sp);
}

/* The job's name, from its spec ("" if none). */
static char *job_name_of(const char *dir)
{
	struct job_spec sp = { STRVEC_INIT };
	char *name;

	job_spec_read(dir, &sp, NULL);
	name = xstrdup(job_spec_get(&sp, "name", ""));
	job_spec_free(&sp);
	return name;
}

const char *job_status_state(const struct strvec *st, struct job_rec *r)
{
	const char *end = job_kv_get(st, "end"), *why = job_kv_get(st, "reason");

	if (end && (!strcmp(end, "timeout") || !strcmp(end, "cancelled"))) {
		if (why && *why) {
			free(r->reason);
			r->reason = xstrdup(why);
		}
		return end;
	}
	return !r->signalled && r->code == 0 ? "done" : "failed";
}

int job_load(const char *dir, struct job_rec *r, unsigned flags, struct gr_err *err)
{
	struct strvec job = STRVEC_INIT;
	struct strbuf cmd = STRBUF_INIT;
	const char *base = strrchr(dir, '/');
	const struct job_backend *be;
	char *p;
	struct stat sst;
	int rc;

	*r = (struct job_rec){ 0 };
	base = base ? base + 1 : dir;
	p = job_meta(dir, "job");
	rc = job_kv_read(p, &job, err);
	free(p);
	if (rc < 0 || !job_id_valid(base)) {
		rc = gr_errf(err, GR_ENOTFOUND, "no job '%s' on the host", base);
		goto out;
	}
	p = job_meta(dir, "command");
	read_file(p, &cmd, NULL);
	free(p);
	r->id = xstrdup(base);
	r->dir = xstrdup(dir);
	r->workdir = xstrdup(dir);
	r->command = xstrdup(cmd.buf ? cmd.buf : "");
	r->created_ms = job_kv_u64(&job, "created_ms");
	r->now_ms = (uint64_t)time(NULL) * 1000;
	job_load_spec(dir, r);
	be = job_backend_find(job_kv_get(&job, "backend") ? job_kv_get(&job, "backend")
							  : JOB_BACKEND_DEFAULT);
	r->backend = xstrdup(be ? be->name : "unknown");
	/* A job in a container (job_container.h): its image and runtime. */
	struct strvec ctr = STRVEC_INIT;
	p = job_meta(dir, "container");
	if (job_kv_read(p, &ctr, NULL) == 0) {
		r->image = xstrdup(job_kv_get(&ctr, "image") ? job_kv_get(&ctr, "image") : "");
		r->runtime = xstrdup(job_kv_get(&ctr, "runtime") ? job_kv_get(&ctr, "runtime") : "");
	}
	free(p);
	sv_clear(&ctr);
	if (be) {
		be->state(dir, r);
	} else {
		free(r->state);
		r->state = xstrdup("lost");
	}
	/* The log is read after the state: a job seen ended has all of it. */
	p = job_meta(dir, "log");
	if (stat(p, &sst) == 0)
		r->log_size = (uint64_t)sst.st_size;
	free(p);
	if (flags & JOB_LOAD_DU)
		r->disk_bytes = job_du(dir, job_rec_ended(r));
	rc = 0;
out:
	sv_clear(&job);
	sb_release(&cmd);
	return rc;
}

struct by_time {
	char *id;
	uint64_t created_ms;
};

static int cmp_newest(const void *a, const void *b)
{
	const struct by_time *x = a, *y = b;

	if (x->created_ms != y->created_ms)
		return x->created_ms < y->created_ms ? 1 : -1;
	return strcmp(y->id, x->id);
}

void job_list_ids(const char *root, struct strvec *ids)
{
	DIR *d = opendir(root);
	struct dirent *e;
	struct by_time *v = NULL;
	size_t n = 0;

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (!job_id_valid(e->d_name))
			continue;
		/* The creation time in ms orders jobs made in the same second
		 * (the id's own time has seconds, then a random suffix). */
		char *dir = xasprintf("%s/%s", root, e->d_name), *p = job_meta(dir, "job");
		struct strvec kv = STRVEC_INIT;
		if (job_kv_read(p, &kv, NULL) == 0) {
			v = xrealloc(v, (n + 1) * sizeof(*v));
			v[n].id = xstrdup(e->d_name);
			v[n++].created_ms = job_kv_u64(&kv, "created_ms");
		}
		sv_clear(&kv);
		free(p);
		free(dir);
	}
	closedir(d);
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_newest);
	for (size_t i = 0; i < n; i++) {
		sv_push(ids, v[i].id);
		free(v[i].id);
	}
	free(v);
}

int job_resolve(const char *root, const char *want, char **id, struct gr_err *err)
{
	struct strvec ids = STRVEC_INIT;
	const char *found = NULL;
	size_t n = strlen(want), matches = 0;
	int rc = 0;

	job_list_ids(root, &ids);
	if (!*want) {
		if (!ids.n) {
			rc = gr_errf(err, GR_ENOTFOUND, "no jobs on the host for this project yet");
			gr_hintf(err, "start one with 'gpurun train'");
			goto out;
		}
		found = ids.v[0];
	} else if (job_name_ok(want)) {
		/* A name (never the shape of an id): its newest job, which is
		 * the live one if one is (names are unique among live jobs). */
		for (size_t i = 0; i < ids.n && !found; i++) {
			char *d = xasprintf("%s/%s", root, ids.v[i]), *name = job_name_of(d);
			if (!strcmp(name, want)) {
				found = ids.v[i];
				matches = 1;
			}
			free(name);
			free(d);
		}
		if (!found) {
			rc = gr_errf(err, GR_ENOTFOUND, "no job named '%s' on the host", want);
			gr_hintf(err, "'gpurun status' lists the jobs");
			goto out;
		}
	} else {
		for (size_t i = 0; i < ids.n; i++) {
			if (!strcmp(ids.v[i], want)) {
				found = ids.v[i];
				matches = 1;
				break;
			}
			if (!strncmp(ids.v[i], want, n)) {
				found = ids.v[i];
				matches++;
			}
		}
		if (!matches) {
			rc = gr_errf(err, GR_ENOTFOUND, "no job '%s' on the host", want);
			gr_hintf(err, "'gpurun status' lists the jobs");
			goto out;
		}
		if (matches > 1) {
			rc = gr_errf(err, GR_EINVAL, "job '%s' is ambiguous (%zu jobs start so)", want, matches);
			goto out;
		}
	}
	*id = xstrdup(found);
out:
	sv_clear(&ids);
	return rc;
}
