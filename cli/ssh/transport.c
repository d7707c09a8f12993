/* The transport dispatcher: picks the kind that carries the bytes (a local
 * `sh`, an `ssh` subprocess, or libssh2) from [remote] transport and host.
 * It sits above the three kinds, so none of them calls back into another. */
#include <string.h>

#include "ssh_int.h"
#include "transport.h"

int transport_open(struct gr_transport **out, const struct gr_config *cfg,
		   const struct tr_cmd *script, const struct tr_opts *o, struct gr_err *err)
{
	if (cfg->remote.transport == GR_TRANSPORT_LOCAL ||
	    (cfg->remote.host && !strcmp(cfg->remote.host, "local")))
		return transport_proc_local(out, script, err);
	if (!cfg->remote.host || !*cfg->remote.host) {
		gr_errf(err, GR_ECONFIG, "no host configured ([remote] host)");
		gr_hintf(err, "set it in gpurun.ini, or pass --host HOST");
		return GR_ECONFIG;
	}
	if (cfg->remote.transport == GR_TRANSPORT_OPENSSH)
		return transport_proc_openssh(out, cfg, script, o->accept_new, err);
	return transport_libssh2(out, cfg, script, o, err);
}
