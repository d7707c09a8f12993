/* gpurun diff: two jobs' snapshots compared (see job_snapdiff.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job_proto.h"
#include "job_snapdiff.h"
#include "sync_manifest.h"
#include "term.h"

extern char **environ;

/* ---- the listing ---- */

void job_snap_side_free(struct snap_side *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->v[i].path);
		free(s->v[i].hash);
	}
	free(s->v);
	free(s->id);
	sv_clear(&s->conf);
	*s = (struct snap_side){ .conf = STRVEC_INIT };
}

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct snap_ent *)a)->path, ((const struct snap_ent *)b)->path);
}

/* A hash as the agent makes them: hex, or "ino-..." (digits, '-'). */
static int hash_ok(char type, const char *h)
{
	size_t n = strlen(h);

	if (type == 'd')
		return n == 0;
	if (!n || n > 100)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'z') || h[i] == '-'))
			return 0;
	return 1;
}

static const struct snap_ent *side_find(const struct snap_side *s, const char *path)
{
	struct snap_ent key = { .path = (char *)path };

	return bsearch(&key, s->v, s->n, sizeof(*s->v), ent_cmp);
}

/* One job's part of the listing; 0, or -1 with *bad naming the fault. */
static int side_get(struct gr_rd *rd, struct snap_side *s, const char **bad, char **badpath)
{
	uint32_t nc, n;

	s->id = get_str(rd);
	if (!s->id || !job_id_ok(s->id))
		return *bad = "a bad job id", -1;
	nc = get_u32(rd);
	if (nc > rd->n / 4)
		return *bad = "too many config lines", -1;
	for (uint32_t i = 0; i < nc; i++) {
		char *l = get_str(rd);
		if (!l)
			return *bad = "a bad config line", -1;
		sv_push(&s->conf, l);
		free(l);
	}
	n = get_u32(rd);
	if (n > rd->n / 21) /* each entry takes at least 21 bytes */
		return *bad = "more entries than bytes", -1;
	s->v = xcalloc((size_t)n + 1, sizeof(*s->v));
	for (uint32_t i = 0; i < n; i++) {
		struct snap_ent *e = &s->v[s->n];
		e->path = get_str(rd);
		e->type = (char)get_u8(rd);
		e->mode = get_u32(rd);
		e->size = get_u64(rd);
		e->hash = get_str(rd);
		if (e->path || e->hash)
			s->n++;
		if (rd->bad || !e->path || !e->hash)
			return *bad = "a truncated entry", -1;
		if (!sm_path_ok(e->path))
			return *bad = "a path that is not relative and clean", *badpath = e->path, -1;
		if (e->type != 'd' && e->type != 'f' && e->type != 'l')
			return *bad = "an unknown type", *badpath = e->path, -1;
		if (e->mode > 07777 || !hash_ok(e->type, e->hash))
			return *bad = "a bad mode or hash", *badpath = e->path, -1;
	}
	qsort(s->v, s->n, sizeof(*s->v), ent_cmp);
	for (size_t i = 0; i < s->n; i++) {
		const char *p = s->v[i].path, *slash = strrchr(p, '/');
		if (i && !strcmp(s->v[i - 1].path, p))
			return *bad = "a path twice", *badpath = s->v[i].path, -1;
		if (slash) {
			/* Its folder is listed, as a folder: nothing is ever
			 * written below a file or a symlink. */
			char *dir = xstrndup(p, (size_t)(slash - p));
			const struct snap_ent *d = side_find(s, dir);
			free(dir);
			if (!d || d->type != 'd')
				return *bad = "a path whose folder is not listed as one",
				       *badpath = s->v[i].path, -1;
		}
	}
	return 0;
}

int job_snap_parse(const void *p, size_t len, struct snap_side *a, struct snap_side *b,
		   struct gr_err *err)
{
	struct gr_rd rd;
	const char *bad = NULL;
	char *badpath = NULL;

	*a = (struct snap_side){ .conf = STRVEC_INIT };
	*b = (struct snap_side){ .conf = STRVEC_INIT };
	rd_init(&rd, p, len);
	if (side_get(&rd, a, &bad, &badpath) < 0 || side_get(&rd, b, &bad, &badpath) < 0 ||
	    (rd.bad && (bad = "cut short")) || (rd.n && (bad = "trailing bytes")))
		return gr_errf(err, GR_EPROTO, "the host sent a malformed snapshot listing (%s%s%s%s); "
			       "refusing it", bad, badpath ? ": '" : "", badpath ? ts(badpath) : "",
			       badpath ? "'" : "");
	return 0;
}

int job_snap_list(struct gr_conn *c, const char *project, const char *ja, const char *jb,
		  struct snap_side *a, struct snap_side *b, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, got = STRBUF_INIT;
	struct gr_frame f;
	uint32_t id = conn_next_id(c);
	int rc;

	*a = (struct snap_side){ .conf = STRVEC_INIT };
	*b = (struct snap_side){ .conf = STRVEC_INIT };
	put_str(&pl, project);
	put_str(&pl, ja);
	put_str(&pl, jb);
	conn_send(c, GR_MSG_JOB_SNAP_LIST, 0, id, pl.buf, pl.len);
	sb_release(&pl);
	for (;;) {
		if ((rc = conn_recv_idle(c, &f, conn_idle_ms(), err)) < 0)
			break;
		if (f.id != id)
			continue;
		if (f.type == GR_MSG_DATA) {
			if (got.len + f.len > JOB_DIFF_LIST_MAX) {
				conn_send(c, GR_MSG_CANCEL, 0, id, NULL, 0);
				rc = gr_errf(err, GR_EIO, "the snapshots' listing is over %u MiB: "
					     "too large to compare", JOB_DIFF_LIST_MAX >> 20);
				break;
			}
			sb_add(&got, f.payload, f.len);
		} else if (f.type == GR_MSG_OK) {
			rc = job_snap_parse(got.buf ? got.buf : "", got.len, a, b, err);
			break;
		} else if (f.type == GR_MSG_ERROR) {
			rc = conn_error_from_frame(&f, err);
			break;
		}
	}
	sb_release(&got);
	return rc;
}

/* ---- what differs ---- */

struct item {
	const struct snap_ent *ea, *eb; /* either may be NULL: added, removed */
	struct strbuf ca, cb;           /* contents fetched */
	int fetch_a, fetch_b;
	const char *why;                /* not shown: why */
};

/* 1 when a path has a ".git" component (git would not add it). */
static int in_git_dir(const char *p)
{
	for (;;) {
		size_t n = strcspn(p, "/");
		if (n == 4 && !strncmp(p, ".git", 4))
			return 1;
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

static int exec_bit(const struct snap_ent *e)
{
	return e->type == 'f' && (e->mode & 0111);
}

/* Pair the files and links of a and b by path: the ones that differ. */
static void plan(const struct snap_side *a, const struct snap_side *b, struct item **out,
		 size_t *n)
{
	size_t i = 0, j = 0, cap = 0;

	*out = NULL;
	*n = 0;
	while (i < a->n || j < b->n) {
		const struct snap_ent *ea = i < a->n ? &a->v[i] : NULL, *eb = j < b->n ? &b->v[j] : NULL;
		int c = !ea ? 1 : !eb ? -1 : strcmp(ea->path, eb->path);
		if (c < 0)
			eb = NULL, i++;
		else if (c > 0)
			ea = NULL, j++;
		else
			i++, j++;
		if (ea && ea->type == 'd')
			ea = NULL;
		if (eb && eb->type == 'd')
			eb = NULL;
		if (!ea && !eb)
			continue;
		int same_data = ea && eb && ea->type == eb->type && !strcmp(ea->hash, eb->hash);
		if (same_data && exec_bit(ea) == exec_bit(eb))
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 64;
			*out = xrealloc(*out, cap * sizeof(**out));
		}
		struct item *it = &(*out)[(*n)++];
		*it = (struct item){ ea, eb, STRBUF_INIT, STRBUF_INIT, ea && !same_data, eb && !same_data, NULL };
	}
}

/* Fetch the contents the items want from one job, in requests of at most
 * JOB_SNAP_READ_MAX bytes; *budget: what the diff may still fetch. */
static int fetch(struct gr_conn *c, const char *project, const char *id, struct item *v, size_t n,
		 int side_b, uint64_t *budget, struct gr_err *err)
{
	size_t i = 0;
	int rc = 0;

	while (i < n && rc == 0) {
		struct strbuf pl = STRBUF_INIT, rep = STRBUF_INIT;
		struct strvec paths = STRVEC_INIT;
		size_t *idx = xcalloc(n - i + 1, sizeof(*idx)), k = 0;
		uint64_t bytes = 0;

		for (; i < n; i++) {
			struct item *it = &v[i];
			const struct snap_ent *e = side_b ? it->eb : it->ea;
			if (it->why || !(side_b ? it->fetch_b : it->fetch_a))
				continue;
			if (bytes + e->size > JOB_SNAP_READ_MAX && paths.n)
				break;
			bytes += e->size;
			sv_push(&paths, e->path);
			idx[k++] = i;
		}
		if (!paths.n) {
			free(idx);
			break;
		}
		put_str(&pl, project);
		put_str(&pl, id);
		put_u32(&pl, (uint32_t)paths.n);
		for (size_t p = 0; p < paths.n; p++)
			put_str(&pl, paths.v[p]);
		rc = conn_request(c, GR_MSG_JOB_SNAP_READ, pl.buf, pl.len, &rep, err);
		if (rc == 0) {
			struct gr_rd rd;
			rd_init(&rd, rep.buf ? rep.buf : "", rep.len);
			if (get_u32(&rd) != paths.n)
				rd.bad = 1;
			for (size_t p = 0; p < paths.n && !rd.bad; p++) {
				struct item *it = &v[idx[p]];
				uint8_t ok = get_u8(&rd);
				size_t len = 0;
				const uint8_t *b = get_bytes(&rd, &len);
				const struct snap_ent *e = side_b ? it->eb : it->ea;
				if (!b || len > JOB_SNAP_FILE_MAX) {
					rd.bad = 1;
				} else if (!ok) {
					it->why = "the host did not send it (gone, or changed since it was listed)";
				} else if (e->type == 'l' && (!len || len >= 4096 || memchr(b, '\0', len))) {
					it->why = "the host sent a bad symlink target";
				} else if (len > *budget) {
					it->why = "past what one diff fetches";
				} else {
					*budget -= len;
					sb_add(side_b ? &it->cb : &it->ca, b, len);
				}
			}
			if (rd.bad || rd.n)
				rc = gr_errf(err, GR_EPROTO, "the host sent a malformed JOB_SNAP_READ answer; "
					     "refusing it");
		}
		sb_release(&pl);
		sb_release(&rep);
		sv_clear(&paths);
		free(idx);
	}
	return rc;
}

/* ---- the trees and git ---- */

/* e's content c into the tree at root: folders made below it (never
 * through a symlink), the file made new (never over anything). */
static int write_ent(int root, const struct snap_ent *e, const struct strbuf *c)
{
	const char *slash = strrchr(e->path, '/'), *base = slash ? slash + 1 : e->path;
	int p = slash ? walk_below(root, e->path, (size_t)(slash - e->path), 1) : root, rc = -1;

	if (p < 0)
		return -1;
	if (e->type == 'l') {
		char *t = xstrndup(c->buf ? c->buf : "", c->len);
		rc = symlinkat(t, p, base);
		free(t);
	} else {
		int fd = openat(p, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				exec_bit(e) ? 0755 : 0644);
		if (fd >= 0) {
			rc = write_full(fd, c->buf ? c->buf : "", c->len);
			if (close(fd) < 0)
				rc = -1;
		}
	}
	if (p != root)
		close(p);
	return rc;
}

/* Run git with args in the scratch repository gitdir (work tree wt, or
 * none), its config and the user's left out (their diff drivers and
 * hooks must not run on the host's bytes). out: capture stdout there; NULL:
 * to our stdout, through the terminal filter when it is a terminal. The
 * exit code, or -1 (errno) when git could not be run. */
static int git_run(const char *gitdir, const char *wt, const char *const *args, struct strbuf *out)
{
	struct strvec av = STRVEC_INIT, env = STRVEC_INIT;
	int pfd[2], st;
	pid_t pid;

	sv_push(&av, "git");
	for (; *args; args++)
		sv_push(&av, *args);
	for (char **e = environ; *e; e++)
		if (strncmp(*e, "GIT_", 4) && strncmp(*e, "LC_ALL=", 7))
			sv_push(&env, *e);
	sv_pushf(&env, "GIT_DIR=%s", gitdir);
	if (wt)
		sv_pushf(&env, "GIT_WORK_TREE=%s", wt);
	sv_push(&env, "GIT_CONFIG_NOSYSTEM=1");
	sv_push(&env, "GIT_CONFIG_GLOBAL=/dev/null");
	sv_push(&env, "GIT_PAGER=cat");
	sv_push(&env, "LC_ALL=C");
	fflush(stdout);
	if (pipe2(pfd, O_CLOEXEC) < 0) {
		sv_clear(&av);
		sv_clear(&env);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		dup2(pfd[1], 1);
		if (wt && chdir(wt) < 0)
			_exit(127);
		signal(SIGPIPE, SIG_DFL);
		execvpe("git", av.v, env.v);
		_exit(127);
	}
	close(pfd[1]);
	if (pid > 0) {
		struct term_filter tf;
		int filter = !out && isatty(1);
		char buf[65536];
		ssize_t r;
		tf_init(&tf);
		while ((r = read(pfd[0], buf, sizeof(buf))) != 0) {
			if (r < 0 && errno == EINTR)
				continue;
			if (r < 0)
				break;
			if (out && out->len < (1u << 20))
				sb_add(out, buf, (size_t)r);
			else if (!out)
				tf_write(filter ? &tf : NULL, 1, buf, (size_t)r);
		}
		if (filter) {
			struct strbuf rest = STRBUF_INIT;
			tf_finish(&tf, &rest);
			write_full(1, rest.buf ? rest.buf : "", rest.len);
			sb_release(&rest);
		}
	}
	close(pfd[0]);
	sv_clear(&av);
	sv_clear(&env);
	if (pid < 0)
		return -1;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return exit_code_of(st);
}

/* Side's tree into the repository's objects: its id (new) or NULL. */
static char *tree_of(const char *gitdir, const char *wt)
{
	static const char *const add[] = { "add", "-A", "-f", "--", ".", NULL };
	static const char *const write[] = { "write-tree", NULL };
	static const char *const empty[] = { "read-tree", "--empty", NULL };
	struct strbuf out = STRBUF_INIT;
	char *t = NULL;

	if (git_run(gitdir, NULL, empty, NULL) == 0 && git_run(gitdir, wt, add, NULL) == 0 &&
	    git_run(gitdir, NULL, write, &out) == 0 && out.len >= 40) {
		while (out.len && (out.buf[out.len - 1] == '\n'))
			out.buf[--out.len] = '\0';
		t = sb_detach(&out, NULL);
	}
	sb_release(&out);
	return t;
}

/* The config lines: b's that a lacks and a's that b lacks, by key. */
static int conf_diff(const struct snap_side *a, const struct snap_side *b, struct strbuf *o)
{
	struct strvec keys = STRVEC_INIT;
	int any = 0;

	for (int s = 0; s < 2; s++) {
		const struct strvec *c = s ? &b->conf : &a->conf;
		for (size_t i = 0; i < c->n; i++) {
			size_t kl = strcspn(c->v[i], " ");
			size_t k;
			for (k = 0; k < keys.n && !(strlen(keys.v[k]) == kl && !strncmp(keys.v[k], c->v[i], kl)); k++)
				;
			if (k == keys.n) {
				char *key = xstrndup(c->v[i], kl);
				sv_push(&keys, key);
				free(key);
			}
		}
	}
	for (size_t k = 0; k < keys.n; k++) {
		size_t kl = strlen(keys.v[k]);
		for (int s = 0; s < 2; s++) {
			const struct strvec *mine = s ? &b->conf : &a->conf, *theirs = s ? &a->conf : &b->conf;
			for (size_t i = 0; i < mine->n; i++) {
				size_t j;
				if (strncmp(mine->v[i], keys.v[k], kl) || mine->v[i][kl] != ' ')
					continue;
				for (j = 0; j < theirs->n && strcmp(theirs->v[j], mine->v[i]); j++)
					;
				if (j < theirs->n)
					continue;
				sb_addf(o, "%c", s ? '+' : '-');
				ts_add(o, mine->v[i]);
				sb_adds(o, "\n");
				any = 1;
			}
		}
	}
	sv_clear(&keys);
	return any;
}

static void rm_scratch(const char *dir)
{
	char *copy = xstrdup(dir), *slash = strrchr(copy, '/');

	if (slash) {
		*slash = '\0';
		int pfd = open(*copy ? copy : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (pfd >= 0) {
			rm_tree_at(pfd, slash + 1);
			close(pfd);
		}
	}
	free(copy);
}

int job_snap_diff(struct gr_conn *c, const char *project, const struct snap_side *a,
		  const struct snap_side *b, int stat, int *differ, struct gr_err *err)
{
	struct item *v = NULL;
	size_t n = 0, shown = 0;
	struct strbuf conf = STRBUF_INIT, notes = STRBUF_INIT;
	uint64_t budget = JOB_DIFF_TOTAL_MAX, planned = JOB_DIFF_TOTAL_MAX;
	const char *tmp = getenv("TMPDIR");
	char *scratch = NULL, *da = NULL, *db = NULL, *gd = NULL, *ta = NULL, *tb = NULL;
	int rc = 0;

	*differ = 0;
	plan(a, b, &v, &n);
	for (size_t i = 0; i < n; i++) {
		struct item *it = &v[i];
		const char *path = it->ea ? it->ea->path : it->eb->path;
		uint64_t want = (it->fetch_a ? it->ea->size : 0) + (it->fetch_b ? it->eb->size : 0);
		if (in_git_dir(path))
			it->why = "in a .git folder";
		else if ((it->fetch_a && it->ea->size > JOB_SNAP_FILE_MAX) ||
			 (it->fetch_b && it->eb->size > JOB_SNAP_FILE_MAX))
			it->why = "over 1 MiB";
		else if (want > planned)
			it->why = "past what one diff fetches";
		else
			planned -= want;
	}
	if ((rc = fetch(c, project, a->id, v, n, 0, &budget, err)) < 0 ||
	    (rc = fetch(c, project, b->id, v, n, 1, &budget, err)) < 0)
		goto out;
	if (conf_diff(a, b, &conf)) {
		*differ = 1;
		printf("--- job %s\n+++ job %s\n@@ config @@\n%s", a->id, b->id, conf.buf);
	}
	for (size_t i = 0; i < n; i++) {
		char sa[32] = "-", sbz[32] = "-";
		struct item *it = &v[i];
		*differ = 1;
		if (!it->why) {
			shown++;
			continue;
		}
		if (it->ea)
			fmt_size(it->ea->size, sa, sizeof(sa));
		if (it->eb)
			fmt_size(it->eb->size, sbz, sizeof(sbz));
		sb_addf(&notes, "%s %s: %s, not shown (%s -> %s)\n",
			!it->ea ? "added" : !it->eb ? "removed" : "changed",
			ts(it->ea ? it->ea->path : it->eb->path), it->why, sa, sbz);
	}
	if (shown) {
		int ra, rb, rg = -1;
		scratch = xasprintf("%s/gpurun-diff.XXXXXX", tmp && *tmp == '/' ? tmp : "/tmp");
		if (!mkdtemp(scratch)) {
			rc = gr_errf(err, GR_EIO, "cannot make a scratch folder in %s: %s",
				     tmp && *tmp == '/' ? tmp : "/tmp", strerror(errno));
			free(scratch);
			scratch = NULL;
			goto out;
		}
		da = xasprintf("%s/a", scratch);
		db = xasprintf("%s/b", scratch);
		gd = xasprintf("%s/git", scratch);
		static const char *const init[] = { "init", "-q", NULL };
		if (mkdir(da, 0700) < 0 || mkdir(db, 0700) < 0 || git_run(gd, NULL, init, NULL) != 0) {
			rc = gr_errf(err, GR_EIO, "cannot set up git in %s (is git installed?)", scratch);
			goto out;
		}
		/* Nothing in the host's trees changes what git reads: no end
		 * of line conversion, no filter. */
		char *info = xasprintf("%s/info", gd), *attr = xasprintf("%s/info/attributes", gd);
		static const char no_conv[] = "* -text -filter -ident\n";
		if ((mkdir(info, 0700) < 0 && errno != EEXIST) ||
		    write_file_atomic(attr, no_conv, sizeof(no_conv) - 1, 0644, err) < 0)
			rc = gr_errf(err, GR_EIO, "cannot set up git in %s", scratch);
		free(info);
		free(attr);
		if (rc < 0)
			goto out;
		ra = open(da, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rb = open(db, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		for (size_t i = 0; ra >= 0 && rb >= 0 && i < n && rc == 0; i++) {
			struct item *it = &v[i];
			if (it->why)
				continue;
			if ((it->ea && write_ent(ra, it->ea, &it->ca) < 0) ||
			    (it->eb && write_ent(rb, it->eb, &it->cb) < 0))
				rc = gr_errf(err, GR_EPROTO, "cannot write '%s' for the diff: %s; the host's "
					     "listing does not add up", ts(it->ea ? it->ea->path : it->eb->path),
					     strerror(errno));
		}
		if (ra < 0 || rb < 0)
			rc = gr_errf(err, GR_EIO, "cannot open the scratch folder %s", scratch);
		if (ra >= 0)
			close(ra);
		if (rb >= 0)
			close(rb);
		if (rc < 0)
			goto out;
		ta = tree_of(gd, da);
		tb = ta ? tree_of(gd, db) : NULL;
		if (tb) {
			const char *args[] = { "diff", "--no-color", "--no-ext-diff", "--no-textconv",
					       stat ? "--stat" : "-p", ta, tb, NULL };
			rg = git_run(gd, NULL, args, NULL);
		}
		if (rg != 0) {
			rc = gr_errf(err, GR_EIO, "git could not compare the snapshots (in %s)", scratch);
			goto out;
		}
	}
	fflush(stdout);
	if (notes.len)
		fputs(notes.buf, stdout);
out:
	if (scratch)
		rm_scratch(scratch);
	for (size_t i = 0; i < n; i++) {
		sb_release(&v[i].ca);
		sb_release(&v[i].cb);
	}
	free(v);
	sb_release(&conf);
	sb_release(&notes);
	free(scratch);
	free(da);
	free(db);
	free(gd);
	free(ta);
	free(tb);
	return rc;
}
