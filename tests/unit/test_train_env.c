/* train's --env NAME and --env-file FILE (train_env.c): dotenv lines,
 * quotes and escapes, a NAME taken from here, and errors that name
 * FILE:LINE. */
#include <stdlib.h>

#include "t.h"
#include "train_spec.h"

/* The NAME=VALUE words text gives, joined by '|', or "error: MSG". */
static char *parse(const char *text)
{
	struct strvec env = STRVEC_INIT;
	struct gr_err err = { 0 };
	struct strbuf sb = STRBUF_INIT;

	if (train_env_parse("f.env", text, strlen(text), &env, &err) < 0) {
		sb_addf(&sb, "error: %s", err.msg);
	} else {
		for (size_t i = 0; i < env.n; i++)
			sb_addf(&sb, "%s%s", i ? "|" : "", env.v[i]);
	}
	sv_clear(&env);
	return sb.buf ? sb_detach(&sb, NULL) : xstrdup("");
}

#define CHECK_ENV(text, want) do { char *got_ = parse(text); CHECK_STR(got_, want); \
	free(got_); } while (0)

static void plain_lines_comments_export(void)
{
	CHECK_ENV("", "");
	CHECK_ENV("A=1\nB=two words\n", "A=1|B=two words");
	CHECK_ENV("# c\n\n  \t\nexport A=1\n  export\tB = 2  \nC=\n", "A=1|B=2|C=");
	CHECK_ENV("A=x # note\nB=x#y\nC=3", "A=x|B=x#y|C=3");
	CHECK_ENV("A=1\r\nB=2\r\n", "A=1|B=2");
	CHECK_ENV("A=1\nA=2\n", "A=1|A=2"); /* later wins, in the job */
	CHECK_ENV("export=1\n", "export=1");
}

static void quotes_and_escapes(void)
{
	CHECK_ENV("A='a \"b\" \\n $c' # c\n", "A=a \"b\" \\n $c");
	CHECK_ENV("A=\"a\\nb\\tc\\\\d\\\"e\\'f\\$g\\xh\"\n", "A=a\nb\tc\\d\"e'f$g\\xh");
	CHECK_ENV("KEY=\"-----BEGIN\nline\n-----END\"\nB=1\n", "KEY=-----BEGIN\nline\n-----END|B=1");
	CHECK_ENV("A='multi\nline'\nB=2", "A=multi\nline|B=2");
	CHECK_ENV("A=\"\"\nB=''\n", "A=|B=");
	CHECK_ENV("A=it's\n", "A=it's");
}

static void a_name_alone_comes_from_here(void)
{
	setenv("GR_TEST_TOKEN", "s3cr3t", 1);
	unsetenv("GR_TEST_UNSET");
	CHECK_ENV("GR_TEST_TOKEN\n", "GR_TEST_TOKEN=s3cr3t");
	CHECK_ENV("export GR_TEST_TOKEN # from the shell\n", "GR_TEST_TOKEN=s3cr3t");
	CHECK_ENV("A=1\nGR_TEST_UNSET\n",
		  "error: f.env:2: GR_TEST_UNSET is not set in this environment");

	struct strvec env = STRVEC_INIT;
	struct gr_err err = { 0 };
	CHECK(train_env_arg("GR_TEST_TOKEN", &env, &err) == 0);
	CHECK(train_env_arg("B=x y", &env, &err) == 0);
	CHECK_EQ_INT(env.n, 2);
	CHECK_STR(env.v[0], "GR_TEST_TOKEN=s3cr3t");
	CHECK_STR(env.v[1], "B=x y");
	CHECK(train_env_arg("GR_TEST_UNSET", &env, &err) == GR_EUSAGE);
	CHECK_STR(err.msg, "--env: GR_TEST_UNSET is not set in this environment");
	CHECK(train_env_arg("1X", &env, &err) == GR_EUSAGE);
	CHECK(strstr(err.msg, "'1X' is not a variable name") != NULL);
	CHECK(train_env_arg("=x", &env, &err) == GR_EUSAGE);
	CHECK_EQ_INT(env.n, 2);
	sv_clear(&env);
}

static void bad_lines_say_file_and_line(void)
{
	CHECK_ENV("A=1\n\nB C\n", "error: f.env:3: not NAME=VALUE (NAME: letters, digits, _; "
		  "not a digit first)");
	CHECK_ENV("1A=x\n", "error: f.env:1: not NAME=VALUE (NAME: letters, digits, _; "
		  "not a digit first)");
	CHECK_ENV("=x\n", "error: f.env:1: not NAME=VALUE (NAME: letters, digits, _; "
		  "not a digit first)");
	CHECK_ENV("A=1\nB=\"open\nC=2\n", "error: f.env:2: a \" is not closed");
	CHECK_ENV("A='x\n", "error: f.env:1: a ' is not closed");
	CHECK_ENV("A='x' y\n", "error: f.env:1: text after the closing quote");
	CHECK_ENV("A=\"x\nz\" y\n", "error: f.env:1: text after the closing quote");
	CHECK_ENV("A='x\ny'\nB-C=1\n", "error: f.env:3: not NAME=VALUE (NAME: letters, digits, _; "
		  "not a digit first)");

	char nul[] = "A=1\nB=\0x\n";
	struct strvec env = STRVEC_INIT;
	struct gr_err err = { 0 };
	CHECK(train_env_parse("f.env", nul, sizeof(nul) - 1, &env, &err) == GR_EUSAGE);
	CHECK_STR(err.msg, "f.env:2: a NUL byte: not a text file");
	CHECK(train_env_file("/nonexistent/x.env", &env, &err) == GR_EUSAGE);
	CHECK(strstr(err.msg, "cannot open '/nonexistent/x.env'") != NULL);
	sv_clear(&env);
}

int main(void)
{
	RUN(plain_lines_comments_export);
	RUN(quotes_and_escapes);
	RUN(a_name_alone_comes_from_here);
	RUN(bad_lines_say_file_and_line);
	return T_DONE();
}
