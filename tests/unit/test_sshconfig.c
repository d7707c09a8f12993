/* ssh_config resolution against the real oracle: every alias of a corpus
 * of configs is resolved by sshcfg_resolve and by `ssh -G -F FILE`, and
 * the fields gpurun uses must agree. ssh expands ~ and %d from passwd,
 * gpurun from $HOME: the oracle's passwd home is rewritten to $HOME, the
 * one documented difference. ssh -G prints IdentityFile and ProxyCommand
 * unexpanded; this file expands them itself from ssh's other answers. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sshconfig.h"
#include "sshconfig_int.h"
#include "t.h"

static char T[256];         /* scratch folder */
static char HOMEDIR[300];   /* $HOME for both sides */
static const char *pw_home, *local_user;
static int have_ssh;

/* Write path (relative to T unless absolute) with @T@ and @U@ replaced. */
static void put(const char *rel, const char *text, int mode)
{
	struct strbuf path = STRBUF_INIT, body = STRBUF_INIT;
	int fd;

	if (rel[0] == '/')
		sb_adds(&path, rel);
	else
		sb_addf(&path, "%s/%s", T, rel);
	for (const char *p = text; *p; p++) {
		if (!strncmp(p, "@T@", 3)) {
			sb_adds(&body, T);
			p += 2;
		} else if (!strncmp(p, "@U@", 3)) {
			sb_adds(&body, local_user);
			p += 2;
		} else {
			sb_add(&body, p, 1);
		}
	}
	char *slash = strrchr(path.buf, '/');
	*slash = '\0';
	mkdir_p(path.buf, 0755, NULL);
	*slash = '/';
	fd = open(path.buf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd >= 0) {
		if (write_full(fd, body.buf, body.len) < 0)
			fprintf(stderr, "  cannot write %s\n", path.buf);
		fchmod(fd, (mode_t)mode);
		close(fd);
	}
	sb_release(&path);
	sb_release(&body);
}

/* Run `ssh -G -F file [-p port] host` with stdin on /dev/null. */
static int ssh_G(const char *file, const char *spec, struct strbuf *out)
{
	char *dup = xstrdup(spec), *host = dup, *port = NULL;
	int pfd[2], status = -1;
	pid_t pid;

	/* gpurun's "host:port" is ssh's "-p port host" */
	char *colon = strchr(dup, ':');
	if (colon && !strchr(colon + 1, ':') && dup[0] != '[' && strncmp(dup, "ssh://", 6)) {
		*colon = '\0';
		port = colon + 1;
	}
	if (pipe(pfd) < 0)
		return -1;
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);
		dup2(null, 0);
		dup2(pfd[1], 1);
		dup2(null, 2);
		close(pfd[0]);
		if (port)
			execlp("ssh", "ssh", "-G", "-F", file, "-p", port, host, (char *)NULL);
		else
			execlp("ssh", "ssh", "-G", "-F", file, host, (char *)NULL);
		_exit(127);
	}
	close(pfd[1]);
	char buf[4096];
	ssize_t n;
	while ((n = read(pfd[0], buf, sizeof(buf))) > 0)
		sb_add(out, buf, (size_t)n);
	close(pfd[0]);
	waitpid(pid, &status, 0);
	free(dup);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* First value of "key value" in ssh -G output, or NULL; *next for more. */
static const char *gval(const char *out, const char *key, const char **next)
{
	size_t kl = strlen(key);
	static char ring[8][4096];
	static int slot;
	char *val = ring[slot++ % 8];
	const char *p = next && *next ? *next : out;

	for (; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (!strncmp(p, key, kl) && p[kl] == ' ') {
			const char *e = strchr(p, '\n');
			size_t n = e ? (size_t)(e - p - kl - 1) : strlen(p + kl + 1);
			snprintf(val, sizeof(ring[0]), "%.*s", (int)n, p + kl + 1);
			if (next)
				*next = e ? e + 1 : p + strlen(p);
			return val;
		}
	}
	return NULL;
}

static long atoi_or(const char *s)
{
	char *end;
	long v;

	if (!s)
		return -999;
	v = strtol(s, &end, 10);
	return *end ? -998 : v;
}

/* Replace the passwd home that ssh used by $HOME. */
static char *rehome(const char *s)
{
	struct strbuf sb = STRBUF_INIT;
	size_t n = strlen(pw_home);

	for (const char *p = s; *p;) {
		if (!strncmp(p, pw_home, n) && (p[n] == '/' || p[n] == '\0' || p[n] == ' ')) {
			sb_adds(&sb, HOMEDIR);
			p += n;
		} else {
			sb_add(&sb, p++, 1);
		}
	}
	return sb_detach(&sb, NULL);
}

/* This test's own expansion of what ssh -G leaves raw (IdentityFile,
 * ProxyCommand), from the values ssh itself reports. */
static char *oracle_expand(const char *raw, const char *g, const char *alias, int proxy)
{
	struct strbuf sb = STRBUF_INIT;
	char host[256], shorth[256], hostname[512], user[256], port[16], hka[256], uid[24];
	const char *v;

	gethostname(host, sizeof(host));
	snprintf(shorth, sizeof(shorth), "%.*s", (int)strcspn(host, "."), host);
	snprintf(hostname, sizeof(hostname), "%s", (v = gval(g, "hostname", NULL)) ? v : "");
	snprintf(user, sizeof(user), "%s", (v = gval(g, "user", NULL)) ? v : "");
	snprintf(port, sizeof(port), "%s", (v = gval(g, "port", NULL)) ? v : "");
	snprintf(hka, sizeof(hka), "%s", (v = gval(g, "hostkeyalias", NULL)) ? v : alias);
	snprintf(uid, sizeof(uid), "%u", (unsigned)getuid());
	if (!proxy && raw[0] == '~' && (raw[1] == '/' || !raw[1])) {
		sb_addf(&sb, "%s/", HOMEDIR);
		raw += 1 + strspn(raw + 1, "/");
	}
	for (const char *p = raw; *p; p++) {
		if (!proxy && p[0] == '$' && p[1] == '{') {
			const char *e = strchr(p, '}');
			char *var = xstrndup(p + 2, (size_t)(e - p - 2));
			sb_adds(&sb, getenv(var) ? getenv(var) : "");
			free(var);
			p = e;
			continue;
		}
		if (*p != '%') {
			sb_add(&sb, p, 1);
			continue;
		}
		switch (*++p) {
		case '%': sb_adds(&sb, "%"); break;
		case 'h': sb_adds(&sb, hostname); break;
		case 'r': sb_adds(&sb, user); break;
		case 'p': sb_adds(&sb, port); break;
		case 'n': sb_adds(&sb, alias); break;
		case 'd': sb_adds(&sb, HOMEDIR); break;
		case 'u': sb_adds(&sb, local_user); break;
		case 'l': sb_adds(&sb, host); break;
		case 'L': sb_adds(&sb, shorth); break;
		case 'i': sb_adds(&sb, uid); break;
		case 'k': sb_adds(&sb, hka); break;
		default: sb_addf(&sb, "%%%c", *p); break;
		}
	}
	return sb_detach(&sb, NULL);
}

static int compare_one(const char *file, const char *spec)
{
	struct strbuf g = STRBUF_INIT;
	struct ssh_target t;
	struct gr_err err = { 0 };
	const char *v, *next = NULL;
	int bad = t_case_failed, rc;
	char *alias, *x;
	size_t i = 0;

	rc = ssh_G(file, spec, &g);
	CHECK_EQ_INT(rc, 0);
	if (sshcfg_resolve(spec, file, "", &t, &err) < 0) {
		fprintf(stderr, "  %s: %s\n", spec, err.msg);
		CHECK(0);
		sb_release(&g);
		return 0;
	}
	alias = t.alias;
	CHECK_STR(t.hostname, gval(g.buf, "hostname", NULL));
	CHECK_STR(t.user, gval(g.buf, "user", NULL));
	CHECK_EQ_INT(t.port, atoi_or(gval(g.buf, "port", NULL)));
	/* IdentityFile: ssh prints them raw, "none" included */
	while ((v = gval(g.buf, "identityfile", &next))) {
		if (!strcasecmp(v, "none"))
			continue;
		x = oracle_expand(v, g.buf, alias, 0);
		CHECK(i < t.identity_files.n);
		if (i < t.identity_files.n)
			CHECK_STR(t.identity_files.v[i], x);
		free(x);
		i++;
	}
	CHECK_EQ_INT(t.identity_files.n, i);
	v = gval(g.buf, "proxyjump", NULL);
	if (v || t.proxy_jump)
		CHECK_STR(t.proxy_jump, v);
	v = gval(g.buf, "proxycommand", NULL);
	if (v || t.proxy_command) {
		x = v ? oracle_expand(v, g.buf, alias, 1) : NULL;
		CHECK_STR(t.proxy_command, x);
		free(x);
	}
	v = gval(g.buf, "userknownhostsfile", NULL);
	{
		struct strbuf mine = STRBUF_INIT;
		for (i = 0; i < t.known_hosts_files.n; i++)
			sb_addf(&mine, "%s%s", i ? " " : "", t.known_hosts_files.v[i]);
		x = rehome(v ? v : "");
		CHECK_STR(mine.len ? mine.buf : "none", x);
		free(x);
		sb_release(&mine);
	}
	v = gval(g.buf, "stricthostkeychecking", NULL);
	CHECK_EQ_INT(t.strict_host_key_checking,
		     !v ? -1 : !strcmp(v, "true") ? GR_SHK_YES : !strcmp(v, "false") ? GR_SHK_NO :
		     !strcmp(v, "ask") ? GR_SHK_ASK : !strcmp(v, "accept-new") ? GR_SHK_ACCEPT_NEW : -1);
	v = gval(g.buf, "connecttimeout", NULL);
	CHECK_EQ_INT(t.connect_timeout, !v || !strcmp(v, "none") ? 0 : atoi_or(v));
	CHECK_EQ_INT(t.server_alive_interval, atoi_or(gval(g.buf, "serveraliveinterval", NULL)));
	CHECK_EQ_INT(t.server_alive_count_max, atoi_or(gval(g.buf, "serveralivecountmax", NULL)));
	v = gval(g.buf, "identitiesonly", NULL);
	CHECK_EQ_INT(t.identities_only, v && !strcmp(v, "yes"));
	if (t_case_failed && !bad)
		fprintf(stderr, "  ^ alias '%s' in %s\n", spec, file);
	ssh_target_release(&t);
	sb_release(&g);
	return 1;
}


/* ---- the corpus ---------------------------------------------------- */

static const char basic_conf[] =
	"# basics: patterns, first value wins, key=value, quotes, case\n"
	"Host gpu\n"
	"    HostName 192.168.1.50\n"
	"    User alice\n"
	"    Port 2222\n"
	"    IdentityFile ~/.ssh/id_gpu\n"
	"    IdentityFile @T@/keys/gpu_%r@%h:%p\n"
	"    IdentitiesOnly yes\n"
	"\n"
	"Host web? !web9 db*.Example.com\n"
	"\tHOSTNAME %h.internal\n"
	"\tuser=deploy\n"
	"\tPort = 2201\n"
	"\tIdentityFile \"@T@/keys/with space\"\n"
	"\n"
	"Host Mixed\n"
	"  HostName MiXeD.Example.ORG\n"
	"  ConnectTimeout 1m30s\n"
	"\n"
	"Host quoted\n"
	"  HostName \"quoted.example.com\"  # trailing comment\n"
	"  User 'single'\n"
	"  ServerAliveInterval 15\n"
	"  ServerAliveCountMax 5\n"
	"\n"
	"Host dup\n"
	"  Port 1111\n"
	"  Port 2222\n"
	"  User first\n"
	"Host dup\n"
	"  User second\n"
	"  IdentityFile /k/a\n"
	"  IdentityFile /k/a\n"
	"  IdentityFile /k/b\n"
	"\n"
	"Host *.corp\n"
	"  User corpuser\n"
	"  StrictHostKeyChecking accept-new\n"
	"\n"
	"Host *\n"
	"  Port 22022\n"
	"  ServerAliveInterval 60\n"
	"  UserKnownHostsFile ~/.ssh/known_hosts_all @T@/kh/%h_%p\n";

static const char *const basic_aliases[] = {
	"gpu", "web1", "web9", "webx", "db1.Example.com", "db1.example.com", "Mixed", "mixed",
	"quoted", "dup", "host.corp", "bob@gpu", "gpu:2200", "bob@web2:2300", "unknownhost",
	NULL };

static const char match_conf[] =
	"# Match: host (after HostName), originalhost, user, localuser, exec, all, !\n"
	"Match host *.gpu.lab\n"
	"  User early\n"
	"Host m1\n"
	"  HostName node1.GPU.lab\n"
	"Host m2\n"
	"  HostName node2.other\n"
	"Match host *.gpu.lab\n"
	"  User labuser\n"
	"Match originalhost m2 user @U@,other\n"
	"  Port 3002\n"
	"Match !host *.gpu.lab localuser *\n"
	"  ServerAliveCountMax 9\n"
	"Match user bob\n"
	"  IdentityFile @T@/keys/bob\n"
	"Match exec \"test %n = m3\"\n"
	"  Port 3003\n"
	"Match !exec \"exit 1\" host=m4\n"
	"  Port 3004\n"
	"Match host m5 exec false\n"
	"  Port 3005\n"
	"Match all\n"
	"  StrictHostKeyChecking no\n"
	"  ConnectTimeout 4\n";

static const char *const match_aliases[] = {
	"m1", "m2", "m3", "m4", "m5", "bob@m2", "other@m2", "node.gpu.lab", "x", NULL };

static const char include_conf[] =
	"Include @T@/inc/*.conf\n"
	"Host inc-nested\n"
	"  Include nested/level1.conf\n"
	"Host inc-*\n"
	"  User incuser\n"
	"Include ~/.ssh/tail.conf missing-*.conf\n";

static const char *const include_aliases[] = {
	"inc-a", "inc-b", "inc-nested", "inc-other", "plain", NULL };

static const char proxy_conf[] =
	"Host pj1\n"
	"  ProxyJump bastion\n"
	"Host pj2\n"
	"  ProxyJump alice@bastion:2200,ssh://bob@inner:2201,10.1.2.3\n"
	"Host pj3\n"
	"  ProxyJump none\n"
	"  ProxyCommand nc %h %p\n"
	"Host pc1\n"
	"  ProxyCommand ssh -W %h:%p -l %r jump # keeps the comment\n"
	"  ProxyJump ignored-because-the-command-came-first\n"
	"Host pc2\n"
	"  ProxyCommand=none\n"
	"Host pc3\n"
	"  HostName real-pc3\n"
	"  ProxyCommand /usr/bin/nc -X connect -x proxy:3128 %h %p %%\n"
	"Host pj4\n"
	"  ProxyJump [fe80::1]:22,x y\n"
	"Host pj5\n"
	"  ProxyJump=j1 , j2 # a comment\n"
	"Host *\n"
	"  ProxyCommand fallback %n\n";

static const char *const proxy_aliases[] = {
	"pj1", "pj2", "pj3", "pj4", "pj5", "pc1", "pc2", "pc3", "other", NULL };

static const char tokens_conf[] =
	"IgnoreUnknown Gpurun*\n"
	"Host tok\n"
	"  HostName tok.example.net\n"
	"  User tuser\n"
	"  Port 2345\n"
	"  IdentityFile ~/.ssh/id_%u_%h_%r_%p_%n\n"
	"  IdentityFile %d/keys/%l_%L_%i_%k\n"
	"  IdentityFile ${GR_TEST_KEYDIR}/env_%%_key\n"
	"  UserKnownHostsFile %d/kh/%C ~/kh/%h:%p ${GR_TEST_KEYDIR}/kh_%n_%i_%u\n"
	"Host tok2\n"
	"  HostKeyAlias AliasForTok2\n"
	"  IdentityFile ~/.ssh/%k\n"
	"  UserKnownHostsFile ~/kh_%k_%L_%l\n"
	"  IdentityFile none\n"
	"Host none-ids\n"
	"  IdentityFile none\n"
	"  UserKnownHostsFile none\n"
	"Host batch\n"
	"  BatchMode yes\n"
	"  StrictHostKeyChecking yes\n"
	"  IdentityFile2 /legacy/key\n"
	"Host timeouts\n"
	"  ConnectTimeout 0\n"
	"  ServerAliveInterval 2h\n"
	"  ProtocolKeepAlives 5\n"
	"  StrictHostKeyChecking off\n"
	"  GpurunSomething yes\n"
	"  Compression yes\n";

static const char *const tokens_aliases[] = {
	"tok", "tok2", "none-ids", "batch", "timeouts", NULL };

static const char final_conf[] =
	"Host f1\n"
	"  HostName F1-Real.Example\n"
	"Host f1-real.example\n"
	"  Port 5001\n"
	"Match final host *.example\n"
	"  User finaluser\n"
	"Match canonical all\n"
	"  ConnectTimeout 9\n"
	"Host 127.0.0.1\n"
	"  Port 5002\n"
	"Host ipv4\n"
	"  HostName 127.1\n"
	"Host ipv6\n"
	"  HostName FE80::1\n"
	"Match final all\n"
	"  ServerAliveCountMax 11\n";

static const char *const final_aliases[] = { "f1", "f2", "ipv4", "ipv6", NULL };

static int compare_corpus(const char *name, const char *text, const char *const *aliases)
{
	char *file = xasprintf("%s/%s", T, name);
	int n = 0;

	put(name, text, 0644);
	for (size_t i = 0; aliases[i]; i++)
		n += compare_one(file, aliases[i]);
	free(file);
	return n;
}

static int compared;

static void test_basic(void)
{
	if (!have_ssh)
		SKIP("no ssh client to use as the oracle");
	compared += compare_corpus("basic.conf", basic_conf, basic_aliases);
}

static void test_match(void)
{
	if (!have_ssh)
		SKIP("no ssh client to use as the oracle");
	compared += compare_corpus("match.conf", match_conf, match_aliases);
}

static void test_include(void)
{
	if (!have_ssh)
		SKIP("no ssh client to use as the oracle");
	put("inc/10-a.conf", "Host inc-a\n  Port 4001\n", 0644);
	put("inc/20-b.conf", "Host inc-b inc-a\n  Port 4002\n  IdentityFile @T@/keys/b\n"
	    "Match all\n  User frommatch\n", 0644);
	put("home/.ssh/nested/level1.conf", "Port 4100\nInclude nested/level2.conf\n", 0644);
	put("home/.ssh/nested/level2.conf", "User deep\nProxyJump jump1,u@jump2:2022\n", 0644);
	put("home/.ssh/tail.conf", "Host *\n  ServerAliveCountMax 7\n", 0644);
	compared += compare_corpus("include.conf", include_conf, include_aliases);
}

static void test_proxy(void)
{
	if (!have_ssh)
		SKIP("no ssh client to use as the oracle");
	compared += compare_corpus("proxy.conf", proxy_conf, proxy_aliases);
}

static void test_tokens(void)
{
	struct ssh_target t;
	struct gr_err err = { 0 };
	char *file;

	if (!have_ssh)
		SKIP("no ssh client to use as the oracle");
	compared += compare_corpus("tokens.conf", tokens_conf, tokens_aliases);
	/* GpurunSomething is covered by IgnoreUnknown: no warning */
	file = xasprintf("%s/tokens.conf", T);
	CHECK(sshcfg_resolve("timeouts", file, "", &t, &err) == 0);
	CHECK_EQ_INT(t.warnings.n, 0);
	ssh_target_release(&t);
	free(file);
}

static void test_final_pass(void)
{
	if (!have_ssh)
		SKIP("no ssh client to use as the oracle");
	compared += compare_corpus("final.conf", final_conf, final_aliases);
}

/* The user's own ~/.ssh/config (user_config NULL) with $HOME pointing at
 * the test home, compared with ssh -G -F on the same file. */
static void test_default_user_config(void)
{
	struct ssh_target t;
	struct gr_err err = { 0 };
	char *file = xasprintf("%s/.ssh/config", HOMEDIR);

	if (!have_ssh)
		SKIP("no ssh client to use as the oracle");
	put(file, "Host home-alias\n  HostName h.example\n  Port 2022\n", 0600);
	CHECK(sshcfg_resolve("home-alias", NULL, "", &t, &err) == 0);
	CHECK_STR(t.hostname, "h.example");
	CHECK_EQ_INT(t.port, 2022);
	ssh_target_release(&t);
	compared += compare_one(file, "home-alias");
	/* group-writable: refused, as ssh refuses it */
	chmod(file, 0664);
	CHECK_EQ_INT(sshcfg_resolve("home-alias", NULL, "", &t, &err), GR_ECONFIG);
	CHECK(strstr(err.msg, "bad owner or permissions") != NULL);
	unlink(file);
	/* no file at all: defaults */
	CHECK(sshcfg_resolve("home-alias", NULL, "", &t, &err) == 0);
	CHECK_STR(t.hostname, "home-alias");
	CHECK_EQ_INT(t.port, 22);
	ssh_target_release(&t);
	free(file);
}

/* Malformed lines: gpurun fails with file:line, and so does ssh. */
static void test_errors(void)
{
	static const struct { const char *text; int line; const char *what; } bad[] = {
		{ "Host a\n  Port abc\n", 2, "bad port" },
		{ "Port 0\n", 1, "bad port" },
		{ "HostName a b\n", 1, "extra arguments" },
		{ "HostName \"unterminated\n", 1, "invalid quotes" },
		{ "\n\nHost\n", 3, "no argument" },
		{ "Match bogus x\n", 1, "unsupported Match attribute" },
		{ "Match host\n", 1, "needs an argument" },
		{ "Match all host x\n", 1, "cannot be combined" },
		{ "ConnectTimeout 5x\n", 1, "invalid time value" },
		{ "StrictHostKeyChecking maybe\n", 1, "unsupported option" },
		{ "IdentitiesOnly perhaps\n", 1, "unsupported option" },
		{ "UserKnownHostsFile a none\n", 1, "must appear alone" },
		{ "ProxyJump ssh://u@[::1]:22\n", 1, "invalid ProxyJump" },
		{ "ServerAliveCountMax -1\n", 1, "integer value" },
		{ "# ok\nHost x\n  IdentityFile a b\n", 3, "extra arguments" },
	};
	char *file = xasprintf("%s/bad.conf", T);

	for (size_t i = 0; i < GR_ARRAY_SIZE(bad); i++) {
		struct ssh_target t;
		struct gr_err err = { 0 };
		char want[128];
		struct strbuf g = STRBUF_INIT;

		put("bad.conf", bad[i].text, 0644);
		snprintf(want, sizeof(want), "%s:%d: ", file, bad[i].line);
		CHECK_EQ_INT(sshcfg_resolve("x", file, "", &t, &err), GR_ECONFIG);
		if (!strstr(err.msg, want) || !strstr(err.msg, bad[i].what))
			fprintf(stderr, "  case %zu: got '%s', want '%s...%s'\n", i, err.msg, want,
				bad[i].what);
		CHECK(strstr(err.msg, want) != NULL);
		CHECK(strstr(err.msg, bad[i].what) != NULL);
		if (have_ssh)
			CHECK(ssh_G(file, "x", &g) != 0);
		sb_release(&g);
	}
	free(file);
}

static void test_include_errors(void)
{
	struct ssh_target t;
	struct gr_err err = { 0 };
	struct strbuf g = STRBUF_INIT;
	char *file = xasprintf("%s/loop.conf", T), *ww = xasprintf("%s/ww.conf", T);

	put("loop.conf", "Include @T@/loop.conf\n", 0644);
	CHECK_EQ_INT(sshcfg_resolve("x", file, "", &t, &err), GR_ECONFIG);
	CHECK(strstr(err.msg, "too many nested Include") != NULL);
	if (have_ssh)
		CHECK(ssh_G(file, "x", &g) != 0);
	sb_reset(&g);
	put("ww-inc.conf", "Port 1\n", 0666);
	put("ww.conf", "Include @T@/ww-inc.conf\n", 0644);
	CHECK_EQ_INT(sshcfg_resolve("x", ww, "", &t, &err), GR_ECONFIG);
	CHECK(strstr(err.msg, "bad owner or permissions") != NULL);
	if (have_ssh)
		CHECK(ssh_G(ww, "x", &g) != 0);
	/* '~' in an Include of a system configuration is refused */
	put("sys.conf", "Include ~/x.conf\n", 0644);
	free(file);
	file = xasprintf("%s/sys.conf", T);
	CHECK_EQ_INT(sshcfg_resolve("x", "", file, &t, &err), GR_ECONFIG);
	CHECK(strstr(err.msg, "sys.conf:1: bad Include path") != NULL);
	sb_release(&g);
	free(file);
	free(ww);
}

static void test_unknown_keyword_warns(void)
{
	struct ssh_target t;
	struct gr_err err = { 0 };
	char *file = xasprintf("%s/unknown.conf", T);

	put("unknown.conf", "Host x\n  NoSuchKeyword 1\n  Port 7\n", 0644);
	CHECK(sshcfg_resolve("x", file, "", &t, &err) == 0);
	CHECK_EQ_INT(t.port, 7);
	CHECK_EQ_INT(t.warnings.n, 1);
	if (t.warnings.n)
		CHECK(strstr(t.warnings.v[0], "unknown.conf:2: unknown ssh_config keyword "
				"'nosuchkeyword'") != NULL);
	ssh_target_release(&t);
	free(file);
}

static void test_specs(void)
{
	static const struct { const char *spec; const char *user, *host; int port; } ok[] = {
		{ "h", NULL, "h", 22 },
		{ "u@h", "u", "h", 22 },
		{ "u@h:2200", "u", "h", 2200 },
		{ "a@b@h", "a@b", "h", 22 },
		{ "[::1]:2201", NULL, "::1", 2201 },
		{ "u@[fe80::1]", "u", "fe80::1", 22 },
		{ "::1", NULL, "::1", 22 },
		{ "ssh://v@host.example:23", "v", "host.example", 23 },
		{ "h:ssh", NULL, "h", 22 },
	};
	static const char *const bad[] = { "", "-oProxyCommand=x", "a b", "@h", "h:0", "h:99999",
					   "u@", "[::1]x", "ssh://[::1]", "h\n" };
	struct gr_err err = { 0 };

	for (size_t i = 0; i < GR_ARRAY_SIZE(ok); i++) {
		struct ssh_target t;
		CHECK(sshcfg_resolve(ok[i].spec, "", "", &t, &err) == 0);
		CHECK_STR(t.alias, ok[i].host);
		if (ok[i].user)
			CHECK_STR(t.user, ok[i].user);
		else
			CHECK_STR(t.user, local_user);
		CHECK_EQ_INT(t.port, ok[i].port);
		ssh_target_release(&t);
	}
	for (size_t i = 0; i < GR_ARRAY_SIZE(bad); i++) {
		struct ssh_target t;
		int rc = sshcfg_resolve(bad[i], "", "", &t, &err);
		if (rc != GR_EINVAL)
			fprintf(stderr, "  spec '%s' gave %d\n", bad[i], rc);
		CHECK_EQ_INT(rc, GR_EINVAL);
	}
}

static void test_lexer(void)
{
	char hex[41];
	const char *why;

	CHECK(sshc_match_pattern("web1", "web?"));
	CHECK(!sshc_match_pattern("web12", "web?"));
	CHECK(sshc_match_pattern("a.b.c", "*.c"));
	CHECK(sshc_match_pattern("abc", "a*b*c*"));
	CHECK(!sshc_match_pattern("ab", "a*b*c"));
	CHECK(sshc_match_pattern("aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "*a*a*a*a*a*a*a*a*a*b"));
	CHECK_EQ_INT(sshc_match_pattern_list("web9", "web*,!web9", 0), -1);
	CHECK_EQ_INT(sshc_match_pattern_list("web1", "web*,!web9", 0), 1);
	CHECK_EQ_INT(sshc_match_pattern_list("db", "web*", 0), 0);
	CHECK_EQ_INT(sshc_match_pattern_list("web", "WEB", 1), 1);
	CHECK_EQ_INT(sshc_convtime("1h30m"), 5400);
	CHECK_EQ_INT(sshc_convtime("90"), 90);
	CHECK_EQ_INT(sshc_convtime("1w"), 604800);
	CHECK_EQ_INT(sshc_convtime("5x"), -1);
	CHECK_EQ_INT(sshc_convtime(""), -1);
	CHECK_EQ_INT(sshc_atoi("12", &why), 12);
	CHECK_EQ_INT(sshc_atoi("-1", &why), -1);
	sshc_sha1_hex("abc", 3, hex);
	CHECK_STR(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
	sshc_sha1_hex("", 0, hex);
	CHECK_STR(hex, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
}

static void test_oracle_coverage(void)
{
	if (!have_ssh)
		SKIP("no ssh client to use as the oracle");
	/* the brief: at least 25 aliases compared with ssh -G */
	fprintf(stderr, "  %d aliases compared with ssh -G\n", compared);
	CHECK(compared >= 25);
}

int main(void)
{
	struct passwd *pw = getpwuid(getuid());
	char *keydir;

	snprintf(T, sizeof(T), "%s/gr-sshcfg.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(T)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(HOMEDIR, sizeof(HOMEDIR), "%s/home", T);
	mkdir_p(HOMEDIR, 0755, NULL);
	keydir = xasprintf("%s/keys", T);
	setenv("HOME", HOMEDIR, 1);
	setenv("GR_TEST_KEYDIR", keydir, 1);
	setenv("SHELL", "/bin/sh", 1);
	pw_home = pw ? xstrdup(pw->pw_dir) : "/nonexistent";
	local_user = pw ? xstrdup(pw->pw_name) : "unknown";
	have_ssh = system("ssh -V >/dev/null 2>&1") == 0;

	RUN(test_lexer);
	RUN(test_specs);
	RUN(test_basic);
	RUN(test_match);
	RUN(test_include);
	RUN(test_proxy);
	RUN(test_tokens);
	RUN(test_final_pass);
	RUN(test_default_user_config);
	RUN(test_errors);
	RUN(test_include_errors);
	RUN(test_unknown_keyword_warns);
	RUN(test_oracle_coverage);

	if (!t_failed_cases) {
		char *cmd = xasprintf("rm -rf '%s'", T);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", T);
		free(cmd);
	} else {
		fprintf(stderr, "scratch folder kept: %s\n", T);
	}
	free(keydir);
	return T_DONE();
}
