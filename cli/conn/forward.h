/* Local TCP ports forwarded to the host (`gpurun forward`, and -L on exec
 * and train, as ssh -L): each connection to a local port becomes a stream
 * to HOST:PORT as the host sees it. Over libssh2 every stream is a
 * direct-tcpip channel of the session that carries the agent, served by
 * the same non-blocking loop (conn.c's poll); with `transport = local` a
 * plain TCP relay; with `transport = openssh` ssh's own -L does it (the
 * specs go on its command line, see transport.h). Modules never print:
 * what users should hear about (a refused connection) goes to a callback. */
#ifndef GR_FORWARD_H
#define GR_FORWARD_H

#include <poll.h>
#include <stddef.h>

#include "err.h"
#include "transport.h"

struct gr_transport;

/* struct fwd_spec: in transport.h, which carries it. */

/* Parse "PORT", "PORT:HOSTPORT", "PORT:HOST:HOSTPORT" or
 * "BIND:PORT:HOST:HOSTPORT" (ssh -L's syntax). 0, or GR_EUSAGE. */
int fwd_spec_parse(const char *arg, struct fwd_spec *out, struct gr_err *err);
void fwd_spec_release(struct fwd_spec *s);
/* "localhost:6006 -> localhost:6006 on the host" into buf. */
void fwd_spec_describe(const struct fwd_spec *s, char *buf, size_t n);

struct fwd;

/* A forwarder for n specs (copied). listen: bind the local ports now (not
 * for openssh, whose ssh binds them); a port in use is GR_EUSAGE naming
 * it. Without listen, the ports are only checked to be free. The caller
 * owns *out (fwd_free). */
int fwd_new(struct fwd **out, const struct fwd_spec *specs, size_t n, int listen,
	    struct gr_err *err);
void fwd_free(struct fwd *f);
const struct fwd_spec *fwd_specs(const struct fwd *f, size_t *n);

/* Who hears about connections the host refused, and (verbose) each one. */
void fwd_set_notify(struct fwd *f, void (*fn)(void *arg, const char *msg), void *arg,
		    int verbose);

/* Exchange the callback (and its argument) with *fn / *arg, so a caller
 * can take the notices for a while and give them back. */
void fwd_swap_notify(struct fwd *f, void (**fn)(void *arg, const char *msg), void **arg);

/* Carry new connections over t (its tunnel ops; none: nothing to do here,
 * as with openssh). Connections of a previous transport are dropped. */
void fwd_attach(struct fwd *f, struct gr_transport *t);
/* The transport is going away: drop its connections (their local ends are
 * closed; the channels go with the session). */
void fwd_detach(struct fwd *f);

/* The event loop's part: append what to poll to *pfd (grown as needed;
 * *cap its size) from index *n on, and lower *timeout_ms to 0 when data
 * is waiting that no poll would report. Then, after poll, fwd_service
 * with the same array does all that can be done without blocking. */
void fwd_pollfds(struct fwd *f, struct pollfd **pfd, size_t *cap, size_t *n,
		 int *timeout_ms);
void fwd_service(struct fwd *f, const struct pollfd *pfd, size_t n);

#endif
