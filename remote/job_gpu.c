/* GPUs: nvidia-smi queries, per-GPU flock()s, and the choice of GPUs for
 * a job (see job_gpu.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_gpu.h"

int gpu_run_capture(const char *const *argv, int timeout_ms, struct strbuf *out)
{
	int p[2], status;
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		dup2(nul, 0);
		dup2(p[1], 1);
		dup2(nul, 2);
		signal(SIGPIPE, SIG_DFL);
		execvp(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		char buf[8192];
		uint64_t now = now_ms();
		struct pollfd pfd = { p[0], POLLIN, 0 };
		if (now >= deadline) {
			kill(pid, SIGKILL);
			break;
		}
		int r = poll(&pfd, 1, (int)(deadline - now));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		ssize_t n = read(p[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (out->len < (4u << 20))
			sb_add(out, buf, (size_t)n);
	}
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

static char *smi_path(void)
{
	const char *env = getenv("GPURUN_NVIDIA_SMI"), *path = getenv("PATH");
	struct strbuf dirs = STRBUF_INIT;
	char *found = NULL, *save = NULL;

	if (env && *env)
		return access(env, X_OK) == 0 ? xstrdup(env) : NULL;
	sb_addf(&dirs, "%s:/usr/bin:/usr/local/nvidia/bin:/usr/local/cuda/bin", path ? path : "");
	for (char *d = strtok_r(dirs.buf, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char *c = xasprintf("%s/nvidia-smi", d);
		if (access(c, X_OK) == 0)
			found = c;
		else
			free(c);
	}
	sb_release(&dirs);
	return found;
}

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

static uint64_t num(const char *s)
{
	long long v;
	return parse_ll(s, 0, LLONG_MAX, &v) == 0 ? (uint64_t)v : 0; /* "[N/A]" -> 0 */
}

/* Split a csv line into at most max fields (the last keeps its commas). */
static size_t split(char *line, char **f, size_t max)
{
	size_t n = 0;

	while (n + 1 < max) {
		char *c = strchr(line, ',');
		if (!c)
			break;
		*c = '\0';
		f[n++] = trim(line);
		line = c + 1;
	}
	f[n++] = trim(line);
	return n;
}

void gpu_parse_gpus(const char *csv, struct gpu_report *r)
{
	char *copy = xstrdup(csv), *save = NULL;

	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *f[6];
		long long idx;
		if (split(l, f, 6) != 6 || parse_ll(f[0], 0, 1023, &idx) < 0)
			continue;
		r->gpus = xrealloc(r->gpus, (r->ngpus + 1) * sizeof(*r->gpus));
		r->gpus[r->ngpus++] = (struct gpu_info){
			(uint32_t)idx, xstrdup(f[1]), xstrdup(f[2]), (uint32_t)num(f[3]),
			num(f[4]), num(f[5]), NULL };
	}
	free(copy);
}

void gpu_parse_apps(const char *csv, struct gpu_report *r)
{
	char *copy = xstrdup(csv), *save = NULL;

	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *f[4];
		long long pid;
		if (split(l, f, 4) != 4 || parse_ll(f[0], 1, INT_MAX, &pid) < 0)
			continue;
		r->apps = xrealloc(r->apps, (r->napps + 1) * sizeof(*r->apps));
		r->apps[r->napps++] = (struct gpu_app){
			(uint32_t)pid, xstrdup(f[1]), num(f[2]), xstrdup(f[3]),
			gpu_pid_job((uint32_t)pid) };
	}
	free(copy);
}

static char *lock_path(uint32_t index)
{
	char *dir = expand_home("~/.cache/gpurun");
	char *p = xasprintf("%s/gpu-%u.lock", dir, index);

	mkdir_p(dir, 0700, NULL);
	free(dir);
	return p;
}

/* The job holding index's lock, or NULL when it is free. */
static char *lock_holder(uint32_t index)
{
	char *p = lock_path(index), buf[64];
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	char *who = NULL;

	free(p);
	if (fd < 0)
		return NULL;
	if (flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
		ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		who = xstrdup(buf[0] ? buf : "?");
	}
	close(fd);
	return who;
}

static int lock_try(uint32_t index, const char *job_id)
{
	char *p = lock_path(index);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);

	free(p);
	if (fd < 0)
		return -1;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return -1;
	}
	if (ftruncate(fd, 0) == 0 && pwrite(fd, job_id, strlen(job_id), 0) < 0) {
		/* the id is only informative */
	}
	return fd;
}

void gpu_report_load(struct gpu_report *r, int with_apps)
{
	char *smi = smi_path();
	struct strbuf out = STRBUF_INIT;
	int rc;

	*r = (struct gpu_report){ 0 };
	if (!smi)
		return;
	const char *qg[] = { smi, "--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total",
			     "--format=csv,noheader,nounits", NULL };
	rc = gpu_run_capture(qg, 20000, &out);
	if (rc != 0) {
		r->error = xasprintf("'%s' failed (exit %d): %s", smi, rc,
				     out.len ? trim(out.buf) : "no output");
		goto out;
	}
	r->have_smi = 1;
	gpu_parse_gpus(out.buf ? out.buf : "", r);
	for (size_t i = 0; i < r->ngpus; i++)
		r->gpus[i].locked_by = lock_holder(r->gpus[i].index);
	if (with_apps) {
		const char *qa[] = { smi, "--query-compute-apps=pid,gpu_uuid,used_memory,process_name",
				     "--format=csv,noheader,nounits", NULL };
		sb_reset(&out);
		if (gpu_run_capture(qa, 20000, &out) == 0)
			gpu_parse_apps(out.buf ? out.buf : "", r);
	}
out:
	sb_release(&out);
	free(smi);
}

void gpu_report_free(struct gpu_report *r)
{
	for (size_t i = 0; i < r->ngpus; i++) {
		free(r->gpus[i].uuid);
		free(r->gpus[i].name);
		free(r->gpus[i].locked_by);
	}
	for (size_t i = 0; i < r->napps; i++) {
		free(r->apps[i].gpu_uuid);
		free(r->apps[i].name);
		free(r->apps[i].job);
	}
	free(r->gpus);
	free(r->apps);
	free(r->error);
	*r = (struct gpu_report){ 0 };
}

static void release(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_load(const void *a, const void *b)
{
	const struct gpu_info *x = a, *y = b;
	if (x->mem_used != y->mem_used)
		return x->mem_used < y->mem_used ? -1 : 1;
	if (x->util != y->util)
		return x->util < y->util ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

int gpu_acquire(const char *spec, const char *job_id, char **assigned,
		int *restrict_, int **fds, size_t *nfds, char **why,
		struct gr_err *err)
{
	uint32_t idx[64];
	size_t n = 0, want = 0;
	int explicit = strchr(spec, ',') != NULL, rc = 0;
	struct gpu_report r = { 0 };
	struct strbuf sb = STRBUF_INIT;
	long long v;

	*assigned = NULL;
	*restrict_ = 0;
	*fds = NULL;
	*nfds = 0;
	*why = NULL;
	if (!*spec || !strcmp(spec, "all")) {
		*assigned = xstrdup("");
		return 0;
	}
	if (explicit) {
		char *copy = xstrdup(spec), *save = NULL;
		for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
			if (parse_ll(t, 0, 1023, &v) < 0 || n == GR_ARRAY_SIZE(idx)) {
				free(copy);
				return gr_errf(err, GR_EINVAL, "bad [train] gpus '%s': want all, a count, or indexes like 0,2", spec);
			}
			idx[n++] = (uint32_t)v;
		}
		free(copy);
		want = n;
	} else if (parse_ll(spec, 0, 64, &v) == 0) {
		want = (size_t)v;
	} else {
		return gr_errf(err, GR_EINVAL, "bad [train] gpus '%s': want all, a count, or indexes like 0,2", spec);
	}
	if (!explicit && want == 0) {
		*assigned = xstrdup("");
		*restrict_ = 1;
		return 0;
	}
	if (!explicit) {
		gpu_report_load(&r, 0);
		if (!r.have_smi) {
			*why = xasprintf("no GPUs assigned: %s", r.error ? r.error : "nvidia-smi is not on this host");
			*assigned = xstrdup("");
			goto out;
		}
		if (want > r.ngpus) {
			rc = gr_errf(err, GR_EINVAL, "[train] gpus asks for %zu GPUs; the host has %zu", want, r.ngpus);
			goto out;
		}
		qsort(r.gpus, r.ngpus, sizeof(*r.gpus), cmp_load);
		for (size_t i = 0; i < r.ngpus; i++)
			idx[n++] = r.gpus[i].index;
	}
	*fds = xcalloc(want, sizeof(int));
	uint32_t got[64];
	for (size_t i = 0; i < n && *nfds < want; i++) {
		int fd = lock_try(idx[i], job_id);
		if (fd < 0) {
			if (explicit) {
				char *who = lock_holder(idx[i]);
				*why = xasprintf("waiting for GPU %u (held by job %s)", idx[i], who ? who : "?");
				free(who);
				break;
			}
			continue;
		}
		got[*nfds] = idx[i];
		(*fds)[(*nfds)++] = fd;
	}
	if (*nfds < want) {
		if (!*why)
			*why = xasprintf("waiting for %zu free GPU%s (%zu of %zu in use by other gpurun jobs)",
					 want, want == 1 ? "" : "s", n - *nfds, n);
		release(*fds, *nfds);
		free(*fds);
		*fds = NULL;
		*nfds = 0;
		rc = 1;
		goto out;
	}
	qsort(got, *nfds, sizeof(got[0]), cmp_u32);
	for (size_t i = 0; i < *nfds; i++)
		sb_addf(&sb, "%s%u", i ? "," : "", got[i]);
	*assigned = sb_detach(&sb, NULL);
	*restrict_ = 1;
out:
	sb_release(&sb);
	gpu_report_free(&r);
	return rc;
}

char *gpu_pid_job(uint32_t pid)
{
	char path[64];
	struct strbuf sb = STRBUF_INIT;
	char *found = NULL;

	snprintf(path, sizeof(path), "/proc/%u/environ", pid);
	if (read_file(path, &sb, NULL) == 0) {
		for (size_t off = 0; off < sb.len;) {
			const char *e = sb.buf + off;
			if (!strncmp(e, "GPURUN_JOB_ID=", 14)) {
				found = xstrdup(e + 14);
				break;
			}
			off += strlen(e) + 1;
		}
	}
	sb_release(&sb);
	return found;
}
