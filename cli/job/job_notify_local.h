/* [notify] local: telling the user at this machine that a job they were
 * following (train, logs -f) has ended. Private to cli/job/: job_attach.c
 * calls it. */
#ifndef GR_JOB_NOTIFY_LOCAL_H
#define GR_JOB_NOTIFY_LOCAL_H

#include "ctx.h"
#include "job_proto.h"

/* Seconds notify-send may take before it is killed. */
#define JOB_NOTIFY_SEND_MS 2000

/* r ended while the user followed it: act on ctx->cfg->notify.local.
 * bell: "\a" on stderr when it is a terminal (never into a pipe or a
 * file). desktop: notify-send from PATH (argv, no shell; stdin and
 * stdout /dev/null, killed after JOB_NOTIFY_SEND_MS), titled
 * "gpurun: NAME-or-ID STATE", the end in words as its body. auto:
 * desktop where notify-send is on PATH and DISPLAY or WAYLAND_DISPLAY is
 * set, else bell; nothing under -q. none: nothing. A desktop that cannot
 * be told is a warning on stderr (not under -q); nothing is returned. */
void job_notify_local(const struct gr_ctx *ctx, const struct job_rec *r);

#endif
