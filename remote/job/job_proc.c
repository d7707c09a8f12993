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

size_t job_procs_alive(const char *id, uint32_t pid, struct strbuf *desc)
{
	struct job_proc *ps = NULL;
	pid_t sid = pid && pid < (1u << 30) && has_marker((pid_t)pid, id) ? (pid_t)pid : 0;
	size_t n = job_procs(id, sid, &ps);

	for (size_t i = 0; desc && i < n; i++) {
		if (i == 4) {
			sb_adds(desc, ", ...");
			break;
		}
		sb_addf(desc, "%spid %d %s", i ? ", " : "", (int)ps[i].pid, ps[i].comm);
	}
	free(ps);
	return n;
}

void job_orphan_ids(const char *root, struct strvec *ids)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t rl = strlen(root);

	if (!d)
		return;
	while ((e = readdir(d))) {
		long long v;
		char path[64];
		struct strbuf sb = STRBUF_INIT;
		const char *id = NULL, *dir = NULL;

		if (parse_ll(e->d_name, 2, 1 << 30, &v) < 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%lld/environ", v);
		if (read_file(path, &sb, NULL) < 0 || !sb.len) {
			sb_release(&sb);
			continue;
		}
		sb_add(&sb, "", 1); /* the last entry ends */
		for (size_t off = 0; off < sb.len; off += strlen(sb.buf + off) + 1) {
			if (!strncmp(sb.buf + off, "GPURUN_JOB_ID=", 14))
				id = sb.buf + off + 14;
			else if (!strncmp(sb.buf + off, "GPURUN_JOB_DIR=", 15))
				dir = sb.buf + off + 15;
		}
		if (id && dir && job_id_valid(id) && !strncmp(dir, root, rl) && dir[rl] == '/' &&
		    !strcmp(dir + rl + 1, id) && access(dir, F_OK) < 0 && errno == ENOENT) {
			int seen = 0;
			for (size_t i = 0; i < ids->n; i++)
				seen |= !strcmp(ids->v[i], id);
			if (!seen)
				sv_push(ids, id);
		}
		sb_release(&sb);
	}
	closedir(d);
}
