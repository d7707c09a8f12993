/* The completion engine (`gpurun __complete`): what it offers after a
 * partly typed command line, from the real command and option tables, a
 * fixture config schema, and job caches in real folders. */
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "completion.h"

static const char *const transports[] = { "libssh2", "openssh", "local", NULL };
static const struct gr_config_key keys[] = {
	{ "remote", "host", GR_KEY_STRING, "", NULL, 0, 0, "ssh alias, user@host:port, or local", NULL, NULL, 0 },
	{ "remote", "transport", GR_KEY_ENUM, "libssh2", transports, 0, 0, "how to reach\tthe\nhost", NULL, NULL, 0 },
	{ "sync", "include_git", GR_KEY_BOOL, "false", NULL, 0, 0, "send .git/ too", NULL, NULL, 0 },
	{ "train", "gpus", GR_KEY_STRING, "all", NULL, 0, 0, "which GPUs", NULL, NULL, 0 },
};
static const struct complete_src src = { keys, 4, 1700000000 };

/* Complete `line` (words split at spaces; a trailing space starts an empty
 * word): "cand|cand;directives", values only unless descs. */
static char *complete_line(const char *line, int descs)
{
	struct strvec words = STRVEC_INIT;
	struct complete_out out = { 0 };
	struct strbuf sb = STRBUF_INIT;
	const char *p = line;

	for (;;) {
		size_t n = strcspn(p, " ");
		char *w = xstrndup(p, n);
		sv_push(&words, w);
		free(w);
		if (!p[n])
			break;
		p += n + 1;
	}
	complete_words(&src, (int)words.n, words.v, &out);
	for (size_t i = 0; i < out.cands.n; i++) {
		const char *c = out.cands.v[i];
		size_t n = descs ? strlen(c) : strcspn(c, "\t");
		sb_addf(&sb, "%s%.*s", i ? "|" : "", (int)n, c);
	}
	sb_addf(&sb, ";%s%s%s", out.nospace ? "nospace " : "", out.files ? "files " : "",
		out.dirs ? "dirs " : "");
	complete_release(&out);
	sv_clear(&words);
	return sb_detach(&sb, NULL);
}

#define CHECK_COMPLETES(line, want) do { char *got_ = complete_line(line, 0); \
	CHECK_STR(got_, want); free(got_); } while (0)

static void commands_at_the_start(void)
{
	struct strbuf want = STRBUF_INIT;

	for (const struct gr_cmd *c = gr_commands; c->name; c++)
		sb_addf(&want, "%s%s", c == gr_commands ? "" : "|", c->name);
	sb_adds(&want, ";");
	CHECK_COMPLETES("", want.buf);
	CHECK_COMPLETES("st", "status|stop;");
	CHECK_COMPLETES("-v st", "status|stop;");
	CHECK_COMPLETES("-C /tmp st", "status|stop;");
	CHECK_COMPLETES("-- st", "status|stop;");
	CHECK_COMPLETES("nosuch ", ";");
	sb_release(&want);
}

static void commands_have_their_summaries(void)
{
	char *got = complete_line("sy", 1);
	struct strbuf want = STRBUF_INIT;

	sb_addf(&want, "sync\t%s;", gr_find_command("sync")->summary);
	CHECK_STR(got, want.buf);
	free(got);
	sb_release(&want);
}

static void global_options(void)
{
	char *got = complete_line("--", 0);

	for (const struct gr_opt *o = gr_global_opts; o->id; o++) {
		char buf[64];
		if (!o->lng)
			continue;
		snprintf(buf, sizeof(buf), "--%s", o->lng);
		CHECK(strstr(got, buf) != NULL);
	}
	CHECK(strstr(got, "--help") != NULL);
	CHECK(strstr(got, "-C") == NULL); /* short-only: filtered by the "--" typed */
	free(got);
	got = complete_line("-", 0);
	CHECK(strstr(got, "|-C|") != NULL && strstr(got, "|-o|") != NULL);
	free(got);
	CHECK_COMPLETES("--ver", "--verbose|--version;");
}

static void enum_values_of_global_options(void)
{
	CHECK_COMPLETES("--color ", "auto|always|never;");
	CHECK_COMPLETES("--color a", "auto|always;");
	CHECK_COMPLETES("--color=n", "--color=never;");
	CHECK_COMPLETES("-q --color=", "--color=auto|--color=always|--color=never;");
}

static void files_dirs_and_hosts(void)
{
	CHECK_COMPLETES("-c ", ";files ");
	CHECK_COMPLETES("--config-file=x", ";files ");
	CHECK_COMPLETES("-C ", ";dirs ");
	CHECK_COMPLETES("-Cpro", ";dirs ");
	char *got = complete_line("--host ", 0);
	CHECK(!strncmp(got, "local", 5));
	free(got);
}

static void config_keys_for_config_and_o(void)
{
	CHECK_COMPLETES("config ", "remote.host|remote.transport|sync.include_git|train.gpus;");
	CHECK_COMPLETES("config re", "remote.host|remote.transport;");
	CHECK_COMPLETES("config remote.host ", ";");
	CHECK_COMPLETES("-o ", "remote.host=|remote.transport=|sync.include_git=|train.gpus=;nospace ");
	CHECK_COMPLETES("-v -o tr", "train.gpus=;nospace ");
	CHECK_COMPLETES("-o remote.transport=",
			"remote.transport=libssh2|remote.transport=openssh|remote.transport=local;");
	CHECK_COMPLETES("-o remote.transport=o", "remote.transport=openssh;");
	CHECK_COMPLETES("-o sync.include_git=", "sync.include_git=true|sync.include_git=false;");
	CHECK_COMPLETES("-o remote.host=", ";");
	CHECK_COMPLETES("-o nosuch.key=", ";");
	CHECK_COMPLETES("-o remote.host=x st", "status|stop;");
}

static void descriptions_are_one_line(void)
{
	char *got = complete_line("config remote.t", 1);

	CHECK_STR(got, "remote.transport\thow to reach the host;");
	free(got);
}

static void command_options_and_passthrough(void)
{
	CHECK_COMPLETES("exec -", "-n|--raw|--tty|--forward|--sync|--help;");
	CHECK_COMPLETES("exec --", "--raw|--tty|--forward|--sync|--help;");
	CHECK_COMPLETES("exec --forward ", ";");
	CHECK_COMPLETES("exec ls -", ";");
	CHECK_COMPLETES("exec -n ls --", ";");
	CHECK_COMPLETES("exec -- -", ";");
	CHECK_COMPLETES("config --", "--json|--help;");
	CHECK_COMPLETES("config -- --", ";");
	CHECK_COMPLETES("sync --h", "--help;");
}

static void choices_and_help_topics(void)
{
	CHECK_COMPLETES("hook ", "install|uninstall;");
	CHECK_COMPLETES("hook install ", ";");
	CHECK_COMPLETES("completion ", "bash|zsh|fish;");
	CHECK_COMPLETES("completion z", "zsh;");
	CHECK_COMPLETES("help ex", "exec|exit-codes;");
	CHECK_COMPLETES("help co", "config|completion;");
	char *got = complete_line("help ", 0);
	for (const struct help_topic *t = help_topics; t->name; t++)
		CHECK(strstr(got, t->name) != NULL);
	free(got);
}

/* A project in a fresh folder: gpurun.ini, a job cache, a subfolder. */
static char *make_project(char *tmpl, const char *jobs)
{
	struct strbuf p = STRBUF_INIT;
	char *root = mkdtemp(tmpl);

	if (!root)
		return NULL;
	sb_addf(&p, "%s/gpurun.ini", root);
	write_file_atomic(p.buf, "[remote]\nhost = local\n", 22, 0644, NULL);
	sb_reset(&p);
	sb_addf(&p, "%s/.gpurun", root);
	mkdir(p.buf, 0755);
	sb_adds(&p, "/jobs");
	if (jobs)
		write_file_atomic(p.buf, jobs, strlen(jobs), 0644, NULL);
	sb_reset(&p);
	sb_addf(&p, "%s/sub/deeper", root);
	mkdir_p(p.buf, 0755, NULL);
	sb_release(&p);
	return root;
}

static void remove_tree(const char *root)
{
	char *cmd = xasprintf("rm -rf '%s'", root);
	if (system(cmd) != 0)
		fprintf(stderr, "  could not remove %s\n", root);
	free(cmd);
}

static void job_ids_from_the_local_cache(void)
{
	char tmpl[] = "/tmp/gpurun-unit-jobs.XXXXXX";
	const char *jobs =
		"20240611-120501-b7c0\trunning\t1699999700\n"
		"20240610-090000-a3d1\tdone\t1699740800\n"
		"\tno-id\t1\n"
		"bad\x01id\tdone\t1\n"
		"../../home\tdone\t1\n"
		"20240607-000000-beef\x1b]0;t\a\tdone\t1\n"
		"20240607-000000-bee\tdone\t1\n"
		"20240609-080000-ff00\tfailed\n"
		"20240608-000000-0000\n";
	char *root = make_project(tmpl, jobs);
	const char *ids = "20240611-120501-b7c0|20240610-090000-a3d1|20240609-080000-ff00|20240608-000000-0000;";
	char line[PATH_MAX + 64];

	if (!root)
		SKIP("cannot make a temporary folder");
	snprintf(line, sizeof(line), "-C %s logs ", root);
	CHECK_COMPLETES(line, ids);
	snprintf(line, sizeof(line), "-C %s/sub/deeper stop ", root);
	CHECK_COMPLETES(line, ids);
	snprintf(line, sizeof(line), "-c %s/gpurun.ini -v pull 2024061", root);
	CHECK_COMPLETES(line, "20240611-120501-b7c0|20240610-090000-a3d1;");
	snprintf(line, sizeof(line), "-C %s status 2024061 ", root);
	CHECK_COMPLETES(line, ";");
	snprintf(line, sizeof(line), "-C %s logs 2024061", root);
	char *got = complete_line(line, 1);
	CHECK_STR(got, "20240611-120501-b7c0\trunning, started 5 min ago|"
		       "20240610-090000-a3d1\tdone, started 3 days ago;");
	free(got);
	remove_tree(root);
}

static void no_project_no_jobs(void)
{
	char tmpl[] = "/tmp/gpurun-unit-nojobs.XXXXXX";
	char *dir = mkdtemp(tmpl);
	char line[PATH_MAX + 64];

	if (!dir)
		SKIP("cannot make a temporary folder");
	snprintf(line, sizeof(line), "-C %s logs ", dir);
	CHECK_COMPLETES(line, ";");
	snprintf(line, sizeof(line), "-C %s/does-not-exist logs ", dir);
	CHECK_COMPLETES(line, ";");
	remove_tree(dir);
}

static void project_root_walks_up(void)
{
	char tmpl[] = "/tmp/gpurun-unit-root.XXXXXX";
	char *root = make_project(tmpl, NULL), *found = NULL, real[PATH_MAX];
	struct gr_err err = { 0 };
	struct strbuf sub = STRBUF_INIT;

	if (!root || !realpath(root, real))
		SKIP("cannot make a temporary folder");
	sb_addf(&sub, "%s/sub/deeper", root);
	CHECK_EQ_INT(find_project_root(sub.buf, &found, &err), 0);
	CHECK_STR(found, real);
	free(found);
	found = NULL;
	sb_reset(&sub);
	sb_addf(&sub, "%s/gpurun.ini", root);
	unlink(sub.buf);
	CHECK_EQ_INT(find_project_root(root, &found, &err), GR_ENOTFOUND);
	CHECK(found == NULL);
	CHECK(strstr(err.hint, "gpurun init") != NULL);
	sb_release(&sub);
	remove_tree(root);
}

static void print_format(void)
{
	struct complete_out out = { 0 };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	sv_push(&out.cands, "a\tthe a");
	sv_push(&out.cands, "b");
	out.nospace = 1;
	out.files = 1;
	complete_print(&out, f);
	fclose(f);
	CHECK_STR(buf, "a\tthe a\nb\n: nospace files\n");
	free(buf);
	complete_release(&out);
}

static void scripts_exist_for_three_shells(void)
{
	CHECK(completion_script("bash") && strstr(completion_script("bash"), "__complete"));
	CHECK(completion_script("zsh") && strstr(completion_script("zsh"), "#compdef gpurun"));
	CHECK(completion_script("fish") && strstr(completion_script("fish"), "complete -c gpurun"));
	CHECK(completion_script("powershell") == NULL);
}

int main(void)
{
	RUN(commands_at_the_start);
	RUN(commands_have_their_summaries);
	RUN(global_options);
	RUN(enum_values_of_global_options);
	RUN(files_dirs_and_hosts);
	RUN(config_keys_for_config_and_o);
	RUN(descriptions_are_one_line);
	RUN(command_options_and_passthrough);
	RUN(choices_and_help_topics);
	RUN(job_ids_from_the_local_cache);
	RUN(no_project_no_jobs);
	RUN(project_root_walks_up);
	RUN(print_format);
	RUN(scripts_exist_for_three_shells);
	return T_DONE();
}
