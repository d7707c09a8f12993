/* Finding a job's processes in /proc and stopping them (see job_proc.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job_gpu.h"
#include "job_proc.h"
#include "job_store.h"

struct pinfo {
	pid_t pid, ppid, pgrp, sid;
	char state;
	char comm[64];
	int member;
};

static int read_stat(pid_t pid, struct pinfo *p)
{
	char path[64], buf[1024];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	/* "pid (comm) S ppid pgrp session ...": comm may hold spaces and ')'. */
	char *l = strchr(buf, '('), *r = strrchr(buf, ')');
	if (!l || !r || r < l)
		return -1;
	size_t cl = (size_t)(r - l - 1);
	if (cl >= sizeof(p->comm))
		cl = sizeof(p->comm) - 1;
	memcpy(p->comm, l + 1, cl);
	p->comm[cl] = '\0';
	int ppid, pgrp, sid;
	char st;
	if (sscanf(r + 1, " %c %d %d %d", &st, &ppid, &pgrp, &sid) != 4)
		return -1;
	p->pid = pid;
	p->state = st;
	p->ppid = ppid;
	p->pgrp = pgrp;
	p->sid = sid;
	return 0;
}

static int has_marker(pid_t pid, const char *id)
{
	char *job = gpu_pid_job((uint32_t)pid);
	int r = job && !strcmp(job, id);

	free(job);
	return r;
}

size_t job_procs(const char *id, pid_t sid, struct job_proc **out)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	struct pinfo *ps = NULL;
	size_t n = 0, nout = 0;
	pid_t self = getpid();

	*out = NULL;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		long long v;
		struct pinfo p = { 0 };
		if (parse_ll(e->d_name, 2, 1 << 30, &v) < 0 || (pid_t)v == self)
			continue;
		if (read_stat((pid_t)v, &p) < 0)
			continue;
		p.member = (sid > 0 && (p.sid == sid || p.pgrp == sid)) || has_marker(p.pid, id);
		ps = xrealloc(ps, (n + 1) * sizeof(*ps));
		ps[n++] = p;
	}
	closedir(d);
	/* Descendants of members are members (a child that both left the
	 * session and cleared its environment). */
	for (int changed = 1; changed;) {
		changed = 0;
		for (size_t i = 0; i < n; i++) {
			if (ps[i].member)
				continue;
			for (size_t j = 0; j < n; j++)
				if (ps[j].member && ps[j].pid == ps[i].ppid) {
					ps[i].member = changed = 1;
					break;
				}
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (!ps[i].member || ps[i].state == 'Z' || ps[i].state == 'X')
			continue;
		*out = xrealloc(*out, (nout + 1) * sizeof(**out));
		(*out)[nout].pid = ps[i].pid;
		snprintf((*out)[nout].comm, sizeof((*out)[nout].comm), "%s", ps[i].comm);
		nout++;
	}
	free(ps);
	return nout;
}

struct pidset {
	pid_t *v;
	size_t n;
};

static int pidset_has(const struct pidset *s, pid_t p)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == p)
			return 1;
	return 0;
}

static int pidset_add(struct pidset *s, pid_t p)
{
	if (pidset_has(s, p))
		return 0;
	s->v = xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
	s->v[s->n++] = p;
	return 1;
}

int job_stop_run(const char *dir, int grace_s, struct strbuf *payload, struct gr_err *err)
{
	struct job_rec r;
	struct job_proc *ps = NULL;
	struct pidset seen = { 0 };
	struct gpu_report g = { 0 };
	uint32_t nterm = 0;
	int killed = 0, rc;
	size_t n;
	char *p;

	if ((rc = job_load(dir, &r, err)) < 0)
		return rc;
	p = job_meta(dir, "stopped");
	if (!job_rec_ended(&r))
		write_file_atomic(p, "", 0, 0644, NULL);
	free(p);

	/* SIGTERM everything now, and whatever appears during the grace. */
	uint64_t deadline = now_ms() + (uint64_t)grace_s * 1000;
	for (;;) {
		n = job_procs(r.id, (pid_t)r.pid, &ps);
		for (size_t i = 0; i < n; i++)
			if (pidset_add(&seen, ps[i].pid)) {
				kill(ps[i].pid, SIGTERM);
				kill(ps[i].pid, SIGCONT); /* a stopped process must see it */
				nterm++;
			}
		free(ps);
		ps = NULL;
		if (!n || now_ms() >= deadline)
			break;
		usleep(100 * 1000);
	}
	/* Then SIGKILL, until nothing is left (or it will not go). */
	for (int round = 0; n && round < 40; round++) {
		killed = 1;
		n = job_procs(r.id, (pid_t)r.pid, &ps);
		for (size_t i = 0; i < n; i++) {
			pidset_add(&seen, ps[i].pid);
			kill(ps[i].pid, SIGKILL);
		}
		free(ps);
		ps = NULL;
		if (n)
			usleep(50 * 1000);
	}
	n = job_procs(r.id, (pid_t)r.pid, &ps);

	/* The supervisor records the end once the job's main process is
	 * gone; give it a moment so the reply shows the final state. */
	for (int i = 0; i < 50 && !job_rec_ended(&r); i++) {
		job_rec_clear(&r);
		if ((rc = job_load(dir, &r, err)) < 0)
			goto out;
		if (!job_rec_ended(&r))
			usleep(100 * 1000);
	}
	job_rec_put(payload, &r);
	put_u32(payload, nterm);
	put_u8(payload, (uint8_t)killed);
	put_u32(payload, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		put_u32(payload, (uint32_t)ps[i].pid);
		put_str(payload, ps[i].comm);
	}
	/* Does any of its processes (even a survivor) still hold a GPU? */
	gpu_report_load(&g, 1);
	struct strbuf holders = STRBUF_INIT;
	uint32_t nh = 0;
	for (size_t i = 0; i < g.napps; i++) {
		const struct gpu_app *a = &g.apps[i];
		if (!pidset_has(&seen, (pid_t)a->pid) && !(a->job && !strcmp(a->job, r.id)))
			continue;
		char idx[16] = "";
		for (size_t j = 0; j < g.ngpus; j++)
			if (!strcmp(g.gpus[j].uuid, a->gpu_uuid))
				snprintf(idx, sizeof(idx), "%u", g.gpus[j].index);
		put_u32(&holders, a->pid);
		put_str(&holders, idx[0] ? idx : a->gpu_uuid);
		nh++;
	}
	put_u32(payload, nh);
	sb_add(payload, holders.buf, holders.len);
	sb_release(&holders);
	rc = 0;
out:
	gpu_report_free(&g);
	free(ps);
	free(seen.v);
	job_rec_clear(&r);
	return rc;
}
