/* Internal to config/: the schema helpers config_keys.c and config_values.c give config.c
 * (lookup, validation, typo hints, the template). Not a public API. */
#ifndef GR_CONFIG_INT_H
#define GR_CONFIG_INT_H

#include "config.h"

/* Where a value came from, lowest precedence first. */
enum { LAYER_DEFAULT, LAYER_USER, LAYER_FILE, LAYER_ENV, LAYER_FLAG };

/* Index of section/name or "section.key" in config_keys(), or -1. */
int cfgk_find(const char *section, const char *name);
int cfgk_find_dotted(const char *key);
int cfgk_section_known(const char *section);

/* A hint for an unknown key / section / dotted key ("did you mean
 * 'host'?", "'gpus' belongs in [train]"); empty when nothing is close. */
void cfgk_hint_key(const char *section, const char *name, struct strbuf *hint);
void cfgk_hint_section(const char *section, struct strbuf *hint);
void cfgk_hint_dotted(const char *key, struct strbuf *hint);

/* Validate raw for key k and put its canonical text in out (lists joined
 * by one space, booleans true/false, enums lowercase, ~ expanded in local
 * paths). Returns 0, or -1 with the reason in why. */
int cfgk_normalize(const struct gr_config_key *k, const char *raw, struct strbuf *out,
		   struct strbuf *why);

/* Split s into words as a shell would, nothing expanded: blanks and any
 * character of seps ("" or ",") separate; '...' keeps everything, "..."
 * all but \" \\ \$ \` (the backslash goes), and outside quotes \ keeps
 * the next character. '' is an empty word. [train] env, every list key,
 * [remote] host and the options keys are read by it. Words are appended
 * to out (may be NULL: only check). 0, or -1 with why (may be NULL) set. */
int config_words(const char *s, const char *seps, struct strvec *out, struct strbuf *why);
/* Append w to out so that config_words reads it back as one word: as it
 * is when plain, else in '...' ('\'' for a quote). */
void config_quote_word(struct strbuf *out, const char *w);

/* The default of k as text, with "<project>" replaced by project. */
char *cfgk_default(const struct gr_config_key *k, const char *project);

/* What `gpurun init` found in the project folder, and the values its
 * template writes for this kind of project (config_init.c). */
struct cfg_profile {
	const char *kind;     /* "python", "kernels" or "" (nothing recognised) */
	const char *tool;     /* python: what setup uses: pip, uv, poetry, conda (or NULL) */
	struct strbuf found;  /* what was seen: "train.py, requirements.txt" */
	struct strvec keys;   /* "section.key", in step with values */
	struct strvec values;
};
void cfgk_profile_detect(const char *dir, struct cfg_profile *p);
void cfgk_profile_free(struct cfg_profile *p);

/* The whole commented template for a project folder named project; p
 * (may be NULL) sets the values that fit the project. */
void cfgk_template(struct strbuf *out, const char *project, const struct cfg_profile *p);

/* The environment variable for key k: GPURUN_REMOTE_HOST. */
void cfgk_env_name(const struct gr_config_key *k, struct strbuf *out);

/* A warning for each GPURUN_* in envp that gpurun does not read but that
 * looks like a variable it does (a known section after GPURUN_, or a
 * name a typo away), with the closest one. */
void cfgk_env_warnings(char *const *envp, struct strvec *out);

/* The checks of single keys (config_values.c), named by the table in
 * config_keys.c: NULL if v is good (its canonical text in norm), else
 * why not. */
const char *cfgk_check_host(const char *v, struct strbuf *norm);
const char *cfgk_check_rdir(const char *v, struct strbuf *norm);
/* A [pools] name: letters, digits, '.', '_', '-'; NULL if good, else why not. */
const char *cfgk_check_pool_name(const char *name);
const char *cfgk_check_gpus(const char *v, struct strbuf *norm);
const char *cfgk_check_pull(const char *v, struct strbuf *norm);
const char *cfgk_check_text(const char *v, struct strbuf *norm);
const char *cfgk_check_env(const char *v, struct strbuf *norm);
const char *cfgk_check_persist(const char *v, struct strbuf *norm);
const char *cfgk_check_inputs(const char *v, struct strbuf *norm);
const char *cfgk_check_word(const char *v, struct strbuf *norm);
const char *cfgk_check_slurm_time(const char *v, struct strbuf *norm);
const char *cfgk_check_duration(const char *v, struct strbuf *norm);
/* [remote] persist: 0 (off) or a duration of at most 7 days. */
const char *cfgk_check_linger(const char *v, struct strbuf *norm);
const char *cfgk_check_slurm_options(const char *v, struct strbuf *norm);
const char *cfgk_check_image(const char *v, struct strbuf *norm);
const char *cfgk_check_options(const char *v, struct strbuf *norm);
const char *cfgk_check_mounts(const char *v, struct strbuf *norm);
const char *cfgk_check_user(const char *v, struct strbuf *norm);

#endif
