/* Slurm's tools for the slurm backend (see job_slurm.h): run them, read
 * their answers, and make the sbatch command line and batch script. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job_slurm.h"
#include "agent.h"
#include "slurm_gres.h"

#define TOOL_OUT_MAX (1u << 20)

int slurm_tool(const char *const *argv, int timeout_ms, struct strbuf *out,
	       struct strbuf *errout)
{
	/* The formats we parse, whatever the user's environment says. */
	static const char *const env[] = { "SLURM_TIME_FORMAT=standard", "SQUEUE_FORMAT",
					   "SACCT_FORMAT", NULL };
	int rc = run_capture(argv, env, timeout_ms, TOOL_OUT_MAX, out, errout);

	if (rc == RUN_TIMEOUT) {
		if (errout)
			sb_addf(errout, "%s did not answer within %d s", argv[0], timeout_ms / 1000);
		return -1;
	}
	return rc;
}

int slurm_id_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > 18)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return 0;
	return 1;
}

/* Copy a value, at most n-1 bytes, printable ASCII only. */
static void copy_clean(char *dst, size_t n, const char *src, size_t len)
{
	size_t o = 0;

	for (size_t i = 0; i < len && o + 1 < n; i++) {
		unsigned char c = (unsigned char)src[i];
		dst[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	dst[o] = '\0';
}

/* "2026-11-23T12:40:01" (the host's local time) to Unix seconds; 0 for
 * "Unknown", "None" and anything else. */
static uint64_t parse_time(const char *v, size_t len)
{
	char buf[32];
	struct tm tm = { 0 };
	char *end;

	if (len >= sizeof(buf))
		return 0;
	memcpy(buf, v, len);
	buf[len] = '\0';
	end = strptime(buf, "%Y-%m-%dT%H:%M:%S", &tm);
	if (!end || *end)
		return 0;
	tm.tm_isdst = -1;
	time_t t = mktime(&tm);
	return t > 0 ? (uint64_t)t : 0;
}

/* "N:S" into code and signal. */
static void parse_exit(const char *v, size_t len, struct slurm_info *si)
{
	char buf[32];
	long long a, b;

	if (len >= sizeof(buf))
		return;
	memcpy(buf, v, len);
	buf[len] = '\0';
	char *colon = strchr(buf, ':');
	if (!colon)
		return;
	*colon = '\0';
	if (parse_ll(buf, 0, 255, &a) == 0 && parse_ll(colon + 1, 0, 255, &b) == 0) {
		si->exit_code = (int)a;
		si->exit_signal = (int)b;
	}
}

/* The state's first word, upper case letters and '_' only ("CANCELLED by
 * 0" is CANCELLED). */
static void set_state(struct slurm_info *si, const char *v, size_t len)
{
	size_t n = 0;

	while (n < len && n + 1 < sizeof(si->state) && (isupper((unsigned char)v[n]) || v[n] == '_'))
		n++;
	memcpy(si->state, v, n);
	si->state[n] = '\0';
}

/* The value of " Key=" in a scontrol -o line (up to the next blank). */
static const char *field(const char *text, const char *key, size_t *len)
{
	size_t kl = strlen(key);

	for (const char *p = text; (p = strstr(p, key)); p += kl) {
		if ((p == text || p[-1] == ' ' || p[-1] == '\n') && p[kl] == '=') {
			const char *v = p + kl + 1;
			*len = strcspn(v, " \n");
			return v;
		}
	}
	return NULL;
}

void slurm_parse_scontrol(const char *text, struct slurm_info *si)
{
	const char *v;
	size_t len;
	long long n;

	*si = (struct slurm_info){ 0 };
	if (!(v = field(text, "JobState", &len)))
		return;
	set_state(si, v, len);
	if (!si->state[0])
		return;
	si->known = 1;
	snprintf(si->source, sizeof(si->source), "scontrol");
	if ((v = field(text, "Reason", &len)))
		copy_clean(si->reason, sizeof(si->reason), v, len);
	if ((v = field(text, "ExitCode", &len)))
		parse_exit(v, len, si);
	if ((v = field(text, "NodeList", &len)) && !(len == 6 && !strncmp(v, "(null)", 6)))
		copy_clean(si->nodes, sizeof(si->nodes), v, len);
	if ((v = field(text, "Partition", &len)))
		copy_clean(si->partition, sizeof(si->partition), v, len);
	if ((v = field(text, "StartTime", &len)))
		si->start_s = parse_time(v, len);
	if ((v = field(text, "EndTime", &len)))
		si->end_s = parse_time(v, len);
	if ((v = field(text, "Restarts", &len)) && len < 12) {
		char buf[12];
		memcpy(buf, v, len);
		buf[len] = '\0';
		if (parse_ll(buf, 0, UINT32_MAX, &n) == 0)
			si->restarts = (uint32_t)n;
	}
	/* A pending job's StartTime is Slurm's guess; it has not started. */
	if (!strcmp(si->state, "PENDING"))
		si->start_s = si->end_s = 0;
}

/* The '|'-separated fields of line [l, end): at most max, into f and fl;
 * returns how many. */
static size_t split_bars(const char *l, const char *end, const char **f, size_t *fl, size_t max)
{
	size_t nf = 0;

	for (const char *p = l; nf < max;) {
		const char *bar = memchr(p, '|', (size_t)(end - p));
		f[nf] = p;
		fl[nf++] = bar ? (size_t)(bar - p) : (size_t)(end - p);
		if (!bar)
			break;
		p = bar + 1;
	}
	return nf;
}

int slurm_parse_sacct(const char *text, const char *id, struct slurm_info *si)
{
	size_t idl = strlen(id);

	*si = (struct slurm_info){ 0 };
	for (const char *l = text; l && *l;) {
		const char *nl = strchr(l, '\n'), *end = nl ? nl : l + strlen(l);
		const char *f[8];
		size_t fl[8], nf = split_bars(l, end, f, fl, 8);
		if (nf == 8 && fl[0] == idl && !strncmp(f[0], id, idl)) {
			set_state(si, f[1], fl[1]);
			if (!si->state[0])
				return -1;
			si->known = 1;
			snprintf(si->source, sizeof(si->source), "sacct");
			parse_exit(f[2], fl[2], si);
			copy_clean(si->reason, sizeof(si->reason), f[3], fl[3]);
			if (!(fl[4] == 13 && !strncmp(f[4], "None assigned", 13)))
				copy_clean(si->nodes, sizeof(si->nodes), f[4], fl[4]);
			copy_clean(si->partition, sizeof(si->partition), f[5], fl[5]);
			si->start_s = parse_time(f[6], fl[6]);
			si->end_s = parse_time(f[7], fl[7]);
			/* "CANCELLED by 1000": who, for the reason. */
			if (!strncmp(f[1], "CANCELLED by ", 13) && (!si->reason[0] || !strcmp(si->reason, "None")))
				copy_clean(si->reason, sizeof(si->reason), f[1], fl[1]);
			return 0;
		}
		l = nl ? nl + 1 : NULL;
	}
	return -1;
}

int slurm_parse_squeue(const char *text, const char *id, struct slurm_info *si)
{
	size_t idl = strlen(id);

	*si = (struct slurm_info){ 0 };
	for (const char *l = text ? text : ""; *l;) {
		const char *nl = strchr(l, '\n'), *end = nl ? nl : l + strlen(l);
		const char *f[7];
		size_t fl[7], nf = split_bars(l, end, f, fl, 7);
		if (nf == 7 && fl[0] == idl && !strncmp(f[0], id, idl)) {
			set_state(si, f[1], fl[1]);
			if (!si->state[0])
				return -1;
			si->known = 1;
			snprintf(si->source, sizeof(si->source), "squeue");
			copy_clean(si->reason, sizeof(si->reason), f[2], fl[2]);
			if (!(fl[3] == 0 || (fl[3] == 6 && !strncmp(f[3], "(null)", 6))))
				copy_clean(si->nodes, sizeof(si->nodes), f[3], fl[3]);
			copy_clean(si->partition, sizeof(si->partition), f[4], fl[4]);
			si->start_s = parse_time(f[5], fl[5]);
			si->end_s = parse_time(f[6], fl[6]);
			if (!strcmp(si->state, "PENDING"))
				si->start_s = si->end_s = 0;
			return 0;
		}
		l = nl ? nl + 1 : end;
	}
	return -1;
}

int slurm_tool_ms(void)
{
	const char *v = getenv("GPURUN_SLURM_TIMEOUT");
	long long s;

	if (v && parse_ll(v, 1, 600, &s) == 0)
		return (int)s * 1000;
	return 30000;
}

/* The first line of what a tool said on stderr, cleaned, for a message. */
static void first_line(const struct strbuf *e, char *out, size_t n)
{
	const char *s = e->buf ? e->buf : "";
	size_t len = strcspn(s, "\n");

	copy_clean(out, n, s, len);
	if (!out[0])
		snprintf(out, n, "no message");
}

int slurm_query(const char *id, struct slurm_info *si, struct gr_err *err)
{
	const char *sc[] = { "scontrol", "-o", "show", "job", id, NULL };
	const char *sa[] = { "sacct", "-n", "-P", "-X", "-j", id, "-o",
			     "JobID,State,ExitCode,Reason,NodeList,Partition,Start,End", NULL };
	struct strbuf out = STRBUF_INIT, e = STRBUF_INIT;
	char msg[256];
	int rc;

	*si = (struct slurm_info){ 0 };
	rc = slurm_tool(sc, SLURM_TOOL_MS, &out, &e);
	if (rc == 0) {
		slurm_parse_scontrol(out.buf ? out.buf : "", si);
		if (si->known)
			goto out;
	} else if (!e.buf || !strstr(e.buf, "Invalid job id")) {
		first_line(&e, msg, sizeof(msg));
		rc = gr_errf(err, GR_EREMOTE, "scontrol: %s", msg);
		goto done;
	}
	/* scontrol forgets a job MinJobAge after it ended: accounting
	 * remembers it, where there is accounting. */
	sb_reset(&out);
	sb_reset(&e);
	rc = slurm_tool(sa, SLURM_TOOL_MS, &out, &e);
	if (rc == 0)
		slurm_parse_sacct(out.buf ? out.buf : "", id, si);
out:
	rc = 0;
done:
	sb_release(&out);
	sb_release(&e);
	return rc;
}

int slurm_state_final(const char *state, int requeue)
{
	static const char *const final[] = {
		"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "DEADLINE", "OUT_OF_MEMORY",
		"SPECIAL_EXIT", "REVOKED",
	};
	static const char *const again[] = { "NODE_FAIL", "BOOT_FAIL", "PREEMPTED" };

	for (size_t i = 0; i < GR_ARRAY_SIZE(final); i++)
		if (!strcmp(state, final[i]))
			return 1;
	for (size_t i = 0; i < GR_ARRAY_SIZE(again); i++)
		if (!strcmp(state, again[i]))
			return !requeue;
	return 0;
}

static long long spec_num(const struct job_spec *spec, const char *key, long long def)
{
	long long n;

	if (parse_ll(job_spec_get(spec, key, ""), 1, 1000000, &n) < 0)
		return def;
	return n;
}

uint32_t slurm_ntasks(const struct job_spec *spec)
{
	return (uint32_t)(spec_num(spec, "slurm_nodes", 1) * spec_num(spec, "slurm_ntasks_per_node", 1));
}

/* One value for --key=VALUE: no control characters, not empty. */
static int value_ok(const char *v)
{
	if (!*v)
		return 0;
	for (const char *p = v; *p; p++)
		if (iscntrl((unsigned char)*p))
			return 0;
	return 1;
}

int slurm_all_gpus(const struct job_spec *spec, long long *n, struct gr_err *err)
{
	const char *part = job_spec_get(spec, "slurm_partition", "");
	const char *all[] = { "sinfo", "-h", "-o", "%P|%G", NULL };
	const char *one[] = { "sinfo", "-h", "-p", part, "-o", "%P|%G", NULL };
	struct strbuf out = STRBUF_INIT, e = STRBUF_INIT;
	int rc;

	*n = 0;
	if (*part && !value_ok(part))
		return gr_errf(err, GR_EINVAL, "bad value for --partition in the job's spec");
	rc = slurm_tool(*part ? one : all, SLURM_TOOL_MS, &out, &e);
	if (rc != 0) {
		char msg[256];
		first_line(&e, msg, sizeof(msg));
		rc = gr_errf(err, GR_EREMOTE, "[train] gpus = all: cannot ask sinfo for the "
			     "partition's GPUs: %s", msg);
	} else {
		rc = slurm_parse_all_gpus(out.buf, 1, part, job_spec_get(spec, "slurm_gpu_type", ""),
					  n, err);
	}
	sb_release(&out);
	sb_release(&e);
	return rc;
}

int slurm_parse_partition_nodes(const char *text, const char *partition, long long *n,
				char *name, size_t name_len)
{
	int found = 0;

	*n = 0;
	if (name_len)
		name[0] = '\0';
	for (const char *l = text ? text : ""; *l;) {
		size_t len = strcspn(l, "\n"), bar = strcspn(l, "|");
		const char *next = l + len + (l[len] == '\n');
		long long c;
		char num[24];

		if (bar < len) {
			size_t nl = bar;
			int is_default = nl && l[nl - 1] == '*';
			if (is_default)
				nl--;
			int match = *partition ? (strlen(partition) == nl && !strncmp(l, partition, nl))
					       : is_default;
			copy_clean(num, sizeof(num), l + bar + 1, len - bar - 1);
			if (match && parse_ll(num, 0, 1000000, &c) == 0) {
				*n += c;
				found = 1;
				if (name_len)
					copy_clean(name, name_len, l, nl);
			}
		}
		l = next;
	}
	return found;
}

/* [slurm] nodes above the nodes of the job's partition: Slurm keeps such
 * a job pending for ever (PartitionNodeLimit or PartitionConfig), so it
 * is refused here. One sinfo, only for a job of several nodes; where
 * sinfo fails or does not list the partition, sbatch decides. */
static int check_partition_nodes(const struct job_spec *spec, struct gr_err *err)
{
	const char *part = job_spec_get(spec, "slurm_partition", "");
	const char *all[] = { "sinfo", "-h", "-o", "%P|%D", NULL };
	const char *one[] = { "sinfo", "-h", "-p", part, "-o", "%P|%D", NULL };
	long long want = spec_num(spec, "slurm_nodes", 1), have = 0;
	struct strbuf out = STRBUF_INIT;
	char name[64];
	int rc = 0;

	if (want <= 1 || (*part && !value_ok(part)))
		return 0;
	if (slurm_tool(*part ? one : all, SLURM_TOOL_MS, &out, NULL) == 0 &&
	    slurm_parse_partition_nodes(out.buf, part, &have, name, sizeof(name)) && have < want) {
		rc = gr_errf(err, GR_EINVAL, "[slurm] nodes = %lld, but partition %s has %lld node%s: "
			     "Slurm would keep the job pending for ever", want, name, have,
			     have == 1 ? "" : "s");
		gr_hintf(err, "set [slurm] nodes to %lld at most, or choose a bigger [slurm] partition",
			 have);
	}
	sb_release(&out);
	return rc;
}

int slurm_sbatch_argv(const struct job_spec *spec, const char *dir, const char *job_id,
		      const char *script, const char *after, struct strvec *argv,
		      struct gr_err *err)
{
	return slurm_sbatch_argv_all(spec, dir, job_id, script, after, -1, argv, err);
}

int slurm_sbatch_argv_all(const struct job_spec *spec, const char *dir, const char *job_id,
			  const char *script, const char *after, long long all_gpus,
			  struct strvec *argv, struct gr_err *err)
{
	static const struct {
		const char *key, *flag;
	} plain[] = {
		{ "slurm_partition", "--partition" }, { "slurm_account", "--account" },
		{ "slurm_qos", "--qos" }, { "slurm_time", "--time" }, { "slurm_mem", "--mem" },
		{ "slurm_constraint", "--constraint" }, { "slurm_cpus_per_task", "--cpus-per-task" },
	};
	const char *gpus = job_spec_get(spec, "gpus", "");
	const char *type = job_spec_get(spec, "slurm_gpu_type", "");
	struct strvec opts = STRVEC_INIT;
	long long n;

	sv_push(argv, "sbatch");
	sv_push(argv, "--parsable");
	sv_pushf(argv, "--job-name=gpurun-%s", job_id);
	sv_pushf(argv, "--chdir=%s", dir);
	sv_pushf(argv, "--output=%s/.gpurun/slurm-%%j.out", dir);
	sv_push(argv, "--open-mode=append");
	sv_pushf(argv, "--nodes=%lld", spec_num(spec, "slurm_nodes", 1));
	sv_pushf(argv, "--ntasks-per-node=%lld", spec_num(spec, "slurm_ntasks_per_node", 1));
	for (size_t i = 0; i < GR_ARRAY_SIZE(plain); i++) {
		const char *v = job_spec_get(spec, plain[i].key, "");
		if (!*v)
			continue;
		if (!value_ok(v))
			return gr_errf(err, GR_EINVAL, "bad value for %s in the job's spec", plain[i].flag);
		sv_pushf(argv, "%s=%s", plain[i].flag, v);
	}
	/* [train] gpus: a count becomes a request; Slurm picks the GPUs.
	 * "all": every GPU of a node of the partition (all_gpus, from
	 * sinfo; 0: it has none, so nothing to ask for). */
	char all_buf[24];
	if (!strcmp(gpus, "all") && all_gpus >= 0) {
		snprintf(all_buf, sizeof(all_buf), "%lld", all_gpus);
		gpus = all_gpus ? all_buf : "";
	}
	if (*gpus && strcmp(gpus, "all")) {
		if (parse_ll(gpus, 1, 1024, &n) < 0)
			return gr_errf(err, GR_EINVAL, "[train] gpus = %s names GPUs, but Slurm chooses "
				       "them: give a count", gpus);
		if (*type && !value_ok(type))
			return gr_errf(err, GR_EINVAL, "bad [slurm] gpu_type in the job's spec");
		if (!strcmp(job_spec_get(spec, "slurm_gpu_flag", "gres"), "gpus"))
			sv_pushf(argv, "--gpus-per-node=%s%s%lld", type, *type ? ":" : "", n);
		else
			sv_pushf(argv, "--gres=gpu:%s%s%lld", type, *type ? ":" : "", n);
	}
	/* Each task under srun would start a container of the same name. */
	if (*job_spec_get(spec, "container_image", "") && slurm_ntasks(spec) > 1)
		return gr_errf(err, GR_EINVAL, "[container] image with several Slurm tasks "
			       "(nodes x ntasks_per_node > 1) is not supported yet: use one task "
			       "(torchrun inside the image starts the workers)");
	n = spec_num(spec, "slurm_signal_before", 0);
	if (n > 0)
		sv_pushf(argv, "--signal=B:USR1@%lld", n);
	sv_push(argv, strcmp(job_spec_get(spec, "slurm_requeue", ""), "1") ? "--no-requeue" : "--requeue");
	if (after)
		sv_pushf(argv, "--dependency=afterany:%s", after);
	job_spec_list(spec, "slurm_option", &opts);
	for (size_t i = 0; i < opts.n; i++) {
		const char *o = opts.v[i];
		/* Each array task would run this job's record: one log, one
		 * status, the last writer's. */
		if (!strcmp(o, "--array") || !strncmp(o, "--array=", 8) || !strncmp(o, "-a", 2)) {
			const char *how = strncmp(o, "--", 2) ? "-a" : "--array";
			sv_clear(&opts);
			return gr_errf(err, GR_EINVAL, "[slurm] options: job arrays (%s) are not "
				       "supported: every task would share this job's record and log; "
				       "submit one job per task instead", how);
		}
		sv_push(argv, o);
	}
	sv_clear(&opts);
	sv_push(argv, script);
	return 0;
}

void slurm_sh_quote(struct strbuf *out, const char *s)
{
	sb_adds(out, "'");
	for (const char *p = s; *p; p++) {
		if (*p == '\'')
			sb_adds(out, "'\\''");
		else
			sb_add(out, p, 1);
	}
	sb_adds(out, "'");
}

void slurm_batch_script(const char *agent, const char *dir, const char *job_id,
			struct strbuf *out)
{
	sb_addf(out, "#!/bin/sh\n"
		     "# gpurun job %s, submitted by gpurun-agent with sbatch (options on its\n"
		     "# command line). In the allocation it runs the agent again, which\n"
		     "# runs the job's steps and appends what they print to .gpurun/log.\n"
		     "exec ", job_id);
	slurm_sh_quote(out, agent);
	sb_adds(out, " slurm-run ");
	slurm_sh_quote(out, dir);
	sb_adds(out, "\necho \"[gpurun] cannot run the agent on $(hostname): see "
		     ".gpurun/slurm-$SLURM_JOB_ID.out\" >>");
	{
		char *log = job_meta(dir, "log");
		slurm_sh_quote(out, log);
		free(log);
	}
	sb_adds(out, "\nexit 127\n");
}

void slurm_ids(const char *dir, struct strvec *ids)
{
	struct strvec kv = STRVEC_INIT;
	char *p = job_meta(dir, "slurm");

	job_kv_read(p, &kv, NULL);
	for (size_t i = 0; i < kv.n; i++)
		if (!strncmp(kv.v[i], "id=", 3) && slurm_id_ok(kv.v[i] + 3))
			sv_push(ids, kv.v[i] + 3);
	sv_clear(&kv);
	free(p);
}

int slurm_parse_ids_by_name(const char *text, const struct strvec *known, char *out, size_t n)
{
	unsigned long long best = 0;
	int found = 0;

	for (const char *l = text ? text : ""; *l;) {
		size_t len = strcspn(l, "\n");
		char id[32];
		copy_clean(id, sizeof(id), l, len < sizeof(id) ? len : 0);
		l += len + (l[len] == '\n');
		int old = 0;
		for (size_t i = 0; known && i < known->n && !old; i++)
			old = !strcmp(known->v[i], id);
		if (!slurm_id_ok(id) || old)
			continue;
		unsigned long long v = strtoull(id, NULL, 10);
		if (!found || v > best) {
			best = v;
			found = 1;
		}
	}
	if (found)
		snprintf(out, n, "%llu", best);
	return found;
}

int slurm_find_by_name(const char *dir, const char *job_id, char *out, size_t n)
{
	char *name = xasprintf("gpurun-%s", job_id);
	const char *sq[] = { "squeue", "--me", "-h", "-n", name, "-o", "%i", NULL };
	const char *sa[] = { "sacct", "-n", "-X", "-P", "-S", "now-7days", "--name", name, "-o",
			     "JobID", NULL };
	struct strvec known = STRVEC_INIT;
	struct strbuf o = STRBUF_INIT;
	int rc = -1;

	slurm_ids(dir, &known);
	if (slurm_tool(sq, SLURM_TOOL_MS, &o, NULL) == 0) {
		rc = slurm_parse_ids_by_name(o.buf, &known, out, n);
		if (rc)
			goto out;
	}
	sb_reset(&o);
	if (slurm_tool(sa, SLURM_TOOL_MS, &o, NULL) == 0)
		rc = slurm_parse_ids_by_name(o.buf, &known, out, n);
out:
	sb_release(&o);
	sv_clear(&known);
	free(name);
	return rc;
}

/* After an sbatch that failed: the job Slurm may have taken anyway, a few
 * times over ~5 s when sbatch timed out (the controller is slow). */
static int lost_answer_find(const char *dir, const char *job_id, int timed_out, char *out,
			    size_t n)
{
	for (int i = 0; i < (timed_out ? 3 : 1); i++) {
		if (i)
			sleep(2);
		if (slurm_find_by_name(dir, job_id, out, n) == 1)
			return 1;
	}
	return 0;
}

int slurm_submit(const char *dir, const struct job_spec *spec, const char *after, char **id,
		 struct gr_err *err)
{
	struct strvec argv = STRVEC_INIT;
	struct strbuf script = STRBUF_INIT, out = STRBUF_INIT, e = STRBUF_INIT;
	char agent[PATH_MAX], *path = job_meta(dir, "slurm-batch.sh"), *meta = NULL;
	const char *base = strrchr(dir, '/');
	ssize_t n;
	int rc, fd;

	*id = NULL;
	base = base ? base + 1 : dir;
	/* The agent's own file: on a cluster, home is shared with the
	 * compute nodes, and so is ~/.cache/gpurun/agent-HASH. */
	n = readlink("/proc/self/exe", agent, sizeof(agent) - 1);
	if (n <= 0) {
		rc = gr_errf(err, GR_EIO, "cannot find the agent's own file: %s", strerror(errno));
		goto out;
	}
	agent[n] = '\0';
	slurm_batch_script(agent, dir, base, &script);
	if ((rc = write_file_atomic(path, script.buf, script.len, 0700, err)) < 0)
		goto out;
	if ((rc = check_partition_nodes(spec, err)) < 0)
		goto out;
	long long all_gpus = -1;
	if (!strcmp(job_spec_get(spec, "gpus", ""), "all") &&
	    (rc = slurm_all_gpus(spec, &all_gpus, err)) < 0)
		goto out;
	if ((rc = slurm_sbatch_argv_all(spec, dir, base, path, after, all_gpus, &argv, err)) < 0)
		goto out;
	rc = slurm_tool((const char *const *)argv.v, SLURM_TOOL_MS, &out, &e);
	char idbuf[32];
	if (rc != 0) {
		char msg[512];
		/* sbatch's own words: "sbatch: error: invalid partition ..." */
		const char *s = e.buf ? e.buf : "";
		const char *last = s;
		for (const char *p = s; *p; p++)
			if (*p == '\n' && p[1])
				last = p + 1;
		copy_clean(msg, sizeof(msg), last, strcspn(last, "\n"));
		/* A busy or paused slurmctld may have taken the job while
		 * sbatch's answer was lost ("Socket timed out on send/recv
		 * operation"): ask for it by its name before calling the
		 * submit failed. */
		if (lost_answer_find(dir, base, rc < 0 || strstr(msg, "timed out"), idbuf,
				     sizeof(idbuf)) == 1) {
			int log_fd = slurm_open_log(dir);
			slurm_lognote(log_fd, "sbatch said '%s', but Slurm has the job: Slurm job %s, "
				      "found by its name gpurun-%s", msg[0] ? msg : "nothing", idbuf, base);
			if (log_fd >= 0)
				close(log_fd);
			goto record;
		}
		rc = gr_errf(err, GR_EREMOTE, "%s", msg[0] ? msg : "sbatch failed without a message");
		goto out;
	}
	/* "123" or "123;cluster" */
	size_t len = out.buf ? strcspn(out.buf, ";\n") : 0;
	copy_clean(idbuf, sizeof(idbuf), out.buf ? out.buf : "", len);
	if (!slurm_id_ok(idbuf)) {
		rc = gr_errf(err, GR_EREMOTE, "sbatch printed no job id ('%s')", idbuf);
		goto out;
	}
record:
	meta = job_meta(dir, "slurm");
	fd = open(meta, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 || dprintf(fd, "id=%s\n", idbuf) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot record Slurm job %s in '%s': %s", idbuf, meta,
			     strerror(errno));
		if (fd >= 0)
			close(fd);
		goto out;
	}
	close(fd);
	*id = xstrdup(idbuf);
	rc = 0;
out:
	sv_clear(&argv);
	sb_release(&script);
	sb_release(&out);
	sb_release(&e);
	free(path);
	free(meta);
	return rc;
}

/* ---- shared by the backend's parts ---- */

uint64_t slurm_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A line of gpurun's own in the job's log. */
void slurm_lognote(int fd, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	sb_adds(&sb, "[gpurun] ");
	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	sb_adds(&sb, "\n");
	if (fd >= 0 && write_full(fd, sb.buf, sb.len) < 0)
		fprintf(stderr, "gpurun-agent: cannot write the log: %s\n", strerror(errno));
	sb_release(&sb);
}

int slurm_open_log(const char *dir)
{
	char *p = job_meta(dir, "log");
	int fd = open(p, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

	free(p);
	return fd;
}

int slurm_stop_asked(const char *dir)
{
	return job_meta_exists(dir, "stopped");
}

int slurm_oom_line(const char *text, size_t len, char *out, size_t n)
{
	static const char *const marks[] = { "exceeded memory limit", "exceeded job memory limit",
					     "oom-kill event", "oom_kill event", "Out Of Memory" };
	int found = 0;

	/* The last such line: the one about this run. */
	for (size_t i = 0; i < len;) {
		const char *l = text + i, *nl = memchr(l, '\n', len - i);
		size_t ll = nl ? (size_t)(nl - l) : len - i;
		for (size_t m = 0; m < GR_ARRAY_SIZE(marks); m++) {
			size_t ml = strlen(marks[m]);
			for (size_t k = 0; k + ml <= ll; k++)
				if (!strncasecmp(l + k, marks[m], ml)) {
					copy_clean(out, n, l, ll);
					found = 1;
					m = GR_ARRAY_SIZE(marks);
					break;
				}
		}
		i += ll + 1;
	}
	return found;
}

/* [remote] scheduler = slurm: the tools the backend runs, and the
 * partitions as sinfo lists them ("NAME|AVAIL|GRES|NODES|STATE" lines,
 * the default partition's name ending in '*'). Four pairs. */
void job_slurm_probe(struct strbuf *pl)
{
	static const char *const tools[] = { "sbatch", "squeue" };
	const char *sinfo[] = { "sinfo", "-h", "-o", "%P|%a|%G|%D|%t", NULL };
	struct strbuf out = STRBUF_INIT, e = STRBUF_INIT;

	for (size_t i = 0; i < GR_ARRAY_SIZE(tools); i++) {
		char *w = run_which(tools[i]);
		put_str(pl, tools[i]);
		put_str(pl, w ? w : "");
		free(w);
	}
	int rc = slurm_tool(sinfo, SLURM_TOOL_MS, &out, &e);
	put_str(pl, "slurm_partitions");
	put_str(pl, rc == 0 && out.buf ? out.buf : "");
	put_str(pl, "slurm_error");
	if (rc == 0)
		put_str(pl, "");
	else
		put_str(pl, e.buf ? e.buf : rc == 127 ? "no sinfo on the PATH" : "sinfo failed");
	sb_release(&out);
	sb_release(&e);
}
