/* train's additions to a job's spec (see train_spec.h). */
#include <stdlib.h>
#include <string.h>

#include "git_info.h"
#include "job_proto.h"
#include "train_spec.h"
#include "transport.h"

int train_run_check(const struct train_run *tr, struct gr_err *err)
{
	int rc = 0;

	if (tr->name && !job_name_ok(tr->name)) {
		rc = gr_errf(err, GR_EUSAGE, "bad job name '%s'", tr->name);
		gr_hintf(err, "a name starts with a letter, then letters, digits, '.', '_' or '-', "
			 "at most %d (so it is never taken for a job id)", GR_JOB_NAME_MAX);
		return rc;
	}
	if (tr->argv.n && !*tr->argv.v[0])
		rc = gr_errf(err, GR_EUSAGE, "the command to run is empty");
	return rc;
}

static int plain_word(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-",
			    *s))
			return 0;
	return 1;
}

char *argv_display(char *const *argv, size_t n)
{
	struct strbuf sb = STRBUF_INIT;

	for (size_t i = 0; i < n; i++) {
		if (i)
			sb_adds(&sb, " ");
		if (plain_word(argv[i])) {
			sb_adds(&sb, argv[i]);
		} else {
			char *q = sh_quote(argv[i]);
			sb_adds(&sb, q);
			free(q);
		}
	}
	return sb.buf ? sb_detach(&sb, NULL) : xstrdup("");
}

/* Drop every pair with key from spec. */
static void spec_drop(struct strvec *spec, const char *key)
{
	size_t o = 0;

	for (size_t i = 0; i + 1 < spec->n; i += 2) {
		if (!strcmp(spec->v[i], key)) {
			free(spec->v[i]);
			free(spec->v[i + 1]);
			continue;
		}
		spec->v[o++] = spec->v[i];
		spec->v[o++] = spec->v[i + 1];
	}
	spec->n = o;
	if (spec->v)
		spec->v[o] = NULL;
}

#define PAIR(k, v) do { sv_push(spec, (k)); sv_push(spec, (v)); } while (0)

int train_spec_add_job(const struct gr_config *cfg, const struct train_run *tr,
		       struct strvec *spec, struct gr_err *err)
{
	struct strvec env = STRVEC_INIT, words = STRVEC_INIT;
	struct strbuf why = STRBUF_INIT;

	for (size_t i = 0; i < tr->argv.n; i++) {
		char *w = tr->vars ? train_sweep_subst(tr->argv.v[i], tr->vars) : xstrdup(tr->argv.v[i]);
		sv_push(&words, w);
		free(w);
	}
	if (words.n) {
		char *shown = argv_display(words.v, words.n);
		spec_drop(spec, "command");
		PAIR("command", shown);
		free(shown);
		for (size_t i = 0; i < words.n; i++)
			PAIR("argv", words.v[i]);
	}
	sv_clear(&words);
	/* [train] env first: --env comes later and wins for the same name,
	 * and a sweep's variables last of all. */
	if (cfg->train.env && config_env_parse(cfg->train.env, &env, &why) < 0) {
		gr_errf(err, GR_ECONFIG, "[train] env: %s", why.buf);
		sb_release(&why);
		sv_clear(&env);
		return GR_ECONFIG;
	}
	for (size_t i = 0; i < tr->env.n; i++)
		sv_push(&env, tr->env.v[i]);
	for (size_t i = 0; tr->vars && i < tr->vars->n; i++)
		sv_push(&env, tr->vars->v[i]);
	for (size_t i = 0; i < env.n; i++)
		PAIR("env", env.v[i]);
	if (tr->name)
		PAIR("name", tr->name);
	if (tr->group)
		PAIR("group", tr->group);
	if (tr->after)
		PAIR("after", tr->after);
	sv_clear(&env);
	sb_release(&why);
	return 0;
}

void train_spec_add_git(const struct gr_config *cfg, struct strvec *spec)
{
	struct git_info gi;
	struct gr_err gerr = { 0 };

	/* Not knowing the commit is no reason not to train. */
	if (git_info_read(cfg->root, &gi, &gerr) == 0 && gi.have) {
		PAIR("git_commit", gi.commit);
		if (*gi.branch)
			PAIR("git_branch", gi.branch);
		if (gi.dirty) {
			PAIR("git_dirty", "1");
			PAIR("git_diff", gi.diff_hash);
		}
	}
}

int train_spec_add(const struct gr_config *cfg, const struct train_run *tr, struct strvec *spec,
		   struct gr_err *err)
{
	int rc = train_spec_add_job(cfg, tr, spec, err);

	if (rc == 0)
		train_spec_add_git(cfg, spec);
	return rc;
}
