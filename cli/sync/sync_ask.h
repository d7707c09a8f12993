/* A running `gpurun sync --watch` answers the project's other syncs
 * (sync_ask.c): it listens on .gpurun/watch.sock, and a `gpurun sync`
 * (or train's, exec's, the hook's) asks it to flush instead of walking
 * the tree again. Only the same user is answered, on a socket only that
 * user can reach; anything amiss and the asker walks, as without a
 * watcher. cli/sync's own. */
#ifndef GR_SYNC_ASK_H
#define GR_SYNC_ASK_H

#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "err.h"
#include "sync.h"
#include "util.h"

#define SYNC_ASK_SOCK "watch.sock"   /* in .gpurun/ */
#define SYNC_ASK_LINE_MAX 2048       /* one line of the exchange, at most */
#define SYNC_ASK_SAYS_MAX 64         /* notices relayed with one answer, at most */

/* What both sides hash to be sure the watcher syncs as the asker would:
 * the project root, the host(s), the remote path, the transport and its
 * files, every [sync] key and [train] persist (the scan's rules). A hex
 * string; the caller frees it. */
char *sync_ask_fingerprint(const struct gr_config *cfg);

/* ---- the watcher's side ---- */

struct sync_ask_srv;

/* Listen on ROOT/.gpurun/watch.sock (socket mode 0600). *out NULL, and
 * why in *why (the caller frees it), where there is none: the path is
 * too long for a unix socket, another watcher of this project answers
 * there, or the socket cannot be made. A stale socket (nobody answers)
 * is replaced. Never fails otherwise. */
void sync_ask_listen(const char *root, struct sync_ask_srv **out, char **why);
/* Removes the socket if it is still the one made here. NULL is fine. */
void sync_ask_srv_free(struct sync_ask_srv *s);
int sync_ask_srv_fd(const struct sync_ask_srv *s);

/* One request taken from the socket. */
struct sync_ask_req {
	int fd;           /* the asker's connection */
	pid_t pid;        /* the asker (its credentials) */
	int yes;          /* the asker's --yes */
	char fp[80];      /* its sync_ask_fingerprint */
};

/* Accept one asker and read its request, waiting at most wait_ms for
 * it. 1 with *req filled (answer it with sync_ask_reply_*), 0 when
 * nothing usable came (another uid, a malformed or slow request: closed
 * without an answer). */
int sync_ask_accept(struct sync_ask_srv *s, int wait_ms, struct sync_ask_req *req);
/* A notice for the asker to show (one line; control bytes dropped). */
void sync_ask_reply_say(struct sync_ask_req *req, const char *msg);
/* The end of the answer: the sync's outcome, or "no" and why (the asker
 * then walks). Both close req->fd. */
void sync_ask_reply_ok(struct sync_ask_req *req, const struct sync_stats *st);
void sync_ask_reply_no(struct sync_ask_req *req, const char *why);

/* Whether pid holds the project's sync lock now (.gpurun/sync.lock is
 * locked and names pid): a flush for it then runs without taking it. */
int sync_ask_lock_held_by(const char *root, pid_t pid);

/* ---- the asker's side ---- */

/* Ask the watcher of cfg's project, if one runs, to flush: 1 when it
 * answered with the sync's outcome (*st; each notice passed to say),
 * *pid the watcher's; 0 when the caller must walk, why in *why (the
 * caller frees it). The caller holds the project's sync lock. Every wait
 * is bounded by wait_ms (the socket, then the watcher's sync). */
int sync_ask_flush(const struct gr_config *cfg, int yes, int wait_ms,
		   void (*say)(void *arg, const char *msg), void *arg,
		   struct sync_stats *st, long *pid, char **why);

#endif
