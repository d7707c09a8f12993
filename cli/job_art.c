/* Artifact pulls and their safe extraction (see job_art.h). */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "art_limits.h"
#include "config.h"
#include "job_art.h"
#include "job_proto.h"
#include "term_filter.h"

#define PART_SUFFIX ".gpurun-part"

/* Why name may not be extracted, or NULL when it is fine. */
static const char *bad_name(const char *name)
{
	if (!name || !*name)
		return "it has no name";
	if (name[0] == '/')
		return "its path is absolute";
	for (const char *p = name; *p;) {
		size_t n = strcspn(p, "/");
		if (n == 2 && p[0] == '.' && p[1] == '.')
			return "its path leads out of the folder ('..')";
		p += n;
		while (*p == '/')
			p++;
	}
	return NULL;
}

int art_extract_fd(int fd, const char *dest, struct art_limits *lim, uint32_t *files,
		   struct gr_err *err)
{
	struct archive *in = archive_read_new(), *out = archive_write_disk_new();
	struct archive_entry *e;
	char *part = NULL, *final = NULL;
	int cwd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0, r;

	*files = 0;
	archive_read_support_filter_zstd(in);
	archive_read_support_format_tar(in);
	archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_NODOTDOT |
				       ARCHIVE_EXTRACT_SECURE_SYMLINKS |
				       ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
				       ARCHIVE_EXTRACT_TIME);
	if (cwd < 0 || chdir(dest) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot enter '%s': %s", ts(dest), strerror(errno));
		goto out;
	}
	if (archive_read_open_fd(in, fd, 65536) != ARCHIVE_OK) {
		rc = gr_errf(err, GR_EPROTO, "cannot read the artifacts: %s", archive_error_string(in));
		goto out;
	}
	while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e), *why = bad_name(name);
		mode_t type = archive_entry_filetype(e);

		if (!why && archive_entry_hardlink(e))
			why = "it is a hard link";
		else if (!why && type == AE_IFLNK)
			why = "it is a symbolic link";
		else if (!why && type != AE_IFREG && type != AE_IFDIR)
			why = "it is not a regular file";
		if (why) {
			rc = gr_errf(err, GR_EINVAL, "refusing artifact '%s': %s", name ? ts(name) : "", why);
			gr_hintf(err, "the archive from the host is not one gpurun's agent makes; nothing after it was written");
			goto out;
		}
		if (type == AE_IFDIR)
			continue; /* folders come with the files in them */
		int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
		if ((rc = art_admit(lim, ".", name, size, err)) < 0) {
			gr_hintf(err, "nothing from this entry on was written");
			goto out;
		}
		free(final);
		free(part);
		final = xstrdup(name);
		char *slash = strrchr(final, '/');
		part = slash ? xasprintf("%.*s/.%s" PART_SUFFIX, (int)(slash - final), final, slash + 1)
			     : xasprintf(".%s" PART_SUFFIX, final);
		archive_entry_set_pathname(e, part);
		archive_entry_set_perm(e, archive_entry_perm(e) & 0755);
		if (archive_write_header(out, e) != ARCHIVE_OK) {
			rc = gr_errf(err, GR_EINVAL, "refusing artifact '%s': %s", ts(final),
				     archive_error_string(out));
			goto out;
		}
		const void *buf;
		size_t len;
		int64_t off;
		while ((r = archive_read_data_block(in, &buf, &len, &off)) == ARCHIVE_OK) {
			if (!art_data_ok(off, len, size)) {
				rc = gr_errf(err, GR_EPROTO, "refusing artifact '%s': its data runs past "
					     "the %lld bytes its header announced", ts(final), (long long)size);
				archive_write_finish_entry(out);
				unlink(part);
				goto out;
			}
			if (archive_write_data_block(out, buf, len, off) != ARCHIVE_OK) {
				r = ARCHIVE_FATAL;
				break;
			}
		}
		if (r != ARCHIVE_EOF || archive_write_finish_entry(out) != ARCHIVE_OK) {
			rc = gr_errf(err, GR_EIO, "cannot extract artifact '%s': %s", ts(final),
				     archive_error_string(r != ARCHIVE_EOF ? in : out)
					     ? archive_error_string(r != ARCHIVE_EOF ? in : out) : "truncated");
			unlink(part);
			goto out;
		}
		if (rename(part, final) < 0) {
			rc = gr_errf(err, GR_EIO, "cannot rename '%s' into place: %s", ts(final), strerror(errno));
			unlink(part);
			goto out;
		}
		(*files)++;
	}
	if (r != ARCHIVE_EOF)
		rc = gr_errf(err, GR_EPROTO, "cannot read the artifacts: %s",
			     archive_error_string(in) ? archive_error_string(in) : "truncated");
out:
	archive_read_free(in);
	archive_write_free(out);
	if (cwd >= 0) {
		if (fchdir(cwd) < 0)
			rc = rc ? rc : gr_errf(err, GR_EIO, "cannot return to the working folder: %s", strerror(errno));
		close(cwd);
	}
	free(part);
	free(final);
	return rc;
}

int art_extract_announced(int fd, const char *dest, int min_free_pct, uint32_t *files,
			  struct gr_err *err)
{
	unsigned char hdr[GR_ART_ANNOUNCE_LEN];
	struct art_limits lim = { .min_free_pct = min_free_pct };
	ssize_t n = read_full(fd, hdr, sizeof(hdr));
	int rc;

	*files = 0;
	if (n != (ssize_t)sizeof(hdr))
		return gr_errf(err, GR_EPROTO, "the host's artifact stream ended before it began");
	if ((rc = art_announce_parse(hdr, &lim, err)) < 0)
		return rc;
	if ((rc = art_space_check(dest, lim.bytes, lim.files, min_free_pct, err)) < 0) {
		gr_err_prefix(err, "%u file%s to pull", lim.files, lim.files == 1 ? "" : "s");
		return rc;
	}
	return art_extract_fd(fd, dest, &lim, files, err);
}

/* What the client has already: every complete file under dest. */
static const char *have_root;
static struct strbuf *have_out;
static uint32_t have_n;

static int have_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)f;
	size_t rl = strlen(have_root);
	if (flag != FTW_F || !S_ISREG(st->st_mode) || strlen(p) <= rl + 1)
		return 0;
	const char *rel = p + rl + 1;
	size_t n = strlen(rel);
	if (n > strlen(PART_SUFFIX) && !strcmp(rel + n - strlen(PART_SUFFIX), PART_SUFFIX))
		return 0;
	put_str(have_out, rel);
	put_u64(have_out, (uint64_t)st->st_size);
	put_u64(have_out, (uint64_t)st->st_mtim.tv_sec);
	put_u32(have_out, (uint32_t)st->st_mtim.tv_nsec);
	have_n++;
	return 0;
}

struct art_pull {
	struct gr_conn *c;
	uint32_t id;
	pid_t pid;
	int wfd, rfd;      /* data into the extractor, its result out */
	int broken;        /* the extractor stopped reading */
	int failed;        /* the agent answered ERROR */
	struct gr_err agent_err;
	struct art_stats st;
};

uint32_t art_pull_id(const struct art_pull *p)
{
	return p->id;
}

int art_pull_start(struct gr_conn *c, const char *project, const char *id,
		   const struct strvec *patterns, const char *dest, int min_free_pct,
		   struct art_pull **out, struct gr_err *err)
{
	struct strbuf pl = STRBUF_INIT, have = STRBUF_INIT;
	int dp[2], rp[2];
	struct art_pull *p;
	pid_t pid;

	if (mkdir_p(dest, 0755, err) < 0)
		return err->code;
	have_root = dest;
	have_out = &have;
	have_n = 0;
	nftw(dest, have_one, 16, FTW_PHYS);
	if (pipe2(dp, O_CLOEXEC) < 0)
		return gr_errf(err, GR_EIO, "pipe: %s", strerror(errno));
	if (pipe2(rp, O_CLOEXEC) < 0) {
		close(dp[0]);
		close(dp[1]);
		return gr_errf(err, GR_EIO, "pipe: %s", strerror(errno));
	}
	pid = fork();
	if (pid < 0) {
		close(dp[0]); close(dp[1]); close(rp[0]); close(rp[1]);
		sb_release(&have);
		return gr_errf(err, GR_EIO, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		struct gr_err e = { 0 };
		uint32_t files = 0;
		char res[1200];
		int n;

		/* Hold none of gpurun's descriptors (the connection's pipes). */
		for (int fd = 3; fd < 1024; fd++)
			if (fd != dp[0] && fd != rp[1])
				close(fd);
		signal(SIGINT, SIG_IGN); /* gpurun decides what Ctrl-C means */
		if (art_extract_announced(dp[0], dest, min_free_pct, &files, &e) == 0) {
			n = snprintf(res, sizeof(res), "0 %u\n", files);
			/* Drain what is left so the writer never blocks on us. */
			char buf[65536];
			while (read(dp[0], buf, sizeof(buf)) > 0)
				;
		} else {
			/* Refused: stop reading, so gpurun sees the pipe break
			 * and cancels the request rather than take it all. */
			n = snprintf(res, sizeof(res), "1 %s\n%s", e.msg, e.hint);
			close(dp[0]);
		}
		if (write_full(rp[1], res, (size_t)n) < 0)
			_exit(1);
		_exit(0);
	}
	close(dp[0]);
	close(rp[1]);
	p = xcalloc(1, sizeof(*p));
	p->c = c;
	p->pid = pid;
	p->wfd = dp[1];
	p->rfd = rp[0];
	p->id = conn_next_id(c);
	put_str(&pl, project);
	put_str(&pl, id);
	put_u32(&pl, (uint32_t)patterns->n);
	for (size_t i = 0; i < patterns->n; i++)
		put_str(&pl, patterns->v[i] + config_job_dir_prefix(patterns->v[i]));
	put_u32(&pl, have_n);
	sb_add(&pl, have.buf, have.len);
	conn_send(c, GR_MSG_ART_PULL, 0, p->id, pl.buf, pl.len);
	sb_release(&pl);
	sb_release(&have);
	*out = p;
	return 0;
}

int art_pull_frame(struct art_pull *p, const struct gr_frame *f)
{
	struct gr_rd rd;

	if (f->type == GR_MSG_DATA) {
		if (!p->broken && write_full(p->wfd, f->payload, f->len) < 0) {
			/* The extractor refused the rest (it says why): stop the
			 * transfer here rather than receive it for nothing. The
			 * agent answers nothing more to a cancelled request. */
			p->broken = 1;
			conn_send(p->c, GR_MSG_CANCEL, 0, p->id, NULL, 0);
			return 1;
		}
		return 0;
	}
	if (f->type == GR_MSG_ERROR) {
		conn_error_from_frame(f, &p->agent_err);
		p->failed = 1;
		return 1;
	}
	if (f->type == GR_MSG_OK) {
		rd_init(&rd, f->payload, f->len);
		p->st.matched = get_u32(&rd);
		p->st.sent = get_u32(&rd);
		p->st.bytes = get_u64(&rd);
		p->st.written = get_u32(&rd);
		uint32_t n = get_u32(&rd);
		for (uint32_t i = 0; i < n && i < 64 && !rd.bad; i++) {
			char *path = get_str(&rd);
			uint64_t size = get_u64(&rd);
			if (path)
				sv_pushf(&p->st.names, "%s\t%llu", path, (unsigned long long)size);
			free(path);
		}
		if (rd_done(&rd, &p->agent_err, "ART_PULL") < 0)
			p->failed = 1;
		return 1;
	}
	return 0; /* not ours to judge */
}

static void pull_free(struct art_pull *p, int kill_it)
{
	sv_clear(&p->st.names);
	if (p->wfd >= 0)
		close(p->wfd);
	if (kill_it)
		kill(p->pid, SIGKILL);
	while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
		;
	close(p->rfd);
	free(p);
}

int art_pull_finish(struct art_pull *p, struct art_stats *st, struct gr_err *err)
{
	struct strbuf res = STRBUF_INIT;
	int rc = 0;

	close(p->wfd);
	p->wfd = -1;
	char buf[4096];
	ssize_t n;
	while ((n = read(p->rfd, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		sb_add(&res, buf, (size_t)n);
	}
	if (p->failed) {
		rc = gr_errf(err, p->agent_err.code ? p->agent_err.code : GR_EREMOTE, "%s", p->agent_err.msg);
	} else if (res.len >= 2 && res.buf[0] == '0') {
		long long files;
		res.buf[strcspn(res.buf, "\n")] = '\0';
		p->st.extracted = parse_ll(res.buf + 2, 0, UINT32_MAX, &files) == 0 ? (uint32_t)files : 0;
	} else if (res.len >= 2) {
		char *nl = strchr(res.buf + 2, '\n');
		if (nl)
			*nl = '\0';
		rc = gr_errf(err, GR_EINVAL, "%s", res.buf + 2);
		if (nl && nl[1])
			gr_hintf(err, "%s", nl + 1);
	} else {
		rc = gr_errf(err, GR_EIO, "the artifact extraction stopped without a word");
	}
	if (st) {
		*st = p->st;
		p->st.names = (struct strvec)STRVEC_INIT;
	}
	sb_release(&res);
	pull_free(p, 0);
	return rc;
}

void art_stats_release(struct art_stats *st)
{
	sv_clear(&st->names);
}

void art_pull_abort(struct art_pull *p)
{
	if (p)
		pull_free(p, 0); /* closing its input ends it; it removes its part file */
}

int art_pull(struct gr_conn *c, const char *project, const char *id,
	     const struct strvec *patterns, const char *dest, int min_free_pct,
	     struct art_stats *st, struct gr_err *err)
{
	struct art_pull *p;
	struct gr_frame f;
	int rc = art_pull_start(c, project, id, patterns, dest, min_free_pct, &p, err);

	if (rc < 0)
		return rc;
	for (;;) {
		rc = conn_recv(c, &f, -1, err);
		if (rc < 0) {
			art_pull_abort(p);
			return rc;
		}
		if (f.id == p->id && art_pull_frame(p, &f))
			break;
	}
	return art_pull_finish(p, st, err);
}
