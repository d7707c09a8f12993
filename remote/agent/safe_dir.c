/* Whose is the project folder (see safe_dir.h). The walk goes up from the
 * folder with lstat, since what it is given is already resolved: a
 * symlink met on the way means the path changed under us, and is refused
 * like any other doubt. Once every folder on the way is the user's or
 * root's and nobody else can write to it (or, for a parent, only with the
 * sticky bit, which stops others from renaming what is the user's), no
 * other account can change the path afterwards either. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "safe_dir.h"
#include "util.h"

static int preserve;

void safe_perms_preserve(int on)
{
	preserve = !!on;
}

mode_t safe_file_mode(uint32_t mode)
{
	return (mode_t)(mode & (preserve ? 0777 : 0700));
}

mode_t safe_dir_mode(void)
{
	return preserve ? 0755 : 0700;
}

static char *real_home(void)
{
	char buf[PATH_MAX];

	return realpath(agent_home(), buf) ? xstrdup(buf) : xstrdup(agent_home());
}

/* One folder on the way. */
static int check_one(const char *dir, const char *project, int is_project, struct gr_err *err)
{
	struct stat st;
	uid_t me = geteuid();
	char who[128];

	if (lstat(dir, &st) < 0)
		return gr_errf(err, GR_EINVAL, "refusing remote folder '%s': cannot check '%s': %s",
			       project, dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return gr_errf(err, GR_EINVAL, "refusing remote folder '%s': '%s' changed while it "
			       "was checked (it is not a folder now)", project, dir);
	if (st.st_uid != me && st.st_uid != 0) {
		uid_name(st.st_uid, who, sizeof(who));
		return gr_errf(err, GR_EINVAL, "refusing remote folder '%s': '%s' belongs to %s, "
			       "who could change what gpurun runs there; use a folder of your own "
			       "(e.g. [remote] path = ~/gpurun/<project>)", project, dir, who);
	}
	if (!(st.st_mode & 022))
		return 0;
	if (!is_project && (st.st_mode & S_ISVTX))
		return 0; /* like /tmp: others may add names, not take over ours */
	const char *whom = (st.st_mode & 022) == 022 ? "group and others" :
			   (st.st_mode & 020) ? "its group" : "others";
	return gr_errf(err, GR_EINVAL, "refusing remote folder '%s': '%s' is writable by %s "
		       "(mode %04o), who could change what gpurun runs there; fix: chmod go-w '%s'%s",
		       project, dir, whom, (unsigned)(st.st_mode & 07777), dir,
		       is_project ? "" : " (or chmod +t, as /tmp has)");
}

int safe_dir_check(const char *real, int is_project, struct gr_err *err)
{
	char *home = real_home(), *p = xstrdup(real);
	size_t hl = strlen(home);
	/* Below the home folder: up to and including it; else up to "/". */
	int below_home = strcmp(home, "/") && !strncmp(real, home, hl) &&
			 (real[hl] == '/' || real[hl] == '\0');
	int rc = 0, first = 1;

	for (;;) {
		if ((rc = check_one(p, real, is_project && first, err)) < 0)
			break;
		first = 0;
		if ((below_home && !strcmp(p, home)) || !strcmp(p, "/"))
			break;
		char *slash = strrchr(p, '/');
		if (!slash)
			break;
		if (slash == p)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	free(p);
	free(home);
	return rc;
}

int safe_dir_check_path(const char *path, int is_project, char **resolved,
			struct gr_err *err)
{
	char *p = xstrdup(path), buf[PATH_MAX];
	int rc, exact = 1;

	if (resolved)
		*resolved = NULL;
	/* The deepest part of the path that exists: a folder about to be
	 * made is only as safe as the one it is made in. */
	while (!realpath(p, buf)) {
		char *slash = strrchr(p, '/');
		if ((errno != ENOENT && errno != ENOTDIR) || !slash) {
			rc = gr_errf(err, GR_EINVAL, "refusing remote folder '%s': cannot resolve '%s': %s",
				     path, p, strerror(errno));
			free(p);
			return rc;
		}
		slash[slash == p] = '\0'; /* "/x" -> "/" */
		exact = 0;
	}
	rc = safe_dir_check(buf, is_project && exact, err);
	if (rc == 0 && resolved && exact)
		*resolved = xstrdup(buf);
	free(p);
	return rc;
}
