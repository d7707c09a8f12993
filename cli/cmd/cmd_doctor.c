/* gpurun doctor: check, in order, config, ssh_config, name resolution, TCP,
 * SSH handshake, host key, authentication, the agent, the remote tools and
 * the python/nvcc a job would find through [train] shell (or, with
 * [container] image, the runtime, the image and how GPUs go in), one line each,
 * stopping where later checks would mean nothing. The ssh
 * steps come from the libssh2 layer's observer as the connection is made. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpurun.h"
#include "term.h"
#include "job.h"
#include "completion.h"
#include "transport.h"
#include "sync.h"
#include "slurm_gres.h"

const struct gr_opt cmd_doctor_opts[] = { { 0 } };

struct doctor {
	int code;              /* the first failure's GR_E* code, 0 if none */
	int ssh_failed;        /* a FAIL line came from the observer */
	struct strbuf methods; /* negotiated with the target */
};

__attribute__((format(printf, 3, 4)))
static void line(const char *status, const char *name, const char *fmt, ...)
{
	struct strbuf sb = STRBUF_INIT;
	va_list ap;

	va_start(ap, fmt);
	sb_vaddf(&sb, fmt, ap);
	va_end(ap);
	/* What the host reports (tool paths, its errors) is its text. */
	printf("%-4s %-11s %s\n", status, ts(name), ts(sb.buf ? sb.buf : ""));
	fflush(stdout);
	sb_release(&sb);
}

static void fail(struct doctor *d, const char *name, const struct gr_err *err, int code)
{
	line("FAIL", name, "%s", err->msg[0] ? err->msg : gr_strcode(code));
	if (err->hint[0])
		printf("     hint: %s\n", ts(err->hint));
	fflush(stdout);
	if (!d->code)
		d->code = code ? code : GR_EREMOTE;
}

static void on_step(const struct ssh_step_report *r, void *arg)
{
	static const char *const names[] = {
		"ssh_config", "resolve", "tcp", "handshake", "hostkey", "auth", "channel",
	};
	struct doctor *d = arg;
	const char *name = names[r->step];

	if (r->rc < 0) {
		struct gr_err e = *r->err;
		if (!r->is_target)
			gr_err_prefix(&e, "jump host %s", r->hop);
		fail(d, name, &e, r->rc);
		d->ssh_failed = 1;
		return;
	}
	if (r->step == SSH_STEP_CHANNEL)
		return;
	if (r->is_target && r->methods) {
		sb_reset(&d->methods);
		sb_adds(&d->methods, r->methods);
	}
	line("ok", name, "%s%s%s%s", r->is_target ? "" : "jump host ", r->is_target ? "" : r->hop,
	     r->is_target ? "" : ": ", r->detail ? r->detail : "");
	for (size_t i = 0; r->warnings && i < r->warnings->n; i++)
		line("warn", name, "%s", r->warnings->v[i]);
}

static int check_config(struct gr_ctx *ctx, struct doctor *d)
{
	const struct gr_config *cfg = ctx->cfg;
	static const char *const kinds[] = { "libssh2", "openssh", "local" };
	struct gr_err e = { 0 };

	if (!cfg->file) {
		gr_errf(&e, GR_ECONFIG, "no gpurun.ini here or in any folder above");
		gr_hintf(&e, "run 'gpurun init' in the project folder");
		fail(d, "config", &e, GR_ECONFIG);
		return -1;
	}
	if (!cfg->remote.host || !*cfg->remote.host) {
		gr_errf(&e, GR_ECONFIG, "%s sets no host ([remote] host)", cfg->file);
		gr_hintf(&e, "set it to an ssh alias or [user@]host[:port]");
		fail(d, "config", &e, GR_ECONFIG);
		return -1;
	}
	line("ok", "config", "%s (host %s, path %s, transport %s)", cfg->file, cfg->remote.host,
	     cfg->remote.path ? cfg->remote.path : "", kinds[cfg->remote.transport % 3]);
	return 0;
}

static void check_crypto(struct doctor *d)
{
	const char *m = d->methods.buf;

	if (!m)
		return;
	if (strstr(m, "chacha20-poly1305") || strstr(m, "-etm@"))
		line("warn", "crypto", "%s (open to the Terrapin attack: this libssh2 has no strict kex)", m);
	else
		line("ok", "crypto", "%s (not open to Terrapin)", m);
}

/* What [train] gpus asks of partition part (GPUs in sinfo's lines, text):
 * all means every GPU of a node (--gres=gpu:N), refused where its nodes
 * differ; a count above a node's GPUs is never granted. */
static void check_gpu_request(struct gr_ctx *ctx, const char *text, const char *part)
{
	const char *gpus = ctx->cfg->train.gpus ? ctx->cfg->train.gpus : "";
	const char *type = ctx->cfg->slurm.gpu_type ? ctx->cfg->slurm.gpu_type : "";
	const char *want = ctx->cfg->slurm.partition ? ctx->cfg->slurm.partition : "";
	struct gr_err e = { 0 };
	long long node, n;

	if (slurm_parse_all_gpus(text, 2, want, type, &node, &e) < 0) {
		line("warn", "gpus", "%s", e.msg);
		return;
	}
	if (!strcmp(gpus, "all")) {
		line("ok", "gpus", "[train] gpus = all asks for every GPU of a node of partition %s: "
		     "--gres=gpu:%s%s%lld", ts(part), ts(type), *type ? ":" : "", node);
	} else if (parse_ll(gpus, 1, 1024, &n) == 0 && n > node) {
		line("warn", "gpus", "[train] gpus = %s, but a node of partition %s has %lld GPU%s%s%s: "
		     "Slurm will not start the job", gpus, ts(part), node, node == 1 ? "" : "s",
		     *type ? " of type " : "", ts(type));
		printf("     hint: set [train] gpus = all, or a count up to %lld\n", node);
	}
}

/* [slurm] partition (or the cluster's default) in sinfo's lines from the
 * host (untrusted: shown through ts()), its state and GPU gres, and what
 * [train] gpus asks of it. */
static void check_partitions(struct gr_ctx *ctx, struct doctor *d, const char *text,
			     const char *serr)
{
	const char *want = ctx->cfg->slurm.partition ? ctx->cfg->slurm.partition : "";
	const char *gpus = ctx->cfg->train.gpus ? ctx->cfg->train.gpus : "";
	struct strbuf names = STRBUF_INIT, cache = STRBUF_INIT;
	struct gr_err e = { 0 };
	char found_name[128] = "";
	long long part_nodes = 0;
	int found = 0, lines = 0;

	if (*serr) {
		char msg[256];
		snprintf(msg, sizeof(msg), "%.*s", (int)strcspn(serr, "\n"), serr);
		gr_errf(&e, GR_EREMOTE, "sinfo on the login node failed: %s", ts(msg));
		gr_hintf(&e, "is slurmctld reachable from the host (scontrol ping)?");
		fail(d, "partition", &e, GR_EREMOTE);
		return;
	}
	for (const char *l = text; *l && lines < 1000; lines++) {
		size_t len = strcspn(l, "\n");
		char *row = xstrndup(l, len), *f[5] = { 0 }, *p = row;
		int nf = 0;
		for (; nf < 5 && p; nf++) {
			f[nf] = p;
			p = strchr(p, '|');
			if (p)
				*p++ = '\0';
		}
		l += len + (l[len] == '\n');
		if (nf < 5) {
			free(row);
			continue;
		}
		size_t nl = strlen(f[0]);
		int is_default = nl && f[0][nl - 1] == '*';
		if (is_default)
			f[0][nl - 1] = '\0';
		sb_addf(&names, "%s%s", names.len ? " " : "", ts(f[0]));
		if (slurm_partition_ok(f[0], strlen(f[0])))
			sb_addf(&cache, "%s\n", f[0]);
		int match = (*want && !strcmp(f[0], want)) || (!*want && is_default);
		long long c;
		/* One line per state of its nodes: the partition's are their sum. */
		if (match && parse_ll(f[3], 0, 1000000, &c) == 0)
			part_nodes += c;
		if (!found && match) {
			found = 1;
			snprintf(found_name, sizeof(found_name), "%s", ts(f[0]));
			int has_gpu = strstr(f[2], "gpu") != NULL;
			int up = !strcmp(f[1], "up");
			char g[256];
			snprintf(g, sizeof(g), "%s", ts(f[2]));
			line(up ? "ok" : "warn", "partition", "%s%s: %s, %s node%s (%s), gres %s", ts(f[0]),
			     *want ? "" : " (the default)", ts(f[1]), ts(f[3]), strcmp(f[3], "1") ? "s" : "",
			     ts(f[4]), g);
			if (*gpus && !has_gpu) {
				line("warn", "gpus", "[train] gpus = %s, but partition %s has no GPU gres",
				     gpus, ts(f[0]));
				printf("     hint: choose a GPU partition with [slurm] partition\n");
			} else if (*gpus) {
				check_gpu_request(ctx, text, f[0]);
			}
		}
		free(row);
	}
	if (found && ctx->cfg->slurm.nodes > part_nodes) {
		line("warn", "nodes", "[slurm] nodes = %d, but partition %s has %lld node%s: "
		     "Slurm will not start the job", ctx->cfg->slurm.nodes, found_name, part_nodes,
		     part_nodes == 1 ? "" : "s");
		printf("     hint: set [slurm] nodes to %lld at most, or choose a bigger "
		       "[slurm] partition\n", part_nodes);
	}
	if (!found) {
		if (*want)
			gr_errf(&e, GR_ECONFIG, "no partition '%s' on this cluster (it has: %s)", ts(want),
				names.len ? names.buf : "none");
		else
			gr_errf(&e, GR_ECONFIG, "the cluster has no default partition (it has: %s)",
				names.len ? names.buf : "none");
		gr_hintf(&e, "set [slurm] partition to one of them");
		fail(d, "partition", &e, GR_ECONFIG);
	}
	/* For completion (-o slurm.partition=); a failure only costs that. */
	char *dir = xasprintf("%s/.gpurun", ctx->cfg->root), *path = xasprintf("%s/%s",
		ctx->cfg->root, GR_PARTITIONS_CACHE);
	if (mkdir_p(dir, 0755, NULL) == 0)
		write_file_atomic(path, cache.buf ? cache.buf : "", cache.len, 0644, NULL);
	free(dir);
	free(path);
	sb_release(&cache);
	sb_release(&names);
}

/* PROBE answers name=value pairs: cc, make, nvcc, nvidia-smi (paths or
 * ""), path, path_exists, free_bytes. */
static void check_tools(struct gr_ctx *ctx, struct doctor *d)
{
	struct gr_err e = { 0 };
	struct strvec kv = STRVEC_INIT;
	const char *path = "", *exists = "0", *freeb = "", *parts = NULL, *serr = "";

	if (job_probe(ctx->conn, ctx->cfg->remote.path ? ctx->cfg->remote.path : "",
		      ctx->cfg->slurm_on, &kv, &e) < 0) {
		fail(d, "tools", &e, e.code);
		goto out;
	}
	for (size_t i = 0; i + 1 < kv.n; i += 2) {
		const char *k = kv.v[i], *v = kv.v[i + 1];
		if (!strcmp(k, "path"))
			path = v;
		else if (!strcmp(k, "path_exists"))
			exists = v;
		else if (!strcmp(k, "free_bytes"))
			freeb = v;
		else if (!strcmp(k, "slurm_partitions"))
			parts = v;
		else if (!strcmp(k, "slurm_error"))
			serr = v;
		else if ((!strcmp(k, "sbatch") || !strcmp(k, "squeue")) && !*v) {
			gr_errf(&e, GR_EREMOTE, "no '%s' on the login node's PATH", k);
			gr_hintf(&e, "[remote] scheduler = slurm needs Slurm's client tools on the host "
				 "(Debian/Ubuntu: apt install slurm-client)");
			fail(d, k, &e, GR_EREMOTE);
		} else if (*v)
			line("ok", k, "%s", v);
		else if (!strcmp(k, "cc") || !strcmp(k, "make")) {
			gr_errf(&e, GR_EREMOTE, "no '%s' on the host's PATH", k);
			gr_hintf(&e, "install a C toolchain there (Debian/Ubuntu: apt install build-essential)");
			fail(d, k, &e, GR_EREMOTE);
		} else {
			line("warn", k, "not found on the host's PATH or in /usr/local/cuda/bin");
			printf("     hint: %s\n", !strcmp(k, "nvcc")
				? "install the CUDA toolkit there to build GPU kernels (the CPU path builds without it)"
				: "no NVIDIA driver there: jobs run on the CPU");
		}
	}
	if (parts)
		check_partitions(ctx, d, parts, serr);
	if (!strcmp(exists, "1"))
		line("ok", "path", "%s exists", path);
	else
		line("warn", "path", "%s does not exist yet ('gpurun sync' creates it)", path);
	if (*freeb) {
		long long bytes = 0;
		char buf[32];
		if (parse_ll(freeb, 0, (long long)(~0ULL >> 1), &bytes) == 0) {
			fmt_size((uint64_t)bytes, buf, sizeof(buf));
			if (bytes < (1LL << 30)) {
				line("warn", "disk", "%s free", buf);
				printf("     hint: checkpoints need room; free some space on the host\n");
			} else {
				line("ok", "disk", "%s free", buf);
			}
		}
	}
out:
	sv_clear(&kv);
}

/* What a job's command would find on its PATH through [train] shell. */
static void check_job_env(struct gr_ctx *ctx, struct doctor *d)
{
	const char *shell = ctx->cfg->train.shell && *ctx->cfg->train.shell ? ctx->cfg->train.shell : "sh";
	struct strvec kv = STRVEC_INIT;
	struct gr_err e = { 0 };
	const char *py = "", *py2 = "", *ver = "", *nvcc = "", *sh = "", *path = "";

	if (job_env(ctx->conn, ctx->cfg->remote.path ? ctx->cfg->remote.path : "", shell, &kv, &e) < 0) {
		fail(d, "job env", &e, e.code);
		goto out;
	}
	for (size_t i = 0; i + 1 < kv.n; i += 2) {
		const char *k = kv.v[i], *v = kv.v[i + 1];
		if (!strcmp(k, "python3"))
			py = v;
		else if (!strcmp(k, "python"))
			py2 = v;
		else if (!strcmp(k, "python_version"))
			ver = v;
		else if (!strcmp(k, "nvcc"))
			nvcc = v;
		else if (!strcmp(k, "shell"))
			sh = v;
		else if (!strcmp(k, "path"))
			path = v;
	}
	/* Host text on the terminal: quoted, control characters escaped. */
	char *qsh = sync_quote(sh), *qpy = sync_quote(*py ? py : py2), *qver = sync_quote(ver);
	char *qnvcc = sync_quote(nvcc), *qpath = sync_quote(path);
	line("ok", "job shell", "%s (shell = %s)", qsh, shell);
	if (*py || *py2)
		line("ok", "job python", "%s%s%s", qpy, *ver ? ", " : "", *ver ? qver : "");
	else
		line("warn", "job python", "no python3 or python on the PATH a job gets: %s", qpath);
	if (*nvcc)
		line("ok", "job nvcc", "%s", qnvcc);
	else
		line("warn", "job nvcc", "not on the PATH a job gets");
	if (!strcmp(shell, "sh") && !*py)
		printf("     hint: a conda or venv activated in ~/.bashrc applies with [train] shell = login\n");
	free(qsh);
	free(qpy);
	free(qver);
	free(qnvcc);
	free(qpath);
out:
	sv_clear(&kv);
}

/* [container]: the runtime a job would use, its image, and how GPUs
 * would go in. */
static void check_container(struct gr_ctx *ctx, struct doctor *d)
{
	const struct gr_config *cfg = ctx->cfg;
	struct strvec kv = STRVEC_INIT;
	struct gr_err e = { 0 };
	const char *rt = "", *path = "", *ver = "", *why = "", *img = "", *gpu = "";
	const char *cdi = "", *toolkit = "", *smi = "";

	if (job_container_check(ctx->conn, cfg->remote.path ? cfg->remote.path : "",
				cfg->container.runtime, cfg->container.image, &kv, &e) < 0) {
		fail(d, "container", &e, e.code);
		goto out;
	}
	for (size_t i = 0; i + 1 < kv.n; i += 2) {
		const char *k = kv.v[i], *v = kv.v[i + 1];
		const char **to = !strcmp(k, "runtime") ? &rt : !strcmp(k, "path") ? &path :
				  !strcmp(k, "version") ? &ver : !strcmp(k, "error") ? &why :
				  !strcmp(k, "image") ? &img : !strcmp(k, "gpu") ? &gpu :
				  !strcmp(k, "cdi") ? &cdi : !strcmp(k, "toolkit") ? &toolkit :
				  !strcmp(k, "nvidia_smi") ? &smi : NULL;
		if (to)
			*to = v;
	}
	/* The words the agent answers with are one of a few: anything else
	 * is a host that does not run gpurun's agent as it should. */
	if (!job_ctr_runtime_ok(rt) || (strcmp(img, "") && strcmp(img, "present") && strcmp(img, "absent")) ||
	    (*rt && strcmp(gpu, "cdi") && strcmp(gpu, "toolkit") && strcmp(gpu, "none"))) {
		gr_errf(&e, GR_EPROTO, "the host sent a malformed CONTAINER_CHECK answer "
			"(runtime '%s', image '%s', gpu '%s'); refusing it", rt, img, gpu);
		fail(d, "container", &e, GR_EPROTO);
		goto out;
	}
	if (!*rt) {
		gr_errf(&e, GR_EREMOTE, "%s", *why ? why : "no container runtime on the host");
		gr_hintf(&e, "install podman or docker on the host, or leave [container] image empty "
			 "to run jobs on the host itself");
		fail(d, "container", &e, GR_EREMOTE);
		goto out;
	}
	line("ok", "container", "%s %s (%s)", rt, ver, path);
	if (!strcmp(img, "present"))
		line("ok", "image", "%s is on the host", cfg->container.image);
	else if (!strcmp(img, "absent"))
		line("warn", "image", "%s is not on the host yet: the first job pulls it (its log shows the pull)",
		     cfg->container.image);
	if (!strcmp(gpu, "cdi"))
		line("ok", "ctr gpus", "CDI: each job's GPUs as --device nvidia.com/gpu=N (%s)", cdi);
	else if (!strcmp(gpu, "toolkit"))
		line("ok", "ctr gpus", "docker --gpus, through the NVIDIA container toolkit (%s)", toolkit);
	else if (*smi) {
		line("warn", "ctr gpus", "the host has GPUs (%s) but none can go into a %s container: "
		     "no CDI spec naming nvidia.com/gpu in /etc/cdi or /var/run/cdi%s", smi, rt,
		     !strcmp(rt, "docker") ? ", no NVIDIA container toolkit" : "");
		printf("     hint: install the NVIDIA container toolkit on the host and run "
		       "'sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml'\n");
	} else {
		line("ok", "ctr gpus", "no GPUs on the host (no nvidia-smi): containers get none");
	}
out:
	sv_clear(&kv);
}

/* The connection [remote] persist keeps open: doctor connects on its own
 * (to watch each step), the other commands go through the holder. */
static void check_holder(struct gr_ctx *ctx)
{
	const struct gr_config *cfg = ctx->cfg;
	struct strbuf why = STRBUF_INIT;
	uint64_t s = cfg->remote.persist;
	char idle[32];
	long pid = 0;
	int r;

	if (s % 3600 == 0)
		snprintf(idle, sizeof(idle), "%lluh", (unsigned long long)(s / 3600));
	else if (s % 60 == 0)
		snprintf(idle, sizeof(idle), "%llum", (unsigned long long)(s / 60));
	else
		snprintf(idle, sizeof(idle), "%llus", (unsigned long long)s);

	if (cfg->remote.transport != GR_TRANSPORT_LIBSSH2 || !strcmp(cfg->remote.host, "local"))
		return;
	if (!cfg->remote.persist) {
		line("ok", "persist", "off ([remote] persist = 0): every command connects on its own");
		return;
	}
	r = transport_hold_find(cfg, &pid, &why);
	if (r < 0)
		line("warn", "persist", "no connection can be kept open: %s", why.buf);
	else if (r)
		line("ok", "persist", "a connection to %s is kept open (pid %ld) for %s after its "
		     "last command; 'gpurun disconnect' closes it", cfg->remote.host, pid,
		     idle);
	else
		line("ok", "persist", "none open now: the next command keeps one open for %s after "
		     "its last", idle);
	sb_release(&why);
}

int cmd_doctor(int argc, char **argv, struct gr_ctx *ctx)
{
	struct gr_getopt st;
	struct doctor d = { 0 };
	struct conn_opts o = { .accept_new = ctx->accept_new, .verbose = ctx->verbose,
			       .say = ctx_say, .say_arg = ctx };
	int id, rc;

	gr_getopt_init(&st, argc, argv);
	while ((id = gr_getopt(&st, cmd_doctor_opts, &ctx->err)) > 0) {
		if (id == OPT_HELP) {
			help_command(ctx->cmd, stdout);
			gr_getopt_release(&st);
			return 0;
		}
	}
	if (id < 0 || st.args.n) {
		if (st.args.n)
			gr_errf(&ctx->err, GR_EUSAGE, "doctor takes no arguments");
		gr_getopt_release(&st);
		return gr_usage_error(ctx);
	}
	gr_getopt_release(&st);

	if (check_config(ctx, &d) < 0)
		goto done;
	if (ctx->cfg->remote.transport != GR_TRANSPORT_LIBSSH2 ||
	    !strcmp(ctx->cfg->remote.host, "local"))
		line("skip", "ssh", "transport = %s: no libssh2 connection to check",
		     ctx->cfg->remote.transport == GR_TRANSPORT_OPENSSH ? "openssh" : "local");

	ssh_set_observer(on_step, &d);
	rc = conn_open(&ctx->conn, ctx->cfg, &o, &ctx->err);
	ssh_set_observer(NULL, NULL);
	if (rc < 0) {
		if (!d.ssh_failed)
			fail(&d, "agent", &ctx->err, rc);
		gr_err_clear(&ctx->err);
		goto done;
	}
	{
		const struct gr_hello *h = conn_hello(ctx->conn);
		line("ok", "agent", "%s on %s, %s (protocol %u, home %s)", h->hash, h->arch,
		     h->uploaded ? "uploaded now" : "already installed", h->version, h->home);
	}
	check_holder(ctx);
	check_tools(ctx, &d);
	if (ctx->cfg->container.image && *ctx->cfg->container.image) {
		line("skip", "job env", "jobs run in the image %s: the host's python and nvcc do not apply",
		     ctx->cfg->container.image);
		check_container(ctx, &d);
	} else {
		check_job_env(ctx, &d);
	}
	check_crypto(&d);
done:
	sb_release(&d.methods);
	return d.code ? gr_exit_code(d.code) : 0;
}
