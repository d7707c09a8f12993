/* Table-driven option parsing (see opts.h): GNU-style long options with
 * --opt=value or --opt value, short clusters, and -- to end options. */
#include <stdio.h>
#include <string.h>

#include "opts.h"

void gr_getopt_init(struct gr_getopt *st, int argc, char **argv)
{
	memset(st, 0, sizeof(*st));
	st->argc = argc;
	st->argv = argv;
	st->i = 1;
}

void gr_getopt_release(struct gr_getopt *st)
{
	sv_clear(&st->args);
}

static int take_value(struct gr_getopt *st, const struct gr_opt *o,
		      const char *inline_val, const char *shown, struct gr_err *err)
{
	const char *v = inline_val;

	if (!v) {
		if (st->i >= st->argc) {
			gr_errf(err, GR_EUSAGE, "option '%s' needs a value (%s)", shown,
				o->argname ? o->argname : "value");
			return GR_EUSAGE;
		}
		v = st->argv[st->i++];
	}
	st->arg = v;
	if (o->type == OPT_INT) {
		if (parse_ll(v, o->min, o->max, &st->num) < 0) {
			gr_errf(err, GR_EUSAGE, "option '%s' needs a whole number from %lld to %lld, not '%s'",
				shown, o->min, o->max, v);
			return GR_EUSAGE;
		}
	} else if (o->type == OPT_ENUM) {
		for (const char *const *p = o->values; p && *p; p++)
			if (!strcmp(*p, v))
				return o->id;
		struct strbuf sb = STRBUF_INIT;
		for (const char *const *p = o->values; p && *p; p++)
			sb_addf(&sb, "%s%s", p == o->values ? "" : ", ", *p);
		gr_errf(err, GR_EUSAGE, "option '%s' must be one of %s, not '%s'", shown,
			sb.buf ? sb.buf : "", v);
		sb_release(&sb);
		return GR_EUSAGE;
	}
	return o->id;
}

int gr_getopt(struct gr_getopt *st, const struct gr_opt *opts, struct gr_err *err)
{
	static const struct gr_opt help = { OPT_HELP, "help", 'h', OPT_FLAG, NULL, NULL, NULL, 0, 0, 0 };

	st->arg = NULL;
	if (st->cluster && *st->cluster) {
		char c = *st->cluster++;
		const struct gr_opt *o = c == 'h' ? &help : NULL;
		for (const struct gr_opt *p = opts; !o && p && p->id; p++)
			if (p->shrt == c)
				o = p;
		if (!o) {
			gr_errf(err, GR_EUSAGE, "unknown option '-%c'", c);
			return GR_EUSAGE;
		}
		if (o->type == OPT_FLAG)
			return o->id;
		char shown[3] = { '-', c, 0 };
		const char *inl = *st->cluster ? st->cluster : NULL;
		st->cluster = NULL;
		return take_value(st, o, inl, shown, err);
	}
	while (st->i < st->argc) {
		const char *a = st->argv[st->i];
		if (st->done_opts || a[0] != '-' || !a[1]) {
			sv_push(&st->args, a);
			st->i++;
			if (st->stop_at_positional)
				st->done_opts = 1;
			continue;
		}
		st->i++;
		if (!strcmp(a, "--")) {
			st->done_opts = 1;
			continue;
		}
		if (a[1] != '-') {
			st->cluster = a + 1;
			return gr_getopt(st, opts, err);
		}
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		const struct gr_opt *o = NULL;
		if (len == 4 && !strncmp(name, "help", 4))
			o = &help;
		for (const struct gr_opt *p = opts; !o && p && p->id; p++)
			if (p->lng && strlen(p->lng) == len && !strncmp(p->lng, name, len))
				o = p;
		if (!o) {
			gr_errf(err, GR_EUSAGE, "unknown option '--%.*s'", (int)len, name);
			return GR_EUSAGE;
		}
		if (o->type == OPT_FLAG) {
			if (eq) {
				gr_errf(err, GR_EUSAGE, "option '--%s' takes no value", o->lng);
				return GR_EUSAGE;
			}
			return o->id;
		}
		char shown[64];
		snprintf(shown, sizeof(shown), "--%s", o->lng);
		return take_value(st, o, eq ? eq + 1 : NULL, shown, err);
	}
	return 0;
}

const struct gr_opt *gr_opt_lookup(const struct gr_opt *opts, const char *word)
{
	if (!word || word[0] != '-' || !word[1])
		return NULL;
	if (word[1] == '-') {
		const char *name = word + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		for (const struct gr_opt *p = opts; p && p->id; p++)
			if (p->lng && strlen(p->lng) == len && !strncmp(p->lng, name, len))
				return p;
		return NULL;
	}
	for (const struct gr_opt *p = opts; p && p->id; p++)
		if (p->shrt && p->shrt == word[1])
			return p;
	return NULL;
}

/* The entry of opts with long name name[0..len), or NULL. */
static const struct gr_opt *find_long(const struct gr_opt *opts, const char *name, size_t len)
{
	for (const struct gr_opt *p = opts; p && p->id; p++)
		if (p->lng && strlen(p->lng) == len && !strncmp(p->lng, name, len))
			return p;
	return NULL;
}

static const struct gr_opt *find_short(const struct gr_opt *opts, char c)
{
	for (const struct gr_opt *p = opts; p && p->id; p++)
		if (p->shrt && p->shrt == c)
			return p;
	return NULL;
}

static const struct gr_opt help_opt = { OPT_HELP, "help", 'h', OPT_FLAG, NULL, NULL, NULL, 0, 0, 0 };

void gr_opts_split(int argc, char **argv, const struct gr_opt *cmd_opts,
		   const struct gr_opt *globals, int passthrough, struct strvec *cmd,
		   struct strvec *glob)
{
	int i = 1;

	if (argc > 0)
		sv_push(cmd, argv[0]);
	while (i < argc) {
		const char *a = argv[i++];
		if (!strcmp(a, "--")) {
			i--;
			break;
		}
		if (a[0] != '-' || !a[1]) { /* a positional */
			sv_push(cmd, a);
			if (passthrough)
				break;
			continue;
		}
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			const struct gr_opt *o = len == 4 && !strncmp(name, "help", 4) ? &help_opt
						 : find_long(cmd_opts, name, len);
			struct strvec *to = cmd;
			if (!o && (o = find_long(globals, name, len)))
				to = glob;
			sv_push(to, a);
			/* Its value, when it takes one and none is inline: the
			 * next word, whatever it looks like (gr_getopt's way). */
			if (o && o->type != OPT_FLAG && !eq && i < argc)
				sv_push(to, argv[i++]);
			continue;
		}
		/* A cluster: each letter to the table that names it, the
		 * command's first; a letter that takes a value takes the
		 * rest of the word, or else the next word. */
		struct strbuf kept = STRBUF_INIT;
		const char *next_for_cmd = NULL;
		for (const char *p = a + 1; *p; p++) {
			const struct gr_opt *o = *p == 'h' ? &help_opt : find_short(cmd_opts, *p);
			if (o || !(o = find_short(globals, *p))) {
				/* The command's, or nobody's: the command reports it. */
				if (!kept.len)
					sb_adds(&kept, "-");
				if (!o || o->type != OPT_FLAG) {
					sb_adds(&kept, p);
					if (o && !p[1] && i < argc)
						next_for_cmd = argv[i++];
					break;
				}
				sb_add(&kept, p, 1);
				continue;
			}
			char one[3] = { '-', *p, 0 };
			sv_push(glob, one);
			if (o->type == OPT_FLAG)
				continue;
			if (p[1])
				sv_push(glob, p + 1);
			else if (i < argc)
				sv_push(glob, argv[i++]);
			break;
		}
		if (kept.len)
			sv_push(cmd, kept.buf);
		if (next_for_cmd)
			sv_push(cmd, next_for_cmd);
		sb_release(&kept);
	}
	for (; i < argc; i++)
		sv_push(cmd, argv[i]);
}
