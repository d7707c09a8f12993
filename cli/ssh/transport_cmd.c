/* The command every transport runs on the host: the script, quoted for a
 * POSIX shell, behind `exec /bin/sh -c` so the user's login shell, whatever
 * it is, gets one plain string. Below the three kinds, which all use it. */
#include <stdlib.h>

#include "transport.h"

char *tr_command_line(const struct tr_cmd *cmd)
{
	struct strbuf arg = STRBUF_INIT;
	char *q = sh_quote(cmd->script), *line;

	if (cmd->late)
		cmd->late(cmd->late_arg, &arg);
	if (arg.len) {
		char *qa = sh_quote(arg.buf);
		line = xasprintf("exec /bin/sh -c %s gpurun %s", q, qa);
		free(qa);
	} else {
		line = xasprintf("exec /bin/sh -c %s", q);
	}
	sb_release(&arg);
	free(q);
	return line;
}


char *sh_quote(const char *s)
{
	struct strbuf sb = STRBUF_INIT;

	sb_add(&sb, "'", 1);
	for (; *s; s++) {
		if (*s == '\'')
			sb_adds(&sb, "'\\''");
		else
			sb_add(&sb, s, 1);
	}
	sb_add(&sb, "'", 1);
	return sb_detach(&sb, NULL);
}
