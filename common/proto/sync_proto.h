/* Sync's messages (0x20-0x3f) and the limits both sides enforce. The
 * exchange is specified in PROTOCOL.md, section "Sync". No message grows
 * with the tree past a frame: OPS go in as many frames as they need, and
 * the agent's long answers (STATE, COMMIT's OK) come as DATA frames on the
 * request's id followed by the answer frame, the payload being all of
 * their bytes in order. */
#ifndef GR_SYNC_PROTO_H
#define GR_SYNC_PROTO_H

#include "proto.h"

enum {
	/* c->a: str path, u32 flags, bytes expect_digest (0 or 32),
	 * bytes local_digest (32). Answered by STATE; unless STATE carries
	 * GR_F_END the request id stays open as the sync session. */
	SYNC_MSG_OPEN = 0x20,
	/* a->c: u32 state flags, bytes digest(32), str root, u64 free bytes,
	 * u32 nchanged, changed entries, bytes manifest (zstd; empty unless
	 * asked for), u32 nwarnings, str warning... (a long answer). */
	SYNC_MSG_STATE = 0x21,
	/* c->a, on the session id, any number: u32 n, then n ops (u8 op, str
	 * path, [str target for SYNC_OP_SYMLINK], [u32 mode, u64 mtime_ns for
	 * SYNC_OP_META]). Applied in order at once (META at COMMIT). */
	SYNC_MSG_OPS = 0x22,
	/* c->a, new id: u32 session; then DATA frames carrying one tar.zst
	 * stream (pax, regular files only); END on the last. OK: u32 files. */
	SYNC_MSG_TAR = 0x23,
	/* c->a, new id: u32 session, u8 kind, str path, bytes base_hash,
	 * bytes hash, u64 size, u32 mode, i64 mtime_ns; then DATA frames of
	 * zstd-compressed content (kind WHOLE), librsync delta (DELTA), or
	 * the content as is (RAW: the client found it incompressible). */
	SYNC_MSG_FILE = 0x24,
	/* c->a, new id: u32 session, str path, bytes hash (what the client
	 * believes is there). DATA: a librsync signature; OK: bytes hash,
	 * u64 size (of the file the signature was made from). */
	SYNC_MSG_SIG = 0x25,
	/* c->a, on the session id: bytes expect_digest. Ends the session; OK
	 * (a long answer): bytes digest, u32 nerrors, (str path, u32 kind,
	 * str message)...; u32 nwarnings, str... */
	SYNC_MSG_COMMIT = 0x26,
	/* c->a, new id, never answered: str path, u32 flags (OPEN's). Sent
	 * inside the bootstrap command of a sync that will OPEN this path:
	 * the agent locks the folder and checks its manifest against the
	 * disk while the client still scans, and the OPEN that follows uses
	 * that work. Best effort: a folder it cannot lock at once, a dry
	 * run, or an OPEN for another path or flags does it all again. */
	SYNC_MSG_PREPARE = 0x27,
};

/* OPEN flags */
enum {
	SYNC_OPEN_DRY_RUN = 1,   /* read only: create nothing on the host */
	SYNC_OPEN_WANT_MANIFEST = 2, /* send the whole manifest in STATE */
	SYNC_OPEN_OPTIMISTIC = 4, /* the client streams its changes at once, planned
				     against `expect`: refuse the session unless the
				     folder holds exactly that */
	SYNC_OPEN_PRESERVE_PERMS = 8, /* [sync] preserve_perms: files keep group and
					 other bits (else only the owner's) */
	SYNC_OPEN_TRUST = 16,    /* with OPTIMISTIC, from a watcher that knows what
				    changed here: take the manifest as the disk (no
				    refresh); an agent without it refreshes, as always */
};

/* STATE flags */
enum {
	SYNC_STATE_IN_SYNC = 1,      /* manifest digest == local digest, nothing changed */
	SYNC_STATE_HAS_MANIFEST = 2, /* the manifest is attached */
	SYNC_STATE_NEW_ROOT = 4,     /* the remote folder did not exist */
	SYNC_STATE_REJECTED = 8,     /* optimistic OPEN refused: the folder is not as
					expected; STATE ends the request */
};

/* OPS */
enum {
	SYNC_OP_DELETE = 1, /* a file, a link, or an empty folder */
	SYNC_OP_MKDIR = 2,
	SYNC_OP_SYMLINK = 3, /* str target follows */
	SYNC_OP_META = 4,    /* u32 mode, u64 mtime_ns follow: a file's mode and time */
};

/* Why the host could not write a file: COMMIT's error list, and the
 * optional u32 after the message of an ERROR on a FILE or TAR stream. */
enum {
	SYNC_ERR_OTHER = 0,
	SYNC_ERR_NOSPACE = 1,   /* ENOSPC, EDQUOT: nothing more fits */
	SYNC_ERR_DENIED = 2,    /* EACCES, EPERM, EROFS */
	SYNC_ERR_IN_THE_WAY = 3,/* a folder holding files gpurun did not send */
};

/* The pieces a long answer is cut into (DATA frames). */
#define SYNC_PIECE (1u << 20)
/* The most a client takes in one answer (a manifest of millions of files). */
#define SYNC_ANSWER_MAX (512u << 20)

/* FILE kinds */
enum {
	SYNC_FILE_WHOLE = 1,
	SYNC_FILE_DELTA = 2,
	SYNC_FILE_RAW = 3,
};

/* Where the agent keeps its state, inside the remote project folder.
 * The client never sends or deletes anything under it (it is the name
 * of gpurun's local state folder too, which the scan always skips). */
/* The smallest host version a delta is made against: the client plans
 * none against a smaller one, and an agent keeps only the entries at or
 * above it at hand for FILE's check (the rest of its manifest stays on
 * disk). */
#define SYNC_DELTA_BASE_MIN (64u << 10)
#define SYNC_STATE_DIR ".gpurun"
#define SYNC_MANIFEST_FILE ".gpurun/sync-manifest"
#define SYNC_LOCK_FILE ".gpurun/sync-lock"
#define SYNC_JOURNAL_FILE ".gpurun/sync-journal"
#define SYNC_TMP_PREFIX ".gpurun-tmp-"

#define SYNC_DIGEST_LEN 32

#endif
