/* Help generated from the tables: every command's help shows its usage and
 * every option of its table (enum values included), the overview lists
 * every command, global option and topic, and typos get suggestions. */
#include "t.h"
#include "gpurun.h"

static char *capture(void (*fn)(const struct gr_cmd *, FILE *), const struct gr_cmd *c,
		     void (*fn0)(FILE *))
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (fn)
		fn(c, f);
	else
		fn0(f);
	fclose(f);
	return buf;
}

/* Is the option shown in help text: "--name" or "-x" followed by a space,
 * a newline or a comma, and its enum values joined by '|'? */
static int shows_option(const char *text, const struct gr_opt *o)
{
	char want[128];

	if (o->lng)
		snprintf(want, sizeof(want), "--%s", o->lng);
	else
		snprintf(want, sizeof(want), "-%c", o->shrt);
	const char *p = strstr(text, want);
	if (!p)
		return 0;
	if (o->type == OPT_ENUM) {
		struct strbuf vals = STRBUF_INIT;
		for (const char *const *v = o->values; v && *v; v++)
			sb_addf(&vals, "%s%s", v == o->values ? "" : "|", *v);
		int ok = vals.buf && strstr(p, vals.buf) != NULL;
		sb_release(&vals);
		return ok;
	}
	return 1;
}

static void every_command_shows_every_option(void)
{
	for (const struct gr_cmd *c = gr_commands; c->name; c++) {
		char *h = capture(help_command, c, NULL);
		struct strbuf usage = STRBUF_INIT;
		help_usage_line(c, &usage);
		if (strncmp(h, usage.buf, usage.len)) {
			fprintf(stderr, "  '%s' help does not start with '%s'\n", c->name, usage.buf);
			t_case_failed = 1;
		}
		CHECK(strstr(h, c->summary) != NULL);
		if (c->help)
			CHECK(strstr(h, c->help) != NULL);
		CHECK(strstr(h, "-h, --help") != NULL);
		for (const struct gr_opt *o = c->opts; o && o->id; o++)
			if (!shows_option(h, o)) {
				fprintf(stderr, "  '%s' help lacks option %s\n", c->name,
					o->lng ? o->lng : "(short)");
				t_case_failed = 1;
			}
		sb_release(&usage);
		free(h);
	}
}

static void overview_lists_commands_options_topics(void)
{
	char *h = capture(NULL, NULL, help_overview);

	for (const struct gr_cmd *c = gr_commands; c->name; c++) {
		char want[64];
		snprintf(want, sizeof(want), "\n  %-12s %s\n", c->name, c->summary);
		CHECK(strstr(h, want) != NULL);
	}
	for (const struct gr_opt *o = gr_global_opts; o->id; o++)
		CHECK(shows_option(h, o));
	for (const struct help_topic *t = help_topics; t->name; t++)
		CHECK(strstr(h, t->name) != NULL);
	free(h);
}

static void usage_line_has_the_synopsis(void)
{
	struct strbuf sb = STRBUF_INIT;

	help_usage_line(gr_find_command("hook"), &sb);
	CHECK_STR(sb.buf, "usage: gpurun hook [OPTIONS] install|uninstall");
	sb_reset(&sb);
	help_usage_line(gr_find_command("sync"), &sb);
	CHECK_STR(sb.buf, "usage: gpurun sync [OPTIONS]");
	sb_release(&sb);
}

static void exit_codes_name_every_code(void)
{
	char *h = capture(NULL, NULL, help_exit_codes);
	int codes[] = { GR_EXIT_JOB_LOST, GR_EXIT_INTERRUPTED, GR_EXIT_SYNC, GR_EXIT_REMOTE,
			GR_EXIT_USAGE, GR_EXIT_CONFIG, GR_EXIT_AUTH, GR_EXIT_CONNECT };

	for (size_t i = 0; i < GR_ARRAY_SIZE(codes); i++) {
		char want[16];
		snprintf(want, sizeof(want), "\n  %d ", codes[i]);
		CHECK(strstr(h, want) != NULL);
	}
	free(h);
}

static void config_help_lists_every_key(void)
{
	size_t n = 0;
	const struct gr_config_key *keys = config_keys(&n);
	char *h = capture(help_command, gr_find_command("config"), NULL);

	if (!n) {
		free(h);
		SKIP("config_keys() is empty in this build (placeholder schema)");
	}
	for (size_t i = 0; i < n; i++) {
		char want[128];
		snprintf(want, sizeof(want), "\n  %s.%s ", keys[i].section, keys[i].name);
		if (!strstr(h, want)) {
			fprintf(stderr, "  'gpurun help config' lacks %s.%s\n", keys[i].section,
				keys[i].name);
			t_case_failed = 1;
		}
	}
	free(h);
}

static void command_help_lists_its_section(void)
{
	size_t n = 0, sync_keys = 0;
	const struct gr_config_key *keys = config_keys(&n);
	char *h = capture(help_command, gr_find_command("sync"), NULL);

	for (size_t i = 0; i < n; i++) {
		char want[128];
		if (strcmp(keys[i].section, "sync"))
			continue;
		sync_keys++;
		snprintf(want, sizeof(want), "\n  sync.%s ", keys[i].name);
		CHECK(strstr(h, want) != NULL);
	}
	free(h);
	if (!sync_keys)
		SKIP("config_keys() has no [sync] keys in this build (placeholder schema)");
}

static void typos_get_suggestions(void)
{
	CHECK_STR(help_suggest("stauts"), "status");
	CHECK_STR(help_suggest("sycn"), "sync");
	CHECK_STR(help_suggest("trian"), "train");
	CHECK_STR(help_suggest("comp"), "completion");
	CHECK_STR(help_suggest("exit-code"), "exit-codes");
	CHECK(help_suggest("xyzzy") == NULL);
	CHECK(help_suggest("") == NULL);
	CHECK(help_suggest("a-very-long-word-that-is-no-command") == NULL);
}

int main(void)
{
	RUN(every_command_shows_every_option);
	RUN(overview_lists_commands_options_topics);
	RUN(usage_line_has_the_synopsis);
	RUN(exit_codes_name_every_code);
	RUN(config_help_lists_every_key);
	RUN(command_help_lists_its_section);
	RUN(typos_get_suggestions);
	return T_DONE();
}
