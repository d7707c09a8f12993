/* A job's steps (see job_steps.h): the command line of each step, and
 * the setup step's key, lock and stamp. */
#include <blake2.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job_glob.h"
#include "job_steps.h"

#define SETUP_LOCK ".gpurun/setup.lock"
#define SETUP_STAMP ".gpurun/setup-stamp"

const char *const job_step_names[] = { "setup", "build", "run" };

const char *job_login_shell(void)
{
	const char *sh = getenv("SHELL");
	struct passwd *pw;

	if (sh && sh[0] == '/' && access(sh, X_OK) == 0)
		return sh;
	pw = getpwuid(getuid());
	if (pw && pw->pw_shell && pw->pw_shell[0] == '/' && access(pw->pw_shell, X_OK) == 0)
		return pw->pw_shell;
	return "/bin/sh";
}

int job_shell_valid(const char *shell)
{
	return !*shell || !strcmp(shell, "sh") || !strcmp(shell, "login");
}

int job_output_valid(const char *output)
{
	return !*output || !strcmp(output, "pty") || !strcmp(output, "pipe");
}

int job_output_pipe(const char *output)
{
	return output && !strcmp(output, "pipe");
}

void job_output_env(const char *output, const struct strvec *env, struct strvec *out)
{
	static const char *const add[] = { "PYTHONUNBUFFERED=1" };

	if (!job_output_pipe(output))
		return;
	for (size_t i = 0; i < GR_ARRAY_SIZE(add); i++) {
		size_t klen = (size_t)(strchr(add[i], '=') - add[i]) + 1; /* "K=" */
		int set = 0;
		for (size_t j = 0; env && j < env->n && !set; j++)
			set = !strncmp(env->v[j], add[i], klen);
		if (!set)
			sv_push(out, add[i]);
	}
}

void job_step_argv(const char *shell, const char *cmd, struct strvec *argv)
{
	if (shell && !strcmp(shell, "login")) {
		sv_push(argv, job_login_shell());
		sv_push(argv, "-l");
		sv_push(argv, "-i");
	} else {
		sv_push(argv, "/bin/sh");
	}
	sv_push(argv, "-c");
	sv_push(argv, cmd);
}

void job_step_exec_argv(const char *shell, const struct strvec *args, struct strvec *argv)
{
	if (shell && !strcmp(shell, "login")) {
		/* The words reach the program as "$@" (fish: $argv): never
		 * parsed again. */
		const char *sh = job_login_shell(), *base = strrchr(sh, '/');
		int fish = !strcmp(base ? base + 1 : sh, "fish");
		sv_push(argv, sh);
		sv_push(argv, "-l");
		sv_push(argv, "-i");
		sv_push(argv, "-c");
		sv_push(argv, fish ? "exec $argv" : "exec \"$@\"");
		if (!fish)
			sv_push(argv, "gpurun"); /* $0 */
	}
	for (size_t i = 0; i < args->n; i++)
		sv_push(argv, args->v[i]);
}

/* ---- setup's key ---- */

static void hash_str(blake2b_state *b, const char *s)
{
	uint32_t n = (uint32_t)strlen(s);
	uint8_t len[4] = { (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };

	blake2b_update(b, len, 4);
	blake2b_update(b, (const uint8_t *)s, n);
}

static void hash_file(blake2b_state *b, int dfd, const char *name, const char *rel)
{
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	char buf[65536];
	ssize_t n;

	hash_str(b, rel);
	if (fd < 0) {
		hash_str(b, "(unreadable)");
		return;
	}
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		blake2b_update(b, (const uint8_t *)buf, (size_t)n);
	close(fd);
	hash_str(b, "(end)");
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Hash, in path order, the regular files under dfd matching pat. */
static void hash_matches(blake2b_state *b, int dfd, const char *rel, const char *pat, int *found)
{
	DIR *d = fdopendir(dfd);
	struct strvec names = STRVEC_INIT;
	struct dirent *e;

	if (!d) {
		close(dfd);
		return;
	}
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    !(!*rel && !strcmp(e->d_name, ".gpurun")))
			sv_push(&names, e->d_name);
	if (names.n > 1)
		qsort(names.v, names.n, sizeof(*names.v), cmp_str);
	for (size_t i = 0; i < names.n; i++) {
		char *sub = *rel ? xasprintf("%s/%s", rel, names.v[i]) : xstrdup(names.v[i]);
		struct stat st;
		if (fstatat(dirfd(d), names.v[i], &st, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISREG(st.st_mode) && job_glob_match(pat, sub)) {
				hash_file(b, dirfd(d), names.v[i], sub);
				*found = 1;
			} else if (S_ISDIR(st.st_mode) && job_glob_may_descend(pat, sub)) {
				int sfd = openat(dirfd(d), names.v[i],
						 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sfd >= 0)
					hash_matches(b, sfd, sub, pat, found);
			}
		}
		free(sub);
	}
	sv_clear(&names);
	closedir(d);
}

void job_setup_key(const char *project, const struct job_spec *s, char out[65])
{
	struct strvec inputs = STRVEC_INIT;
	blake2b_state b;
	uint8_t h[32];

	blake2b_init(&b, 32);
	hash_str(&b, "gpurun setup 1");
	hash_str(&b, job_spec_get(s, "shell", "sh"));
	hash_str(&b, job_spec_get(s, "setup", ""));
	/* Setup's results belong to the image it ran in (a job on the host
	 * hashes nothing more, so its key stays what it was). */
	if (*job_spec_get(s, "container_image", "")) {
		hash_str(&b, job_spec_get(s, "container_image", ""));
		hash_str(&b, job_spec_get(s, "container_runtime", "auto"));
	}
	job_spec_list(s, "setup_input", &inputs);
	for (size_t i = 0; i < inputs.n; i++) {
		int fd = open(project, O_RDONLY | O_DIRECTORY | O_CLOEXEC), found = 0;
		hash_str(&b, inputs.v[i]);
		if (fd >= 0)
			hash_matches(&b, fd, "", inputs.v[i], &found);
		if (!found)
			hash_str(&b, "(missing)");
	}
	blake2b_final(&b, h, 32);
	for (int i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
	sv_clear(&inputs);
}

/* ---- lock and stamp ---- */

static char *state_dir(const char *project)
{
	char *d = xasprintf("%s/.gpurun", project);
	mkdir(d, 0700);
	return d;
}

int job_setup_lock(const char *project, const char *job_id,
		   void (*waiting)(void *arg, const char *holder), int (*stopped)(void *arg),
		   void *arg, struct gr_err *err)
{
	char *dir = state_dir(project), *p = xasprintf("%s/%s", project, SETUP_LOCK);
	int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);

	free(dir);
	if (fd < 0) {
		gr_errf(err, GR_EIO, "cannot open '%s': %s", p, strerror(errno));
		free(p);
		return -1;
	}
	free(p);
	for (int told = 0; flock(fd, LOCK_EX | LOCK_NB) < 0;) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			gr_errf(err, GR_EIO, "cannot lock the setup: %s", strerror(errno));
			close(fd);
			return -1;
		}
		if (!told++ && waiting) {
			char holder[64] = "";
			ssize_t n = pread(fd, holder, sizeof(holder) - 1, 0);
			holder[n > 0 ? n : 0] = '\0';
			holder[strcspn(holder, "\n")] = '\0';
			waiting(arg, holder);
		}
		if (stopped && stopped(arg)) {
			close(fd);
			return -2;
		}
		usleep(500 * 1000);
	}
	/* Say who holds it, for the next one waiting. */
	if (ftruncate(fd, 0) == 0 && pwrite(fd, job_id, strlen(job_id), 0) < 0) {
		/* only informative */
	}
	return fd;
}

void job_setup_unlock(int fd)
{
	if (fd >= 0) {
		if (ftruncate(fd, 0) < 0) {
			/* only informative */
		}
		close(fd);
	}
}

char *job_setup_stamp(const char *project)
{
	char *p = xasprintf("%s/%s", project, SETUP_STAMP);
	struct strbuf sb = STRBUF_INIT;

	read_file(p, &sb, NULL);
	free(p);
	while (sb.len && sb.buf[sb.len - 1] == '\n')
		sb.buf[--sb.len] = '\0';
	return sb.buf ? sb_detach(&sb, NULL) : xstrdup("");
}

int job_setup_stamp_write(const char *project, const char *key, struct gr_err *err)
{
	char *dir = state_dir(project), *p = xasprintf("%s/%s", project, SETUP_STAMP);
	char *text = xasprintf("%s\n", key);
	int rc = write_file_atomic(p, text, strlen(text), 0600, err);

	free(dir);
	free(p);
	free(text);
	return rc;
}
