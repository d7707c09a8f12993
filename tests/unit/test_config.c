/* gpurun.ini: every key type, precedence (default < user config < file <
 * environment < flags) with origins, the parent-folder search, -c, every
 * error path with file:line, inih's edges (long lines, indentation, CRLF,
 * BOM), comments after values as git config has them, list keys quoted as
 * [train] env is, and the template `gpurun init` writes loading back. The
 * user config, host lists and [pools]: test_config_user.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_t.h"

static char start_cwd[4096];

static void test_every_type(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	char *home = xasprintf("%s/home", T);

	setenv("HOME", home, 1);
	ini("types",
	    "# every key, none at its default\n"
	    "[remote]\n"
	    "host = alice@gpu-box:2222\n"
	    "path = ~/work/proj\n"
	    "transport = OpenSSH\n"
	    "identity = ~/.ssh/id_gpu\n"
	    "known_hosts = /etc/kh\n"
	    "connect_timeout = 15\n"
	    "[sync]\n"
	    "exclude = data/, *.tmp\n"
	    "exclude = big/\n"
	    "warn_size = 1.5M\n"
	    "delta_min = 10k\n"
	    "include_git = yes\n"
	    "[build]\n"
	    "command = make -j4; echo done ; a comment, as in git config\n"
	    "[train]\n"
	    "command = python train.py --out \"$GPURUN_JOB_DIR\"\n"
	    "gpus = 0, 2\n"
	    "stop_grace = 3\n"
	    "[artifacts]\n"
	    "pull = ckpt.bin logs/*.txt\n"
	    "interval = 0\n"
	    "[hooks]\n"
	    "pre_push = make test\n");
	cd("types");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (!c) {
		fprintf(stderr, "  %s\n", err.msg);
		free(home);
		return;
	}
	CHECK_STR(c->remote.host, "alice@gpu-box:2222");
	CHECK_STR(c->remote.path, "~/work/proj");     /* remote ~ kept for the agent */
	CHECK_EQ_INT(c->remote.transport, GR_TRANSPORT_OPENSSH);
	char *id = xasprintf("%s/.ssh/id_gpu", home);
	CHECK_STR(c->remote.identity, id);            /* local ~ is $HOME */
	free(id);
	CHECK_STR(c->remote.known_hosts, "/etc/kh");
	CHECK_EQ_INT(c->remote.connect_timeout, 15);
	CHECK_EQ_INT(c->sync.exclude.n, 3);
	if (c->sync.exclude.n == 3) {
		CHECK_STR(c->sync.exclude.v[0], "data/");
		CHECK_STR(c->sync.exclude.v[1], "*.tmp");
		CHECK_STR(c->sync.exclude.v[2], "big/");
	}
	CHECK_EQ_INT(c->sync.warn_size, 1572864);
	CHECK_EQ_INT(c->sync.delta_min, 10240);
	CHECK_EQ_INT(c->sync.include_git, 1);
	CHECK_STR(c->build.command, "make -j4; echo done");
	CHECK_STR(c->train.command, "python train.py --out \"$GPURUN_JOB_DIR\"");
	CHECK_STR(c->train.gpus, "0,2");
	CHECK_EQ_INT(c->train.stop_grace, 3);
	CHECK_EQ_INT(c->artifacts.pull.n, 2);
	CHECK_EQ_INT(c->artifacts.interval, 0);
	CHECK_STR(c->hooks.pre_push, "make test");
	const char *o;
	CHECK_STR(get(c, "remote.transport", &o), "openssh");
	CHECK_STR(o, "gpurun.ini:5");
	CHECK_STR(get(c, "sync.exclude", &o), "data/ *.tmp big/");
	CHECK_STR(o, "gpurun.ini:10,11");
	CHECK_STR(get(c, "sync.include_git", NULL), "true");
	char *root = xasprintf("%s/types", T);
	CHECK_STR(c->root, root);
	free(root);
	config_free(c);
	free(home);
}

static void test_defaults(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	const char *o;
	size_t n;
	const struct gr_config_key *k = config_keys(&n);

	cd("nothing/myproj");
	CHECK(config_load(&c, NULL, 1, &err) == 0);
	if (!c)
		return;
	CHECK(c->file == NULL);
	CHECK(c->remote.host == NULL);
	CHECK_STR(c->remote.path, "~/gpurun/myproj");
	CHECK_EQ_INT(c->remote.transport, GR_TRANSPORT_LIBSSH2);
	CHECK_STR(c->remote.identity, "");
	CHECK_STR(c->remote.known_hosts, "");
	CHECK_EQ_INT(c->remote.connect_timeout, 0);
	CHECK_EQ_INT(c->sync.exclude.n, 1);
	CHECK_STR(c->sync.exclude.v[0], "runs/");
	CHECK_EQ_INT(c->sync.warn_size, 1ULL << 30);
	CHECK_EQ_INT(c->sync.delta_min, 1ULL << 20);
	CHECK_EQ_INT(c->sync.include_git, 0);
	CHECK_EQ_INT(c->sync.include.n, 0);
	CHECK_STR(c->setup.command, "");
	CHECK_EQ_INT(c->setup.inputs.n, 0);
	/* No project's commands by default: `gpurun init` writes them. */
	CHECK_STR(c->build.command, "");
	CHECK_STR(c->train.command, "");
	CHECK_STR(c->train.shell, "sh");
	CHECK_STR(c->train.output, "pty");
	CHECK_EQ_INT(c->train.persist.n, 0);
	CHECK_STR(c->train.gpus, "all");
	CHECK_EQ_INT(c->train.stop_grace, 10);
	CHECK_EQ_INT(c->artifacts.pull.n, 0);
	CHECK_EQ_INT(c->artifacts.interval, 60);
	CHECK_EQ_INT(c->jobs.keep, 20);
	CHECK_STR(c->hooks.pre_push, "");
	for (size_t i = 0; i < n; i++) {
		char key[128];
		snprintf(key, sizeof(key), "%s.%s", k[i].section, k[i].name);
		CHECK(get(c, key, &o) != NULL);
		CHECK_STR(o, "default");
		CHECK(k[i].help && *k[i].help);
	}
	config_free(c);
}

static void test_precedence(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	const char *o;

	ini("prec", "[remote]\nhost = from-file\n[sync]\nexclude = f1\n[train]\ngpus = 2\n");
	cd("prec");
	setenv("GPURUN_REMOTE_HOST", "from-env", 1);
	setenv("GPURUN_SYNC_EXCLUDE", "e1 e2", 1);
	setenv("GPURUN_TRAIN_GPUS", "", 1);   /* empty: ignored */
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	clear_env();
	if (!c)
		return;
	CHECK_STR(get(c, "remote.host", &o), "from-env");
	CHECK_STR(o, "env GPURUN_REMOTE_HOST");
	CHECK_STR(get(c, "sync.exclude", &o), "e1 e2");   /* the environment replaces a list */
	CHECK_STR(o, "env GPURUN_SYNC_EXCLUDE");
	CHECK_STR(get(c, "train.gpus", &o), "2");
	CHECK_STR(o, "gpurun.ini:6");
	CHECK_STR(get(c, "remote.transport", &o), "libssh2");
	CHECK_STR(o, "default");

	CHECK(config_set(c, "remote.host", "from-host-flag", "--host", &err) == 0);
	CHECK_STR(get(c, "remote.host", &o), "from-host-flag");
	CHECK_STR(o, "--host");
	CHECK_STR(c->remote.host, "from-host-flag");
	CHECK(config_set(c, "remote.host", "from-o", "-o", &err) == 0);
	CHECK_STR(get(c, "remote.host", &o), "from-o");
	CHECK_STR(o, "-o");
	CHECK(config_set(c, "sync.exclude", "o1", "-o", &err) == 0);
	CHECK(config_set(c, "sync.exclude", "o2", "-o", &err) == 0);
	CHECK_STR(get(c, "sync.exclude", NULL), "o1 o2");  /* -o lists add up */
	CHECK_EQ_INT(c->sync.exclude.n, 2);
	CHECK(config_set(c, "train.stop_grace", "7", "-o", &err) == 0);
	CHECK_EQ_INT(c->train.stop_grace, 7);
	CHECK(config_set(c, "remote.transport", "local", "-o", &err) == 0);
	CHECK_EQ_INT(c->remote.transport, GR_TRANSPORT_LOCAL);
	/* a bare key name works when it is unique; "command" is not */
	CHECK_STR(get(c, "stop_grace", NULL), "7");
	struct strbuf sb = STRBUF_INIT;
	CHECK_EQ_INT(config_get(c, "command", &sb, &o, &err), GR_ENOTFOUND);
	CHECK(strstr(err.hint, "build.command or train.command") != NULL);
	CHECK_EQ_INT(config_get(c, "remote.hots", &sb, &o, &err), GR_ENOTFOUND);
	CHECK_STR(err.msg, "unknown key 'remote.hots'");
	CHECK_STR(err.hint, "did you mean 'remote.host'?");
	sb_release(&sb);
	config_free(c);
}

static void test_parent_search(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	const char *o;
	char *root = xasprintf("%s/search", T), *file = xasprintf("%s/search/gpurun.ini", T);

	ini("search", "[remote]\nhost = up-there\n");
	cd("search/a/b");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (c) {
		CHECK_STR(c->remote.host, "up-there");
		CHECK_STR(c->root, root);
		CHECK_STR(c->file, file);
		CHECK_STR(c->remote.path, "~/gpurun/search");
		get(c, "remote.host", &o);
		CHECK_STR(o, "../../gpurun.ini:2");
		config_free(c);
	}
	/* the nearest one wins */
	ini("search/a", "[remote]\nhost = nearer\n");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (c) {
		CHECK_STR(c->remote.host, "nearer");
		config_free(c);
	}
	free(root);
	free(file);
}

static void test_dash_c(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	const char *o;
	char *root = xasprintf("%s/other", T);

	ini("other", "[remote]\nhost = via-c\n");
	cd("elsewhere");
	CHECK(config_load(&c, "../other/gpurun.ini", 0, &err) == 0);
	if (c) {
		CHECK_STR(c->remote.host, "via-c");
		CHECK_STR(c->root, root);
		get(c, "remote.host", &o);
		CHECK_STR(o, "../other/gpurun.ini:2");
		config_free(c);
	}
	/* a named file must exist, even for commands that can do without */
	CHECK_EQ_INT(config_load(&c, "nope.ini", 1, &err), GR_ECONFIG);
	CHECK(strstr(err.msg, "cannot open 'nope.ini'") != NULL);
	free(root);
}

static void test_missing(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	char *want;

	cd("empty/deeper");
	for (char dir[4096], *slash; getcwd(dir, sizeof(dir)); ) {
		/* a stray gpurun.ini above the scratch folder would be found */
		for (;;) {
			char *p = xasprintf("%s/gpurun.ini", dir);
			int there = access(p, F_OK) == 0;
			free(p);
			if (there)
				SKIP("a gpurun.ini exists above the scratch folder");
			if (!(slash = strrchr(dir, '/')) || slash == dir)
				break;
			*slash = '\0';
		}
		break;
	}
	CHECK_EQ_INT(config_load(&c, NULL, 0, &err), GR_ECONFIG);
	CHECK(c == NULL);
	CHECK(getcwd(start_cwd, sizeof(start_cwd)) != NULL);
	want = xasprintf("no gpurun.ini in '%s' or any parent folder", start_cwd);
	CHECK_STR(err.msg, want);
	CHECK_STR(err.hint, "run 'gpurun init' to create one");
	free(want);
}

/* Each bad file: the error names file:line, says what, and hints. */
static void test_errors(void)
{
	static const struct { const char *text; const char *msg, *hint; } bad[] = {
		{ "[remote]\nhots = x\n", "gpurun.ini:2: unknown key 'hots' in [remote]",
		  "did you mean 'host'?" },
		{ "[remote]\nHost = x\n", "gpurun.ini:2: unknown key 'Host' in [remote]",
		  "did you mean 'host'?" },
		{ "[remote]\ngpus = 2\n", "gpurun.ini:2: unknown key 'gpus' in [remote]",
		  "'gpus' belongs in [train]" },
		{ "[remote]\nflavour = x\n", "gpurun.ini:2: unknown key 'flavour' in [remote]",
		  "keys in [remote]: host path jobs_dir transport identity known_hosts connect_timeout persist scheduler" },
		{ "# c\n[remot]\nhost = x\n", "gpurun.ini:2: unknown section [remot]",
		  "did you mean [remote]?" },
		{ "[gpu]\n", "gpurun.ini:1: unknown section [gpu]",
		  "sections: [remote] [sync] [setup] [build] [train] [artifacts] [jobs] [slurm] [container] [notify] [hooks]" },
		{ "[slurm]\ntime = 2h\n", "gpurun.ini:2: invalid value '2h' for 'time' in [slurm]: "
		  "expected minutes, H:MM:SS or D-HH:MM:SS (sbatch --time)", NULL },
		{ "[slurm]\ntime = 1-2-3\n", "gpurun.ini:2: invalid value '1-2-3' for 'time'", NULL },
		{ "[slurm]\npartition = gpu a100\n", "gpurun.ini:2: invalid value 'gpu a100' for "
		  "'partition' in [slurm]: must be one word", NULL },
		{ "[slurm]\naccount = --uid=0\n", "gpurun.ini:2: invalid value '--uid=0' for "
		  "'account' in [slurm]: must not start with '-'", NULL },
		{ "[slurm]\noptions = --comment='a b\n", "gpurun.ini:2: invalid value "
		  "'--comment='a b' for 'options' in [slurm]: a ' is not closed", NULL },
		{ "[remote]\nscheduler = pbs\n", "gpurun.ini:2: invalid value 'pbs' for 'scheduler' "
		  "in [remote]: expected none or slurm", NULL },
		{ "host = x\n[remote]\n", "gpurun.ini:1: key 'host' is outside any section",
		  "put it under [remote]" },
		{ "[remote]\ntransport = ssh\n",
		  "gpurun.ini:2: invalid value 'ssh' for 'transport' in [remote]: expected libssh2, "
		  "openssh or local", NULL },
		{ "[sync]\ninclude_git = maybe\n",
		  "gpurun.ini:2: invalid value 'maybe' for 'include_git' in [sync]: expected true "
		  "or false", NULL },
		{ "[remote]\nconnect_timeout = 3601\n",
		  "gpurun.ini:2: invalid value '3601' for 'connect_timeout' in [remote]: out of "
		  "range: must be between 0 and 3600", NULL },
		{ "[train]\nstop_grace = -1\n", "gpurun.ini:2: invalid value '-1' for 'stop_grace' "
		  "in [train]: out of range", NULL },
		{ "[artifacts]\ninterval = 1m\n", "gpurun.ini:2: invalid value '1m' for 'interval' "
		  "in [artifacts]: not a whole number", NULL },
		{ "[sync]\nwarn_size = lots\n", "gpurun.ini:2: invalid value 'lots' for 'warn_size' "
		  "in [sync]: not a size", NULL },
		{ "[sync]\ndelta_min = 1.5X\n", "gpurun.ini:2: invalid value '1.5X'", NULL },
		{ "[sync]\ndelta_min = nan\n", "gpurun.ini:2: invalid value 'nan'", NULL },
		{ "[remote]\njust words\n", "gpurun.ini:2: malformed line 'just words': expected "
		  "'[section]' or 'key = value'", "comments start with '#' or ';'" },
		{ "[remote]\nhost: x\n", "gpurun.ini:2: malformed line 'host: x': expected "
		  "'key = value'", "use '=' between a key and its value" },
		{ "[remote]\n= x\n", "gpurun.ini:2: malformed line '= x': no key before '='", NULL },
		{ "[remote\nhost = x\n", "gpurun.ini:1: malformed line '[remote'",
		  "a section header looks like [remote]" },
		{ "[remote] host = x\n", "gpurun.ini:1: unexpected text after [remote]", NULL },
		{ "[remote]\nhost = a\n\nhost = b\n",
		  "gpurun.ini:4: duplicate key 'host' in [remote] (already set on line 2)", NULL },
		{ "[remote]\nhost = gpu,#box\n", "gpurun.ini:2: invalid value 'gpu,#box' "
		  "for 'host' in [remote]: '#box': must not start with '#' or ';' (a comment starts "
		  "after a blank)", NULL },
		{ "[remote]\nhost = 'my box'\n", "must not contain whitespace", NULL },
		{ "[remote]\nhost = 'box\n", "gpurun.ini:2: invalid value ''box' for 'host' in "
		  "[remote]: a ' is not closed", NULL },
		/* a comment inside quotes is part of the value: the quote stays open */
		{ "[train]\npersist = 'a # b\n", "gpurun.ini:2: invalid value ''a # b' for 'persist' "
		  "in [train]: a ' is not closed", NULL },
		{ "[train]\nenv = A=\"x ; y\n", "a \" is not closed", NULL },
		{ "[sync]\nexclude = a\\\n", "gpurun.ini:2: invalid value 'a\\' for 'exclude' in "
		  "[sync]: a \\ ends the value", NULL },
		{ "[train]\npersist = 'a b'/../c\n", "persistent paths must be relative to the "
		  "project, without '..'", NULL },
		{ "[remote]\nhost = a b a\n", "gpurun.ini:2: invalid value 'a b a' for 'host' in "
		  "[remote]: 'a' is listed twice; name each host once", NULL },
		{ "[remote]\nhost = a -oProxyCommand=x\n", "'-oProxyCommand=x': must not start "
		  "with '-'", NULL },
		{ "[remote]\njobs_dir = scratch/jobs\n", "gpurun.ini:2: invalid value 'scratch/jobs' "
		  "for 'jobs_dir' in [remote]: must be absolute (/scratch/me/jobs) or below ~", NULL },
		{ "[remote]\njobs_dir = ~bob/jobs\n", "only '~' and '~/' are expanded", NULL },
		{ "[pools]\nlab =\n", "gpurun.ini:2: pool 'lab' is empty", "list its hosts: lab = box1 box2" },
		{ "[pools]\nlab = a\nlab = b\n", "gpurun.ini:3: duplicate pool 'lab' in [pools] "
		  "(already defined on line 2)", NULL },
		{ "[pools]\nl@b = a\n", "gpurun.ini:2: invalid pool name 'l@b'", NULL },
		{ "[pools]\nlab = a b a\n", "gpurun.ini:2: invalid hosts 'a b a' for pool 'lab': "
		  "'a' is listed twice", NULL },
		{ "[pools]\nlab = a\nbig = lab c\n", "gpurun.ini:3: pool 'big' lists 'lab', which is "
		  "a pool too", "a pool lists hosts, not pools: write out the hosts of 'lab'" },
		{ "[remote]\nhost = lab c\n[pools]\nlab = a b\n", "gpurun.ini:2: host lists 'lab', "
		  "which is a pool (gpurun.ini:4)", "name a pool alone (host = lab), or list hosts only" },
		{ "[remote]\nhost = a b\nscheduler = slurm\n", "gpurun.ini:2: host names 2 hosts, but "
		  "scheduler = slurm (gpurun.ini:3) takes one: a pool is for plain SSH hosts; a Slurm "
		  "cluster is reached through one login host",
		  "set [remote] host to the cluster's login node" },
		{ "[remote]\nhost = lab\nscheduler = slurm\n[pools]\nlab = a b\n",
		  "gpurun.ini:2: host names 2 hosts (pool 'lab'), but scheduler = slurm", NULL },
		{ "[remote]\nhost = -oProxyCommand=evil\n", "must not start with '-'", NULL },
		{ "[remote]\nhost = box:99999\n", "the port must be a number from 1 to 65535", NULL },
		{ "[remote]\npath =\n", "gpurun.ini:2: invalid value '' for 'path' in [remote]: "
		  "must not be empty", NULL },
		{ "[remote]\nidentity = ~bob/.ssh/k\n", "only '~' and '~/' are expanded", NULL },
		{ "[train]\ngpus = 0,0\n", "a device index is listed twice", NULL },
		{ "[train]\ngpus = 0\n", "a count of GPUs must be at least 1", NULL },
		{ "[train]\ngpus = some\n", "expected all, a count of GPUs", NULL },
		{ "[train]\ngpus = 1,,2\n", "empty device index", NULL },
		{ "[artifacts]\npull = ../secrets\n", "globs must stay inside the job folder", NULL },
		{ "[artifacts]\npull = /etc/passwd\n", "must be relative to the job folder", NULL },
		{ "[build]\ncommand = make\x01\n", "contains a control character", NULL },
		/* the first error by line wins, whoever found it */
		{ "[remote]\nnot a pair\nhots = 1\n", "gpurun.ini:2: malformed line", NULL },
		{ "[remote]\nhots = 1\nnot a pair\n", "gpurun.ini:2: unknown key 'hots'", NULL },
	};

	cd("bad");
	for (size_t i = 0; i < GR_ARRAY_SIZE(bad); i++) {
		struct gr_config *c = NULL;
		struct gr_err err = { 0 };
		int rc;

		ini("bad", bad[i].text);
		rc = config_load(&c, NULL, 0, &err);
		CHECK_EQ_INT(rc, GR_ECONFIG);
		CHECK(c == NULL);
		if (!strstr(err.msg, bad[i].msg) || (bad[i].hint && !strstr(err.hint, bad[i].hint))) {
			fprintf(stderr, "  case %zu: got '%s' / hint '%s'\n         want '%s' / '%s'\n",
				i, err.msg, err.hint, bad[i].msg, bad[i].hint ? bad[i].hint : "");
			CHECK(0);
		}
		config_free(c);
	}
	/* a NUL byte */
	{
		struct gr_config *c = NULL;
		struct gr_err err = { 0 };
		char *p = xasprintf("%s/bad/gpurun.ini", T);
		write_text(p, "[remote]\nhost = a\0b\n", 20);
		CHECK_EQ_INT(config_load(&c, NULL, 0, &err), GR_ECONFIG);
		CHECK(strstr(err.msg, "gpurun.ini:2: malformed line: contains a NUL byte") != NULL);
		free(p);
	}
}

static void test_env_and_flag_errors(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };

	ini("envbad", "[remote]\nhost = x\n");
	cd("envbad");
	setenv("GPURUN_REMOTE_CONNECT_TIMEOUT", "soon", 1);
	CHECK_EQ_INT(config_load(&c, NULL, 0, &err), GR_ECONFIG);
	CHECK_STR(err.msg, "GPURUN_REMOTE_CONNECT_TIMEOUT: invalid value 'soon' for "
		  "remote.connect_timeout: not a whole number");
	clear_env();
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (!c)
		return;
	CHECK_EQ_INT(config_set(c, "remote.hots", "x", "-o", &err), GR_EUSAGE);
	CHECK_STR(err.msg, "-o: unknown key 'remote.hots'");
	CHECK_STR(err.hint, "did you mean 'remote.host'?");
	CHECK_EQ_INT(config_set(c, "hots", "x", "-o", &err), GR_EUSAGE);
	CHECK_EQ_INT(config_set(c, "remote.transport", "telnet", "-o", &err), GR_EUSAGE);
	CHECK_STR(err.msg, "-o: invalid value 'telnet' for remote.transport: expected libssh2, "
		  "openssh or local");
	CHECK_EQ_INT(config_set(c, "remote.host", "a \"b", "--host", &err), GR_EUSAGE);
	CHECK(!strncmp(err.msg, "--host: invalid value 'a \"b' for remote.host", 44));
	CHECK_STR(c->remote.host, "x");   /* a refused value changes nothing */
	CHECK_EQ_INT(config_set(c, "remote.host", "a b a", "--host", &err), GR_EUSAGE);
	CHECK(strstr(err.msg, "'a' is listed twice") != NULL);
	CHECK_EQ_INT(config_set(c, "remote.scheduler", "slurm", "-o", &err), 0);
	CHECK_EQ_INT(config_set(c, "remote.host", "a b", "--host", &err), GR_EUSAGE);
	CHECK_STR(err.msg, "--host: host names 2 hosts, but scheduler = slurm (-o) takes one: a pool "
		  "is for plain SSH hosts; a Slurm cluster is reached through one login host");
	CHECK_STR(c->remote.host, "x");
	CHECK_EQ_INT(c->remote.nhosts, 1);
	config_free(c);
	/* too many hosts */
	{
		struct strbuf many = STRBUF_INIT;
		for (int i = 0; i < GR_HOSTS_MAX + 1; i++)
			sb_addf(&many, "h%d ", i);
		CHECK(config_load(&c, NULL, 0, &err) == 0);
		if (!c)
			return;
		CHECK_EQ_INT(config_set(c, "remote.host", many.buf, "--host", &err), GR_EUSAGE);
		CHECK(strstr(err.msg, "65 hosts, at most 64") != NULL);
		sb_reset(&many);
		for (int i = 0; i < GR_HOSTS_MAX; i++)
			sb_addf(&many, "h%d ", i);
		CHECK_EQ_INT(config_set(c, "remote.host", many.buf, "--host", &err), 0);
		CHECK_EQ_INT(c->remote.nhosts, GR_HOSTS_MAX);
		sb_release(&many);
	}
	config_free(c);
}

/* What Debian's inih would get wrong on its own: lines over 200 bytes,
 * " ;" inside values, indented lines taken as continuations, and CRLF
 * and BOM files. */
static void test_inih_edges(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	struct strbuf text = STRBUF_INIT, longcmd = STRBUF_INIT;
	const char *o;

	for (int i = 0; i < 40; i++)
		sb_addf(&longcmd, "step%02d && ", i);
	sb_adds(&longcmd, "echo ok; echo still-the-value");
	sb_adds(&text, "\xEF\xBB\xBF; a comment\r\n"
		       "   # an indented comment\r\n"
		       "[remote]\r\n"
		       "    host = indented\r\n"
		       "\r\n"
		       "\tpath = /srv/p\r\n"
		       "[train]\r\n");
	sb_addf(&text, "command = %s  ; past inih's buffer\r\n", longcmd.buf);
	sb_adds(&text, "  [sync]  \r\n"
		       "exclude = a   \r\n"
		       "  exclude = b\r\n");
	ini("edges", text.buf);
	cd("edges");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (!c) {
		fprintf(stderr, "  %s\n", err.msg);
		goto out;
	}
	CHECK_STR(c->remote.host, "indented");
	CHECK_STR(c->remote.path, "/srv/p");
	CHECK(strlen(longcmd.buf) > 400);
	CHECK_STR(c->train.command, longcmd.buf);
	get(c, "train.command", &o);
	CHECK_STR(o, "gpurun.ini:8");
	CHECK_STR(get(c, "sync.exclude", &o), "a b");
	CHECK_STR(o, "gpurun.ini:10,11");
	config_free(c);
out:
	sb_release(&text);
	sb_release(&longcmd);
}

static void test_template_round_trip(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	struct strbuf text = STRBUF_INIT;
	size_t n;
	const struct gr_config_key *k = config_keys(&n);
	char *path = xasprintf("%s/tmpl/myproj/gpurun.ini", T);

	cd("tmpl/myproj");
	CHECK(config_write_template("gpurun.ini", &err) == 0);
	/* never overwrites */
	CHECK_EQ_INT(config_write_template("gpurun.ini", &err), GR_EEXIST);
	CHECK_STR(err.msg, "'gpurun.ini' already exists");
	CHECK(err.hint[0] != '\0');
	CHECK(read_file(path, &text, &err) == 0);
	/* every key, its help and its section, in table order */
	const char *at = text.buf ? text.buf : "";
	for (size_t i = 0; i < n; i++) {
		char line[160];
		snprintf(line, sizeof(line), "# %s", k[i].help);
		const char *h = strstr(at, line);
		CHECK(h != NULL);
		if (h)
			at = h;
		snprintf(line, sizeof(line), "[%s]", k[i].section);
		CHECK(strstr(text.buf, line) != NULL);
		snprintf(line, sizeof(line), "\n%s%s = ", *k[i].def ? "" : "#", k[i].name);
		CHECK(strstr(text.buf, line) != NULL);
	}
	CHECK(strstr(text.buf, "\npath = ~/gpurun/myproj\n") != NULL);
	CHECK(strstr(text.buf, "\n#host = ") != NULL);
	/* and it loads back, to the defaults */
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (c) {
		for (size_t i = 0; i < n; i++) {
			char key[128], *def = NULL;
			const char *o;
			snprintf(key, sizeof(key), "%s.%s", k[i].section, k[i].name);
			def = !strcmp(key, "remote.path") ? xstrdup("~/gpurun/myproj") : xstrdup(k[i].def);
			CHECK_STR(get(c, key, &o), def);
			CHECK(!strncmp(o, *k[i].def ? "gpurun.ini:" : "default", 7));
			free(def);
		}
		config_free(c);
	} else {
		fprintf(stderr, "  %s\n", err.msg);
	}
	sb_release(&text);
	free(path);
}

static void test_dump(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	struct strbuf out = STRBUF_INIT;

	ini("dump", "[remote]\nhost = gpu\n[train]\ncommand = say \"hi\\there\"\t!\n");
	cd("dump");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (!c)
		return;
	config_dump(c, &out, 0);
	CHECK(strstr(out.buf, "\nremote.host             gpu") != NULL);
	CHECK(strstr(out.buf, "gpurun.ini:2\n") != NULL);
	CHECK(strstr(out.buf, "remote.identity         \"\"") != NULL);
	sb_reset(&out);
	config_dump(c, &out, 1);
	CHECK(strstr(out.buf, "\"remote.host\": {\"value\": \"gpu\", \"origin\": \"gpurun.ini:2\"}"));
	CHECK(strstr(out.buf, "\"train.command\": {\"value\": \"say \\\"hi\\\\there\\\"\\t!\""));
	CHECK(strstr(out.buf, "\"sync.exclude\": {\"value\": [\"runs/\"], \"origin\": \"default\"}"));
	CHECK(strstr(out.buf, "\"sync.include_git\": {\"value\": false,"));
	CHECK(strstr(out.buf, "\"train.stop_grace\": {\"value\": 10,"));
	CHECK(out.buf[out.len - 2] == '}');
	sb_release(&out);
	config_free(c);
}

/* Comments after a value, as git config reads them: '#' or ';' after a
 * blank starts one (the blanks before it go too); in '...' or "...",
 * after a backslash, or without a blank before, they are the value's.
 * The user config is read by the same parser. */
static void test_inline_comments(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	char *xdg = xasprintf("%s/xdg", T);
	const char *o;

	setenv("XDG_CONFIG_HOME", xdg, 1);
	user_config("[sync]\nexclude = *.ckpt   # checkpoints stay on the host\n"
		    "[slurm]\npartition = gpu ; the default one\n");
	ini("comments",
	    "[remote] ; the host\n"
	    "host = cluster-login          ; any ssh alias, ProxyJump included\n"
	    "path = ~/gpurun/myproj        # on the shared filesystem\n"
	    "scheduler = slurm\t# tab before\n"
	    "[train]\n"
	    "command = echo \"a ; b # c\" 'd # e' f\\ #g x#y z;w   # the real comment\n"
	    "env = A=\"x # y\" B='1 ; 2' C=3 ; comment\n"
	    "gpus = 4                      ; per node: --gres=gpu:4\n"
	    "persist = a/ # b/\n"
	    "[build]\n"
	    "command = # nothing to build\n"
	    "[notify]\n"
	    "command = curl -d \"$GPURUN_JOB_NAME: done\" https://ntfy.sh/x#frag\n"
	    "[pools]\n"
	    "lab = box1 box2 # two of them\n");
	cd("comments");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (!c) {
		fprintf(stderr, "  %s\n", err.msg);
		goto out;
	}
	CHECK_STR(c->remote.host, "cluster-login");
	CHECK_EQ_INT(c->remote.nhosts, 1);
	CHECK_STR(c->remote.path, "~/gpurun/myproj");
	CHECK_EQ_INT(c->slurm_on, 1);
	CHECK_STR(c->train.command, "echo \"a ; b # c\" 'd # e' f\\ #g x#y z;w");
	CHECK_STR(c->train.env, "A=\"x # y\" B='1 ; 2' C=3");
	CHECK_STR(c->train.gpus, "4");
	CHECK_EQ_INT(c->train.persist.n, 1);
	CHECK_STR(c->build.command, "");
	CHECK_STR(get(c, "build.command", &o), "");
	CHECK_STR(o, "gpurun.ini:11");
	CHECK_STR(c->notify.command, "curl -d \"$GPURUN_JOB_NAME: done\" https://ntfy.sh/x#frag");
	CHECK_STR(get(c, "pools.lab", NULL), "box1 box2");
	/* the user config: the same rules */
	CHECK_EQ_INT(c->sync.exclude.n, 1);
	if (c->sync.exclude.n == 1)
		CHECK_STR(c->sync.exclude.v[0], "*.ckpt");
	CHECK_STR(c->slurm.partition, "gpu");
	config_free(c);
	c = NULL;
	/* -o and the environment have no comments: the text is the value */
	ini("comments", "[remote]\nhost = box\n");
	setenv("GPURUN_BUILD_COMMAND", "make # all", 1);
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	unsetenv("GPURUN_BUILD_COMMAND");
	if (!c)
		goto out;
	CHECK_STR(c->build.command, "make # all");
	CHECK(config_set(c, "train.command", "run ; x", NULL, &err) == 0);
	CHECK_STR(c->train.command, "run ; x");
	config_free(c);
out:
	user_config(NULL);
	no_user_config();
	free(xdg);
}

/* List keys take words as [train] env does: '...', "...", backslash;
 * blanks or commas between; in the file, the environment and -o alike;
 * read back from the canonical text that `gpurun config` shows. */
static void test_list_quoting(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	struct strbuf out = STRBUF_INIT;
	const char *o;

	ini("lists",
	    "[remote]\nhost = \"box1\", 'box2' box3\n"
	    "[train]\n"
	    "persist = 'my data/' \"ck pts/\" a\\ b/,plain/ \"it's/\" '' x,'y,z'/\n"
	    "[sync]\n"
	    "exclude = 'a b' c\n"
	    "exclude = \"#notes\" ';x'\n"
	    "include = 'data sets/'\n"
	    "[setup]\ninputs = 'req s.txt'\n"
	    "[artifacts]\npull = 'out dir/*.bin' \"a\\\"b\"\n"
	    "[container]\nmounts = '/data sets:/data:ro'\n");
	cd("lists");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (!c) {
		fprintf(stderr, "  %s\n", err.msg);
		return;
	}
	CHECK_EQ_INT(c->remote.nhosts, 3);
	CHECK_STR(get(c, "remote.host", NULL), "box1 box2 box3");
	static const char *const want[] = { "my data/", "ck pts/", "a b/", "plain/", "it's/",
					    "x", "y,z/" };
	CHECK_EQ_INT(c->train.persist.n, GR_ARRAY_SIZE(want));
	for (size_t i = 0; i < c->train.persist.n && i < GR_ARRAY_SIZE(want); i++)
		CHECK_STR(c->train.persist.v[i], want[i]);
	CHECK_STR(get(c, "train.persist", &o),
		  "'my data/' 'ck pts/' 'a b/' plain/ 'it'\\''s/' x 'y,z/'");
	CHECK_STR(o, "gpurun.ini:4");
	CHECK_EQ_INT(c->sync.exclude.n, 4);
	if (c->sync.exclude.n == 4) {
		CHECK_STR(c->sync.exclude.v[0], "a b");
		CHECK_STR(c->sync.exclude.v[2], "#notes");
		CHECK_STR(c->sync.exclude.v[3], ";x");
	}
	CHECK_STR(get(c, "sync.exclude", &o), "'a b' c '#notes' ';x'");
	CHECK_STR(o, "gpurun.ini:6,7");
	CHECK(c->sync.include.n == 1 && !strcmp(c->sync.include.v[0], "data sets/"));
	CHECK(c->setup.inputs.n == 1 && !strcmp(c->setup.inputs.v[0], "req s.txt"));
	CHECK_EQ_INT(c->artifacts.pull.n, 2);
	if (c->artifacts.pull.n == 2) {
		CHECK_STR(c->artifacts.pull.v[0], "out dir/*.bin");
		CHECK_STR(c->artifacts.pull.v[1], "a\"b");
	}
	CHECK(c->container.mounts.n == 1 && !strcmp(c->container.mounts.v[0], "/data sets:/data:ro"));
	config_dump(c, &out, 1);
	CHECK(strstr(out.buf, "\"train.persist\": {\"value\": [\"my data/\", \"ck pts/\", \"a b/\", "
		      "\"plain/\", \"it's/\", \"x\", \"y,z/\"]") != NULL);
	sb_reset(&out);

	/* -o: the same words (unquoted, a blank separates two paths); quotes
	 * and '\ ' are not kept; repeated -o add up */
	CHECK(config_set(c, "artifacts.pull", "my data/", NULL, &err) == 0);
	CHECK_EQ_INT(c->artifacts.pull.n, 2);
	CHECK(config_set(c, "train.persist", "'my data/'", NULL, &err) == 0);
	CHECK(c->train.persist.n == 1 && !strcmp(c->train.persist.v[0], "my data/"));
	CHECK(config_set(c, "train.persist", "\"other dir/\"", NULL, &err) == 0);
	CHECK(c->train.persist.n == 2 && !strcmp(c->train.persist.v[1], "other dir/"));
	CHECK(config_set(c, "train.persist", "third\\ one/ b/", NULL, &err) == 0);
	CHECK(c->train.persist.n == 4 && !strcmp(c->train.persist.v[2], "third one/"));
	CHECK(config_set(c, "sync.exclude", "\"a b\",c", NULL, &err) == 0);
	CHECK(c->sync.exclude.n == 2 && !strcmp(c->sync.exclude.v[0], "a b"));
	CHECK(config_set(c, "train.persist", "'open", NULL, &err) == GR_EUSAGE);
	CHECK(strstr(err.msg, "-o: invalid value ''open' for train.persist: a ' is not closed") != NULL);
	CHECK(c->train.persist.n == 4);   /* a refused value changes nothing */
	CHECK(config_set(c, "remote.host", "'b1' \"b2\"", "--host", &err) == 0);
	CHECK_EQ_INT(c->remote.nhosts, 2);
	CHECK_STR(c->remote.hosts[1], "b2");
	config_free(c);
	c = NULL;

	/* the environment takes the same words */
	ini("lists", "[remote]\nhost = box\n");
	setenv("GPURUN_TRAIN_PERSIST", "'my data/' b/", 1);
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	unsetenv("GPURUN_TRAIN_PERSIST");
	if (c) {
		CHECK(c->train.persist.n == 2 && !strcmp(c->train.persist.v[0], "my data/"));
		config_free(c);
	}
	sb_release(&out);
}

/* [slurm] options: words as sh splits them, nothing expanded. */
static void test_split_words(void)
{
	struct strvec w = STRVEC_INIT;

	CHECK(config_split_words("--exclusive  --comment='a b' \"x\\\"y\" c\\ d '' $HOME", &w) == NULL);
	CHECK_EQ_INT(w.n, 6);
	if (w.n == 6) {
		CHECK_STR(w.v[0], "--exclusive");
		CHECK_STR(w.v[1], "--comment=a b");
		CHECK_STR(w.v[2], "x\"y");
		CHECK_STR(w.v[3], "c d");
		CHECK_STR(w.v[4], "");
		CHECK_STR(w.v[5], "$HOME");
	}
	sv_clear(&w);
	CHECK(config_split_words("", &w) == NULL && w.n == 0);
	CHECK(config_split_words("a \"b", &w) != NULL);
	sv_clear(&w);
}

static void test_schema(void)
{
	size_t n;
	const struct gr_config_key *k = config_keys(&n);
	static const char *const want[] = {
		"remote.host", "remote.path", "remote.jobs_dir", "remote.transport", "remote.identity",
		"remote.known_hosts", "remote.connect_timeout", "remote.persist", "remote.scheduler", "sync.exclude", "sync.warn_size",
		"sync.delta_min", "sync.include_git", "sync.preserve_perms", "sync.include",
		"setup.command", "setup.inputs", "build.command", "train.command", "train.shell",
		"train.output", "train.persist", "train.env", "train.gpus", "train.stop_grace",
		"train.time_limit", "train.retries", "artifacts.pull",
		"artifacts.interval", "artifacts.min_free", "jobs.keep", "slurm.partition",
		"slurm.account", "slurm.qos", "slurm.time", "slurm.nodes", "slurm.ntasks_per_node",
		"slurm.cpus_per_task", "slurm.mem", "slurm.constraint", "slurm.gpu_flag",
		"slurm.gpu_type", "slurm.options", "slurm.build_on", "slurm.signal_before",
		"slurm.requeue", "slurm.resubmit", "slurm.max_resubmits", "container.image",
		"container.runtime", "container.options", "container.mounts", "container.user",
		"notify.command", "notify.local", "hooks.pre_push" };

	CHECK_EQ_INT(n, GR_ARRAY_SIZE(want));
	for (size_t i = 0; i < n && i < GR_ARRAY_SIZE(want); i++) {
		char key[128];
		snprintf(key, sizeof(key), "%s.%s", k[i].section, k[i].name);
		CHECK_STR(key, want[i]);
		CHECK(k[i].help && strlen(k[i].help) < 90);
		if (k[i].type == GR_KEY_ENUM)
			CHECK(k[i].values && k[i].values[0]);
		if (k[i].type == GR_KEY_INT)
			CHECK(k[i].min <= k[i].max);
	}
}

/* [train] time_limit: units and H:MM:SS to seconds; nonsense, 0 and
 * more than a year refused with a reason. */
static void test_duration(void)
{
	static const struct { const char *in; long long secs; } ok[] = {
		{ "", 0 }, { "90s", 90 }, { "30m", 1800 }, { "4h", 14400 }, { "1d12h", 129600 },
		{ "1h30m", 5400 }, { "2:00:00", 7200 }, { "1:30", 90 }, { "366d", 366 * 86400 },
	};
	static const char *const bad[] = { "90", "1x", "h", "-1s", "1:60", "1:2:3:4", "0s",
					   "367d", "1.5h", "1h 30m", ":30", "4h:" };
	uint64_t secs;
	const char *why;

	for (size_t i = 0; i < GR_ARRAY_SIZE(ok); i++) {
		why = NULL;
		CHECK(config_duration(ok[i].in, &secs, &why) == 0);
		CHECK_EQ_INT(secs, ok[i].secs);
	}
	for (size_t i = 0; i < GR_ARRAY_SIZE(bad); i++) {
		why = NULL;
		if (config_duration(bad[i], &secs, &why) != -1 || !why)
			fprintf(stderr, "  '%s' was taken\n", bad[i]);
		CHECK(config_duration(bad[i], &secs, &why) == -1 && why);
	}
}

int main(void)
{
	if (config_t_begin() < 0)
		return 1;
	RUN(test_schema);
	RUN(test_duration);
	RUN(test_split_words);
	RUN(test_every_type);
	RUN(test_defaults);
	RUN(test_precedence);
	RUN(test_parent_search);
	RUN(test_dash_c);
	RUN(test_missing);
	RUN(test_errors);
	RUN(test_env_and_flag_errors);
	RUN(test_inih_edges);
	RUN(test_template_round_trip);
	RUN(test_dump);
	RUN(test_inline_comments);
	RUN(test_list_quoting);
	return config_t_end();
}
