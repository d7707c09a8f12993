/* A job runs its own snapshot's code, also through editable installs.
 *
 * Setup runs in the project folder, so `pip install -e .`, `uv sync`,
 * `poetry install` and conda's `pip: [-e .]` point the environment at
 * the project folder (a .pth line with its path, or setuptools' finder
 * with a mapping to it), which every later sync changes: the job would
 * import whatever was synced last, not what it started from. So the
 * build and run steps get a sitecustomize.py of gpurun's first on
 * PYTHONPATH (in the job's own .gpurun/py/, so a container, which mounts
 * the job's folder at the same path, sees it too), with
 * GPURUN_PROJECT_DIR: at start-up, before the program imports anything,
 * it moves every sys.path entry and editable-finder mapping that lies in
 * the project folder to the same place in $GPURUN_JOB_DIR (where that
 * exists), then runs the next sitecustomize on the path, if any. Child
 * processes (DataLoader workers started with spawn) inherit both
 * variables, so they import the snapshot too.
 *
 * Not reached: a python started with -E, -I or -S, a login shell's rc
 * file that replaces PYTHONPATH, and a package linked into site-packages
 * (flit install --symlink): job_pyhook_report() names those it finds in
 * the project's environments before the job starts. */
#ifndef GR_JOB_PYHOOK_H
#define GR_JOB_PYHOOK_H

#include "err.h"
#include "util.h"

/* The folder put first on PYTHONPATH (dir/.gpurun/py); the caller's. */
char *job_pyhook_dir(const char *dir);

/* Write the hook into job folder dir (again is harmless). */
int job_pyhook_write(const char *dir, struct gr_err *err);

/* Look through the Python environments in project (folders holding
 * pyvenv.cfg or conda-meta/ at its top, and the persistent paths) for
 * editable installs that point into project: one line per finding,
 * appended to mapped for those the hook moves to the job's snapshot
 * ("src (.venv, __editable__.mypkg-0.1.pth)") and to unmapped for those
 * it cannot (a sentence). */
void job_pyhook_report(const char *project, const struct strvec *persist, struct strvec *mapped,
		       struct strvec *unmapped);

#endif
