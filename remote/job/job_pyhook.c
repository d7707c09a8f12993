/* The snapshot's code through editable installs (see job_pyhook.h): the
 * sitecustomize.py a job's steps find first, and the look through the
 * project's environments that says what it covers. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "job_pyhook.h"
#include "job_snap.h"
#include "job_store.h"

static const char hook_py[] =
	"# gpurun: this job imports its own snapshot's code, also through editable\n"
	"# installs that point at the project folder (setup ran there). Moves every\n"
	"# sys.path entry and editable-finder mapping inside $GPURUN_PROJECT_DIR to\n"
	"# the same place in $GPURUN_JOB_DIR, then runs the next sitecustomize.\n"
	"import os, sys\n"
	"\n"
	"def _gpurun_snapshot():\n"
	"    proj, job = os.environ.get('GPURUN_PROJECT_DIR'), os.environ.get('GPURUN_JOB_DIR')\n"
	"    if not proj or not job:\n"
	"        return\n"
	"    roots = {proj.rstrip(os.sep), os.path.realpath(proj)}\n"
	"    def moved(p):\n"
	"        if not isinstance(p, str):\n"
	"            return None\n"
	"        for r in roots:\n"
	"            if p == r or p.startswith(r + os.sep):\n"
	"                n = job + p[len(r):]\n"
	"                return n if os.path.exists(n) else None\n"
	"        return None\n"
	"    for i, p in enumerate(sys.path):\n"
	"        n = moved(p)\n"
	"        if n:\n"
	"            sys.path[i] = n\n"
	"    for name, mod in list(sys.modules.items()):\n"
	"        if not name.startswith('__editable__'):\n"
	"            continue\n"
	"        mapping = getattr(mod, 'MAPPING', None)\n"
	"        if isinstance(mapping, dict):\n"
	"            for k, v in list(mapping.items()):\n"
	"                n = moved(v)\n"
	"                if n:\n"
	"                    mapping[k] = n\n"
	"        spaces = getattr(mod, 'NAMESPACES', None)\n"
	"        if isinstance(spaces, dict):\n"
	"            for k, v in list(spaces.items()):\n"
	"                if isinstance(v, list):\n"
	"                    spaces[k] = [moved(p) or p for p in v]\n"
	"    sys.path_importer_cache.clear()\n"
	"\n"
	"def _gpurun_next():\n"
	"    import importlib.machinery, importlib.util\n"
	"    here = os.path.dirname(os.path.abspath(__file__))\n"
	"    rest = [p for p in sys.path if os.path.abspath(p or '.') != here]\n"
	"    spec = importlib.machinery.PathFinder.find_spec('sitecustomize', rest)\n"
	"    if spec and spec.loader:\n"
	"        spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
	"\n"
	"try:\n"
	"    _gpurun_snapshot()\n"
	"except Exception as e:\n"
	"    sys.stderr.write('gpurun: sitecustomize: %s\\n' % e)\n"
	"_gpurun_next()\n";

char *job_pyhook_dir(const char *dir)
{
	return xasprintf("%s/.gpurun/py", dir);
}

int job_pyhook_write(const char *dir, struct gr_err *err)
{
	char *d = job_pyhook_dir(dir), *p = xasprintf("%s/sitecustomize.py", d);
	int rc = 0;

	if (mkdir(d, 0755) < 0 && errno != EEXIST)
		rc = gr_errf(err, GR_EIO, "cannot create '%s': %s", d, strerror(errno));
	else
		rc = write_file_atomic(p, hook_py, sizeof(hook_py) - 1, 0644, err);
	free(d);
	free(p);
	return rc;
}

/* ---- what the project's environments hold ---- */

/* path, inside project? The rest after it ("" for project itself). */
static const char *under(const char *path, const char *project, const char *real)
{
	for (int k = 0; k < 2; k++) {
		const char *r = k ? real : project;
		size_t n = strlen(r);
		while (n > 1 && r[n - 1] == '/')
			n--;
		if (n && !strncmp(path, r, n) && (path[n] == '/' || !path[n]))
			return path[n] == '/' ? path + n + 1 : path + n;
	}
	return NULL;
}

struct found {
	struct strvec *mapped, *unmapped;
};

static void look_site(const char *project, const char *real, const char *env, const char *site,
		      struct found *out)
{
	DIR *d = opendir(site);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		char *p = xasprintf("%s/%s", site, e->d_name);
		struct stat st;
		if (e->d_name[0] == '.' || lstat(p, &st) < 0) {
			free(p);
			continue;
		}
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			if (realpath(p, target) && under(target, project, real))
				sv_pushf(out->unmapped, "%s/%s links into the project folder: what imports "
					 "it sees the project's files, not this job's snapshot", env, e->d_name);
		} else if (S_ISREG(st.st_mode) && n > 4 && !strcmp(e->d_name + n - 4, ".pth")) {
			struct strbuf sb = STRBUF_INIT;
			if (st.st_size < (1 << 20) && read_file(p, &sb, NULL) == 0 && sb.buf) {
				char *save = NULL;
				for (char *l = strtok_r(sb.buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
					const char *rest;
					l[strcspn(l, "\r")] = '\0';
					if (!*l || *l == '#' || !strncmp(l, "import", 6))
						continue;
					if ((rest = under(l, project, real)))
						sv_pushf(out->mapped, "%s (%s, %s)", *rest ? rest : ".", env,
							 e->d_name);
				}
			}
			sb_release(&sb);
		} else if (S_ISREG(st.st_mode) && !strncmp(e->d_name, "__editable__", 12) &&
			   n > 3 && !strcmp(e->d_name + n - 3, ".py")) {
			struct strbuf sb = STRBUF_INIT;
			if (st.st_size < (1 << 20) && read_file(p, &sb, NULL) == 0 && sb.buf &&
			    (strstr(sb.buf, project) || strstr(sb.buf, real)))
				sv_pushf(out->mapped, "the packages of %s (%s)", e->d_name, env);
			sb_release(&sb);
		}
		free(p);
	}
	closedir(d);
}

/* env (relative to project): its lib/python*\/site-packages. */
static void look_env(const char *project, const char *real, const char *env, struct found *out)
{
	char *lib = xasprintf("%s/%s/lib", project, env);
	DIR *d = opendir(lib);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "python", 6))
			continue;
		char *site = xasprintf("%s/%s/site-packages", lib, e->d_name);
		look_site(project, real, env, site, out);
		free(site);
	}
	if (d)
		closedir(d);
	free(lib);
}

void job_pyhook_report(const char *project, const struct strvec *persist, struct strvec *mapped,
		       struct strvec *unmapped)
{
	struct found out = { mapped, unmapped };
	struct strvec envs = STRVEC_INIT;
	char real[PATH_MAX];
	int pfd = open(project, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = pfd >= 0 ? fdopendir(pfd) : NULL;
	struct dirent *e;

	if (!realpath(project, real))
		snprintf(real, sizeof(real), "%s", project);
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' || (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
					    strcmp(e->d_name, ".gpurun")))
			if (job_snap_is_env(dirfd(d), e->d_name))
				sv_push(&envs, e->d_name);
	if (d)
		closedir(d);
	else if (pfd >= 0)
		close(pfd);
	for (size_t i = 0; persist && i < persist->n; i++) {
		size_t n = strlen(persist->v[i]);
		char *rel = xstrndup(persist->v[i], n && persist->v[i][n - 1] == '/' ? n - 1 : n);
		int seen = strchr(rel, '/') == NULL; /* a top-level one was found above */
		for (size_t j = 0; !seen && j < envs.n; j++)
			seen = !strcmp(envs.v[j], rel);
		if (!seen) {
			char *a = xasprintf("%s/%s/pyvenv.cfg", project, rel);
			char *b = xasprintf("%s/%s/conda-meta", project, rel);
			if (access(a, F_OK) == 0 || access(b, F_OK) == 0)
				sv_push(&envs, rel);
			free(a);
			free(b);
		}
		free(rel);
	}
	for (size_t i = 0; i < envs.n; i++)
		look_env(project, real, envs.v[i], &out);
	sv_clear(&envs);
}
