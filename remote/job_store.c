/* Job folders on the host (see job_store.h): paths, ids, the key=value
 * meta files, and each job's state derived from them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "job_store.h"

char *job_root(const char *project)
{
	char *full = agent_path(project), *base;
	char real[PATH_MAX];
	const char *use = realpath(full, real) ? real : full;
	uint32_t h = 2166136261u; /* FNV-1a: a stable key per project path */
	struct strbuf key = STRBUF_INIT;
	char *out;

	for (const char *p = use; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	base = strrchr(use, '/');
	base = base && base[1] ? base + 1 : (char *)"root";
	for (const char *p = base; *p && key.len < 40; p++) {
		char c = *p;
		int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			 (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
		sb_add(&key, ok ? &c : "_", 1);
	}
	if (key.buf[0] == '.')
		key.buf[0] = '_';
	out = xasprintf("%s/.cache/gpurun/jobs/%s-%08x", agent_home(), key.buf, h);
	sb_release(&key);
	free(full);
	return out;
}

char *job_new_id(void)
{
	unsigned char rnd[2] = { 0, 0 };
	struct tm tm;
	time_t t = time(NULL);
	char stamp[32];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

	if (fd < 0 || read_full(fd, rnd, 2) != 2) {
		uint64_t n = now_ns() ^ (uint64_t)getpid();
		rnd[0] = (unsigned char)n;
		rnd[1] = (unsigned char)(n >> 8);
	}
	if (fd >= 0)
		close(fd);
	localtime_r(&t, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", &tm);
	return xasprintf("%s-%02x%02x", stamp, rnd[0], rnd[1]);
}

int job_id_valid(const char *id)
{
	return job_id_ok(id);
}

char *job_meta(const char *dir, const char *name)
{
	return xasprintf("%s/.gpurun/%s", dir, name);
}

int job_kv_read(const char *path, struct strvec *kv, struct gr_err *err)
{
	struct strbuf sb = STRBUF_INIT;
	int rc = read_file(path, &sb, err);

	if (rc == 0) {
		char *save = NULL;
		for (char *l = strtok_r(sb.buf ? sb.buf : (char *)"", "\n", &save); l;
		     l = strtok_r(NULL, "\n", &save))
			if (strchr(l, '='))
				sv_push(kv, l);
	}
	sb_release(&sb);
	return rc;
}

const char *job_kv_get(const struct strvec *kv, const char *key)
{
	size_t n = strlen(key);

	for (size_t i = 0; i < kv->n; i++)
		if (!strncmp(kv->v[i], key, n) && kv->v[i][n] == '=')
			return kv->v[i] + n + 1;
	return NULL;
}

uint64_t job_kv_u64(const struct strvec *kv, const char *key)
{
	const char *v = job_kv_get(kv, key);
	long long n;

	if (!v || parse_ll(v, 0, LLONG_MAX, &n) < 0)
		return 0;
	return (uint64_t)n;
}

int job_supervisor_alive(const char *dir)
{
	char *p = job_meta(dir, "lock");
	int fd = open(p, O_RDONLY | O_CLOEXEC), alive = 0;

	free(p);
	if (fd < 0)
		return 0;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK)
		alive = 1;
	close(fd);
	return alive;
}

static int exists(const char *dir, const char *name)
{
	char *p = job_meta(dir, name);
	int r = access(p, F_OK) == 0;

	free(p);
	return r;
}

int job_load(const char *dir, struct job_rec *r, struct gr_err *err)
{
	struct strvec job = STRVEC_INIT, run = STRVEC_INIT, st = STRVEC_INIT;
	struct strbuf cmd = STRBUF_INIT;
	const char *base = strrchr(dir, '/');
	char *p;
	struct stat sst;
	int rc, alive;

	*r = (struct job_rec){ 0 };
	base = base ? base + 1 : dir;
	p = job_meta(dir, "job");
	rc = job_kv_read(p, &job, err);
	free(p);
	if (rc < 0 || !job_id_valid(base)) {
		rc = gr_errf(err, GR_ENOTFOUND, "no job '%s' on the host", base);
		goto out;
	}
	/* Order matters: liveness first, then the files, so a job that ends
	 * between the two reads shows its status rather than "lost". */
	alive = job_supervisor_alive(dir);
	p = job_meta(dir, "run");
	job_kv_read(p, &run, NULL);
	free(p);
	p = job_meta(dir, "status");
	int has_status = job_kv_read(p, &st, NULL) == 0;
	free(p);
	p = job_meta(dir, "command");
	read_file(p, &cmd, NULL);
	free(p);

	r->id = xstrdup(base);
	r->dir = xstrdup(dir);
	r->command = xstrdup(cmd.buf ? cmd.buf : "");
	r->created_ms = job_kv_u64(&job, "created_ms");
	r->start_ms = job_kv_u64(&run, "start_ms");
	r->pid = (uint32_t)job_kv_u64(&run, "pid");
	r->gpus = xstrdup(job_kv_get(&run, "gpus") ? job_kv_get(&run, "gpus") : "");
	r->now_ms = (uint64_t)time(NULL) * 1000;
	p = job_meta(dir, "log");
	if (stat(p, &sst) == 0)
		r->log_size = (uint64_t)sst.st_size;
	free(p);
	if (has_status) {
		uint64_t sig = job_kv_u64(&st, "signal");
		r->has_status = 1;
		r->signalled = sig != 0;
		r->code = (uint32_t)(sig ? sig : job_kv_u64(&st, "exit"));
		r->end_ms = job_kv_u64(&st, "end_ms");
		if (exists(dir, "stopped"))
			r->state = xstrdup("stopped");
		else
			r->state = xstrdup(!r->signalled && r->code == 0 ? "done" : "failed");
	} else if (alive) {
		r->state = xstrdup(run.n ? "running" : exists(dir, "queued") ? "queued" : "starting");
	} else {
		r->state = xstrdup("lost");
	}
	rc = 0;
out:
	sv_clear(&job);
	sv_clear(&run);
	sv_clear(&st);
	sb_release(&cmd);
	return rc;
}

static int cmp_desc(const void *a, const void *b)
{
	return strcmp(*(char *const *)b, *(char *const *)a);
}

void job_list_ids(const char *root, struct strvec *ids)
{
	DIR *d = opendir(root);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (job_id_valid(e->d_name))
			sv_push(ids, e->d_name);
	closedir(d);
	/* Ids start with the creation time, so their order is the jobs' order
	 * (within a second, the random suffix decides). */
	if (ids->n)
		qsort(ids->v, ids->n, sizeof(*ids->v), cmp_desc);
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

uint64_t job_tail_offset(const char *path, uint32_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st = { 0 };
	char buf[65536];
	uint64_t pos, lines = 0;

	if (fd < 0)
		return 0;
	if (fstat(fd, &st) < 0 || st.st_size == 0 || n == 0) {
		uint64_t end = n == 0 && st.st_size > 0 ? (uint64_t)st.st_size : 0;
		close(fd);
		return end;
	}
	pos = (uint64_t)st.st_size;
	/* A last line without its newline still counts as a line. */
	int skip_last_nl = 1;
	while (pos > 0) {
		size_t chunk = pos > sizeof(buf) ? sizeof(buf) : (size_t)pos;
		ssize_t r = pread(fd, buf, chunk, (off_t)(pos - chunk));
		if (r != (ssize_t)chunk)
			break;
		for (size_t i = chunk; i-- > 0;) {
			if (buf[i] != '\n')
				continue;
			if (skip_last_nl && pos - chunk + i + 1 == (uint64_t)st.st_size) {
				skip_last_nl = 0;
				continue;
			}
			if (++lines == n) {
				close(fd);
				return pos - chunk + i + 1;
			}
		}
		skip_last_nl = 0;
		pos -= chunk;
	}
	close(fd);
	return 0;
}
