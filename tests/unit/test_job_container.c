/* The container wrapper's pure parts (remote/job/job_container.c): the
 * runtime's argv for each way GPUs go in and for train -- CMD's words,
 * the stop line a batch script traps with (run through a real sh, which
 * must read back the same words), the spec's checks, [container] options split into words
 * (config), the supervisor's undoing of the container terminal's
 * \r\n, across every split of its input into reads, and [train]
 * output's values, the environment a pipe adds, and the reader of a
 * step's output pipe. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
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
#include "job_super_int.h"
#include "config.h"

static void ctr_init(struct job_ctr *c, const char *rt, const char *gpu)
{
	*c = (struct job_ctr){ .options = STRVEC_INIT, .mounts = STRVEC_INIT };
	c->runtime = xstrdup(rt);
	c->path = xasprintf("/usr/bin/%s", rt);
	c->image = xstrdup("img:1");
	c->user = xstrdup("1000:1000");
	c->gpu = xstrdup(gpu);
	c->project = xstrdup("/home/u/proj");
}

/* argv joined with '\n', for one comparison. */
static char *joined(const struct strvec *v)
{
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < v->n; i++)
		sb_addf(&sb, "%s%s", i ? "\n" : "", v->v[i]);
	return sb_detach(&sb, NULL);
}

static int has_word(const struct strvec *v, const char *w)
{
	for (size_t i = 0; i < v->n; i++)
		if (!strcmp(v->v[i], w))
			return 1;
	return 0;
}

static void test_run_argv(void)
{
	struct job_ctr c;
	struct strvec env = STRVEC_INIT, out = STRVEC_INIT;
	struct job_ctr_step st = { .job_id = "20261122-003512-a1b2", .job_dir = "/j/20261122-003512-a1b2",
				   .step = JOB_STEP_RUN, .cwd = "/j/20261122-003512-a1b2", .shell = "sh",
				   .cmd = "python3 train.py --lr '1e-3' $X", .gpus = NULL, .env = &env };

	ctr_init(&c, "podman", "none");
	sv_push(&env, "WANDB_API_KEY=secret");
	sv_push(&env, "=odd");
	sv_push(&c.options, "--shm-size=8g");
	sv_push(&c.options, "--network=bridge");
	sv_push(&c.mounts, "type=bind,source=/data,target=/data,readonly");
	job_ctr_run_argv(&c, &st, &out);
	char *j = joined(&out);
	CHECK_STR(j, "/usr/bin/podman\nrun\n--rm\n-t\n--init\n--name=gpurun-20261122-003512-a1b2\n"
		  "--label=gpurun.job=20261122-003512-a1b2\n--network=host\n--ipc=host\n"
		  "--security-opt=label=disable\n--user=1000:1000\n--workdir=/j/20261122-003512-a1b2\n"
		  "--mount=type=bind,source=/j/20261122-003512-a1b2,target=/j/20261122-003512-a1b2\n"
		  "--mount=type=bind,source=/home/u/proj,target=/home/u/proj\n"
		  "--mount=type=bind,source=/data,target=/data,readonly\n"
		  "--env=WANDB_API_KEY\n--env=GPURUN_JOB_ID=20261122-003512-a1b2\n"
		  "--env=GPURUN_JOB_DIR=/j/20261122-003512-a1b2\n--shm-size=8g\n--network=bridge\n"
		  "img:1\n/bin/sh\n-c\npython3 train.py --lr '1e-3' $X");
	free(j);
	/* A value never reaches the command line. */
	for (size_t i = 0; i < out.n; i++)
		CHECK(!strstr(out.v[i], "secret"));
	sv_clear(&out);

	/* The setup step, a login shell, rootless podman. */
	st.step = JOB_STEP_SETUP;
	st.shell = "login";
	st.cwd = "/home/u/proj";
	c.keep_id = 1;
	job_ctr_run_argv(&c, &st, &out);
	CHECK(has_word(&out, "--name=gpurun-20261122-003512-a1b2-setup"));
	CHECK(has_word(&out, "--userns=keep-id"));
	CHECK(has_word(&out, "--workdir=/home/u/proj"));
	CHECK_STR(out.v[out.n - 3], "-l");
	CHECK(has_word(&out, "--ipc=host"));
	sv_clear(&out);
	/* A rootless podman without the host's /dev/mqueue: shm instead. */
	c.shm_size = xstrdup("1073741824");
	job_ctr_run_argv(&c, &st, &out);
	CHECK(has_word(&out, "--shm-size=1073741824") && !has_word(&out, "--ipc=host"));
	CHECK(has_word(&out, "-t"));
	sv_clear(&out);
	/* [train] output = pipe: no terminal in the container. */
	st.no_tty = 1;
	job_ctr_run_argv(&c, &st, &out);
	CHECK(!has_word(&out, "-t") && has_word(&out, "--init"));
	/* stderr joins stdout in the container: one stream, in order. */
	CHECK_STR(out.v[out.n - 1], "exec 2>&1\npython3 train.py --lr '1e-3' $X");
	sv_clear(&out);
	sv_clear(&env);
	job_ctr_free(&c);
}

/* [train] output: its values, and what a pipe adds to the environment
 * unless the job's env has the name already (with any value, "" too). */
static void test_output_env(void)
{
	static const struct {
		const char *output, *env[3], *want; /* want: words joined by '|' */
	} cases[] = {
		{ "pty", { NULL }, "" },
		{ "", { "A=1", NULL }, "" },
		{ "pipe", { NULL }, "PYTHONUNBUFFERED=1" },
		{ "pipe", { "A=1", "PYTHONUNBUFFEREDX=1", NULL }, "PYTHONUNBUFFERED=1" },
		{ "pipe", { "A=1", "PYTHONUNBUFFERED=0", NULL }, "" },
		{ "pipe", { "PYTHONUNBUFFERED=", NULL }, "" },
	};

	CHECK(job_output_valid("") && job_output_valid("pty") && job_output_valid("pipe"));
	CHECK(!job_output_valid("PIPE") && !job_output_valid("pipe ") && !job_output_valid("file"));
	CHECK(job_output_pipe("pipe") && !job_output_pipe("pty") && !job_output_pipe(NULL));
	for (size_t i = 0; i < GR_ARRAY_SIZE(cases); i++) {
		struct strvec env = STRVEC_INIT, out = STRVEC_INIT;
		struct strbuf got = STRBUF_INIT;
		for (size_t k = 0; cases[i].env[k]; k++)
			sv_push(&env, cases[i].env[k]);
		job_output_env(cases[i].output, &env, &out);
		for (size_t k = 0; k < out.n; k++)
			sb_addf(&got, "%s%s", k ? "|" : "", out.v[k]);
		if (strcmp(got.buf ? got.buf : "", cases[i].want)) {
			fprintf(stderr, "  case %zu: got '%s'\n", i, got.buf ? got.buf : "");
			t_case_failed = 1;
		}
		/* Into the env list itself, as the container path does. */
		size_t n0 = env.n;
		job_output_env(cases[i].output, &env, &env);
		CHECK_EQ_INT(env.n, n0 + out.n);
		sb_release(&got);
		sv_clear(&env);
		sv_clear(&out);
	}
}

/* train -- CMD ARGS: the words follow the image as they are (no sh -c),
 * or as "$@" of the image's login shell; other steps keep their command. */
static void test_run_argv_words(void)
{
	struct job_ctr c;
	struct strvec args = STRVEC_INIT, out = STRVEC_INIT;
	struct job_ctr_step st = { .job_id = "20261122-003512-a1b2", .job_dir = "/j/20261122-003512-a1b2",
				   .step = JOB_STEP_RUN, .cwd = "/j/20261122-003512-a1b2", .shell = "sh",
				   .cmd = "python3 'a b' '$HOME;x'", .args = &args };

	ctr_init(&c, "docker", "none");
	sv_push(&args, "python3");
	sv_push(&args, "a b");
	sv_push(&args, "$HOME;x");
	sv_push(&args, "-c");
	job_ctr_run_argv(&c, &st, &out);
	CHECK(out.n > 5);
	CHECK_STR(out.v[out.n - 5], "img:1");
	CHECK_STR(out.v[out.n - 4], "python3");
	CHECK_STR(out.v[out.n - 3], "a b");
	CHECK_STR(out.v[out.n - 2], "$HOME;x");
	CHECK_STR(out.v[out.n - 1], "-c");
	CHECK(!has_word(&out, "/bin/sh"));
	sv_clear(&out);

	st.shell = "login";
	job_ctr_run_argv(&c, &st, &out);
	CHECK(out.n > 10);
	const char *tail[] = { "img:1", "/bin/sh", "-l", "-c", "exec \"$@\"", "gpurun", "python3",
			       "a b", "$HOME;x", "-c" };
	for (size_t i = 0; i < GR_ARRAY_SIZE(tail); i++)
		CHECK_STR(out.v[out.n - GR_ARRAY_SIZE(tail) + i], tail[i]);
	sv_clear(&out);
	/* output = pipe: stderr joins stdout first; the words stay "$@". */
	st.no_tty = 1;
	job_ctr_run_argv(&c, &st, &out);
	CHECK_STR(out.v[out.n - 6], "exec 2>&1\nexec \"$@\"");
	CHECK_STR(out.v[out.n - 1], "-c");
	sv_clear(&out);
	st.no_tty = 0;

	/* An empty list is no list: the command line, through sh -c. */
	st.shell = "sh";
	sv_clear(&args);
	job_ctr_run_argv(&c, &st, &out);
	CHECK_STR(out.v[out.n - 3], "/bin/sh");
	CHECK_STR(out.v[out.n - 1], "python3 'a b' '$HOME;x'");
	sv_clear(&out);
	job_ctr_free(&c);
}

static void test_gpus(void)
{
	static const struct {
		const char *way, *gpus, *want[4];
	} cases[] = {
		{ "cdi", "0,2", { "--device=nvidia.com/gpu=0", "--device=nvidia.com/gpu=2",
				  "--env=CUDA_VISIBLE_DEVICES=0,1", NULL } },
		{ "cdi", NULL, { "--device=nvidia.com/gpu=all", NULL } },
		{ "toolkit", "1,3", { "--gpus=\"device=1,3\"", "--env=CUDA_VISIBLE_DEVICES=0,1", NULL } },
		{ "toolkit", "5", { "--gpus=\"device=5\"", "--env=CUDA_VISIBLE_DEVICES=0", NULL } },
		{ "toolkit", NULL, { "--gpus=all", NULL } },
		/* No way in: the host's numbers, for what they are worth. */
		{ "none", "1", { "--env=CUDA_VISIBLE_DEVICES=1", NULL } },
		{ "none", NULL, { NULL } },
	};

	for (size_t i = 0; i < GR_ARRAY_SIZE(cases); i++) {
		struct job_ctr c;
		struct strvec out = STRVEC_INIT;
		struct job_ctr_step st = { .job_id = "20261122-003512-a1b2", .job_dir = "/j", .step = JOB_STEP_RUN,
					   .cwd = "/j", .shell = "sh", .cmd = "true", .gpus = cases[i].gpus };
		size_t ngpu = 0, nwant = 0;

		ctr_init(&c, !strcmp(cases[i].way, "toolkit") ? "docker" : "podman", cases[i].way);
		job_ctr_run_argv(&c, &st, &out);
		for (size_t k = 0; cases[i].want[k]; k++, nwant++)
			if (!has_word(&out, cases[i].want[k])) {
				fprintf(stderr, "  case %zu: no %s\n", i, cases[i].want[k]);
				t_case_failed = 1;
			}
		for (size_t k = 0; k < out.n; k++)
			ngpu += !strncmp(out.v[k], "--device=", 9) || !strncmp(out.v[k], "--gpus", 6) ||
				!strncmp(out.v[k], "--env=CUDA_VISIBLE_DEVICES", 26);
		CHECK_EQ_INT(ngpu, nwant);
		sv_clear(&out);
		job_ctr_free(&c);
	}
}

/* Run line through sh with `printf '%s\n'` in place of each runtime, as a
 * batch script would: the words must come back as they were. */
static void test_stop_sh(void)
{
	struct job_ctr c;
	struct strbuf line = STRBUF_INIT, script = STRBUF_INIT, got = STRBUF_INIT;
	char dir[] = "/tmp/gpurun-test-ctr.XXXXXX";

	ctr_init(&c, "podman", "none");
	free(c.path);
	CHECK(mkdtemp(dir) != NULL);
	/* A runtime path that needs quoting, standing in for podman. */
	c.path = xasprintf("%s/it's podman", dir);
	sb_addf(&script, "#!/bin/sh\n[ \"$1\" = ps ] && { echo gpurun-x; echo gpurun-x-build; exit 0; }\n"
		"printf '%%s|' \"$@\" >>'%s/calls'; echo >>'%s/calls'\n", dir, dir);
	CHECK(write_file_atomic(c.path, script.buf, script.len, 0755, NULL) == 0);
	job_ctr_stop_sh(&c, "20261122-003512-a1b2", 7, &line);
	CHECK(strstr(line.buf, "'") != NULL);
	const char *argv[] = { "/bin/sh", "-c", line.buf, NULL };
	CHECK_EQ_INT(job_ctr_exec(argv, 10000, NULL, NULL), 0);
	char *calls = xasprintf("%s/calls", dir);
	CHECK(read_file(calls, &got, NULL) == 0);
	CHECK_STR(got.buf, "stop|-t|7|gpurun-x|\nrm|-f|-t|0|gpurun-x|\n"
		  "stop|-t|7|gpurun-x-build|\nrm|-f|-t|0|gpurun-x-build|\n");
	unlink(calls);
	unlink(c.path);
	rmdir(dir);
	free(calls);
	sb_release(&line);
	sb_release(&script);
	sb_release(&got);
	job_ctr_free(&c);
}

static void test_spec_check(void)
{
	static const struct {
		const char *kv[8];
		int ok;
	} cases[] = {
		{ { "command", "x", NULL }, 1 },
		{ { "container_image", "img", "container_runtime", "docker", NULL }, 1 },
		{ { "container_image", "img", "container_mount", "data:/data:ro", "container_mount", "/x", NULL }, 1 },
		{ { "container_runtime", "docker", NULL }, 0 },            /* no image */
		{ { "container_image", "--privileged", NULL }, 0 },        /* read as an option */
		{ { "container_image", "a b", NULL }, 0 },
		{ { "container_image", "img", "container_runtime", "lxc", NULL }, 0 },
		{ { "container_image", "img", "container_mount", "a:rel", NULL }, 0 },
		{ { "container_image", "img", "container_mount", "a,b:/x", NULL }, 0 },
		{ { "container_image", "img", "container_mount", "a:/x:rx", NULL }, 0 },
		{ { "container_image", "img", "container_mount", ":/x", NULL }, 0 },
		{ { "container_image", "img", "container_option", "a\nb", NULL }, 0 },
		{ { "container_image", "img", "container_user", "-u", NULL }, 0 },
	};

	for (size_t i = 0; i < GR_ARRAY_SIZE(cases); i++) {
		struct job_spec s = { STRVEC_INIT };
		struct gr_err e = { 0 };
		for (size_t k = 0; cases[i].kv[k]; k++)
			sv_push(&s.kv, cases[i].kv[k]);
		int rc = job_ctr_spec_check(&s, &e);
		if ((rc == 0) != cases[i].ok) {
			fprintf(stderr, "  case %zu: rc %d (%s)\n", i, rc, e.msg);
			t_case_failed = 1;
		}
		job_spec_free(&s);
	}
}

/* A host path with a comma or a quote never reaches --mount (issue 29):
 * the start is refused before any runtime is asked. */
static void test_prepare_path_csv(void)
{
	static const char *const bad[] = { "proj,ro", "pro\"j" };
	char base[] = "/tmp/gpurun-test-ctr.XXXXXX";

	CHECK(mkdtemp(base) != NULL);
	for (size_t i = 0; i < GR_ARRAY_SIZE(bad); i++) {
		struct job_spec s = { STRVEC_INIT };
		struct gr_err e = { 0 };
		char *dir = xasprintf("%s/job%zu", base, i), *meta = xasprintf("%s/.gpurun", dir);
		char *project = xasprintf("%s/%s", base, bad[i]), *warn = NULL;
		CHECK(mkdir(dir, 0700) == 0 && mkdir(meta, 0700) == 0);
		sv_push(&s.kv, "container_image");
		sv_push(&s.kv, "localhost/img:1");
		CHECK(job_spec_write(dir, &s, &e) == 0);
		CHECK(job_ctr_prepare(dir, project, &warn, &e) == GR_EINVAL);
		CHECK(strstr(e.msg, "comma or a double quote") != NULL);
		CHECK(!job_meta_exists(dir, "container"));
		free(warn);
		free(dir);
		free(meta);
		free(project);
		job_spec_free(&s);
	}
	job_rm_tree(base);
}

static void test_split_words(void)
{
	static const struct {
		const char *in, *want; /* words joined by '|'; NULL: refused */
	} cases[] = {
		{ "--shm-size=8g --env A=1", "--shm-size=8g|--env|A=1" },
		{ "  -v  'a b':/x  ", "-v|a b:/x" },
		{ "--env \"X=it's \\\"q\\\"\"", "--env|X=it's \"q\"" },
		{ "a\\ b ''", "a b|" },
		{ "", "" },
		{ "'open", NULL },
	};

	for (size_t i = 0; i < GR_ARRAY_SIZE(cases); i++) {
		struct strvec w = STRVEC_INIT;
		struct strbuf j = STRBUF_INIT;
		const char *why = config_split_words(cases[i].in, &w);
		if (!cases[i].want) {
			CHECK(why != NULL);
		} else {
			CHECK(why == NULL);
			for (size_t k = 0; k < w.n; k++)
				sb_addf(&j, "%s%s", k ? "|" : "", w.v[k]);
			CHECK_STR(j.buf ? j.buf : "", cases[i].want);
		}
		sv_clear(&w);
		sb_release(&j);
	}
}

/* Every split of the input into two reads gives the same log. */
static void test_crlf_undo(void)
{
	static const char *const cases[][2] = {
		{ "a\r\nb\r\n", "a\nb\n" },
		{ "10%\r20%\r\ndone\r\n", "10%\r20%\ndone\n" },
		{ "\r\r\n\n", "\r\n\n" },
		{ "end\r", "end\r" },
	};

	for (size_t i = 0; i < GR_ARRAY_SIZE(cases); i++) {
		const char *in = cases[i][0];
		size_t n = strlen(in);
		for (size_t cut = 0; cut <= n; cut++) {
			char out[64];
			int cr = 0;
			size_t o = sup_crlf_undo(&cr, in, cut, out);
			o += sup_crlf_undo(&cr, in + cut, n - cut, out + o);
			if (cr)
				out[o++] = '\r'; /* flush_cr at the step's end */
			out[o] = '\0';
			if (strcmp(out, cases[i][1])) {
				fprintf(stderr, "  case %zu cut %zu: got %zu bytes\n", i, cut, o);
				t_case_failed = 1;
			}
		}
	}
}

/* The supervisor's reader of a step's output pipe: a whole line goes at
 * once, a piece without its end waits at most PIPE_GATHER_US and then
 * goes anyway, the end of the pipe says so, and nothing is lost. */
static uint64_t t_mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void test_pump_pipe(void)
{
	int in[2], log[2];
	char got[64];

	CHECK(pipe2(in, O_NONBLOCK) == 0 && pipe2(log, O_NONBLOCK) == 0);
	CHECK(write(in[1], "1", 1) == 1 && write(in[1], " ", 1) == 1 && write(in[1], "2\n", 2) == 2);
	CHECK_EQ_INT(sup_pump_pipe(in[0], log[1]), 0);
	CHECK_EQ_INT(read(log[0], got, sizeof(got)), 4); /* one write: "1 2\n" */
	CHECK(!memcmp(got, "1 2\n", 4));

	/* No end of line comes: it still goes, after the wait. */
	uint64_t t0 = t_mono_us();
	CHECK(write(in[1], "10%\r", 4) == 4);
	CHECK_EQ_INT(sup_pump_pipe(in[0], log[1]), 0);
	CHECK(t_mono_us() - t0 >= PIPE_GATHER_US);
	CHECK_EQ_INT(read(log[0], got, sizeof(got)), 4);
	CHECK(!memcmp(got, "10%\r", 4));

	/* The last writer gone: what is left, then the end. */
	CHECK(write(in[1], "tail", 4) == 4);
	close(in[1]);
	CHECK_EQ_INT(sup_pump_pipe(in[0], log[1]), 1);
	CHECK_EQ_INT(read(log[0], got, sizeof(got)), 4);
	CHECK(!memcmp(got, "tail", 4));
	close(in[0]);
	close(log[0]);
	close(log[1]);
}

int main(void)
{
	RUN(test_run_argv);
	RUN(test_run_argv_words);
	RUN(test_gpus);
	RUN(test_stop_sh);
	RUN(test_spec_check);
	RUN(test_prepare_path_csv);
	RUN(test_split_words);
	RUN(test_crlf_undo);
	RUN(test_output_env);
	RUN(test_pump_pipe);
	return T_DONE();
}
