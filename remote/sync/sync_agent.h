/* The agent's sync session, shared by its parts, which layer one way:
 * agent_sync.c (the requests) calls sync_session.c (OPEN's work),
 * sync_commit.c (OPS and COMMIT), sync_untar.c (the tar.zst stream,
 * unpacked on a worker thread) and sync_patch.c (whole files and librsync
 * deltas, signatures); they call sync_man.c (a manifest left on disk, read
 * and written as a stream) and sync_pend.c (the files received, put in
 * place at COMMIT; a walked session's in sorted runs on disk), which with
 * them call sync_stage.c (staging, temp files, errors, paths, the
 * manifest's file) and sync_fs.c, which call none of them.
 *
 * Every file arrives into a temp file beside its final name; COMMIT makes
 * them durable (one syncfs), renames them into place and writes the
 * manifest last. A session that ends without COMMIT removes its temp
 * files, and a journal of the folders holding temp files lets the next
 * session clean up after an agent that was killed outright.
 *
 * A folder the host does not have yet is staged: OPS makes it under a
 * temp name, everything below it is made under its final name, and
 * COMMIT renames the folder into place once. A first sync of 100,000
 * files paid ~35 us of journaling for each file's rename (3.5 s); with
 * its folders staged it pays one rename per new top folder. Nothing of a
 * staged folder is seen under its name before COMMIT, so a failed sync
 * still leaves every file old. */
#ifndef GR_SYNC_AGENT_H
#define GR_SYNC_AGENT_H

/* A file name inside the state folder, from its SYNC_*_FILE path. */
#define STATE_NAME(f) ((f) + sizeof(SYNC_STATE_DIR))

#include <pthread.h>
#include <stdint.h>

#include "agent.h"
#include "sync_fs.h"
#include "sync_manifest.h"
#include "sync_proto.h"

/* The sync requests (OPEN, TAR, FILE, SIG, COMMIT, ...). */
extern const struct agent_handler agent_sync_handlers[];

struct untar;

/* A file written to a temp file, put in place at COMMIT. 64 bytes (and
 * its names): a first sync has one for every file. */
struct sync_pending {
	char *path;            /* final relative path, then (after its NUL) the
				  name of the temp file beside it: sync_pending_tmp */
	uint64_t size;         /* what it holds */
	int64_t mtime_ns;
	uint8_t hash[SM_HASH_LEN];
	uint32_t mode;
	uint32_t seq;          /* the order it came in (the later of two wins) */
};

static inline const char *sync_pending_tmp(const struct sync_pending *p)
{
	return p->path + strlen(p->path) + 1;
}

/* Made under its final name, in a staged folder: in place with it. */
static inline int sync_pending_in_place(const struct sync_pending *p)
{
	const char *base = strrchr(p->path, '/');

	return !strcmp(sync_pending_tmp(p), base ? base + 1 : p->path);
}

struct sync_stage {       /* a new folder, made under a temp name */
	char *path;           /* its final relative path */
	char tmp[64];         /* its name on the disk until COMMIT */
	int state;            /* 0 staged, 1 renamed into place, -1 failed */
};

struct sync_meta {        /* a mode/time-only change, applied at COMMIT */
	char *path;
	uint32_t mode;
	int64_t mtime_ns;
};

/* A manifest file's identity: every write makes a new one (a new file
 * renamed over the old), so the same identity is the same contents. */
struct sync_man_id {
	uint64_t dev, ino, size;
	int64_t mtime_ns, ctime_ns;
};

struct sync_session;

/* What a session changes in a manifest that stays in its file (on_disk):
 * applied as the file is read, never to a list of the whole. */
struct man_overlay {
	struct sm_list put;      /* sorted, one per path: replace or join */
	struct strvec del;       /* sorted: paths that go */
	/* Files put in place, by path then seq (the last of a path wins,
	 * also over put's); NULL: none. */
	struct pend_merge *pend;
	struct sync_meta **metas; /* sorted by path (stable): mode/time changes */
	size_t nmetas;
	/* Apply *m to the old entry e (a file, or not: it says), or report it. */
	void (*meta)(struct sync_session *s, const struct sync_meta *m, struct sm_entry *e);
};

struct sync_session {
	uint32_t id;
	int rootfd, statefd, lockfd, journalfd;
	char *root;
	/* The manifest. A walked session (OPEN checks every entry against
	 * the disk) leaves it in its file, on_disk: man stays empty, manfd
	 * reads it, and the session holds only what it changes (ov), and the
	 * entries a delta may be made against (bases). Its memory then does
	 * not grow with the tree (issue 36: 38 MiB at 300k entries, in a
	 * list). A watcher's session (trusted, or one that finds the list its
	 * connection kept) has it whole in man, for speed. */
	struct sm_list man;
	int on_disk, manfd;      /* manfd: -1 when there is none (or damaged) */
	struct man_overlay ov;   /* on_disk: what OPEN's check changed, until written */
	struct sm_list bases;    /* on_disk: files of SYNC_DELTA_BASE_MIN bytes or more */
	struct sm_list added;    /* folders and links made (sorted at commit) */
	struct strvec deleted;   /* paths removed */
	struct sfs_dir dir;      /* the main thread's folder cache */
	struct untar *tar;       /* the tar stream being unpacked, if any */
	struct sync_meta *metas; /* OPS' SYNC_OP_META, for COMMIT */
	size_t nmetas;
	int host_dirty;          /* manifest entries' host fields were refreshed */
	struct sync_man_id man_id; /* the manifest file as last written (man_written) */
	int man_written;
	struct sync_stage *stages; /* sorted by path (stage_sorted) */
	size_t nstages;
	int stage_sorted;
	int stage_frozen;        /* a file stream began: no more folders staged */

	pthread_mutex_t mu;      /* guards what follows (the untar thread adds) */
	struct sync_pending *pend;
	size_t npend, apend;
	uint32_t pend_seq;       /* the next record's seq */
	/* A walked session's pending records past SYNC_PEND_RUN, in sorted
	 * runs in an unnamed file (sync_pend.c): run k is the bytes from
	 * runs[k] to runs[k + 1]. spill_off: a spill failed, no more. */
	int spillfd, spill_off;
	uint64_t *runs, spill_end;
	size_t nruns;
	struct strvec err_paths, err_msgs, warnings;
	uint32_t *err_kinds;     /* SYNC_ERR_*, one per err_paths entry */
	struct strvec journaled;
	/* The small files' writeback, started on a thread as they are added
	 * (sync_wb_kick): pend[] before wb_next are started. */
	pthread_t wb_thread;
	pthread_cond_t wb_cv;
	int wb_on, wb_stop;
	size_t wb_next;

	/* Write-back of a long tar stream's small files, started as they come
	 * (sync_small_done); COMMIT and the end of the session join it. */
	pthread_t flusher;
	int flushing, flush_done; /* flush_done: atomic, set by the flusher */
	uint32_t small_files;     /* small files the tar has finished */
};

/* sync_stage.c: below the requests and their work. */

/* Set up a folder cache for the session's paths (staged folders
 * included). */
void sync_dir_init(struct sync_session *s, struct sfs_dir *d);
/* Stage the new folder path, made as tmp (OPS; -1 once frozen). */
int sync_stage_add(struct sync_session *s, const char *path, const char *tmp);
/* Remove the staged folders not in place, with all they hold, and
 * forget them all (COMMIT, and a session that ends without it). */
void sync_stages_drop(struct sync_session *s);
/* No more folders are staged: a file stream began. */
void sync_stage_freeze(struct sync_session *s);
/* The staged folder at or above relpath's first len bytes, or NULL. */
const struct sync_stage *sync_stage_above(struct sync_session *s, const char *relpath,
					  size_t len);

/* A path the client may name: sm_path_ok, and not inside the agent's
 * state folder nor shaped like one of our temp files. */
int sync_path_ok(const char *path);

/* Create a temp file beside relpath (its folder resolved through d);
 * returns the fd or -1 with errno, and the temp name. Records the folder
 * in the journal first. Below a staged folder the file is made under its
 * final name, which tmp then holds. Thread-safe. */
#define SYNC_TMP_MAX 256
int sync_tmp_create(struct sync_session *s, struct sfs_dir *d, const char *relpath,
		    char tmp[SYNC_TMP_MAX]);
/* sync_pend.c: the pending list. */
/* The file at relpath is complete in tmp. Thread-safe. */
#ifndef SYNC_PEND_RUN /* (a test build spills every few files) */
#define SYNC_PEND_RUN 8192
#endif
void sync_add_pending(struct sync_session *s, const char *relpath, const char *tmp,
		      const struct sm_entry *desc);
/* By path, the ones not put in place (path NULL) last, then seq. */
int sync_pend_cmp(const void *a, const void *b);
/* each(arg, p) for every pending record: the spilled runs' (in the order
 * they were spilled, each sorted), then memory's (in order); each returns
 * nonzero when p was not put in place (then it is marked so). 0, or -1
 * when the runs could not be read or marked. */
int sync_pend_each(struct sync_session *s, int (*each)(void *arg, struct sync_pending *p),
		   void *arg);
/* The records put in place, by path then seq, from the runs and memory. */
struct pend_merge;
struct pend_merge *sync_pend_merge_start(struct sync_session *s);
const struct sync_pending *sync_pend_peek(struct pend_merge *m);
void sync_pend_pop(struct pend_merge *m);
int sync_pend_merge_failed(const struct pend_merge *m); /* a run could not be read */
int sync_pend_merge_end(struct pend_merge *m); /* -1: failed */
/* Forget them all (unlink_tmps: remove their temp files first). */
void sync_pend_drop(struct sync_session *s, int unlink_tmps);
/* A file that could not be written (reported by COMMIT). Thread-safe. */
void sync_add_error(struct sync_session *s, const char *relpath, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The same, for a failure with errno errnum (which says its SYNC_ERR_ kind). */
void sync_add_errno(struct sync_session *s, const char *relpath, int errnum,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* SYNC_ERR_* for an errno. */
int sync_err_kind(int errnum);
/* ERROR on a sync stream, with its SYNC_ERR_ kind after the message. */
void sync_fail(struct agent *a, uint32_t id, int code, int kind, const char *msg);
/* An answer that may outgrow a frame: DATA frames of SYNC_PIECE bytes,
 * then the answer (type) with the rest (PROTOCOL.md: long answers). */
void sync_send_long(struct agent *a, uint32_t id, uint16_t type, uint16_t flags,
		    const struct strbuf *payload);
/* The same for head, n bytes of fd (from its start), then tail, never
 * whole in memory: fd's pieces are queued as the client takes them
 * (agent_out_drain). 0, or -1 (fd unreadable, the client gone): the
 * answer is then cut short, and the caller says why with an ERROR. */
int sync_send_long_fd(struct agent *a, uint32_t id, uint16_t type, uint16_t flags,
		      const struct strbuf *head, int fd, uint64_t n, const struct strbuf *tail);
/* Finish a written temp file of size bytes: mode, mtime, close; a file of
 * SYNC_HINT_MIN bytes or more has its writeback started here (a small
 * one's is left to COMMIT: started one by one, 100,000 small files took
 * 10 s to write here against 3.5 s, since each went to the disk alone). */
#define SYNC_HINT_MIN (64u << 10)
int sync_tmp_finish(int fd, uint32_t mode, int64_t mtime_ns, uint64_t size);
/* Past this many small files COMMIT makes them durable with syncfs
 * (sync_commit.c says why), and a tar stream starts that write-back every
 * SYNC_FLUSH_EVERY more small files while it goes on. */
#define SYNC_OWN_SMALL_MAX 4096
#define SYNC_FLUSH_EVERY 4096
/* A pending file was added (s->mu held): wake the thread that starts
 * small files' writeback, or start it. sync_wb_stop ends it (COMMIT, and
 * the end of the session), leaving the rest to COMMIT. */
void sync_wb_kick(struct sync_session *s);
void sync_wb_stop(struct sync_session *s);
/* A small file is done: maybe start a syncfs on a thread (the untar
 * worker's only). sync_flush_join waits for it. */
void sync_small_done(struct sync_session *s);
void sync_flush_join(struct sync_session *s);
/* sync_file_range(flags) of one pending temp file through d: -1 if that
 * failed (one that cannot be opened is skipped: its rename reports it). */
int sync_pending_range(struct sfs_dir *d, const struct sync_pending *p, unsigned flags);
/* Write the manifest (with host fields) into the state folder, atomically;
 * its identity then in s->man_id (s->man_written). */
int sync_write_manifest(struct sync_session *s, const struct sm_list *m, struct gr_err *err);
/* Its two ends, for a manifest written as a stream: sync_man_tmp makes
 * the temp file in the state folder (returns its fd; tmp gets its name);
 * sync_man_place, if the writing went well (ok), renames it into place
 * with both fsyncs and sets s->man_id (returns 0), else removes tmp and
 * returns the error. The caller closes fd. */
int sync_man_tmp(struct sync_session *s, char tmp[64], struct gr_err *err);
int sync_man_place(struct sync_session *s, int fd, const char *tmp, int ok, struct gr_err *err);
/* The manifest entry for path (a file a delta may be made against), or NULL. */
const struct sm_entry *sync_man_base(const struct sync_session *s, const char *path);
void sync_man_id_of(const struct stat *st, struct sync_man_id *id);
void sync_host_fields(struct sm_entry *e, const struct stat *st);

/* sync_session.c: OPEN's work (lock, clean up, load and refresh the
 * manifest, answer STATE). *out stays NULL when the answer ended the
 * request (already in sync, or a dry run). */
/* SYNC_PREPARE: the start of an OPEN of path (the lock, if free at once;
 * the manifest checked against the disk), kept for that OPEN; never an
 * error (the OPEN does it again). */
void sync_session_prepare(const char *path, uint32_t flags);
int sync_session_open(struct agent *a, uint32_t id, const char *path, uint32_t flags,
		      const uint8_t *expect, const uint8_t *local,
		      struct sync_session **out, struct gr_err *err);
/* The session OPEN handed out (only one per connection), or NULL; the one
 * `id` refers to, or NULL. It is forgotten when it is freed. */
struct sync_session *sync_session_current(void);
struct sync_session *sync_session_get(uint32_t id);
/* Remove what was not committed, release the lock, free. */
void sync_session_free(struct sync_session *s);
/* After COMMIT wrote s->man (s->man_written): keep it, moved out of s,
 * with its digest, for this connection's next session (a watcher keeps
 * its connection): that one takes it instead of reading and digesting
 * the file again if the file is still the one written (its identity,
 * checked under the lock: another client's COMMIT makes a new one). */
void sync_manifest_keep(struct sync_session *s, const uint8_t digest[SM_HASH_LEN]);

/* sync_man.c: a manifest on disk (on_disk), read as a stream. */
/* each(arg, entry) for every entry of the file with ov applied, in order
 * (ov NULL: as it is). 0, or an error (a damaged file: the caller has
 * been told of some entries). */
int sync_man_each(struct sync_session *s, const struct man_overlay *ov,
		  void (*each)(void *arg, const struct sm_entry *e), void *arg,
		  struct gr_err *err);
/* Write the file with ov applied as the new manifest (as
 * sync_write_manifest), its digest into digest; manfd then reads the new
 * one. leaves (if not NULL): the hex hashes of its files that keep block
 * hashes, for sync_leaves_gc_want. */
int sync_man_write(struct sync_session *s, const struct man_overlay *ov,
		   uint8_t digest[SM_HASH_LEN], struct strvec *leaves, struct gr_err *err);
/* The file with ov applied, as sm_encode_z would make it of the list:
 * appended to out, or (fd >= 0) written to fd in pieces, out a buffer.
 * *len: its bytes. */
int sync_man_encode_z(struct sync_session *s, const struct man_overlay *ov, int fd,
		      struct strbuf *out, uint64_t *len, struct gr_err *err);
void sync_overlay_clear(struct man_overlay *ov);

/* sync_commit.c */
int sync_apply_ops(struct sync_session *s, struct gr_rd *rd, struct gr_err *err);
/* COMMIT: durable, renamed, manifest written; answers OK itself. */
int sync_commit(struct agent *a, struct sync_session *s, struct gr_rd *rd,
		struct gr_err *err);

/* sync_untar.c: one tar.zst stream unpacked on a worker thread. */
struct untar *untar_start(struct sync_session *s);
/* Queue bytes (blocks while the worker is far behind); end = last bytes. */
void untar_feed(struct untar *u, const void *p, size_t n, int end);
/* Wait for the worker; 0 and the file count, or an error for the stream
 * (*kind: its SYNC_ERR_ kind). */
int untar_finish(struct untar *u, uint32_t *files, int *kind, struct gr_err *err);
/* Did the worker stop before the end (no space left, a bad stream)? */
int untar_stopped(struct untar *u);
/* Stop (if running) and free. */
void untar_free(struct untar *u);

/* sync_patch.c */
int sync_h_file(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err);
int sync_h_sig(struct agent *a, uint32_t id, struct gr_rd *rd, struct gr_err *err);

#endif
