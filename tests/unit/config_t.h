/* What the config unit tests share (test_config.c, test_config_user.c):
 * a scratch folder T, files written into it, the environment cleared of
 * GPURUN_*, no user config but the ones the cases write, config_get as a
 * string. Header-only: each test is a binary of its own. */
#ifndef GR_CONFIG_T_H
#define GR_CONFIG_T_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "t.h"

static char T[256];

static inline void write_text(const char *path, const char *text, size_t n)
{
	struct gr_err err = { 0 };
	if (write_file_atomic(path, text, n, 0644, &err) < 0)
		fprintf(stderr, "  %s\n", err.msg);
}

static inline void ini(const char *dir, const char *text)
{
	char *path = xasprintf("%s/%s/gpurun.ini", T, dir);
	char *d = xasprintf("%s/%s", T, dir);

	mkdir_p(d, 0755, NULL);
	write_text(path, text, strlen(text));
	free(path);
	free(d);
}

static inline void cd(const char *dir)
{
	char *d = xasprintf("%s/%s", T, dir);
	mkdir_p(d, 0755, NULL);
	if (chdir(d) < 0)
		fprintf(stderr, "  cannot cd %s: %s\n", d, strerror(errno));
	free(d);
}

static inline void clear_env(void)
{
	size_t n;
	const struct gr_config_key *k = config_keys(&n);

	for (size_t i = 0; i < n; i++) {
		char name[128];
		snprintf(name, sizeof(name), "GPURUN_%s_%s", k[i].section, k[i].name);
		for (char *p = name; *p; p++)
			if (*p >= 'a' && *p <= 'z')
				*p = (char)(*p - 'a' + 'A');
		unsetenv(name);
	}
}

/* config_get as a string, with the origin in *origin (static buffers). */
static inline const char *get(const struct gr_config *c, const char *key, const char **origin)
{
	static char buf[4][1024];
	static int slot;
	struct strbuf sb = STRBUF_INIT;
	struct gr_err err = { 0 };
	const char *o = NULL;
	char *b = buf[slot++ % 4];

	if (origin)
		*origin = NULL;
	if (config_get(c, key, &sb, &o, &err) < 0) {
		fprintf(stderr, "  config_get %s: %s\n", key, err.msg);
		sb_release(&sb);
		return NULL;
	}
	snprintf(b, sizeof(buf[0]), "%s", sb.buf);
	sb_release(&sb);
	if (origin)
		*origin = o;
	return b;
}

static inline void no_user_config(void)
{
	char *x = xasprintf("%s/no-xdg", T);
	setenv("XDG_CONFIG_HOME", x, 1);
	free(x);
}

static inline void user_config(const char *text)
{
	char *d = xasprintf("%s/xdg/gpurun", T), *path = xasprintf("%s/config", d);

	mkdir_p(d, 0755, NULL);
	if (text)
		write_text(path, text, strlen(text));
	else
		unlink(path);
	free(d);
	free(path);
}

/* The scratch folder, the environment cleared, no user config: 0, or -1. */
static inline int config_t_begin(void)
{
	snprintf(T, sizeof(T), "%s/gr-config.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(T)) {
		perror("mkdtemp");
		return -1;
	}
	clear_env();
	no_user_config(); /* none but the ones the cases write */
	return 0;
}

/* The scratch folder removed unless a case failed; the exit status. */
static inline int config_t_end(void)
{
	if (chdir("/") < 0)
		perror("chdir");
	if (!t_failed_cases) {
		char *cmd = xasprintf("rm -rf '%s'", T);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", T);
		free(cmd);
	} else {
		fprintf(stderr, "scratch folder kept: %s\n", T);
	}
	return T_DONE();
}

#endif
