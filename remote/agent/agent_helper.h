/* Work the agent's loop must not wait for (stopping a job with its grace
 * period, asking nvidia-smi, packing artifacts) runs in a forked helper;
 * the agent relays what it writes. */
#ifndef GR_AGENT_HELPER_H
#define GR_AGENT_HELPER_H

#include "agent.h"

/* Runs in the helper. data_fd: bytes written there go to the client as
 * DATA frames (when started with stream = 1). Return 0 with the OK
 * payload in reply, or a GR_E* code with err set (the request fails). */
typedef int (*agent_helper_fn)(void *arg, int data_fd, struct strbuf *reply,
			    struct gr_err *err);

/* Fork the helper for request id. arg is read in the helper only; the
 * caller keeps ownership of its copy. kill_on_cancel: a CANCEL or the
 * client's disconnect kills the helper (artifacts); otherwise it runs to
 * its end (a stop must not be left half done). */
int agent_helper_start(struct agent *a, uint32_t id, int stream, int kill_on_cancel,
		    agent_helper_fn fn, void *arg, struct gr_err *err);

/* What follows a helper's OK on the same request id, in the agent: then
 * is called with the OK's payload once it is sent (without END, so the
 * request's stream goes on), and may open a stream of its own under id.
 * then_arg (malloc'd) is freed after, or when the request ends another
 * way (an error, a CANCEL, the client gone). */
typedef void (*agent_helper_then)(struct agent *a, uint32_t id, const void *ok, size_t n,
				  void *then_arg);
int agent_helper_start_then(struct agent *a, uint32_t id, int stream, int kill_on_cancel,
			    agent_helper_fn fn, void *arg, agent_helper_then then,
			    void *then_arg, struct gr_err *err);

#endif
