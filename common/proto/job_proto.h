/* Message numbers and shared encodings of the job (0x40-0x5f) and
 * artifact (0x60-0x6f) requests; spec in PROTOCOL.md, "Jobs". Both sides
 * compile this in. Every request names the project by its [remote] path,
 * as the client wrote it (the agent resolves ~ and relative paths). */
#ifndef GR_JOB_PROTO_H
#define GR_JOB_PROTO_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "job_rec.h"
#include "proto.h"

enum gr_job_msg {
	/* c->a: str project, u32 n, n x (str key, str value): the job's spec
	 *       (JOB_SPEC_KEYS below). a->c OK: str id, str job_dir,
	 *       str warning ("" = none), u32 n, n x job record: the project's
	 *       other jobs that are not over (so train can say so).
	 *       Optionally, after the spec, u32 flags (JOB_START_FOLLOW). */
	GR_MSG_JOB_START = 0x40,
	/* c->a: str project, str id ("" = all), u32 limit (0 = no limit).
	 * a->c OK: u32 n, n x job record (newest first), u64 disk_total
	 * (bytes under the project's jobs folder: every job and the shared
	 * store, each file counted once) */
	GR_MSG_JOB_LIST = 0x41,
	/* c->a: str project, str id ("" = latest, else id or unique prefix).
	 * a->c OK: one job record; ERROR GR_ENOTFOUND if none */
	GR_MSG_JOB_STATUS = 0x42,
	/* c->a: str project, str id, u64 offset, u32 tail_lines, u8 follow.
	 * a->c: LOG_INFO once, LOG_DATA frames, then LOG_END (END flag). */
	GR_MSG_JOB_LOG = 0x43,
	GR_MSG_JOB_LOG_INFO = 0x44, /* a->c: str id, u64 start_offset */
	GR_MSG_JOB_LOG_DATA = 0x45, /* a->c: u64 offset, then the log bytes */
	GR_MSG_JOB_LOG_END = 0x46,  /* a->c: u64 end_offset, job record; ends it */
	/* c->a: str project, str id, u32 grace_s. a->c OK: job record,
	 * u32 nterm, u8 killed, u32 nsurv, nsurv x (u32 pid, str comm),
	 * u32 ngpu, ngpu x (u32 pid, str gpu) */
	GR_MSG_JOB_STOP = 0x47,
	/* c->a: str project. a->c OK: gpu report (see job_proto.c users) */
	GR_MSG_JOB_GPUS = 0x48,
	/* c->a: str project, u32 n, n x str id (each a full id or a unique
	 * prefix). a->c OK: u32 n, n x (str id as asked, u8 removed, str why
	 * not, u64 bytes freed), u64 bytes freed in all (the shared store
	 * included). A job that has not ended is never removed. */
	GR_MSG_JOB_RM = 0x49,
	/* c->a: str project, u32 keep (0: no count limit), u64 older_than_s
	 * (0: no age limit), u8 dry_run. Removes every job that has ended,
	 * is not among the `keep` newest, and was created more than
	 * older_than_s ago. a->c OK: u32 n, n x (str id, u64 bytes),
	 * u64 bytes freed in all (the shared store included), u32 kept. */
	GR_MSG_JOB_PRUNE = 0x4a,
	/* c->a: str project, str shell (JOB_SPEC "shell"). a->c OK: u32 n,
	 * n x (str key, str value): what a job's command would find on its
	 * PATH through that shell: python3, python, nvcc, nvidia-smi (paths
	 * or ""), python_version, path (its PATH), shell (what ran) */
	GR_MSG_JOB_ENV = 0x4b,
	/* c->a: str project, str runtime (auto, podman, docker), str image.
	 * a->c OK: u32 n, n x (str key, str value): what a job's container
	 * would get on this host (job_container.h, job_ctr_check) */
	GR_MSG_CONTAINER_CHECK = 0x4c,
	/* rerun and diff: a job's snapshot (PROTOCOL.md, "Snapshots").
	 * c->a: str project, str job_a, str job_b (each as JOB_STATUS
	 * resolves it). a->c: DATA frames: for each job in turn, str id,
	 * u32 nconf, nconf x str line (its spec as "key = value", env as
	 * "env NAME": never a value), u32 n, n x (str path, u8 type ('f',
	 * 'l', 'd'), u32 mode, u64 size, str hash); then OK (empty). */
	GR_MSG_JOB_SNAP_LIST = 0x4d,
	/* c->a: str project, str id (full), u32 n, n x str path: paths of
	 * its snapshot. a->c OK: u32 n, n x (u8 got, bytes content): a
	 * regular file's bytes, a link's target; got 0: not sent (gone,
	 * not in the snapshot, over JOB_SNAP_FILE_MAX, or past
	 * JOB_SNAP_READ_MAX in all). */
	GR_MSG_JOB_SNAP_READ = 0x4e,
	/* artifacts: c->a: str project, str id, u32 npat, str pattern...,
	 * u32 nhave, nhave x (str path, u64 size, i64 mtime_s, u32 mtime_ns).
	 * Patterns are relative to the job's working directory.
	 * a->c: DATA frames (a tar.zst stream), then OK: u32 nmatched,
	 * u32 nsent, u64 bytes_sent (file contents), u32 nwritten, u32 n,
	 * n x (str path, u64 size): when nothing matched, what the job wrote
	 * (nwritten files in all, the first n of them by path). */
	GR_MSG_ART_PULL = 0x60,
	/* c->a: str project, str id, str token, u32 index, u64 offset,
	 * bytes chunk: a signature staged for a pull by delta. a->c: OK. */
	GR_MSG_ART_SIG = 0x61,
};
/* ART_PULL's flags: plan only (answer which files could go as deltas). */
#define GR_ART_PLAN_ONLY 1u

/* Pull by delta (PROTOCOL.md, ART_PULL: deltas): files smaller than this
 * always travel whole; the largest signature the agent stages (a 20 GiB
 * file's is ~5.3 MB); the signatures one pull may use. */
/* JOB_START's flags. FOLLOW: the OK (without END) is followed, under the
 * same id, by the new job's log as JOB_LOG from byte 0 with follow sends
 * it (LOG_INFO, LOG_DATA..., LOG_END), so train's first line costs no
 * round trip of its own. */
#define JOB_START_FOLLOW 1u

#define JOB_DELTA_MIN (1u << 20)
#define JOB_DELTA_SIG_MAX (32u << 20)
#define JOB_DELTA_SIGS_MAX 1024u

/* ART_PULL's DATA stream opens with an announcement, then the tar.zst:
 * "GRA1", u32 files, u64 bytes (the sum of the entries' sizes). The
 * client refuses a pull that would not fit, and any archive that sends
 * more than it announced. */
#define GR_ART_MAGIC "GRA1"
#define GR_ART_ANNOUNCE_LEN 16
/* The pax attribute (a LIBARCHIVE.xattr) on an ART_PULL entry that
 * carries a file's bytes from an offset on (a resumed pull): its value
 * is that offset, decimal. */
#define GR_ART_RESUME_XATTR "gpurun.resume"
/* The pax attribute on an entry whose data is a zstd-compressed librsync
 * delta against the copy the client sent the signature of: "SIZE HASH",
 * the file's size (decimal) and content hash (64 hex digits). */
#define GR_ART_DELTA_XATTR "gpurun.delta"

/* diff: the largest file whose text is compared, and what one
 * JOB_SNAP_READ answer holds at most (under GR_FRAME_MAX). A snapshot's
 * file above JOB_SNAP_HASH_MAX is not hashed: its "hash" is its
 * identity on the host (inode, size, mtime), equal only for one file. */
#define JOB_SNAP_FILE_MAX (1u << 20)
#define JOB_SNAP_READ_MAX (3u << 20)
#define JOB_SNAP_HASH_MAX (256ull << 20)

/* JOB_START's spec keys: X(name, LIST or ONE). A LIST key may repeat.
 * The agent refuses keys it does not know and a ONE key given twice; it
 * keeps the spec in the job's .gpurun/spec (job_store.h). */
#define JOB_SPEC_KEYS(X)                                                    \
	X(command, ONE)       /* [train] command (required) */             \
	X(gpus, ONE)          /* all, N, or 0,2 */                          \
	X(env, LIST)          /* K=V for the job's environment */           \
	X(shell, ONE)         /* sh (default) or login */                    \
	X(setup, ONE)         /* [setup] command, run in the project folder */ \
	X(setup_input, LIST)  /* files whose content reruns setup */         \
	X(setup_force, ONE)   /* "1": run setup even if nothing changed */   \
	X(build, ONE)         /* [build] command, run in the job's folder */ \
	X(persist, LIST)      /* relative paths shared by every job */       \
	X(backend, ONE)       /* "local" (default) or "slurm": job_backend.h */ \
	X(output, ONE)        /* the steps' stdout/stderr: pty (default) or pipe */ \
	/* issue 15 */                                                       \
	X(argv, LIST)         /* train -- CMD ARGS: run as argv, never re-split; \
				 then command is its display (job_argv_display) */ \
	X(name, ONE)          /* --name (job_name_ok), unique among live jobs */ \
	X(git_commit, ONE)    /* the local commit it was started from (hex) */ \
	X(git_branch, ONE)                                                   \
	X(git_dirty, ONE)     /* "1": the work tree differed from the commit */ \
	X(git_diff, ONE)      /* BLAKE2b-256 hex of that difference */       \
	/* issue 14: [slurm], job_slurm.h */                                 \
	X(slurm_partition, ONE)       /* sbatch --partition */               \
	X(slurm_account, ONE)         /* --account */                        \
	X(slurm_qos, ONE)             /* --qos */                            \
	X(slurm_time, ONE)            /* --time */                           \
	X(slurm_nodes, ONE)           /* --nodes (default 1) */              \
	X(slurm_ntasks_per_node, ONE) /* --ntasks-per-node (default 1) */    \
	X(slurm_cpus_per_task, ONE)   /* --cpus-per-task */                  \
	X(slurm_mem, ONE)             /* --mem */                            \
	X(slurm_constraint, ONE)      /* --constraint */                     \
	X(slurm_gpu_flag, ONE)        /* gres (default) or gpus */           \
	X(slurm_gpu_type, ONE)        /* gpu:TYPE:N */                       \
	X(slurm_option, LIST)         /* one more sbatch argument, as is */  \
	X(slurm_build_on, ONE)        /* login (default) or compute */       \
	X(slurm_signal_before, ONE)   /* seconds: --signal=B:USR1@N */       \
	X(slurm_requeue, ONE)         /* "1": --requeue, else --no-requeue */ \
	X(slurm_resubmit, ONE)        /* times to submit again at the time limit */ \
	/* issue 16: [container], job_container.h */                       \
	X(container_image, ONE)    /* runs every step in this image */     \
	X(container_runtime, ONE)  /* auto (default), podman or docker */  \
	X(container_option, LIST)  /* one word of [container] options */   \
	X(container_mount, LIST)   /* SRC[:DST[:ro]] */                     \
	X(container_user, ONE)     /* --user; "" = the caller's uid:gid */ \
	/* issue 28 */                                                       \
	X(term, ONE)               /* TERM for the steps (the user's terminal's) */ \
	/* issue 33: the queue, sweeps, limits, notifications */             \
	X(time_limit, ONE)         /* seconds the command may run; 0: none */ \
	X(retries, ONE)            /* runs again after a failure, at most */ \
	X(stop_grace, ONE)         /* seconds from SIGTERM to SIGKILL at the limit */ \
	X(notify_command, ONE)     /* [notify] command, run on the host at the end */ \
	X(after, ONE)              /* start after this job ends: "ID" or "ID:ok" */ \
	X(group, ONE)              /* the sweep this job is one of (job_name_ok) */ \
	/* rerun: the job whose snapshot and spec this one repeats. From the \
	 * client: only with name, which it may change; the agent fills in \
	 * the rest from that job's spec. */                                \
	X(rerun_of, ONE)

/* Put one spec pair. */
static inline void job_spec_put(struct strbuf *b, const char *key, const char *value)
{
	put_str(b, key);
	put_str(b, value ? value : "");
}

#define GR_JOB_ID_LEN 20 /* "20261122-003512-a1b2" */

/* 1 if id has exactly the shape the agent makes (digits, '-', hex), so
 * it is safe in a path and on a terminal. */
static inline int job_id_ok(const char *id)
{
	static const char shape[] = "dddddddd-dddddd-xxxx";

	if (!id || strlen(id) != GR_JOB_ID_LEN)
		return 0;
	for (size_t i = 0; i < GR_JOB_ID_LEN; i++) {
		char c = id[i];
		if (shape[i] == '-' ? c != '-' : shape[i] == 'd' ? !(c >= '0' && c <= '9')
			: !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return 1;
}

#define GR_JOB_NAME_MAX 64

/* 1 if name can name a job (--name): a letter, then letters, digits, '.',
 * '_' or '-', at most GR_JOB_NAME_MAX bytes. Never the shape of an id or
 * of an id's prefix (those start with a digit), so "logs NAME" cannot be
 * mistaken for an id, and it is safe in a path, a message and a shell
 * word. Both sides check: the client before sending, the agent before
 * storing, the client again in every record the host sends. */
static inline int job_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (!n || n > GR_JOB_NAME_MAX)
		return 0;
	if (!((name[0] >= 'a' && name[0] <= 'z') || (name[0] >= 'A' && name[0] <= 'Z')))
		return 0;
	for (size_t i = 1; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

#define GR_CTR_NAME_MAX 255

/* 1 if name can name a container as podman and docker allow: a letter or
 * digit, then letters, digits, '_', '.' or '-' (the host lists a job's
 * containers by label, so [container] options may have named one). */
static inline int job_ctr_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (!n || n > GR_CTR_NAME_MAX)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      (i && (c == '.' || c == '_' || c == '-'))))
			return 0;
	}
	return 1;
}

/* 1 if s is "", "podman" or "docker": the runtimes a job can run in. */
static inline int job_ctr_runtime_ok(const char *s)
{
	return !s || !*s || !strcmp(s, "podman") || !strcmp(s, "docker");
}

/* 1 if t can be a job's TERM (JOB_SPEC "term", issue 28): 1-64 letters,
 * digits, '.', '_', '+' or '-' (xterm-256color, screen.xterm, rxvt-unicode). */
static inline int job_term_ok(const char *t)
{
	size_t n = t ? strlen(t) : 0;

	if (!n || n > 64)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = t[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '+' || c == '-'))
			return 0;
	}
	return 1;
}

/* 1 if s is empty or lowercase hex of a length in [min, max] (commits:
 * 40 or 64; hashes: 64). */
static inline int job_hex_ok(const char *s, size_t min, size_t max)
{
	size_t n = s ? strlen(s) : 0;

	if (!n)
		return 1;
	if (n < min || n > max)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
	return 1;
}

/* The exit code a job's end maps to: its status (0-255, 128+N for signal
 * N), GR_EXIT_JOB_TIMEOUT at a Slurm time limit, or GR_EXIT_JOB_LOST when
 * it ended without one. -1 while it runs. */
static inline int job_rec_exit_code(const struct job_rec *r)
{
	if (r->state && !strcmp(r->state, "timeout"))
		return GR_EXIT_JOB_TIMEOUT;
	if (r->state && !strcmp(r->state, "node_fail"))
		return GR_EXIT_JOB_LOST;
	if (r->has_status)
		return exit_code_from(r->signalled, r->code);
	if (r->state && !strcmp(r->state, "lost"))
		return GR_EXIT_JOB_LOST;
	return -1;
}

/* Ended: an exit status, or none will come (lost; a Slurm node that
 * failed under it). */
static inline int job_rec_ended(const struct job_rec *r)
{
	return r->has_status ||
	       (r->state && (!strcmp(r->state, "lost") || !strcmp(r->state, "node_fail")));
}

#endif
