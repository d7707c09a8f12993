/* How a job looks on screen: the status table, one job's detail, the
 * JSON of `status --json`, the GPU report, what a stop did, and the small
 * formats the job commands share (a job's name, times, durations, how it
 * ended). Modules return records (job_client.h); the commands show them
 * through these. Text from the host is escaped for the terminal (ts). */
#ifndef GR_JOB_SHOW_H
#define GR_JOB_SHOW_H

#include <stddef.h>
#include <stdint.h>

#include "job_client.h"

/* "ID (NAME)" for a named job, else "ID", into buf (at least
 * JOB_SHOWN_MAX bytes); the record passed job_rec_check. */
#define JOB_SHOWN_MAX (GR_JOB_ID_LEN + GR_JOB_NAME_MAX + 4)
const char *job_shown(const struct job_rec *r, char *buf, size_t n);

/* "2026-11-22 00:35:12" (local time) for a Unix ms time; "-" for 0. */
const char *job_fmt_time(uint64_t ms, char *buf, size_t n);
/* "1h02m", "3m05s", "12s". */
const char *job_fmt_duration(uint64_t ms, char *buf, size_t n);
/* A job's state in words for messages: "exited with status 1",
 * "killed by signal 9", "lost (no exit status recorded)", and where a
 * job ended before its command ran, "setup failed with status 1". */
void job_describe_end(const struct job_rec *r, struct strbuf *sb);

/* Tell the user what a stop did (stderr); returns 0, or 1 if something
 * survived. */
int job_stop_print(const struct job_stop_report *s, int quiet);

/* `gpurun status`: the table of recs (or "no jobs ..."), the lost jobs'
 * notes and the disk in all, appended to o. */
void job_show_table(const struct job_rec *recs, size_t n, uint64_t disk_total, struct strbuf *o);
/* `status JOB`: everything the record holds, one field a line. */
void job_show_detail(const struct job_rec *r, struct strbuf *o);
/* The host's GPUs, utilisation, memory and processes. */
void job_show_gpus(const struct job_gpus *g, struct strbuf *o);
/* One box of a pool as status shows it: what it answered, or why not. */
struct job_box {
	const char *host;
	const char *error;          /* it did not answer: why; else NULL */
	const struct job_gpus *g;   /* its GPUs; NULL when it did not answer */
	uint64_t disk_total;        /* the project's jobs' disk there */
};
/* The GPUs of every box of a pool in one table, a HOST column first. */
void job_show_gpus_boxes(const struct job_box *b, size_t nb, struct strbuf *o);
/* The version of `status --json`'s schema (its "schema" key; the README,
 * "Output, colour and scripting", says what may change without a bump). */
#define JOB_JSON_SCHEMA 1
/* A record's gpus ("0,1") as a JSON array of integers, null when not
 * restricted (""); a token that is not a GPU index is left out. */
void job_show_json_gpus(const char *gpus, struct strbuf *o);
/* A record's command as a JSON array of its words when it was given as
 * words (command_is_argv: command is their shell-quoted display, split
 * again here), else null. */
void job_show_json_argv(const struct job_rec *r, struct strbuf *o);
/* `status --json` of a pool (pool: its name, "" for an inline list): as
 * job_show_json, each GPU with its "host", and "pool" and "hosts" (each
 * box's error, disk and line) added. pool NULL: one host, no such keys. */
void job_show_json_boxes(const struct job_rec *recs, size_t n, const struct job_box *b,
			 size_t nb, const char *pool, struct strbuf *o);
/* `status --json`: the jobs, the disk in all and the GPUs (g may be NULL). */
void job_show_json(const struct job_rec *recs, size_t n, uint64_t disk_total,
		   const struct job_gpus *g, struct strbuf *o);

#endif
