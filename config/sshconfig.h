/* ssh_config resolution the way OpenSSH does it (first value wins, Host
 * patterns with * ? and !, Include, tokens), so gpurun reaches a host
 * exactly as the user's own `ssh` would. `ssh -G` is the oracle in tests. */
#ifndef GR_SSHCONFIG_H
#define GR_SSHCONFIG_H

#include "err.h"
#include "util.h"

enum gr_shk {
	GR_SHK_ASK = 0,      /* OpenSSH's default: gpurun refuses unknown hosts */
	GR_SHK_YES,
	GR_SHK_NO,
	GR_SHK_ACCEPT_NEW,
};

struct ssh_target {
	char *alias;           /* what was asked for (after user@ and :port split) */
	char *hostname;        /* HostName, %h expanded; else the alias */
	char *user;            /* User; else the local user name */
	int port;              /* Port; else 22 */
	struct strvec identity_files; /* IdentityFile, ~, ${VAR} and %-tokens expanded, in order; "none" dropped */
	int identities_only;
	char *proxy_jump;      /* ProxyJump chain as `ssh -G` prints it ("none" -> NULL) */
	char *proxy_command;   /* ProxyCommand, %h %n %p %r %% expanded ("none" -> NULL) */
	struct strvec known_hosts_files; /* UserKnownHostsFile, expanded */
	int strict_host_key_checking;    /* enum gr_shk */
	int connect_timeout;   /* seconds; 0 = none */
	int server_alive_interval;
	int server_alive_count_max; /* default 3 */
	char *host_key_alias;  /* HostKeyAlias, lowercased; NULL if unset (look the
	                        * host key up under this name when set) */
	struct strvec warnings; /* "file:line: ..." for things gpurun ignored that
	                        * ssh would act on (unknown keywords,
	                        * CanonicalDomains lookups); show them with -v */
};

/* Resolve spec ("alias", "user@host", "host:port", "user@host:port",
 * "[v6addr]:port", "ssh://user@host:port") as OpenSSH 9.2's `ssh -G` does.
 * user_config: NULL means ~/.ssh/config ($HOME, not passwd), checked for
 * safe ownership and modes as ssh does; another path is read like
 * `ssh -F path` (then pass system_config = "" to match ssh exactly).
 * system_config: NULL means /etc/ssh/ssh_config; "" skips a file.
 * A user@ or :port in spec wins over the files, as on ssh's command line
 * (":port" is gpurun's shorthand for ssh's -p; Host patterns match the
 * host part alone).
 * Supported: Host (* ? !), Match (all, canonical, final, exec, host,
 * originalhost, user, localuser, with !), Include (globs, nested, relative
 * to ~/.ssh or /etc/ssh), and the keywords in struct ssh_target. Other
 * OpenSSH keywords are accepted and ignored; unknown ones add a warning.
 * In paths, ~ and %d are $HOME. proxy_jump is the chain as `ssh -G` prints
 * it ("u@[10.0.0.1]:2222,jump2"); each hop is itself a spec for this
 * function. An empty known_hosts_files means UserKnownHostsFile none.
 * Missing files are not errors; unreadable or malformed ones are
 * (GR_ECONFIG, "file:line: ..."); a bad spec is GR_EINVAL.
 * On success the caller releases *out with ssh_target_release(). */
int sshcfg_resolve(const char *spec, const char *user_config,
		   const char *system_config, struct ssh_target *out,
		   struct gr_err *err);
void ssh_target_release(struct ssh_target *t);

#endif
