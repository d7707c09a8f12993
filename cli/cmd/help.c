/* Help text generated from the command, option and config-key tables, so
 * help, flags, config keys and completions cannot disagree: `gpurun help`,
 * `gpurun help COMMAND` (= `gpurun COMMAND --help`) and the help topics. */
#include <stdio.h>
#include <string.h>

#include "gpurun.h"

#define OPT_COL 28 /* width of the left column of option lists */

/* Which config keys each command reads besides [remote]: sections
 * ("sync") or single keys ("train.stop_grace"). Help lists them with their
 * type and default from config_keys(), so they follow the schema. */
static const struct {
	const char *cmd, *keys;
} cmd_keys[] = {
	{ "config", "*" }, /* every key */
	{ "sync", "sync" },
	{ "train", "build train sync artifacts" },
	{ "stop", "train.stop_grace" },
	{ "pull", "artifacts" },
	{ "hook", "hooks sync" },
	{ NULL, NULL },
};

static void opt_line(const struct gr_opt *o, FILE *out)
{
	struct strbuf left = STRBUF_INIT;

	if (o->shrt && o->lng)
		sb_addf(&left, "-%c, --%s", o->shrt, o->lng);
	else if (o->shrt)
		sb_addf(&left, "-%c", o->shrt);
	else
		sb_addf(&left, "    --%s", o->lng);
	if (o->type == OPT_ENUM && o->values) {
		for (const char *const *v = o->values; *v; v++)
			sb_addf(&left, "%s%s", v == o->values ? " " : "|", *v);
	} else if (o->type != OPT_FLAG) {
		sb_addf(&left, " %s", o->argname ? o->argname : "VALUE");
	}
	if (left.len > OPT_COL)
		fprintf(out, "  %s\n  %-*s %s\n", left.buf, OPT_COL, "", o->help ? o->help : "");
	else
		fprintf(out, "  %-*s %s\n", OPT_COL, left.buf, o->help ? o->help : "");
	sb_release(&left);
}

void help_usage_line(const struct gr_cmd *c, struct strbuf *sb)
{
	sb_addf(sb, "usage: gpurun %s [OPTIONS]%s%s", c->name,
		c->args && *c->args ? " " : "", c->args ? c->args : "");
}

static void key_type(const struct gr_config_key *k, struct strbuf *sb)
{
	switch (k->type) {
	case GR_KEY_STRING: sb_adds(sb, "text"); break;
	case GR_KEY_PATH: sb_adds(sb, "path"); break;
	case GR_KEY_RPATH: sb_adds(sb, "path on the host"); break;
	case GR_KEY_ENUM:
		for (const char *const *v = k->values; v && *v; v++)
			sb_addf(sb, "%s%s", v == k->values ? "" : "|", *v);
		break;
	case GR_KEY_BOOL: sb_adds(sb, "true|false"); break;
	case GR_KEY_INT:
		if (k->min < k->max)
			sb_addf(sb, "integer %lld-%lld", k->min, k->max);
		else
			sb_adds(sb, "integer");
		break;
	case GR_KEY_SIZE: sb_adds(sb, "size (512, 10k, 1.5M, 2G)"); break;
	case GR_KEY_LIST: sb_adds(sb, "list (repeatable)"); break;
	}
	if (k->def && *k->def)
		sb_addf(sb, ", default %s", k->def);
}

static void key_lines(const struct gr_config_key *k, FILE *out)
{
	struct strbuf name = STRBUF_INIT, type = STRBUF_INIT;

	sb_addf(&name, "%s.%s", k->section, k->name);
	key_type(k, &type);
	fprintf(out, "  %-*s %s\n", OPT_COL, name.buf, type.buf);
	if (k->help && *k->help)
		fprintf(out, "      %s\n", k->help);
	sb_release(&name);
	sb_release(&type);
}

/* Does token ("sync" or "train.stop_grace") name key k? */
static int key_matches(const struct gr_config_key *k, const char *tok, size_t len)
{
	size_t sl = strlen(k->section);

	if (len == sl && !strncmp(tok, k->section, sl))
		return 1;
	return len == sl + 1 + strlen(k->name) && !strncmp(tok, k->section, sl) &&
	       tok[sl] == '.' && !strncmp(tok + sl + 1, k->name, len - sl - 1);
}

/* Print text filled to 76 columns (for lines built from the tables). */
static void fill(const char *text, FILE *out)
{
	size_t col = 0;

	for (const char *p = text; *p;) {
		size_t len = strcspn(p, " ");
		if (col && col + 1 + len > 76) {
			fputc('\n', out);
			col = 0;
		} else if (col) {
			fputc(' ', out);
			col++;
		}
		fwrite(p, 1, len, out);
		col += len;
		p += len;
		p += strspn(p, " ");
	}
	fputc('\n', out);
}

static void command_keys(const struct gr_cmd *c, FILE *out)
{
	size_t n = 0, shown = 0;
	const struct gr_config_key *keys = config_keys(&n);
	const char *spec = NULL;

	for (size_t i = 0; cmd_keys[i].cmd; i++)
		if (!strcmp(cmd_keys[i].cmd, c->name))
			spec = cmd_keys[i].keys;
	if (spec && !strcmp(spec, "*")) {
		fprintf(out, "\n");
		help_config(out);
		return;
	}
	for (const char *tok = spec; tok && *tok;) {
		size_t len = strcspn(tok, " ");
		for (size_t i = 0; i < n; i++) {
			if (!key_matches(&keys[i], tok, len))
				continue;
			if (!shown++)
				fprintf(out, "\nconfig keys (gpurun.ini; -o KEY=VALUE for one run):\n");
			key_lines(&keys[i], out);
		}
		tok += len;
		tok += strspn(tok, " ");
	}
	if (c->needs & CMD_CONFIG) {
		struct strbuf line = STRBUF_INIT;
		/* The pointer first, so no wrap splits it however many keys follow. */
		sb_adds(&line, "The host comes from the [remote] keys (see 'gpurun help config')");
		for (size_t i = 0, k = 0; i < n; i++)
			if (!strcmp(keys[i].section, "remote"))
				sb_addf(&line, "%s%s", k++ ? ", " : ": ", keys[i].name);
		sb_adds(&line, ".");
		fputc('\n', out);
		fill(line.buf, out);
		sb_release(&line);
	}
}

void help_command(const struct gr_cmd *c, FILE *out)
{
	struct strbuf usage = STRBUF_INIT;

	help_usage_line(c, &usage);
	fprintf(out, "%s\n\n%s\n", usage.buf, c->summary);
	sb_release(&usage);
	if (c->help)
		fprintf(out, "\n%s\n", c->help);
	fprintf(out, "\noptions:\n");
	for (const struct gr_opt *o = c->opts; o && o->id; o++)
		opt_line(o, out);
	fprintf(out, "  %-*s %s\n", OPT_COL, "-h, --help", "show this help");
	command_keys(c, out);
	struct strbuf tail = STRBUF_INIT;
	sb_addf(&tail, "Global options (-C DIR, -c FILE, -o KEY=VALUE, --host HOST, -v, -q, ...) go "
		"before or after the command%s; see 'gpurun help'. A bad command line exits %d.",
		c->needs & CMD_PASSTHROUGH ? " (before CMD: every word from CMD on is CMD's)" : "",
		GR_EXIT_USAGE);
	fputc('\n', out);
	fill(tail.buf, out);
	sb_release(&tail);
}

void help_overview(FILE *out)
{
	fprintf(out, "usage: gpurun [GLOBAL OPTIONS] COMMAND [OPTIONS] [ARGS]\n\n"
		"Sync a project to a GPU host over SSH, train there, bring the results home.\n\n"
		"commands:\n");
	for (const struct gr_cmd *c = gr_commands; c->name; c++)
		fprintf(out, "  %-12s %s\n", c->name, c->summary);
	fprintf(out, "\nglobal options:\n");
	for (const struct gr_opt *o = gr_global_opts; o->id; o++)
		opt_line(o, out);
	fprintf(out, "  %-*s %s\n", OPT_COL, "-h, --help", "show this help");
	fprintf(out, "\nhelp topics:\n");
	for (const struct help_topic *t = help_topics; t->name; t++)
		fprintf(out, "  %-12s %s\n", t->name, t->summary);
	fprintf(out, "\nGlobal options go before or after the command, up to '--' (for exec and\n"
		"train, up to the command they run): gpurun status -v, gpurun -v status.\n"
		"A command's own option of the same name wins. A bad command line exits\n"
		"%d ('gpurun help exit-codes').\n"
		"\nSee 'gpurun help COMMAND' or 'gpurun COMMAND --help' for a command, and\n"
		"'gpurun help TOPIC' for a topic.\n", GR_EXIT_USAGE);
}

/* README.md's "Exit codes" section is this output, verbatim (checked by
 * tests/t/t0510-help.sh). */
void help_exit_codes(FILE *out)
{
	fprintf(out,
		"exit codes:\n"
		"  0        success (also: detached from a job that keeps running)\n"
		"  1-246    exec, train and the pre-push hook pass the remote command's own\n"
		"           status through unchanged (128+N: killed by signal N)\n"
		"  1        a local command (init, config, hook, ...) failed\n"
		"  %d      the job reached its time limit ([slurm] time, [train] time_limit)\n"
		"  %d      the job ended without recording an exit status (also: its\n"
		"           Slurm node failed)\n"
		"  %d      interrupted (Ctrl-C), or a confirmation refused (a sync above\n"
		"           [sync] warn_size, in a pipe without --yes)\n"
		"  %d      sync or artifact transfer failed\n"
		"  %d      the agent on the host reported an error\n"
		"  %d      bad command line\n"
		"  %d      bad configuration (gpurun.ini or ssh_config)\n"
		"  %d      host key or authentication refused\n"
		"  %d      could not reach the host or start the agent (as ssh's 255)\n",
		GR_EXIT_JOB_TIMEOUT, GR_EXIT_JOB_LOST, GR_EXIT_INTERRUPTED, GR_EXIT_SYNC, GR_EXIT_REMOTE,
		GR_EXIT_USAGE, GR_EXIT_CONFIG, GR_EXIT_AUTH, GR_EXIT_CONNECT);
}

void help_config(FILE *out)
{
	size_t n = 0;
	const struct gr_config_key *keys = config_keys(&n);

	fprintf(out,
		"config keys ('gpurun init' writes them all, commented). A value comes\n"
		"from, the later winning: the default, the user config\n"
		"($XDG_CONFIG_HOME/gpurun/config or ~/.config/gpurun/config: every key but\n"
		"remote.path), gpurun.ini (found in this folder or a parent, or -c FILE),\n"
		"the environment (GPURUN_<SECTION>_<KEY>), and the command line\n"
		"(-o section.key=VALUE, --host).\n");
	for (size_t i = 0; i < n; i++) {
		if (!i || strcmp(keys[i].section, keys[i - 1].section))
			fprintf(out, "\n[%s]\n", keys[i].section);
		key_lines(&keys[i], out);
	}
	if (n)
		fprintf(out, "\n[pools]\n"
			"  NAME = HOST HOST ...          hosts, in either file\n"
			"      [remote] host = NAME means those hosts; a pool lists hosts, not pools\n");
	if (!n)
		fprintf(out, "\n(this build carries no key schema)\n");
}

static void env_lines(const struct gr_env_var *v, size_t n, int host, FILE *out)
{
	for (size_t i = 0; i < n; i++) {
		struct strbuf left = STRBUF_INIT;
		const char *h = v[i].help;
		if (v[i].host != host)
			continue;
		sb_addf(&left, "%s%s%s", v[i].name, v[i].value ? "=" : "", v[i].value ? v[i].value : "");
		for (int first = 1; *h; first = 0) {
			size_t len = strcspn(h, "\n");
			fprintf(out, "  %-23s %.*s\n", first ? left.buf : "", (int)len, h);
			h += len + (h[len] == '\n');
		}
		sb_release(&left);
	}
}

void help_environment(FILE *out)
{
	size_t n;
	const struct gr_env_var *v = config_env_vars(&n);

	fprintf(out,
		"environment:\n"
		"  GPURUN_<SECTION>_<KEY>  set a gpurun.ini key, e.g. GPURUN_REMOTE_HOST=gpubox;\n"
		"                          beats gpurun.ini, loses to -o and --host\n");
	env_lines(v, n, 0, out);
	fprintf(out,
		"  NO_COLOR                no colour (https://no-color.org); --color=always wins\n"
		"  CI                      no progress bars\n"
		"  HOME                    where ~, ~/.ssh/config and ~/.cache/gpurun are\n"
		"on the GPU host (the agent's environment):\n");
	env_lines(v, n, 1, out);
	fprintf(out, "Any other GPURUN_* variable that looks like one of these is warned about.\n");
}

const struct help_topic help_topics[] = {
	{ "exit-codes", "what gpurun's exit codes mean", help_exit_codes },
	{ "environment", "the environment variables gpurun reads", help_environment },
	{ NULL, NULL, NULL },
};

/* Edit distance (insert, delete, substitute, swap of neighbours), for
 * "did you mean" the way git suggests commands. */
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), d[16][16];

	if (la >= 16 || lb >= 16)
		return 16;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[la][lb];
}

static void consider(const char *typo, const char *name, const char **best, size_t *bestd,
		     int *prefixes, const char **prefix_of)
{
	size_t d = edit_distance(typo, name);

	if (!strncmp(name, typo, strlen(typo))) {
		(*prefixes)++;
		*prefix_of = name;
	}
	if (d < *bestd) {
		*bestd = d;
		*best = name;
	}
}

const char *help_suggest(const char *typo)
{
	const char *best = NULL, *prefix_of = NULL;
	size_t bestd = 16, len = strlen(typo);
	int prefixes = 0;

	if (!len)
		return NULL;
	for (const struct gr_cmd *c = gr_commands; c->name; c++)
		consider(typo, c->name, &best, &bestd, &prefixes, &prefix_of);
	for (const struct help_topic *t = help_topics; t->name; t++)
		consider(typo, t->name, &best, &bestd, &prefixes, &prefix_of);
	if (prefixes == 1 && len >= 2)
		return prefix_of;
	if (bestd <= 2 && bestd < len)
		return best;
	return NULL;
}
