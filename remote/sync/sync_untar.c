/* The tar.zst stream of a sync, unpacked by libarchive on a worker thread:
 * libarchive's reader pulls its input, while the agent's loop receives
 * frames, so the loop queues the bytes and the worker reads them. Only the
 * tar formats and the zstd filter are registered. Entries are never
 * written by archive_write_disk: each goes to a temp file beside its final
 * name through sync_fs (no "..", no absolute path, no symlink followed),
 * is hashed as it is written, and waits for COMMIT to be renamed. */
#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sync_agent.h"
#include "sync_apply.h"
#include "sync_proto.h"

#define QUEUE_HIGH (16u << 20)

struct chunk {
	struct chunk *next;
	size_t n;
	uint8_t data[];
};

struct untar {
	struct sync_session *s;
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct chunk *head, *tail, *cur;
	size_t queued;
	int eof, abort, done;
	uint32_t files;
	int rc, kind;
	char msg[512];
};

static la_ssize_t read_cb(struct archive *ar, void *arg, const void **buf)
{
	struct untar *u = arg;
	la_ssize_t n = 0;

	(void)ar;
	pthread_mutex_lock(&u->mu);
	free(u->cur);
	u->cur = NULL;
	while (!u->head && !u->eof && !u->abort)
		pthread_cond_wait(&u->cv, &u->mu);
	if (u->abort) {
		n = -1;
	} else if (u->head) {
		u->cur = u->head;
		u->head = u->head->next;
		if (!u->head)
			u->tail = NULL;
		u->queued -= u->cur->n;
		*buf = u->cur->data;
		n = (la_ssize_t)u->cur->n;
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
	return n;
}

static void set_fail(struct untar *u, const char *fmt, const char *a, const char *b)
{
	if (u->rc)
		return;
	u->rc = GR_EREMOTE;
	snprintf(u->msg, sizeof(u->msg), fmt, a, b);
}

/* Nothing more fits: the stream stops here (the client stops sending it,
 * and what follows stays as it is on the host). */
static int out_of_space(struct untar *u, int errnum)
{
	if (sync_err_kind(errnum) != SYNC_ERR_NOSPACE)
		return 0;
	set_fail(u, "no space left on the host%s%s", "", "");
	u->kind = SYNC_ERR_NOSPACE;
	return 1;
}

/* Copy one entry's data into fd, hashing it. 0, or -1 (archive error,
 * message set) or -2 (write error, errno set). */
/* All zero? (Runs of zeros are left as holes: a sparse file stays sparse.) */
static int all_zero(const uint8_t *p, size_t n)
{
	static const uint8_t zeros[4096];

	while (n) {
		size_t k = n < sizeof(zeros) ? n : sizeof(zeros);
		if (memcmp(p, zeros, k))
			return 0;
		p += k;
		n -= k;
	}
	return 1;
}

static int copy_data(struct untar *u, struct archive *ar, int fd, struct thash *t,
		     uint64_t size)
{
	static const uint8_t zeros[4096];
	const void *p;
	size_t n;
	la_int64_t off;
	uint64_t pos = 0, end = 0; /* end: where the file ends, as written */
	int werr = 0;

	for (;;) {
		int r = archive_read_data_block(ar, &p, &n, &off);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			set_fail(u, "cannot read the tar stream: %s%s", archive_error_string(ar), "");
			return -1;
		}
		if (off < 0 || (uint64_t)off < pos || (uint64_t)off + n > size) {
			set_fail(u, "malformed tar stream%s%s", "", "");
			return -1;
		}
		for (; pos < (uint64_t)off; ) { /* a hole in the archive: zeros */
			size_t k = (uint64_t)off - pos > sizeof(zeros) ? sizeof(zeros)
								       : (size_t)((uint64_t)off - pos);
			thash_update(t, zeros, k);
			pos += k;
		}
		thash_update(t, p, n);
		if (!werr && n >= sizeof(zeros) && all_zero(p, n)) {
			pos += n; /* left as a hole */
			continue;
		}
		if (!werr && pwrite_full(fd, p, n, pos) < 0) {
			werr = errno;
			if (sync_err_kind(werr) == SYNC_ERR_NOSPACE) {
				errno = werr; /* no point reading the rest */
				return -2;
			}
		}
		pos += n;
		end = pos;
	}
	if (pos != size) {
		set_fail(u, "malformed tar stream: short entry%s%s", "", "");
		return -1;
	}
	/* A trailing hole. Only then: the file is new (O_EXCL), and an
	 * ftruncate is a journal transaction even to the size it has (1.2 s
	 * of the agent's CPU in a first sync of 100k small files). */
	if (!werr && end < size && ftruncate(fd, (off_t)size) < 0)
		werr = errno;
	if (werr) {
		errno = werr;
		return -2;
	}
	return 0;
}

static void keep_leaf(void *arg, uint64_t index, const uint8_t h[SM_HASH_LEN])
{
	(void)index;
	sb_add(arg, h, SM_HASH_LEN);
}

static void unpack(struct untar *u, struct archive *ar)
{
	struct sync_session *s = u->s;
	struct sfs_dir dir;
	struct archive_entry *ae;

	sync_dir_init(s, &dir);
	for (;;) {
		int r = archive_read_next_header(ar, &ae);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			set_fail(u, "cannot read the tar stream: %s%s", archive_error_string(ar), "");
			break;
		}
		const char *path = archive_entry_pathname(ae);
		if (!path || !sync_path_ok(path) || archive_entry_filetype(ae) != AE_IFREG ||
		    archive_entry_size(ae) < 0) {
			set_fail(u, "refusing tar entry '%s'%s", path ? path : "", "");
			break;
		}
		uint64_t size = (uint64_t)archive_entry_size(ae);
		struct sm_entry desc = { 0 };
		struct thash t;
		char tmp[SYNC_TMP_MAX];
		desc.type = SM_FILE;
		desc.mode = (uint32_t)archive_entry_perm(ae) & 0777;
		desc.size = size;
		desc.mtime_ns = (int64_t)archive_entry_mtime(ae) * 1000000000LL +
				archive_entry_mtime_nsec(ae);
		struct strbuf leaves = STRBUF_INIT;
		thash_init(&t, size);
		if (size >= SYNC_LEAVES_MIN) { /* kept on the host for later deltas */
			t.on_leaf = keep_leaf;
			t.arg = &leaves;
		}
		int fd = sync_tmp_create(s, &dir, path, tmp);
		if (fd < 0) {
			int e = errno;
			sync_add_errno(s, path, e, "cannot create a file beside it on the host: %s",
				       strerror(e));
			sb_release(&leaves);
			if (out_of_space(u, e))
				break;
			archive_read_data_skip(ar);
			continue;
		}
		int cr = copy_data(u, ar, fd, &t, size);
		if (cr == -2 || (cr == 0 && sync_tmp_finish(fd, desc.mode, desc.mtime_ns, size) < 0)) {
			int e = errno;
			const char *base;
			if (cr == -2)
				close(fd);
			int dfd = sfs_parent(&dir, path, &base);
			if (dfd >= 0)
				unlinkat(dfd, tmp, 0);
			sync_add_errno(s, path, e, "cannot write on the host: %s", strerror(e));
			sb_release(&leaves);
			if (out_of_space(u, e))
				break;
			continue;
		}
		if (cr == -1) {
			const char *base;
			close(fd);
			int dfd = sfs_parent(&dir, path, &base);
			if (dfd >= 0)
				unlinkat(dfd, tmp, 0);
			sb_release(&leaves);
			break;
		}
		thash_final(&t, desc.hash);
		if (leaves.len)
			sync_leaves_save(s->statefd, desc.hash, (uint8_t *)leaves.buf,
					 leaves.len / SM_HASH_LEN);
		sb_release(&leaves);
		sync_add_pending(s, path, tmp, &desc);
		if (size < SYNC_HINT_MIN)
			sync_small_done(s);
		u->files++;
	}
	sfs_dir_release(&dir);
}

static void *worker(void *arg)
{
	struct untar *u = arg;
	struct archive *ar = archive_read_new();

	archive_read_support_format_tar(ar);
	archive_read_support_filter_zstd(ar);
	if (archive_read_open(ar, u, NULL, read_cb, NULL) != ARCHIVE_OK)
		set_fail(u, "cannot read the tar stream: %s%s", archive_error_string(ar), "");
	else
		unpack(u, ar);
	archive_read_free(ar);
	pthread_mutex_lock(&u->mu);
	u->done = 1;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

struct untar *untar_start(struct sync_session *s)
{
	struct untar *u = xcalloc(1, sizeof(*u));

	u->s = s;
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	if (pthread_create(&u->thread, NULL, worker, u) == 0) {
		u->started = 1;
	} else {
		u->done = 1;
		set_fail(u, "cannot start a thread: %s%s", strerror(errno), "");
	}
	return u;
}

void untar_feed(struct untar *u, const void *p, size_t n, int end)
{
	pthread_mutex_lock(&u->mu);
	if (n && !u->done && !u->abort) {
		struct chunk *c = xmalloc(sizeof(*c) + n);
		c->next = NULL;
		c->n = n;
		memcpy(c->data, p, n);
		if (u->tail)
			u->tail->next = c;
		else
			u->head = c;
		u->tail = c;
		u->queued += n;
	}
	if (end)
		u->eof = 1;
	pthread_cond_broadcast(&u->cv);
	/* Backpressure: the agent stops reading the connection meanwhile
	 * (and tells the client it is busy, should the disk be slow). */
	while (u->queued > QUEUE_HIGH && !u->done && !u->abort) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 1;
		pthread_cond_timedwait(&u->cv, &u->mu, &ts);
		pthread_mutex_unlock(&u->mu);
		agent_keepalive();
		pthread_mutex_lock(&u->mu);
	}
	pthread_mutex_unlock(&u->mu);
}

int untar_stopped(struct untar *u)
{
	pthread_mutex_lock(&u->mu);
	int stopped = u->done && u->rc;
	pthread_mutex_unlock(&u->mu);
	return stopped;
}

static void join(struct untar *u)
{
	if (u->started) {
		pthread_join(u->thread, NULL);
		u->started = 0;
	}
	while (u->head) {
		struct chunk *c = u->head;
		u->head = c->next;
		free(c);
	}
	u->tail = NULL;
	free(u->cur);
	u->cur = NULL;
}

int untar_finish(struct untar *u, uint32_t *files, int *kind, struct gr_err *err)
{
	pthread_mutex_lock(&u->mu);
	u->eof = 1;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	join(u);
	*files = u->files;
	*kind = u->kind;
	if (u->rc)
		return gr_errf(err, u->rc, "%s", u->msg);
	return 0;
}

void untar_free(struct untar *u)
{
	if (!u)
		return;
	pthread_mutex_lock(&u->mu);
	u->abort = 1;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	join(u);
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	free(u);
}
