/* The completion engine behind `gpurun __complete`: walks the typed words
 * the way main.c and gr_getopt parse them (global options, the command, its
 * options and the global ones after it, positionals) and answers from the tables, so every shell offers
 * exactly the flags, values and keys this gpurun accepts. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "completion.h"
#include "job_proto.h"

struct cstate {
	const struct complete_src *src;
	struct complete_out *out;
	const char *cur;     /* the part of the word being completed */
	const char *prefix;  /* what precedes it in the word: "--color=", "-o" */
	const char *chdir;   /* the last -C DIR typed */
	const char *cfgfile; /* the last -c FILE typed */
};

/* Descriptions are one line without tabs: the scripts split on both. */
static void add(struct cstate *s, const char *val, const char *desc)
{
	struct strbuf sb = STRBUF_INIT;

	if (strncmp(val, s->cur, strlen(s->cur)))
		return;
	sb_addf(&sb, "%s%s", s->prefix, val);
	if (desc && *desc) {
		sb_add(&sb, "\t", 1);
		for (const char *p = desc; *p; p++)
			sb_add(&sb, *p == '\t' || *p == '\n' || *p == '\r' ? " " : p, 1);
	}
	sv_push(&s->out->cands, sb.buf);
	sb_release(&sb);
}

int find_project_root(const char *dir, char **root, struct gr_err *err)
{
	char path[PATH_MAX];
	struct strbuf sb = STRBUF_INIT;

	*root = NULL;
	if (!realpath(dir ? dir : ".", path))
		return gr_errf(err, GR_ENOTFOUND, "cannot resolve '%s': %s", dir ? dir : ".",
			       strerror(errno));
	for (;;) {
		sb_reset(&sb);
		sb_addf(&sb, "%s/gpurun.ini", strcmp(path, "/") ? path : "");
		if (access(sb.buf, F_OK) == 0) {
			sb_release(&sb);
			*root = xstrdup(path);
			return 0;
		}
		char *slash = strrchr(path, '/');
		if (!slash || !strcmp(path, "/"))
			break;
		if (slash == path)
			slash[1] = 0;
		else
			*slash = 0;
	}
	sb_release(&sb);
	gr_errf(err, GR_ENOTFOUND, "no gpurun.ini here or in any parent folder");
	gr_hintf(err, "run 'gpurun init' to create gpurun.ini");
	return GR_ENOTFOUND;
}

/* The folder whose job cache applies: -c FILE's folder, else the project
 * root found from -C DIR (or here). */
static char *project_root(const struct cstate *s)
{
	char *root = NULL;

	if (s->cfgfile) {
		struct strbuf sb = STRBUF_INIT;
		const char *slash = strrchr(s->cfgfile, '/');
		if (s->chdir && s->cfgfile[0] != '/')
			sb_addf(&sb, "%s/", s->chdir);
		if (slash)
			sb_add(&sb, s->cfgfile, (size_t)(slash - s->cfgfile) + 1);
		else
			sb_adds(&sb, ".");
		root = sb_detach(&sb, NULL);
		return root;
	}
	if (find_project_root(s->chdir, &root, NULL) < 0)
		return NULL;
	return root;
}

static void age(long long secs, char *buf, size_t n)
{
	if (secs < 0)
		snprintf(buf, n, "started in the future");
	else if (secs < 60)
		snprintf(buf, n, "started %llds ago", secs);
	else if (secs < 3600)
		snprintf(buf, n, "started %lld min ago", secs / 60);
	else if (secs < 86400 * 2)
		snprintf(buf, n, "started %lld h ago", secs / 3600);
	else
		snprintf(buf, n, "started %lld days ago", secs / 86400);
}

static int plain_word(const char *s, size_t n)
{
	if (!n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= ' ' || s[i] == 0x7f)
			return 0;
	return 1;
}

/* Job ids from the local cache, newest first: never the network. */
/* The names in the cache (its 4th column), newest job first, each once:
 * a name works wherever an id does. */
static void complete_names(struct cstate *s, const char *data)
{
	struct strvec seen_names = STRVEC_INIT;
	char *copy = xstrdup(data), *save = NULL;

	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *f[4] = { line, NULL, NULL, NULL };
		for (int i = 1; i < 4 && f[i - 1]; i++)
			if ((f[i] = strchr(f[i - 1], '\t')))
				*f[i]++ = 0;
		if (!f[3] || !job_id_ok(f[0]) || !job_name_ok(f[3]))
			continue;
		size_t k;
		for (k = 0; k < seen_names.n && strcmp(seen_names.v[k], f[3]); k++)
			;
		if (k < seen_names.n)
			continue;
		sv_push(&seen_names, f[3]);
		char *desc = xasprintf("job %s", f[0]);
		add(s, f[3], desc);
		free(desc);
	}
	sv_clear(&seen_names);
	free(copy);
}

static void complete_jobs(struct cstate *s)
{
	struct strbuf path = STRBUF_INIT, data = STRBUF_INIT;
	char *root = project_root(s);
	int shown = 0;

	if (!root)
		return;
	sb_addf(&path, "%s/%s", root, GR_JOBS_CACHE);
	if (read_file(path.buf, &data, NULL) < 0 || !data.buf)
		goto out;
	complete_names(s, data.buf);
	for (char *line = data.buf, *next; *line && shown < 200; line = next) {
		char *nl = strchr(line, '\n');
		next = nl ? nl + 1 : line + strlen(line);
		if (nl)
			*nl = 0;
		char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
		size_t idlen = t1 ? (size_t)(t1 - line) : strlen(line);
		if (t2 && strchr(t2 + 1, '\t'))
			*strchr(t2 + 1, '\t') = 0; /* the name: offered above */
		line[idlen] = 0;
		/* Only ids of the agent's shape: the cache holds what a host
		 * sent, and a shell inserts what we offer. */
		if (!job_id_ok(line))
			continue;
		struct strbuf desc = STRBUF_INIT;
		if (t1) {
			char *state = t1 + 1;
			size_t slen = t2 ? (size_t)(t2 - state) : strlen(state);
			state[slen] = 0;
			if (!plain_word(state, slen))
				slen = 0; /* not a state gpurun writes: left out */
			sb_add(&desc, state, slen);
			long long start;
			if (t2 && parse_ll(t2 + 1, 0, LLONG_MAX, &start) == 0) {
				char buf[64];
				age(s->src->now - start, buf, sizeof(buf));
				sb_addf(&desc, "%s%s", slen ? ", " : "", buf);
			}
		}
		add(s, line, desc.buf);
		sb_release(&desc);
		shown++;
	}
out:
	free(root);
	sb_release(&path);
	sb_release(&data);
}

static int seen(const struct complete_out *o, size_t from, const char *v)
{
	size_t len = strlen(v);

	for (size_t i = from; i < o->cands.n; i++)
		if (!strncmp(o->cands.v[i], v, len) &&
		    (o->cands.v[i][len] == 0 || o->cands.v[i][len] == '\t'))
			return 1;
	return 0;
}

/* "local" and the Host aliases of ~/.ssh/config (no patterns): the names
 * gpurun resolves the way ssh does. */
static void complete_hosts(struct cstate *s)
{
	struct strbuf data = STRBUF_INIT;
	char *path = expand_home("~/.ssh/config");
	size_t from = s->out->cands.n;

	add(s, "local", "this machine, without ssh");
	if (read_file(path, &data, NULL) < 0 || !data.buf)
		goto out;
	for (char *line = data.buf, *save = NULL, *l; (l = strtok_r(line, "\n", &save)); line = NULL) {
		l += strspn(l, " \t");
		if (strncasecmp(l, "host", 4) || !strchr(" \t=", l[4]))
			continue;
		l += 4;
		l += strspn(l, " \t=");
		for (char *w = l, *save2 = NULL, *h; (h = strtok_r(w, " \t", &save2)); w = NULL) {
			if (strpbrk(h, "*?!\"") || seen(s->out, from, h))
				continue;
			struct strbuf v = STRBUF_INIT;
			sb_adds(&v, h);
			if (strncmp(v.buf, s->cur, strlen(s->cur)) == 0)
				add(s, v.buf, "from ~/.ssh/config");
			sb_release(&v);
		}
	}
out:
	free(path);
	sb_release(&data);
}

static const char *const bool_values[] = { "true", "false", NULL };

/* The partitions `gpurun doctor` found (GR_PARTITIONS_CACHE): what a host
 * said, so only names of a plain shape are offered. */
static void complete_partitions(struct cstate *s)
{
	struct strbuf path = STRBUF_INIT, data = STRBUF_INIT;
	char *root = project_root(s);

	if (!root)
		return;
	sb_addf(&path, "%s/%s", root, GR_PARTITIONS_CACHE);
	if (read_file(path.buf, &data, NULL) == 0 && data.buf) {
		int shown = 0;
		for (char *l = data.buf, *next; *l && shown < 200; l = next) {
			size_t len = strcspn(l, "\n");
			next = l + len + (l[len] == '\n');
			l[len] = '\0';
			if (slurm_partition_ok(l, len)) {
				add(s, l, "Slurm partition (as gpurun doctor found it)");
				shown++;
			}
		}
	}
	free(root);
	sb_release(&path);
	sb_release(&data);
}

/* Config keys "section.key", or for -o "section.key=" then its values. */
static void complete_keys(struct cstate *s, int with_value)
{
	const struct complete_src *src = s->src;
	const char *eq = with_value ? strchr(s->cur, '=') : NULL;
	struct strbuf name = STRBUF_INIT;

	if (eq) {
		for (size_t i = 0; i < src->nkeys; i++) {
			const struct gr_config_key *k = &src->keys[i];
			sb_reset(&name);
			sb_addf(&name, "%s.%s", k->section, k->name);
			if (name.len != (size_t)(eq - s->cur) || strncmp(name.buf, s->cur, name.len))
				continue;
			const char *const *vals = k->type == GR_KEY_ENUM ? k->values :
						  k->type == GR_KEY_BOOL ? bool_values : NULL;
			struct strbuf pre = STRBUF_INIT;
			sb_addf(&pre, "%s%.*s", s->prefix, (int)(eq - s->cur + 1), s->cur);
			struct cstate sub = *s;
			sub.prefix = pre.buf;
			sub.cur = eq + 1;
			for (const char *const *v = vals; v && *v; v++)
				add(&sub, *v, NULL);
			if (!strcmp(name.buf, "slurm.partition"))
				complete_partitions(&sub);
			sb_release(&pre);
		}
		goto out;
	}
	for (size_t i = 0; i < src->nkeys; i++) {
		const struct gr_config_key *k = &src->keys[i];
		sb_reset(&name);
		sb_addf(&name, "%s.%s%s", k->section, k->name, with_value ? "=" : "");
		add(s, name.buf, k->help);
	}
	if (with_value)
		s->out->nospace = 1;
out:
	sb_release(&name);
}

/* The words of a synopsis like "install|uninstall" or "[bash|zsh]". */
static void complete_choice(struct cstate *s, const char *args)
{
	struct strbuf w = STRBUF_INIT;

	for (const char *p = args ? args : ""; *p;) {
		size_t len = strcspn(p, "|[] ");
		if (len) {
			sb_reset(&w);
			sb_add(&w, p, len);
			add(s, w.buf, NULL);
			p += len;
		} else {
			p++;
		}
	}
	sb_release(&w);
}

static void complete_value(struct cstate *s, const struct gr_opt *o, enum gr_complete kind,
			   const struct gr_cmd *cmd)
{
	if (o && o->type == OPT_ENUM) {
		for (const char *const *v = o->values; v && *v; v++)
			add(s, *v, NULL);
		return;
	}
	switch (kind) {
	case COMPLETE_FILE: s->out->files = 1; break;
	case COMPLETE_DIR: s->out->dirs = 1; break;
	case COMPLETE_HOST: complete_hosts(s); break;
	case COMPLETE_JOB: complete_jobs(s); break;
	case COMPLETE_KEY:
		complete_keys(s, o && o->argname && strchr(o->argname, '='));
		break;
	case COMPLETE_CMD:
		for (const struct gr_cmd *c = gr_commands; c->name; c++)
			add(s, c->name, c->summary);
		for (const struct help_topic *t = help_topics; t->name; t++)
			add(s, t->name, t->summary);
		break;
	case COMPLETE_CHOICE: complete_choice(s, cmd ? cmd->args : NULL); break;
	case COMPLETE_NONE: break;
	}
}

static void complete_options(struct cstate *s, const struct gr_opt *opts)
{
	char buf[80];

	for (const struct gr_opt *o = opts; o && o->id; o++) {
		if (o->lng)
			snprintf(buf, sizeof(buf), "--%s", o->lng);
		else
			snprintf(buf, sizeof(buf), "-%c", o->shrt);
		add(s, buf, o->help);
	}
	add(s, "--help", "show help");
}

/* The entry that names letter/word w: the command's table first (its own
 * option of a name wins, as gr_opts_split decides), then the global one;
 * *global says which. */
static const struct gr_opt *lookup2(const struct gr_opt *opts, const struct gr_opt *globals,
				    const char *w, int *global)
{
	const struct gr_opt *o = gr_opt_lookup(opts, w);

	*global = 0;
	if (!o && globals && (o = gr_opt_lookup(globals, w)))
		*global = 1;
	return o;
}

/* w is an option word. Returns the option that takes the next word as
 * its value, or NULL; an inline value ("--x=v", "-Cdir") is passed back
 * in *inl_opt and *inl instead. *global: the option returned (or
 * *inl_opt) is a global one. */
static const struct gr_opt *skip_option(const struct gr_opt *opts, const struct gr_opt *globals,
					const char *w, const struct gr_opt **inl_opt,
					const char **inl, int *global)
{
	*inl_opt = NULL;
	*inl = NULL;
	*global = 0;
	if (w[1] == '-') {
		const struct gr_opt *o = lookup2(opts, globals, w, global);
		const char *eq = strchr(w, '=');
		if (!o || o->type == OPT_FLAG)
			return NULL;
		if (eq) {
			*inl_opt = o;
			*inl = eq + 1;
			return NULL;
		}
		return o;
	}
	for (const char *p = w + 1; *p; p++) {
		char one[3] = { '-', *p, 0 };
		const struct gr_opt *o = *p == 'h' ? NULL : lookup2(opts, globals, one, global);
		if (!o && *p != 'h')
			return NULL;
		if (!o || o->type == OPT_FLAG)
			continue;
		if (p[1]) {
			*inl_opt = o;
			*inl = p + 1;
			return NULL;
		}
		return o;
	}
	return NULL;
}

static void note_global(struct cstate *s, const struct gr_opt *o, const char *val)
{
	if (o->id == G_CHDIR)
		s->chdir = val;
	else if (o->id == G_CONFIG)
		s->cfgfile = val;
}

/* The word under the cursor starts with '-': an option, or "--x=value". */
static void complete_dash(struct cstate *s, const struct gr_opt *opts, const struct gr_opt *globals,
			  const struct gr_cmd *cmd)
{
	const char *w = s->cur;
	int global;
	const struct gr_opt *o = lookup2(opts, globals, w, &global);
	struct strbuf pre = STRBUF_INIT;

	if (o && o->type != OPT_FLAG) {
		const char *val = NULL;
		if (w[1] == '-' && strchr(w, '='))
			val = strchr(w, '=') + 1;
		else if (w[1] != '-' && w[2])
			val = w + 2;
		if (val) {
			sb_add(&pre, w, (size_t)(val - w));
			s->prefix = pre.buf;
			s->cur = val;
			complete_value(s, o, o->complete, global ? NULL : cmd);
			sb_release(&pre);
			return;
		}
	}
	complete_options(s, opts);
}

void complete_words(const struct complete_src *src, int n, char **words,
		    struct complete_out *out)
{
	struct cstate s = { src, out, n > 0 ? words[n - 1] : "", "", NULL, NULL };
	const struct gr_opt *o, *inl_opt;
	const struct gr_cmd *cmd;
	const char *inl;
	int i = 0, last = n > 0 ? n - 1 : 0, positionals = 0, opts_done = 0, global;

	/* Global options, as main.c parses them, up to the command. */
	while (i < last) {
		const char *w = words[i];
		if (!strcmp(w, "--")) {
			i++;
			break;
		}
		if (w[0] != '-' || !w[1])
			break;
		o = skip_option(gr_global_opts, NULL, w, &inl_opt, &inl, &global);
		if (inl_opt)
			note_global(&s, inl_opt, inl);
		if (!o) {
			i++;
			continue;
		}
		if (i + 1 == last) {
			complete_value(&s, o, o->complete, NULL);
			return;
		}
		note_global(&s, o, words[i + 1]);
		i += 2;
	}
	if (i == last) {
		if (s.cur[0] == '-' && (i == 0 || strcmp(words[i - 1], "--")))
			complete_dash(&s, gr_global_opts, NULL, NULL);
		else
			for (const struct gr_cmd *c = gr_commands; c->name; c++)
				add(&s, c->name, c->summary);
		return;
	}
	if (!(cmd = gr_find_command(words[i])))
		return;
	/* The command's own options and positionals, as gr_getopt sees them. */
	for (i++; i < last; i++) {
		const char *w = words[i];
		if (!opts_done && !strcmp(w, "--")) {
			opts_done = 1;
			continue;
		}
		if (opts_done || w[0] != '-' || !w[1]) {
			positionals++;
			if (cmd->needs & CMD_PASSTHROUGH)
				opts_done = 1;
			continue;
		}
		/* Global options are taken here too (gr_opts_split). */
		o = skip_option(cmd->opts, gr_global_opts, w, &inl_opt, &inl, &global);
		if (inl_opt && global)
			note_global(&s, inl_opt, inl);
		if (!o)
			continue;
		if (i + 1 == last) {
			complete_value(&s, o, o->complete, global ? NULL : cmd);
			return;
		}
		if (global)
			note_global(&s, o, words[i + 1]);
		i++;
	}
	if (!opts_done && s.cur[0] == '-') {
		complete_dash(&s, cmd->opts, gr_global_opts, cmd);
		return;
	}
	if (!positionals)
		complete_value(&s, NULL, cmd->complete_args, cmd);
}

void complete_release(struct complete_out *out)
{
	sv_clear(&out->cands);
}

void complete_print(const struct complete_out *out, FILE *f)
{
	for (size_t i = 0; i < out->cands.n; i++)
		fprintf(f, "%s\n", out->cands.v[i]);
	fprintf(f, ":%s%s%s\n", out->nospace ? " nospace" : "", out->files ? " files" : "",
		out->dirs ? " dirs" : "");
}

int complete_main(int argc, char **argv)
{
	struct complete_src src = { 0 };
	struct complete_out out = { 0 };
	char *empty[] = { (char *)"", NULL };

	src.keys = config_keys(&src.nkeys);
	src.now = (long long)time(NULL);
	if (argc > 1)
		complete_words(&src, argc - 1, argv + 1, &out);
	else
		complete_words(&src, 1, empty, &out);
	complete_print(&out, stdout);
	complete_release(&out);
	return 0;
}
