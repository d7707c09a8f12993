/* gpurun-agent's internals: the event loop, the request handler tables and
 * the calls handlers use to answer. Like OpenSSH's monitor, the agent only
 * answers the request types its tables list; anything else is refused.
 *
 * Threading: none. One poll() loop serves stdin (requests), stdout
 * (queued replies), file descriptors that handlers watch (child pipes),
 * and child exits. A handler must not block for long, except on local
 * disk work. */
#ifndef GR_AGENT_H
#define GR_AGENT_H

#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

struct agent;

/* A request handler: start work for request `id`. Reply now (agent_ok,
 * agent_fail) or later (after agent_stream_open / agent_watch_*). Return 0,
 * or a GR_E* code with err set to have the agent answer ERROR for you. */
struct agent_handler {
	uint16_t type;
	const char *name;
	int (*start)(struct agent *a, uint32_t id, struct gr_rd *payload,
		     struct gr_err *err);
};

/* Each module's table ends with an entry of type 0: the agent's own
 * (HELLO, PING) and EXEC here; the others in their folder's face header
 * (sync_agent.h, agent_job.h, job_pack.h). */
extern const struct agent_handler agent_core_handlers[];
extern const struct agent_handler agent_exec_handlers[];

/* Serve requests on stdin/stdout until the client hangs up, answering
 * from tables (NULL-terminated); early: requests that came in the command
 * line as hex frames, or NULL. The process's exit status. */
int agent_serve(const struct agent_handler *const *tables, char *early);

/* Queue a frame to the client (never blocks; flushed by the loop). */
void agent_send(struct agent *a, uint16_t type, uint16_t flags, uint32_t id,
		const void *payload, size_t n);
/* Read up to max bytes from fd straight into the queue, as one frame
 * (no copy on the way). Returns what read(2) returned. */
ssize_t agent_send_read(struct agent *a, uint16_t type, uint32_t id, int fd, size_t max);
/* Reply OK (ends the request) with an optional payload. */
void agent_ok(struct agent *a, uint32_t id, const void *payload, size_t n);
/* Reply ERROR (ends the request). */
void agent_fail(struct agent *a, uint32_t id, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Bytes queued to the client and not yet written: handlers producing bulk
 * output pause above a high-water mark (see agent_out_full). */
size_t agent_out_pending(struct agent *a);
int agent_out_full(struct agent *a);
/* A handler that queues a long answer in pieces (main thread): wait
 * until the queue is below the high-water mark, writing it as the client
 * takes it. 0, or -1 if the client is gone or took nothing for 120 s. */
int agent_out_drain(struct agent *a);

/* A handler busy with local work for long (hashing a large file, waiting
 * for a lock, a worker or syncfs) calls this now and then: at most every
 * few seconds it queues a KEEPALIVE frame and writes what the client
 * takes now, so the client's limit on a silent connection measures a dead
 * peer, not a slow disk. Main thread only (elsewhere it does nothing). */
void agent_keepalive(void);

/* Streams: after a handler opens one, DATA frames for `id` go to on_data
 * (with end = 1 on the frame that carries GR_F_END), and CANCEL or the
 * client's disconnect go to on_close. on_data returning non-zero with err
 * set makes the agent answer ERROR and close the stream. */
struct agent_stream_ops {
	int (*on_data)(struct agent *a, uint32_t id, void *st, const uint8_t *p,
		       size_t n, int end, struct gr_err *err);
	void (*on_close)(struct agent *a, uint32_t id, void *st); /* frees st */
	/* Other frame types addressed to this id (e.g. STDIN, SIGNAL). */
	int (*on_frame)(struct agent *a, uint32_t id, void *st,
			const struct gr_frame *f, struct gr_err *err);
};
void agent_stream_open(struct agent *a, uint32_t id,
		       const struct agent_stream_ops *ops, void *st);
/* Close the stream (calls on_close). Safe to call from its callbacks. */
void agent_stream_close(struct agent *a, uint32_t id);

/* Watch fd for POLLIN/POLLOUT; cb runs when ready (revents given).
 * Unwatch before closing the fd. */
typedef void (*agent_fd_cb)(struct agent *a, int fd, short revents, void *arg);
void agent_watch_fd(struct agent *a, int fd, short events, agent_fd_cb cb, void *arg);
void agent_unwatch_fd(struct agent *a, int fd);
/* Call cb once when child pid exits (status as from waitpid). */
typedef void (*agent_child_cb)(struct agent *a, pid_t pid, int status, void *arg);
void agent_watch_child(struct agent *a, pid_t pid, agent_child_cb cb, void *arg);
/* Call cb every period_ms while registered (timers for polling work). */
typedef void (*agent_timer_cb)(struct agent *a, void *arg);
void agent_add_timer(struct agent *a, int period_ms, agent_timer_cb cb, void *arg);
void agent_del_timer(struct agent *a, agent_timer_cb cb, void *arg);

/* Resolve a client-supplied path: "~" and "~/x" are $HOME, relative paths
 * are relative to $HOME. Returns a new string. */
char *agent_path(const char *p);

/* The agent's $HOME (never NULL). */
const char *agent_home(void);
/* Where the agent keeps its own files on the host: $XDG_CACHE_HOME/gpurun
 * when XDG_CACHE_HOME is absolute, else $HOME/.cache/gpurun. */
const char *agent_cache_dir(void);
/* [remote] jobs_dir as this connection's HELLO said ("" = not set: the
 * default, agent_cache_dir()/jobs). Never NULL. */
const char *agent_jobs_dir_conf(void);
void agent_jobs_dir_set(const char *dir);

/* The rest of the folder's face (they include this header first). */
#include "agent_helper.h"
#include "safe_dir.h"
#include "run.h"

#endif
