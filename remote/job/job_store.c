/* Job folders on the host (see job_store.h): ids, the meta files and the
 * spec, a new job's folder, and the record built from them (the live part
 * comes from the job's backend). */
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

#include "job_backend.h"
#include "job_house.h"
#include "job_store.h"

char *job_new_id(uint64_t now_ms)
{
	unsigned char rnd[2] = { 0, 0 };
	struct tm tm;
	time_t t = (time_t)(now_ms / 1000);
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

int job_meta_exists(const char *dir, const char *name)
{
	char *p = job_meta(dir, name);
	int r = access(p, F_OK) == 0;

	free(p);
	return r;
}

int job_meta_write(const char *dir, const char *name, const char *text, struct gr_err *err)
{
	char *p = job_meta(dir, name);
	int rc = write_file_atomic(p, text, strlen(text), 0644, err);

	free(p);
	return rc;
}

/* ---- the spec ---- */

enum { SPEC_ONE, SPEC_LIST };
static const struct {
	const char *name;
	int kind;
} spec_keys[] = {
#define SPEC_KEY(name, kind) { #name, SPEC_##kind },
	JOB_SPEC_KEYS(SPEC_KEY)
#undef SPEC_KEY
};

int job_spec_check(const struct job_spec *s, struct gr_err *err)
{
	if (s->kv.n % 2)
		return gr_errf(err, GR_EINVAL, "the job's spec is malformed");
	for (size_t i = 0; i < s->kv.n; i += 2) {
		size_t k;
		for (k = 0; k < GR_ARRAY_SIZE(spec_keys); k++)
			if (!strcmp(spec_keys[k].name, s->kv.v[i]))
				break;
		if (k == GR_ARRAY_SIZE(spec_keys))
			return gr_errf(err, GR_EINVAL, "unknown key '%s' in the job's spec", s->kv.v[i]);
		if (spec_keys[k].kind == SPEC_LIST)
			continue;
		for (size_t j = 0; j < i; j += 2)
			if (!strcmp(s->kv.v[j], s->kv.v[i]))
				return gr_errf(err, GR_EINVAL, "'%s' given twice in the job's spec",
					       s->kv.v[i]);
	}
	return 0;
}

const char *job_spec_get(const struct job_spec *s, const char *key, const char *def)
{
	for (size_t i = 0; i + 1 < s->kv.n; i += 2)
		if (!strcmp(s->kv.v[i], key))
			return s->kv.v[i + 1];
	return def;
}

void job_spec_list(const struct job_spec *s, const char *key, struct strvec *out)
{
	for (size_t i = 0; i + 1 < s->kv.n; i += 2)
		if (!strcmp(s->kv.v[i], key))
			sv_push(out, s->kv.v[i + 1]);
}

int job_spec_write(const char *dir, const struct job_spec *s, struct gr_err *err)
{
	struct strbuf b = STRBUF_INIT;
	char *p = job_meta(dir, "spec");
	int rc;

	for (size_t i = 0; i < s->kv.n; i++)
		sb_add(&b, s->kv.v[i], strlen(s->kv.v[i]) + 1);
	rc = write_file_atomic(p, b.buf ? b.buf : "", b.len, 0600, err);
	sb_release(&b);
	free(p);
	return rc;
}

int job_spec_read(const char *dir, struct job_spec *s, struct gr_err *err)
{
	struct strbuf b = STRBUF_INIT;
	char *p = job_meta(dir, "spec");
	int rc = read_file(p, &b, err);

	free(p);
	for (size_t off = 0; rc == 0 && off < b.len;) {
		size_t n = strnlen(b.buf + off, b.len - off);
		if (off + n == b.len)
			break; /* no NUL: cut short */
		sv_push(&s->kv, b.buf + off);
		off += n + 1;
	}
	if (rc == 0 && s->kv.n % 2)
		sv_push(&s->kv, "");
	sb_release(&b);
	return rc;
}

void job_spec_free(struct job_spec *s)
{
	sv_clear(&s->kv);
}

/* ---- a new job ---- */

int job_create(const char *root, const char *project, const struct job_spec *spec,
	       uint64_t created_ms, char **id_out, char **dir_out, struct gr_err *err)
{
	char *id = NULL, *dir = NULL, *p = NULL, *kv = NULL;
	int rc;

	if ((rc = mkdir_p(root, 0700, err)) < 0)
		return rc;
	for (int tries = 0;; tries++) {
		id = job_new_id(created_ms);
		dir = xasprintf("%s/%s", root, id);
		if (mkdir(dir, 0700) == 0)
			break;
		if (errno != EEXIST || tries > 20) {
			rc = gr_errf(err, GR_EIO, "cannot create '%s': %s", dir, strerror(errno));
			goto fail;
		}
		free(id);
		free(dir);
	}
	p = job_meta(dir, "");
	if (mkdir(p, 0700) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot create '%s': %s", p, strerror(errno));
		goto fail;
	}
	kv = xasprintf("id=%s\nproject=%s\ncreated_ms=%llu\nbackend=%s\n", id, project,
		       (unsigned long long)created_ms,
		       job_spec_get(spec, "backend", JOB_BACKEND_DEFAULT));
	if ((rc = job_spec_write(dir, spec, err)) < 0 ||
	    (rc = job_meta_write(dir, "command", job_spec_get(spec, "command", ""), err)) < 0 ||
	    (rc = job_meta_write(dir, "log", "", err)) < 0 ||
	    /* Written last: a folder without it is not a job (job_load). */
	    (rc = job_meta_write(dir, "job", kv, err)) < 0)
		goto fail;
	free(p);
	free(kv);
	*id_out = id;
	*dir_out = dir;
	return 0;
fail:
	if (dir)
		job_rm_tree(dir);
	free(id);
	free(dir);
	free(p);
	free(kv);
	return rc;
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
