/* The libssh2 transport: not written yet. */
#include "transport.h"

int transport_libssh2(struct gr_transport **out, const struct gr_config *cfg,
		      const char *script, int accept_new, int verbose,
		      struct gr_err *err)
{
	(void)out; (void)cfg; (void)script; (void)accept_new; (void)verbose;
	gr_errf(err, GR_EUNSUPP, "the libssh2 transport is not written yet");
	gr_hintf(err, "set 'transport = openssh' or 'local' in [remote]");
	return GR_EUNSUPP;
}
