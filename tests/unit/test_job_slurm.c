/* The Slurm backend's pure parts (job_slurm.c, job_backend_slurm.c):
 * what scontrol and sacct print is untrusted input (ids, states, reasons,
 * node lists), the mapping from Slurm's state to gpurun's is decided from
 * the state and never the raw ExitCode, and the sbatch command line and
 * batch script quote what they are given. The real cluster is in
 * tests/t/t0710-slurm-train.sh. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "t.h"

#include "job_backend.h"
#include "job_container.h"
#include "job_glob.h"
#include "job_gpu.h"
#include "job_house.h"
#include "job_proc.h"
#include "job_pyhook.h"
#include "job_slurm.h"
#include "job_snap.h"
#include "job_steps.h"
#include "job_store.h"
#include "job_super.h"

static void spec_set(struct job_spec *s, const char *k, const char *v)
{
	sv_push(&s->kv, k);
	sv_push(&s->kv, v);
}

static void test_ids(void)
{
	CHECK(slurm_id_ok("1"));
	CHECK(slurm_id_ok("123456789012345678"));
	CHECK(!slurm_id_ok(""));
	CHECK(!slurm_id_ok("1234567890123456789"));
	CHECK(!slurm_id_ok("12a"));
	CHECK(!slurm_id_ok("-1"));
	CHECK(!slurm_id_ok("1;rm -rf ~"));
	CHECK(!slurm_id_ok("../1"));
	CHECK(!slurm_id_ok("12_3"));
}

static void test_scontrol(void)
{
	struct slurm_info si;

	slurm_parse_scontrol("JobId=42 JobName=gpurun-x UserId=root(0) JobState=PENDING "
			     "Reason=Resources Dependency=(null) Restarts=2 ExitCode=0:0 "
			     "StartTime=2026-11-23T12:40:01 EndTime=Unknown Partition=gpu "
			     "NodeList=(null)\n", &si);
	CHECK(si.known);
	CHECK_STR(si.state, "PENDING");
	CHECK_STR(si.reason, "Resources");
	CHECK_STR(si.partition, "gpu");
	CHECK_STR(si.nodes, "");
	CHECK_EQ_INT(si.restarts, 2);
	CHECK_EQ_INT(si.start_s, 0); /* a pending job's StartTime is a guess */

	slurm_parse_scontrol("JobId=7 JobState=CANCELLED Reason=None ExitCode=0:15 NodeList=n[1-2] "
			     "StartTime=2026-11-23T12:40:01 EndTime=2026-11-23T12:41:01", &si);
	CHECK(si.known);
	CHECK_STR(si.state, "CANCELLED");
	CHECK_EQ_INT(si.exit_code, 0);
	CHECK_EQ_INT(si.exit_signal, 15);
	CHECK_STR(si.nodes, "n[1-2]");
	CHECK(si.end_s == si.start_s + 60 && si.start_s > 0);

	/* Hostile bytes: escapes and other control bytes become '?'; long
	 * values are cut; a state is letters and '_' only. */
	slurm_parse_scontrol("JobState=RUNNING\x1b[2J Reason=\x1b]0;pwned\x07 NodeList=a\tb", &si);
	CHECK_STR(si.state, "RUNNING");
	CHECK_STR(si.reason, "?]0;pwned?");
	CHECK_STR(si.nodes, "a?b");
	struct strbuf big = STRBUF_INIT;
	sb_adds(&big, "JobState=RUNNING NodeList=");
	for (int i = 0; i < 10000; i++)
		sb_adds(&big, "n");
	slurm_parse_scontrol(big.buf, &si);
	CHECK_EQ_INT(strlen(si.nodes), sizeof(si.nodes) - 1);
	sb_release(&big);
	slurm_parse_scontrol("JobState=;rm Reason=x", &si);
	CHECK(!si.known);
	slurm_parse_scontrol("slurm_load_jobs error: Invalid job id specified", &si);
	CHECK(!si.known);
	/* A key inside a value is not the key. */
	slurm_parse_scontrol("Comment=xJobState=COMPLETED JobState=RUNNING", &si);
	CHECK_STR(si.state, "RUNNING");
	slurm_parse_scontrol("ExitCode=999:0 JobState=FAILED", &si);
	CHECK_EQ_INT(si.exit_code, 0);
}

static void test_sacct(void)
{
	struct slurm_info si;
	const char *text = "41|COMPLETED|0:0|None|n1|gpu|2026-11-23T12:40:01|2026-11-23T12:40:02\n"
			   "42|CANCELLED by 0|0:0|None|n1|gpu|2026-11-23T12:40:01|2026-11-23T12:40:09\n"
			   "42.batch|CANCELLED|0:15|None|n1|gpu|Unknown|Unknown\n";

	CHECK(slurm_parse_sacct(text, "42", &si) == 0);
	CHECK(si.known);
	CHECK_STR(si.source, "sacct");
	CHECK_STR(si.state, "CANCELLED");
	CHECK_STR(si.reason, "CANCELLED by 0");
	CHECK(si.end_s > si.start_s);
	CHECK(slurm_parse_sacct(text, "4", &si) < 0 && !si.known);
	CHECK(slurm_parse_sacct(text, "43", &si) < 0);
	CHECK(slurm_parse_sacct("42|RUNNING|0:0\n", "42", &si) < 0); /* too few fields */
	CHECK(slurm_parse_sacct("", "42", &si) < 0);
}

/* slurm_map of a state; status: "" (none) or "exit=N\nsignal=S\n". */
static void map(const char *state, const char *reason, int known, const char *status, int stopped,
		struct job_rec *r)
{
	struct slurm_info si = { 0 };
	struct strvec st = STRVEC_INIT;

	si.known = known;
	snprintf(si.state, sizeof(si.state), "%s", state);
	snprintf(si.reason, sizeof(si.reason), "%s", reason);
	if (*status) {
		const char *p = status;
		while (*p) {
			size_t n = strcspn(p, "\n");
			char *line = xstrndup(p, n);
			sv_push(&st, line);
			free(line);
			p += n + (p[n] == '\n');
		}
		sv_push(&st, "end_ms=1000");
	}
	*r = (struct job_rec){ 0 };
	r->now_ms = 1000000; /* long after the status was written */
	slurm_map(&si, *status != 0, &st, stopped, "run", "42", r);
	sv_clear(&st);
}

static void test_map(void)
{
	struct job_rec r;

	map("PENDING", "Resources", 1, "", 0, &r);
	CHECK_STR(r.state, "queued");
	CHECK(strstr(r.reason, "Resources") != NULL);
	CHECK(!job_rec_ended(&r));
	job_rec_clear(&r);

	map("RUNNING", "None", 1, "", 0, &r);
	CHECK_STR(r.state, "running");
	CHECK_EQ_INT(job_rec_exit_code(&r), -1);
	job_rec_clear(&r);

	/* Cancelled by hand: decided from the state, whatever ExitCode says. */
	map("CANCELLED", "None", 1, "", 0, &r);
	CHECK_STR(r.state, "cancelled");
	CHECK_EQ_INT(job_rec_exit_code(&r), 143);
	job_rec_clear(&r);
	map("CANCELLED", "None", 1, "exit=0\nsignal=15\n", 0, &r);
	CHECK_STR(r.state, "cancelled");
	CHECK_EQ_INT(job_rec_exit_code(&r), 143);
	job_rec_clear(&r);
	/* ... and by gpurun stop. */
	map("CANCELLED", "None", 1, "", 1, &r);
	CHECK_STR(r.state, "stopped");
	job_rec_clear(&r);
	map("COMPLETED", "None", 1, "exit=7\nsignal=0\n", 1, &r);
	CHECK_STR(r.state, "stopped");
	CHECK_EQ_INT(job_rec_exit_code(&r), 7);
	job_rec_clear(&r);

	map("TIMEOUT", "TimeLimit", 1, "exit=0\nsignal=0\n", 0, &r);
	CHECK_STR(r.state, "timeout");
	CHECK_EQ_INT(job_rec_exit_code(&r), GR_EXIT_JOB_TIMEOUT);
	job_rec_clear(&r);
	map("TIMEOUT", "TimeLimit", 1, "", 0, &r);
	CHECK_EQ_INT(job_rec_exit_code(&r), GR_EXIT_JOB_TIMEOUT);
	job_rec_clear(&r);

	map("NODE_FAIL", "NodeDown", 1, "", 0, &r);
	CHECK_STR(r.state, "node_fail");
	CHECK(job_rec_ended(&r));
	CHECK_EQ_INT(job_rec_exit_code(&r), GR_EXIT_JOB_LOST);
	job_rec_clear(&r);

	map("COMPLETED", "None", 1, "exit=3\nsignal=0\n", 0, &r);
	CHECK_STR(r.state, "failed");
	CHECK_EQ_INT(job_rec_exit_code(&r), 3);
	job_rec_clear(&r);
	map("COMPLETED", "None", 1, "exit=0\nsignal=0\n", 0, &r);
	CHECK_STR(r.state, "done");
	job_rec_clear(&r);
	/* Slurm says it completed, but the job wrote no status. */
	map("COMPLETED", "None", 1, "", 0, &r);
	CHECK_STR(r.state, "lost");
	job_rec_clear(&r);

	/* Neither scontrol nor sacct knows it (no accounting, MinJobAge
	 * passed): the status decides, or it is lost. */
	map("", "", 0, "exit=5\nsignal=0\n", 0, &r);
	CHECK_STR(r.state, "failed");
	CHECK_EQ_INT(job_rec_exit_code(&r), 5);
	job_rec_clear(&r);
	map("", "", 0, "", 0, &r);
	CHECK_STR(r.state, "lost");
	CHECK(strstr(r.reason, "no longer knows job 42") != NULL);
	job_rec_clear(&r);

	map("SOMETHING_NEW", "", 1, "", 0, &r);
	CHECK_STR(r.state, "unknown");
	job_rec_clear(&r);

	CHECK(slurm_state_final("TIMEOUT", 0));
	CHECK(slurm_state_final("NODE_FAIL", 0));
	CHECK(!slurm_state_final("NODE_FAIL", 1)); /* requeue: it may run again */
	CHECK(!slurm_state_final("RUNNING", 0));
}

static int has(const struct strvec *v, const char *s)
{
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->v[i], s))
			return 1;
	return 0;
}

static void test_sbatch_argv(void)
{
	struct job_spec s = { STRVEC_INIT };
	struct strvec a = STRVEC_INIT;
	struct gr_err err = { 0 };

	spec_set(&s, "gpus", "2");
	spec_set(&s, "slurm_partition", "gpu");
	spec_set(&s, "slurm_time", "4:00:00");
	spec_set(&s, "slurm_signal_before", "120");
	spec_set(&s, "slurm_ntasks_per_node", "2");
	spec_set(&s, "slurm_option", "--exclusive");
	spec_set(&s, "slurm_option", "--comment=a b; $(reboot)");
	CHECK(slurm_sbatch_argv(&s, "/d", "J", "/d/.gpurun/slurm-batch.sh", NULL, &a, &err) == 0);
	CHECK_STR(a.v[0], "sbatch");
	CHECK(has(&a, "--parsable"));
	CHECK(has(&a, "--gres=gpu:2"));
	CHECK(has(&a, "--partition=gpu"));
	CHECK(has(&a, "--time=4:00:00"));
	CHECK(has(&a, "--signal=B:USR1@120"));
	CHECK(has(&a, "--ntasks-per-node=2"));
	CHECK(has(&a, "--no-requeue"));
	CHECK(has(&a, "--exclusive"));
	CHECK(has(&a, "--comment=a b; $(reboot)")); /* one argv word, no shell */
	CHECK_STR(a.v[a.n - 1], "/d/.gpurun/slurm-batch.sh");
	sv_clear(&a);

	spec_set(&s, "slurm_gpu_flag", "gpus");
	spec_set(&s, "slurm_gpu_type", "a100");
	spec_set(&s, "slurm_requeue", "1");
	CHECK(slurm_sbatch_argv(&s, "/d", "J", "/s", "41", &a, &err) == 0);
	CHECK(has(&a, "--gpus-per-node=a100:2"));
	CHECK(has(&a, "--requeue"));
	CHECK(has(&a, "--dependency=afterany:41"));
	sv_clear(&a);
	job_spec_free(&s);

	/* GPU indices cannot go to Slurm; a value with a newline neither. */
	s = (struct job_spec){ STRVEC_INIT };
	spec_set(&s, "gpus", "0,1");
	CHECK_EQ_INT(slurm_sbatch_argv(&s, "/d", "J", "/s", NULL, &a, &err), GR_EINVAL);
	CHECK(strstr(err.msg, "Slurm chooses") != NULL);
	sv_clear(&a);
	job_spec_free(&s);
	s = (struct job_spec){ STRVEC_INIT };
	spec_set(&s, "slurm_partition", "gpu\n#SBATCH --uid=0");
	CHECK_EQ_INT(slurm_sbatch_argv(&s, "/d", "J", "/s", NULL, &a, &err), GR_EINVAL);
	sv_clear(&a);
	job_spec_free(&s);
	/* A job array's tasks would share one record: refused, however
	 * the option is written. */
	static const char *const arrays[] = { "--array=0-3", "--array", "-a", "-a0-3" };
	for (size_t i = 0; i < GR_ARRAY_SIZE(arrays); i++) {
		s = (struct job_spec){ STRVEC_INIT };
		spec_set(&s, "slurm_option", arrays[i]);
		CHECK_EQ_INT(slurm_sbatch_argv(&s, "/d", "J", "/s", NULL, &a, &err), GR_EINVAL);
		CHECK(strstr(err.msg, "job arrays") != NULL);
		sv_clear(&a);
		job_spec_free(&s);
	}
	s = (struct job_spec){ STRVEC_INIT };
	spec_set(&s, "slurm_option", "--account=arrays");
	CHECK(slurm_sbatch_argv(&s, "/d", "J", "/s", NULL, &a, &err) == 0);
	sv_clear(&a);
	job_spec_free(&s);
	/* A container per task under srun would share one name. */
	s = (struct job_spec){ STRVEC_INIT };
	spec_set(&s, "container_image", "busybox");
	CHECK(slurm_sbatch_argv(&s, "/d", "J", "/s", NULL, &a, &err) == 0);
	sv_clear(&a);
	spec_set(&s, "slurm_ntasks_per_node", "2");
	CHECK_EQ_INT(slurm_sbatch_argv(&s, "/d", "J", "/s", NULL, &a, &err), GR_EINVAL);
	CHECK(strstr(err.msg, "several Slurm tasks") != NULL);
	sv_clear(&a);
	job_spec_free(&s);
}

/* [train] gpus = all: every GPU of a node of the partition, from sinfo's
 * gres (untrusted text); nodes that differ, or no such partition, are
 * refused; a partition without GPUs asks for none. */
static void test_all_gpus(void)
{
	static const char sinfo[] = "debug|(null)\ngpu*|gpu:2\nbig|gpu:a100:4(S:0-1),mps:100\n"
				    "big|gpu:a100:4,gpu:v100:2\nmixed|gpu:2\nmixed|gpu:8\nbad|gpu:x\n";
	struct job_spec s = { STRVEC_INIT };
	struct strvec a = STRVEC_INIT;
	struct gr_err err = { 0 };
	long long n = -5;

	CHECK_EQ_INT((int)slurm_gres_gpus("gpu:2", 5, ""), 2);
	CHECK_EQ_INT((int)slurm_gres_gpus("gpu:a100:4(S:0-1)", 17, ""), 4);
	CHECK_EQ_INT((int)slurm_gres_gpus("gpu:a100:4,gpu:v100:2,mps:100", 29, ""), 6);
	CHECK_EQ_INT((int)slurm_gres_gpus("gpu:a100:4,gpu:v100:2,mps:100", 29, "v100"), 2);
	CHECK_EQ_INT((int)slurm_gres_gpus("(null)", 6, ""), 0);
	CHECK_EQ_INT((int)slurm_gres_gpus("gpu:99999999999999999999", 24, ""), -1);
	CHECK_EQ_INT((int)slurm_gres_gpus("gpu:2", 4, ""), -1); /* cut: "gpu:" */

	CHECK(slurm_parse_all_gpus(sinfo, 1, "", "", &n, &err) == 0);
	CHECK_EQ_INT((int)n, 2); /* the default, gpu* */
	CHECK(slurm_parse_all_gpus(sinfo, 1, "debug", "", &n, &err) == 0);
	CHECK_EQ_INT((int)n, 0);
	CHECK_EQ_INT(slurm_parse_all_gpus(sinfo, 1, "big", "", &n, &err), GR_EINVAL);
	CHECK(strstr(err.msg, "have 4 and 6 GPUs") != NULL);
	CHECK(slurm_parse_all_gpus(sinfo, 1, "big", "a100", &n, &err) == 0);
	CHECK_EQ_INT((int)n, 4);
	CHECK_EQ_INT(slurm_parse_all_gpus(sinfo, 1, "mixed", "", &n, &err), GR_EINVAL);
	CHECK(strstr(err.msg, "set [train] gpus to a count") != NULL);
	CHECK_EQ_INT(slurm_parse_all_gpus(sinfo, 1, "nope", "", &n, &err), GR_EINVAL);
	CHECK_EQ_INT(slurm_parse_all_gpus(sinfo, 1, "bad", "", &n, &err), GR_EREMOTE);
	CHECK_EQ_INT(slurm_parse_all_gpus("debug|(null)\n", 1, "", "", &n, &err), GR_EINVAL);

	/* [slurm] nodes against the partition's nodes (sinfo -o %P|%D). */
	{
		const char *nd = "gpu*|1\ndebug|2\ngpu*|1\nbad|x\n";
		char name[8];
		CHECK_EQ_INT(slurm_parse_partition_nodes(nd, "", &n, name, sizeof(name)), 1);
		CHECK_EQ_INT((int)n, 2); /* the default, over two lines (states) */
		CHECK(!strcmp(name, "gpu"));
		CHECK_EQ_INT(slurm_parse_partition_nodes(nd, "debug", &n, name, sizeof(name)), 1);
		CHECK_EQ_INT((int)n, 2);
		CHECK_EQ_INT(slurm_parse_partition_nodes(nd, "gp", &n, name, sizeof(name)), 0);
		CHECK_EQ_INT(slurm_parse_partition_nodes(nd, "bad", &n, name, sizeof(name)), 0);
		CHECK_EQ_INT(slurm_parse_partition_nodes("a\x01verylongname*|3", "", &n, name,
							 sizeof(name)), 1);
		CHECK(!strcmp(name, "a?veryl"));
		CHECK_EQ_INT(slurm_parse_partition_nodes(NULL, "", &n, NULL, 0), 0);
	}

	spec_set(&s, "gpus", "all");
	CHECK(slurm_sbatch_argv_all(&s, "/d", "J", "/s", NULL, 2, &a, &err) == 0);
	CHECK(has(&a, "--gres=gpu:2"));
	sv_clear(&a);
	CHECK(slurm_sbatch_argv_all(&s, "/d", "J", "/s", NULL, 0, &a, &err) == 0);
	for (size_t i = 0; i < a.n; i++)
		CHECK(strncmp(a.v[i], "--gres", 6) && strncmp(a.v[i], "--gpus", 6));
	sv_clear(&a);
	job_spec_free(&s);
}

/* A submit whose answer was lost: the job by its name, never one the job
 * knows already (a resubmission's predecessor has the same name). */
static void test_ids_by_name(void)
{
	struct strvec known = STRVEC_INIT;
	char out[32] = "";

	CHECK_EQ_INT(slurm_parse_ids_by_name("", NULL, out, sizeof(out)), 0);
	CHECK_EQ_INT(slurm_parse_ids_by_name("41\n", NULL, out, sizeof(out)), 1);
	CHECK_STR(out, "41");
	sv_push(&known, "41");
	CHECK_EQ_INT(slurm_parse_ids_by_name("41\n", &known, out, sizeof(out)), 0);
	CHECK_EQ_INT(slurm_parse_ids_by_name("41\n9\n120\n7_1\n$(x)\n", &known, out, sizeof(out)), 1);
	CHECK_STR(out, "120");
	CHECK_EQ_INT(slurm_parse_ids_by_name("123456789012345678901234567890\n", NULL, out,
					     sizeof(out)), 0);
	sv_clear(&known);
}

/* squeue's one line per job (SLURM_SQUEUE_FORMAT), untrusted. */
static void test_squeue(void)
{
	static const char text[] = "12|PENDING|Resources|||2026-11-27T10:00:00|N/A\n"
				   "123|RUNNING|None|node\x1b[1|gpu|2026-11-23T12:40:01|2026-11-23T13:40:01\n"
				   "1234|COMPLETING|None|n1|gpu\n";
	struct slurm_info si;

	CHECK(slurm_parse_squeue(text, "12", &si) == 0);
	CHECK_STR(si.state, "PENDING");
	CHECK_STR(si.reason, "Resources");
	CHECK_STR(si.source, "squeue");
	CHECK(si.start_s == 0 && si.nodes[0] == '\0');
	CHECK(slurm_parse_squeue(text, "123", &si) == 0);
	CHECK_STR(si.state, "RUNNING");
	CHECK_STR(si.nodes, "node?[1");
	CHECK(si.start_s > 0 && si.end_s > si.start_s);
	CHECK(slurm_parse_squeue(text, "1234", &si) < 0); /* cut short */
	CHECK(slurm_parse_squeue(text, "1", &si) < 0);
	CHECK(!si.known);
}

/* Slurm's words when it killed a job for memory, from its output file. */
static void test_oom_line(void)
{
	static const char a[] = "[gpurun] running\nslurmstepd: error: Job 12 exceeded memory limit "
				"(2100000 > 1048576), being killed\nslurmstepd: error: *** JOB 12 ON n1 "
				"CANCELLED ***\n";
	static const char b[] = "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=7.batch. "
				"Some of your processes may have been killed by the cgroup out-of-memory "
				"handler.\x1b]52;c;x\x07";
	char line[240];

	CHECK(slurm_oom_line(a, sizeof(a) - 1, line, sizeof(line)) == 1);
	CHECK_STR(line, "slurmstepd: error: Job 12 exceeded memory limit (2100000 > 1048576), being killed");
	CHECK(slurm_oom_line(b, sizeof(b) - 1, line, sizeof(line)) == 1);
	CHECK(strstr(line, "error: Detected 1 oom-kill event(s)") != NULL);
	CHECK(strchr(line, '\x1b') == NULL && strchr(line, '\x07') == NULL);
	CHECK(slurm_oom_line("all good\n", 9, line, sizeof(line)) == 0);
}

static void test_batch_script(void)
{
	struct strbuf sb = STRBUF_INIT;

	slurm_batch_script("/h/agent", "/h/jobs/it's $(x)", "J", &sb);
	CHECK(strstr(sb.buf, "#!/bin/sh\n") == sb.buf);
	CHECK(strstr(sb.buf, "exec '/h/agent' slurm-run '/h/jobs/it'\\''s $(x)'\n") != NULL);
	sb_release(&sb);
}

int main(void)
{
	RUN(test_ids);
	RUN(test_scontrol);
	RUN(test_sacct);
	RUN(test_map);
	RUN(test_sbatch_argv);
	RUN(test_all_gpus);
	RUN(test_ids_by_name);
	RUN(test_squeue);
	RUN(test_oom_line);
	RUN(test_batch_script);
	return T_DONE();
}
