/* [notify] local (job_notify_local.h): a bell, or a desktop notification
 * through notify-send, when a followed job ends: the user may have turned
 * to another window while a long job ran. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job_notify_local.h"
#include "job_show.h"
#include "term.h"

/* prog's full path in an absolute folder of PATH (new string), or NULL. */
static char *find_on_path(const char *prog)
{
	const char *path = getenv("PATH");
	char *dirs = xstrdup(path ? path : ""), *found = NULL;
	struct stat st;

	for (char *d = dirs, *end; d && !found; d = end ? end + 1 : NULL) {
		end = strchr(d, ':');
		if (end)
			*end = '\0';
		if (d[0] != '/')
			continue; /* a relative folder means the current one: never */
		char *cand = xasprintf("%s/%s", d, prog);
		if (stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0)
			found = cand;
		else
			free(cand);
	}
	free(dirs);
	return found;
}

static int has_display(void)
{
	const char *x = getenv("DISPLAY"), *w = getenv("WAYLAND_DISPLAY");

	return (x && *x) || (w && *w);
}

static void bell(void)
{
	if (isatty(2) && write(2, "\a", 1) < 0) {
		/* the terminal is gone: no one to ring for */
	}
}

/* Run notify-send at path; 0 when it exited 0 in time, else -1 with why
 * (a new string). */
static int desktop(const char *path, const struct job_rec *r, char **why)
{
	char who[JOB_SHOWN_MAX + 8], title[JOB_SHOWN_MAX + 64];
	struct strbuf body = STRBUF_INIT;
	int status = 0, rc = -1;
	pid_t pid;

	snprintf(who, sizeof(who), "%s", r->name && *r->name ? r->name : r->id);
	snprintf(title, sizeof(title), "gpurun: %s %s", who, r->state);
	job_describe_end(r, &body);
	sb_addf(&body, " (job %s)", r->id);
	/* Made before the fork: the child only execs. */
	const char *argv[] = { path, "--app-name=gpurun", title, body.buf, NULL };
	pid = fork();
	if (pid < 0) {
		*why = xasprintf("fork: %s", strerror(errno));
		goto out;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		sigset_t none;
		dup2(nul, 0);
		dup2(nul, 1);
		for (int sg = 1; sg < NSIG; sg++)
			signal(sg, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		execv(path, (char *const *)argv);
		_exit(127);
	}
	uint64_t deadline = now_ms() + JOB_NOTIFY_SEND_MS;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR) {
			*why = xasprintf("waitpid: %s", strerror(errno));
			goto out;
		}
		if (now_ms() >= deadline) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
				;
			*why = xasprintf("%s did not finish in %d s", path, JOB_NOTIFY_SEND_MS / 1000);
			goto out;
		}
		struct timespec nap = { 0, 20 * 1000 * 1000 };
		nanosleep(&nap, NULL);
	}
	if (exit_code_of(status) != 0) {
		*why = xasprintf("%s exited with status %d", path, exit_code_of(status));
		goto out;
	}
	rc = 0;
out:
	sb_release(&body);
	return rc;
}

void job_notify_local(const struct gr_ctx *ctx, const struct job_rec *r)
{
	const char *how = ctx->cfg->notify.local ? ctx->cfg->notify.local : "auto";
	char *path = NULL, *why = NULL;

	if (!strcmp(how, "none") || (!strcmp(how, "auto") && ctx->quiet))
		return;
	if (!strcmp(how, "bell")) {
		bell();
		return;
	}
	path = find_on_path("notify-send");
	if (!strcmp(how, "auto")) {
		/* A desktop that cannot be told rings instead, without a
		 * warning: auto asked for nothing in particular. */
		if (!path || !has_display() || desktop(path, r, &why) < 0)
			bell();
	} else if (!path) {
		why = xstrdup("notify-send is not on PATH");
	} else {
		desktop(path, r, &why);
	}
	if (why && strcmp(how, "auto") && !ctx->quiet)
		fprintf(stderr, "gpurun: warning: [notify] local = desktop: %s\n", ts(why));
	free(why);
	free(path);
}
