/* Message numbers and shared encodings of the job (0x40-0x5f) and
 * artifact (0x60-0x6f) requests; spec in PROTOCOL.md, "Jobs". Both sides
 * compile this in. Every request names the project by its [remote] path,
 * as the client wrote it (the agent resolves ~ and relative paths). */
#ifndef GR_JOB_PROTO_H
#define GR_JOB_PROTO_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

enum gr_job_msg {
	/* c->a: str project, str command, u32 envc, str env..., str gpus,
	 *       u32 fresh_ms. a->c OK: str id, str job_dir, str warning ("" = none) */
	GR_MSG_JOB_START = 0x40,
	/* c->a: str project, str id ("" = all), u32 limit (0 = no limit).
	 * a->c OK: u32 n, n x job record (newest first) */
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
	/* artifacts: c->a: str project, str id, u32 npat, str pattern...,
	 * u32 nhave, nhave x (str path, u64 size, i64 mtime_s, u32 mtime_ns).
	 * a->c: DATA frames (a tar.zst stream), then OK: u32 nmatched,
	 * u32 nsent, u64 bytes_sent (file contents). */
	GR_MSG_ART_PULL = 0x60,
};

/* ART_PULL's DATA stream opens with an announcement, then the tar.zst:
 * "GRA1", u32 files, u64 bytes (the sum of the entries' sizes). The
 * client refuses a pull that would not fit, and any archive that sends
 * more than it announced. */
#define GR_ART_MAGIC "GRA1"
#define GR_ART_ANNOUNCE_LEN 16

/* A job record on the wire:
 *   str id, str state, u64 created_ms, u64 start_ms, u64 end_ms,
 *   u8 has_status, u8 signalled, u32 code, str gpus, u32 pid,
 *   str command, str dir, u64 log_size, u64 now_ms (the host's clock)
 * state is one of: starting, queued, running, exited, failed, stopped,
 * lost. Times are Unix milliseconds on the host, 0 when unknown. */
#define GR_JOB_ID_LEN 20 /* "20261122-003512-a1b2" */

/* 1 if id has exactly the shape the agent makes, YYYYMMDD-HHMMSS-xxxx
 * (digits, then 4 lowercase hex digits): safe as a file name. The client
 * refuses any other id the host sends before it touches a path. */
static inline int job_id_ok(const char *id)
{
	static const char shape[] = "dddddddd-dddddd-xxxx";

	if (!id || strlen(id) != GR_JOB_ID_LEN)
		return 0;
	for (size_t i = 0; i < GR_JOB_ID_LEN; i++) {
		char c = id[i];
		if (shape[i] == '-' && c != '-')
			return 0;
		if (shape[i] == 'd' && !(c >= '0' && c <= '9'))
			return 0;
		if (shape[i] == 'x' && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return 0;
	}
	return 1;
}

struct job_rec {
	char *id, *state, *gpus, *command, *dir;
	uint64_t created_ms, start_ms, end_ms, log_size, now_ms;
	int has_status, signalled;
	uint32_t code, pid;
};

static inline void job_rec_put(struct strbuf *b, const struct job_rec *r)
{
	put_str(b, r->id ? r->id : "");
	put_str(b, r->state ? r->state : "");
	put_u64(b, r->created_ms);
	put_u64(b, r->start_ms);
	put_u64(b, r->end_ms);
	put_u8(b, (uint8_t)!!r->has_status);
	put_u8(b, (uint8_t)!!r->signalled);
	put_u32(b, r->code);
	put_str(b, r->gpus ? r->gpus : "");
	put_u32(b, r->pid);
	put_str(b, r->command ? r->command : "");
	put_str(b, r->dir ? r->dir : "");
	put_u64(b, r->log_size);
	put_u64(b, r->now_ms);
}

/* Read a record; strings are new allocations (job_rec_clear frees them).
 * Check rd->bad afterwards. */
static inline void job_rec_get(struct gr_rd *rd, struct job_rec *r)
{
	r->id = get_str(rd);
	r->state = get_str(rd);
	r->created_ms = get_u64(rd);
	r->start_ms = get_u64(rd);
	r->end_ms = get_u64(rd);
	r->has_status = get_u8(rd);
	r->signalled = get_u8(rd);
	r->code = get_u32(rd);
	r->gpus = get_str(rd);
	r->pid = get_u32(rd);
	r->command = get_str(rd);
	r->dir = get_str(rd);
	r->log_size = get_u64(rd);
	r->now_ms = get_u64(rd);
}

static inline void job_rec_clear(struct job_rec *r)
{
	free(r->id);
	free(r->state);
	free(r->gpus);
	free(r->command);
	free(r->dir);
	*r = (struct job_rec){ 0 };
}

/* The exit code a job's end maps to: its status (0-255, 128+N for signal
 * N), or GR_EXIT_JOB_LOST when it ended without one. -1 while it runs. */
static inline int job_rec_exit_code(const struct job_rec *r)
{
	if (r->has_status)
		return r->signalled ? 128 + (int)(r->code & 0x7f) : (int)(r->code & 0xff);
	if (r->state && !strcmp(r->state, "lost"))
		return GR_EXIT_JOB_LOST;
	return -1;
}

static inline int job_rec_ended(const struct job_rec *r)
{
	return r->has_status || (r->state && !strcmp(r->state, "lost"));
}

#endif
