/* Artifacts out of a job folder (the job's working directory): the files
 * matching [artifacts] pull, less those the client already has (same
 * size and mtime), packed as one tar.zst stream with libarchive. The
 * persistent paths in the folder are links into the project folder that
 * every job shares: they are followed, and only what was modified while
 * this job ran is taken from them. Standalone (no agent state), so the
 * unit tests can pack an archive and feed it to the client's extractor. */
#ifndef GR_JOB_PACK_H
#define GR_JOB_PACK_H

#include <stdint.h>

#include "agent.h"
#include "err.h"
#include "util.h"

struct pack_have {        /* a file the client holds */
	char *path;
	uint64_t size;
	int64_t mtime_s;
	uint32_t mtime_ns;
};

struct pack_stats {
	uint32_t matched;     /* files the patterns select */
	uint32_t sent;        /* of those, packed (new or changed) */
	uint64_t bytes;       /* their contents, before compression (deltas: the delta) */
	uint32_t deltas;      /* of those sent, how many as deltas */
};

/* A file the client began and did not finish (a pull cut short): it
 * holds the first have bytes of the host's version of size bytes and
 * that mtime. If the host's file is still that one, only the rest
 * travels (PROTOCOL.md, ART_PULL: resume). */
struct pack_part {
	char *path;
	uint64_t have, size;
	int64_t mtime_s;
	uint32_t mtime_ns;
};

/* A file the client holds a copy of and sent the signature of (staged
 * in sigpath): it goes as a delta against that copy when that is smaller
 * (PROTOCOL.md, ART_PULL: deltas). */
struct pack_sig {
	char *path;
	char *sigpath;
};

struct pack_opts {
	const struct strvec *persist; /* the job's persistent paths (links to follow) */
	uint64_t since_ms;            /* the job's creation: in persistent paths, */
	uint64_t until_ms;            /* files modified in [since, until] (0: running) */
	struct pack_part *parts;      /* the client's part files (job_pack sorts them) */
	size_t nparts;
	struct pack_sig *sigs;        /* signatures the client sent (job_pack sorts them) */
	size_t nsigs;
	int tmpfd;                    /* a folder for the deltas' temp files (-1: none) */
	struct strvec *whole;         /* set: "PATH\tWHY" of each file with a signature */
				      /* that went whole */
	struct strbuf *plan;          /* set: only plan, and list here the files that */
				      /* could go as deltas (u32 n, n x (str path, u64 size)) */
};


/* Write the announcement (GR_ART_MAGIC, files, bytes: job_proto.h) and
 * then the archive to out_fd (blocking); the archive holds exactly the
 * files announced, none larger than announced. With o->plan set, nothing
 * is written to out_fd: the plan goes to o->plan. dir: the job folder; its
 * .gpurun/ is never packed, no link is followed but the persistent paths'
 * own. have need not be sorted. o may be NULL (no persistent paths).
 * Returns 0 or GR_EIO with err set. */
int job_pack(const char *dir, const char *const *patterns, size_t npat,
	     struct pack_have *have, size_t nhave, const struct pack_opts *o, int out_fd,
	     struct pack_stats *st, struct gr_err *err);

/* What the job wrote: the files under dir modified since o->since_ms
 * (in persistent paths: within the window), by path. Returns how many;
 * the first max are appended to paths, their sizes to sizes. */
struct written {
	struct strvec paths;
	uint64_t *sizes;
	uint32_t total;
};
void job_written(const char *dir, const struct pack_opts *o, size_t max, struct written *w);
void job_written_free(struct written *w);

/* ART_PULL and ART_SIG (agent_pull.c). */
extern const struct agent_handler agent_pull_handlers[];

#endif
