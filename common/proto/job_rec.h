/* A job's record: what JOB_LIST, JOB_STATUS, LOG_END and JOB_STOP carry,
 * what `gpurun status` shows and `status --json` prints. Both sides
 * compile this in; the fields are ONE table (JOB_REC_FIELDS) from which
 * the struct, the wire encoding, clearing and the generic part of the
 * JSON output are generated, so adding a field is adding one line there
 * (and filling it in on the agent: job_store.c or a backend).
 *
 * On the wire a record is a list of key/value pairs, both `str`:
 *   u32 n, n x (str key, str value)
 * Numbers are decimal text, booleans "0"/"1". Fields at their zero value
 * (0, "") are left out. A reader refuses a duplicate key, a malformed
 * number, or more pairs than bytes allow; it skips keys it does not know.
 * Agent and client always come from one build (the agent is uploaded per
 * build hash), so this is for clarity and easy merges, not compatibility. */
#ifndef GR_JOB_REC_H
#define GR_JOB_REC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

/* X(name, type, json): type is STR (char *, "" when unset), U64, U32 or
 * BOOL (int). json: CUSTOM fields are printed by cmd_status.c in their
 * historic shape; AUTO ones are printed by the generic loop (strings as
 * JSON strings or null when empty, numbers as numbers, booleans as
 * true/false); NONE are not printed.
 *
 * Group new fields by the issue that adds them, each group at its own
 * place in the table, so parallel branches do not touch the same lines. */
#define JOB_REC_FIELDS(X)                                                   \
	X(id, STR, CUSTOM)           /* YYYYMMDD-HHMMSS-xxxx */             \
	X(state, STR, CUSTOM)        /* see PROTOCOL.md, "Jobs" */          \
	X(created_ms, U64, CUSTOM)   /* Unix ms on the host; 0: unknown */   \
	X(start_ms, U64, CUSTOM)     /* the command started */               \
	X(end_ms, U64, CUSTOM)                                               \
	X(has_status, BOOL, CUSTOM)  /* an exit status was recorded */       \
	X(signalled, BOOL, CUSTOM)   /* code is a signal number */           \
	X(code, U32, CUSTOM)         /* exit status, or the signal */        \
	X(gpus, STR, CUSTOM)         /* assigned; "" = not restricted */     \
	X(pid, U32, CUSTOM)          /* the command's process (local) */     \
	X(command, STR, CUSTOM)      /* [train] command as run */            \
	X(dir, STR, AUTO)            /* the job folder, GPURUN_JOB_DIR */    \
	X(log_size, U64, AUTO)                                               \
	X(now_ms, U64, NONE)         /* the host's clock, for durations */   \
	/* workspace and housekeeping (issue 12) */                          \
	X(backend, STR, AUTO)        /* who runs it: "local" (job_backend.h) */ \
	X(workdir, STR, AUTO)        /* the command's working directory */   \
	X(phase, STR, AUTO)          /* setup, build or run: where it is, or \
					where it ended */                    \
	X(reason, STR, AUTO)         /* why it waits or did not run */       \
	X(disk_bytes, U64, AUTO)     /* bytes the job alone holds on disk */ \
	/* names, commits (issue 15) */                                      \
	X(name, STR, AUTO)           /* --name, or "" (job_name_ok) */       \
	X(command_is_argv, BOOL, AUTO) /* command is an argv, shell-quoted, \
					  run without a shell */             \
	X(git_commit, STR, AUTO)     /* local commit it was started from */  \
	X(git_branch, STR, AUTO)                                             \
	X(git_dirty, BOOL, AUTO)     /* the work tree differed from it */    \
	X(git_diff, STR, AUTO)       /* BLAKE2b-256 of the difference */     \
	/* scheduler (issue 14) */                                           \
	X(slurm_id, STR, AUTO)       /* the Slurm job id (the last, if resubmitted) */ \
	X(slurm_state, STR, AUTO)    /* what Slurm says: PENDING, RUNNING, TIMEOUT, ... */ \
	X(partition, STR, AUTO)      /* the Slurm partition it runs in */ \
	X(nodes, STR, AUTO)          /* the nodes it runs on (Slurm's list) */ \
	X(submits, U32, AUTO)        /* Slurm submissions so far (1 + resubmits) */ \
	/* containers (issue 16) */                                          \
	X(image, STR, AUTO)          /* [container] image; "" = none */      \
	X(runtime, STR, AUTO)        /* podman or docker, as resolved */ \
	/* no job lost (issue 29) */                                         \
	X(log_lost, U64, AUTO)       /* log bytes a full disk took that the \
					log itself does not mention */ \
	/* the queue, sweeps, limits (issue 33) */                           \
	X(queue_pos, U32, AUTO)      /* place among the box's waiting jobs \
					(1: next); 0: not queued */          \
	X(after, STR, AUTO)          /* starts after this job: "ID" or "ID:ok" */ \
	X(group, STR, AUTO)          /* the sweep it belongs to (job_name_ok) */ \
	X(time_limit, U64, AUTO)     /* seconds its command may run; 0: none */ \
	X(retries, U32, AUTO)        /* runs again after a failure, at most */ \
	X(tries, U32, AUTO)          /* the command's runs so far */       \
	/* host pools (issue 34) */                                          \
	X(host, STR, AUTO)           /* the pool's box that holds it: set by \
					the client, never by the agent */ \
	/* rerun */                                                          \
	X(rerun_of, STR, AUTO)       /* the job it reruns (gpurun rerun) */

#define JR_CTYPE_STR char *
#define JR_CTYPE_U64 uint64_t
#define JR_CTYPE_U32 uint32_t
#define JR_CTYPE_BOOL int

struct job_rec {
#define JR_MEMBER(name, type, json) JR_CTYPE_##type name;
	JOB_REC_FIELDS(JR_MEMBER)
#undef JR_MEMBER
};

enum job_rec_type { JR_STR, JR_U64, JR_U32, JR_BOOL };
enum job_rec_json { JR_JSON_CUSTOM, JR_JSON_AUTO, JR_JSON_NONE };

struct job_rec_field {
	const char *name;
	enum job_rec_type type;
	enum job_rec_json json;
	size_t off;
};

static const struct job_rec_field job_rec_fields[] = {
#define JR_DESC(name, type, json) { #name, JR_##type, JR_JSON_##json, offsetof(struct job_rec, name) },
	JOB_REC_FIELDS(JR_DESC)
#undef JR_DESC
};
#define JOB_REC_NFIELDS (sizeof(job_rec_fields) / sizeof(job_rec_fields[0]))

#define JR_AT(r, f, T) ((T *)((char *)(r) + (f)->off))
#define JR_AT_C(r, f, T) ((const T *)((const char *)(r) + (f)->off))

/* The value of field f of r as text ("" for a zero value). buf: >= 24. */
static inline const char *job_rec_text(const struct job_rec *r, const struct job_rec_field *f,
				       char *buf, size_t n)
{
	switch (f->type) {
	case JR_STR: {
		const char *s = *JR_AT_C(r, f, char *);
		return s ? s : "";
	}
	case JR_U64: {
		uint64_t v = *JR_AT_C(r, f, uint64_t);
		if (!v)
			return "";
		snprintf(buf, n, "%llu", (unsigned long long)v);
		return buf;
	}
	case JR_U32: {
		uint32_t v = *JR_AT_C(r, f, uint32_t);
		if (!v)
			return "";
		snprintf(buf, n, "%lu", (unsigned long)v);
		return buf;
	}
	case JR_BOOL:
		return *JR_AT_C(r, f, int) ? "1" : "";
	}
	return "";
}

static inline void job_rec_put(struct strbuf *b, const struct job_rec *r)
{
	char buf[32];
	uint32_t n = 0;

	for (size_t i = 0; i < JOB_REC_NFIELDS; i++)
		n += *job_rec_text(r, &job_rec_fields[i], buf, sizeof(buf)) != '\0';
	put_u32(b, n);
	for (size_t i = 0; i < JOB_REC_NFIELDS; i++) {
		const char *v = job_rec_text(r, &job_rec_fields[i], buf, sizeof(buf));
		if (!*v)
			continue;
		put_str(b, job_rec_fields[i].name);
		put_str(b, v);
	}
}

/* Strict decimal: digits only, no sign, no leading blanks, <= max. */
static inline int job_rec_num(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s || strlen(s) > 20)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		unsigned d = (unsigned)(*s - '0');
		if (v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static inline void job_rec_clear(struct job_rec *r)
{
	for (size_t i = 0; i < JOB_REC_NFIELDS; i++)
		if (job_rec_fields[i].type == JR_STR)
			free(*JR_AT(r, &job_rec_fields[i], char *));
	memset(r, 0, sizeof(*r));
}

/* Read a record; strings are new allocations (job_rec_clear frees them;
 * a string field never read is "" so callers need no NULL checks). On a
 * malformed record rd->bad is set and r holds what was read so far
 * (still to be cleared). */
static inline void job_rec_get(struct gr_rd *rd, struct job_rec *r)
{
	uint32_t seen[(JOB_REC_NFIELDS + 31) / 32] = { 0 };
	uint32_t n = get_u32(rd);

	memset(r, 0, sizeof(*r));
	if (n > rd->n / 8) /* each pair takes at least 8 bytes */
		rd->bad = 1;
	for (uint32_t k = 0; k < n && !rd->bad; k++) {
		char *key = get_str(rd), *val = get_str(rd);
		const struct job_rec_field *f = NULL;
		size_t i;
		uint64_t v = 0;

		for (i = 0; key && i < JOB_REC_NFIELDS; i++)
			if (!strcmp(job_rec_fields[i].name, key)) {
				f = &job_rec_fields[i];
				break;
			}
		if (f && (seen[i / 32] >> (i % 32)) & 1)
			rd->bad = 1; /* duplicate */
		else if (f && val && !rd->bad) {
			seen[i / 32] |= 1u << (i % 32);
			switch (f->type) {
			case JR_STR:
				*JR_AT(r, f, char *) = val;
				val = NULL;
				break;
			case JR_U64:
				if (job_rec_num(val, UINT64_MAX, &v) < 0)
					rd->bad = 1;
				*JR_AT(r, f, uint64_t) = v;
				break;
			case JR_U32:
				if (job_rec_num(val, UINT32_MAX, &v) < 0)
					rd->bad = 1;
				*JR_AT(r, f, uint32_t) = (uint32_t)v;
				break;
			case JR_BOOL:
				if (strcmp(val, "1") && strcmp(val, "0"))
					rd->bad = 1;
				*JR_AT(r, f, int) = !strcmp(val, "1");
				break;
			}
		}
		free(key);
		free(val);
	}
	for (size_t i = 0; i < JOB_REC_NFIELDS; i++)
		if (job_rec_fields[i].type == JR_STR && !*JR_AT(r, &job_rec_fields[i], char *))
			*JR_AT(r, &job_rec_fields[i], char *) = xstrdup("");
}

#endif
