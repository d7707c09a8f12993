/* GPUs: nvidia-smi queries, per-GPU flock()s, and the choice of GPUs for
 * a job (see job_gpu.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_gpu.h"
#include "job_proto.h"
#include "agent.h"

int gpu_run_capture(const char *const *argv, int timeout_ms, struct strbuf *out)
{
	int rc = run_capture(argv, NULL, timeout_ms, 4u << 20, out, NULL);

	return rc == RUN_TIMEOUT ? 128 + SIGKILL : rc; /* as the kill ended it */
}

char *gpu_smi_path(void)
{
	const char *env = getenv("GPURUN_NVIDIA_SMI");

	if (env && *env)
		return access(env, X_OK) == 0 ? xstrdup(env) : NULL;
	return run_which("nvidia-smi");
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
			num(f[4]), num(f[5]), NULL, 0 };
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

/* The locks, shared by every account on the host. Each user has a
 * folder of their own, <base>/gpurun-locks-<uid> (0755), holding
 * gpu-<index>.lock files (0644) that their jobs flock and write their id
 * in; base is GPURUN_LOCK_DIR or /tmp, and must be root's (or this
 * user's) and either closed to others or sticky, as /tmp is. So anyone
 * can see every lock, and nobody but its owner (and root) can remove,
 * rename or replace one: the sticky bit keeps others from renaming the
 * folder, its mode from touching the files. A GPU is taken by locking
 * one's own file, then checking that no other user's file for it is
 * locked (else letting go and trying later): two users taking one GPU
 * at once both see the other and back off, never both win. */
char *gpu_lock_base(void)
{
	const char *e = getenv("GPURUN_LOCK_DIR");

	return xstrdup(e && *e ? e : "/tmp");
}

static int base_ok(int fd, const char *base, struct gr_err *err)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return gr_errf(err, GR_EIO, "cannot check '%s': %s", base, strerror(errno));
	if (st.st_uid != 0 && st.st_uid != geteuid())
		return gr_errf(err, GR_EINVAL, "GPU lock folder '%s' belongs to uid %lu: its owner "
			       "could remove other users' locks; use root's /tmp or set GPURUN_LOCK_DIR "
			       "to a folder root made (mode 1777)", base, (unsigned long)st.st_uid);
	if ((st.st_mode & 022) && !(st.st_mode & S_ISVTX))
		return gr_errf(err, GR_EINVAL, "GPU lock folder '%s' is writable by others without "
			       "the sticky bit (mode %04o): anyone could replace the locks in it; "
			       "fix: chmod +t '%s'", base, (unsigned)(st.st_mode & 07777), base);
	return 0;
}

int gpu_lock_own_dir(struct gr_err *err)
{
	char *base = gpu_lock_base(), name[64];
	int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC), fd = -1;
	struct stat st;

	snprintf(name, sizeof(name), "gpurun-locks-%lu", (unsigned long)geteuid());
	if (bfd < 0) {
		gr_errf(err, GR_EIO, "cannot open GPU lock folder '%s': %s", base, strerror(errno));
		goto out;
	}
	if (base_ok(bfd, base, err) < 0)
		goto out;
	if (mkdirat(bfd, name, 0755) < 0 && errno != EEXIST) {
		gr_errf(err, GR_EIO, "cannot create '%s/%s': %s", base, name, strerror(errno));
		goto out;
	}
	fd = openat(bfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid()) {
		/* Someone made it first, or it is a link: their folder is not
		 * ours to lock in, and a lock there would protect nothing. */
		gr_errf(err, GR_EINVAL, "GPU lock folder '%s/%s' is not yours%s; ask root to remove it",
			base, name, fd < 0 ? " (or not a folder)" : "");
		if (fd >= 0)
			close(fd);
		fd = -1;
		goto out;
	}
	if ((st.st_mode & 07777) != 0755 && fchmod(fd, 0755) < 0) {
		gr_errf(err, GR_EIO, "cannot chmod '%s/%s': %s", base, name, strerror(errno));
		close(fd);
		fd = -1;
	}
out:
	if (bfd >= 0)
		close(bfd);
	free(base);
	return fd;
}

long long gpu_lock_dir_uid(const char *name)
{
	long long uid;

	if (strncmp(name, "gpurun-locks-", 13) || parse_ll(name + 13, 0, UINT32_MAX, &uid) < 0)
		return -1;
	return uid;
}

int gpu_lock_file_held(int dfd, const char *name, uid_t uid, char *buf, size_t len)
{
	struct stat st, st2;
	int fd, held = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) || st.st_uid != uid)
		return 0;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return 0;
	if (fstat(fd, &st2) == 0 && st2.st_ino == st.st_ino && st2.st_dev == st.st_dev &&
	    flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK) {
		held = 1;
		if (buf && len) {
			ssize_t n = pread(fd, buf, len - 1, 0);
			buf[n > 0 ? n : 0] = '\0';
			buf[strcspn(buf, "\n")] = '\0';
		}
	}
	close(fd);
	return held;
}

/* Who holds lock file name in dfd (owned by uid): "ID" (this user) or
 * "USER:ID" (another), or NULL when nobody. */
static char *probe(int dfd, uid_t uid, const char *name)
{
	char buf[64], user[64];

	if (!gpu_lock_file_held(dfd, name, uid, buf, sizeof(buf)))
		return NULL;
	const char *id = job_id_ok(buf) ? buf : "?";
	if (uid == geteuid())
		return xstrdup(id);
	uid_name(uid, user, sizeof(user));
	return xasprintf("%s:%s", user, id);
}

void gpu_lock_each_folder(int (*fn)(const char *path, int fd, uid_t uid, void *arg), void *arg)
{
	char *base = gpu_lock_base();
	DIR *d = opendir(base);
	struct dirent *e;
	int stop = 0;

	while (d && !stop && (e = readdir(d))) {
		long long uid = gpu_lock_dir_uid(e->d_name);
		struct stat st;
		if (uid < 0)
			continue;
		int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			continue;
		/* A folder that is not in the hands of the uid it is named
		 * after is nobody's lock: ignored. */
		if (fstat(fd, &st) == 0 && st.st_uid == (uid_t)uid && !(st.st_mode & 022)) {
			char *path = xasprintf("%s/%s", base, e->d_name);
			stop = fn(path, fd, (uid_t)uid, arg);
			free(path);
		}
		close(fd);
	}
	if (d)
		closedir(d);
	free(base);
}

struct holder_arg {
	const char *name;
	int others_only;
	char *who;
};

static int holder_in(const char *path, int fd, uid_t uid, void *arg)
{
	struct holder_arg *h = arg;

	(void)path;
	if (h->others_only && uid == geteuid())
		return 0;
	h->who = probe(fd, uid, h->name);
	return h->who != NULL;
}

/* Who holds GPU index, among every user's locks (others_only: every
 * other user's). NULL when nobody. */
static char *holder(uint32_t index, int others_only)
{
	char name[64];
	struct holder_arg h = { name, others_only, NULL };

	snprintf(name, sizeof(name), "gpu-%u.lock", index);
	gpu_lock_each_folder(holder_in, &h);
	return h.who;
}

char *gpu_lock_holder(uint32_t index)
{
	return holder(index, 0);
}

/* Take GPU index for job_id. 0 with *out an fd holding the lock, 1 when
 * someone (this user or another) has it, or a GR_E* code with err set
 * when no lock can be taken at all. */
static int lock_try(uint32_t index, const char *job_id, int *out, struct gr_err *err)
{
	char name[64], *who;
	int dfd = gpu_lock_own_dir(err), fd;
	struct stat st;

	*out = -1;
	if (dfd < 0)
		return err->code ? err->code : GR_EIO;
	snprintf(name, sizeof(name), "gpu-%u.lock", index);
	fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	close(dfd);
	if (fd < 0)
		return gr_errf(err, GR_EIO, "cannot create GPU lock '%s': %s", name, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return 1;
	}
	if ((st.st_mode & 07777) != 0644 && fchmod(fd, 0644) < 0) {
		/* others then cannot see it: better to fail than to share */
		close(fd);
		return gr_errf(err, GR_EIO, "cannot chmod GPU lock '%s': %s", name, strerror(errno));
	}
	if (ftruncate(fd, 0) == 0 && pwrite(fd, job_id, strlen(job_id), 0) < 0) {
		/* the id is only informative */
	}
	/* Ours is held; now no other user's may be. */
	if ((who = holder(index, 1))) {
		free(who);
		close(fd);
		return 1;
	}
	*out = fd;
	return 0;
}

void gpu_report_load(struct gpu_report *r, int with_apps)
{
	char *smi = gpu_smi_path();
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
		r->gpus[i].locked_by = gpu_lock_holder(r->gpus[i].index);
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

/* "job ID" or "job ID (USER)" for a lock holder's "ID" or "USER:ID",
 * after a comma when sb has some already; once. 1 if it was new. */
static int who_say(struct strbuf *sb, const char *who)
{
	const char *colon = strchr(who, ':');
	char *w = colon ? xasprintf("job %s (%.*s)", colon + 1, (int)(colon - who), who)
			: xasprintf("job %s", who);
	int added = !sb->buf || !strstr(sb->buf, w);

	if (added)
		sb_addf(sb, "%s%s", sb->len ? ", " : "", w);
	free(w);
	return added;
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

/* Idle GPUs first (no process of any user on them, as nvidia-smi sees
 * it), then the least used. */
static int cmp_load(const void *a, const void *b)
{
	const struct gpu_info *x = a, *y = b;
	if (x->busy != y->busy)
		return x->busy - y->busy;
	if (x->mem_used != y->mem_used)
		return x->mem_used < y->mem_used ? -1 : 1;
	if (x->util != y->util)
		return x->util < y->util ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

int gpu_acquire(const char *spec, const char *job_id, const uint32_t *avoid, size_t navoid,
		char **assigned, int *restrict_, int **fds, size_t *nfds, char **why,
		struct gr_err *err)
{
	uint32_t idx[64];
	size_t n = 0, want = 0;
	int explicit = strchr(spec, ',') != NULL, rc = 0;
	struct gpu_report r = { 0 };
	struct strbuf sb = STRBUF_INIT, held = STRBUF_INIT;
	size_t nheld = 0;
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
		gpu_report_load(&r, 1); /* with processes: a GPU in use is a last resort */
		if (!r.have_smi) {
			*why = xasprintf("no GPUs assigned: %s", r.error ? r.error : "nvidia-smi is not on this host");
			*assigned = xstrdup("");
			goto out;
		}
		if (want > r.ngpus) {
			rc = gr_errf(err, GR_EINVAL, "[train] gpus asks for %zu GPUs; the host has %zu", want, r.ngpus);
			goto out;
		}
		for (size_t i = 0; i < r.ngpus; i++)
			for (size_t j = 0; j < r.napps && !r.gpus[i].busy; j++)
				r.gpus[i].busy = !strcmp(r.apps[j].gpu_uuid, r.gpus[i].uuid);
		qsort(r.gpus, r.ngpus, sizeof(*r.gpus), cmp_load);
		for (size_t i = 0; i < r.ngpus; i++) {
			int avoided = 0;
			for (size_t j = 0; j < navoid; j++)
				avoided |= avoid[j] == r.gpus[i].index;
			if (!avoided)
				idx[n++] = r.gpus[i].index;
		}
	}
	*fds = xcalloc(want, sizeof(int));
	uint32_t got[64];
	for (size_t i = 0; i < n && *nfds < want; i++) {
		int fd, taken = lock_try(idx[i], job_id, &fd, err);
		if (taken < 0) {
			rc = taken;
			release(*fds, *nfds);
			free(*fds);
			*fds = NULL;
			*nfds = 0;
			goto out;
		}
		if (taken == 1) {
			if (explicit) {
				char *who = gpu_lock_holder(idx[i]);
				*why = xasprintf("waiting for GPU %u (held by job %s)", idx[i], who ? who : "?");
				free(who);
				break;
			}
			char *who = gpu_lock_holder(idx[i]);
			if (who && nheld < 3)
				nheld += who_say(&held, who);
			else if (who)
				nheld++;
			free(who);
			continue;
		}
		got[*nfds] = idx[i];
		(*fds)[(*nfds)++] = fd;
	}
	if (*nfds < want) {
		if (!*why && nheld)
			*why = xasprintf("waiting for %zu GPU%s held by %s%s", want, want == 1 ? "" : "s",
					 held.buf, nheld > 3 ? " and more" : "");
		else if (!*why)
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
	sb_release(&held);
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
