/* The template `gpurun init` writes: every key of the schema with its
 * help, and values that fit the project it runs in. It looks for a
 * Python trainer (train.py, pyproject.toml, requirements.txt) and for
 * this repository's own C/CUDA trainer (kernels/Makefile and
 * kernels/train.c); elsewhere the defaults stay, and [train] command is
 * left for the user. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_int.h"

#define KERNELS_TRAIN "kernels/train --synthetic 20000 --steps 400 --out \"$GPURUN_JOB_DIR\""

static int has(const char *dir, const char *name)
{
	char *p = xasprintf("%s/%s", dir, name);
	struct stat st;
	int r = stat(p, &st) == 0 && S_ISREG(st.st_mode);

	free(p);
	return r;
}

static void set(struct cfg_profile *p, const char *key, const char *value)
{
	sv_push(&p->keys, key);
	sv_push(&p->values, value);
}

static void saw(struct cfg_profile *p, const char *what)
{
	sb_addf(&p->found, "%s%s", p->found.len ? ", " : "", what);
}

/* pyproject.toml makes a package pip can install (not only tools'
 * settings): it has a [project], [build-system] or [tool.poetry] table. */
static int pyproject_installable(const char *dir, int *poetry)
{
	char *p = xasprintf("%s/pyproject.toml", dir);
	struct strbuf sb = STRBUF_INIT;
	int r = 0;

	*poetry = 0;
	if (read_file(p, &sb, NULL) == 0 && sb.buf) {
		for (char *l = sb.buf; l && *l;) {
			char *nl = strchr(l, '\n');
			while (*l == ' ' || *l == '\t')
				l++;
			if (!strncmp(l, "[project]", 9) || !strncmp(l, "[build-system]", 14))
				r = 1;
			if (!strncmp(l, "[tool.poetry]", 13))
				r = *poetry = 1;
			l = nl ? nl + 1 : NULL;
		}
	}
	sb_release(&sb);
	free(p);
	return r;
}

/* Where uv, poetry and conda land when installed for the user (pipx,
 * uv's and poetry's installers): a job's /bin/sh -c does not read the
 * rc files that put them on PATH. */
#define USER_BIN "export PATH=\"$HOME/.local/bin:$PATH\" && "

void cfgk_profile_detect(const char *dir, struct cfg_profile *p)
{
	const char *script = has(dir, "train.py") ? "train.py" : has(dir, "main.py") ? "main.py" : NULL;
	int req = has(dir, "requirements.txt"), pyproject = has(dir, "pyproject.toml");
	int uv = has(dir, "uv.lock"), poetry_lock = has(dir, "poetry.lock"), poetry = 0;
	const char *conda = has(dir, "environment.yml") ? "environment.yml"
			    : has(dir, "environment.yaml") ? "environment.yaml" : NULL;
	int package = pyproject && pyproject_installable(dir, &poetry);

	*p = (struct cfg_profile){ "", NULL, STRBUF_INIT, STRVEC_INIT, STRVEC_INIT };
	poetry |= poetry_lock;
	if (script || req || pyproject || uv || conda) {
		const char *run = script ? script : "train.py", *env = ".venv";
		char *cmd, *setup = NULL, *inputs = NULL;
		p->kind = "python";
		if (script)
			saw(p, script);
		if (pyproject)
			saw(p, "pyproject.toml");
		if (req)
			saw(p, "requirements.txt");
		if (uv)
			saw(p, "uv.lock");
		if (poetry_lock)
			saw(p, "poetry.lock");
		if (conda)
			saw(p, conda);
		/* The environment lives once on the host, made by setup in the
		 * project folder and shared by every job (a persistent path);
		 * the project's own package is installed editable, and a job
		 * imports it from its snapshot all the same. */
		if (uv) {
			p->tool = "uv";
			setup = xstrdup(USER_BIN "uv sync --locked");
			inputs = xstrdup("uv.lock pyproject.toml");
		} else if (poetry) {
			p->tool = "poetry";
			setup = xstrdup(USER_BIN "POETRY_VIRTUALENVS_IN_PROJECT=true poetry install --no-interaction");
			inputs = xstrdup(poetry_lock ? "poetry.lock pyproject.toml" : "pyproject.toml");
		} else if (conda) {
			p->tool = "conda";
			env = ".conda";
			setup = xasprintf("conda env update --prefix ./.conda --file %s --prune", conda);
			inputs = xstrdup(conda);
		} else if (req || package) {
			p->tool = "pip";
			setup = xasprintf("python3 -m venv .venv && .venv/bin/pip install%s%s",
					  req ? " -r requirements.txt" : "", package ? " -e ." : "");
			inputs = xasprintf("%s%s%s", req ? "requirements.txt" : "",
					   req && package ? " " : "", package ? "pyproject.toml" : "");
		}
		if (setup) {
			char *persist = xasprintf("checkpoints/ %s/", env);
			set(p, "setup.command", setup);
			set(p, "setup.inputs", inputs);
			set(p, "train.persist", persist);
			cmd = xasprintf("%s/bin/python %s", env, run);
			free(persist);
		} else {
			/* No dependencies named: setup is left to the user
			 * (its example makes a .venv, kept here too). */
			set(p, "train.persist", "checkpoints/ .venv/");
			cmd = xasprintf("python3 %s", run);
		}
		set(p, "build.command", "");
		set(p, "train.command", cmd);
		set(p, "artifacts.pull", "checkpoints/ *.jsonl *.csv");
		free(cmd);
		free(setup);
		free(inputs);
		return;
	}
	if (has(dir, "kernels/Makefile") && has(dir, "kernels/train.c")) {
		p->kind = "kernels";
		saw(p, "kernels/Makefile, kernels/train.c");
		set(p, "build.command", "make -C kernels");
		set(p, "train.command", KERNELS_TRAIN);
		set(p, "artifacts.pull", "*.bin metrics.csv");
	}
}

void cfgk_profile_free(struct cfg_profile *p)
{
	sb_release(&p->found);
	sv_clear(&p->keys);
	sv_clear(&p->values);
}

static const char *profile_value(const struct cfg_profile *p, const struct gr_config_key *k)
{
	for (size_t i = 0; p && i < p->keys.n; i++) {
		const char *dot = strchr(p->keys.v[i], '.');
		if (dot && !strncmp(p->keys.v[i], k->section, (size_t)(dot - p->keys.v[i])) &&
		    !k->section[dot - p->keys.v[i]] && !strcmp(dot + 1, k->name))
			return p->values.v[i];
	}
	return NULL;
}

void cfgk_template(struct strbuf *out, const char *project, const struct cfg_profile *p)
{
	const char *section = "";
	size_t n;
	const struct gr_config_key *keys = config_keys(&n);

	sb_adds(out,
		"# gpurun.ini: how gpurun syncs, builds and runs this project on a GPU host.\n"
		"# Written by 'gpurun init' with every key and its default; a key shown\n"
		"# commented out has no default. 'gpurun config' shows the values in effect\n"
		"# and where each came from.\n");
	if (p && *p->kind)
		sb_addf(out, "#\n# This project looks like a %s one (found %s): the values below\n"
			"# marked '(for this project)' were chosen for that; the rest are defaults.\n",
			!strcmp(p->kind, "python") ? "Python" : "kernels/ (C and CUDA)", p->found.buf);
	else
		sb_adds(out, "#\n# Set [train] command to what runs your training, from the project folder.\n");
	if (p && p->tool && !strcmp(p->tool, "conda"))
		sb_adds(out, "# [setup] runs conda on the host: install conda, mamba or micromamba there\n"
			"# first (with micromamba, write 'micromamba create -y' for 'conda env update').\n");
	else if (p && p->tool && strcmp(p->tool, "pip"))
		sb_addf(out, "# [setup] runs %s on the host: install it there first ('pipx install %s', or\n"
			"# its own installer; ~/.local/bin is on setup's PATH).\n", p->tool, p->tool);
	sb_adds(out,
		"#\n"
		"# Where a job runs: in its own folder on the host ($GPURUN_JOB_DIR), which\n"
		"# holds a snapshot of the project as it was synced (a later sync changes\n"
		"# nothing the job sees), the [train] persist paths (shared by every job of\n"
		"# the project), and whatever the job writes; [artifacts] pull names files\n"
		"# there, as the job sees them.\n"
		"#\n"
		"# Comments start with '#' or ';', on a line of their own or after a value\n"
		"# (with a blank before; inside quotes they are the value's). List values are\n"
		"# words as in a shell: 'my data/' is one path. '~' in a local path is your\n"
		"# home folder. Precedence: defaults < this file < GPURUN_<SECTION>_<KEY>\n"
		"# environment variables < the command line (-o section.key=value, --host).\n");
	for (size_t i = 0; i < n; i++) {
		const struct gr_config_key *k = &keys[i];
		const char *mine = profile_value(p, k);
		char *def = cfgk_default(k, project);

		if (strcmp(section, k->section)) {
			section = k->section;
			sb_addf(out, "\n[%s]\n", section);
		}
		sb_addf(out, "# %s", k->help);
		if (k->type == GR_KEY_INT)
			sb_addf(out, " (%lld-%lld)", k->min, k->max);
		if (k->type == GR_KEY_LIST)
			sb_adds(out, " (a list; repeat the key to add)");
		if (mine && strcmp(mine, def))
			sb_addf(out, " (for this project; default: %s)", *def ? def : "none");
		sb_adds(out, "\n");
		if (mine)
			sb_addf(out, "%s =%s%s\n", k->name, *mine ? " " : "", mine);
		else if (*def)
			sb_addf(out, "%s = %s\n", k->name, def);
		else if (k->example)
			sb_addf(out, "#%s = %s\n", k->name, k->example);
		else
			sb_addf(out, "%s =\n", k->name);
		free(def);
	}
}
