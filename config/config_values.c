/* Values of gpurun.ini keys: each type's and each key's check, and the
 * canonical text a value is kept as (cfgk_normalize). The table of keys
 * that names these checks is in config_keys.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"

/* ---- validation -------------------------------------------------------- */

static const char *control_chars(const char *v)
{
	for (const char *p = v; *p; p++)
		if (iscntrl((unsigned char)*p) && *p != '\t')
			return "contains a control character";
	return NULL;
}

const char *cfgk_check_text(const char *v, struct strbuf *norm)
{
	(void)norm;
	return control_chars(v);
}

/* ---- [train] env and --env ---------------------------------------------- */

int config_env_word_ok(const char *kv, struct strbuf *why)
{
	const char *eq = strchr(kv, '=');

	if (!eq || eq == kv) {
		sb_addf(why, "'%s' is not NAME=VALUE", kv);
		return -1;
	}
	for (const char *p = kv; p < eq; p++)
		if (!(isalpha((unsigned char)*p) || *p == '_' || (p > kv && isdigit((unsigned char)*p)))) {
			sb_addf(why, "'%.*s' is not a variable name (letters, digits, _; not a digit "
				"first)", (int)(eq - kv), kv);
			return -1;
		}
	for (const char *p = eq + 1; *p; p++)
		if (iscntrl((unsigned char)*p) && *p != '\t') {
			sb_addf(why, "the value of %.*s holds a control character", (int)(eq - kv), kv);
			return -1;
		}
	return 0;
}

/* The one splitter of shell-like words ([train] env, list keys, [slurm]
 * and [container] options): blanks (and any of seps) separate words;
 * '...' keeps everything; "..." keeps everything but \" \\ \$ \`, whose
 * backslash goes; outside quotes a backslash keeps the next character.
 * Nothing is expanded. '' is an empty word. */
int config_words(const char *s, const char *seps, struct strvec *out, struct strbuf *why)
{
	struct strbuf w = STRBUF_INIT;
	int rc = 0;

	for (const char *p = s; rc == 0;) {
		int have = 0;
		while (*p == ' ' || *p == '\t' || (*p && strchr(seps, *p)))
			p++;
		if (!*p)
			break;
		sb_reset(&w);
		while (*p && *p != ' ' && *p != '\t' && !strchr(seps, *p) && rc == 0) {
			have = 1;
			if (*p == '\'') {
				const char *end = strchr(p + 1, '\'');
				if (!end) {
					sb_adds(why, "a ' is not closed");
					rc = -1;
					break;
				}
				sb_add(&w, p + 1, (size_t)(end - p - 1));
				p = end + 1;
			} else if (*p == '"') {
				for (p++; *p && *p != '"'; p++) {
					if (*p == '\\' && p[1] && strchr("\"\\$`", p[1]))
						p++;
					sb_add(&w, p, 1);
				}
				if (*p != '"') {
					sb_adds(why, "a \" is not closed");
					rc = -1;
					break;
				}
				p++;
			} else if (*p == '\\') {
				if (!p[1]) {
					sb_adds(why, "a \\ ends the value");
					rc = -1;
					break;
				}
				sb_add(&w, p + 1, 1);
				p += 2;
			} else {
				sb_add(&w, p, 1);
				p++;
			}
		}
		if (rc == 0 && have && out)
			sv_push(out, w.buf ? w.buf : "");
	}
	sb_release(&w);
	return rc;
}

void config_quote_word(struct strbuf *out, const char *w)
{
	if (*w && !strpbrk(w, " \t,'\"\\") && *w != '#' && *w != ';') {
		sb_adds(out, w);
		return;
	}
	sb_adds(out, "'");
	for (const char *p = w; *p; p++) {
		if (*p == '\'')
			sb_adds(out, "'\\''");
		else
			sb_add(out, p, 1);
	}
	sb_adds(out, "'");
}

/* The words of a list key's canonical text (cfgk_normalize made it, so
 * it splits). */
static void list_words(const char *v, struct strvec *out)
{
	config_words(v, ",", out, NULL);
}

int config_env_parse(const char *s, struct strvec *out, struct strbuf *why)
{
	struct strvec words = STRVEC_INIT;
	int rc = config_words(s, "", &words, why);

	for (size_t i = 0; i < words.n && rc == 0; i++) {
		if (config_env_word_ok(words.v[i], why) < 0)
			rc = -1;
		else if (out)
			sv_push(out, words.v[i]);
	}
	sv_clear(&words);
	return rc;
}

const char *cfgk_check_env(const char *v, struct strbuf *norm)
{
	static char msg[256];
	struct strbuf why = STRBUF_INIT;
	const char *bad = NULL;

	(void)norm;
	if (config_env_parse(v, NULL, &why) < 0) {
		snprintf(msg, sizeof(msg), "%s", why.buf ? why.buf : "malformed");
		bad = msg;
	}
	sb_release(&why);
	return bad;
}

static const char *check_port(const char *p)
{
	long long port;

	if (parse_ll(p, 1, 65535, &port) < 0)
		return "the port must be a number from 1 to 65535";
	return NULL;
}

/* One host of [remote] host (or of a pool): NULL if good, else why not. */
static const char *check_one_host(const char *v)
{
	const char *at, *h;

	if (v[0] == '-')
		return "must not start with '-'";
	if (v[0] == '#' || v[0] == ';')
		return "must not start with '#' or ';' (a comment starts after a blank)";
	for (const char *p = v; *p; p++) {
		if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p))
			return "must not contain whitespace";
		if (*p == '"' || *p == '\'')
			return "must not contain quotes";
	}
	if (!strncmp(v, "ssh://", 6))
		return NULL;
	at = strrchr(v, '@');
	if (at == v)
		return "the user name before '@' is empty";
	h = at ? at + 1 : v;
	if (!*h)
		return "the host name after '@' is missing";
	if (h[0] == '[') {
		const char *close = strchr(h, ']');
		if (!close)
			return "missing ']' after an IPv6 address";
		if (close[1] == ':')
			return check_port(close + 2);
		return close[1] ? "unexpected text after ']'" : NULL;
	}
	const char *colon = strchr(h, ':');
	if (colon && !strchr(colon + 1, ':')) {
		if (colon == h)
			return "the host name before ':' is missing";
		return check_port(colon + 1);
	}
	return NULL;
}

/* [remote] host and a [pools] entry: hosts (or one pool name, resolved by
 * config.c once every file is read), words as in list keys (blanks or
 * commas between); kept joined by one space. */
const char *cfgk_check_host(const char *v, struct strbuf *norm)
{
	static char msg[512];
	struct strvec hosts = STRVEC_INIT;
	struct strvec words = STRVEC_INIT;
	struct strbuf split = STRBUF_INIT;
	const char *why = NULL;

	if (config_words(v, ",", &words, &split) < 0) {
		snprintf(msg, sizeof(msg), "%s", split.buf);
		why = msg;
	}
	for (size_t i = 0; i < words.n; i++)
		if (*words.v[i]) /* '' names nothing, as in list keys */
			sv_push(&hosts, words.v[i]);
	sv_clear(&words);
	sb_release(&split);
	for (size_t i = 0; i < hosts.n && !why; i++) {
		const char *bad = check_one_host(hosts.v[i]);
		if (bad && hosts.n == 1) {
			why = bad;
		} else if (bad) {
			snprintf(msg, sizeof(msg), "'%.200s': %s", hosts.v[i], bad);
			why = msg;
		}
		for (size_t j = 0; j < i && !why; j++)
			if (!strcmp(hosts.v[i], hosts.v[j])) {
				snprintf(msg, sizeof(msg), "'%.200s' is listed twice; name each host once",
					 hosts.v[i]);
				why = msg;
			}
	}
	if (!why && hosts.n > GR_HOSTS_MAX) {
		snprintf(msg, sizeof(msg), "%zu hosts, at most %d: split them over projects",
			 hosts.n, GR_HOSTS_MAX);
		why = msg;
	}
	for (size_t i = 0; i < hosts.n && !why; i++)
		sb_addf(norm, "%s%s", i ? " " : "", hosts.v[i]);
	sv_clear(&hosts);
	return why;
}

const char *cfgk_check_pool_name(const char *name)
{
	if (!*name)
		return "a pool needs a name";
	if (name[0] == '-' || strlen(name) > 64)
		return "a pool's name is 1 to 64 letters, digits, '.', '_' or '-', not '-' first";
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return "a pool's name is 1 to 64 letters, digits, '.', '_' or '-', not '-' first";
	return NULL;
}

/* A folder on the host: absolute, or ~/... (the agent expands ~); "" is
 * the default. */
const char *cfgk_check_rdir(const char *v, struct strbuf *norm)
{
	(void)norm;
	if (!*v)
		return NULL;
	if (control_chars(v))
		return control_chars(v);
	if (v[0] == '~' && v[1] && v[1] != '/')
		return "only '~' and '~/' are expanded; write the path out";
	if (v[0] != '/' && v[0] != '~')
		return "must be absolute (/scratch/me/jobs) or below ~ (~/jobs)";
	if (strlen(v) > 1024)
		return "a folder's path of at most 1024 bytes, please";
	return NULL;
}

const char *cfgk_check_gpus(const char *v, struct strbuf *norm)
{
	long long n;
	unsigned char seen[1024] = { 0 };
	int count = 0;
	char *dup, *save = NULL, *tok;

	if (!strcmp(v, "all"))
		return NULL;
	if (!strchr(v, ',')) {
		if (parse_ll(v, 0, 1024, &n) < 0)
			return "expected all, a count of GPUs (2) or device indices (0,2)";
		return n < 1 ? "a count of GPUs must be at least 1" : NULL;
	}
	dup = xstrdup(v);
	for (char *s = dup; (tok = strtok_r(s, ",", &save)); s = NULL) {
		while (isspace((unsigned char)*tok))
			tok++;
		for (char *e = tok + strlen(tok); e > tok && isspace((unsigned char)e[-1]); )
			*--e = '\0';
		if (parse_ll(tok, 0, 1023, &n) < 0) {
			free(dup);
			return "device indices must be numbers from 0 to 1023, like 0,2";
		}
		if (seen[n]++) {
			free(dup);
			return "a device index is listed twice";
		}
		sb_addf(norm, "%s%lld", count++ ? "," : "", n);
	}
	free(dup);
	if (v[strlen(v) - 1] == ',' || v[0] == ',' || strstr(v, ",,"))
		return "empty device index in the list";
	return NULL;
}

size_t config_job_dir_prefix(const char *glob)
{
	static const char *const forms[] = { "$GPURUN_JOB_DIR/", "${GPURUN_JOB_DIR}/" };

	for (size_t i = 0; i < GR_ARRAY_SIZE(forms); i++)
		if (!strncmp(glob, forms[i], strlen(forms[i])))
			return strlen(forms[i]);
	return 0;
}

const char *cfgk_check_pull(const char *v, struct strbuf *norm)
{
	struct strvec words = STRVEC_INIT;
	const char *why = NULL;

	(void)norm;
	list_words(v, &words);
	for (size_t i = 0; !why && i < words.n; i++) {
		const char *w = words.v[i];
		w += config_job_dir_prefix(w);
		if (w[0] == '/')
			why = "globs must be relative to the job folder, not absolute";
		for (const char *c = w; !why && c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
			if (!strncmp(c, "..", 2) && (c[2] == '/' || c[2] == '\0'))
				why = "globs must stay inside the job folder (no '..')";
	}
	sv_clear(&words);
	return why;
}

/* One word of a list: relative, inside the project, no "..". */
static const char *check_relative(const char *w, const char *what)
{
	if (w[0] == '/')
		return what;
	for (const char *c = w; c; c = strchr(c, '/') ? strchr(c, '/') + 1 : NULL)
		if (!strncmp(c, "..", 2) && (c[2] == '/' || c[2] == '\0'))
			return what;
	return NULL;
}

const char *cfgk_check_persist(const char *v, struct strbuf *norm)
{
	struct strvec words = STRVEC_INIT;
	const char *why = NULL;

	(void)norm;
	list_words(v, &words);
	for (size_t i = 0; !why && i < words.n; i++) {
		const char *w = words.v[i];
		why = check_relative(w, "persistent paths must be relative to the project, without '..'");
		if (!why && strpbrk(w, "*?[\\"))
			why = "persistent paths are paths, not patterns";
		if (!why && (!strcmp(w, ".gpurun") || !strncmp(w, ".gpurun/", 8)))
			why = ".gpurun/ is gpurun's own";
		if (!why && (strstr(w, "//") || !strcmp(w, ".") || !strcmp(w, "./") ||
			     !strncmp(w, "./", 2) || strstr(w, "/./")))
			why = "write each persistent path plainly (like checkpoints/)";
	}
	sv_clear(&words);
	return why;
}

const char *cfgk_check_inputs(const char *v, struct strbuf *norm)
{
	struct strvec words = STRVEC_INIT;
	const char *why = NULL;

	(void)norm;
	list_words(v, &words);
	for (size_t i = 0; !why && i < words.n; i++)
		why = check_relative(words.v[i],
				     "setup inputs must be relative to the project, without '..'");
	sv_clear(&words);
	return why;
}

/* One word for an sbatch option's value: no blanks, no leading '-'. */
const char *cfgk_check_word(const char *v, struct strbuf *norm)
{
	(void)norm;
	if (v[0] == '-')
		return "must not start with '-'";
	for (const char *p = v; *p; p++)
		if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p))
			return "must be one word (more sbatch options go in [slurm] options)";
	return NULL;
}

/* sbatch --time: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or UNLIMITED. */
const char *cfgk_check_slurm_time(const char *v, struct strbuf *norm)
{
	const char *p = v;
	int groups = 0, dash = 0;

	(void)norm;
	if (!*v || !strcasecmp(v, "unlimited") || !strcasecmp(v, "infinite"))
		return NULL;
	for (;;) {
		if (!isdigit((unsigned char)*p))
			return "expected minutes, H:MM:SS or D-HH:MM:SS (sbatch --time)";
		while (isdigit((unsigned char)*p))
			p++;
		groups++;
		if (*p == '-' && !dash && groups == 1) {
			dash = 1;
			p++;
			continue;
		}
		if (*p == ':' && groups < 3 + dash) {
			p++;
			continue;
		}
		break;
	}
	return *p ? "expected minutes, H:MM:SS or D-HH:MM:SS (sbatch --time)" : NULL;
}

const char *cfgk_check_slurm_options(const char *v, struct strbuf *norm)
{
	(void)norm;
	return control_chars(v) ? control_chars(v) : config_split_words(v, NULL);
}

static int is_size(const char *v)
{
	const char *p = v;

	if (!isdigit((unsigned char)*p))
		return 0;
	while (isdigit((unsigned char)*p))
		p++;
	if (*p == '.') {
		p++;
		if (!isdigit((unsigned char)*p))
			return 0;
		while (isdigit((unsigned char)*p))
			p++;
	}
	if (*p == ' ')
		p++;
	if (*p && strchr("kKmMgGtT", *p)) {
		p++;
		if (!strcmp(p, "iB") || !strcmp(p, "B") || !strcmp(p, "b"))
			return 1;
	} else if (!strcmp(p, "B") || !strcmp(p, "b")) {
		return 1;
	}
	return *p == '\0';
}

static const char *const bool_true[] = { "true", "yes", "on", "1", NULL };
static const char *const bool_false[] = { "false", "no", "off", "0", NULL };

static int in_list(const char *v, const char *const *list)
{
	for (; *list; list++)
		if (!strcasecmp(v, *list))
			return 1;
	return 0;
}

int cfgk_normalize(const struct gr_config_key *k, const char *raw, struct strbuf *out,
		   struct strbuf *why)
{
	struct strbuf norm = STRBUF_INIT;
	const char *bad = control_chars(raw);
	long long n;
	uint64_t size;
	int rc = -1;

	sb_reset(out);
	if (bad) {
		sb_adds(why, bad);
		return -1;
	}
	switch (k->type) {
	case GR_KEY_STRING:
		sb_adds(out, raw);
		break;
	case GR_KEY_PATH:
		if (raw[0] == '~' && raw[1] && raw[1] != '/') {
			sb_adds(why, "only '~' and '~/' are expanded; write the path out");
			return -1;
		}
		if (*raw) {
			char *e = expand_home(raw);
			sb_adds(out, e);
			free(e);
		}
		break;
	case GR_KEY_RPATH:
		if (!*raw && *k->def) { /* a default that is "" may be asked for again */
			sb_adds(why, "must not be empty");
			return -1;
		}
		sb_adds(out, raw);
		break;
	case GR_KEY_ENUM:
		for (const char *const *v = k->values; *v; v++)
			if (!strcasecmp(raw, *v)) {
				sb_adds(out, *v);
				goto checked;
			}
		sb_adds(why, "expected ");
		for (const char *const *v = k->values; *v; v++)
			sb_addf(why, "%s%s", *v, v[1] ? (v[2] ? ", " : " or ") : "");
		return -1;
	case GR_KEY_BOOL:
		if (in_list(raw, bool_true))
			sb_adds(out, "true");
		else if (in_list(raw, bool_false))
			sb_adds(out, "false");
		else {
			sb_adds(why, "expected true or false (also yes/no, on/off, 1/0)");
			return -1;
		}
		break;
	case GR_KEY_INT:
		if (parse_ll(raw, -(1LL << 62), 1LL << 62, &n) < 0) {
			sb_adds(why, "not a whole number");
			return -1;
		}
		if (n < k->min || n > k->max) {
			sb_addf(why, "out of range: must be between %lld and %lld", k->min, k->max);
			return -1;
		}
		sb_addf(out, "%lld", n);
		break;
	case GR_KEY_SIZE:
		if (!is_size(raw) || parse_size(raw, &size) < 0) {
			sb_adds(why, "not a size (like 512, 10k, 1.5M or 2G)");
			return -1;
		}
		sb_adds(out, raw);
		break;
	case GR_KEY_LIST: {
		/* words as [train] env takes them, blanks or commas between;
		 * kept re-quoted where needed, so config_words reads them back */
		struct strvec w = STRVEC_INIT;
		if (config_words(raw, ",", &w, why) < 0) {
			sv_clear(&w);
			return -1;
		}
		for (size_t i = 0; i < w.n; i++)
			if (*w.v[i]) {
				if (out->len)
					sb_adds(out, " ");
				config_quote_word(out, w.v[i]);
			}
		sv_clear(&w);
		break;
	}
	}
checked:
	if (k->check && (bad = k->check(out->buf ? out->buf : "", &norm))) {
		sb_adds(why, bad);
		goto done;
	}
	if (norm.len) {
		sb_reset(out);
		sb_adds(out, norm.buf);
	}
	rc = 0;
done:
	sb_release(&norm);
	if (!out->buf)
		sb_add(out, "", 0);
	return rc;
}

/* ---- [container] ---- */

const char *config_split_words(const char *v, struct strvec *out)
{
	static char msg[64];
	struct strbuf why = STRBUF_INIT;
	const char *bad = NULL;

	if (config_words(v, "", out, &why) < 0) {
		snprintf(msg, sizeof(msg), "%s", why.buf);
		bad = msg;
	}
	sb_release(&why);
	return bad;
}

const char *cfgk_check_image(const char *v, struct strbuf *norm)
{
	(void)norm;
	if (control_chars(v))
		return control_chars(v);
	if (v[0] == '-')
		return "an image name cannot start with '-'";
	if (strpbrk(v, " \t"))
		return "an image name has no spaces (options go in [container] options)";
	return NULL;
}

const char *cfgk_check_options(const char *v, struct strbuf *norm)
{
	(void)norm;
	return control_chars(v) ? control_chars(v) : config_split_words(v, NULL);
}

const char *cfgk_check_mounts(const char *v, struct strbuf *norm)
{
	struct strvec words = STRVEC_INIT;
	const char *why = NULL;

	(void)norm;
	list_words(v, &words);
	for (size_t i = 0; !why && i < words.n; i++) {
		const char *w = words.v[i], *c1 = strchr(w, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (c1 == w)
			why = "a mount needs its host path: SRC[:DST[:ro]]";
		else if (c1 && c1[1] != '/')
			why = "a mount's path in the container must be absolute: SRC:/path[:ro]";
		else if (c2 && strcmp(c2 + 1, "ro") && strcmp(c2 + 1, "rw"))
			why = "a mount ends with :ro or :rw, if anything";
	}
	sv_clear(&words);
	return why;
}

const char *cfgk_check_user(const char *v, struct strbuf *norm)
{
	(void)norm;
	if (control_chars(v))
		return control_chars(v);
	return v[0] == '-' || strpbrk(v, " \t") ? "expected a user or uid[:gid], like root or 1000:1000" : NULL;
}

/* ---- durations ([train] time_limit) ---- */

int config_duration(const char *v, uint64_t *secs, const char **why)
{
	static const char *const bad = "expected a duration like 90s, 30m, 4h, 1d12h or H:MM:SS";
	const char *p = v;
	uint64_t total = 0;

	*secs = 0;
	if (!*v)
		return 0;
	if (strchr(v, ':')) {
		/* H:MM:SS or M:SS: every group digits, the later ones < 60 */
		int groups = 0;
		for (;;) {
			uint64_t n = 0;
			int digits = 0;
			while (isdigit((unsigned char)*p) && digits < 9) {
				n = n * 10 + (uint64_t)(*p++ - '0');
				digits++;
			}
			if (!digits || isdigit((unsigned char)*p) || (groups && n >= 60))
				goto fail;
			total = total * 60 + n;
			groups++;
			if (*p != ':')
				break;
			p++;
		}
		if (*p || groups > 3)
			goto fail;
	} else {
		while (*p) {
			uint64_t n = 0, unit;
			int digits = 0;
			while (isdigit((unsigned char)*p) && digits < 9) {
				n = n * 10 + (uint64_t)(*p++ - '0');
				digits++;
			}
			switch (digits ? *p : 0) {
			case 's': unit = 1; break;
			case 'm': unit = 60; break;
			case 'h': unit = 3600; break;
			case 'd': unit = 86400; break;
			default: goto fail;
			}
			p++;
			total += n * unit;
		}
	}
	if (total == 0 || total > 366ull * 86400) {
		if (why)
			*why = total ? "a time limit is at most 366 days" : "a time limit must be above 0";
		return -1;
	}
	*secs = total;
	return 0;
fail:
	if (why)
		*why = bad;
	return -1;
}

const char *cfgk_check_duration(const char *v, struct strbuf *norm)
{
	const char *why = NULL;
	uint64_t s;

	(void)norm;
	return config_duration(v, &s, &why) < 0 ? why : NULL;
}

/* ---- [remote] persist ---- */

int config_linger(const char *v, uint64_t *secs, const char **why)
{
	*secs = 0;
	if (!strcmp(v, "0") || !strcmp(v, "0s") || !*v)
		return 0;
	if (config_duration(v, secs, why) < 0)
		return -1;
	if (*secs > 7 * 86400) {
		*secs = 0;
		if (why)
			*why = "at most 7 days (7d)";
		return -1;
	}
	return 0;
}

const char *cfgk_check_linger(const char *v, struct strbuf *norm)
{
	uint64_t s;
	const char *why = NULL;

	(void)norm;
	return config_linger(v, &s, &why) < 0 ? why : NULL;
}
