/* Loading gpurun.ini: the user config first, then the project's file
 * (found like git finds .git), each read by config_file.c, then GPURUN_*
 * environment, then command-line flags. Every value remembers where it
 * came from; [remote] host is expanded into its hosts ([pools]) once they
 * are all read. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compat.h" /* environ: macOS declares it nowhere */
#include "config_priv.h"

const struct gr_config_key *cfg_key_at(int i)
{
	size_t n;
	return &config_keys(&n)[i];
}

static const char *text_of(const struct priv *p, const char *dotted)
{
	int i = cfgk_find_dotted(dotted);
	return i >= 0 ? p->v[i].text : "";
}

/* Store a normalised value. Lists set again at the same level add up;
 * everything else is replaced. */
void cfg_store(struct priv *p, int i, const char *text, int layer, const char *origin,
	       int line)
{
	struct val *v = &p->v[i];

	if (cfg_key_at(i)->type == GR_KEY_LIST && v->layer == layer && layer != LAYER_DEFAULT) {
		char *t = *v->text && *text ? xasprintf("%s %s", v->text, text)
					    : xstrdup(*text ? text : v->text);
		free(v->text);
		v->text = t;
		if (layer == LAYER_FILE || layer == LAYER_USER) {
			char *o = xasprintf("%s,%d", v->origin, line);
			free(v->origin);
			v->origin = o;
		}
		return;
	}
	free(v->text);
	free(v->origin);
	v->text = xstrdup(text);
	v->origin = xstrdup(origin);
	v->layer = layer;
	v->line = line;
}

/* The words of a list's canonical text (quoted where needed by
 * cfgk_normalize, so config_words reads it back). */
static void split_list(struct strvec *sv, const char *text)
{
	sv_clear(sv);
	config_words(text, ",", sv, NULL);
}

static int int_of(const struct priv *p, const char *dotted)
{
	long long n = 0;
	parse_ll(text_of(p, dotted), -(1LL << 62), 1LL << 62, &n);
	return (int)n;
}

static uint64_t size_of(const struct priv *p, const char *dotted)
{
	uint64_t n = 0;
	parse_size(text_of(p, dotted), &n);
	return n;
}

static void set_str(char **field, const char *v)
{
	free(*field);
	*field = xstrdup(v);
}

/* Copy the values into the struct fields everyone else reads. */
static void fill(struct gr_config *c)
{
	const struct priv *p = c->origins;
	const char *t = text_of(p, "remote.transport");

	free(c->remote.host);
	c->remote.host = p->hosts.n ? xstrdup(p->hosts.v[0]) : NULL;
	c->remote.hosts = p->hosts.v;
	c->remote.nhosts = p->hosts.n;
	set_str(&c->remote.pool, p->pool ? p->pool : "");
	set_str(&c->remote.path, text_of(p, "remote.path"));
	set_str(&c->remote.jobs_dir, text_of(p, "remote.jobs_dir"));
	c->remote.transport = !strcmp(t, "local") ? GR_TRANSPORT_LOCAL :
			      !strcmp(t, "openssh") ? GR_TRANSPORT_OPENSSH : GR_TRANSPORT_LIBSSH2;
	set_str(&c->remote.identity, text_of(p, "remote.identity"));
	set_str(&c->remote.known_hosts, text_of(p, "remote.known_hosts"));
	c->remote.connect_timeout = int_of(p, "remote.connect_timeout");
	if (config_linger(text_of(p, "remote.persist"), &c->remote.persist, NULL) < 0)
		c->remote.persist = 0; /* checked when set */
	split_list(&c->sync.exclude, text_of(p, "sync.exclude"));
	c->sync.warn_size = size_of(p, "sync.warn_size");
	c->sync.delta_min = size_of(p, "sync.delta_min");
	c->sync.include_git = !strcmp(text_of(p, "sync.include_git"), "true");
	c->sync.preserve_perms = !strcmp(text_of(p, "sync.preserve_perms"), "true");
	split_list(&c->sync.include, text_of(p, "sync.include"));
	set_str(&c->setup.command, text_of(p, "setup.command"));
	split_list(&c->setup.inputs, text_of(p, "setup.inputs"));
	set_str(&c->build.command, text_of(p, "build.command"));
	set_str(&c->train.command, text_of(p, "train.command"));
	set_str(&c->train.shell, text_of(p, "train.shell"));
	set_str(&c->train.output, text_of(p, "train.output"));
	set_str(&c->train.env, text_of(p, "train.env"));
	split_list(&c->train.persist, text_of(p, "train.persist"));
	set_str(&c->train.gpus, text_of(p, "train.gpus"));
	c->train.stop_grace = int_of(p, "train.stop_grace");
	if (config_duration(text_of(p, "train.time_limit"), &c->train.time_limit, NULL) < 0)
		c->train.time_limit = 0; /* checked when set */
	c->train.retries = int_of(p, "train.retries");
	set_str(&c->notify.command, text_of(p, "notify.command"));
	set_str(&c->notify.local, text_of(p, "notify.local"));
	split_list(&c->artifacts.pull, text_of(p, "artifacts.pull"));
	c->artifacts.interval = int_of(p, "artifacts.interval");
	c->artifacts.min_free = int_of(p, "artifacts.min_free");
	c->jobs.keep = int_of(p, "jobs.keep");
	set_str(&c->container.image, text_of(p, "container.image"));
	set_str(&c->container.runtime, text_of(p, "container.runtime"));
	sv_clear(&c->container.options);
	config_split_words(text_of(p, "container.options"), &c->container.options);
	split_list(&c->container.mounts, text_of(p, "container.mounts"));
	set_str(&c->container.user, text_of(p, "container.user"));
	set_str(&c->hooks.pre_push, text_of(p, "hooks.pre_push"));
	c->slurm_on = !strcmp(text_of(p, "remote.scheduler"), "slurm");
	set_str(&c->slurm.partition, text_of(p, "slurm.partition"));
	set_str(&c->slurm.account, text_of(p, "slurm.account"));
	set_str(&c->slurm.qos, text_of(p, "slurm.qos"));
	set_str(&c->slurm.time, text_of(p, "slurm.time"));
	set_str(&c->slurm.mem, text_of(p, "slurm.mem"));
	set_str(&c->slurm.constraint, text_of(p, "slurm.constraint"));
	set_str(&c->slurm.gpu_type, text_of(p, "slurm.gpu_type"));
	set_str(&c->slurm.gpu_flag, text_of(p, "slurm.gpu_flag"));
	set_str(&c->slurm.build_on, text_of(p, "slurm.build_on"));
	c->slurm.nodes = int_of(p, "slurm.nodes");
	c->slurm.ntasks_per_node = int_of(p, "slurm.ntasks_per_node");
	c->slurm.cpus_per_task = int_of(p, "slurm.cpus_per_task");
	c->slurm.signal_before = int_of(p, "slurm.signal_before");
	c->slurm.requeue = !strcmp(text_of(p, "slurm.requeue"), "true");
	c->slurm.resubmit = !strcmp(text_of(p, "slurm.resubmit"), "true");
	c->slurm.max_resubmits = int_of(p, "slurm.max_resubmits");
	sv_clear(&c->slurm.options);
	config_split_words(text_of(p, "slurm.options"), &c->slurm.options);
}

/* ---- [remote] host and [pools] ----------------------------------------- */

struct pool *cfg_pool_find(const struct priv *p, const char *name)
{
	for (size_t i = 0; i < p->npools; i++)
		if (!strcmp(p->pools[i].name, name))
			return &p->pools[i];
	return NULL;
}

/* Expand [remote] host into p->hosts and p->pool, with the checks that
 * can only be made once every file is read (a pool may be defined in the
 * user config and named by the project). 0, or -1 with why, hint and
 * where (the origin to blame) set. */
static int resolve_hosts(struct priv *p, struct strbuf *why, struct strbuf *hint,
			 const char **where)
{
	const struct val *hv = &p->v[cfgk_find_dotted("remote.host")];
	struct strvec toks = STRVEC_INIT;
	const struct pool *pool = NULL;
	int rc = -1;

	for (size_t i = 0; i < p->npools; i++) {
		split_list(&toks, p->pools[i].text);
		for (size_t j = 0; j < toks.n; j++)
			if (cfg_pool_find(p, toks.v[j])) {
				sb_addf(why, "pool '%s' lists '%s', which is a pool too", p->pools[i].name,
					toks.v[j]);
				sb_addf(hint, "a pool lists hosts, not pools: write out the hosts of '%s'",
					toks.v[j]);
				*where = p->pools[i].origin;
				goto out;
			}
	}
	split_list(&toks, hv->text);
	for (size_t j = 0; j < toks.n; j++) {
		const struct pool *q = cfg_pool_find(p, toks.v[j]);
		if (q && toks.n > 1) {
			sb_addf(why, "host lists '%s', which is a pool (%s)", q->name, q->origin);
			sb_addf(hint, "name a pool alone (host = %s), or list hosts only", q->name);
			*where = hv->origin;
			goto out;
		}
		pool = q;
	}
	sv_clear(&p->hosts);
	free(p->pool);
	p->pool = xstrdup(pool ? pool->name : "");
	split_list(&p->hosts, pool ? pool->text : hv->text);
	if (p->hosts.n > 1 && !strcmp(text_of(p, "remote.scheduler"), "slurm")) {
		sb_addf(why, "host names %zu hosts%s%s%s, but scheduler = slurm (%s) takes one: a pool "
			"is for plain SSH hosts; a Slurm cluster is reached through one login host",
			p->hosts.n, pool ? " (pool '" : "", pool ? pool->name : "", pool ? "')" : "",
			p->v[cfgk_find_dotted("remote.scheduler")].origin);
		sb_adds(hint, "set [remote] host to the cluster's login node");
		*where = hv->origin;
		goto out;
	}
	rc = 0;
out:
	sv_clear(&toks);
	return rc;
}

/* ---- finding it --------------------------------------------------------- */

/* The user config: $XDG_CONFIG_HOME/gpurun/config (only an absolute
 * XDG_CONFIG_HOME counts, as the XDG spec says), else
 * ~/.config/gpurun/config; NULL without a home. *disp: with ~ for $HOME. */
static char *user_config_path(char **disp)
{
	const char *xdg = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	size_t hl = home ? strlen(home) : 0;
	char *path;

	*disp = NULL;
	if (xdg && xdg[0] == '/')
		path = xasprintf("%s/gpurun/config", xdg);
	else if (home && home[0] == '/')
		path = xasprintf("%s%s.config/gpurun/config", home, home[hl - 1] == '/' ? "" : "/");
	else
		return NULL;
	while (hl > 1 && home[hl - 1] == '/')
		hl--;
	if (hl > 1 && !strncmp(path, home, hl) && path[hl] == '/')
		*disp = xasprintf("~%s", path + hl);
	else
		*disp = xstrdup(path);
	return path;
}

/* Load the user config into LAYER_USER, if there is one: missing is
 * fine, anything else that stops reading it is an error naming it. */
static int load_user(struct gr_config *c, struct gr_err *err)
{
	struct priv *p = c->origins;
	char *disp = NULL, *path = user_config_path(&disp);
	struct stat st;
	int rc = 0;

	if (!path)
		return 0;
	if (stat(path, &st) < 0) {
		if (errno != ENOENT && errno != ENOTDIR) {
			rc = gr_errf(err, GR_ECONFIG, "cannot read the user config '%s': %s", disp,
				     strerror(errno));
			gr_hintf(err, "fix its permissions, or move it away to go without one");
		}
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = gr_errf(err, GR_ECONFIG, "cannot read the user config '%s': not a file", disp);
		gr_hintf(err, "the user config is a file in gpurun.ini's syntax; move this away");
		goto out;
	}
	if ((rc = cfg_load_file(c, path, disp, LAYER_USER, err)) < 0) {
		if (!strncmp(err->msg, "cannot open", 11))
			gr_hintf(err, "fix its permissions, or move it away to go without one");
		goto out;
	}
	c->user_file = path;
	path = NULL;
	p->user_disp = disp;
	disp = NULL;
out:
	free(path);
	free(disp);
	return rc;
}

static int find_ini(const char *cwd, char **abs, char **disp)
{
	char *dir = xstrdup(cwd);
	struct strbuf up = STRBUF_INIT;
	int found = 0;

	for (;;) {
		char *path = xasprintf("%s/gpurun.ini", strcmp(dir, "/") ? dir : "");
		if (access(path, F_OK) == 0) {
			*abs = path;
			*disp = xasprintf("%sgpurun.ini", up.len ? up.buf : "");
			found = 1;
			break;
		}
		free(path);
		char *slash = strrchr(dir, '/');
		if (!slash || !strcmp(dir, "/"))
			break;
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
		sb_adds(&up, "../");
	}
	free(dir);
	sb_release(&up);
	return found;
}

static char *dir_of(const char *abs)
{
	const char *slash = strrchr(abs, '/');
	return slash == abs ? xstrdup("/") : xstrndup(abs, (size_t)(slash - abs));
}

int config_load(struct gr_config **out, const char *file, int allow_missing,
		struct gr_err *err)
{
	struct gr_config *c = xcalloc(1, sizeof(*c));
	struct priv *p = xcalloc(1, sizeof(*p));
	const struct gr_config_key *keys = config_keys(&p->n);
	char cwd[PATH_MAX], *abs = NULL, *disp = NULL;
	const char *project;
	int rc = 0;

	*out = NULL;
	c->origins = p;
	p->v = xcalloc(p->n, sizeof(*p->v));
	if (!getcwd(cwd, sizeof(cwd))) {
		rc = gr_errf(err, GR_EIO, "cannot find the current folder: %s", strerror(errno));
		goto out;
	}
	if (file) {
		/* the folder holding it, as getcwd would name it: no "..", no links */
		char *given = file[0] == '/' ? xstrdup(file) : xasprintf("%s/%s", cwd, file);
		char *dir = dir_of(given), *real = realpath(dir, NULL);
		abs = real ? xasprintf("%s/%s", strcmp(real, "/") ? real : "", strrchr(given, '/') + 1)
			   : xstrdup(given);
		free(real);
		free(dir);
		free(given);
		disp = xstrdup(file);
	} else if (!find_ini(cwd, &abs, &disp) && !allow_missing) {
		rc = gr_errf(err, GR_ECONFIG, "no gpurun.ini in '%s' or any parent folder", cwd);
		gr_hintf(err, "run 'gpurun init' to create one");
		goto out;
	}
	c->file = abs;
	abs = NULL;
	c->root = c->file ? dir_of(c->file) : xstrdup(cwd);
	p->disp = disp ? disp : xstrdup("gpurun.ini");
	disp = NULL;

	project = strrchr(c->root, '/') ? strrchr(c->root, '/') + 1 : c->root;
	if (!*project)
		project = "project";
	for (size_t i = 0; i < p->n; i++) {
		char *def = cfgk_default(&keys[i], project);
		cfg_store(p, (int)i, def, LAYER_DEFAULT, "default", 0);
		free(def);
	}
	if ((rc = load_user(c, err)) < 0)
		goto out;
	/* by the name messages use: as given to -c, or relative to the cwd */
	if (c->file && (rc = cfg_load_file(c, p->disp, p->disp, LAYER_FILE, err)) < 0)
		goto out;

	for (size_t i = 0; i < p->n; i++) {
		struct strbuf name = STRBUF_INIT, norm = STRBUF_INIT, why = STRBUF_INIT;
		const char *v;

		cfgk_env_name(&keys[i], &name);
		v = getenv(name.buf);
		if (v && *v) {
			if (cfgk_normalize(&keys[i], v, &norm, &why) < 0) {
				rc = gr_errf(err, GR_ECONFIG, "%s: invalid value '%s' for %s.%s: %s",
					     name.buf, v, keys[i].section, keys[i].name, why.buf);
			} else {
				char *origin = xasprintf("env %s", name.buf);
				cfg_store(p, (int)i, norm.buf, LAYER_ENV, origin, 0);
				free(origin);
			}
		}
		sb_release(&name);
		sb_release(&norm);
		sb_release(&why);
		if (rc < 0)
			goto out;
	}
	cfgk_env_warnings(environ, &c->warnings);
	{
		struct strbuf why = STRBUF_INIT, hint = STRBUF_INIT;
		const char *where = "";
		if (resolve_hosts(p, &why, &hint, &where) < 0) {
			rc = gr_errf(err, GR_ECONFIG, "%s: %s", where, why.buf);
			gr_hintf(err, "%s", hint.buf);
		}
		sb_release(&why);
		sb_release(&hint);
		if (rc < 0)
			goto out;
	}
	fill(c);
	*out = c;
	c = NULL;
out:
	free(abs);
	free(disp);
	config_free(c);
	return rc;
}

int config_set(struct gr_config *cfg, const char *key, const char *value,
	       const char *origin, struct gr_err *err)
{
	struct priv *p = cfg->origins;
	struct strbuf norm = STRBUF_INIT, why = STRBUF_INIT, hint = STRBUF_INIT;
	int i = cfgk_find_dotted(key), rc = 0;

	if (!origin)
		origin = "-o";
	if (i < 0) {
		rc = gr_errf(err, GR_EUSAGE, "%s: unknown key '%s'", origin, key);
		cfgk_hint_dotted(key, &hint);
		gr_hintf(err, "%s", hint.buf);
	} else if (cfgk_normalize(cfg_key_at(i), value, &norm, &why) < 0) {
		rc = gr_errf(err, GR_EUSAGE, "%s: invalid value '%s' for %s: %s", origin, value, key,
			     why.buf);
	} else {
		struct val old = p->v[i];
		const char *where = "";

		old.text = xstrdup(old.text);
		old.origin = xstrdup(old.origin);
		cfg_store(p, i, norm.buf, LAYER_FLAG, origin, 0);
		if (resolve_hosts(p, &why, &hint, &where) < 0) {
			/* a refused value changes nothing */
			rc = gr_errf(err, GR_EUSAGE, "%s: %s", origin, why.buf);
			if (strcmp(where, origin))
				sb_addf(&hint, "%s(the other value is from %s)", hint.len ? " " : "",
					where);
			gr_hintf(err, "%s", hint.buf);
			free(p->v[i].text);
			free(p->v[i].origin);
			p->v[i] = old;
			sb_reset(&why);
			sb_reset(&hint);
			resolve_hosts(p, &why, &hint, &where);
		} else {
			free(old.text);
			free(old.origin);
		}
		fill(cfg);
	}
	sb_release(&norm);
	sb_release(&why);
	sb_release(&hint);
	return rc;
}

int config_get(const struct gr_config *cfg, const char *key, struct strbuf *value,
	       const char **origin, struct gr_err *err)
{
	const struct priv *p = cfg->origins;
	struct strbuf hint = STRBUF_INIT;
	int i = cfgk_find_dotted(key);

	if (!strncmp(key, "pools.", 6) && cfg_pool_find(p, key + 6)) {
		sb_adds(value, cfg_pool_find(p, key + 6)->text);
		if (origin)
			*origin = cfg_pool_find(p, key + 6)->origin;
		return 0;
	}
	if (i < 0 && !strchr(key, '.')) {
		/* a bare name, when only one section has it */
		size_t n, found = 0;
		const struct gr_config_key *k = config_keys(&n);
		for (size_t j = 0; j < n; j++)
			if (!strcmp(k[j].name, key)) {
				if (found++)
					sb_adds(&hint, " or ");
				sb_addf(&hint, "%s%s.%s", found == 1 ? "say " : "", k[j].section, k[j].name);
				i = (int)j;
			}
		if (found > 1)
			i = -1;
	}
	if (i < 0) {
		gr_errf(err, GR_ENOTFOUND, "unknown key '%s'", key);
		if (!hint.len)
			cfgk_hint_dotted(key, &hint);
		gr_hintf(err, "%s", hint.buf);
		sb_release(&hint);
		return GR_ENOTFOUND;
	}
	sb_release(&hint);
	sb_adds(value, p->v[i].text);
	if (origin)
		*origin = p->v[i].origin;
	return 0;
}

static void json_value(struct strbuf *out, const struct gr_config_key *k, const char *text)
{
	if (k->type == GR_KEY_INT || k->type == GR_KEY_BOOL) {
		sb_adds(out, text);
	} else if (k->type == GR_KEY_LIST) {
		struct strvec sv = STRVEC_INIT;
		split_list(&sv, text);
		sb_adds(out, "[");
		for (size_t i = 0; i < sv.n; i++) {
			if (i)
				sb_adds(out, ", ");
			json_str(out, sv.v[i]);
		}
		sb_adds(out, "]");
		sv_clear(&sv);
	} else {
		json_str(out, text);
	}
}

void config_dump(const struct gr_config *cfg, struct strbuf *out, int json)
{
	const struct priv *p = cfg->origins;
	const struct gr_config_key *k = config_keys(&(size_t){ 0 });
	size_t kw = 0, vw = 0;

	if (json) {
		sb_adds(out, "{\n  \"file\": ");
		if (cfg->file)
			json_str(out, cfg->file);
		else
			sb_adds(out, "null");
		sb_adds(out, ",\n  \"user_file\": ");
		if (cfg->user_file)
			json_str(out, cfg->user_file);
		else
			sb_adds(out, "null");
		sb_adds(out, ",\n  \"root\": ");
		json_str(out, cfg->root);
		sb_adds(out, ",\n  \"keys\": {\n");
		for (size_t i = 0; i < p->n; i++) {
			char *name = xasprintf("%s.%s", k[i].section, k[i].name);
			sb_adds(out, "    ");
			json_str(out, name);
			sb_adds(out, ": {\"value\": ");
			json_value(out, &k[i], p->v[i].text);
			sb_adds(out, ", \"origin\": ");
			json_str(out, p->v[i].origin);
			sb_addf(out, "}%s\n", i + 1 < p->n ? "," : "");
			free(name);
		}
		sb_adds(out, "  },\n  \"pools\": {");
		for (size_t i = 0; i < p->npools; i++) {
			sb_adds(out, i ? ",\n    " : "\n    ");
			json_str(out, p->pools[i].name);
			sb_adds(out, ": {\"value\": ");
			json_value(out, &(struct gr_config_key){ .type = GR_KEY_LIST }, p->pools[i].text);
			sb_adds(out, ", \"origin\": ");
			json_str(out, p->pools[i].origin);
			sb_adds(out, "}");
		}
		sb_adds(out, p->npools ? "\n  }\n}\n" : "}\n}\n");
		return;
	}
	for (size_t i = 0; i < p->n; i++) {
		size_t n = strlen(k[i].section) + 1 + strlen(k[i].name), t = strlen(p->v[i].text);
		kw = n > kw ? n : kw;
		t = t ? t : 2;
		vw = t > vw ? t : vw;
	}
	for (size_t i = 0; i < p->npools; i++) {
		size_t n = strlen("pools.") + strlen(p->pools[i].name), t = strlen(p->pools[i].text);
		kw = n > kw ? n : kw;
		vw = t > vw ? t : vw;
	}
	vw = vw > 40 ? 40 : vw;
	sb_addf(out, "# %s\n", cfg->file ? cfg->file : "no gpurun.ini: defaults and environment");
	if (cfg->user_file)
		sb_addf(out, "# user config %s\n", p->user_disp);
	for (size_t i = 0; i < p->n; i++) {
		char *name = xasprintf("%s.%s", k[i].section, k[i].name);
		const char *t = *p->v[i].text ? p->v[i].text : "\"\"";
		sb_addf(out, "%-*s  %-*s  %s\n", (int)kw, name, (int)vw, t, p->v[i].origin);
		free(name);
	}
	for (size_t i = 0; i < p->npools; i++) {
		char *name = xasprintf("pools.%s", p->pools[i].name);
		sb_addf(out, "%-*s  %-*s  %s\n", (int)kw, name, (int)vw, p->pools[i].text,
			p->pools[i].origin);
		free(name);
	}
}

int config_write_template(const char *path, struct gr_err *err)
{
	struct strbuf text = STRBUF_INIT;
	struct stat st;
	char *dir, *real = NULL, *tmp = NULL;
	const char *slash = strrchr(path, '/'), *project;
	int fd = -1, rc = 0;

	if (lstat(path, &st) == 0) {
		gr_errf(err, GR_EEXIST, "'%s' already exists", path);
		gr_hintf(err, "edit it, or remove it to start over");
		return GR_EEXIST;
	}
	dir = slash ? (slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path)))
		    : xstrdup(".");
	real = realpath(dir, NULL);
	if (!real) {
		rc = gr_errf(err, GR_EIO, "cannot write '%s': %s", path, strerror(errno));
		goto out;
	}
	project = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
	struct cfg_profile prof;
	cfgk_profile_detect(real, &prof);
	cfgk_template(&text, *project ? project : "project", &prof);
	cfgk_profile_free(&prof);

	/* Write beside it, then link: link() refuses to replace a file that
	 * appeared meanwhile, where rename() would overwrite it. */
	tmp = xasprintf("%s.tmp.%ld", path, (long)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = gr_errf(err, GR_EIO, "cannot create '%s': %s", tmp, strerror(errno));
		goto out;
	}
	if (write_full(fd, text.buf, text.len) < 0 || fsync(fd) < 0 || close(fd) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot write '%s': %s", tmp, strerror(errno));
		fd = -1;
		unlink(tmp);
		goto out;
	}
	fd = -1;
	if (link(tmp, path) < 0) {
		if (errno == EEXIST) {
			rc = gr_errf(err, GR_EEXIST, "'%s' already exists", path);
			gr_hintf(err, "edit it, or remove it to start over");
		} else {
			rc = gr_errf(err, GR_EIO, "cannot write '%s': %s", path, strerror(errno));
		}
	}
	unlink(tmp);
out:
	if (fd >= 0)
		close(fd);
	free(tmp);
	free(real);
	free(dir);
	sb_release(&text);
	return rc;
}

void config_free(struct gr_config *cfg)
{
	struct priv *p;

	if (!cfg)
		return;
	p = cfg->origins;
	if (p) {
		for (size_t i = 0; i < p->n && p->v; i++) {
			free(p->v[i].text);
			free(p->v[i].origin);
		}
		free(p->v);
		free(p->disp);
		free(p->user_disp);
		for (size_t i = 0; i < p->npools; i++) {
			free(p->pools[i].name);
			free(p->pools[i].text);
			free(p->pools[i].origin);
		}
		free(p->pools);
		sv_clear(&p->hosts);
		free(p->pool);
		free(p);
	}
	free(cfg->file); free(cfg->root); free(cfg->user_file);
	free(cfg->remote.host); free(cfg->remote.path); free(cfg->remote.identity);
	free(cfg->remote.pool); free(cfg->remote.jobs_dir);
	free(cfg->remote.known_hosts); free(cfg->build.command); free(cfg->train.command);
	free(cfg->train.gpus); free(cfg->hooks.pre_push);
	free(cfg->notify.command); free(cfg->notify.local);
	free(cfg->setup.command); free(cfg->train.shell); free(cfg->train.output); free(cfg->train.env);
	sv_clear(&cfg->sync.exclude); sv_clear(&cfg->artifacts.pull);
	sv_clear(&cfg->sync.include); sv_clear(&cfg->setup.inputs); sv_clear(&cfg->train.persist);
	free(cfg->slurm.partition); free(cfg->slurm.account); free(cfg->slurm.qos);
	free(cfg->slurm.time); free(cfg->slurm.mem); free(cfg->slurm.constraint);
	free(cfg->slurm.gpu_type); free(cfg->slurm.gpu_flag); free(cfg->slurm.build_on);
	sv_clear(&cfg->slurm.options);
	free(cfg->container.image); free(cfg->container.runtime); free(cfg->container.user);
	sv_clear(&cfg->container.options); sv_clear(&cfg->container.mounts);
	sv_clear(&cfg->warnings);
	free(cfg);
}
