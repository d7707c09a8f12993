/* libFuzzer target: the client's readers of what the host sends, each fed
 * any bytes (the first byte picks one), built with ASan and UBSan. Every
 * byte from the host is untrusted: none may crash, read out of bounds,
 * leak, or allocate by a count it was told. Where a reader accepts, what
 * it made is used as the client would (printed, encoded again, applied)
 * and checked:
 *   manifest (plain, with host fields, zstd'd): every path is one sm_path_ok
 *     accepts, and encoding the list and decoding it again gives it back;
 *   host state (SYNC_STATE), job list, stop report, GPU report; the host
 *     state also in pieces, its manifest into a file: the same list;
 *   a signature from the host, used for a delta of a file here;
 *   a pull delta, applied by dapply to an old file: where librsync's own
 *     patcher also accepts it, both make the same bytes;
 *   the delta engine itself: an old and a new file made from the input,
 *     the new one sent against the old one's signature, the delta applied
 *     to the old file must give the new one;
 *   log bytes through the terminal filter: what comes out is UTF-8 with
 *     no control but \t \n \r \b and no escape but the CSIs it lets
 *     through; cut anywhere into two chunks it gives the same; filtered
 *     again it does not change;
 *   a host's string escaped for one line (ts_add): no control byte, no C1,
 *     no bidi override, UTF-8.
 * Seeds: corpus/host/, from corpus/make_host_seeds.py. FUZZ_HOST_SAY=1
 * makes each reader say whether it accepted (to check the seeds). */
#include <errno.h>
#include <librsync.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "job_client.h"
#include "job_show.h"
#include "sync_apply.h"
#include "sync_delta.h"
#include "sync_host.h"
#include "sync_manifest.h"
#include "sync_steps.h"
#include "term_filter.h"

#define BASIS_LEN 5000

static uint8_t basis[BASIS_LEN];
static int basis_fd = -1;
static int say; /* FUZZ_HOST_SAY=1: each reader says whether it accepted */
static const char *fz_root; /* a project's folder, for the host's manifest in a file */

static void said(const char *what, int accepted)
{
	if (say)
		fprintf(stderr, "%s: %s\n", what, accepted ? "accepted" : "refused");
}

static void quiet(rs_loglevel level, char const *msg)
{
	(void)level;
	(void)msg;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	rs_trace_to(quiet); /* librsync's messages on refused input */
	say = getenv("FUZZ_HOST_SAY") != NULL;
	/* the stop report is printed: not onto the fuzzer's output (stdout
	 * here; stderr only around the call, as libFuzzer reports there) */
	if (!freopen("/dev/null", "w", stdout))
		abort();
	uint32_t x = 12345;
	for (size_t i = 0; i < BASIS_LEN; i++) {
		x = x * 1103515245u + 12345u;
		basis[i] = (uint8_t)(x >> 16);
	}
	/* (one folder for every run: its .gpurun holds files with no name,
	 * which go with the process, and sync_state_dir's .gitignore) */
	fz_root = "/tmp/gpurun-fuzz-host";
	if (mkdir(fz_root, 0700) < 0 && errno != EEXIST)
		abort();
	basis_fd = memfd_create("basis", 0);
	if (basis_fd < 0 || write(basis_fd, basis, BASIS_LEN) != BASIS_LEN)
		abort();
	return 0;
}

static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "fuzz_host: %s\n", what);
		abort();
	}
}

static void manifest_back_and_forth(const struct sm_list *l, int with_host)
{
	struct strbuf b = STRBUF_INIT;
	struct sm_list again = { 0 };
	struct gr_err err = { 0 };

	for (size_t i = 0; i < l->n; i++)
		check(sm_path_ok(l->e[i].path), "a decoded path that sm_path_ok refuses");
	sm_encode(l, with_host, &b);
	check(sm_decode(b.buf, b.len, with_host, &again, &err) == 0,
	      "an accepted manifest, encoded again, is refused");
	check(again.n == l->n, "an accepted manifest comes back with another count");
	for (size_t i = 0; i < l->n; i++)
		check(!strcmp(again.e[i].path, l->e[i].path) && sm_same(&again.e[i], &l->e[i]),
		      "an accepted manifest comes back changed");
	sm_list_free(&again);
	sb_release(&b);
	gr_err_clear(&err);
}

static void manifest(const uint8_t *p, size_t n, int kind)
{
	struct sm_list l = { 0 };
	struct gr_err err = { 0 };
	int rc = kind == 2 ? sm_decode_z(p, n, &l, &err) : sm_decode(p, n, kind, &l, &err);

	said("manifest", rc == 0);
	if (rc == 0)
		manifest_back_and_forth(&l, kind == 1);
	sm_list_free(&l);
	gr_err_clear(&err);
}

/* The same answer as it comes in pieces (their length from the last
 * byte), its manifest to a file (sync_host.h), looked for from the first
 * byte on: where both readers accept, the file holds the list the whole
 * answer's reader made. */
static void fz_host_file(const uint8_t *p, size_t n, const struct host_state *whole)
{
	struct host_file f;
	struct host_state h;
	struct strbuf body = STRBUF_INIT;
	struct gr_err err = { 0 };
	size_t piece = n ? 1 + (size_t)p[n - 1] * 37 % 4096 : 1;
	int rc = 0;

	memset(&h, 0, sizeof(h));
	host_file_init(&f, 1);
	f.try_at = 1;
	for (size_t off = 0; off < n && rc == 0; off += piece)
		rc = host_file_take(&f, fz_root, &body, p + off, n - off < piece ? n - off : piece,
				    &err);
	if (rc == 0)
		rc = host_file_end(&f, fz_root, &body, &h, &err);
	said("host state, its manifest to a file", rc == 0);
	if (rc == 0 && whole && f.fd >= 0) {
		struct sm_list l = { 0 };
		struct gr_err e2 = { 0 };
		check(lseek(f.fd, 0, SEEK_SET) == 0 && sm_decode_fd(f.fd, 0, &l, &e2) == 0,
		      "a manifest read whole cannot be read from its file");
		check(l.n == whole->manifest.n, "the manifest's file holds another count");
		for (size_t i = 0; i < l.n && i < whole->manifest.n; i++)
			check(!strcmp(l.e[i].path, whole->manifest.e[i].path) &&
				      sm_same(&l.e[i], &whole->manifest.e[i]),
			      "the manifest's file holds another entry");
		check(h.flags == whole->flags && h.changed.n == whole->changed.n &&
			      h.missing.n == whole->missing.n && h.warnings.n == whole->warnings.n,
		      "the answer read in pieces says something else");
		sm_list_free(&l);
		gr_err_clear(&e2);
	}
	host_file_close(&f);
	host_state_release(&h);
	sb_release(&body);
	gr_err_clear(&err);
}

static void fz_host_state(const uint8_t *p, size_t n)
{
	struct host_state h;
	struct gr_err err = { 0 };

	memset(&h, 0, sizeof(h));
	int rc = parse_state(p, n, &h, &err);
	said("host state", rc == 0);
	if (rc == 0) {
		for (size_t i = 0; i < h.changed.n; i++)
			check(sm_path_ok(h.changed.e[i].path), "a changed path sm_path_ok refuses");
		for (size_t i = 0; i < h.missing.n; i++)
			check(sm_path_ok(h.missing.v[i]), "a missing path sm_path_ok refuses");
	}
	fz_host_file(p, n, rc == 0 ? &h : NULL);
	host_state_release(&h);
	gr_err_clear(&err);
}

static void fz_job_list(const uint8_t *p, size_t n)
{
	struct job_rec *recs;
	size_t nrec;
	uint64_t total;
	struct gr_err err = { 0 };

	int rc = job_list_parse(p, n, &recs, &nrec, &total, &err);
	said("job list", rc == 0);
	if (rc == 0) {
		struct strbuf sb = STRBUF_INIT;
		char buf[JOB_SHOWN_MAX], t[64];
		for (size_t i = 0; i < nrec; i++) {
			job_shown(&recs[i], buf, sizeof(buf));
			job_describe_end(&recs[i], &sb);
			for (size_t f = 0; f < JOB_REC_NFIELDS; f++) {
				json_str(&sb, job_rec_text(&recs[i], &job_rec_fields[f], t, sizeof(t)));
				if (job_rec_fields[f].type == JR_U64) {
					uint64_t v = *JR_AT_C(&recs[i], &job_rec_fields[f], uint64_t);
					job_fmt_time(v, t, sizeof(t));
					job_fmt_duration(v, t, sizeof(t));
				}
			}
		}
		sb_release(&sb);
		job_recs_free(recs, nrec);
	}
	gr_err_clear(&err);
}

static void fz_job_stop_report(const uint8_t *p, size_t n)
{
	struct job_stop_report s;
	struct gr_err err = { 0 };

	memset(&s, 0, sizeof(s));
	int rc = job_stop_parse(p, n, &s, &err);
	said("stop report", rc == 0);
	if (rc == 0) {
		/* printed as stop prints it, onto /dev/null (stdout already is) */
		int keep = dup(2);
		check(keep >= 0 && dup2(fileno(stdout), 2) == 2, "dup2");
		job_stop_print(&s, 0);
		check(dup2(keep, 2) == 2, "dup2");
		close(keep);
		job_stop_report_free(&s);
	}
	gr_err_clear(&err);
}

static void fz_job_gpus(const uint8_t *p, size_t n)
{
	struct job_gpus g;
	struct gr_err err = { 0 };

	int rc = job_gpus_parse(p, n, &g, &err);
	said("GPU report", rc == 0);
	if (rc == 0)
		job_gpus_free(&g);
	gr_err_clear(&err);
}

static int to_strbuf(void *arg, const void *p, size_t n)
{
	sb_add(arg, p, n);
	return 0;
}

static int memfd_with(const void *p, size_t n)
{
	int fd = memfd_create("f", 0);

	check(fd >= 0, "memfd_create");
	check(n == 0 || write(fd, p, n) == (ssize_t)n, "write to a memfd");
	return fd;
}

static void content_hash(const void *p, size_t n, uint8_t h[SM_HASH_LEN])
{
	struct thash t;

	thash_init(&t, n);
	thash_update(&t, p, n);
	thash_final(&t, h);
}

/* Send the file (bytes p, n) against old: 0 with the zstd'd delta in out
 * (empty if declined), or -1 if the send failed. */
static int send_against(const void *p, size_t n, const struct sync_sig *old, struct strbuf *out)
{
	uint8_t hash[SM_HASH_LEN];
	int fd = memfd_with(p, n), rc;
	struct gr_err err = { 0 };
	struct sync_send_res res = { 0 };

	content_hash(p, n, hash);
	struct sync_send in = { fd, "f", n, hash, NULL, old, to_strbuf, out };
	rc = sync_send_file(&in, &res, &err);
	if (rc == 0 && res.declined)
		out->len = 0;
	sb_release(&res.sig);
	gr_err_clear(&err);
	close(fd);
	return rc ? -1 : 0;
}

/* A signature from the host (any bytes), used to send a file here. */
static void host_signature(const uint8_t *p, size_t n)
{
	struct sync_sig s;
	struct strbuf out = STRBUF_INIT;

	int rc = sync_sig_parse(p, n, &s);
	said("signature", rc == 0);
	if (rc == 0) {
		rc = send_against(basis, BASIS_LEN, &s, &out);
		said("a delta against it", rc == 0 && out.len);
	}
	sb_release(&out);
}

/* dapply of delta bytes to old (a memfd of old_len bytes): the output's
 * bytes into *got (malloc'd, *got_len), 0; -1 if refused. */
static int dapply_all(const uint8_t *p, size_t n, int oldfd, uint64_t old_len, uint64_t max_out,
		      size_t split, uint8_t **got, size_t *got_len)
{
	struct dapply d;
	int out = memfd_create("out", 0), rc = 0;

	check(out >= 0, "memfd_create");
	dapply_init(&d, oldfd, old_len, out, max_out);
	/* in two pieces, as frames cut it anywhere */
	if (split > n)
		split = n;
	if (dapply_feed(&d, p, split) < 0 || dapply_feed(&d, p + split, n - split) < 0 || !d.done)
		rc = -1;
	if (rc == 0) {
		check(d.out <= max_out, "dapply wrote past max_out");
		uint8_t *reuse = xmalloc(d.out / 2048 + 1);
		dapply_reusable(&d, d.out, reuse);
		free(reuse);
		*got = xmalloc(d.out + 1);
		*got_len = (size_t)d.out;
		check(pread(out, *got, *got_len, 0) == (ssize_t)*got_len, "read dapply's output");
	}
	dapply_release(&d);
	close(out);
	return rc;
}

struct rs_basis {
	const uint8_t *p;
	size_t n;
};

static rs_result copy_cb(void *arg, rs_long_t pos, size_t *len, void **buf)
{
	const struct rs_basis *b = arg;

	if (pos < 0 || (uint64_t)pos >= b->n || !*len)
		return RS_INPUT_ENDED;
	if (*len > b->n - (size_t)pos)
		*len = b->n - (size_t)pos;
	memcpy(*buf, b->p + pos, *len);
	return RS_DONE;
}

/* librsync's own patcher: 0 and the output, or -1. */
static int rs_apply(const uint8_t *p, size_t n, const uint8_t *old, size_t old_len,
		    struct strbuf *out)
{
	struct rs_basis b = { old, old_len };
	rs_job_t *job = rs_patch_begin(copy_cb, &b);
	char buf[4096];
	rs_buffers_t bf = { (char *)p, n, 1, NULL, 0 };
	rs_result r;

	do {
		bf.next_out = buf;
		bf.avail_out = sizeof(buf);
		r = rs_job_iter(job, &bf);
		sb_add(out, buf, sizeof(buf) - bf.avail_out);
	} while (r == RS_BLOCKED && out->len < (64u << 10));
	rs_job_free(job);
	return r == RS_DONE ? 0 : -1;
}

/* A delta from the host (pull): [max_out u16][split u16] then the delta. */
static void host_delta(const uint8_t *p, size_t n)
{
	if (n < 4)
		return;
	uint64_t max_out = (uint64_t)p[0] << 8 | p[1];
	size_t split = (size_t)p[2] << 8 | p[3];
	uint8_t *got = NULL;
	size_t got_len = 0;
	struct strbuf ref = STRBUF_INIT;

	p += 4;
	n -= 4;
	int ours = dapply_all(p, n, basis_fd, BASIS_LEN, max_out, split, &got, &got_len) == 0;
	said("delta (dapply)", ours);
	if (ours && rs_apply(p, n, basis, BASIS_LEN, &ref) == 0)
		check(ref.len == got_len && (!got_len || !memcmp(ref.buf, got, got_len)),
		      "dapply and librsync's patch make different files of one delta");
	free(got);
	sb_release(&ref);
}

static uint32_t rnd(uint32_t *x)
{
	*x = *x * 1103515245u + 12345u;
	return *x >> 8;
}

/* The delta engine: old = basis cut to a length; new = old edited by the
 * input (each 4 bytes: an edit's kind, place, length, byte). */
static void delta_round_trip(const uint8_t *p, size_t n)
{
	if (n < 2)
		return;
	size_t old_len = ((size_t)p[0] << 8 | p[1]) % (BASIS_LEN + 1);
	struct strbuf nw = STRBUF_INIT, sig = STRBUF_INIT, z = STRBUF_INIT, delta = STRBUF_INIT;
	uint8_t hash[SM_HASH_LEN];
	uint32_t x = 7;

	p += 2;
	n -= 2;
	sb_add(&nw, basis, old_len);
	for (size_t i = 0; i + 4 <= n && nw.len < 4 * BASIS_LEN; i += 4) {
		size_t at = nw.len ? (((size_t)p[i + 1] << 8 | p[i + 2]) % nw.len) : 0;
		size_t len = (size_t)p[i + 3] * 16 + 1;
		switch (p[i] % 4) {
		case 0: /* overwrite */
			for (size_t k = at; k < at + len && k < nw.len; k++)
				nw.buf[k] = (char)rnd(&x);
			break;
		case 1: { /* insert */
			struct strbuf t = STRBUF_INIT;
			sb_add(&t, nw.buf, at);
			for (size_t k = 0; k < len; k++) {
				char c = (char)rnd(&x);
				sb_add(&t, &c, 1);
			}
			sb_add(&t, nw.buf + at, nw.len - at);
			sb_release(&nw);
			nw = t;
			break;
		}
		case 2: /* delete */
			if (len > nw.len - at)
				len = nw.len - at;
			memmove(nw.buf + at, nw.buf + at + len, nw.len - at - len);
			nw.len -= len;
			break;
		default: { /* a block of the old file again, elsewhere */
			size_t from = old_len ? ((size_t)p[i + 3] * 37) % old_len : 0;
			size_t k = old_len - from < 2048 ? old_len - from : 2048;
			struct strbuf t = STRBUF_INIT;
			sb_add(&t, nw.buf, at);
			sb_add(&t, basis + from, k);
			sb_add(&t, nw.buf + at, nw.len - at);
			sb_release(&nw);
			nw = t;
			break;
		}
		}
	}
	/* the old version's signature, as the client caches it */
	struct sigmaker m;
	sigmaker_init(&m, old_len, NULL);
	sigmaker_update(&m, basis, old_len);
	sigmaker_final(&m, &sig, hash);
	sigmaker_release(&m);
	struct sync_sig old;
	check(sync_sig_parse(sig.buf, sig.len, &old) == 0, "our own signature does not parse");
	check(send_against(nw.buf, nw.len, &old, &z) == 0, "a delta of a file here failed");
	said("round trip (not declined)", z.len != 0);
	if (z.len) { /* not declined: unzstd, apply to the old file, compare */
		ZSTD_DStream *d = ZSTD_createDStream();
		ZSTD_inBuffer in = { z.buf, z.len, 0 };
		char buf[1 << 14];
		size_t r = 1;
		while (in.pos < in.size) {
			ZSTD_outBuffer o = { buf, sizeof(buf), 0 };
			r = ZSTD_decompressStream(d, &o, &in);
			check(!ZSTD_isError(r), "the delta's zstd stream is corrupt");
			sb_add(&delta, buf, o.pos);
		}
		ZSTD_freeDStream(d);
		int oldfd = memfd_with(basis, old_len);
		uint8_t *got = NULL;
		size_t got_len = 0;
		check(dapply_all((uint8_t *)delta.buf, delta.len, oldfd, old_len, nw.len, delta.len / 2,
				 &got, &got_len) == 0,
		      "the delta made here is refused");
		check(got_len == nw.len && (!nw.len || !memcmp(got, nw.buf, nw.len)),
		      "the delta applied to the old file does not give the new one");
		free(got);
		close(oldfd);
	}
	sb_release(&nw);
	sb_release(&sig);
	sb_release(&z);
	sb_release(&delta);
}

/* Is s[0..n) what the filter may let through? */
static void check_filtered(const struct strbuf *out)
{
	char *s = xstrndup(out->buf, out->len); /* (NUL-terminated for u8_char_len) */
	size_t n = out->len;

	check(strlen(s) == n, "a NUL byte came through the filter");
	for (size_t i = 0; i < n;) {
		unsigned char c = (unsigned char)s[i];
		if (c == 0x1b) {
			check(i + 1 < n && s[i + 1] == '[', "an escape that is not a CSI came through");
			size_t j = i + 2;
			while (j < n && ((s[j] >= '0' && s[j] <= '9') || s[j] == ';' || s[j] == ':'))
				j++;
			check(j < n && s[j] && strchr("mABCDEFGK", s[j]), "a CSI the filter drops came through");
			check(s[j] == 'm' || !memchr(s + i + 2, ':', j - i - 2), "':' in a CSI other than SGR");
			i = j + 1;
		} else if (c < 0x80) {
			check((c >= 0x20 && c != 0x7f) || c == '\t' || c == '\n' || c == '\r' || c == '\b',
			      "a control byte came through the filter");
			i++;
		} else {
			size_t len = u8_char_len(s + i);
			check(len > 0, "bytes that are not UTF-8 came through the filter");
			check(!(len == 2 && c == 0xc2 && (unsigned char)s[i + 1] <= 0x9f),
			      "a C1 control came through the filter");
			i += len;
		}
	}
	free(s);
}

static void filtered(const uint8_t *p, size_t n, size_t cut, struct strbuf *out)
{
	struct term_filter f;

	tf_init(&f);
	tf_feed(&f, p, cut, out);
	tf_feed(&f, p + cut, n - cut, out);
	tf_finish(&f, out);
}

static void log_bytes(const uint8_t *p, size_t n)
{
	if (n < 1)
		return;
	size_t cut = p[0] % (n);
	struct strbuf whole = STRBUF_INIT, two = STRBUF_INIT, again = STRBUF_INIT;

	p++;
	n--;
	if (cut > n)
		cut = n;
	filtered(p, n, 0, &whole);
	check_filtered(&whole);
	filtered(p, n, cut, &two);
	check(two.len == whole.len && (!whole.len || !memcmp(two.buf, whole.buf, whole.len)),
	      "the filter gives other bytes when the input is cut in two");
	filtered(whole.len ? (const uint8_t *)whole.buf : (const uint8_t *)"", whole.len,
		 whole.len / 2, &again);
	check(again.len == whole.len && (!whole.len || !memcmp(again.buf, whole.buf, whole.len)),
	      "filtered again, the filter's output changes");
	sb_release(&whole);
	sb_release(&two);
	sb_release(&again);
}

static void one_line(const uint8_t *p, size_t n)
{
	char *s = xstrndup((const char *)p, n); /* up to a NUL, as a host's string */
	struct strbuf out = STRBUF_INIT;

	ts_add(&out, s);
	for (size_t i = 0; i < out.len;) {
		unsigned char c = (unsigned char)out.buf[i];
		check(c >= 0x20 && c != 0x7f, "a control byte in an escaped string");
		if (c < 0x80) {
			i++;
			continue;
		}
		char *rest = xstrndup(out.buf + i, out.len - i);
		size_t len = u8_char_len(rest);
		free(rest);
		check(len > 0, "bytes that are not UTF-8 in an escaped string");
		const unsigned char *u = (const unsigned char *)out.buf + i;
		check(!(len == 2 && u[0] == 0xc2 && u[1] <= 0x9f), "a C1 control in an escaped string");
		check(!(len == 3 && u[0] == 0xe2 &&
			((u[1] == 0x80 && u[2] >= 0xaa && u[2] <= 0xae) ||
			 (u[1] == 0x81 && u[2] >= 0xa6 && u[2] <= 0xa9))),
		      "a bidi override in an escaped string");
		i += len;
	}
	sb_release(&out);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const uint8_t *p = data + 1;
	size_t n = size - 1;

	switch (data[0] % 12) {
	case 0: manifest(p, n, 0); break;
	case 1: manifest(p, n, 1); break;
	case 2: manifest(p, n, 2); break;
	case 3: fz_host_state(p, n); break;
	case 4: fz_job_list(p, n); break;
	case 5: fz_job_stop_report(p, n); break;
	case 6: fz_job_gpus(p, n); break;
	case 7: host_signature(p, n); break;
	case 8: host_delta(p, n); break;
	case 9: delta_round_trip(p, n); break;
	case 10: log_bytes(p, n); break;
	default: one_line(p, n); break;
	}
	return 0;
}
