/* The command table: the one place that lists gpurun's commands. */
#include <string.h>

#include "gpurun.h"

static const char *const color_values[] = { "auto", "always", "never", NULL };

const struct gr_opt gr_global_opts[] = {
	{ G_CONFIG, "config-file", 'c', OPT_STRING, "FILE", "use FILE instead of searching for gpurun.ini", NULL, 0, 0, COMPLETE_FILE },
	{ G_CHDIR, NULL, 'C', OPT_STRING, "DIR", "run as if started in DIR", NULL, 0, 0, COMPLETE_DIR },
	{ G_SET, NULL, 'o', OPT_STRING, "KEY=VALUE", "set a config key for this run (e.g. -o train.gpus=1)", NULL, 0, 0, COMPLETE_KEY },
	{ G_HOST, "host", 0, OPT_STRING, "HOST", "the GPU host (same as -o remote.host=HOST)", NULL, 0, 0, COMPLETE_HOST },
	{ G_ACCEPT_NEW, "accept-new-host-key", 0, OPT_FLAG, NULL, "trust and record the key of a host seen for the first time", NULL, 0, 0, 0 },
	{ G_VERBOSE, "verbose", 'v', OPT_FLAG, NULL, "say more (repeat for more)", NULL, 0, 0, 0 },
	{ G_QUIET, "quiet", 'q', OPT_FLAG, NULL, "say nothing but errors", NULL, 0, 0, 0 },
	{ G_COLOR, "color", 0, OPT_ENUM, "WHEN", "colour on stderr; auto: only on a terminal, not under NO_COLOR", color_values, 0, 0, 0 },
	{ G_VERSION, "version", 'V', OPT_FLAG, NULL, "print gpurun's version", NULL, 0, 0, 0 },
	{ 0 },
};

const struct gr_cmd gr_commands[] = {
	{ "init", cmd_init, 0, cmd_init_opts, "",
	  "write a commented gpurun.ini that fits the project here",
	  "Writes gpurun.ini with every key, one line on what it does, and a value\n"
	  "that fits the project in this folder: a Python project (train.py,\n"
	  "pyproject.toml, requirements.txt) gets its environment made once by\n"
	  "[setup] in a shared .venv/, 'python train.py', no build, and\n"
	  "checkpoints/ kept across jobs and pulled; a kernels/ trainer gets its\n"
	  "make and run; anything else the defaults. Refuses to overwrite an\n"
	  "existing file.", COMPLETE_NONE },
	{ "config", cmd_config, CMD_CONFIG_OPT, cmd_config_opts, "[KEY]",
	  "show the effective configuration and where each value came from",
	  "Without KEY, prints every key with its value and origin (default,\n"
	  "file:line, environment, flag). With KEY (section.key), prints its value.", COMPLETE_KEY },
	{ "exec", cmd_exec, CMD_CONFIG | CMD_PASSTHROUGH, cmd_exec_opts, "[--] CMD [ARGS...]",
	  "run a command on the host in the project folder",
	  "Runs CMD on the host inside [remote] path, streams its stdout and\n"
	  "stderr separately as they are written, and exits with its status.\n"
	  "The arguments are passed as they are, never through a shell.\n"
	  "\n"
	  "It runs the host's copy of the project as the last sync left it: an\n"
	  "edit made here since is not there until 'gpurun sync' (or --sync,\n"
	  "which syncs first). A job runs its own snapshot instead: 'gpurun\n"
	  "train -- CMD' for a run that must see exactly this tree.\n"
	  "\n"
	  "With -t it runs under a terminal on the host (python3, htop, pdb,\n"
	  "nvidia-smi -l): this terminal is raw meanwhile, so every key (Ctrl-C\n"
	  "too) goes to the program, and window size changes follow. -L forwards\n"
	  "a local port to the host for as long as the command runs.", COMPLETE_NONE },
	{ "shell", cmd_shell, CMD_CONFIG, cmd_shell_opts, "",
	  "open your login shell on the host, in the project folder",
	  "Runs your login shell on the host in [remote] path, under a terminal\n"
	  "when this is one (without, it reads commands from stdin). Exits with\n"
	  "the shell's status.", COMPLETE_NONE },
	{ "forward", cmd_forward, CMD_CONFIG, cmd_forward_opts, "PORT[:HOSTPORT]...",
	  "forward local ports to the host (TensorBoard, Jupyter) until Ctrl-C",
	  "Each PORT on this machine (localhost) reaches HOSTPORT (default: the\n"
	  "same) on the host's localhost, over the connection gpurun uses (a\n"
	  "direct-tcpip channel per connection; ssh's -L with transport =\n"
	  "openssh; a plain relay with transport = local). PORT:HOST:HOSTPORT\n"
	  "reaches another machine as the host sees it. Runs until Ctrl-C, making\n"
	  "the connection again if it drops. For the length of one command, use\n"
	  "-L on exec, shell or train instead.", COMPLETE_NONE },
	{ "doctor", cmd_doctor, CMD_CONFIG_OPT, cmd_doctor_opts, "",
	  "check config, connection, agent and remote tools, one line each",
	  "Checks in order: config, name resolution, TCP, host key,\n"
	  "authentication, agent, remote tools (cc, make, nvcc, nvidia-smi, free\n"
	  "disk), which python and nvcc a job would find through [train] shell,\n"
	  "and prints a hint for each failure.", COMPLETE_NONE },
	{ "disconnect", cmd_disconnect, CMD_CONFIG, cmd_disconnect_opts, "",
	  "close the connection kept open to the host ([remote] persist)",
	  "The first command to a host keeps its connection open for the next\n"
	  "ones ([remote] persist, default 10m). This ends it: the next command\n"
	  "connects afresh (after a change to ~/.ssh/config or known_hosts, say);\n"
	  "commands running on it finish first. Each host of a list or pool.", COMPLETE_NONE },
	{ "sync", cmd_sync, CMD_CONFIG, cmd_sync_opts, "",
	  "delta-sync the project to the host, honouring git's ignore rules",
	  "Makes [remote] path hold exactly the project's files that git would not\n"
	  "ignore (nor .gpurunignore and [sync] exclude): new and changed files,\n"
	  "deletions, modes, symlinks (as links), empty folders and mtimes. Small and\n"
	  "new files travel in one tar.zst stream, large changed ones as deltas.\n"
	  "Each file is written beside its name and renamed, so an interrupted sync\n"
	  "leaves every file old or new and the next one finishes the job. A file\n"
	  "changed on the host since the last sync is reported, then overwritten;\n"
	  "files gpurun never sent (job outputs) are left alone.", COMPLETE_NONE },
	{ "train", cmd_train, CMD_CONFIG | CMD_PASSTHROUGH, cmd_train_opts, "[--] [CMD [ARGS...]]",
	  "sync, then set up, build and run the training job detached; stream its log; pull artifacts",
	  "Syncs, then starts a job on the host that outlives the connection and\n"
	  "streams its log (reconnecting after a drop). The job runs, each step\n"
	  "stopping it on failure with that step's status:\n"
	  "  [setup] command  in the project folder, only when it or its [setup]\n"
	  "                   inputs changed since it last succeeded (--setup: anyway)\n"
	  "  [build] command  in the job's own folder\n"
	  "  [train] command  in the job's own folder\n"
	  "\n"
	  "CMD [ARGS...] after the options replaces [train] command for this run:\n"
	  "the words are passed as they are (as exec does), never through a shell\n"
	  "(with [train] shell = login, the login shell sets up the environment,\n"
	  "then runs them as \"$@\"). --env NAME=VALUE adds to [train] env;\n"
	  "--env NAME passes NAME's value from here (as docker run -e NAME), and\n"
	  "--env-file FILE the NAME=VALUE lines of a dotenv FILE read here (# and\n"
	  "blank lines, export, quotes; never synced). Keep secrets (tokens, keys)\n"
	  "off the command line that way: no value of the job's environment is\n"
	  "shown (status, --json, -v) or kept on the host where another account\n"
	  "could read it; only the job's processes see them.\n"
	  "--name NAME names the job: the name works wherever a job id does (logs,\n"
	  "status, stop, pull, rm), means its newest job, and is refused while\n"
	  "another job of that name has not ended. Each job records the local git\n"
	  "commit and branch it was started from, and whether (and how: a hash of\n"
	  "the diff) the work tree differed; 'gpurun status JOB' shows them.\n"
	  "\n"
	  "A sweep starts one job per combination after one sync, and follows\n"
	  "none: --sweep NAME=V1,V2,... (repeated: every combination) or\n"
	  "--sweep-file FILE (one job per line, NAME=VALUE words quoted as in\n"
	  "[train] env; blank and '#' lines skipped; with --sweep, each line times\n"
	  "each combination), at most 1000 jobs. Each job gets its variables in its\n"
	  "environment (after --env), and {NAME} in CMD's words replaced by the\n"
	  "value (another {X} stays as it is; [train] command gets only the\n"
	  "environment). The jobs form a group, --name or sweep-YYYYMMDD-HHMMSS,\n"
	  "and are named GROUP-1 to GROUP-N; one line per job (name, id,\n"
	  "variables) is printed. GROUP works for status, logs, pull, stop and rm.\n"
	  "--after JOB waits for JOB (an id, prefix or name, resolved here) to\n"
	  "end, JOB:ok for it to succeed (if it fails, this one ends cancelled).\n"
	  "\n"
	  "Where a job runs: its own folder on the host, $GPURUN_JOB_DIR\n"
	  "(~/.cache/gpurun/jobs/<project>/<job>/, or below [remote] jobs_dir).\n"
	  "It holds a snapshot of the project as synced (a sync while the job\n"
	  "runs changes nothing it sees),\n"
	  "the [train] persist paths, which are links to the project folder's own\n"
	  "(checkpoints/, .venv/: shared by every job, so a run can resume from\n"
	  "the last one's checkpoint), and whatever the job writes. [artifacts]\n"
	  "pull names files there as the job sees them (checkpoints/, *.jsonl);\n"
	  "they come back into runs/JOB/ every [artifacts] interval and at the end\n"
	  "(from persistent paths, what the job changed). When none matches,\n"
	  "train says so and lists what the job wrote.\n"
	  "\n"
	  "Another job of the project running or building meanwhile is named;\n"
	  "each builds in its own folder. When it ends (or is left running),\n"
	  "ended jobs beyond [jobs] keep are removed from the host. Exits with\n"
	  "the job's status. Its end rings the terminal's bell or shows a desktop\n"
	  "notification ([notify] local); [notify] command runs on the host when\n"
	  "a job ends, attached or not.\n"
	  "Ctrl-C asks whether to stop the job or detach: one key, s or d, while\n"
	  "the log goes on (without a terminal it detaches); a second Ctrl-C\n"
	  "leaves at once. Reattach with 'gpurun logs -f JOB'.", COMPLETE_NONE },
	{ "logs", cmd_logs, CMD_CONFIG, cmd_logs_opts, "[JOB|GROUP]",
	  "show a job's log (default: the latest job)",
	  "JOB is an id, a name (--name) or a unique prefix of an id. With -f,\n"
	  "follows the log until the job ends and exits with its status; a\n"
	  "dropped connection is retried with backoff and the log continues at\n"
	  "the exact byte; the end of a job that was running is told as\n"
	  "[notify] local says (a bell, or a desktop notification). A sweep's\n"
	  "GROUP prints each job's log after a '==> ID (NAME) <==' line; -f\n"
	  "follows one job, not a group.", COMPLETE_JOB },
	{ "rerun", cmd_rerun, CMD_CONFIG, cmd_rerun_opts, "[JOB]",
	  "run a job again, exactly: its code, command, environment and limits",
	  "Starts a new job from JOB's snapshot on the host (not the local tree,\n"
	  "which is not synced), with its command and words, environment (sweep\n"
	  "variables included), setup and build, GPUs, time limit, retries,\n"
	  "container image and backend (Slurm too); only the id is new, and its\n"
	  "record's rerun_of names JOB. JOB is an id, a name or a prefix (default:\n"
	  "the latest); the new job keeps its name unless --name gives one. It\n"
	  "does not wait for JOB's --after job again. Follows the log as train\n"
	  "does (--detach: print the id). A job removed from the host, or started\n"
	  "before gpurun kept a record of snapshots, cannot be rerun.", COMPLETE_JOB },
	{ "diff", cmd_diff, CMD_CONFIG, cmd_diff_opts, "JOB_A [JOB_B]",
	  "show how two jobs' code and config differ",
	  "A unified diff, as git diff shows one, from JOB_A's snapshot to JOB_B's\n"
	  "(the code each ran, as the host keeps it): files added, removed, their\n"
	  "mode or text changed; binary files as 'Binary files ... differ'. First\n"
	  "the config each ran with: spec lines, command, the NAMES of its\n"
	  "environment (never the values). Without JOB_B, JOB_A against the\n"
	  "latest job. Texts over 1 MiB are named, not shown. --stat: a summary.", COMPLETE_JOB },
	{ "status", cmd_status, CMD_CONFIG, cmd_status_opts, "[JOB|GROUP]",
	  "list jobs and the host's GPUs",
	  "Shows the 20 newest jobs (--all: every one): state (starting, setup,\n"
	  "building, queued, running, done, failed, stopped, lost), name, start,\n"
	  "duration, exit status, the disk each uses on the host alone, GPUs, the\n"
	  "commit it ran from ('+': with changes) and its command, shortened; the\n"
	  "disk the project's jobs use in all; and where the host has nvidia-smi,\n"
	  "each GPU's use, memory and processes. With JOB (an id, a name or a\n"
	  "prefix), everything its record holds; with a sweep's GROUP, its jobs\n"
	  "(a GROUP column shows where listed jobs belong). --json has every\n"
	  "field.", COMPLETE_JOB },
	{ "stop", cmd_stop, CMD_CONFIG, cmd_stop_opts, "[JOB|GROUP]",
	  "stop a job and everything it started, freeing its GPUs",
	  "SIGTERM to every process of the job (children that left its session\n"
	  "too), SIGKILL after [train] stop_grace seconds, then a check that none\n"
	  "is left or holds a GPU. Exits 1 when something survived. A sweep's\n"
	  "GROUP: each of its jobs that has not ended, newest first.", COMPLETE_JOB },
	{ "pull", cmd_pull, CMD_CONFIG, cmd_pull_opts, "[JOB|GROUP]",
	  "fetch a job's artifacts into runs/JOB/",
	  "Fetches the files of the job's folder (where its command ran) that\n"
	  "match [artifacts] pull; only new or changed ones travel. Each file is\n"
	  "renamed into place once complete; links, '..' and absolute names are\n"
	  "refused. When nothing matches, says so and lists what the job wrote.\n"
	  "A sweep's GROUP: each job into its own runs/JOB/.", COMPLETE_JOB },
	{ "rm", cmd_rm, CMD_CONFIG, cmd_rm_opts, "JOB...",
	  "remove jobs from the host",
	  "Removes each job's folder on the host (its snapshot, outputs and log);\n"
	  "JOB is an id, a name or a unique prefix of an id, or a sweep's group\n"
	  "(each of its jobs; a job's exact name wins). A job that has not\n"
	  "ended is refused: stop it first. runs/JOB/ here is left alone. Exits 1\n"
	  "when a job could not be removed.", COMPLETE_JOB },
	{ "prune", cmd_prune, CMD_CONFIG, cmd_prune_opts, "",
	  "remove old jobs from the host",
	  "Removes the project's ended jobs but the N newest (--keep N) and/or\n"
	  "those created more than AGE ago (--older-than AGE); with both, a job\n"
	  "goes when both say so. Without either, [jobs] keep is N. A running or\n"
	  "queued job is never removed. 'gpurun status --all' shows what each job\n"
	  "uses on disk.", COMPLETE_NONE },
	{ "hook", cmd_hook, 0, cmd_hook_opts, "install|uninstall",
	  "install or remove the git pre-push hook",
	  "install writes the repository's pre-push hook (core.hooksPath is\n"
	  "honoured). Before each push it runs 'gpurun sync', then [hooks] pre_push\n"
	  "on the host if set (a smoke test, e.g. a few training steps), and blocks\n"
	  "the push when either fails, showing the remote output. A pre-push hook\n"
	  "already there is kept as pre-push.gpurun-orig and runs first, with the\n"
	  "same arguments and input; uninstall puts it back as it was.\n"
	  "\n"
	  "Skip it for one push with GPURUN_SKIP_HOOK=1 git push (the hook that was\n"
	  "there before still runs), or git push --no-verify (skips every hook).", COMPLETE_CHOICE },
	{ "completion", cmd_completion, 0, cmd_completion_opts, "bash|zsh|fish",
	  "print the shell completion script",
	  "The script asks gpurun itself for candidates, so it always offers this\n"
	  "gpurun's commands, flags, flag values, config keys, and the job ids of\n"
	  "recent jobs (from .gpurun/jobs, never over the network). Install:\n"
	  "  bash: echo 'source <(gpurun completion bash)' >> ~/.bashrc\n"
	  "  zsh:  echo 'source <(gpurun completion zsh)' >> ~/.zshrc  (after compinit)\n"
	  "  fish: gpurun completion fish > ~/.config/fish/completions/gpurun.fish", COMPLETE_CHOICE },
	{ "version", cmd_version, 0, cmd_version_opts, "",
	  "print gpurun's version (as --version and -V do)",
	  NULL, COMPLETE_NONE },
	{ "help", cmd_help, 0, cmd_help_opts, "[COMMAND|TOPIC]",
	  "show help for gpurun, a command, or a topic",
	  NULL, COMPLETE_CMD },
	{ NULL, NULL, 0, NULL, NULL, NULL, NULL, 0 },
};

const struct gr_cmd *gr_find_command(const char *name)
{
	for (const struct gr_cmd *c = gr_commands; c->name; c++)
		if (!strcmp(c->name, name))
			return c;
	return NULL;
}
