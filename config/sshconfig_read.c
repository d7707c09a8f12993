/* Reading ssh_config files the way OpenSSH 9.2's readconf.c does: one
 * keyword per line, Host and Match blocks, Include, first value wins. The
 * resolver (sshconfig.c) runs this once, or twice for a final pass. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sshconfig.h"
#include "sshconfig_int.h"

enum op {
	OP_UNKNOWN, OP_IGNORED, OP_HOST, OP_MATCH, OP_INCLUDE, OP_HOSTNAME, OP_USER,
	OP_PORT, OP_IDENTITYFILE, OP_IDENTITIESONLY, OP_PROXYCOMMAND, OP_PROXYJUMP,
	OP_UKHF, OP_SHK, OP_CONNECTTIMEOUT, OP_SAI, OP_SACM, OP_BATCHMODE,
	OP_IGNOREUNKNOWN, OP_HOSTKEYALIAS, OP_CANONHOST, OP_CANONDOMAINS,
};

/* Every keyword OpenSSH 9.2 (Debian) accepts, found by asking `ssh -G`
 * about each candidate. The ones gpurun uses have their own op. */
static const struct { const char *name; enum op op; } keywords[] = {
	{ "host", OP_HOST }, { "match", OP_MATCH }, { "include", OP_INCLUDE },
	{ "hostname", OP_HOSTNAME }, { "user", OP_USER }, { "port", OP_PORT },
	{ "identityfile", OP_IDENTITYFILE }, { "identityfile2", OP_IDENTITYFILE },
	{ "identitiesonly", OP_IDENTITIESONLY }, { "proxycommand", OP_PROXYCOMMAND },
	{ "proxyjump", OP_PROXYJUMP }, { "userknownhostsfile", OP_UKHF },
	{ "stricthostkeychecking", OP_SHK }, { "connecttimeout", OP_CONNECTTIMEOUT },
	{ "serveraliveinterval", OP_SAI }, { "protocolkeepalives", OP_SAI },
	{ "setuptimeout", OP_SAI }, { "serveralivecountmax", OP_SACM },
	{ "batchmode", OP_BATCHMODE }, { "ignoreunknown", OP_IGNOREUNKNOWN },
	{ "hostkeyalias", OP_HOSTKEYALIAS }, { "canonicalizehostname", OP_CANONHOST },
	{ "canonicaldomains", OP_CANONDOMAINS },
};
static const char *const ignored_keywords[] = {
	"addkeystoagent", "addressfamily", "afstokenpassing", "bindaddress", "bindinterface",
	"canonicalizefallbacklocal", "canonicalizemaxdots", "canonicalizepermittedcnames",
	"casignaturealgorithms", "certificatefile", "challengeresponseauthentication",
	"checkhostip", "cipher", "ciphers", "clearallforwardings", "compression",
	"compressionlevel", "connectionattempts", "controlmaster", "controlpath",
	"controlpersist", "dsaauthentication", "dynamicforward", "enableescapecommandline",
	"enablesshkeysign", "escapechar", "exitonforwardfailure", "fallbacktorsh",
	"fingerprinthash", "forkafterauthentication", "forwardagent", "forwardx11",
	"forwardx11timeout", "forwardx11trusted", "gatewayports", "globalknownhostsfile",
	"globalknownhostsfile2", "gssapiauthentication", "gssapiclientidentity",
	"gssapidelegatecredentials", "gssapikexalgorithms", "gssapikeyexchange",
	"gssapirenewalforcesrekey", "gssapiserveridentity", "gssapitrustdns",
	"hashknownhosts", "hostbasedacceptedalgorithms", "hostbasedauthentication",
	"hostbasedkeytypes", "hostkeyalgorithms", "identityagent", "ipqos",
	"kbdinteractiveauthentication", "kbdinteractivedevices", "kerberosauthentication",
	"kerberostgtpassing", "kexalgorithms", "knownhostscommand", "localcommand",
	"localforward", "loglevel", "logverbose", "macs", "nohostauthenticationforlocalhost",
	"numberofpasswordprompts", "passwordauthentication", "permitlocalcommand",
	"permitremoteopen", "pkcs11provider", "preferredauthentications", "protocol",
	"proxyusefdpass", "pubkeyacceptedalgorithms", "pubkeyacceptedkeytypes",
	"pubkeyauthentication", "rekeylimit", "remotecommand", "remoteforward", "requesttty",
	"requiredrsasize", "revokedhostkeys", "rhostsauthentication", "rhostsrsaauthentication",
	"securitykeyprovider", "sendenv", "sessiontype", "setenv", "skeyauthentication",
	"smartcarddevice", "stdinnull", "streamlocalbindmask", "streamlocalbindunlink",
	"syslogfacility", "tcpkeepalive", "tisauthentication", "tunnel", "tunneldevice",
	"updatehostkeys", "useblacklistedkeys", "useprivilegedport", "userknownhostsfile2",
	"useroaming", "usersh", "verifyhostkeydns", "visualhostkey", "xauthlocation",
};

/* ssh's multistate tables (readconf.c), matched case-insensitively. */
struct mstate { const char *key; int value; };
static const struct mstate ms_flag[] = {
	{ "true", 1 }, { "false", 0 }, { "yes", 1 }, { "no", 0 }, { NULL, -1 } };
static const struct mstate ms_shk[] = {
	{ "true", GR_SHK_YES }, { "false", GR_SHK_NO }, { "yes", GR_SHK_YES },
	{ "no", GR_SHK_NO }, { "ask", GR_SHK_ASK }, { "off", GR_SHK_NO },
	{ "accept-new", GR_SHK_ACCEPT_NEW }, { NULL, -1 } };
static const struct mstate ms_canon[] = {
	{ "true", 1 }, { "false", 0 }, { "yes", 1 }, { "no", 0 }, { "always", 2 },
	{ NULL, -1 } };

static int read_ssh_file(struct sctx *c, const char *path, unsigned flags, int *activep,
		     int depth);

static int perr(struct sctx *c, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int perr(struct sctx *c, const char *file, int line, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	gr_errf(c->err, GR_ECONFIG, "%s:%d: %s", file, line, sb.buf);
	sb_release(&sb);
	return GR_ECONFIG;
}

void sshc_warn(struct sctx *c, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	for (size_t i = 0; i < c->warnings->n; i++)
		if (!strcmp(c->warnings->v[i], sb.buf))
			goto out;
	sv_push(c->warnings, sb.buf);
out:
	sb_release(&sb);
}

static enum op lookup_keyword(const char *kw)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(keywords); i++)
		if (!strcmp(kw, keywords[i].name))
			return keywords[i].op;
	for (size_t i = 0; i < GR_ARRAY_SIZE(ignored_keywords); i++)
		if (!strcmp(kw, ignored_keywords[i]))
			return OP_IGNORED;
	return OP_UNKNOWN;
}

static int mstate_value(const struct mstate *m, const char *arg)
{
	for (; arg && m->key; m++)
		if (!strcasecmp(arg, m->key))
			return m->value;
	return -1;
}

/* Run a Match exec command as ssh does: $SHELL -c, stdin and stdout on
 * /dev/null. Returns its exit status, or -1 with why set. */
static int run_shell(const char *cmd, struct strbuf *why)
{
	const char *shell = getenv("SHELL");
	int status, fd;
	pid_t pid;

	if (!shell || !*shell)
		shell = "/bin/sh";
	if (access(shell, X_OK) < 0) {
		sb_addf(why, "shell '%s' is not executable: %s", shell, strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		sb_addf(why, "cannot fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		if ((fd = open("/dev/null", O_RDWR)) >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			if (fd > 2)
				close(fd);
		}
		for (fd = 3; fd < 1024; fd++)
			close(fd);
		execl(shell, shell, "-c", cmd, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			sb_addf(why, "waitpid: %s", strerror(errno));
			return -1;
		}
	if (!WIFEXITED(status)) {
		sb_addf(why, "command '%s' exited abnormally", cmd);
		return -1;
	}
	return WEXITSTATUS(status);
}

/* The host Match host compares: HostName so far (%h expanded), or the
 * Host-matching name. */
static int match_host_name(struct sctx *c, unsigned flags, char **out)
{
	struct strbuf sb = STRBUF_INIT, why = STRBUF_INIT;
	const char *vals[] = { c->host };

	if ((flags & CF_FINAL) || !c->o.hostname) {
		*out = xstrdup((flags & CF_FINAL) && c->o.hostname ? c->o.hostname : c->host);
		return 0;
	}
	if (sshc_expand(c->o.hostname, 0, "h", vals, &sb, &why) < 0) {
		gr_errf(c->err, GR_ECONFIG, "%s: HostName: %s", c->o.hn_where, why.buf);
		sb_release(&sb);
		sb_release(&why);
		return GR_ECONFIG;
	}
	sb_release(&why);
	*out = sb_detach(&sb, NULL);
	return 0;
}

static int match_hostname(const char *host, const char *pattern)
{
	char *h = xstrdup(host);
	int r;

	sshc_lowercase(h);
	r = sshc_match_pattern_list(h, pattern, 1);
	free(h);
	return r == 1;
}

/* ssh's match_cfg_line: 1 when the Match line applies, 0 when not, or a
 * negative GR_E* code. *cond is left at whatever was not consumed. */
static int match_line(struct sctx *c, char **cond, const char *file, int line,
		      unsigned flags)
{
	char *cp = *cond, *attrib, *arg, *host = NULL;
	const char *ruser = c->o.user ? c->o.user : c->local_user;
	int result = 1, attributes = 0, port = c->o.port > 0 ? c->o.port : 22;

	if ((result = match_host_name(c, flags, &host)) < 0)
		return result;
	result = 1;
	while ((attrib = sshc_strdelim(&cp, 1)) && *attrib) {
		const char *oattrib = attrib;
		int negate, r;

		if (*attrib == '#') {
			cp = NULL;
			break;
		}
		arg = NULL;
		if ((negate = attrib[0] == '!'))
			attrib++;
		if (!strcasecmp(attrib, "all")) {
			if (attributes > 1 || ((arg = sshc_strdelim(&cp, 1)) && *arg && *arg != '#')) {
				result = perr(c, file, line,
					      "'%s' cannot be combined with other Match attributes",
					      oattrib);
				goto out;
			}
			if (arg && *arg == '#')
				cp = NULL;
			if (result)
				result = negate ? 0 : 1;
			goto out;
		}
		attributes++;
		if (!strcasecmp(attrib, "canonical") || !strcasecmp(attrib, "final")) {
			if (!strcasecmp(attrib, "final"))
				c->want_final = 1;
			r = !!(flags & CF_FINAL);
			if (r == (negate ? 1 : 0))
				result = 0;
			continue;
		}
		if (!(arg = sshc_strdelim(&cp, 1)) || !*arg || *arg == '#') {
			result = perr(c, file, line, "Match '%s' needs an argument", attrib);
			goto out;
		}
		if (!strcasecmp(attrib, "host")) {
			r = match_hostname(host, arg);
		} else if (!strcasecmp(attrib, "originalhost")) {
			r = match_hostname(c->orig, arg);
		} else if (!strcasecmp(attrib, "user")) {
			r = sshc_match_pattern_list(ruser, arg, 0) == 1;
		} else if (!strcasecmp(attrib, "localuser")) {
			r = sshc_match_pattern_list(c->local_user, arg, 0) == 1;
		} else if (!strcasecmp(attrib, "exec")) {
			struct strbuf cmd = STRBUF_INIT, why = STRBUF_INIT, hin = STRBUF_INIT;
			char ps[16], hash[41];
			const char *keyalias = c->o.host_key_alias ? c->o.host_key_alias : host;

			snprintf(ps, sizeof(ps), "%d", port);
			sb_addf(&hin, "%s%s%s%s", c->thishost, host, ps, ruser);
			sshc_sha1_hex(hin.buf, hin.len, hash);
			sb_release(&hin);
			const char *vals[] = { hash, c->shorthost, c->home, host, keyalias,
					       c->thishost, c->orig, ps, ruser, c->local_user, c->uid };
			if (sshc_expand(arg, 0, "CLdhklnprui", vals, &cmd, &why) < 0) {
				result = perr(c, file, line, "Match exec: %s", why.buf);
				sb_release(&cmd);
				sb_release(&why);
				goto out;
			}
			if (result != 1) {   /* an earlier criterion failed: do not run it */
				sb_release(&cmd);
				sb_release(&why);
				continue;
			}
			r = run_shell(cmd.buf, &why);
			if (r < 0) {
				result = perr(c, file, line, "Match exec: %s", why.buf);
				sb_release(&cmd);
				sb_release(&why);
				goto out;
			}
			r = r == 0;
			sb_release(&cmd);
			sb_release(&why);
		} else {
			result = perr(c, file, line, "unsupported Match attribute '%s'", attrib);
			goto out;
		}
		if (r == (negate ? 1 : 0))
			result = 0;
	}
	if (attributes == 0)
		result = perr(c, file, line, "Match needs at least one attribute");
out:
	*cond = cp;
	free(host);
	return result;
}

/* ssh's parse_jump: validate every hop, keep the last one split up. The
 * chain is read up to a '#', and ssh's rtrim ends it at any whitespace
 * after the first character ("a b,c" is "a"); "none" must be exact. */
static int parse_jump(struct sctx *c, const char *s, int active)
{
	char *trimmed = xstrdup(s), *sdup, *cp, *user = NULL, *host = NULL;
	int port = -1, first, ret = -1, r;

	active &= !c->o.proxy_command && !c->o.jump_host;
	if ((cp = strchr(trimmed, '#')))
		*cp = '\0';
	for (size_t i = strlen(trimmed); i > 1; i--)
		if (isspace((unsigned char)trimmed[i - 1]))
			trimmed[i - 1] = '\0';
	sdup = xstrdup(trimmed);
	first = active;
	do {
		if (!strcasecmp(s, "none"))
			break;
		if (!(cp = strrchr(sdup, ',')))
			cp = sdup;
		else
			*cp++ = '\0';
		if (first) {
			r = sshc_parse_ssh_uri(cp, &user, &host, &port);
			if (r == -1 || (r == 1 && sshc_parse_user_host_port(cp, &user, &host, &port)))
				goto out;
		} else {
			r = sshc_parse_ssh_uri(cp, NULL, NULL, NULL);
			if (r == -1 || (r == 1 && sshc_parse_user_host_port(cp, NULL, NULL, NULL)))
				goto out;
		}
		first = 0;
	} while (cp != sdup);
	if (active) {
		if (!strcasecmp(s, "none")) {
			c->o.jump_host = xstrdup("none");
			c->o.jump_port = 0;
		} else {
			c->o.jump_user = user;
			c->o.jump_host = host;
			c->o.jump_port = port;
			c->o.proxy_command = xstrdup("none");
			user = host = NULL;
			if ((cp = strrchr(trimmed, ',')) && cp != trimmed)
				c->o.jump_extra = xstrndup(trimmed, (size_t)(cp - trimmed));
		}
	}
	ret = 0;
out:
	free(trimmed);
	free(sdup);
	free(user);
	free(host);
	return ret;
}

static int do_include(struct sctx *c, struct strvec *av, size_t *i, const char *file,
		      int line, unsigned flags, int *activep, int depth)
{
	for (; *i < av->n; (*i)++) {
		const char *arg = av->v[*i];
		char *pattern;
		glob_t gl;
		int r, oactive;

		if (!*arg)
			return perr(c, file, line, "Include has an empty argument");
		if (*arg == '~' && !(flags & CF_USER))
			return perr(c, file, line,
				    "bad Include path '%s': '~' is only allowed in a user configuration",
				    arg);
		if (*arg != '/' && *arg != '~')
			pattern = xasprintf("%s/%s", (flags & CF_USER) ? "~/.ssh" : "/etc/ssh", arg);
		else
			pattern = xstrdup(arg);
		memset(&gl, 0, sizeof(gl));
		r = glob(pattern, GLOB_TILDE, NULL, &gl);
		if (r == GLOB_NOMATCH) {
			free(pattern);
			continue;
		}
		if (r != 0) {
			perr(c, file, line, "cannot expand Include '%s'", pattern);
			free(pattern);
			return GR_ECONFIG;
		}
		free(pattern);
		oactive = *activep;
		for (size_t j = 0; j < gl.gl_pathc; j++) {
			r = read_ssh_file(c, gl.gl_pathv[j],
				      flags | CF_CHECKPERM | (oactive ? 0 : CF_NEVERMATCH),
				      activep, depth + 1);
			/* a Match in an included file does not leak out of it */
			*activep = oactive;
			if (r < 0) {
				globfree(&gl);
				return r;
			}
		}
		globfree(&gl);
	}
	return 0;
}

/* Set *field from a multistate argument (first value wins). */
static int set_mstate(struct sctx *c, const struct mstate *m, const char *arg, int *field,
		      int active, const char *file, int line)
{
	int v = mstate_value(m, arg);

	if (!arg || !*arg)
		return perr(c, file, line, "missing argument");
	if (v < 0)
		return perr(c, file, line, "unsupported option '%s'", arg);
	if (active && *field == -1)
		*field = v;
	return 0;
}

static void set_str(char **field, const char *v, int active)
{
	if (active && !*field)
		*field = xstrdup(v);
}

static int process_line(struct sctx *c, char *line, const char *file, int lineno,
			int *activep, unsigned flags, int depth)
{
	struct strvec av = STRVEC_INIT;
	char *str = line, *kw, *where = NULL;
	const char *arg, *why;
	size_t len = strlen(line), i = 0;
	int active = *activep, rc = 0, v;
	enum op op;

	if (!len)
		return 0;
	for (len--; len > 0 && strchr(SSHC_WS "\f", line[len]); len--)
		line[len] = '\0';
	if (!(kw = sshc_strdelim(&str, 1)))
		return 0;
	if (!*kw)
		kw = sshc_strdelim(&str, 1);
	if (!kw || !*kw || *kw == '\n' || *kw == '#')
		return 0;
	sshc_lowercase(kw);
	if (str)
		str += strspn(str, SSHC_WS);
	if (!str || !*str)
		return perr(c, file, lineno, "no argument after keyword '%s'", kw);
	op = lookup_keyword(kw);
	if (op == OP_UNKNOWN) {
		if (c->o.ignore_unknown && sshc_match_pattern_list(kw, c->o.ignore_unknown, 1) == 1)
			return 0;
		sshc_warn(c, "%s:%d: unknown ssh_config keyword '%s' ignored", file, lineno, kw);
		return 0;
	}
	if (sshc_argv_split(str, &av) < 0)
		return perr(c, file, lineno, "invalid quotes");
	where = xasprintf("%s:%d", file, lineno);
	arg = av.n ? av.v[0] : NULL;

	switch (op) {
	case OP_UNKNOWN:
	case OP_IGNORED:
		i = av.n;
		break;
	case OP_HOST:
		*activep = 0;
		for (; i < av.n; i++) {
			const char *p = av.v[i];
			int neg;
			if (!*p) {
				rc = perr(c, file, lineno, "Host has an empty argument");
				goto out;
			}
			if (flags & CF_NEVERMATCH) {
				i = av.n;
				break;
			}
			if ((neg = *p == '!'))
				p++;
			if (sshc_match_pattern(c->host, p)) {
				if (neg) {
					*activep = 0;
					i = av.n;
					break;
				}
				*activep = 1;
			}
		}
		break;
	case OP_MATCH:
		if ((v = match_line(c, &str, file, lineno, flags)) < 0) {
			rc = v;
			goto out;
		}
		*activep = (flags & CF_NEVERMATCH) ? 0 : v;
		if (!str || !*str)
			i = av.n;
		break;
	case OP_INCLUDE:
		rc = do_include(c, &av, &i, file, lineno, flags, activep, depth);
		if (rc < 0)
			goto out;
		break;
	case OP_HOSTNAME:
	case OP_USER:
	case OP_HOSTKEYALIAS:
	case OP_IGNOREUNKNOWN:
		i++;
		if (!arg || !*arg) {
			rc = perr(c, file, lineno, "missing argument");
			goto out;
		}
		if (op == OP_HOSTNAME && active && !c->o.hostname) {
			c->o.hn_where = where;
			where = NULL;
		}
		set_str(op == OP_HOSTNAME ? &c->o.hostname : op == OP_USER ? &c->o.user :
			op == OP_HOSTKEYALIAS ? &c->o.host_key_alias : &c->o.ignore_unknown,
			arg, active);
		break;
	case OP_PORT:
		i++;
		if (!arg || !*arg) {
			rc = perr(c, file, lineno, "missing argument");
			goto out;
		}
		if ((v = sshc_a2port(arg)) <= 0) {
			rc = perr(c, file, lineno, "bad port '%s'", arg);
			goto out;
		}
		if (active && c->o.port == -1)
			c->o.port = v;
		break;
	case OP_IDENTITYFILE:
		i++;
		if (!arg || !*arg) {
			rc = perr(c, file, lineno, "missing argument");
			goto out;
		}
		if (!active)
			break;
		if (c->o.ids.n >= MAX_IDENTITY_FILES) {
			rc = perr(c, file, lineno, "too many identity files (at most %d)",
				  MAX_IDENTITY_FILES);
			goto out;
		}
		for (size_t k = 0; k < c->o.ids.n; k++)
			if (c->o.ids_user[k] == !!(flags & CF_USER) && !strcmp(c->o.ids.v[k], arg))
				goto next;   /* ssh ignores duplicates */
		c->o.ids_user[c->o.ids.n] = !!(flags & CF_USER);
		sv_push(&c->o.ids, arg);
		sv_push(&c->o.ids_where, where);
	next:
		break;
	case OP_IDENTITIESONLY:
	case OP_BATCHMODE:
		i++;
		rc = set_mstate(c, ms_flag, arg, op == OP_BATCHMODE ? &c->o.batch_mode :
				&c->o.identities_only, active, file, lineno);
		break;
	case OP_SHK:
		i++;
		rc = set_mstate(c, ms_shk, arg, &c->o.shk, active, file, lineno);
		break;
	case OP_CANONHOST:
		i++;
		rc = set_mstate(c, ms_canon, arg, &c->o.canonicalize, active, file, lineno);
		break;
	case OP_CANONDOMAINS: {
		int had = c->o.canon_domains != 0;
		for (; i < av.n; i++) {
			const char *d = av.v[i];
			if (!*d || (!strcasecmp(d, "none") && (i > 0 || i + 1 < av.n))) {
				rc = perr(c, file, lineno, "CanonicalDomains: bad argument '%s'", d);
				goto out;
			}
			if (active && !had && strcasecmp(d, "none"))
				c->o.canon_domains++;
		}
		break;
	}
	case OP_CONNECTTIMEOUT:
	case OP_SAI: {
		int *field = op == OP_SAI ? &c->o.sai : &c->o.connect_timeout;
		i++;
		if (!arg || !*arg) {
			rc = perr(c, file, lineno, "missing time value");
			goto out;
		}
		if (!strcmp(arg, "none"))
			v = -1;
		else if ((v = sshc_convtime(arg)) < 0) {
			rc = perr(c, file, lineno, "invalid time value '%s'", arg);
			goto out;
		}
		if (active && *field == -1)
			*field = v;
		break;
	}
	case OP_SACM:
		i++;
		if ((v = sshc_atoi(arg, &why)) < 0) {
			rc = perr(c, file, lineno, "integer value %s: '%s'", why, arg ? arg : "");
			goto out;
		}
		if (active && c->o.sacm == -1)
			c->o.sacm = v;
		break;
	case OP_UKHF: {
		int was_empty = c->o.ukh.n == 0;
		for (; i < av.n; i++) {
			const char *f = av.v[i];
			if (!*f) {
				rc = perr(c, file, lineno, "UserKnownHostsFile has an empty argument");
				goto out;
			}
			if (!strcasecmp(f, "none") && (i > 0 || i + 1 < av.n)) {
				rc = perr(c, file, lineno,
					  "UserKnownHostsFile: \"none\" must appear alone");
				goto out;
			}
			if (active && was_empty) {
				if (c->o.ukh.n >= MAX_HOSTS_FILES) {
					rc = perr(c, file, lineno, "too many UserKnownHostsFile entries");
					goto out;
				}
				sv_push(&c->o.ukh, f);
				if (!c->o.ukh_where)
					c->o.ukh_where = xstrdup(where);
			}
		}
		break;
	}
	case OP_PROXYCOMMAND: {
		const char *raw = str + strspn(str, SSHC_WS "=");
		i = av.n;
		/* a ProxyJump seen first wins, but "ProxyJump none" does not block */
		int jumped = c->o.jump_host &&
			     !(!strcmp(c->o.jump_host, "none") && c->o.jump_port == 0);
		if (active && !jumped && !c->o.proxy_command) {
			c->o.proxy_command = xstrdup(raw);
			c->o.pc_where = where;
			where = NULL;
		}
		break;
	}
	case OP_PROXYJUMP: {
		const char *raw = str + strspn(str, SSHC_WS "=");
		i = av.n;
		if (parse_jump(c, raw, active) < 0) {
			rc = perr(c, file, lineno, "invalid ProxyJump '%s'", raw);
			goto out;
		}
		break;
	}
	}
	if (rc == 0 && i < av.n)
		rc = perr(c, file, lineno, "keyword '%s' has extra arguments at the end of the line",
			  kw);
out:
	free(where);
	sv_clear(&av);
	return rc;
}

static int read_ssh_file(struct sctx *c, const char *path, unsigned flags, int *activep,
		     int depth)
{
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, rc = 0;
	struct stat st;
	FILE *f;

	if (depth > MAX_DEPTH)
		return gr_errf(c->err, GR_ECONFIG,
			       "%s: too many nested Include levels (at most %d)", path, MAX_DEPTH);
	if (!(f = fopen(path, "re"))) {
		if (errno == ENOENT)
			return 0;
		return gr_errf(c->err, GR_ECONFIG, "cannot open '%s': %s", path, strerror(errno));
	}
	if ((flags & CF_CHECKPERM) && fstat(fileno(f), &st) == 0 &&
	    ((st.st_uid != 0 && st.st_uid != getuid()) || (st.st_mode & 022))) {
		fclose(f);
		gr_errf(c->err, GR_ECONFIG, "bad owner or permissions on '%s'", path);
		gr_hintf(c->err, "ssh refuses it too; run 'chmod go-w %s'", path);
		return GR_ECONFIG;
	}
	errno = 0;
	while (getline(&line, &cap, f) != -1) {
		lineno++;
		if ((rc = process_line(c, line, path, lineno, activep, flags, depth)) < 0)
			break;
		errno = 0;
	}
	if (rc == 0 && ferror(f) && errno != EISDIR)
		rc = gr_errf(c->err, GR_ECONFIG, "cannot read '%s': %s", path, strerror(errno));
	free(line);
	fclose(f);
	return rc;
}

int sshc_read_configs(struct sctx *c, const char *user_config, const char *system_config,
		      unsigned extra)
{
	int active, rc = 0;
	char *def = NULL;

	if (!user_config) {
		def = xasprintf("%s/.ssh/config", c->home);
		active = 1;
		rc = read_ssh_file(c, def, CF_USER | CF_CHECKPERM | extra, &active, 0);
		free(def);
	} else if (*user_config) {
		active = 1;
		rc = read_ssh_file(c, user_config, CF_USER | extra, &active, 0);
	}
	if (rc < 0)
		return rc;
	active = 1;
	if (!system_config)
		return read_ssh_file(c, "/etc/ssh/ssh_config", extra, &active, 0);
	if (*system_config)
		return read_ssh_file(c, system_config, extra, &active, 0);
	return 0;
}
