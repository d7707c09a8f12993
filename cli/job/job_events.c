/* The events of `train --json` and `logs -f --json` (job_attach.h): one
 * builder per event, so train, logs and attach say each the same way.
 * The log's own events are json_out.c's (json_log_feed). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job_attach.h"
#include "job_show.h"
#include "pull.h"
#include "sync.h"
#include "term.h"

static void job_key(struct strbuf *o, const char *id)
{
	sb_adds(o, ", \"job\": ");
	json_str(o, id);
}

int job_event_synced(const struct sync_stats *st)
{
	struct strbuf o = STRBUF_INIT;

	jev_begin(&o, "synced");
	sb_addf(&o, ", \"files\": %llu, \"bytes\": %llu, \"deleted\": %llu, \"duration_s\": %.3f",
		(unsigned long long)st->files_sent, (unsigned long long)st->bytes_wire,
		(unsigned long long)st->files_deleted, st->seconds);
	int rc = jev_emit(&o);
	sb_release(&o);
	return rc;
}

int job_event_queued(const struct job_rec *r)
{
	struct strbuf o = STRBUF_INIT;

	jev_begin(&o, "queued");
	job_key(&o, r->id);
	if (r->queue_pos)
		sb_addf(&o, ", \"place\": %u", r->queue_pos);
	else
		sb_adds(&o, ", \"place\": null");
	sb_adds(&o, ", \"waits_for\": ");
	if (r->reason && *r->reason)
		json_str(&o, r->reason);
	else
		sb_adds(&o, "null");
	sb_adds(&o, ", \"after\": ");
	if (r->after && *r->after)
		json_str(&o, r->after);
	else
		sb_adds(&o, "null");
	int rc = jev_emit(&o);
	sb_release(&o);
	return rc;
}

int job_event_started(const struct job_rec *r, const char *host)
{
	struct strbuf o = STRBUF_INIT;

	jev_begin(&o, "started");
	job_key(&o, r->id);
	sb_adds(&o, ", \"name\": ");
	if (r->name && *r->name)
		json_str(&o, r->name);
	else
		sb_adds(&o, "null");
	sb_adds(&o, ", \"host\": ");
	json_str(&o, host && *host ? host : "local");
	sb_adds(&o, ", \"gpus\": ");
	job_show_json_gpus(r->gpus, &o);
	sb_adds(&o, ", \"state\": ");
	json_str(&o, r->state);
	int rc = jev_emit(&o);
	sb_release(&o);
	return rc;
}

int job_event_pulled(const char *id, const struct art_stats *st)
{
	struct strbuf o = STRBUF_INIT;

	jev_begin(&o, "pulled");
	job_key(&o, id);
	sb_addf(&o, ", \"files\": %u, \"bytes\": %llu, \"unchanged\": %u", st->extracted,
		(unsigned long long)st->bytes, st->matched - st->sent);
	int rc = jev_emit(&o);
	sb_release(&o);
	return rc;
}

int job_event_ended(const struct job_rec *r)
{
	struct strbuf o = STRBUF_INIT;

	jev_begin(&o, "ended");
	job_key(&o, r->id);
	sb_adds(&o, ", \"state\": ");
	json_str(&o, r->state);
	if (r->has_status && r->signalled)
		sb_addf(&o, ", \"exit_code\": %d, \"signal\": %u", job_rec_exit_code(r), r->code);
	else if (r->has_status)
		sb_addf(&o, ", \"exit_code\": %d, \"signal\": null", job_rec_exit_code(r));
	else
		sb_adds(&o, ", \"exit_code\": null, \"signal\": null");
	int rc = jev_emit(&o);
	sb_release(&o);
	return rc;
}

int job_event_detached(const char *id)
{
	struct strbuf o = STRBUF_INIT;

	jev_begin(&o, "detached");
	job_key(&o, id);
	int rc = jev_emit(&o);
	sb_release(&o);
	return rc;
}
