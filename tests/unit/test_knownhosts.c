/* known_hosts parsing and judging (cli/ssh/ssh_knownhosts.c): the lines
 * libssh2's own reader chokes on, hashed names, [host]:port, patterns,
 * @revoked; base64 and fingerprints as OpenSSH writes them. Fixtures were
 * made with ssh-keygen (-H for the hashed line, -lf for the fingerprint). */
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "ssh_int.h"

#define ED_KEY "AAAAC3NzaC1lZDI1NTE5AAAAIHaNOZ8xe8TFdXUb9fvLSVxZKfyivsYWkQsqdW/WAZgE"
#define EC_KEY "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBGWNQbCPydU6EgayCLMYMNg80VOEdBLQovrCC+pDYdC4DSRigwdCRF5RJ6cJeuc1Sy30COt+7p8kCDL7PDjU1Ek="
/* "[127.0.0.1]:2222" hashed by ssh-keygen -H */
#define HASHED "|1|SK9/wkBTWFLhk0rmg/0p9uX45vM=|PusYKlooAkwA/2gGhGQnjuVox4k="
/* ssh-keygen -lf of ED_KEY, and sha256sum of its blob */
#define ED_FP "SHA256:BPekHpMFV5AJ7HbSpUltTV7rl9w/PpNZnGOnaLRBK6g"
#define ED_SHA "04f7a41e9305579009ec76d2a5496d4d5eeb97dc3f3e93599c63a768b4412ba8"

static LIBSSH2_SESSION *sess;

static void blob_of(const char *b64, struct strbuf *out)
{
	sb_reset(out);
	CHECK_EQ_INT(b64_decode(b64, strlen(b64), out), 0);
}

/* Parse one line against name; returns kh_parse_line's answer. */
static int parse(const char *line, const char *name, struct kh_entry *e)
{
	return kh_parse_line(sess, line, strlen(line), name, e);
}

static void base64_roundtrip_and_rejects(void)
{
	const unsigned char data[] = "any carnal pleasure.";
	static const char *const want[] = { "", "YQ==", "YW4=", "YW55", "YW55IA==" };
	struct strbuf out = STRBUF_INIT;

	for (size_t n = 0; n < 5; n++) {
		char *e = b64_encode(data, n, 1);
		CHECK_STR(e, want[n]);
		sb_reset(&out);
		CHECK_EQ_INT(b64_decode(e, strlen(e), &out), 0);
		CHECK_EQ_INT(out.len, n);
		CHECK(!n || !memcmp(out.buf, data, n));
		free(e);
	}
	char *np = b64_encode(data, 4, 0);
	CHECK_STR(np, "YW55IA");
	free(np);
	CHECK_EQ_INT(b64_decode("YW5*", 4, &out), -1);
	CHECK_EQ_INT(b64_decode("YQ=a", 4, &out), -1);
	sb_release(&out);
}

static void fingerprint_matches_ssh_keygen(void)
{
	unsigned char d[32];

	for (int i = 0; i < 32; i++) {
		unsigned v;
		CHECK(sscanf(ED_SHA + 2 * i, "%2x", &v) == 1);
		d[i] = (unsigned char)v;
	}
	char *fp = kh_fingerprint(d);
	CHECK_STR(fp, ED_FP);
	free(fp);
}

static void names_for_ports(void)
{
	char *a = kh_name("GPU.Example.org", 22), *b = kh_name("127.0.0.1", 2222);

	CHECK_STR(a, "gpu.example.org");
	CHECK_STR(b, "[127.0.0.1]:2222");
	free(a);
	free(b);
}

static void plain_names_lists_and_ports(void)
{
	struct kh_entry e;

	CHECK_EQ_INT(parse("gpu ssh-ed25519 " ED_KEY "\n", "gpu", &e), 1);
	CHECK_STR(e.type, "ssh-ed25519");
	CHECK_EQ_INT(e.bloblen, 51);
	CHECK_EQ_INT(e.revoked, 0);
	kh_entry_release(&e);
	CHECK_EQ_INT(parse("other,gpu,third ssh-ed25519 " ED_KEY " a comment", "gpu", &e), 1);
	kh_entry_release(&e);
	CHECK_EQ_INT(parse("GPU ssh-ed25519 " ED_KEY, "gpu", &e), 1);
	kh_entry_release(&e);
	CHECK_EQ_INT(parse("gpu2 ssh-ed25519 " ED_KEY, "gpu", &e), 0);
	/* A port-22 entry is not a key for another port, and vice versa. */
	CHECK_EQ_INT(parse("127.0.0.1 ssh-ed25519 " ED_KEY, "[127.0.0.1]:2222", &e), 0);
	CHECK_EQ_INT(parse("[127.0.0.1]:2222 ssh-ed25519 " ED_KEY, "127.0.0.1", &e), 0);
	CHECK_EQ_INT(parse("[127.0.0.1]:2222 ssh-ed25519 " ED_KEY, "[127.0.0.1]:2222", &e), 1);
	kh_entry_release(&e);
	CHECK_EQ_INT(parse("  \t[127.0.0.1]:2222\tssh-ed25519  " ED_KEY "\r\n", "[127.0.0.1]:2222", &e), 1);
	kh_entry_release(&e);
}

static void hashed_names(void)
{
	struct kh_entry e;

	CHECK_EQ_INT(parse(HASHED " ssh-ed25519 " ED_KEY "\n", "[127.0.0.1]:2222", &e), 1);
	CHECK_STR(e.type, "ssh-ed25519");
	kh_entry_release(&e);
	CHECK_EQ_INT(parse(HASHED " ssh-ed25519 " ED_KEY, "[127.0.0.1]:2223", &e), 0);
	CHECK_EQ_INT(parse(HASHED " ssh-ed25519 " ED_KEY, "127.0.0.1", &e), 0);
	/* The hash works whatever key type the line has. */
	CHECK_EQ_INT(parse(HASHED " ecdsa-sha2-nistp256 " EC_KEY, "[127.0.0.1]:2222", &e), 1);
	CHECK_STR(e.type, "ecdsa-sha2-nistp256");
	kh_entry_release(&e);
	CHECK_EQ_INT(parse("|1|bad ssh-ed25519 " ED_KEY, "[127.0.0.1]:2222", &e), 0);
}

static void lines_that_are_skipped(void)
{
	static const char *const lines[] = {
		"",
		"\n",
		"# gpu ssh-ed25519 " ED_KEY,
		"@cert-authority gpu ssh-ed25519 " ED_KEY,
		"@cert-authority * ssh-ed25519 " ED_KEY,
		"@unknown-marker gpu ssh-ed25519 " ED_KEY,
		"gpu",
		"gpu ssh-ed25519",
		"gpu ssh-ed25519 not*base64",
		"gpu ssh-ed25519 " EC_KEY,          /* blob says another type */
		"gpu 2048 35 1234567890",           /* SSH1 RSA */
		"gpu ssh-xmss@openssh.com AAAA",    /* short, unknown */
	};
	struct kh_entry e;

	for (size_t i = 0; i < GR_ARRAY_SIZE(lines); i++) {
		int got = parse(lines[i], "gpu", &e);
		if (got) {
			fprintf(stderr, "  line %zu was not skipped: %s\n", i, lines[i]);
			kh_entry_release(&e);
		}
		CHECK_EQ_INT(got, 0);
	}
}

static void revoked_and_patterns(void)
{
	struct kh_entry e;

	CHECK_EQ_INT(parse("@revoked gpu ssh-ed25519 " ED_KEY, "gpu", &e), 1);
	CHECK_EQ_INT(e.revoked, 1);
	kh_entry_release(&e);
	CHECK_EQ_INT(parse("*.example.org ssh-ed25519 " ED_KEY, "gpu.example.org", &e), 1);
	kh_entry_release(&e);
	CHECK_EQ_INT(parse("gpu? ssh-ed25519 " ED_KEY, "gpu7", &e), 1);
	kh_entry_release(&e);
	CHECK_EQ_INT(parse("gpu? ssh-ed25519 " ED_KEY, "gpu77", &e), 0);
	CHECK_EQ_INT(parse("*.example.org,!bad.example.org ssh-ed25519 " ED_KEY, "bad.example.org", &e), 0);
	/* '[' is literal, as in OpenSSH's patterns. */
	CHECK_EQ_INT(parse("[127.0.0.1]:* ssh-ed25519 " ED_KEY, "[127.0.0.1]:2222", &e), 1);
	kh_entry_release(&e);
}

static void add_entry(struct kh_list *l, const char *line, int lineno)
{
	struct kh_entry e;

	CHECK_EQ_INT(parse(line, "gpu", &e), 1);
	e.file = xstrdup("kh");
	e.line = lineno;
	l->v = xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
	l->v[l->n++] = e;
}

static void judge_verdicts(void)
{
	struct kh_list l = { 0 };
	struct strbuf ed = STRBUF_INIT, ec = STRBUF_INIT;
	const struct kh_entry *w;

	blob_of(ED_KEY, &ed);
	blob_of(EC_KEY, &ec);
	CHECK_EQ_INT(kh_judge(&l, "ssh-ed25519", (unsigned char *)ed.buf, ed.len, &w), KH_UNKNOWN);
	CHECK(w == NULL);

	add_entry(&l, "gpu ecdsa-sha2-nistp256 " EC_KEY, 3);
	CHECK_EQ_INT(kh_judge(&l, "ssh-ed25519", (unsigned char *)ed.buf, ed.len, &w), KH_OTHER_TYPE);
	CHECK_EQ_INT(w->line, 3);
	CHECK_EQ_INT(kh_judge(&l, "ecdsa-sha2-nistp256", (unsigned char *)ec.buf, ec.len, &w), KH_MATCH);

	/* Same type, other key: changed; but a matching line elsewhere wins. */
	struct strbuf other = STRBUF_INIT;
	sb_add(&other, ed.buf, ed.len);
	other.buf[other.len - 1] ^= 1;
	char *ob = b64_encode((unsigned char *)other.buf, other.len, 1);
	char *oline = xasprintf("gpu ssh-ed25519 %s", ob);
	add_entry(&l, oline, 5);
	CHECK_EQ_INT(kh_judge(&l, "ssh-ed25519", (unsigned char *)ed.buf, ed.len, &w), KH_CHANGED);
	CHECK_EQ_INT(w->line, 5);
	add_entry(&l, "gpu ssh-ed25519 " ED_KEY, 9);
	CHECK_EQ_INT(kh_judge(&l, "ssh-ed25519", (unsigned char *)ed.buf, ed.len, &w), KH_MATCH);
	CHECK_EQ_INT(w->line, 9);
	add_entry(&l, "@revoked gpu ssh-ed25519 " ED_KEY, 12);
	CHECK_EQ_INT(kh_judge(&l, "ssh-ed25519", (unsigned char *)ed.buf, ed.len, &w), KH_REVOKED);
	CHECK_EQ_INT(w->line, 12);

	free(ob);
	free(oline);
	sb_release(&other);
	sb_release(&ed);
	sb_release(&ec);
	kh_list_release(&l);
}

static void hostkey_prefs_put_known_types_first(void)
{
	struct kh_list l = { 0 };
	char *p = kh_hostkey_prefs(&l);

	CHECK(!strncmp(p, "ssh-ed25519,ecdsa-sha2-nistp256,", 32));
	free(p);
	add_entry(&l, "gpu ecdsa-sha2-nistp256 " EC_KEY, 1);
	p = kh_hostkey_prefs(&l);
	CHECK(!strncmp(p, "ecdsa-sha2-nistp256,ssh-ed25519,", 32));
	CHECK(strstr(p, "ssh-rsa") != NULL);
	free(p);
	kh_list_release(&l);
}

static void scan_file_reads_line_by_line(void)
{
	char dir[] = "/tmp/test_knownhosts.XXXXXX";
	struct kh_list l = { 0 };
	struct gr_err err = { 0 };

	CHECK(mkdtemp(dir) != NULL);
	char *path = xasprintf("%s/known_hosts", dir);
	/* libssh2_knownhost_readfile would stop at line 2. */
	const char *text =
		"# comment\n"
		"@cert-authority *.example.org ssh-ed25519 " ED_KEY "\n"
		"gpu ssh-xmss@openssh.com AAAAFHNzaC14bXNzQG9wZW5zc2guY29tAAAAFVhNU1NfU0hBMi0yNTZfVzE2X0gxMA==\n"
		"other ssh-ed25519 " ED_KEY "\n"
		"\n"
		"gpu ecdsa-sha2-nistp256 " EC_KEY "\n"
		"gpu ssh-ed25519 " ED_KEY;  /* no final newline */
	CHECK_EQ_INT(write_file_atomic(path, text, strlen(text), 0600, &err), 0);
	CHECK_EQ_INT(kh_scan_file(sess, path, "gpu", &l, &err), 0);
	CHECK_EQ_INT(l.n, 3);
	if (l.n == 3) {
		CHECK_EQ_INT(l.v[0].line, 3);
		CHECK_STR(l.v[0].type, "ssh-xmss@openssh.com");
		CHECK_EQ_INT(l.v[1].line, 6);
		CHECK_EQ_INT(l.v[2].line, 7);
		CHECK_STR(l.v[2].file, path);
	}
	kh_list_release(&l);

	char *missing = xasprintf("%s/nope", dir);
	CHECK_EQ_INT(kh_scan_file(sess, missing, "gpu", &l, &err), 0);
	CHECK_EQ_INT(l.n, 0);
	/* A folder where the file should be is an error. */
	CHECK_EQ_INT(kh_scan_file(sess, dir, "gpu", &l, &err), GR_EIO);
	CHECK(strstr(err.msg, "Is a directory") != NULL);
	unlink(path);
	rmdir(dir);
	free(missing);
	free(path);
}

static void append_creates_and_does_not_repeat(void)
{
	char dir[] = "/tmp/test_knownhosts.XXXXXX";
	struct gr_err err = { 0 };
	struct strbuf ed = STRBUF_INIT, got = STRBUF_INIT;

	CHECK(mkdtemp(dir) != NULL);
	char *path = xasprintf("%s/.ssh/known_hosts", dir);
	blob_of(ED_KEY, &ed);
	CHECK_EQ_INT(kh_append(path, "[127.0.0.1]:2222", "ssh-ed25519", (unsigned char *)ed.buf, ed.len, &err), 0);
	CHECK_EQ_INT(kh_append(path, "[127.0.0.1]:2222", "ssh-ed25519", (unsigned char *)ed.buf, ed.len, &err), 0);
	CHECK_EQ_INT(read_file(path, &got, &err), 0);
	CHECK_STR(got.buf, "[127.0.0.1]:2222 ssh-ed25519 " ED_KEY "\n");
	struct stat st;
	char *sshdir = xasprintf("%s/.ssh", dir);
	CHECK(stat(sshdir, &st) == 0 && (st.st_mode & 0777) == 0700);
	CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);

	/* A file without a final newline gets one before our line. */
	CHECK_EQ_INT(write_file_atomic(path, "x ssh-ed25519 AAAA", 18, 0600, &err), 0);
	CHECK_EQ_INT(kh_append(path, "gpu", "ssh-ed25519", (unsigned char *)ed.buf, ed.len, &err), 0);
	sb_reset(&got);
	CHECK_EQ_INT(read_file(path, &got, &err), 0);
	CHECK_STR(got.buf, "x ssh-ed25519 AAAA\ngpu ssh-ed25519 " ED_KEY "\n");

	unlink(path);
	rmdir(sshdir);
	rmdir(dir);
	free(sshdir);
	free(path);
	sb_release(&ed);
	sb_release(&got);
}

static void blob_types_and_labels(void)
{
	struct strbuf ed = STRBUF_INIT;

	blob_of(ED_KEY, &ed);
	char *t = ssh_blob_type((unsigned char *)ed.buf, ed.len);
	CHECK_STR(t, "ssh-ed25519");
	free(t);
	CHECK(ssh_blob_type((const unsigned char *)"\0\0\0\xff" "abc", 7) == NULL);
	CHECK(ssh_blob_type((const unsigned char *)"\0\0", 2) == NULL);
	CHECK_STR(ssh_type_label("ssh-ed25519"), "ED25519");
	CHECK_STR(ssh_type_label("ecdsa-sha2-nistp384"), "ECDSA");
	CHECK_STR(ssh_type_label("ssh-rsa"), "RSA");
	sb_release(&ed);
}

int main(void)
{
	libssh2_init(0);
	sess = libssh2_session_init();
	RUN(base64_roundtrip_and_rejects);
	RUN(fingerprint_matches_ssh_keygen);
	RUN(names_for_ports);
	RUN(plain_names_lists_and_ports);
	RUN(hashed_names);
	RUN(lines_that_are_skipped);
	RUN(revoked_and_patterns);
	RUN(judge_verdicts);
	RUN(hostkey_prefs_put_known_types_first);
	RUN(scan_file_reads_line_by_line);
	RUN(append_creates_and_does_not_repeat);
	RUN(blob_types_and_labels);
	libssh2_session_free(sess);
	libssh2_exit();
	return T_DONE();
}
