/* How a job looks on screen (see job_show.h): the formats the job
 * commands share, what a stop did, and `gpurun status`'s table, detail,
 * GPU report and JSON. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"
#include "job_show.h"
#include "term.h"

int job_stop_print(const struct job_stop_report *s, int quiet)
{
	struct strbuf end = STRBUF_INIT;
	char who[JOB_SHOWN_MAX];

	job_shown(&s->rec, who, sizeof(who));
	if (!quiet && s->rec.slurm_id && *s->rec.slurm_id) {
		/* Slurm's: scancel with the grace period as a signal first. */
		if (s->nterm)
			fprintf(stderr, "gpurun: stopped job %s: SIGTERM to every process of Slurm "
				"job %s%s\n", who, ts(s->rec.slurm_id),
				s->killed ? ", scancel after the grace period" : "");
		else if (!job_rec_ended(&s->rec) || !strcmp(s->rec.state, "stopped"))
			fprintf(stderr, "gpurun: cancelled Slurm job %s of job %s before it started\n",
				ts(s->rec.slurm_id), who);
		if (s->rec.reason && *s->rec.reason)
			fprintf(stderr, "gpurun: %s\n", ts(s->rec.reason));
		if (job_rec_ended(&s->rec) && s->nterm) {
			job_describe_end(&s->rec, &end);
			fprintf(stderr, "gpurun: job %s %s\n", who, end.buf);
		}
	} else if (!quiet) {
		if (s->nterm)
			fprintf(stderr, "gpurun: stopped job %s: SIGTERM to %u process%s%s\n",
				who, s->nterm, s->nterm == 1 ? "" : "es",
				s->killed ? ", SIGKILL to those left after the grace period" : "");
		else if (!s->ctr_stopped.n)
			fprintf(stderr, "gpurun: job %s had no processes left to stop\n", who);
		for (size_t i = 0; i < s->ctr_stopped.n; i++)
			fprintf(stderr, "gpurun: stopped and removed container %s\n", ts(s->ctr_stopped.v[i]));
		if (job_rec_ended(&s->rec)) {
			job_describe_end(&s->rec, &end);
			fprintf(stderr, "gpurun: job %s %s\n", who, end.buf);
		}
	}
	sb_release(&end);
	for (size_t i = 0; i < s->survivors.n; i++)
		fprintf(stderr, "gpurun: process %s of job %s is still running\n",
			ts(s->survivors.v[i]), s->rec.id);
	for (size_t i = 0; i < s->gpu_holders.n; i++)
		fprintf(stderr, "gpurun: process %s of job %s still holds a GPU (pid gpu)\n",
			ts(s->gpu_holders.v[i]), s->rec.id);
	for (size_t i = 0; i < s->ctr_left.n; i++)
		fprintf(stderr, "gpurun: container %s of job %s is still there\n",
			ts(s->ctr_left.v[i]), s->rec.id);
	if (s->ctr_err && *s->ctr_err)
		fprintf(stderr, "gpurun: cannot tell whether the job's container is gone: %s\n",
			ts(s->ctr_err));
	return s->survivors.n || s->gpu_holders.n || s->ctr_left.n || (s->ctr_err && *s->ctr_err);
}

const char *job_shown(const struct job_rec *r, char *buf, size_t n)
{
	if (r->name && *r->name && job_name_ok(r->name))
		snprintf(buf, n, "%s (%s)", r->id, r->name);
	else
		snprintf(buf, n, "%s", r->id);
	return buf;
}

const char *job_fmt_time(uint64_t ms, char *buf, size_t n)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!ms) {
		snprintf(buf, n, "-");
		return buf;
	}
	localtime_r(&t, &tm);
	strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm);
	return buf;
}

const char *job_fmt_duration(uint64_t ms, char *buf, size_t n)
{
	uint64_t s = ms / 1000;

	if (s >= 86400)
		snprintf(buf, n, "%llud%02lluh", (unsigned long long)(s / 86400),
			 (unsigned long long)(s % 86400 / 3600));
	else if (s >= 3600)
		snprintf(buf, n, "%lluh%02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	else if (s >= 60)
		snprintf(buf, n, "%llum%02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else
		snprintf(buf, n, "%llus", (unsigned long long)s);
	return buf;
}

/* How a scheduler ended a job, from its state (never its raw exit code:
 * Slurm reports a cancelled job as 0:9, 143:0 or 0:0 depending on where
 * one looks). NULL for a state that is not one of these. */
static const char *scheduler_end(const char *state)
{
	static const char *const ends[][2] = {
		{ "timeout", "reached its Slurm time limit" },
		{ "cancelled", "was cancelled outside gpurun (scancel)" },
		{ "node_fail", "ended when its Slurm node failed" },
		{ "preempted", "was preempted by Slurm" },
	};

	for (size_t i = 0; state && i < GR_ARRAY_SIZE(ends); i++)
		if (!strcmp(state, ends[i][0]))
			return ends[i][1];
	return NULL;
}

void job_describe_end(const struct job_rec *r, struct strbuf *sb)
{
	const char *phase = r->phase && *r->phase ? r->phase : "run";
	const char *sched = scheduler_end(r->state);
	int slurm = r->backend && !strcmp(r->backend, "slurm");
	/* gpurun's own ends, not Slurm's: a timeout Slurm did not call
	 * TIMEOUT ([train] time_limit in the batch step), a job cancelled
	 * before it was ever submitted (its --after job failed) */
	int own_timeout = !slurm || !r->slurm_state || strcmp(r->slurm_state, "TIMEOUT");
	int own_cancel = !slurm || !r->slurm_id || !*r->slurm_id;

	if (own_timeout && r->state && !strcmp(r->state, "timeout")) {
		/* [train] time_limit, kept by gpurun's supervisor */
		sb_adds(sb, "reached its time limit");
		if (r->reason && *r->reason)
			sb_addf(sb, " (%s)", ts(r->reason));
	} else if (own_cancel && r->state && !strcmp(r->state, "cancelled")) {
		sb_adds(sb, "was cancelled before it started");
		if (r->reason && *r->reason)
			sb_addf(sb, ": %s", ts(r->reason));
	} else if (sched) {
		sb_adds(sb, sched);
		if (r->reason && *r->reason)
			sb_addf(sb, " (%s)", ts(r->reason));
	} else if (r->has_status && strcmp(phase, "run") && (r->signalled || r->code)) {
		sb_addf(sb, "%s ", ts(phase));
		if (r->signalled)
			sb_addf(sb, "was killed by signal %u (%s)", r->code, strsignal((int)r->code));
		else
			sb_addf(sb, "failed with status %u", r->code);
		sb_adds(sb, "; [train] command did not run");
	} else if (r->has_status && r->signalled)
		sb_addf(sb, "was killed by signal %u (%s)", r->code, strsignal((int)r->code));
	else if (r->has_status)
		sb_addf(sb, "exited with status %u", r->code);
	else if (r->state && !strcmp(r->state, "lost")) {
		sb_adds(sb, "ended without an exit status (its supervisor is gone)");
		if (r->reason && *r->reason)
			sb_addf(sb, "; %s", ts(r->reason));
		if (r->reason && strstr(r->reason, "still running"))
			sb_addf(sb, ": stop it with 'gpurun stop %s'", r->id);
	} else
		sb_addf(sb, "is %s", r->state ? ts(r->state) : "unknown");
	if (r->log_lost)
		sb_addf(sb, "; %llu bytes of its output were lost: no space left on the host",
			(unsigned long long)r->log_lost);
}

/* ---- gpurun status ---- */

/* The job's whole time: from its start (setup, build and a wait for
 * GPUs count) to its end, or to now. */
static uint64_t duration(const struct job_rec *r)
{
	uint64_t from = r->created_ms ? r->created_ms : r->start_ms;
	uint64_t to = r->end_ms ? r->end_ms : r->now_ms;

	return from && to > from ? to - from : 0;
}

/* s cut to at most max bytes on a character boundary, "…" marking a cut;
 * only its first line. Into buf (>= max + 4). */
static const char *shorten(const char *s, size_t max, char *buf)
{
	size_t n = strcspn(s ? s : "", "\n"), cut = n;

	if (!s)
		s = "";
	if (n > max) {
		cut = max - 1;
		while (cut && ((unsigned char)s[cut] & 0xc0) == 0x80)
			cut--; /* not inside a UTF-8 character */
	}
	memcpy(buf, s, cut);
	buf[cut] = '\0';
	if (cut < strlen(s))
		memcpy(buf + cut, "\xe2\x80\xa6", 4); /* "…" and its NUL */
	return buf;
}

/* "1a2b3c4d" (the commit it ran from), "+" when the tree was dirty. */
static const char *short_commit(const struct job_rec *r, char *buf, size_t n)
{
	if (!r->git_commit || !*r->git_commit)
		snprintf(buf, n, "-");
	else
		snprintf(buf, n, "%.8s%s", r->git_commit, r->git_dirty ? "+" : "");
	return buf;
}

#define NAME_COL_MAX 24
#define COMMAND_COL 40
#define IMAGE_COL_MAX 32

void job_show_table(const struct job_rec *recs, size_t n, uint64_t disk_total, struct strbuf *o)
{
	char t[32], d[32], code[16], sz[32], cm[32], nm[NAME_COL_MAX + 4], cmd[COMMAND_COL + 4];
	char im[IMAGE_COL_MAX + 4];
	char gr[NAME_COL_MAX + 4];
	int nw = 4, iw = 0; /* iw: an IMAGE column when a job ran in a container */
	int gw = 0;         /* gw: a GROUP column when a job is one of a sweep */
	int hw = 0;         /* hw: a HOST column when the jobs are a pool's */

	for (size_t i = 0; i < n; i++) {
		int len = recs[i].name ? (int)strlen(recs[i].name) : 0;
		if (len > nw)
			nw = len > NAME_COL_MAX ? NAME_COL_MAX : len;
		len = recs[i].group ? (int)strlen(recs[i].group) : 0;
		if (len > gw)
			gw = len > NAME_COL_MAX ? NAME_COL_MAX : len < 5 ? 5 : len;
		len = recs[i].image ? (int)strlen(recs[i].image) : 0;
		if (len > iw)
			iw = len > IMAGE_COL_MAX ? IMAGE_COL_MAX : len < 5 ? 5 : len;
		len = recs[i].host ? (int)strlen(recs[i].host) : 0;
		if (len > hw)
			hw = len > NAME_COL_MAX ? NAME_COL_MAX : len < 4 ? 4 : len;
	}
	if (!n)
		sb_adds(o, "no jobs for this project yet\n");
	else {
		sb_addf(o, "%-20s  %-9s  %-*s  ", "JOB", "STATE", nw, "NAME");
		if (hw)
			sb_addf(o, "%-*s  ", hw, "HOST");
		if (gw)
			sb_addf(o, "%-*s  ", gw, "GROUP");
		sb_addf(o, "%-19s  %-8s  %-4s  %9s  %-4s  %-9s  ", "STARTED", "DURATION", "EXIT",
			"DISK", "GPUS", "COMMIT");
		if (iw)
			sb_addf(o, "%-*s  ", iw, "IMAGE");
		sb_adds(o, "COMMAND\n");
	}
	for (size_t i = 0; i < n; i++) {
		const struct job_rec *r = &recs[i];
		int ec = job_rec_exit_code(r);
		if (ec >= 0 && r->has_status)
			snprintf(code, sizeof(code), "%d", ec);
		else
			snprintf(code, sizeof(code), "-");
		/* The id and name passed job_rec_check; the rest is the host's text. */
		sb_addf(o, "%-20s  %-9s  %-*s  ", r->id, ts(r->state), nw,
			r->name && *r->name ? shorten(r->name, NAME_COL_MAX, nm) : "-");
		if (hw)
			sb_addf(o, "%-*s  ", hw, r->host && *r->host
				? ts(shorten(r->host, NAME_COL_MAX, gr)) : "-");
		if (gw)
			sb_addf(o, "%-*s  ", gw, r->group && *r->group
				? shorten(r->group, NAME_COL_MAX, gr) : "-");
		sb_addf(o, "%-19s  %-8s  %-4s  %9s  %-4s  %-9s  ",
			job_fmt_time(r->start_ms ? r->start_ms : r->created_ms, t, sizeof(t)),
			job_fmt_duration(duration(r), d, sizeof(d)), code,
			fmt_size(r->disk_bytes, sz, sizeof(sz)), r->gpus && *r->gpus ? ts(r->gpus) : "-",
			short_commit(r, cm, sizeof(cm)));
		if (iw)
			sb_addf(o, "%-*s  ", iw,
				r->image && *r->image ? ts(shorten(r->image, IMAGE_COL_MAX, im)) : "-");
		sb_addf(o, "%s\n", ts(shorten(r->command, COMMAND_COL, cmd)));
	}
	/* A lost job whose processes outlived its supervisor (issue 29). */
	for (size_t i = 0; i < n; i++)
		if (recs[i].state && !strcmp(recs[i].state, "lost") && recs[i].reason && *recs[i].reason)
			sb_addf(o, "job %s is lost: %s; stop it with 'gpurun stop %s'\n", recs[i].id,
				ts(recs[i].reason), recs[i].id);
	/* Where each waiting job stands, and what it waits for (issue 33). */
	for (size_t i = 0; i < n; i++)
		if (recs[i].state && !strcmp(recs[i].state, "queued") && recs[i].reason &&
		    *recs[i].reason) {
			char nth[32] = "";
			if (recs[i].queue_pos)
				fmt_ordinal(recs[i].queue_pos, nth, sizeof(nth));
			sb_addf(o, "job %s is queued%s%s%s: %s\n", recs[i].id, *nth ? " (" : "", nth,
				*nth ? " in line)" : "", ts(recs[i].reason));
		}
	if (n)
		sb_addf(o, "disk used on the %s by this project's jobs: %s in all"
			" (what each job holds alone, plus the files their snapshots share)\n",
			hw ? "pool's hosts" : "host", fmt_size(disk_total, sz, sizeof(sz)));
}

void job_show_gpus_boxes(const struct job_box *b, size_t nb, struct strbuf *o)
{
	int hw = 4;

	for (size_t k = 0; k < nb; k++) {
		int len = (int)strlen(b[k].host);
		if (len > hw)
			hw = len > NAME_COL_MAX ? NAME_COL_MAX : len;
	}
	sb_addf(o, "\n%-*s  %-3s  %-24s  %4s  %-19s  %s\n", hw, "HOST", "GPU", "NAME", "UTIL",
		"MEMORY (MiB)", "JOB");
	for (size_t k = 0; k < nb; k++) {
		const struct job_gpus *g = b[k].g;
		char h[NAME_COL_MAX + 4];
		shorten(b[k].host, NAME_COL_MAX, h);
		if (b[k].error || !g || !g->have_smi) {
			sb_addf(o, "%-*s  %-3s  %s\n", hw, ts(h), "-",
				b[k].error ? ts(b[k].error)
				: g && g->error && *g->error ? ts(g->error) : "no nvidia-smi on the host");
			continue;
		}
		for (size_t i = 0; i < g->ngpus; i++) {
			const struct job_gpu *x = &g->gpus[i];
			char mem[40];
			snprintf(mem, sizeof(mem), "%llu / %llu", (unsigned long long)x->mem_used,
				 (unsigned long long)x->mem_total);
			sb_addf(o, "%-*s  %-3u  %-24.24s  %3u%%  %-19s  %s\n", hw, ts(h), x->index,
				ts(x->name), x->util, mem,
				x->locked_by && *x->locked_by ? ts(x->locked_by) : "-");
			for (size_t j = 0; j < g->napps; j++) {
				const struct job_gpu_app *a = &g->apps[j];
				if (strcmp(a->gpu_uuid, x->uuid))
					continue;
				sb_addf(o, "%-*s       pid %u %s, %llu MiB%s%s\n", hw, "", a->pid,
					ts(a->name), (unsigned long long)a->mem, *a->job ? ", job " : "",
					ts(a->job));
			}
		}
		if (g->queued)
			sb_addf(o, "%-*s       %u job%s waiting in its line\n", hw, ts(h), g->queued,
				g->queued == 1 ? "" : "s");
	}
}

void job_show_gpus(const struct job_gpus *g, struct strbuf *o)
{
	if (!g->have_smi) {
		sb_addf(o, "\nGPUs: %s\n", g->error && *g->error ? ts(g->error) : "no nvidia-smi on the host");
		return;
	}
	sb_addf(o, "\n%-3s  %-24s  %4s  %-19s  %s\n", "GPU", "NAME", "UTIL", "MEMORY (MiB)", "JOB");
	for (size_t i = 0; i < g->ngpus; i++) {
		const struct job_gpu *x = &g->gpus[i];
		char mem[40];
		snprintf(mem, sizeof(mem), "%llu / %llu", (unsigned long long)x->mem_used,
			 (unsigned long long)x->mem_total);
		sb_addf(o, "%-3u  %-24.24s  %3u%%  %-19s  %s\n", x->index, ts(x->name), x->util, mem,
			x->locked_by && *x->locked_by ? ts(x->locked_by) : "-");
		for (size_t j = 0; j < g->napps; j++) {
			const struct job_gpu_app *a = &g->apps[j];
			if (strcmp(a->gpu_uuid, x->uuid))
				continue;
			sb_addf(o, "     pid %u %s, %llu MiB%s%s\n", a->pid, ts(a->name),
				(unsigned long long)a->mem, *a->job ? ", job " : "", ts(a->job));
		}
	}
}

/* `status JOB`: everything the record holds, one field a line, after
 * the table's row. Fields added to the record later show up by name. */
void job_show_detail(const struct job_rec *r, struct strbuf *o)
{
	static const char *const shown[] = {
		"id", "state", "name", "command", "command_is_argv", "git_commit", "git_branch",
		"git_dirty", "git_diff", "created_ms", "start_ms", "end_ms", "has_status",
		"signalled", "code", "gpus", "pid", "dir", "log_size", "now_ms", "disk_bytes", "image",
		"runtime", "after", "group", "time_limit", "retries", "tries", "queue_pos", "host", NULL,
	};
	char t[32], sz[32], d[32], buf[32];
	struct strbuf end = STRBUF_INIT;

#define LINE(label, ...) do { sb_addf(o, "%-12s ", label); sb_addf(o, __VA_ARGS__); sb_adds(o, "\n"); } while (0)
	sb_adds(o, "\n");
	LINE("name", "%s", r->name && *r->name ? r->name : "-");
	if (r->host && *r->host)
		LINE("host", "%s (of the pool)", ts(r->host));
	if (r->group && *r->group)
		LINE("group", "%s (a sweep: 'gpurun status %s' lists its jobs)", r->group, r->group);
	if (r->after && *r->after) { /* "ID" or "ID:ok" (job_rec_check) */
		const char *ok = strchr(r->after, ':');
		LINE("after", "%.*s (starts once it has ended%s)",
		     (int)(ok ? (size_t)(ok - r->after) : strlen(r->after)), r->after,
		     ok ? ", only if it succeeded" : "");
	}
	LINE("command", "%s%s", ts(r->command),
	     r->command_is_argv ? "  (as words, without a shell)" : "");
	if (r->git_commit && *r->git_commit)
		LINE("commit", "%s%s%s%s", r->git_commit,
		     r->git_branch && *r->git_branch ? " (" : "",
		     r->git_branch && *r->git_branch ? ts(r->git_branch) : "",
		     r->git_branch && *r->git_branch ? ")" : "");
	else
		LINE("commit", "- (not started from a git work tree)");
	if (r->git_dirty)
		LINE("changes", "the work tree differed from the commit (diff %s)",
		     r->git_diff && *r->git_diff ? r->git_diff : "?");
	else if (r->git_commit && *r->git_commit)
		LINE("changes", "none");
	LINE("created", "%s", job_fmt_time(r->created_ms, t, sizeof(t)));
	LINE("started", "%s", job_fmt_time(r->start_ms, t, sizeof(t)));
	if (job_rec_ended(r)) {
		job_describe_end(r, &end);
		LINE("ended", "%s, %s", job_fmt_time(r->end_ms, t, sizeof(t)), ts(end.buf));
	}
	LINE("runtime", "%s", job_fmt_duration(duration(r), d, sizeof(d)));
	if (r->start_ms && r->created_ms && r->start_ms > r->created_ms + 1000) {
		uint64_t to = r->end_ms ? r->end_ms : r->now_ms;
		LINE("command ran", "%s (setup, build and waiting took %s)",
		     job_fmt_duration(to > r->start_ms ? to - r->start_ms : 0, d, sizeof(d)),
		     job_fmt_duration(r->start_ms - r->created_ms, t, sizeof(t)));
	}
	LINE("gpus", "%s", r->gpus && *r->gpus ? ts(r->gpus) : "not restricted");
	if (r->queue_pos)
		LINE("in line", "%s for the box's GPUs", fmt_ordinal(r->queue_pos, buf, sizeof(buf)));
	if (r->time_limit)
		LINE("time limit", "%s a run ([train] time_limit)",
		     job_fmt_duration(r->time_limit * 1000, d, sizeof(d)));
	if (r->retries || r->tries > 1)
		LINE("runs", "%u so far; a failed run is run again up to %u time%s ([train] retries)",
		     r->tries, r->retries, r->retries == 1 ? "" : "s");
	if (r->image && *r->image)
		LINE("image", "%s (%s)", ts(r->image), r->runtime && *r->runtime ? ts(r->runtime) : "?");
	else
		LINE("image", "- (on the host, no container)");
	if (r->pid)
		LINE("pid", "%u", r->pid);
	LINE("folder", "%s", ts(r->dir));
	LINE("log", "%s", fmt_size(r->log_size, sz, sizeof(sz)));
	LINE("disk", "%s", fmt_size(r->disk_bytes, sz, sizeof(sz)));
	for (size_t k = 0; k < JOB_REC_NFIELDS; k++) {
		const struct job_rec_field *f = &job_rec_fields[k];
		size_t j;
		for (j = 0; shown[j] && strcmp(shown[j], f->name); j++)
			;
		if (shown[j] || f->json == JR_JSON_NONE)
			continue;
		const char *v = job_rec_text(r, f, buf, sizeof(buf));
		LINE(f->name, "%s", *v ? ts(v) : "-");
	}
#undef LINE
	sb_release(&end);
}

/* The key of an AUTO field in `status --json` where its record name
 * lacks the unit (schema 1: a duration's key ends in _s). */
static const char *json_key(const char *field)
{
	return !strcmp(field, "time_limit") ? "time_limit_s" : field;
}

/* The record's fields that have no shape of their own in the schema. */
static void json_auto(const struct job_rec *r, struct strbuf *o)
{
	for (size_t k = 0; k < JOB_REC_NFIELDS; k++) {
		const struct job_rec_field *f = &job_rec_fields[k];
		if (f->json != JR_JSON_AUTO)
			continue;
		sb_addf(o, ", \"%s\": ", json_key(f->name));
		switch (f->type) {
		case JR_STR: {
			const char *v = *JR_AT_C(r, f, char *);
			if (v && *v)
				json_str(o, v);
			else
				sb_adds(o, "null");
			break;
		}
		case JR_U64:
			sb_addf(o, "%llu", (unsigned long long)*JR_AT_C(r, f, uint64_t));
			break;
		case JR_U32:
			sb_addf(o, "%lu", (unsigned long)*JR_AT_C(r, f, uint32_t));
			break;
		case JR_BOOL:
			sb_adds(o, *JR_AT_C(r, f, int) ? "true" : "false");
			break;
		}
	}
}

void job_show_json_gpus(const char *gpus, struct strbuf *o)
{
	int first = 1;

	if (!gpus || !*gpus) {
		sb_adds(o, "null");
		return;
	}
	sb_adds(o, "[");
	for (const char *p = gpus; *p;) {
		size_t n = strcspn(p, ",");
		char *end;
		unsigned long v = strtoul(p, &end, 10);
		if (n && n <= 5 && p[0] >= '0' && p[0] <= '9' && end == p + n && v <= 65535) {
			sb_addf(o, "%s%lu", first ? "" : ", ", v);
			first = 0;
		}
		p += n + (p[n] == ',');
	}
	sb_adds(o, "]");
}

void job_show_json_argv(const struct job_rec *r, struct strbuf *o)
{
	struct strvec words = STRVEC_INIT;

	if (!r->command_is_argv || config_split_words(r->command ? r->command : "", &words)) {
		sb_adds(o, "null");
		sv_clear(&words);
		return;
	}
	sb_adds(o, "[");
	for (size_t i = 0; i < words.n; i++) {
		if (i)
			sb_adds(o, ", ");
		json_str(o, words.v[i]);
	}
	sb_adds(o, "]");
	sv_clear(&words);
}

/* A Unix ms time as "KEY": RFC 3339 and "KEY_unix_ms": the number, both
 * null when unknown or not yet (0). */
static void json_when(struct strbuf *o, const char *key, uint64_t ms)
{
	sb_addf(o, ", \"%s\": ", key);
	json_add_time(o, ms);
	if (ms)
		sb_addf(o, ", \"%s_unix_ms\": %llu", key, (unsigned long long)ms);
	else
		sb_addf(o, ", \"%s_unix_ms\": null", key);
}

/* One GPU's object; host: the pool's box it is on, or NULL. */
static void json_gpu(const struct job_gpus *g, const struct job_gpu *x, const char *host,
		     struct strbuf *o)
{
	sb_addf(o, "{\"index\": %u, \"uuid\": ", x->index);
	json_str(o, x->uuid);
	if (host) {
		sb_adds(o, ", \"host\": ");
		json_str(o, host);
	}
	sb_adds(o, ", \"name\": ");
	json_str(o, x->name);
	sb_addf(o, ", \"utilization\": %u, \"memory_used_mib\": %llu, \"memory_total_mib\": %llu, \"job\": ",
		x->util, (unsigned long long)x->mem_used, (unsigned long long)x->mem_total);
	if (x->locked_by && *x->locked_by)
		json_str(o, x->locked_by);
	else
		sb_adds(o, "null");
	sb_adds(o, ", \"processes\": [");
	int first = 1;
	for (size_t j = 0; j < g->napps; j++) {
		const struct job_gpu_app *a = &g->apps[j];
		if (strcmp(a->gpu_uuid, x->uuid))
			continue;
		sb_addf(o, "%s{\"pid\": %u, \"memory_mib\": %llu, \"name\": ", first ? "" : ", ",
			a->pid, (unsigned long long)a->mem);
		json_str(o, a->name);
		sb_adds(o, ", \"job\": ");
		if (*a->job)
			json_str(o, a->job);
		else
			sb_adds(o, "null");
		sb_adds(o, "}");
		first = 0;
	}
	sb_adds(o, "]}");
}

void job_show_json_boxes(const struct job_rec *recs, size_t n, const struct job_box *b,
			 size_t nb, const char *pool, struct strbuf *o)
{
	uint64_t disk_total = 0;
	size_t ngpus = 0;
	int smi = 0, many = pool != NULL;

	sb_addf(o, "{\n  \"schema\": %d,\n  \"jobs\": [", JOB_JSON_SCHEMA);
	for (size_t i = 0; i < n; i++) {
		const struct job_rec *r = &recs[i];
		sb_adds(o, i ? ",\n    {" : "\n    {");
		sb_adds(o, "\"id\": ");
		json_str(o, r->id);
		sb_adds(o, ", \"state\": ");
		json_str(o, r->state);
		sb_adds(o, ", \"command\": ");
		json_str(o, r->command);
		sb_adds(o, ", \"argv\": ");
		job_show_json_argv(r, o);
		json_when(o, "created", r->created_ms);
		json_when(o, "start", r->start_ms);
		json_when(o, "end", r->end_ms);
		sb_addf(o, ", \"duration_s\": %.3f", (double)duration(r) / 1000);
		if (r->has_status && r->signalled)
			sb_addf(o, ", \"exit_code\": %d, \"signal\": %u", job_rec_exit_code(r), r->code);
		else if (r->has_status)
			sb_addf(o, ", \"exit_code\": %d, \"signal\": null", job_rec_exit_code(r));
		else
			sb_adds(o, ", \"exit_code\": null, \"signal\": null");
		sb_adds(o, ", \"gpus\": ");
		job_show_json_gpus(r->gpus, o);
		if (r->pid)
			sb_addf(o, ", \"pid\": %u", r->pid);
		else
			sb_adds(o, ", \"pid\": null");
		json_auto(r, o);
		sb_adds(o, "}");
	}
	sb_adds(o, n ? "\n  ],\n" : "],\n");
	for (size_t k = 0; k < nb; k++) {
		disk_total += b[k].disk_total;
		if (b[k].g && b[k].g->have_smi) {
			smi = 1;
			ngpus += b[k].g->ngpus;
		}
	}
	sb_addf(o, "  \"disk_total_bytes\": %llu,\n", (unsigned long long)disk_total);
	sb_addf(o, "  \"nvidia_smi\": %s,\n  \"gpus\": ", smi ? "true" : "false");
	if (!smi) {
		sb_adds(o, "null");
	} else {
		size_t shown = 0;
		sb_adds(o, "[");
		for (size_t k = 0; k < nb; k++) {
			const struct job_gpus *g = b[k].g;
			for (size_t i = 0; g && g->have_smi && i < g->ngpus; i++) {
				sb_adds(o, shown++ ? ",\n    " : "\n    ");
				json_gpu(g, &g->gpus[i], many ? b[k].host : NULL, o);
			}
		}
		sb_adds(o, ngpus ? "\n  ]" : "]");
	}
	if (many) {
		/* A pool: which boxes answered, and what each said. */
		sb_adds(o, ",\n  \"pool\": ");
		if (*pool)
			json_str(o, pool);
		else
			sb_adds(o, "null");
		sb_adds(o, ",\n  \"hosts\": [");
		for (size_t k = 0; k < nb; k++) {
			sb_adds(o, k ? ",\n    {\"host\": " : "\n    {\"host\": ");
			json_str(o, b[k].host);
			sb_adds(o, ", \"error\": ");
			if (b[k].error)
				json_str(o, b[k].error);
			else
				sb_adds(o, "null");
			sb_addf(o, ", \"disk_total_bytes\": %llu, \"nvidia_smi\": %s, \"queued\": %u}",
				(unsigned long long)b[k].disk_total,
				b[k].g && b[k].g->have_smi ? "true" : "false", b[k].g ? b[k].g->queued : 0);
		}
		sb_adds(o, nb ? "\n  ]" : "]");
	}
	sb_adds(o, "\n}\n");
}

void job_show_json(const struct job_rec *recs, size_t n, uint64_t disk_total,
		   const struct job_gpus *g, struct strbuf *o)
{
	struct job_box b = { .g = g, .disk_total = disk_total };

	job_show_json_boxes(recs, n, &b, 1, NULL, o);
}
