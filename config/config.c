/* Placeholder loader: a few keys, no origins. Replaced by the table-driven
 * implementation (config helper). */
#include <errno.h>
#include <ini.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

const struct gr_config_key *config_keys(size_t *n)
{
	*n = 0;
	return NULL;
}

static int set(struct gr_config *c, const char *key, const char *v, struct gr_err *err)
{
	char **s = NULL;

	long long ll;
	uint64_t sz;

	if (!strcmp(key, "remote.host")) s = &c->remote.host;
	else if (!strcmp(key, "remote.path")) s = &c->remote.path;
	else if (!strcmp(key, "remote.identity")) { free(c->remote.identity); c->remote.identity = expand_home(v); return 0; }
	else if (!strcmp(key, "remote.known_hosts")) { free(c->remote.known_hosts); c->remote.known_hosts = expand_home(v); return 0; }
	else if (!strcmp(key, "remote.connect_timeout")) { if (parse_ll(v, 0, 3600, &ll) < 0) return gr_errf(err, GR_ECONFIG, "bad %s", key); c->remote.connect_timeout = (int)ll; return 0; }
	else if (!strcmp(key, "build.command")) s = &c->build.command;
	else if (!strcmp(key, "train.command")) s = &c->train.command;
	else if (!strcmp(key, "train.gpus")) s = &c->train.gpus;
	else if (!strcmp(key, "train.stop_grace")) { if (parse_ll(v, 0, 3600, &ll) < 0) return gr_errf(err, GR_ECONFIG, "bad %s", key); c->train.stop_grace = (int)ll; return 0; }
	else if (!strcmp(key, "artifacts.interval")) { if (parse_ll(v, 0, 86400, &ll) < 0) return gr_errf(err, GR_ECONFIG, "bad %s", key); c->artifacts.interval = (int)ll; return 0; }
	else if (!strcmp(key, "sync.warn_size")) { if (parse_size(v, &sz) < 0) return gr_errf(err, GR_ECONFIG, "bad %s", key); c->sync.warn_size = sz; return 0; }
	else if (!strcmp(key, "sync.delta_min")) { if (parse_size(v, &sz) < 0) return gr_errf(err, GR_ECONFIG, "bad %s", key); c->sync.delta_min = sz; return 0; }
	else if (!strcmp(key, "sync.include_git")) { c->sync.include_git = !strcmp(v, "true") || !strcmp(v, "yes") || !strcmp(v, "1"); return 0; }
	else if (!strcmp(key, "hooks.pre_push")) s = &c->hooks.pre_push;
	else if (!strcmp(key, "sync.exclude") || !strcmp(key, "artifacts.pull")) {
		struct strvec *sv = key[0] == 's' ? &c->sync.exclude : &c->artifacts.pull;
		char *copy = xstrdup(v);
		for (char *w = copy, *save = NULL, *t; (t = strtok_r(w, " \t,", &save)); w = NULL)
			sv_push(sv, t);
		free(copy);
		return 0;
	}
	else if (!strcmp(key, "remote.transport")) {
		if (!strcmp(v, "local")) c->remote.transport = GR_TRANSPORT_LOCAL;
		else if (!strcmp(v, "openssh")) c->remote.transport = GR_TRANSPORT_OPENSSH;
		else c->remote.transport = GR_TRANSPORT_LIBSSH2;
		return 0;
	}
	if (!s)
		return gr_errf(err, GR_ECONFIG, "unknown key '%s'", key);
	free(*s);
	*s = xstrdup(v);
	return 0;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	char key[256];
	snprintf(key, sizeof(key), "%s.%s", section, name);
	return set(user, key, value, NULL) == 0;
}

int config_load(struct gr_config **out, const char *file, int allow_missing,
		struct gr_err *err)
{
	struct gr_config *c = xcalloc(1, sizeof(*c));
	char cwd[PATH_MAX];

	if (!getcwd(cwd, sizeof(cwd)))
		snprintf(cwd, sizeof(cwd), ".");
	c->root = xstrdup(cwd);
	c->remote.path = xstrdup("gpurun-project");
	c->remote.identity = xstrdup("");
	c->remote.known_hosts = xstrdup("");
	c->build.command = xstrdup("");
	c->train.command = xstrdup("");
	c->train.gpus = xstrdup("all");
	c->train.stop_grace = 10;
	c->artifacts.interval = 60;
	c->sync.warn_size = 1ULL << 30;
	c->sync.delta_min = 1ULL << 20;
	c->hooks.pre_push = xstrdup("");
	const char *f = file ? file : "gpurun.ini";
	if (access(f, F_OK) == 0) {
		c->file = xstrdup(f);
		if (ini_parse(f, handler, c) != 0) {
			config_free(c);
			return gr_errf(err, GR_ECONFIG, "%s: bad config", f);
		}
	} else if (!allow_missing) {
		config_free(c);
		gr_errf(err, GR_ENOTFOUND, "no gpurun.ini here or in any parent folder");
		gr_hintf(err, "run 'gpurun init' to create gpurun.ini");
		return GR_ECONFIG;
	}
	const char *h = getenv("GPURUN_REMOTE_HOST");
	if (h)
		set(c, "remote.host", h, NULL);
	if (!c->artifacts.pull.n)
		for (const char *d = "*.ckpt *.bin metrics.csv"; d; d = NULL)
			set(c, "artifacts.pull", d, NULL);
	*out = c;
	return 0;
}

int config_set(struct gr_config *cfg, const char *key, const char *value,
	       const char *origin, struct gr_err *err)
{
	(void)origin;
	return set(cfg, key, value, err);
}

int config_get(const struct gr_config *cfg, const char *key, struct strbuf *value,
	       const char **origin, struct gr_err *err)
{
	(void)cfg; (void)key; (void)value; (void)origin;
	return gr_errf(err, GR_ENOTFOUND, "unknown key '%s'", key);
}

void config_dump(const struct gr_config *cfg, struct strbuf *out, int json)
{
	(void)json;
	sb_addf(out, "remote.host = %s\n", cfg->remote.host ? cfg->remote.host : "");
}

int config_write_template(const char *path, struct gr_err *err)
{
	return gr_errf(err, GR_EUNSUPP, "cannot write '%s' yet", path);
}

void config_free(struct gr_config *cfg)
{
	if (!cfg)
		return;
	free(cfg->file); free(cfg->root);
	free(cfg->remote.host); free(cfg->remote.path); free(cfg->remote.identity);
	free(cfg->remote.known_hosts); free(cfg->build.command); free(cfg->train.command);
	free(cfg->train.gpus); free(cfg->hooks.pre_push);
	sv_clear(&cfg->sync.exclude); sv_clear(&cfg->artifacts.pull);
	free(cfg);
}
