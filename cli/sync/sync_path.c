/* The [remote] path check gpurun makes before connecting (the agent checks
 * again once it has resolved the path on the host: see remote/sync/sync_fs.c). */
#include <stdlib.h>
#include <string.h>

#include "sync.h"
#include "sync_manifest.h"

int sync_check_remote_path(const char *path, struct gr_err *err)
{
	const char *why = NULL;
	char *clean = NULL;

	if (!path || !*path || !strcmp(path, ".") || !strcmp(path, "./"))
		why = "it is the home folder";
	else if (path[0] == '~' && (path[1] == '\0' || path[1] == '/')) {
		char *abs = xasprintf("/home/HOME%s", path + 1);
		clean = sm_clean_path(abs);
		free(abs);
		if (strncmp(clean, "/home/HOME/", 11))
			why = "it is the home folder or above it";
	} else if (!strcmp(path, "$HOME") || !strcmp(path, "${HOME}") ||
		   !strncmp(path, "$HOME/", 6)) {
		why = "'$HOME' is not expanded; write '~' instead";
	} else if (path[0] == '/') {
		clean = sm_clean_path(path);
		why = sm_root_refused(clean, NULL);
	} else {
		char *abs = xasprintf("/home/HOME/%s", path);
		clean = sm_clean_path(abs);
		free(abs);
		if (strncmp(clean, "/home/HOME/", 11))
			why = "it is the home folder or above it";
	}
	free(clean);
	if (!why)
		return 0;
	gr_errf(err, GR_ECONFIG, "refusing to sync into '%s': %s", path ? path : "", why);
	gr_hintf(err, "set [remote] path to a project folder, e.g. 'path = ~/projects/NAME'");
	return GR_ECONFIG;
}
