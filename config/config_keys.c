/* The gpurun.ini schema: one table of every key (type, default, allowed
 * values, range, help) that drives validation, `gpurun config`, the
 * template `gpurun init` writes, help and completions, so they cannot
 * disagree. Loading and precedence live in config.c. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"


static const char *const transport_values[] = { "libssh2", "openssh", "local", NULL };
static const char *const shell_values[] = { "sh", "login", NULL };
static const char *const output_values[] = { "pty", "pipe", NULL };
static const char *const scheduler_values[] = { "none", "slurm", NULL };
static const char *const build_on_values[] = { "login", "compute", NULL };
static const char *const gpu_flag_values[] = { "gres", "gpus", NULL };
static const char *const runtime_values[] = { "auto", "podman", "docker", NULL };
static const char *const notify_local_values[] = { "auto", "bell", "desktop", "none", NULL };

static const struct gr_config_key keys[] = {
	{ .section = "remote", .name = "host", .type = GR_KEY_STRING, .def = "",
	  .help = "ssh alias or [user@]host[:port] ('local': this machine); several, or a [pools] name",
	  .example = "gpu-box", .check = cfgk_check_host },
	{ .section = "remote", .name = "path", .type = GR_KEY_RPATH, .def = "~/gpurun/<project>",
	  .help = "project folder on the host; ~ is the remote home", .project_only = 1 },
	{ .section = "remote", .name = "jobs_dir", .type = GR_KEY_RPATH, .def = "",
	  .help = "host folder for job folders (default ~/.cache/gpurun/jobs); a change hides older jobs",
	  .example = "/scratch/me/gpurun-jobs", .check = cfgk_check_rdir },
	{ .section = "remote", .name = "transport", .type = GR_KEY_ENUM, .def = "libssh2",
	  .values = transport_values,
	  .help = "how to reach the host: libssh2 (built in), openssh (the ssh command) or local" },
	{ .section = "remote", .name = "identity", .type = GR_KEY_PATH, .def = "",
	  .help = "private key to try besides ssh-agent and ssh_config's IdentityFile",
	  .example = "~/.ssh/id_ed25519" },
	{ .section = "remote", .name = "known_hosts", .type = GR_KEY_PATH, .def = "",
	  .help = "known_hosts file for host keys; empty: ssh_config's UserKnownHostsFile",
	  .example = "~/.ssh/known_hosts" },
	{ .section = "remote", .name = "connect_timeout", .type = GR_KEY_INT, .def = "0",
	  .min = 0, .max = 3600,
	  .help = "seconds to wait for the connection; 0: ssh_config's ConnectTimeout" },
	{ .section = "remote", .name = "persist", .type = GR_KEY_STRING, .def = "10m",
	  .help = "keep the connection open this long after a command, for the next (1h); 0: never",
	  .example = "1h", .check = cfgk_check_linger },
	{ .section = "remote", .name = "scheduler", .type = GR_KEY_ENUM, .def = "none",
	  .values = scheduler_values,
	  .help = "none: jobs run on the host itself; slurm: the host is a login node, jobs go to sbatch" },

	{ .section = "sync", .name = "exclude", .type = GR_KEY_LIST, .def = "runs/",
	  .help = "patterns not to send (gitignore syntax), on top of .gitignore and .gpurunignore" },
	{ .section = "sync", .name = "warn_size", .type = GR_KEY_SIZE, .def = "1G",
	  .help = "ask before one sync sends more than this" },
	{ .section = "sync", .name = "delta_min", .type = GR_KEY_SIZE, .def = "1M",
	  .help = "changed files at least this big travel as deltas" },
	{ .section = "sync", .name = "include_git", .type = GR_KEY_BOOL, .def = "false",
	  .help = "send the .git folder too" },
	{ .section = "sync", .name = "preserve_perms", .type = GR_KEY_BOOL, .def = "false",
	  .help = "keep group and other permissions on the host; false: files keep only the owner's" },
	{ .section = "sync", .name = "include", .type = GR_KEY_LIST, .def = "",
	  .help = "paths to send although git ignores them (gitignore syntax), with all below them",
	  .example = "data/" },

	{ .section = "setup", .name = "command", .type = GR_KEY_STRING, .def = "",
	  .help = "prepares the host, in the project folder; runs again when it or its inputs change",
	  .example = "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt",
	  .check = cfgk_check_text },
	{ .section = "setup", .name = "inputs", .type = GR_KEY_LIST, .def = "",
	  .help = "files (paths or globs in the project) whose content makes setup run again",
	  .example = "requirements.txt", .check = cfgk_check_inputs },

	{ .section = "build", .name = "command", .type = GR_KEY_STRING, .def = "",
	  .help = "run before each job, in the job's own folder; a failure stops there; empty: none",
	  .example = "make", .check = cfgk_check_text },

	{ .section = "train", .name = "command", .type = GR_KEY_STRING, .def = "",
	  .help = "the job, run in its own folder (a snapshot of the project, $GPURUN_JOB_DIR)",
	  .example = "python3 train.py", .check = cfgk_check_text },
	{ .section = "train", .name = "shell", .type = GR_KEY_ENUM, .def = "sh",
	  .values = shell_values,
	  .help = "how setup, build and job run: sh (/bin/sh -c) or login (your shell -l -i: rc files apply)" },
	{ .section = "train", .name = "output", .type = GR_KEY_ENUM, .def = "pty",
	  .values = output_values,
	  .help = "the job's stdout/stderr: pty (a terminal, as on a console) or pipe (for MB/s of output)" },
	{ .section = "train", .name = "persist", .type = GR_KEY_LIST, .def = "",
	  .help = "paths kept in the project folder and shared by every job ('dir/': a folder); never synced",
	  .example = "checkpoints/ .venv/", .check = cfgk_check_persist },
	{ .section = "train", .name = "env", .type = GR_KEY_STRING, .def = "",
	  .help = "the job's environment: K=V words, quoted as in a shell (K=\"a b\"); --env adds",
	  .example = "WANDB_MODE=offline OMP_NUM_THREADS=8", .check = cfgk_check_env },
	{ .section = "train", .name = "gpus", .type = GR_KEY_STRING, .def = "all",
	  .help = "GPUs for the job: all, a count (2), or device indices (0,2)",
	  .check = cfgk_check_gpus },
	{ .section = "train", .name = "stop_grace", .type = GR_KEY_INT, .def = "10",
	  .min = 0, .max = 3600,
	  .help = "seconds between SIGTERM and SIGKILL when a job is stopped" },
	{ .section = "train", .name = "time_limit", .type = GR_KEY_STRING, .def = "",
	  .help = "longest one run of the command (90s, 30m, 4h, H:MM:SS); then it ends timeout",
	  .example = "4h", .check = cfgk_check_duration },
	{ .section = "train", .name = "retries", .type = GR_KEY_INT, .def = "0", .min = 0, .max = 100,
	  .help = "run a failed command again, up to this many times (persist paths let it resume)" },

	{ .section = "artifacts", .name = "pull", .type = GR_KEY_LIST, .def = "",
	  .help = "files to fetch back: globs relative to the job's folder, where its command runs",
	  .example = "checkpoints/ *.jsonl", .check = cfgk_check_pull },
	{ .section = "artifacts", .name = "interval", .type = GR_KEY_INT, .def = "60",
	  .min = 0, .max = 86400,
	  .help = "seconds between pulls while a job runs; 0: only when it ends" },
	{ .section = "artifacts", .name = "min_free", .type = GR_KEY_INT, .def = "5",
	  .min = 0, .max = 90,
	  .help = "percent of the local disk a pull must leave free; else it is refused" },

	{ .section = "jobs", .name = "keep", .type = GR_KEY_INT, .def = "20",
	  .min = 0, .max = 1000000,
	  .help = "ended jobs kept on the host; older ones are removed after each train (0: keep all)" },

	{ .section = "slurm", .name = "partition", .type = GR_KEY_STRING, .def = "",
	  .help = "sbatch --partition; empty: the cluster's default partition",
	  .example = "gpu", .check = cfgk_check_word },
	{ .section = "slurm", .name = "account", .type = GR_KEY_STRING, .def = "",
	  .help = "sbatch --account to charge; empty: your default account",
	  .example = "myproject", .check = cfgk_check_word },
	{ .section = "slurm", .name = "qos", .type = GR_KEY_STRING, .def = "",
	  .help = "sbatch --qos; empty: the default", .example = "normal", .check = cfgk_check_word },
	{ .section = "slurm", .name = "time", .type = GR_KEY_STRING, .def = "",
	  .help = "time limit (sbatch --time: minutes, H:MM:SS or D-HH:MM); empty: the partition's",
	  .example = "4:00:00", .check = cfgk_check_slurm_time },
	{ .section = "slurm", .name = "nodes", .type = GR_KEY_INT, .def = "1", .min = 1, .max = 100000,
	  .help = "nodes for the job; the command starts once per task, with RANK, WORLD_SIZE, MASTER_ADDR" },
	{ .section = "slurm", .name = "ntasks_per_node", .type = GR_KEY_INT, .def = "1", .min = 1, .max = 4096,
	  .help = "tasks per node (1: one per node, e.g. torchrun; the GPU count: one per GPU)" },
	{ .section = "slurm", .name = "cpus_per_task", .type = GR_KEY_INT, .def = "0", .min = 0, .max = 100000,
	  .help = "sbatch --cpus-per-task; 0: the cluster's default" },
	{ .section = "slurm", .name = "mem", .type = GR_KEY_STRING, .def = "",
	  .help = "memory per node (sbatch --mem); empty: the cluster's default",
	  .example = "32G", .check = cfgk_check_word },
	{ .section = "slurm", .name = "constraint", .type = GR_KEY_STRING, .def = "",
	  .help = "sbatch --constraint (node features); empty: any node",
	  .example = "a100|h100", .check = cfgk_check_word },
	{ .section = "slurm", .name = "gpu_flag", .type = GR_KEY_ENUM, .def = "gres",
	  .values = gpu_flag_values,
	  .help = "how [train] gpus is asked for: gres (--gres=gpu:N) or gpus (--gpus-per-node=N)" },
	{ .section = "slurm", .name = "gpu_type", .type = GR_KEY_STRING, .def = "",
	  .help = "GPU type for the request (gpu:TYPE:N); empty: any",
	  .example = "a100", .check = cfgk_check_word },
	{ .section = "slurm", .name = "options", .type = GR_KEY_STRING, .def = "",
	  .help = "more sbatch options, passed as they are (quotes group words)",
	  .example = "--exclusive --mail-type=END", .check = cfgk_check_slurm_options },
	{ .section = "slurm", .name = "build_on", .type = GR_KEY_ENUM, .def = "login",
	  .values = build_on_values,
	  .help = "where [setup] and [build] run: login (the host, before sbatch) or compute (in the job)" },
	{ .section = "slurm", .name = "signal_before", .type = GR_KEY_INT, .def = "0", .min = 0, .max = 65535,
	  .help = "seconds before the time limit the job gets SIGUSR1 (to checkpoint); 0: none" },
	{ .section = "slurm", .name = "requeue", .type = GR_KEY_BOOL, .def = "false",
	  .help = "let Slurm requeue the job when it is preempted or its node fails (sbatch --requeue)" },
	{ .section = "slurm", .name = "resubmit", .type = GR_KEY_BOOL, .def = "false",
	  .help = "submit a job that reaches its time limit again (it resumes from [train] persist paths)" },
	{ .section = "slurm", .name = "max_resubmits", .type = GR_KEY_INT, .def = "10", .min = 1, .max = 1000,
	  .help = "with resubmit: at most this many submissions after the first" },

	{ .section = "container", .name = "image", .type = GR_KEY_STRING, .def = "",
	  .help = "setup, build and the job run in this image, with the host's podman or docker",
	  .example = "nvcr.io/nvidia/pytorch:24.05-py3", .check = cfgk_check_image },
	{ .section = "container", .name = "runtime", .type = GR_KEY_ENUM, .def = "auto",
	  .values = runtime_values,
	  .help = "podman, docker, or auto: podman if the host has it, else docker" },
	{ .section = "container", .name = "options", .type = GR_KEY_STRING, .def = "",
	  .help = "more options for the runtime's run, passed as they are (quotes group words)",
	  .example = "--shm-size=8g --env HF_HOME=/cache", .check = cfgk_check_options },
	{ .section = "container", .name = "mounts", .type = GR_KEY_LIST, .def = "",
	  .help = "more host paths to mount: SRC[:DST[:ro]], a relative SRC in the project folder",
	  .example = "/data/imagenet:/data:ro", .check = cfgk_check_mounts },
	{ .section = "container", .name = "user", .type = GR_KEY_STRING, .def = "",
	  .help = "who the job runs as inside (--user); empty: your uid:gid, so files stay yours",
	  .example = "root", .check = cfgk_check_user },

	{ .section = "notify", .name = "command", .type = GR_KEY_STRING, .def = "",
	  .help = "run on the host when a job ends, with GPURUN_JOB_ID, _STATE, _EXIT... set",
	  .example = "curl -s -d \"$GPURUN_JOB_NAME: $GPURUN_JOB_STATE\" https://ntfy.sh/my-runs",
	  .check = cfgk_check_text },
	{ .section = "notify", .name = "local", .type = GR_KEY_ENUM, .def = "auto",
	  .values = notify_local_values,
	  .help = "when the job train or logs -f shows ends: bell, desktop (notify-send) or none" },

	{ .section = "hooks", .name = "pre_push", .type = GR_KEY_STRING, .def = "",
	  .help = "smoke test the git pre-push hook runs on the host; empty: none",
	  .example = "python3 train.py --steps 20", .check = cfgk_check_text },
};

const struct gr_config_key *config_keys(size_t *n)
{
	*n = GR_ARRAY_SIZE(keys);
	return keys;
}

int cfgk_find(const char *section, const char *name)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(keys); i++)
		if (!strcmp(keys[i].section, section) && !strcmp(keys[i].name, name))
			return (int)i;
	return -1;
}

int cfgk_find_dotted(const char *key)
{
	const char *dot = strchr(key, '.');
	char *section;
	int i;

	if (!dot)
		return -1;
	section = xstrndup(key, (size_t)(dot - key));
	i = cfgk_find(section, dot + 1);
	free(section);
	return i;
}

int cfgk_section_known(const char *section)
{
	for (size_t i = 0; i < GR_ARRAY_SIZE(keys); i++)
		if (!strcmp(keys[i].section, section))
			return 1;
	return 0;
}

/* Optimal string alignment distance (edits, with swaps of neighbours),
 * case-insensitive: how far a typo is from a real name. */
static size_t distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), *d, r;

	if (la > 64 || lb > 64)
		return 99;
	d = xcalloc((la + 1) * (lb + 1), sizeof(*d));
#define D(i, j) d[(i) * (lb + 1) + (j)]
	for (size_t i = 0; i <= la; i++)
		D(i, 0) = i;
	for (size_t j = 0; j <= lb; j++)
		D(0, j) = j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
			size_t v = D(i - 1, j) + 1;
			if (D(i, j - 1) + 1 < v)
				v = D(i, j - 1) + 1;
			if (D(i - 1, j - 1) + cost < v)
				v = D(i - 1, j - 1) + cost;
			if (i > 1 && j > 1 && tolower((unsigned char)a[i - 1]) == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == tolower((unsigned char)b[j - 1]) &&
			    D(i - 2, j - 2) + 1 < v)
				v = D(i - 2, j - 2) + 1;
			D(i, j) = v;
		}
	r = D(la, lb);
#undef D
	free(d);
	return r;
}

/* Close enough to be a typo: at most 2 edits, and fewer than half the name. */
static int is_typo(const char *typed, const char *real)
{
	size_t dist = distance(typed, real), n = strlen(real);

	return dist <= 2 && dist * 2 < n + (n < 4);
}

static const struct gr_env_var env_vars[] = {
	{ "GPURUN_SKIP_HOOK", "1", "skip gpurun's pre-push hook for one push\n"
	  "(git push --no-verify skips every hook)", 0 },
	{ "GPURUN_TRACE", "1", "time each step on stderr (\"trace: <ms> <step>\")", 0 },
	{ "GPURUN_IO_TIMEOUT", "S", "a sync gives up after S seconds in which the\n"
	  "connection moved no byte (default 120)", 0 },
	{ "GPURUN_SSH", "PROG", "the ssh that transport = openssh runs (default: ssh)", 0 },
	{ "GPURUN_SSH_CTR_BATCH", "0", "libssh2's AES-CTR one block per call, as libssh2 1.10\n"
	  "does it (default: the keystream 32 KiB at a time)", 0 },
	{ "GPURUN_JOB_ID", NULL, "set for a job on the host: its id", 1 },
	{ "GPURUN_JOB_DIR", NULL, "set for a job on the host: its folder", 1 },
	{ "GPURUN_LOCK_DIR", NULL, "where every account's GPU locks are (default /tmp;\n"
	  "must be root's, and sticky if others may write it)", 1 },
	{ "GPURUN_NVIDIA_SMI", "PROG", "the nvidia-smi the agent runs (for tests)", 1 },
	{ "GPURUN_NOTIFY_TIMEOUT", "S", "seconds [notify] command may run before it is\n"
	  "killed (default 60; for tests)", 1 },
};

const struct gr_env_var *config_env_vars(size_t *n)
{
	*n = GR_ARRAY_SIZE(env_vars);
	return env_vars;
}

void cfgk_env_warnings(char *const *envp, struct strvec *out)
{
	struct strbuf name = STRBUF_INIT;

	for (; envp && *envp; envp++) {
		const char *v = *envp, *eq = strchr(v, '=');
		char *var, *best = NULL;
		size_t best_d = 99, known = 0, sec = 0;

		if (strncmp(v, "GPURUN_", 7) || !eq)
			continue;
		var = xstrndup(v, (size_t)(eq - v));
		for (size_t i = 0; i < GR_ARRAY_SIZE(keys) && !known; i++) {
			sb_reset(&name);
			cfgk_env_name(&keys[i], &name);
			if (!strcmp(var, name.buf)) {
				known = 1;
				break;
			}
			/* GPURUN_TRAIN_...: meant as a key of [train]. */
			size_t sl = strlen(keys[i].section);
			if (!strncasecmp(var + 7, keys[i].section, sl) && var[7 + sl] == '_')
				sec = 1;
			size_t d = distance(var, name.buf);
			if (d < best_d) {
				best_d = d;
				free(best);
				best = xstrdup(name.buf);
			}
		}
		for (size_t i = 0; i < GR_ARRAY_SIZE(env_vars) && !known; i++) {
			if (!strcmp(var, env_vars[i].name)) {
				known = 1;
				break;
			}
			size_t d = distance(var, env_vars[i].name);
			if (d < best_d) {
				best_d = d;
				free(best);
				best = xstrdup(env_vars[i].name);
			}
		}
		/* Not ours and like nothing of ours (GPURUN_BUILD, a test's
		 * GPURUN_TEST_BIG): none of our business. */
		if (!known && (sec || (best && is_typo(var + 7, best + 7)))) {
			if (best && is_typo(var + 7, best + 7))
				sv_pushf(out, "%s is not a variable gpurun reads; did you mean %s?", var, best);
			else
				sv_pushf(out, "%s is not a variable gpurun reads (see 'gpurun help environment')",
					 var);
		}
		free(best);
		free(var);
	}
	sb_release(&name);
}

void cfgk_hint_key(const char *section, const char *name, struct strbuf *hint)
{
	const char *best = NULL, *elsewhere = NULL;
	size_t best_d = 99;

	for (size_t i = 0; i < GR_ARRAY_SIZE(keys); i++) {
		if (strcmp(keys[i].section, section)) {
			if (!strcmp(keys[i].name, name) && !elsewhere)
				elsewhere = keys[i].section;
			continue;
		}
		size_t dd = distance(name, keys[i].name);
		if (is_typo(name, keys[i].name) && dd < best_d) {
			best = keys[i].name;
			best_d = dd;
		}
	}
	if (best) {
		sb_addf(hint, "did you mean '%s'?", best);
		return;
	}
	if (elsewhere) {
		sb_addf(hint, "'%s' belongs in [%s]", name, elsewhere);
		return;
	}
	if (cfgk_section_known(section)) {
		sb_addf(hint, "keys in [%s]:", section);
		for (size_t i = 0; i < GR_ARRAY_SIZE(keys); i++)
			if (!strcmp(keys[i].section, section))
				sb_addf(hint, " %s", keys[i].name);
	}
}

void cfgk_hint_section(const char *section, struct strbuf *hint)
{
	const char *prev = "";

	for (size_t i = 0; i < GR_ARRAY_SIZE(keys); i++)
		if (is_typo(section, keys[i].section)) {
			sb_addf(hint, "did you mean [%s]?", keys[i].section);
			return;
		}
	if (is_typo(section, "pools")) {
		sb_adds(hint, "did you mean [pools]?");
		return;
	}
	sb_adds(hint, "sections:");
	for (size_t i = 0; i < GR_ARRAY_SIZE(keys); i++)
		if (strcmp(prev, keys[i].section)) {
			sb_addf(hint, " [%s]", keys[i].section);
			prev = keys[i].section;
		}
	sb_adds(hint, " [pools]");
}

void cfgk_hint_dotted(const char *key, struct strbuf *hint)
{
	const char *best = NULL, *best_s = NULL;
	size_t best_d = 99;

	for (size_t i = 0; i < GR_ARRAY_SIZE(keys); i++) {
		char *full = xasprintf("%s.%s", keys[i].section, keys[i].name);
		size_t dd = distance(key, full);
		if (dd <= 2 && dd < best_d) {
			best_s = keys[i].section;
			best = keys[i].name;
			best_d = dd;
		}
		free(full);
	}
	if (best)
		sb_addf(hint, "did you mean '%s.%s'?", best_s, best);
	else
		sb_adds(hint, "keys are written section.key, e.g. remote.host; 'gpurun config' lists them");
}

void cfgk_env_name(const struct gr_config_key *k, struct strbuf *out)
{
	sb_adds(out, "GPURUN_");
	for (const char *p = k->section; *p; p++)
		sb_addf(out, "%c", toupper((unsigned char)*p));
	sb_adds(out, "_");
	for (const char *p = k->name; *p; p++)
		sb_addf(out, "%c", toupper((unsigned char)*p));
}

char *cfgk_default(const struct gr_config_key *k, const char *project)
{
	const char *at = strstr(k->def, "<project>");

	if (!at)
		return xstrdup(k->def);
	return xasprintf("%.*s%s%s", (int)(at - k->def), k->def, project, at + strlen("<project>"));
}
