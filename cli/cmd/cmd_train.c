/* gpurun train: sync, then start a job on the host that runs setup (when
 * it must), build and [train] command in its own folder, detached; follow
 * its log (setup and build output included), pull its artifacts when it
 * ends, remove jobs beyond [jobs] keep, and exit with its status. With
 * --sweep / --sweep-file: one sync, then one job per combination, all of
 * one group, none followed. --after: the job waits for another one. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpurun.h"
#include "pull.h"
#include "job.h"
#include "sync.h"
#include "term.h"

enum { O_DETACH = 1, O_STOP_INT, O_RAW, O_SETUP, O_FORWARD, O_ENV, O_NAME, O_YES, O_SWEEP,
       O_SWEEP_FILE, O_AFTER };

enum { O_ENV_FILE = 64 }; /* apart from the list above, for easy merges */
enum { O_JSON = 100 }; /* --json: its own line, the table's last */

const struct gr_opt cmd_train_opts[] = {
	{ O_DETACH, "detach", 'd', OPT_FLAG, NULL, "return once the job has started; print its id", NULL, 0, 0, 0 },
	{ O_STOP_INT, "stop-on-interrupt", 0, OPT_FLAG, NULL, "Ctrl-C stops the job instead of asking", NULL, 0, 0, 0 },
	{ O_RAW, "raw", 0, OPT_FLAG, NULL, "on a terminal too, pass the log's bytes (setup and build included) unfiltered", NULL, 0, 0, 0 },
	{ O_SETUP, "setup", 0, OPT_FLAG, NULL, "run [setup] command even if it and its inputs did not change", NULL, 0, 0, 0 },
	{ O_FORWARD, "forward", 'L', OPT_STRING, "PORT[:HOST]:HOSTPORT", "forward a local port to the host while attached (as ssh -L; repeatable)", NULL, 0, 0, 0 },
	{ O_ENV, "env", 'e', OPT_STRING, "NAME[=VALUE]", "set a variable in the job's environment; NAME alone: its value here (repeatable; after [train] env)", NULL, 0, 0, 0 },
	{ O_ENV_FILE, "env-file", 0, OPT_STRING, "FILE", "set the variables of a dotenv FILE (NAME=VALUE lines), read here, never synced", NULL, 0, 0, COMPLETE_FILE },
	{ O_NAME, "name", 0, OPT_STRING, "NAME", "name the job; the name works wherever a job id does (a sweep: its group)", NULL, 0, 0, 0 },
	{ O_SWEEP, "sweep", 0, OPT_STRING, "NAME=V1,V2,...", "one job per value, in NAME and as {NAME} in CMD's words (repeatable: every combination)", NULL, 0, 0, 0 },
	{ O_SWEEP_FILE, "sweep-file", 0, OPT_STRING, "FILE", "one job per line of FILE: NAME=VALUE words as in [train] env", NULL, 0, 0, COMPLETE_FILE },
	{ O_AFTER, "after", 0, OPT_STRING, "JOB[:ok]", "start once JOB has ended (:ok: only if it succeeded)", NULL, 0, 0, COMPLETE_JOB },
	{ O_YES, "yes", 'y', OPT_FLAG, NULL, "sync even above [sync] warn_size without asking", NULL, 0, 0, 0 },
	{ O_JSON, "json", 0, OPT_FLAG, NULL, "events as JSON lines on stdout (synced, queued, started, log, pulled, ended)", NULL, 0, 0, 0 },
	{ 0 },
};

/* Another job of the project is under way: say so (this one has a
 * folder, and so a build, of its own), and name what they share: the
 * [train] persist paths, where both write the same checkpoints. */
static void say_others(const struct gr_ctx *ctx, const struct job_rec *others, size_t n)
{
	const struct strvec *persist = &ctx->cfg->train.persist;
	struct strbuf shared = STRBUF_INIT;
	char d[32];

	for (size_t i = 0; i < persist->n; i++)
		sb_addf(&shared, "%s%s", i ? " " : "", persist->v[i]);

	for (size_t i = 0; i < n && !ctx->quiet; i++) {
		const struct job_rec *r = &others[i];
		uint64_t from = r->start_ms ? r->start_ms : r->created_ms;
		if (!job_id_ok(r->id))
			continue;
		fprintf(stderr, "gpurun: note: job %s of this project is %s too (for %s); "
			"this one builds and runs in its own folder\n", r->id,
			!strcmp(r->state, "running") ? "running" : !strcmp(r->state, "building") ? "building" :
			!strcmp(r->state, "setup") ? "in its setup" : !strcmp(r->state, "queued") ? "queued" : "starting",
			job_fmt_duration(r->now_ms > from ? r->now_ms - from : 0, d, sizeof(d)));
		if (shared.len)
			fprintf(stderr, "gpurun: note: both see the same [train] persist paths (%s): "
				"what one writes there, the other sees and may overwrite\n", shared.buf);
		sb_release(&shared); /* said once */
	}
	sb_release(&shared);
}

/* [jobs] keep: remove the oldest ended jobs beyond it, once the job has
 * ended or been left to run (deleting a large folder must not hold its
 * log back). A failure only warns. */
static void keep_jobs(struct gr_ctx *ctx)
{
	struct job_rm_report rep;
	struct gr_err e = { 0 };
	char sz[32];

	if (ctx->cfg->jobs.keep <= 0)
		return;
	if (job_prune(ctx->conn, ctx->cfg->remote.path, (uint32_t)ctx->cfg->jobs.keep, 0, 0, &rep, &e) < 0) {
		fprintf(stderr, "gpurun: warning: cannot remove old jobs: %s\n", e.msg);
		return;
	}
	if (rep.n && !ctx->quiet)
		fprintf(stderr, "gpurun: removed %zu old job%s from the host (%s; [jobs] keep = %d)\n",
			rep.n, rep.n == 1 ? "" : "s", fmt_size(rep.freed, sz, sizeof(sz)),
			ctx->cfg->jobs.keep);
	job_rm_report_free(&rep);
}

/* --after JOB[:ok]: JOB resolved here to its id (a name or a prefix
 * means one job; a group is refused), into *after ("ID" or "ID:ok"). */
static int resolve_after(struct gr_ctx *ctx, const char *arg, char **after)
{
	const char *colon = strrchr(arg, ':');
	char *want = colon ? xstrndup(arg, (size_t)(colon - arg)) : xstrdup(arg);
	struct job_pick p;
	int rc = 0;

	*after = NULL;
	if (!*want || (colon && strcmp(colon, ":ok"))) {
		rc = gr_errf(&ctx->err, GR_EUSAGE, "--after '%s' is not JOB or JOB:ok", arg);
		gr_hintf(&ctx->err, "JOB is an id, a unique prefix of one or a name");
		free(want);
		return gr_usage_error(ctx);
	}
	if ((rc = job_pick(ctx, want, &p)) < 0) {
		gr_err_prefix(&ctx->err, "--after");
	} else if (p.group) {
		rc = gr_errf(&ctx->err, GR_EINVAL, "--after: '%s' is a group of %zu job%s; "
			     "a job waits for one job", want, p.n, p.n == 1 ? "" : "s");
		gr_hintf(&ctx->err, "name one of them (gpurun status %s lists them)", want);
	} else {
		*after = xasprintf("%s%s", p.recs[0].id, colon ? ":ok" : "");
	}
	job_pick_free(&p);
	free(want);
	return rc;
}

/* The group of a sweep and its jobs' names (<group>-1 .. <group>-N): the
 * --name given, or sweep-YYYYMMDD-HHMMSS; either must not be any job's
 * group or name yet (a group is one sweep: `rm GROUP` must not reach an
 * older one), and no job of the names it makes may be under way. */
static int sweep_group(struct gr_ctx *ctx, const char *name, size_t njobs, char **group)
{
	struct job_rec *all = NULL;
	size_t n = 0;
	int rc, digits = snprintf(NULL, 0, "%zu", njobs);
	time_t now = time(NULL);

	*group = NULL;
	if (name && strlen(name) + 1 + (size_t)digits > GR_JOB_NAME_MAX) {
		gr_errf(&ctx->err, GR_EUSAGE, "--name '%s' is too long for a sweep of %zu jobs: its "
			"jobs are named %s-1 to %s-%zu, at most %d bytes", name, njobs, name, name,
			njobs, GR_JOB_NAME_MAX);
		return gr_usage_error(ctx);
	}
	if ((rc = ctx_connect(ctx)) < 0 ||
	    (rc = job_list_all(ctx->conn, ctx->cfg->remote.path, &all, &n, &ctx->err)) < 0)
		return rc;
	for (int tries = 0; !*group && tries < 1000; tries++) {
		char gen[64];
		struct tm tm;
		time_t t = now + tries;
		const char *g = name;
		size_t gl;
		if (!g) {
			localtime_r(&t, &tm);
			strftime(gen, sizeof(gen), "sweep-%Y%m%d-%H%M%S", &tm);
			g = gen;
		}
		gl = strlen(g);
		const char *clash = NULL;
		for (size_t i = 0; i < n && !clash; i++) {
			const struct job_rec *r = &all[i];
			const char *nm = r->name ? r->name : "";
			if ((r->group && !strcmp(r->group, g)) || !strcmp(nm, g))
				clash = r->group && !strcmp(r->group, g) ? "group" : "name";
			else if (!job_rec_ended(r) && !strncmp(nm, g, gl) && nm[gl] == '-')
				clash = "live";
		}
		if (!clash) {
			*group = xstrdup(g);
		} else if (name) {
			if (!strcmp(clash, "group"))
				rc = gr_errf(&ctx->err, GR_EEXIST, "the host has a sweep '%s' already", name);
			else if (!strcmp(clash, "name"))
				rc = gr_errf(&ctx->err, GR_EEXIST, "a job is named '%s' already; a sweep's "
					     "group needs a name of its own", name);
			else
				rc = gr_errf(&ctx->err, GR_EEXIST, "a job named %s-... has not ended; "
					     "the sweep's jobs would take its name", name);
			gr_hintf(&ctx->err, "choose another --name, or 'gpurun rm %s' once they ended", name);
			break;
		}
	}
	if (!*group && rc == 0)
		rc = gr_errf(&ctx->err, GR_EEXIST, "no free name for the sweep's group; give one with --name");
	job_recs_free(all, n);
	return rc;
}

/* Start every job of a sweep over the connection the sync used: one line
 * per job started on stdout (name, id, its variables), never a log
 * followed. A failed start ends the sweep; those started stay. */
static int run_sweep(struct gr_ctx *ctx, const struct train_run *tr,
		     const struct train_sweep *sw, const char *group, int force_setup)
{
	struct strvec base = STRVEC_INIT, spec = STRVEC_INIT;
	size_t started = 0;
	int rc = 0;

	job_spec_from_config(ctx->cfg, force_setup, &base);
	train_spec_add_git(ctx->cfg, &base);
	for (size_t i = 0; i < sw->n; i++) {
		struct train_run jr = *tr;
		struct job_rec *others = NULL;
		size_t nothers = 0;
		char name[GR_JOB_NAME_MAX + 1], *id = NULL, *warn = NULL;

		snprintf(name, sizeof(name), "%s-%zu", group, i + 1);
		jr.name = name;
		jr.group = group;
		jr.vars = &sw->v[i];
		for (size_t k = 0; k < base.n; k++)
			sv_push(&spec, base.v[k]);
		rc = train_spec_add_job(ctx->cfg, &jr, &spec, &ctx->err);
		if (rc == 0)
			rc = job_start_train(ctx, &spec, &id, i ? NULL : &others, &nothers, &warn, NULL);
		sv_clear(&spec);
		if (warn) {
			fprintf(stderr, "gpurun: warning: %s: %s\n", name, ts(warn));
			free(warn);
		}
		if (rc < 0) {
			if (rc == GR_EEXIST)
				rc = ctx->err.code = GR_EREMOTE; /* the agent refused: 251 */
			if (rc != GR_ECANCEL)
				gr_err_prefix(&ctx->err, "cannot start job %s", name);
			break;
		}
		struct job_rec rec = { .id = id, .state = (char *)"starting",
				       .created_ms = (uint64_t)time(NULL) * 1000, .name = name,
				       .group = (char *)group };
		job_cache_update(ctx->cfg->root, &rec, 1);
		if (i == 0)
			say_others(ctx, others, nothers);
		job_recs_free(others, nothers);
		char *vars = argv_display(sw->v[i].v, sw->v[i].n);
		printf("%s  %s  %s\n", name, id, vars);
		fflush(stdout);
		free(vars);
		free(id);
		started++;
	}
	sv_clear(&base);
	if (rc < 0 && started)
		fprintf(stderr, "gpurun: %zu of the sweep's %zu jobs started and stay (group %s): "
			"'gpurun stop %s' stops them\n", started, sw->n, group, group);
	else if (rc < 0)
		fprintf(stderr, "gpurun: no job of the sweep started\n");
	else if (!ctx->quiet)
		fprintf(stderr, "gpurun: started %zu job%s of group %s\n"
			"hint: 'gpurun status %s' lists them, 'gpurun logs %s' shows their logs, "
			"'gpurun logs -f %s-1' follows one\n", sw->n, sw->n == 1 ? "" : "s", group,
			group, group, group);
	return rc;
}

/* A job just started (train, rerun): with detach, print its id and
 * leave it; else follow its log as train does (Ctrl-C asks, [artifacts]
 * interval pulls meanwhile, [notify] local at its end), say how it ended,
 * pull its artifacts, and return its exit code. Both remove the jobs
 * beyond [jobs] keep. */
int train_follow(struct gr_ctx *ctx, const char *id, uint32_t log_id, const char *name, int detach,
		 int stop_int, int raw, int json)
{
	struct attach_result res = { 0 };
	char *dest = NULL;
	int rc;

	char named[GR_JOB_NAME_MAX + 8] = "";
	if (name)
		snprintf(named, sizeof(named), " (%s)", name);
	if (detach) {
		keep_jobs(ctx);
		if (json)
			job_event_detached(id);
		else
			printf("%s\n", id);
		if (!ctx->quiet)
			fprintf(stderr, "gpurun: started job %s%s\nhint: follow it with 'gpurun logs -f %s'\n",
				id, named, name ? name : id);
		rc = 0;
		goto out;
	}
	if (!ctx->quiet)
		fprintf(stderr, "gpurun: started job %s%s\n", id, named);
	ctx_forward_say(ctx);

	dest = xasprintf("%s/runs/%s", ctx->cfg->root, id);
	struct attach_opts ao = {
		.id = id, .log_id = log_id, .follow = 1, .out_fd = 1, .filter = !raw && isatty(1),
		.on_interrupt = ATTACH_INT_ASK,
		.stop_on_interrupt = stop_int, .pull = &ctx->cfg->artifacts.pull,
		.pull_interval = ctx->cfg->artifacts.interval, .pull_dest = dest,
		.notify_end = 1, .json = json,
	};
	rc = job_attach(ctx, &ao, &res);
	if (res.rec.id)
		job_cache_update(ctx->cfg->root, &res.rec, 1);
	if (rc < 0) {
		gr_hintf(&ctx->err, "the job may still be running: 'gpurun logs -f %s'", id);
		goto out;
	}
	if (json && (res.detached || res.interrupted))
		job_event_detached(id);
	if (res.detached) {
		job_print_detached(ctx, id, name);
		keep_jobs(ctx);
		rc = GR_EXIT_DETACHED;
		goto out;
	}
	if (res.interrupted) {
		rc = GR_EXIT_INTERRUPTED;
		goto out;
	}
	struct strbuf end = STRBUF_INIT;
	job_describe_end(&res.rec, &end);
	if (!ctx->quiet || job_rec_exit_code(&res.rec) != 0)
		fprintf(stderr, "gpurun: job %s%s %s\n", id, named, end.buf);
	sb_release(&end);
	rc = job_rec_exit_code(&res.rec);
	struct art_stats got = { 0 };
	if (ctx->cfg->artifacts.pull.n && job_pull_artifacts(ctx, id, &got) < 0) {
		gr_report(ctx);
		if (rc == 0)
			rc = GR_EXIT_SYNC;
	} else if (json && got.extracted) {
		job_event_pulled(id, &got);
	}
	art_stats_release(&got);
	if (json)
		job_event_ended(&res.rec);
	if (res.stop_asked)
		rc = GR_EXIT_INTERRUPTED;
	keep_jobs(ctx);
out:
	job_rec_clear(&res.rec);
	free(dest);
	return rc;
}

int cmd_train(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct sync_opts so = { 0 };
	struct sync_stats ss;
	struct strvec spec = STRVEC_INIT, fwd = STRVEC_INIT;
	struct train_run tr = { STRVEC_INIT, STRVEC_INIT, NULL, NULL, NULL, NULL };
	struct job_rec *others = NULL;
	struct strvec sweeps = STRVEC_INIT;
	struct train_sweep sw = { 0 };
	size_t nothers = 0;
	int detach = 0, stop_int = 0, force_setup = 0, raw = 0, yes = 0, id_opt, rc;
	int json = 0;
	char *id = NULL, *warn = NULL, *after = NULL, *group = NULL;
	const char *sweep_file = NULL, *after_arg = NULL;

	gr_getopt_init(&st, argc, argv);
	st.stop_at_positional = 1; /* train [OPTIONS] [--] CMD [ARGS...]: ARGS are CMD's */
	while ((id_opt = gr_getopt(&st, cmd_train_opts, &ctx->err)) > 0) {
		if (id_opt == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
		if (id_opt == O_DETACH)
			detach = 1;
		if (id_opt == O_STOP_INT)
			stop_int = 1;
		if (id_opt == O_RAW)
			raw = 1;
		if (id_opt == O_SETUP)
			force_setup = 1;
		if (id_opt == O_FORWARD)
			sv_push(&fwd, st.arg);
		/* The values are secrets from here on (train_spec.h). */
		if (id_opt == O_ENV && (id_opt = train_env_arg(st.arg, &tr.env, &ctx->err)) < 0)
			break;
		if (id_opt == O_ENV_FILE && (id_opt = train_env_file(st.arg, &tr.env, &ctx->err)) < 0)
			break;
		if (id_opt == O_NAME)
			tr.name = st.arg;
		if (id_opt == O_YES)
			yes = 1;
		if (id_opt == O_SWEEP)
			sv_push(&sweeps, st.arg);
		if (id_opt == O_SWEEP_FILE)
			sweep_file = st.arg;
		if (id_opt == O_AFTER)
			after_arg = st.arg;
		json |= id_opt == O_JSON;
	}
	/* The command's words, exactly as given: never joined and split again. */
	for (size_t i = 0; i < st.args.n; i++)
		sv_push(&tr.argv, st.args.v[i]);
	gr_getopt_release(&st);
	if (id_opt == 0)
		id_opt = train_run_check(&tr, &ctx->err);
	if (id_opt == 0)
		id_opt = train_sweep_build(&sweeps, sweep_file, &sw, &ctx->err);
	if (id_opt == 0 && sw.n && (fwd.n || json))
		id_opt = gr_errf(&ctx->err, GR_EUSAGE, "%s needs a job to follow; "
				 "a sweep follows none", json ? "--json" : "--forward");
	sv_clear(&sweeps);
	if (id_opt < 0) {
		sv_clear(&fwd);
		rc = gr_usage_error(ctx);
		goto out;
	}
	/* What --after and a sweep's group name must be checked on the host
	 * before anything is synced or started. */
	if (after_arg && (rc = resolve_after(ctx, after_arg, &after)) < 0) {
		sv_clear(&fwd);
		goto out;
	}
	tr.after = after;
	if (sw.n && (rc = sweep_group(ctx, tr.name, sw.n, &group)) < 0)
		goto out;
	/* The local ports are taken before anything else happens. */
	rc = fwd.n ? ctx_forward(ctx, fwd.v, fwd.n) : 0;
	sv_clear(&fwd);
	if (rc < 0)
		goto out;
	if (!tr.argv.n && (!ctx->cfg->train.command || !*ctx->cfg->train.command)) {
		gr_errf(&ctx->err, GR_ECONFIG, "no [train] command to run");
		gr_hintf(&ctx->err, "set it in gpurun.ini, e.g. 'command = python3 train.py', "
			 "or give it: gpurun train -- python3 train.py");
		rc = GR_ECONFIG;
		goto out;
	}

	so.quiet = ctx->quiet;
	so.yes = yes;
	so.show = &sync_show_default;
	so.show_arg = ctx;
	/* One sync at a time (a sync --watch's): held until the job started
	 * from what this one synced. */
	if ((rc = sync_lock_take(ctx->cfg->root, conn_idle_ms(), &sync_show_default, ctx,
				 &ctx->err)) < 0 || (rc = sync_project(ctx, &so, &ss)) < 0) {
		if (rc != GR_ECANCEL) /* not sent without a yes: as `gpurun sync` says it */
			gr_err_prefix(&ctx->err, "sync failed");
		rc = sync_failed(ctx, rc);
		goto out;
	}
	if (json)
		job_event_synced(&ss); /* a closed stdout: the log's writes say it */
	if ((rc = ctx_connect(ctx)) < 0)
		goto out;
	if (sw.n) {
		tr.name = NULL;
		rc = run_sweep(ctx, &tr, &sw, group, force_setup);
		sync_lock_release();
		if (rc == 0)
			keep_jobs(ctx);
		goto out;
	}
	job_spec_from_config(ctx->cfg, force_setup, &spec);
	if ((rc = train_spec_add(ctx->cfg, &tr, &spec, &ctx->err)) < 0) {
		sv_clear(&spec);
		goto out;
	}
	/* A signal during the start answers at once (detached); from the
	 * host's answer on, it waits for job_attach to say what it means. */
	uint32_t log_id = 0;
	rc = job_start_train(ctx, &spec, &id, &others, &nothers, &warn, detach ? NULL : &log_id);
	sync_lock_release();
	sv_clear(&spec);
	if (warn) {
		fprintf(stderr, "gpurun: warning: %s\n", ts(warn));
		free(warn);
	}
	if (rc == GR_ECANCEL)
		goto out;
	if (rc < 0) {
		if (rc == GR_ENOTFOUND && strstr(ctx->err.msg, "remote folder"))
			gr_hintf(&ctx->err, "run 'gpurun sync' first, or check [remote] path");
		if (rc == GR_EEXIST && tr.name) {
			gr_hintf(&ctx->err, "choose another --name, or stop that job first: "
				 "gpurun stop %s", tr.name);
			rc = ctx->err.code = GR_EREMOTE; /* the agent refused: 251 */
		}
		gr_err_prefix(&ctx->err, "cannot start the job");
		goto out;
	}
	struct job_rec rec = { .id = id, .state = (char *)"starting",
			       .created_ms = (uint64_t)time(NULL) * 1000, .name = (char *)tr.name };
	job_cache_update(ctx->cfg->root, &rec, 1);
	say_others(ctx, others, nothers);
	job_recs_free(others, nothers);
	rc = train_follow(ctx, id, log_id, tr.name, detach, stop_int, raw, json);
out:
	train_sweep_free(&sw);
	free(after);
	free(group);
	sv_clear(&tr.argv);
	sv_clear(&tr.env);
	free(id);
	return rc;
}
