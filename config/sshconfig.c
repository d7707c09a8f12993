/* ssh_config resolution as OpenSSH 9.2's `ssh -G` does it (ssh.c's host
 * handling around readconf.c): the destination, HostName and address
 * canonicalisation, a final pass, then defaults and token expansion. So
 * gpurun's own SSH session reaches exactly the host the user's ssh would. */
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sshconfig.h"
#include "sshconfig_int.h"

/* ~, ~/x and ~user/x the way ssh's tilde_expand writes them (home + "/" +
 * rest, extra slashes dropped), but ~ is $HOME rather than passwd. */
static int tilde_expand(const char *home, const char *path, char **out)
{
	const char *rest, *dir;
	char *user = NULL;
	struct passwd *pw;
	size_t n;

	if (path[0] != '~') {
		*out = xstrdup(path);
		return 0;
	}
	rest = path + 1;
	if (*rest && *rest != '/') {
		const char *slash = strchr(rest, '/');
		user = slash ? xstrndup(rest, (size_t)(slash - rest)) : xstrdup(rest);
		rest = slash ? slash : "";
		if (!(pw = getpwnam(user))) {
			free(user);
			return -1;
		}
		dir = pw->pw_dir;
	} else {
		dir = home;
	}
	rest += strspn(rest, "/");
	n = strlen(dir);
	*out = xasprintf("%s%s%s", dir, n == 0 || dir[n - 1] != '/' ? "/" : "", rest);
	free(user);
	return 0;
}

static int is_addr_fast(const char *name)
{
	return strchr(name, '%') || strchr(name, ':') ||
	       strspn(name, "0123456789.") == strlen(name);
}

/* A literal address in canonical form (ssh's resolve_addr), or NULL. */
static char *numeric_addr(const char *name, int port)
{
	struct addrinfo hints, *res = NULL;
	char addr[NI_MAXHOST], ps[16];
	char *ret = NULL;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	snprintf(ps, sizeof(ps), "%d", port > 0 ? port : 22);
	if (getaddrinfo(name, ps, &hints, &res) != 0 || !res)
		return NULL;
	if (!res->ai_next && getnameinfo(res->ai_addr, res->ai_addrlen, addr, sizeof(addr),
					 NULL, 0, NI_NUMERICHOST) == 0)
		ret = xstrdup(addr);
	freeaddrinfo(res);
	return ret;
}

/* Split the destination like ssh's command line, plus ":port". */
static int parse_spec(const char *spec, char **user, char **host, int *port,
		      struct gr_err *err)
{
	char *dup, *at, *h, *end;
	int r;

	*user = *host = NULL;
	*port = -1;
	if (!spec || !*spec)
		return gr_errf(err, GR_EINVAL, "empty ssh destination");
	for (const char *p = spec; *p; p++)
		if (isspace((unsigned char)*p) || iscntrl((unsigned char)*p))
			return gr_errf(err, GR_EINVAL,
				       "invalid ssh destination '%s': contains whitespace", spec);
	if (spec[0] == '-')
		return gr_errf(err, GR_EINVAL,
			       "invalid ssh destination '%s': must not start with '-'", spec);
	if ((r = sshc_parse_ssh_uri(spec, user, host, port)) == 0)
		return 0;
	if (r < 0)
		return gr_errf(err, GR_EINVAL, "invalid ssh destination '%s'", spec);
	dup = xstrdup(spec);
	h = dup;
	if ((at = strrchr(dup, '@'))) {
		if (at == dup) {
			free(dup);
			return gr_errf(err, GR_EINVAL, "invalid ssh destination '%s': empty user",
				       spec);
		}
		*at = '\0';
		*user = xstrdup(dup);
		h = at + 1;
	}
	end = NULL;
	if (h[0] == '[' && (end = strchr(h, ']'))) {
		*end++ = '\0';
		h++;
		if (*end == ':')
			*end++ = '\0';
		else if (*end)
			goto bad;
		else
			end = NULL;
	} else if ((end = strchr(h, ':')) && !strchr(end + 1, ':')) {
		*end++ = '\0';
	} else {
		end = NULL;
	}
	if (end && (*port = sshc_a2port(end)) <= 0)
		goto bad;
	if (!*h || h[0] == '-')
		goto bad;
	*host = xstrdup(h);
	free(dup);
	return 0;
bad:
	free(dup);
	free(*user);
	*user = NULL;
	return gr_errf(err, GR_EINVAL, "invalid ssh destination '%s'", spec);
}

static void sopts_free(struct sopts *o)
{
	free(o->hostname); free(o->user); free(o->proxy_command); free(o->jump_host);
	free(o->jump_user); free(o->jump_extra); free(o->host_key_alias);
	free(o->ignore_unknown); free(o->ukh_where); free(o->pc_where); free(o->hn_where);
	sv_clear(&o->ids); sv_clear(&o->ids_where); sv_clear(&o->ukh);
}

/* ~ then %-tokens and ${VAR}, as ssh does for IdentityFile and
 * UserKnownHostsFile. */
static int expand_path(struct sctx *c, const char *raw, const char *where, const char *what,
		       const char *const *vals, struct strvec *out)
{
	struct strbuf sb = STRBUF_INIT, why = STRBUF_INIT;
	char *t;

	if (tilde_expand(c->home, raw, &t) < 0)
		return gr_errf(c->err, GR_ECONFIG, "%s: %s: no such user in '%s'", where, what, raw);
	if (sshc_expand(t, 1, "CLiklnpdhru", vals, &sb, &why) < 0) {
		gr_errf(c->err, GR_ECONFIG, "%s: %s '%s': %s", where, what, raw, why.buf);
		free(t);
		sb_release(&sb);
		sb_release(&why);
		return GR_ECONFIG;
	}
	free(t);
	sv_push(out, sb.buf ? sb.buf : "");
	sb_release(&sb);
	sb_release(&why);
	return 0;
}

static int finish(struct sctx *c, char *host, struct ssh_target *out)
{
	struct sopts *o = &c->o;
	struct strbuf sb = STRBUF_INIT, why = STRBUF_INIT;
	char ps[16], hash[41];
	int rc = 0;

	out->hostname = host;
	out->port = o->port > 0 ? o->port : 22;
	out->user = xstrdup(o->user ? o->user : c->local_user);
	out->identities_only = o->identities_only == 1;
	out->strict_host_key_checking = o->shk >= 0 ? o->shk : GR_SHK_ASK;
	out->connect_timeout = o->connect_timeout > 0 ? o->connect_timeout : 0;
	out->server_alive_interval = o->sai >= 0 ? o->sai : o->batch_mode == 1 ? 300 : 0;
	out->server_alive_count_max = o->sacm >= 0 ? o->sacm : 3;
	if (o->host_key_alias) {
		out->host_key_alias = xstrdup(o->host_key_alias);
		sshc_lowercase(out->host_key_alias);
	}

	snprintf(ps, sizeof(ps), "%d", out->port);
	sb_addf(&sb, "%s%s%s%s", c->thishost, host, ps, out->user);
	sshc_sha1_hex(sb.buf, sb.len, hash);
	sb_reset(&sb);
	const char *keyalias = out->host_key_alias ? out->host_key_alias : c->orig;
	const char *vals[] = { hash, c->shorthost, c->uid, keyalias, c->thishost, c->orig, ps,
			       c->home, host, out->user, c->local_user };

	if (!o->ids.n) {
		static const char *const defaults[] = { "id_rsa", "id_ecdsa", "id_ecdsa_sk",
			"id_ed25519", "id_ed25519_sk", "id_xmss", "id_dsa" };
		for (size_t i = 0; i < GR_ARRAY_SIZE(defaults); i++) {
			sv_pushf(&o->ids, "~/.ssh/%s", defaults[i]);
			sv_push(&o->ids_where, "default");
		}
	}
	for (size_t i = 0; i < o->ids.n && rc == 0; i++)
		if (strcasecmp(o->ids.v[i], "none"))
			rc = expand_path(c, o->ids.v[i], o->ids_where.v[i], "IdentityFile", vals,
					 &out->identity_files);
	if (!o->ukh.n) {
		sv_push(&o->ukh, "~/.ssh/known_hosts");
		sv_push(&o->ukh, "~/.ssh/known_hosts2");
	}
	if (strcasecmp(o->ukh.v[0], "none"))
		for (size_t i = 0; i < o->ukh.n && rc == 0; i++)
			rc = expand_path(c, o->ukh.v[i], o->ukh_where ? o->ukh_where : "default",
					 "UserKnownHostsFile", vals, &out->known_hosts_files);
	if (rc == 0 && o->proxy_command && strcasecmp(o->proxy_command, "none")) {
		const char *pvals[] = { host, c->orig, ps, out->user };
		if (sshc_expand(o->proxy_command, 0, "hnpr", pvals, &sb, &why) < 0)
			rc = gr_errf(c->err, GR_ECONFIG, "%s: ProxyCommand: %s", o->pc_where, why.buf);
		else
			out->proxy_command = sb_detach(&sb, NULL);
	}
	if (rc == 0 && o->jump_host &&
	    !(!strcmp(o->jump_host, "none") && o->jump_port == 0 && !o->jump_user)) {
		int numeric = strchr(o->jump_host, ':') ||
			      strspn(o->jump_host, "1234567890.") == strlen(o->jump_host);
		sb_reset(&sb);
		if (o->jump_extra)
			sb_addf(&sb, "%s,", o->jump_extra);
		if (o->jump_user)
			sb_addf(&sb, "%s@", o->jump_user);
		sb_addf(&sb, numeric ? "[%s]" : "%s", o->jump_host);
		if (o->jump_port > 0)
			sb_addf(&sb, ":%d", o->jump_port);
		out->proxy_jump = sb_detach(&sb, NULL);
	}
	sb_release(&sb);
	sb_release(&why);
	return rc;
}

int sshcfg_resolve(const char *spec, const char *user_config, const char *system_config,
		   struct ssh_target *out, struct gr_err *err)
{
	struct sctx c;
	struct passwd *pw = getpwuid(getuid());
	char *cli_user = NULL, *alias = NULL, *host = NULL, *addr;
	int cli_port, rc, was_addr;
	const char *home = getenv("HOME");

	memset(out, 0, sizeof(*out));
	memset(&c, 0, sizeof(c));
	if ((rc = parse_spec(spec, &cli_user, &alias, &cli_port, err)) < 0)
		return rc;
	c.err = err;
	c.warnings = &out->warnings;
	c.o.port = cli_port;
	c.o.user = cli_user;
	c.o.identities_only = c.o.shk = c.o.connect_timeout = c.o.sai = c.o.sacm = -1;
	c.o.batch_mode = c.o.canonicalize = -1;
	c.local_user = pw ? pw->pw_name : getenv("USER") ? getenv("USER") : "unknown";
	c.home = home && *home ? home : pw ? pw->pw_dir : "/";
	if (gethostname(c.thishost, sizeof(c.thishost)) < 0)
		snprintf(c.thishost, sizeof(c.thishost), "localhost");
	c.thishost[sizeof(c.thishost) - 1] = '\0';
	snprintf(c.shorthost, sizeof(c.shorthost), "%.*s", (int)strcspn(c.thishost, "."),
		 c.thishost);
	snprintf(c.uid, sizeof(c.uid), "%lu", (unsigned long)getuid());
	c.host = c.orig = alias;

	if ((rc = sshc_read_configs(&c, user_config, system_config, 0)) < 0)
		goto out;

	/* ssh.c: HostName with %h, then lowercase unless it is an address,
	 * which is put in canonical form instead. */
	if (c.o.hostname) {
		struct strbuf sb = STRBUF_INIT, why = STRBUF_INIT;
		const char *vals[] = { alias };
		if (sshc_expand(c.o.hostname, 0, "h", vals, &sb, &why) < 0) {
			rc = gr_errf(err, GR_ECONFIG, "%s: HostName: %s", c.o.hn_where, why.buf);
			sb_release(&sb);
			sb_release(&why);
			goto out;
		}
		sb_release(&why);
		host = sb_detach(&sb, NULL);
	} else {
		host = xstrdup(alias);
	}
	addr = NULL;
	was_addr = is_addr_fast(host) || (addr = numeric_addr(host, c.o.port)) != NULL;
	if (!was_addr)
		sshc_lowercase(host);
	else if (addr || (addr = numeric_addr(host, c.o.port))) {
		if (strcasecmp(addr, host)) {
			free(host);
			host = addr;
		} else {
			free(addr);
		}
	}
	if (c.o.canonicalize > 0 && !was_addr && c.o.canon_domains > 0)
		sshc_warn(&c, "CanonicalizeHostname: gpurun does not search CanonicalDomains; "
		     "using '%s' as is", host);
	if (c.want_final || c.o.canonicalize > 0) {
		free(c.o.hostname);
		c.o.hostname = xstrdup(host);
		c.host = host;
		if ((rc = sshc_read_configs(&c, user_config, system_config, CF_FINAL)) < 0)
			goto out;
	}
	out->alias = alias;
	alias = NULL;
	rc = finish(&c, host, out);
	host = NULL;
out:
	sopts_free(&c.o);
	free(alias);
	free(host);
	if (rc < 0)
		ssh_target_release(out);
	return rc;
}

void ssh_target_release(struct ssh_target *t)
{
	if (!t)
		return;
	free(t->alias); free(t->hostname); free(t->user); free(t->proxy_jump);
	free(t->proxy_command); free(t->host_key_alias);
	sv_clear(&t->identity_files); sv_clear(&t->known_hosts_files); sv_clear(&t->warnings);
	memset(t, 0, sizeof(*t));
}
