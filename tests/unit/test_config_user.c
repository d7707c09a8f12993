/* The user config ($XDG_CONFIG_HOME/gpurun/config): below the project's
 * file with origins that name it, host lists and [pools] from either
 * file, and `gpurun init` never writing the user config's values. */
#include "config_t.h"

/* The user config: below the project's file, above the defaults, with
 * origins that name it; XDG_CONFIG_HOME or ~/.config; missing is fine,
 * broken and unreadable are errors naming it. */
static void test_user_config(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	struct strbuf out = STRBUF_INIT;
	char *xdg = xasprintf("%s/xdg", T), *home = xasprintf("%s/uhome", T);
	const char *o;

	setenv("XDG_CONFIG_HOME", xdg, 1);
	user_config("# mine\n[remote]\nhost = box1\njobs_dir = /scratch/me/jobs\n[train]\n"
		    "gpus = 2\nstop_grace = 30\n[sync]\nexclude = *.ckpt\nexclude = wandb/\n");
	ini("user", "[train]\ngpus = 1\n");
	cd("user");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (!c) {
		fprintf(stderr, "  %s\n", err.msg);
		goto out;
	}
	char *uf = xasprintf("%s/gpurun/config", xdg);
	CHECK_STR(c->user_file, uf);
	CHECK_STR(c->remote.host, "box1");
	CHECK_STR(get(c, "remote.host", &o), "box1");
	CHECK(!strncmp(o, uf, strlen(uf)) && !strcmp(o + strlen(uf), ":3")); /* not below $HOME */
	CHECK_STR(c->remote.jobs_dir, "/scratch/me/jobs");
	CHECK_EQ_INT(c->train.stop_grace, 30);
	CHECK_STR(c->train.gpus, "1");                 /* the project's file wins */
	CHECK_STR(get(c, "train.gpus", &o), "1");
	CHECK_STR(o, "gpurun.ini:2");
	CHECK_STR(get(c, "sync.exclude", &o), "*.ckpt wandb/");
	CHECK(strstr(o, "gpurun/config:9,10") != NULL); /* list lines add up there too */
	config_dump(c, &out, 1);
	CHECK(strstr(out.buf, "\"user_file\": ") != NULL);
	CHECK(strstr(out.buf, "\"train.stop_grace\": {\"value\": 30, \"origin\": ") != NULL);
	config_free(c);
	free(uf);

	/* environment over both; the user config is read with -c too */
	setenv("GPURUN_TRAIN_STOP_GRACE", "5", 1);
	CHECK(config_load(&c, "gpurun.ini", 0, &err) == 0);
	clear_env();
	if (c) {
		CHECK_EQ_INT(c->train.stop_grace, 5);
		CHECK_STR(c->remote.host, "box1");
		config_free(c);
	}

	/* ~/.config/gpurun/config when XDG_CONFIG_HOME is unset or relative */
	setenv("HOME", home, 1);
	setenv("XDG_CONFIG_HOME", "rel/xdg", 1);
	{
		char *d = xasprintf("%s/.config/gpurun", home), *p = xasprintf("%s/config", d);
		mkdir_p(d, 0755, NULL);
		write_text(p, "[remote]\nhost = homebox\n", strlen("[remote]\nhost = homebox\n"));
		CHECK(config_load(&c, NULL, 0, &err) == 0);
		if (c) {
			CHECK_STR(get(c, "remote.host", &o), "homebox");
			CHECK_STR(o, "~/.config/gpurun/config:2");
			sb_reset(&out);
			config_dump(c, &out, 0);
			CHECK(strstr(out.buf, "# user config ~/.config/gpurun/config\n") != NULL);
			config_free(c);
		}
		/* broken: file:line as the user config is named */
		write_text(p, "[remote]\nhots = x\n", strlen("[remote]\nhots = x\n"));
		CHECK_EQ_INT(config_load(&c, NULL, 0, &err), GR_ECONFIG);
		CHECK_STR(err.msg, "~/.config/gpurun/config:2: unknown key 'hots' in [remote]");
		write_text(p, "[remote]\npath = ~/all\n", strlen("[remote]\npath = ~/all\n"));
		CHECK_EQ_INT(config_load(&c, NULL, 0, &err), GR_ECONFIG);
		CHECK(!strncmp(err.msg, "~/.config/gpurun/config:2: 'path' in [remote] names one "
			       "project's own folder", 64));
		/* unreadable (as root every file is readable: a folder then) */
		unlink(p);
		mkdir(p, 0755);
		CHECK_EQ_INT(config_load(&c, NULL, 0, &err), GR_ECONFIG);
		CHECK_STR(err.msg, "cannot read the user config '~/.config/gpurun/config': not a file");
		rmdir(p);
		if (geteuid() != 0) {
			write_text(p, "[remote]\nhost = x\n", strlen("[remote]\nhost = x\n"));
			chmod(p, 0);
			CHECK_EQ_INT(config_load(&c, NULL, 0, &err), GR_ECONFIG);
			CHECK(strstr(err.msg, "~/.config/gpurun/config") != NULL);
			unlink(p);
		}
		/* missing: fine */
		CHECK(config_load(&c, NULL, 0, &err) == 0);
		if (!c)
			fprintf(stderr, "  %s\n", err.msg);
		if (c) {
			CHECK(c->user_file == NULL);
			CHECK(c->remote.host == NULL);  /* ini("user") has none */
			config_free(c);
		}
		free(d);
		free(p);
	}
out:
	setenv("XDG_CONFIG_HOME", xdg, 1);
	user_config(NULL);
	no_user_config();
	sb_release(&out);
	free(xdg);
	free(home);
}

/* [remote] host as a list or a pool, and [pools] in either file. */
static void test_pools(void)
{
	struct gr_config *c = NULL;
	struct gr_err err = { 0 };
	char *xdg = xasprintf("%s/xdg", T);
	const char *o;
	struct strbuf out = STRBUF_INIT;

	setenv("XDG_CONFIG_HOME", xdg, 1);
	user_config(NULL);
	/* inline, blanks or commas as in list keys */
	ini("pools", "[remote]\nhost = box1, box2\tlocal\n");
	cd("pools");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (!c)
		goto out;
	CHECK_STR(c->remote.host, "box1");
	CHECK_EQ_INT(c->remote.nhosts, 3);
	CHECK_STR(c->remote.hosts[0], "box1");
	CHECK_STR(c->remote.hosts[2], "local");
	CHECK(c->remote.hosts[3] == NULL);
	CHECK_STR(c->remote.pool, "");
	CHECK_STR(get(c, "remote.host", NULL), "box1 box2 local");
	/* --host takes the same forms */
	CHECK(config_set(c, "remote.host", "one", "--host", &err) == 0);
	CHECK_EQ_INT(c->remote.nhosts, 1);
	CHECK_STR(c->remote.pool, "");
	config_free(c);

	/* a pool in the user config, named by the project */
	user_config("[pools]\nlab = box1 box2 box3\nsolo = s1\n");
	ini("pools", "[remote]\nhost = lab\n");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (!c) {
		fprintf(stderr, "  %s\n", err.msg);
		goto out;
	}
	CHECK_STR(c->remote.host, "box1");
	CHECK_EQ_INT(c->remote.nhosts, 3);
	CHECK_STR(c->remote.hosts[1], "box2");
	CHECK_STR(c->remote.pool, "lab");
	CHECK_STR(get(c, "pools.lab", &o), "box1 box2 box3");
	CHECK(strstr(o, "gpurun/config:2") != NULL);
	config_dump(c, &out, 0);
	CHECK(strstr(out.buf, "\npools.lab ") != NULL);
	sb_reset(&out);
	config_dump(c, &out, 1);
	CHECK(strstr(out.buf, "\"lab\": {\"value\": [\"box1\", \"box2\", \"box3\"], \"origin\": ") != NULL);
	/* -o and --host name pools too; a one-host pool keeps its name */
	CHECK(config_set(c, "remote.host", "solo", "-o", &err) == 0);
	CHECK_EQ_INT(c->remote.nhosts, 1);
	CHECK_STR(c->remote.host, "s1");
	CHECK_STR(c->remote.pool, "solo");
	CHECK(config_set(c, "remote.host", "lab", "--host", &err) == 0);
	CHECK_EQ_INT(c->remote.nhosts, 3);
	CHECK_EQ_INT(config_set(c, "remote.host", "lab box9", "--host", &err), GR_EUSAGE);
	CHECK(strstr(err.msg, "--host: host lists 'lab', which is a pool") != NULL);
	CHECK_EQ_INT(c->remote.nhosts, 3);   /* unchanged */
	CHECK_EQ_INT(config_set(c, "remote.scheduler", "slurm", "-o", &err), GR_EUSAGE);
	CHECK(strstr(err.msg, "host names 3 hosts (pool 'lab')") != NULL);
	CHECK(strstr(err.hint, "(the other value is from --host)") != NULL);
	CHECK_STR(get(c, "remote.scheduler", NULL), "none");
	config_free(c);

	/* the project's pool replaces the user config's of the same name */
	ini("pools", "[remote]\nhost = lab\n[pools]\nlab = p1 p2\n");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (c) {
		CHECK_EQ_INT(c->remote.nhosts, 2);
		CHECK_STR(c->remote.host, "p1");
		CHECK_STR(get(c, "pools.lab", &o), "p1 p2");
		CHECK_STR(o, "gpurun.ini:4");
		config_free(c);
	}
	/* a pool naming a pool of the other file */
	ini("pools", "[remote]\nhost = big\n[pools]\nbig = lab x\n");
	CHECK_EQ_INT(config_load(&c, NULL, 0, &err), GR_ECONFIG);
	CHECK_STR(err.msg, "gpurun.ini:4: pool 'big' lists 'lab', which is a pool too");
	/* the slurm refusal from the user config's pool */
	ini("pools", "[remote]\nhost = lab\nscheduler = slurm\n");
	CHECK_EQ_INT(config_load(&c, NULL, 0, &err), GR_ECONFIG);
	CHECK(strstr(err.msg, "a Slurm cluster is reached through one login host") != NULL);
	/* a one-host pool is fine with slurm */
	ini("pools", "[remote]\nhost = solo\nscheduler = slurm\n");
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	config_free(c);
	c = NULL;
	/* the environment's host can be a pool too */
	ini("pools", "[train]\ngpus = 1\n");
	setenv("GPURUN_REMOTE_HOST", "lab", 1);
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	clear_env();
	if (c) {
		CHECK_EQ_INT(c->remote.nhosts, 3);
		CHECK_STR(c->remote.pool, "lab");
		config_free(c);
	}
	/* no host: nothing */
	CHECK(config_load(&c, NULL, 0, &err) == 0);
	if (c) {
		CHECK(c->remote.host == NULL);
		CHECK_EQ_INT(c->remote.nhosts, 0);
		CHECK_STR(c->remote.pool, "");
		config_free(c);
	}
out:
	user_config(NULL);
	no_user_config();
	sb_release(&out);
	free(xdg);
}

/* `gpurun init` writes the template, never the user config's values. */
static void test_init_ignores_user_config(void)
{
	struct gr_err err = { 0 };
	struct strbuf text = STRBUF_INIT;
	char *xdg = xasprintf("%s/xdg", T), *p = xasprintf("%s/initu/gpurun.ini", T);

	setenv("XDG_CONFIG_HOME", xdg, 1);
	user_config("[remote]\nhost = secretbox\n[train]\ncommand = my-user-default\n");
	cd("initu");
	CHECK(config_write_template("gpurun.ini", &err) == 0);
	CHECK(read_file(p, &text, &err) == 0);
	CHECK(text.buf && !strstr(text.buf, "secretbox") && !strstr(text.buf, "my-user-default"));
	user_config(NULL);
	no_user_config();
	sb_release(&text);
	free(xdg);
	free(p);
}

int main(void)
{
	if (config_t_begin() < 0)
		return 1;
	RUN(test_user_config);
	RUN(test_pools);
	RUN(test_init_ignores_user_config);
	return config_t_end();
}
