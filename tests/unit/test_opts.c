/* Table-driven option parsing (opts.c): long and short forms, clusters,
 * values inline or separate, ranges, enums, --, and the errors users see. */
#include "t.h"
#include "opts.h"

enum { O_FLAG = 1, O_NAME, O_NUM, O_MODE, O_SHORT };
static const char *const modes[] = { "fast", "slow", NULL };
static const struct gr_opt opts[] = {
	{ O_FLAG, "flag", 'f', OPT_FLAG, NULL, "a flag", NULL, 0, 0, 0 },
	{ O_NAME, "name", 'n', OPT_STRING, "NAME", "a name", NULL, 0, 0, 0 },
	{ O_NUM, "num", 0, OPT_INT, "N", "a number", NULL, 1, 10, 0 },
	{ O_MODE, "mode", 0, OPT_ENUM, "MODE", "a mode", modes, 0, 0, 0 },
	{ O_SHORT, NULL, 's', OPT_FLAG, NULL, "short only", NULL, 0, 0, 0 },
	{ 0 },
};

/* Parse "x ARGS..." into "id=value id id=value | positionals" or "error: msg". */
static char *parse(int stop_at_positional, int argc, char **argv)
{
	struct gr_getopt st;
	struct gr_err err = { 0 };
	struct strbuf sb = STRBUF_INIT;
	int id;

	gr_getopt_init(&st, argc, argv);
	st.stop_at_positional = stop_at_positional;
	while ((id = gr_getopt(&st, opts, &err)) > 0) {
		sb_addf(&sb, "%d", id);
		if (st.arg)
			sb_addf(&sb, "=%s", st.arg);
		sb_adds(&sb, " ");
	}
	if (id < 0) {
		sb_reset(&sb);
		sb_addf(&sb, "error: %s", err.msg);
	} else {
		sb_adds(&sb, "|");
		for (size_t i = 0; i < st.args.n; i++)
			sb_addf(&sb, " %s", st.args.v[i]);
	}
	gr_getopt_release(&st);
	return sb_detach(&sb, NULL);
}

#define CHECK_PARSE(stop, want, ...) do { char *argv_[] = { "x", __VA_ARGS__, NULL }; \
	char *got_ = parse(stop, (int)GR_ARRAY_SIZE(argv_) - 1, argv_); \
	CHECK_STR(got_, want); free(got_); } while (0)

static void long_and_short_forms(void)
{
	CHECK_PARSE(0, "1 2=a 2=b 3=7 |", "--flag", "--name", "a", "--name=b", "--num=7");
	CHECK_PARSE(0, "1 5 2=v |", "-fs", "-nv");
	CHECK_PARSE(0, "1 2=v |", "-fn", "v");
	CHECK_PARSE(0, "4=slow |", "--mode", "slow");
	CHECK_PARSE(0, "1000 1000 |", "-h", "--help");
}

static void positionals_and_double_dash(void)
{
	CHECK_PARSE(0, "1 | a b", "a", "--flag", "b");
	CHECK_PARSE(0, "| --flag -", "--", "--flag", "-");
	CHECK_PARSE(1, "1 | ls --flag", "-f", "ls", "--flag");
}

static void errors_say_what_is_wrong(void)
{
	CHECK_PARSE(0, "error: unknown option '--nope'", "--nope");
	CHECK_PARSE(0, "error: unknown option '-z'", "-z");
	CHECK_PARSE(0, "error: option '--name' needs a value (NAME)", "--name");
	CHECK_PARSE(0, "error: option '--num' needs a whole number from 1 to 10, not '11'", "--num", "11");
	CHECK_PARSE(0, "error: option '--mode' must be one of fast, slow, not 'x'", "--mode=x");
	CHECK_PARSE(0, "error: option '--flag' takes no value", "--flag=1");
}

static void lookup_by_word(void)
{
	CHECK(gr_opt_lookup(opts, "--name")->id == O_NAME);
	CHECK(gr_opt_lookup(opts, "--name=x")->id == O_NAME);
	CHECK(gr_opt_lookup(opts, "-n")->id == O_NAME);
	CHECK(gr_opt_lookup(opts, "-nvalue")->id == O_NAME);
	CHECK(gr_opt_lookup(opts, "-s")->id == O_SHORT);
	CHECK(gr_opt_lookup(opts, "--na") == NULL);
	CHECK(gr_opt_lookup(opts, "--help") == NULL);
	CHECK(gr_opt_lookup(opts, "-") == NULL);
	CHECK(gr_opt_lookup(opts, "name") == NULL);
	CHECK(gr_opt_lookup(NULL, "--name") == NULL);
}

/* gr_opts_split: a command's words and the global options typed among
 * them. The command here has -f/--flag, -n/--name NAME, -s; the global
 * table -v, -q, -C DIR, --host HOST, and -f (which the command's -f
 * hides after the command). */
enum { G_V = 1, G_Q, G_C, G_HOST, G_F };
static const struct gr_opt globals[] = {
	{ G_V, "verbose", 'v', OPT_FLAG, NULL, "v", NULL, 0, 0, 0 },
	{ G_Q, "quiet", 'q', OPT_FLAG, NULL, "q", NULL, 0, 0, 0 },
	{ G_C, NULL, 'C', OPT_STRING, "DIR", "c", NULL, 0, 0, 0 },
	{ G_HOST, "host", 0, OPT_STRING, "HOST", "h", NULL, 0, 0, 0 },
	{ G_F, "flag", 'f', OPT_FLAG, NULL, "global f", NULL, 0, 0, 0 },
	{ 0 },
};

/* "cmd words | global words" */
static char *split(int passthrough, int argc, char **argv)
{
	struct strvec cmd = STRVEC_INIT, glob = STRVEC_INIT;
	struct strbuf sb = STRBUF_INIT;

	gr_opts_split(argc, argv, opts, globals, passthrough, &cmd, &glob);
	for (size_t i = 0; i < cmd.n; i++)
		sb_addf(&sb, "%s%s", i ? " " : "", cmd.v[i]);
	sb_adds(&sb, " |");
	for (size_t i = 0; i < glob.n; i++)
		sb_addf(&sb, " %s", glob.v[i]);
	sv_clear(&cmd);
	sv_clear(&glob);
	return sb_detach(&sb, NULL);
}

#define CHECK_SPLIT(pass, want, ...) do { char *argv_[] = { "cmd", __VA_ARGS__, NULL }; \
	char *got_ = split(pass, (int)GR_ARRAY_SIZE(argv_) - 1, argv_); \
	CHECK_STR(got_, want); free(got_); } while (0)

static void globals_anywhere_before_double_dash(void)
{
	CHECK_SPLIT(0, "cmd job | --host box", "--host", "box", "job");
	CHECK_SPLIT(0, "cmd job | --host=box -v", "job", "--host=box", "-v");
	CHECK_SPLIT(0, "cmd -- -v | -q", "-q", "--", "-v");
	CHECK_SPLIT(0, "cmd a b | -C d -v", "a", "-Cd", "b", "-v");
	CHECK_SPLIT(0, "cmd | -v -q", "-vq");
	CHECK_SPLIT(0, "cmd | -C dir", "-C", "dir");
	/* A value the global needs and the line lacks: gr_getopt says so. */
	CHECK_SPLIT(0, "cmd | --host", "--host");
}

static void the_commands_own_option_wins(void)
{
	CHECK_SPLIT(0, "cmd -f --flag |", "-f", "--flag");
	/* A cluster of both is split; the command's value-taking letter
	 * takes the rest of the word, or the next word whatever it is. */
	CHECK_SPLIT(0, "cmd -fs | -v", "-vfs");
	CHECK_SPLIT(0, "cmd -fnv | -q", "-qfnv");
	CHECK_SPLIT(0, "cmd -n -v | -q", "-qn", "-v");
	CHECK_SPLIT(0, "cmd --name -q |", "--name", "-q");
	CHECK_SPLIT(0, "cmd --name=-q | -v", "--name=-q", "-v");
	/* A global's value is never the command's. */
	CHECK_SPLIT(0, "cmd | --host -f", "--host", "-f");
	/* Neither table names it: the command's to report. */
	CHECK_SPLIT(0, "cmd --nope -zx | -v", "--nope", "-vzx");
	CHECK_SPLIT(0, "cmd -h | -v", "-vh");
}

static void passthrough_stops_at_the_remote_command(void)
{
	CHECK_SPLIT(1, "cmd ls -v --host x | -v", "-v", "ls", "-v", "--host", "x");
	CHECK_SPLIT(1, "cmd -f -- sh -q | -v", "-f", "-v", "--", "sh", "-q");
	CHECK_SPLIT(1, "cmd -n v ls | -q", "-n", "v", "-q", "ls");
}

int main(void)
{
	RUN(long_and_short_forms);
	RUN(positionals_and_double_dash);
	RUN(errors_say_what_is_wrong);
	RUN(lookup_by_word);
	RUN(globals_anywhere_before_double_dash);
	RUN(the_commands_own_option_wins);
	RUN(passthrough_stops_at_the_remote_command);
	return T_DONE();
}
