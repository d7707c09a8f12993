/* The transport dispatcher: picks the kind that carries the bytes (a local
 * `sh`, an `ssh` subprocess, or libssh2) from [remote] transport and host.
 * It sits above the three kinds, so none of them calls back into another. */
#include <string.h>

#include "ssh_int.h"
#include "transport.h"

/* The command's argument, asked of the caller once: a holder that could
 * not serve leaves it for the direct connection. */
struct late_once {
	void (*late)(void *arg, struct strbuf *out);
	void *arg;
	struct strbuf val;
	int done;
};

static void late_once(void *arg, struct strbuf *out)
{
	struct late_once *lo = arg;

	if (!lo->done && lo->late)
		lo->late(lo->arg, &lo->val);
	lo->done = 1;
	sb_add(out, lo->val.buf ? lo->val.buf : "", lo->val.len);
}

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
	/* A held connection: not for forwarded ports (the holder carries
	 * exec channels only) nor for doctor, which watches the steps. */
	if (cfg->remote.persist && !script->nfwd && !ssh_observed()) {
		struct late_once lo = { script->late, script->late_arg, STRBUF_INIT, 0 };
		struct tr_cmd once = *script;
		int rc;

		once.late = late_once;
		once.late_arg = &lo;
		if ((rc = transport_mux(out, cfg, &once, o, err)) == 1)
			rc = transport_libssh2(out, cfg, &once, o, err);
		sb_release(&lo.val);
		return rc;
	}
	return transport_libssh2(out, cfg, script, o, err);
}
