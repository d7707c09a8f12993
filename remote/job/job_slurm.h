/* Slurm's tools for the slurm backend (job_backend_slurm.c): running
 * sbatch, scontrol, sacct and scancel with argv (never a shell string),
 * reading what they answer, the sbatch command line a job's spec makes,
 * and the batch script written into the job's folder. Nothing here needs
 * the agent's loop, so the unit tests compile it in.
 *
 * On the host, beside the job's other meta files (job_store.h):
 *   .gpurun/slurm          one "id=N" line per submission (the last is
 *                          the job's current Slurm job)
 *   .gpurun/slurm-batch.sh the batch script sbatch was given
 *   .gpurun/slurm-N.out    Slurm's output file for job N: only what the
 *                          agent itself prints there; the job's output
 *                          goes to .gpurun/log as on any host
 *   .gpurun/slurm-state    the last answer about the current job (cache)
 */
#ifndef GR_JOB_SLURM_H
#define GR_JOB_SLURM_H

#include <stdint.h>

#include "job_store.h"
#include "slurm_gres.h"

/* A tool that does not answer within this long has failed: 30 s, or
 * GPURUN_SLURM_TIMEOUT seconds (1-600) from the agent's environment. */
#define SLURM_TOOL_MS slurm_tool_ms()
int slurm_tool_ms(void);

struct slurm_info;

/* One squeue for all of a user's jobs (job_backend_slurm.c's refresh):
 * id, state, reason, nodes, partition, start, end. */
#define SLURM_SQUEUE_FORMAT "%i|%T|%r|%N|%P|%S|%e"
/* Job id's line in `squeue -h -o SLURM_SQUEUE_FORMAT` into si (source
 * "squeue"; no exit code or restarts there); 0 if its line was there. */
int slurm_parse_squeue(const char *text, const char *id, struct slurm_info *si);

/* What Slurm says about one job. Strings are printable ASCII (anything
 * else the tools print becomes '?'), cut to their size. */
struct slurm_info {
	int known;              /* a tool knew the job */
	char source[12];        /* "scontrol" or "sacct" */
	char state[24];         /* PENDING, RUNNING, COMPLETING, TIMEOUT, ... */
	char reason[160];       /* why it waits ("Resources"), or "None" */
	int exit_code;          /* ExitCode=N:S */
	int exit_signal;
	uint32_t restarts;      /* times Slurm requeued it */
	char nodes[256];        /* NodeList */
	char partition[64];
	uint64_t start_s, end_s; /* Unix seconds; 0: not known */
};

/* Run argv (run_capture, run.h: argv[0] found on PATH), stdin /dev/null,
 * Slurm's time and list formats fixed, with at most timeout_ms; stdout to
 * out and stderr to errout (either may be NULL; each kept to 1 MiB). Returns the exit status, 128+N for a signal, 127
 * when the program is not found, -1 when it could not run or timed out
 * (errno-style text in errout). */
int slurm_tool(const char *const *argv, int timeout_ms, struct strbuf *out,
	       struct strbuf *errout);

/* 1 if s is a Slurm job id as sbatch --parsable prints it (digits). */
int slurm_id_ok(const char *s);

/* PROBE's Slurm part ([remote] scheduler = slurm): the tools the backend
 * runs, and the partitions as sinfo lists them ("NAME|AVAIL|GRES|NODES|
 * STATE" lines, the default's name ending in '*'). Four pairs into pl. */
void job_slurm_probe(struct strbuf *pl);

/* Parse `scontrol -o show job N` (one line of Key=Value words). */
void slurm_parse_scontrol(const char *text, struct slurm_info *si);
/* Parse `sacct -n -P -X -o JobID,State,ExitCode,Reason,NodeList,
 * Partition,Start,End` for job id; 0 if its line was there. */
int slurm_parse_sacct(const char *text, const char *id, struct slurm_info *si);

/* Ask scontrol, then (when it no longer knows the job) sacct. 0 with si
 * filled (si->known 0: neither knows it); GR_EREMOTE when Slurm cannot be
 * asked (err says what the tool said). */
int slurm_query(const char *id, struct slurm_info *si, struct gr_err *err);

/* 1 for a state a job does not leave (COMPLETED, FAILED, CANCELLED,
 * TIMEOUT, NODE_FAIL, ...). With requeue, NODE_FAIL, BOOT_FAIL and
 * PREEMPTED are not: Slurm may start the job again. */
int slurm_state_final(const char *state, int requeue);

/* The tasks a job's spec asks for: nodes x ntasks_per_node (>= 1). */
uint32_t slurm_ntasks(const struct job_spec *spec);

/* The sbatch command line for the job in dir: options from the spec's
 * slurm_* keys and [train] gpus, the spec's slurm_option words as they
 * are, then script. after: a Slurm job this one waits for (a
 * resubmission), or NULL. GR_EINVAL when the spec cannot go to Slurm
 * (GPU indices: Slurm chooses the GPUs). */
int slurm_sbatch_argv(const struct job_spec *spec, const char *dir, const char *job_id,
		      const char *script, const char *after, struct strvec *argv,
		      struct gr_err *err);

/* The same, with all_gpus: what [train] gpus = all means on the job's
 * partition (slurm_all_gpus: --gres=gpu:N; 0: no request); -1: not
 * known (no request). */
int slurm_sbatch_argv_all(const struct job_spec *spec, const char *dir, const char *job_id,
			  const char *script, const char *after, long long all_gpus,
			  struct strvec *argv, struct gr_err *err);

/* The nodes of partition (empty: the cluster's default, the name sinfo
 * marks with '*') in sinfo's lines "NAME|COUNT" (its %P|%D; a partition
 * may take several lines), summed into *n, its name (printable, cut to
 * name_len - 1 bytes) into name. 1 when the partition is there,
 * 0 when not. */
int slurm_parse_partition_nodes(const char *text, const char *partition, long long *n,
				char *name, size_t name_len);

/* [train] gpus = all: the GPUs of one node of the job's partition ([slurm]
 * partition, else the cluster's default), of [slurm] gpu_type when set,
 * from sinfo (slurm_parse_all_gpus, slurm_gres.h). *n: 0 when it has
 * none. GR_EREMOTE when sinfo fails. */
int slurm_all_gpus(const struct job_spec *spec, long long *n, struct gr_err *err);

/* The batch script: it runs agent (an absolute path on the shared file
 * system) as `slurm-run DIR` in the allocation, and says in the job's log
 * when that cannot run. Every path is quoted for sh. */
void slurm_batch_script(const char *agent, const char *dir, const char *job_id,
			struct strbuf *out);

/* Append s to out quoted for sh ('...'). */
void slurm_sh_quote(struct strbuf *out, const char *s);

/* Submit the job in dir (write the batch script, run sbatch, append the
 * id to .gpurun/slurm). *id is the caller's. sbatch's complaint is in
 * err (GR_EREMOTE), unless Slurm has the job all the same (sbatch's
 * answer was lost): then the job's log says so and *id is that job. */
int slurm_submit(const char *dir, const struct job_spec *spec, const char *after, char **id,
		 struct gr_err *err);

/* The Slurm job called gpurun-JOB_ID that is not one of dir's known ids
 * (a resubmission's predecessor has the same name), from squeue, then
 * sacct: 1 with its id in out (the newest of several), 0 when Slurm has
 * none, -1 when neither tool answers. */
int slurm_find_by_name(const char *dir, const char *job_id, char *out, size_t n);
/* Its parser: the largest job id in text (one a line) not in known. */
int slurm_parse_ids_by_name(const char *text, const struct strvec *known, char *out, size_t n);

/* The last line of text (Slurm's output file for a job) that says the
 * job was killed for memory ("... exceeded memory limit ...", "Detected
 * 1 oom-kill event(s) ..."), cleaned, into out: 1 if there was one. */
int slurm_oom_line(const char *text, size_t len, char *out, size_t n);

/* gpurun's record from what Slurm says (job_backend_slurm.c), decided
 * from Slurm's state, never its raw ExitCode: status_valid when st (the
 * job's .gpurun/status) was written by this run of this Slurm job;
 * stopped when `gpurun stop` asked; phase: the job's phase file. Sets
 * state, reason, has_status/signalled/code, end_ms, phase, slurm_state,
 * partition and nodes. States: queued, setup, building, running, done,
 * failed, stopped, cancelled (outside gpurun), timeout, node_fail,
 * preempted, lost, unknown. */
void slurm_map(const struct slurm_info *si, int status_valid, const struct strvec *st,
	       int stopped, const char *phase, const char *slurm_id, struct job_rec *r);

/* The job's Slurm ids, oldest first (from .gpurun/slurm). */
void slurm_ids(const char *dir, struct strvec *ids);

/* Wall-clock milliseconds (the times in a job's files). */
uint64_t slurm_now_ms(void);
/* A line of gpurun's own ("[gpurun] ...") in the job's log, fd from
 * slurm_open_log (-1: dropped). */
void slurm_lognote(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The job's log, opened to append; -1 on failure. */
int slurm_open_log(const char *dir);
/* 1 once `gpurun stop` asked (.gpurun/stopped). */
int slurm_stop_asked(const char *dir);

/* Put before the command when the shell runs it in the allocation: the
 * shell outlives [slurm] signal_before's SIGUSR1 (it would die of it, and
 * its program with a handler would never checkpoint, or run on outside
 * Slurm's tracking), and on SIGTERM waits for its program to end (its
 * checkpoint) before it ends as a SIGTERM does. The program itself gets
 * both signals with their default actions (a trap's handler is not
 * inherited across exec). "exit 143" when the shell cannot kill itself
 * (PID 1 of a namespace). */
#define SLURM_CMD_TRAPS "trap : USR1; trap 'trap - TERM; kill -TERM $$; exit 143' TERM\n"

/* The modes of the agent binary in the allocation (job_slurm_run.c):
 * `slurm-run DIR` (the batch script's) and `slurm-task CMD...` (one task
 * under srun). Return the exit code. */
int slurm_run_main(const char *dir);
int slurm_task_main(int argc, char **argv);

/* ---- what Slurm said, cached (job_slurm_query.c) ---- */

/* What Slurm says about job id (its folder dir), from the cache when it is
 * fresh (max_age ms) or final. *error: why Slurm could not be asked (""
 * when it could), the caller's. 0 when si holds an answer (maybe old). */
int slurm_info_get(const char *dir, const char *id, int requeue, uint64_t max_age,
		   struct slurm_info *si, char **error);
/* One squeue for all the unfinished jobs under root (a project's jobs
 * folder), at most every 2 s; each job's cache written. */
void slurm_refresh(const char *root);
/* Slurm did not answer a moment ago (path: a job's folder, or with
 * is_root the project's jobs folder): 1, and why into why (n bytes). */
int slurm_queue_down(const char *path, int is_root, char *why, size_t n);
/* Record that Slurm answered (error NULL) or why it did not. */
void slurm_queue_mark(const char *path, int is_root, const char *error);
/* A Reason Slurm gave ("None" is none). */
int slurm_reason_given(const char *reason);

#endif
