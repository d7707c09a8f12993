/* Finding and running the host's tools (see run.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

char *run_which(const char *prog)
{
	const char *path = getenv("PATH");
	struct strbuf dirs = STRBUF_INIT;
	char *found = NULL;

	sb_addf(&dirs, "%s:/usr/local/cuda/bin:/usr/bin:/bin", path ? path : "");
	for (char *d = dirs.buf, *end; d && !found; d = end ? end + 1 : NULL) {
		end = strchr(d, ':');
		if (end)
			*end = '\0';
		if (!*d)
			continue;
		char *cand = xasprintf("%s/%s", d, prog);
		if (access(cand, X_OK) == 0)
			found = cand;
		else
			free(cand);
	}
	sb_release(&dirs);
	return found;
}
