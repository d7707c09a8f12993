/* Job folders on the host (see job_store.h): ids, the meta files and the
 * spec, a new job's folder and its removal. The record built from them is
 * job_record.c's. */
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

char *job_meta_text(const char *dir, const char *name)
{
	char *p = job_meta(dir, name);
	struct strbuf sb = STRBUF_INIT;

	read_file(p, &sb, NULL);
	free(p);
	while (sb.len && sb.buf[sb.len - 1] == '\n')
		sb.buf[--sb.len] = '\0';
	return sb.buf ? sb_detach(&sb, NULL) : xstrdup("");
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

/* 0600, in the job's 0700 folder: the spec holds the job's environment
 * values, secrets (API tokens; the client's train_spec.h). They are read
 * back only to start the job's processes; none of them goes into the
 * meta files the record is built from (job, command, state, ... 0644),
 * so neither status nor another account sees them. */
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

/* ---- removal ---- */

int job_rm_tree(const char *path)
{
	char *copy = xstrdup(path), *slash = strrchr(copy, '/');
	int pfd, rc;

	if (!slash || !slash[1]) {
		free(copy);
		errno = EINVAL;
		return -1;
	}
	*slash = '\0';
	pfd = open(*copy ? copy : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0) {
		free(copy);
		return -1;
	}
	rc = rm_tree_at(pfd, slash + 1);
	close(pfd);
	free(copy);
	return rc;
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
