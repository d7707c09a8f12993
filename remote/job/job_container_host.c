/* Jobs inside a container, the host's side (see job_container.h):
 * finding the runtime and the way GPUs go into its containers, the job's
 * .gpurun/container, and what doctor reports. It runs the runtime
 * through job_container.c, which calls nothing here. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_container.h"
#include "job_gpu.h"
#include "agent.h"

static const char *const cdi_dirs[] = { "/etc/cdi", "/var/run/cdi" };

/* ---- finding the runtime and the way GPUs go in ---- */

/* Use kind if it answers: 0 with *path and *version set, else -1 with
 * why in *why. docker must reach its daemon. */
static int try_runtime(const char *kind, char **path, char **version, char **why)
{
	struct strbuf out = STRBUF_INIT, errs = STRBUF_INIT;
	int rc;

	*path = run_which(kind);
	if (!*path) {
		*why = xasprintf("no %s on the host's PATH", kind);
		return -1;
	}
	const char *argv[] = { *path, "version", "--format",
			       !strcmp(kind, "docker") ? "{{.Server.Version}}" : "{{.Client.Version}}", NULL };
	rc = job_ctr_exec(argv, CTR_ASK_MS, &out, &errs);
	if (rc != 0) {
		*why = xasprintf("%s does not answer: %s", *path, rc < 0 ? strerror(errno) : job_ctr_last_line(&errs));
		free(*path);
		*path = NULL;
	} else {
		*version = xstrdup(job_ctr_last_line(&out));
	}
	sb_release(&out);
	sb_release(&errs);
	return rc == 0 ? 0 : -1;
}

/* want: auto (podman, then docker), podman or docker. */
static int resolve_runtime(const char *want, char **kind, char **path, char **version,
			   struct gr_err *err)
{
	static const char *const order[] = { "podman", "docker" };
	struct strbuf whys = STRBUF_INIT;

	for (size_t i = 0; i < GR_ARRAY_SIZE(order); i++) {
		char *why = NULL;
		if (strcmp(want, "auto") && strcmp(want, order[i]))
			continue;
		if (try_runtime(order[i], path, version, &why) == 0) {
			*kind = xstrdup(order[i]);
			sb_release(&whys);
			return 0;
		}
		sb_addf(&whys, "%s%s", whys.len ? "; " : "", why);
		free(why);
	}
	gr_errf(err, GR_ENOTFOUND, "no container runtime to run the image: %s", whys.buf);
	gr_hintf(err, !strcmp(want, "auto") ? "install podman or docker on the host, or run without "
		 "[container] image" : "set [container] runtime = auto to use what the host has");
	sb_release(&whys);
	return GR_ENOTFOUND;
}

/* CDI spec files on this host that name nvidia.com/gpu devices. */
static void cdi_specs(struct strvec *files)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(cdi_dirs); i++) {
		DIR *d = opendir(cdi_dirs[i]);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			size_t n = strlen(e->d_name);
			if (!(n > 5 && !strcmp(e->d_name + n - 5, ".json")) &&
			    !(n > 5 && !strcmp(e->d_name + n - 5, ".yaml")) &&
			    !(n > 4 && !strcmp(e->d_name + n - 4, ".yml")))
				continue;
			char *p = xasprintf("%s/%s", cdi_dirs[i], e->d_name);
			struct strbuf sb = STRBUF_INIT;
			struct stat st;
			if (stat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (4 << 20) &&
			    read_file(p, &sb, NULL) == 0 && sb.buf && strstr(sb.buf, "nvidia.com/gpu"))
				sv_push(files, p);
			sb_release(&sb);
			free(p);
		}
		if (d)
			closedir(d);
	}
}

/* How GPUs go into kind's containers here: "cdi", "toolkit" or "none";
 * what was found goes to cdi_found / toolkit_found. */
static const char *gpu_way(const char *kind, const char *path, struct strvec *cdi_found,
			   char **toolkit_found)
{
	struct strbuf info = STRBUF_INIT;
	const char *way = "none";
	char *hook = NULL;

	cdi_specs(cdi_found);
	*toolkit_found = NULL;
	if (!strcmp(kind, "podman"))
		return cdi_found->n ? "cdi" : "none";
	/* docker: CDI from 25 on, when its daemon enables it (it then lists
	 * the spec folders); else the toolkit's hook that --gpus runs. */
	const char *argv[] = { path, "info", "--format", "{{json .}}", NULL };
	if (job_ctr_exec(argv, CTR_ASK_MS, &info, NULL) == 0 && info.buf) {
		const char *c = strstr(info.buf, "\"CDISpecDirs\":[");
		if (cdi_found->n && c && c[15] != ']')
			way = "cdi";
		const char *r = strstr(info.buf, "\"Runtimes\":{");
		if (!strcmp(way, "none") && r && strstr(r, "\"nvidia\""))
			*toolkit_found = xstrdup("docker's nvidia runtime");
	}
	if (!strcmp(way, "none") && !*toolkit_found) {
		if ((hook = run_which("nvidia-container-runtime-hook")) ||
		    (hook = run_which("nvidia-container-toolkit")))
			*toolkit_found = hook;
	}
	if (!strcmp(way, "none") && *toolkit_found)
		way = "toolkit";
	sb_release(&info);
	return way;
}

const char *job_ctr_gpu_way(const char *kind, const char *path)
{
	struct strvec cdi = STRVEC_INIT;
	char *toolkit = NULL;
	const char *way = gpu_way(kind, path, &cdi, &toolkit);

	sv_clear(&cdi);
	free(toolkit);
	return way;
}

/* A [container] mounts entry as a --mount value; SRC relative to the
 * project folder, ~ the home folder; SRC must exist. */
/* podman and docker read --mount as CSV: a comma ends a field and a
 * quote starts one, so a host path holding either would be read as more
 * options (issue 29). Such a path is refused, never spliced. */
static int ctr_path_bad(const char *p)
{
	return strpbrk(p, ",\"") != NULL;
}

/* The job folder and the project folder go in as bind mounts: 0, or
 * GR_EINVAL when either cannot be written in --mount's CSV. */
static int ctr_paths_ok(const char *dir, const char *project, struct gr_err *err)
{
	const char *bad = ctr_path_bad(project) ? project : ctr_path_bad(dir) ? dir : NULL;

	if (!bad)
		return 0;
	gr_errf(err, GR_EINVAL, "cannot run the job in a container: the host path '%s' holds a "
		"comma or a double quote, which podman's and docker's --mount cannot take", bad);
	gr_hintf(err, "choose a [remote] path (and a home folder) without them");
	return GR_EINVAL;
}

static int mount_value(const char *m, const char *project, char **out, struct gr_err *err)
{
	char *src = NULL, *dst = NULL, *full;
	struct stat st;
	int ro, rc = 0;

	if (job_ctr_split_mount(m, &src, &dst, &ro) < 0) {
		rc = gr_errf(err, GR_EINVAL, "container mount '%s' is not SRC[:DST[:ro]]", m);
		goto out;
	}
	if (src[0] == '/')
		full = xstrdup(src);
	else if (src[0] == '~' && (src[1] == '/' || !src[1]))
		full = expand_home(src);
	else
		full = xasprintf("%s/%s", project, src);
	if (ctr_path_bad(full) || stat(full, &st) < 0) {
		rc = gr_errf(err, GR_EINVAL, "container mount '%s': cannot use '%s'%s%s", m, full,
			     ctr_path_bad(full) ? ": a comma or a double quote in the path" : ": ",
			     ctr_path_bad(full) ? "" : strerror(errno));
		free(full);
		goto out;
	}
	*out = xasprintf("type=bind,source=%s,target=%s%s", full, *dst ? dst : full, ro ? ",readonly" : "");
	free(full);
out:
	free(src);
	free(dst);
	return rc;
}

static void kv_line(struct strbuf *sb, const char *k, const char *v)
{
	sb_addf(sb, "%s=%s\n", k, v);
}

int job_ctr_prepare(const char *dir, const char *project, char **warning, struct gr_err *err)
{
	struct job_spec spec = { STRVEC_INIT };
	struct strvec v = STRVEC_INIT, cdi = STRVEC_INIT;
	struct strbuf meta = STRBUF_INIT;
	char *kind = NULL, *path = NULL, *version = NULL, *toolkit = NULL;
	int rc;

	*warning = NULL;
	if ((rc = job_spec_read(dir, &spec, err)) < 0)
		return rc;
	if (!job_ctr_wanted(&spec))
		goto out;
	if ((rc = ctr_paths_ok(dir, project, err)) < 0)
		goto out;
	if ((rc = resolve_runtime(job_spec_get(&spec, "container_runtime", "auto"), &kind, &path,
				  &version, err)) < 0)
		goto out;
	const char *way = gpu_way(kind, path, &cdi, &toolkit);
	char *smi = gpu_smi_path();
	if (smi && !strcmp(way, "none"))
		*warning = xasprintf("this host has GPUs (%s) but no way to pass them into a %s container "
				     "(%s): the job sees none; see 'gpurun doctor'", smi, kind,
				     !strcmp(kind, "podman") ? "no CDI spec for nvidia.com/gpu in /etc/cdi or /var/run/cdi"
				     : "no NVIDIA container toolkit, no CDI");
	free(smi);
	const char *user = job_spec_get(&spec, "container_user", "");
	char uid_gid[64];
	snprintf(uid_gid, sizeof(uid_gid), "%u:%u", (unsigned)getuid(), (unsigned)getgid());
	kv_line(&meta, "runtime", kind);
	kv_line(&meta, "path", path);
	kv_line(&meta, "version", version);
	kv_line(&meta, "image", job_spec_get(&spec, "container_image", ""));
	kv_line(&meta, "user", *user ? user : uid_gid);
	/* Rootless podman maps the caller to root inside; keep-id maps it to
	 * itself, so --user UID:GID writes files the caller owns. */
	kv_line(&meta, "keep_id", !strcmp(kind, "podman") && geteuid() != 0 && !*user ? "1" : "0");
	kv_line(&meta, "gpu", way);
	/* Rootless podman shares the host's IPC namespace by mounting its
	 * /dev/mqueue, which not every host has: there, as much /dev/shm as
	 * the host's instead (what data loaders need of it). */
	struct statvfs vfs;
	if (!strcmp(kind, "podman") && geteuid() != 0 && access("/dev/mqueue", F_OK) != 0) {
		char n[32];
		unsigned long long b = statvfs("/dev/shm", &vfs) == 0 ?
			(unsigned long long)vfs.f_blocks * vfs.f_frsize : 0;
		snprintf(n, sizeof(n), "%llu", b ? b : 8ULL << 30);
		kv_line(&meta, "shm_size", n);
	}
	kv_line(&meta, "project", project);
	job_spec_list(&spec, "container_option", &v);
	for (size_t i = 0; i < v.n; i++)
		kv_line(&meta, "option", v.v[i]);
	sv_clear(&v);
	job_spec_list(&spec, "container_mount", &v);
	for (size_t i = 0; i < v.n; i++) {
		char *m = NULL;
		if ((rc = mount_value(v.v[i], project, &m, err)) < 0)
			goto out;
		kv_line(&meta, "mount", m);
		free(m);
	}
	rc = job_meta_write(dir, "container", meta.buf, err);
out:
	job_spec_free(&spec);
	sv_clear(&v);
	sv_clear(&cdi);
	sb_release(&meta);
	free(kind);
	free(path);
	free(version);
	free(toolkit);
	return rc;
}

/* ---- doctor ---- */

void job_ctr_check(const char *want, const char *image, struct strvec *kv)
{
	struct gr_err err = { 0 };
	struct strvec cdi = STRVEC_INIT;
	struct strbuf files = STRBUF_INIT;
	char *kind = NULL, *path = NULL, *version = NULL, *toolkit = NULL, *smi = gpu_smi_path();
	const char *img = "";

#define KV(k, v) do { sv_push(kv, (k)); sv_push(kv, (v)); } while (0)
	if (resolve_runtime(want, &kind, &path, &version, &err) < 0) {
		KV("runtime", "");
		KV("error", err.msg);
	} else {
		KV("runtime", kind);
		KV("path", path);
		KV("version", version);
		if (*image && image[0] != '-') {
			const char *argv[] = { path, "image", "inspect", "--format", "{{.Id}}", image, NULL };
			img = job_ctr_exec(argv, CTR_ASK_MS, NULL, NULL) == 0 ? "present" : "absent";
		}
		KV("image", img);
		const char *way = gpu_way(kind, path, &cdi, &toolkit);
		KV("gpu", way);
	}
	for (size_t i = 0; i < cdi.n; i++)
		sb_addf(&files, "%s%s", i ? ", " : "", cdi.v[i]);
	KV("cdi", files.buf ? files.buf : "");
	KV("toolkit", toolkit ? toolkit : "");
	KV("nvidia_smi", smi ? smi : "");
#undef KV
	sv_clear(&cdi);
	sb_release(&files);
	free(kind);
	free(path);
	free(version);
	free(toolkit);
	free(smi);
}

