/* Fuzz the gitignore parser and matcher (no filesystem): the input is a
 * .gitignore text, a NUL, then paths one per line; the first byte picks
 * core.ignoreCase and file/folder. Also wildmatch on the raw halves. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ignore_int.h"
#include "util.h"
#include "wildmatch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *nul;
	struct ig_list *l;
	unsigned flags;
	char *paths, *save = NULL, *p;

	if (size < 2 || size > 4096)
		return 0;
	flags = data[0];
	data++;
	size--;
	nul = memchr(data, '\0', size);
	if (!nul)
		return 0;
	l = ig_list_new("fuzz", (flags & 4) ? "sub" : "", (flags & 4) ? 3 : 0);
	ig_parse_buffer(l, (const char *)data, (size_t)(nul - (const char *)data));
	paths = xstrndup(nul + 1, size - (size_t)(nul + 1 - (const char *)data));
	for (p = strtok_r(paths, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
		const char *base = strrchr(p, '/');

		ig_list_match((flags & 1) ? WM_CASEFOLD : 0, l, p, (int)strlen(p),
			      base ? base + 1 : p, !!(flags & 2));
		wildmatch((const char *)data, p, (flags & 8) ? WM_PATHNAME : 0);
	}
	free(paths);
	ig_list_free(l);
	return 0;
}
