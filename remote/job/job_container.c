/* Jobs inside a container (see job_container.h): running the runtime's
 * client, the spec's keys, the job's container record, the runtime's
 * command lines, stopping a job's containers by label, and the reaper
 * that removes them when the supervisor dies. Finding the runtime and
 * preparing a job's container: job_container_host.c, one layer above. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job_container.h"
#include "agent.h"


/* ---- running the runtime ---- */

int job_ctr_exec(const char *const *argv, int timeout_ms, struct strbuf *out, struct strbuf *errs)
{
	int rc = run_capture(argv, NULL, timeout_ms, 0, out, errs);

	return rc == RUN_TIMEOUT ? 128 + SIGKILL : rc; /* as the kill ended it */
}

/* The last non-empty line of a runtime's error output, for a message. */
const char *job_ctr_last_line(struct strbuf *sb)
{
	char *s = sb->buf;

	if (!s)
		return "no output";
	while (sb->len && (s[sb->len - 1] == '\n' || s[sb->len - 1] == '\r' || s[sb->len - 1] == ' '))
		s[--sb->len] = '\0';
	char *nl = strrchr(s, '\n');
	return nl ? nl + 1 : *s ? s : "no output";
}

/* ---- the spec ---- */

int job_ctr_wanted(const struct job_spec *s)
{
	return *job_spec_get(s, "container_image", "") != '\0';
}

static int has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 1;
	return 0;
}

/* See job_container.h. */
int job_ctr_split_mount(const char *m, char **src, char **dst, int *ro)
{
	const char *c1 = strchr(m, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;

	*ro = 0;
	*src = xstrndup(m, c1 ? (size_t)(c1 - m) : strlen(m));
	*dst = c1 ? xstrndup(c1 + 1, c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1)) : xstrdup("");
	if (c2) {
		if (!strcmp(c2 + 1, "ro"))
			*ro = 1;
		else if (strcmp(c2 + 1, "rw"))
			return -1;
	}
	return **src && !strchr(*src, ',') && !strchr(*dst, ',') && (!**dst || **dst == '/') &&
	       !(c1 && !**dst) ? 0 : -1;
}

int job_ctr_spec_check(const struct job_spec *s, struct gr_err *err)
{
	const char *image = job_spec_get(s, "container_image", "");
	const char *rt = job_spec_get(s, "container_runtime", "auto");
	const char *user = job_spec_get(s, "container_user", "");
	struct strvec v = STRVEC_INIT;
	int rc = 0;

	if (!*image) {
		for (size_t i = 0; i + 1 < s->kv.n; i += 2)
			if (!strncmp(s->kv.v[i], "container_", 10))
				return gr_errf(err, GR_EINVAL, "'%s' without a container image", s->kv.v[i]);
		return 0;
	}
	if (image[0] == '-' || strpbrk(image, " \t") || has_ctl(image))
		return gr_errf(err, GR_EINVAL, "'%s' is not an image name", image);
	if (strcmp(rt, "auto") && strcmp(rt, "podman") && strcmp(rt, "docker"))
		return gr_errf(err, GR_EINVAL, "unknown container runtime '%s' (auto, podman or docker)", rt);
	if (has_ctl(user) || user[0] == '-')
		return gr_errf(err, GR_EINVAL, "'%s' is not a user for the container", user);
	job_spec_list(s, "container_option", &v);
	for (size_t i = 0; i < v.n && rc == 0; i++)
		if (has_ctl(v.v[i]))
			rc = gr_errf(err, GR_EINVAL, "a container option holds a control character");
	sv_clear(&v);
	job_spec_list(s, "container_mount", &v);
	for (size_t i = 0; i < v.n && rc == 0; i++) {
		char *src, *dst;
		int ro;
		if (has_ctl(v.v[i]) || job_ctr_split_mount(v.v[i], &src, &dst, &ro) < 0)
			rc = gr_errf(err, GR_EINVAL, "container mount '%s' is not SRC[:DST[:ro]] "
				     "(DST absolute, no commas)", v.v[i]);
		free(src);
		free(dst);
	}
	sv_clear(&v);
	return rc;
}

int job_ctr_load(const char *dir, struct job_ctr *c, struct gr_err *err)
{
	struct strvec kv = STRVEC_INIT;
	char *p = job_meta(dir, "container");
	int rc = job_kv_read(p, &kv, NULL);
	const char *const keys[] = { "runtime", "path", "image", "user", "gpu", "project", "shm_size" };
	char **const fields[] = { &c->runtime, &c->path, &c->image, &c->user, &c->gpu, &c->project,
				  &c->shm_size };

	free(p);
	*c = (struct job_ctr){ .options = STRVEC_INIT, .mounts = STRVEC_INIT };
	if (rc < 0) {
		sv_clear(&kv);
		return gr_errf(err, GR_ENOTFOUND, "the job has no container");
	}
	for (size_t i = 0; i < GR_ARRAY_SIZE(keys); i++) {
		const char *v = job_kv_get(&kv, keys[i]);
		*fields[i] = xstrdup(v ? v : "");
	}
	c->keep_id = job_kv_get(&kv, "keep_id") && !strcmp(job_kv_get(&kv, "keep_id"), "1");
	for (size_t i = 0; i < kv.n; i++) {
		if (!strncmp(kv.v[i], "option=", 7))
			sv_push(&c->options, kv.v[i] + 7);
		else if (!strncmp(kv.v[i], "mount=", 6))
			sv_push(&c->mounts, kv.v[i] + 6);
	}
	sv_clear(&kv);
	if (!*c->path || !*c->image) {
		job_ctr_free(c);
		return gr_errf(err, GR_ENOTFOUND, "the job's container record is incomplete");
	}
	return 0;
}

void job_ctr_free(struct job_ctr *c)
{
	free(c->runtime);
	free(c->path);
	free(c->image);
	free(c->user);
	free(c->gpu);
	free(c->project);
	free(c->shm_size);
	sv_clear(&c->options);
	sv_clear(&c->mounts);
	*c = (struct job_ctr){ 0 };
}

/* ---- command lines ---- */

void job_ctr_name(const char *job_id, enum job_step step, char *buf, size_t n)
{
	snprintf(buf, n, "gpurun-%s%s%s", job_id, step == JOB_STEP_RUN ? "" : "-",
		 step == JOB_STEP_RUN ? "" : job_step_names[step]);
}

void job_ctr_run_argv(const struct job_ctr *c, const struct job_ctr_step *st, struct strvec *out)
{
	char name[64];
	int restricted = st->gpus && *st->gpus;
	unsigned count = 0;

	job_ctr_name(st->job_id, st->step, name, sizeof(name));
	sv_push(out, c->path);
	sv_push(out, "run");
	sv_push(out, "--rm");
	if (!st->no_tty)
		sv_push(out, "-t");
	sv_push(out, "--init");
	sv_pushf(out, "--name=%s", name);
	sv_pushf(out, "--label=" CTR_LABEL "=%s", st->job_id);
	/* What training wants (NCCL, rendezvous ports, DataLoader workers'
	 * shared memory); [container] options come later, so they win. */
	sv_push(out, "--network=host");
	if (c->shm_size && *c->shm_size)
		sv_pushf(out, "--shm-size=%s", c->shm_size);
	else
		sv_push(out, "--ipc=host");
	/* The job folder is bind-mounted as it is, as the job on the host
	 * would see it: no SELinux relabelling of the user's files. */
	sv_push(out, "--security-opt=label=disable");
	sv_pushf(out, "--user=%s", c->user);
	if (c->keep_id)
		sv_push(out, "--userns=keep-id");
	sv_pushf(out, "--workdir=%s", st->cwd);
	sv_pushf(out, "--mount=type=bind,source=%s,target=%s", st->job_dir, st->job_dir);
	if (*c->project && strcmp(c->project, st->job_dir))
		sv_pushf(out, "--mount=type=bind,source=%s,target=%s", c->project, c->project);
	for (size_t i = 0; i < c->mounts.n; i++)
		sv_pushf(out, "--mount=%s", c->mounts.v[i]);
	/* The spec's variables by name: the client has them, their values
	 * stay out of the process table. */
	for (size_t i = 0; st->env && i < st->env->n; i++) {
		const char *eq = strchr(st->env->v[i], '=');
		if (eq && eq > st->env->v[i])
			sv_pushf(out, "--env=%.*s", (int)(eq - st->env->v[i]), st->env->v[i]);
	}
	sv_pushf(out, "--env=GPURUN_JOB_ID=%s", st->job_id);
	sv_pushf(out, "--env=GPURUN_JOB_DIR=%s", st->job_dir);
	if (restricted) {
		for (const char *p = st->gpus; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
			count++;
		if (!strcmp(c->gpu, "cdi")) {
			for (const char *p = st->gpus; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
				sv_pushf(out, "--device=nvidia.com/gpu=%.*s",
					 (int)(strchr(p, ',') ? (size_t)(strchr(p, ',') - p) : strlen(p)), p);
		} else if (!strcmp(c->gpu, "toolkit")) {
			sv_pushf(out, "--gpus=\"device=%s\"", st->gpus); /* quoted: it is CSV */
		}
		/* Inside, the container's GPUs are numbered from 0. */
		if (!strcmp(c->gpu, "cdi") || !strcmp(c->gpu, "toolkit")) {
			struct strbuf ids = STRBUF_INIT;
			for (unsigned i = 0; i < count; i++)
				sb_addf(&ids, "%s%u", i ? "," : "", i);
			sv_pushf(out, "--env=CUDA_VISIBLE_DEVICES=%s", ids.buf);
			sb_release(&ids);
		} else {
			sv_pushf(out, "--env=CUDA_VISIBLE_DEVICES=%s", st->gpus);
		}
	} else if (!strcmp(c->gpu, "cdi")) {
		sv_push(out, "--device=nvidia.com/gpu=all");
	} else if (!strcmp(c->gpu, "toolkit")) {
		sv_push(out, "--gpus=all");
	}
	for (size_t i = 0; i < c->options.n; i++)
		sv_push(out, c->options.v[i]);
	sv_push(out, c->image);
	if (st->args && st->args->n && !(st->shell && !strcmp(st->shell, "login"))) {
		/* train -- CMD ARGS: the words as given, never through sh -c. */
		for (size_t i = 0; i < st->args->n; i++)
			sv_push(out, st->args->v[i]);
		return;
	}
	/* The image's shell; a login shell reads the image's /etc/profile. */
	sv_push(out, "/bin/sh");
	if (st->shell && !strcmp(st->shell, "login"))
		sv_push(out, "-l");
	sv_push(out, "-c");
	/* Without -t the runtime relays the container's stdout and stderr
	 * on two streams, which lose their order against each other: one,
	 * as on the host's pipe. (Words run without a shell keep two.) */
	const char *merge = st->no_tty ? "exec 2>&1\n" : "";
	if (st->args && st->args->n) {
		/* The words reach the program as "$@": never parsed again. */
		sv_pushf(out, "%sexec \"$@\"", merge);
		sv_push(out, "gpurun"); /* $0 */
		for (size_t i = 0; i < st->args->n; i++)
			sv_push(out, st->args->v[i]);
		return;
	}
	sv_pushf(out, "%s%s", merge, st->cmd);
}

/* RUNTIME stop -t GRACE / RUNTIME rm -f, without the name. */
static void stop_words(const struct job_ctr *c, int grace_s, struct strvec *out)
{
	sv_push(out, c->path);
	sv_push(out, "stop");
	sv_push(out, "-t");
	sv_pushf(out, "%d", grace_s < 0 ? 0 : grace_s);
}

static void rm_words(const struct job_ctr *c, struct strvec *out)
{
	sv_push(out, c->path);
	sv_push(out, "rm");
	sv_push(out, "-f");
	if (!strcmp(c->runtime, "podman")) {
		sv_push(out, "-t"); /* podman would give a running one 10 s first */
		sv_push(out, "0");
	}
}

void job_ctr_stop_argv(const struct job_ctr *c, const char *name, int grace_s, struct strvec *out)
{
	stop_words(c, grace_s, out);
	sv_push(out, name);
}

void job_ctr_rm_argv(const struct job_ctr *c, const char *name, struct strvec *out)
{
	rm_words(c, out);
	sv_push(out, name);
}

int job_ctr_list(const struct job_ctr *c, const char *job_id, struct strvec *names,
		 struct gr_err *err)
{
	struct strbuf out = STRBUF_INIT, errs = STRBUF_INIT;
	char *filter = xasprintf("label=" CTR_LABEL "=%s", job_id);
	const char *argv[] = { c->path, "ps", "-a", "--filter", filter, "--format", "{{.Names}}", NULL };
	int rc = job_ctr_exec(argv, CTR_ASK_MS, &out, &errs);

	free(filter);
	if (rc != 0) {
		gr_errf(err, GR_EREMOTE, "%s ps failed: %s", c->runtime, job_ctr_last_line(&errs));
		rc = GR_EREMOTE;
	} else {
		char *save = NULL;
		for (char *l = strtok_r(out.buf ? out.buf : (char *)"", "\n", &save); l;
		     l = strtok_r(NULL, "\n", &save))
			if (*l)
				sv_push(names, l);
	}
	sb_release(&out);
	sb_release(&errs);
	return rc;
}

int job_ctr_stop_all(const struct job_ctr *c, const char *job_id, int grace_s,
		     struct strvec *stopped, struct strvec *left, struct gr_err *err)
{
	struct strvec names = STRVEC_INIT, argv = STRVEC_INIT;
	int rc;

	if ((rc = job_ctr_list(c, job_id, &names, err)) < 0 || !names.n)
		goto out;
	for (size_t i = 0; i < names.n; i++) {
		/* Errors are the container going away on its own (--rm). */
		job_ctr_stop_argv(c, names.v[i], grace_s, &argv);
		job_ctr_exec((const char *const *)argv.v, (grace_s + 60) * 1000, NULL, NULL);
		sv_clear(&argv);
		job_ctr_rm_argv(c, names.v[i], &argv);
		job_ctr_exec((const char *const *)argv.v, CTR_ASK_MS, NULL, NULL);
		sv_clear(&argv);
		if (stopped)
			sv_push(stopped, names.v[i]);
	}
	sv_clear(&names);
	/* podman's and docker's --rm may still be at it: give it a moment. */
	for (int i = 0; i < 50; i++) {
		sv_clear(&names);
		if ((rc = job_ctr_list(c, job_id, &names, err)) < 0 || !names.n)
			break;
		usleep(100 * 1000);
	}
	for (size_t i = 0; left && i < names.n; i++)
		sv_push(left, names.v[i]);
out:
	sv_clear(&names);
	sv_clear(&argv);
	return rc;
}

void job_ctr_sh_quote(const struct strvec *argv, struct strbuf *out)
{
	for (size_t i = 0; i < argv->n; i++) {
		const char *w = argv->v[i];
		size_t plain = strspn(w, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				      "0123456789_./:,+@%-"); /* no '=': a first word
									  would assign */
		if (i)
			sb_adds(out, " ");
		if (*w && !w[plain]) {
			sb_adds(out, w);
			continue;
		}
		sb_adds(out, "'");
		for (; *w; w++) {
			if (*w == '\'')
				sb_adds(out, "'\\''");
			else
				sb_add(out, w, 1);
		}
		sb_adds(out, "'");
	}
}

void job_ctr_stop_sh(const struct job_ctr *c, const char *job_id, int grace_s, struct strbuf *out)
{
	struct strvec ps = STRVEC_INIT, stop = STRVEC_INIT, rm = STRVEC_INIT;

	sv_push(&ps, c->path);
	sv_push(&ps, "ps");
	sv_push(&ps, "-a");
	sv_push(&ps, "--filter");
	sv_pushf(&ps, "label=" CTR_LABEL "=%s", job_id);
	sv_push(&ps, "--format");
	sv_push(&ps, "{{.Names}}");
	stop_words(c, grace_s, &stop);
	rm_words(c, &rm);
	sb_adds(out, "for n in $(");
	job_ctr_sh_quote(&ps, out);
	sb_adds(out, "); do ");
	job_ctr_sh_quote(&stop, out);
	sb_adds(out, " \"$n\" >/dev/null 2>&1; ");
	job_ctr_sh_quote(&rm, out);
	sb_adds(out, " \"$n\" >/dev/null 2>&1; done");
	sv_clear(&ps);
	sv_clear(&stop);
	sv_clear(&rm);
}

/* ---- the reaper ---- */

void job_ctr_reap_spawn(const char *dir)
{
	pid_t pid = fork();

	if (pid < 0)
		return;
	if (pid > 0) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		return;
	}
	setsid();
	if (fork() != 0)
		_exit(0);
	int nul = open("/dev/null", O_RDWR);
	char *elog = job_meta(dir, "supervisor.log");
	int efd = open(elog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	dup2(nul, 0);
	dup2(nul, 1);
	if (efd >= 0)
		dup2(efd, 2);
	/* Nothing of the supervisor's: above all not the job's lock, which
	 * would then outlive it. */
	for (int fd = 3; fd < 1024; fd++)
		close(fd);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	execl("/proc/self/exe", "gpurun-agent", "container-reap", dir, (char *)NULL);
	_exit(127);
}

int job_ctr_reap_main(int argc, char **argv)
{
	struct job_ctr c;
	struct strvec names = STRVEC_INIT, left = STRVEC_INIT;
	struct gr_err err = { 0 };
	const char *dir;
	char *p;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: gpurun-agent container-reap DIR\n");
		return 2;
	}
	dir = argv[2];
	p = job_meta(dir, "lock");
	fd = open(p, O_RDONLY | O_CLOEXEC);
	free(p);
	if (fd < 0)
		return 1;
	/* The supervisor holds it (exclusively) for as long as it lives. */
	while (flock(fd, LOCK_SH) < 0)
		if (errno != EINTR) {
			close(fd);
			return 1;
		}
	close(fd);
	if (job_ctr_load(dir, &c, &err) < 0)
		return 0;
	char *id = xstrdup(strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir);
	int had_status = job_meta_exists(dir, "status");
	if (job_ctr_list(&c, id, &names, &err) == 0 && names.n) {
		sv_clear(&names);
		job_ctr_stop_all(&c, id, had_status ? 0 : CTR_GRACE, &names, &left, &err);
	}
	if (!had_status) {
		struct strbuf msg = STRBUF_INIT;
		sb_adds(&msg, "[gpurun] the job's supervisor ended without recording how the job ended");
		for (size_t i = 0; i < names.n; i++)
			sb_addf(&msg, "%s%s", i ? " " : "; removed its container ", names.v[i]);
		for (size_t i = 0; i < left.n; i++)
			sb_addf(&msg, "%s%s", i ? " " : "; still there: ", left.v[i]);
		sb_adds(&msg, "\n");
		p = job_meta(dir, "log");
		int lfd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC);
		if (lfd >= 0) {
			if (write_full(lfd, msg.buf, msg.len) < 0)
				fprintf(stderr, "gpurun-agent: cannot write the log: %s\n", strerror(errno));
			close(lfd);
		}
		free(p);
		sb_release(&msg);
	}
	free(id);
	sv_clear(&names);
	sv_clear(&left);
	job_ctr_free(&c);
	return 0;
}
