/* Job names, the git fields and the words of `train -- CMD ARGS` as the
 * client checks and shows them: job_name_ok's shape, a record from the
 * host with a bad name or commit refused (job_rec_check), the display of
 * an argv that a shell splits back into the same words, and [train] env's
 * quoting. */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "config.h"
#include "job_client.h"
#include "train_spec.h"

static void names(void)
{
	static const char *const good[] = { "a", "exp-1", "lr_3e-4", "R2.d2", "x0123456789", NULL };
	static const char *const bad[] = { "", "1abc", "20261122-003512-a1b2", "-x", ".x", "a b",
					   "a/b", "a\nb", "\xc3\xa9t\xc3\xa9", "x;rm", "a\033[31m", NULL };
	char longname[GR_JOB_NAME_MAX + 2];

	for (const char *const *p = good; *p; p++)
		CHECK(job_name_ok(*p));
	for (const char *const *p = bad; *p; p++)
		CHECK(!job_name_ok(*p));
	memset(longname, 'a', sizeof(longname) - 1);
	longname[GR_JOB_NAME_MAX] = 0;
	CHECK(job_name_ok(longname));
	longname[GR_JOB_NAME_MAX] = 'a';
	longname[GR_JOB_NAME_MAX + 1] = 0;
	CHECK(!job_name_ok(longname));
}

static void records_from_the_host(void)
{
	struct job_rec r = { 0 };
	struct gr_err err = { 0 };

	r.id = (char *)"20261122-003512-a1b2";
	r.name = (char *)"ok-name";
	r.git_commit = (char *)"0123456789abcdef0123456789abcdef01234567";
	r.git_diff = (char *)"";
	CHECK_EQ_INT(job_rec_check(&r, &err), 0);
	r.name = (char *)"bad\033]52;c;AAAA\a";
	CHECK_EQ_INT(job_rec_check(&r, &err), GR_EPROTO);
	CHECK(strstr(err.msg, "invalid name") != NULL);
	CHECK(strchr(err.msg, '\033') == NULL);
	r.name = (char *)"";
	r.git_commit = (char *)"0123; touch x";
	CHECK_EQ_INT(job_rec_check(&r, &err), GR_EPROTO);
	r.git_commit = (char *)"";
	r.git_diff = (char *)"abc";
	CHECK_EQ_INT(job_rec_check(&r, &err), GR_EPROTO);
}

static void argv_shown_as_a_shell_would_split_it(void)
{
	char *v1[] = { (char *)"python3", (char *)"train.py", (char *)"--lr", (char *)"3e-4" };
	char *v2[] = { (char *)"echo", (char *)"a b", (char *)"it's", (char *)"", (char *)"$HOME" };
	char *s;

	s = argv_display(v1, 4);
	CHECK_STR(s, "python3 train.py --lr 3e-4");
	free(s);
	s = argv_display(v2, 5);
	CHECK_STR(s, "echo 'a b' 'it'\\''s' '' '$HOME'");
	free(s);
}

static void env_words(void)
{
	struct strvec out = STRVEC_INIT;
	struct strbuf why = STRBUF_INIT;

	CHECK_EQ_INT(config_env_parse(" A=1  B=\"x y\" C='a,\"b' D=a\\ b E=\"\\$x\\\"\" F= ", &out, &why), 0);
	CHECK_EQ_INT((int)out.n, 6);
	if (out.n == 6) {
		CHECK_STR(out.v[0], "A=1");
		CHECK_STR(out.v[1], "B=x y");
		CHECK_STR(out.v[2], "C=a,\"b");
		CHECK_STR(out.v[3], "D=a b");
		CHECK_STR(out.v[4], "E=$x\"");
		CHECK_STR(out.v[5], "F=");
	}
	sv_clear(&out);
	CHECK_EQ_INT(config_env_parse("A='open", NULL, &why), -1);
	CHECK_EQ_INT(config_env_parse("A=\"open", NULL, &why), -1);
	CHECK_EQ_INT(config_env_parse("=x", NULL, &why), -1);
	CHECK_EQ_INT(config_env_parse("9A=x", NULL, &why), -1);
	CHECK_EQ_INT(config_env_parse("A-B=x", NULL, &why), -1);
	CHECK_EQ_INT(config_env_parse("JUSTAWORD", NULL, &why), -1);
	sb_release(&why);
}

int main(void)
{
	RUN(names);
	RUN(records_from_the_host);
	RUN(argv_shown_as_a_shell_would_split_it);
	RUN(env_words);
	return T_DONE();
}
