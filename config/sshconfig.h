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
	struct strvec identity_files; /* IdentityFile, ~ and %d %u %h %r expanded, in order */
	int identities_only;
	char *proxy_jump;      /* ProxyJump list as written ("none" -> NULL) */
	char *proxy_command;   /* ProxyCommand with %h %p %r expanded ("none" -> NULL) */
	struct strvec known_hosts_files; /* UserKnownHostsFile, expanded */
	int strict_host_key_checking;    /* enum gr_shk */
	int connect_timeout;   /* seconds; 0 = none */
	int server_alive_interval;
	int server_alive_count_max; /* default 3 */
};

/* Resolve spec ("alias", "user@host", "host:port", "user@host:port").
 * user_config: NULL means ~/.ssh/config ($HOME, not passwd);
 * system_config: NULL means /etc/ssh/ssh_config; "" skips a file.
 * A user@ or :port in spec wins over the files, as on ssh's command line.
 * Missing files are not errors; unreadable or malformed ones are (file:line). */
int sshcfg_resolve(const char *spec, const char *user_config,
		   const char *system_config, struct ssh_target *out,
		   struct gr_err *err);
void ssh_target_release(struct ssh_target *t);

#endif
