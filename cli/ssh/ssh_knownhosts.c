/* Host keys: known_hosts read line by line the way OpenSSH reads it (libssh2's
 * readfile stops at the first line it cannot parse: @cert-authority, unknown
 * key types), hashed names, [host]:port, @revoked; the verdict on the key a
 * host offers, accept-new, and fingerprints as ssh-keygen -l prints them. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "ssh_int.h"

char *kh_fingerprint(const unsigned char *sha256)
{
	char *b = b64_encode(sha256, 32, 0);
	char *fp = xasprintf("SHA256:%s", b);

	free(b);
	return fp;
}

const char *ssh_type_label(const char *type)
{
	if (!type)
		return "unknown";
	if (!strcmp(type, "ssh-ed25519"))
		return "ED25519";
	if (!strncmp(type, "ecdsa-sha2-", 11))
		return "ECDSA";
	if (!strcmp(type, "ssh-rsa") || !strncmp(type, "rsa-sha2-", 9))
		return "RSA";
	if (!strcmp(type, "ssh-dss"))
		return "DSA";
	if (!strncmp(type, "sk-ssh-ed25519", 14))
		return "ED25519-SK";
	if (!strncmp(type, "sk-ecdsa", 8))
		return "ECDSA-SK";
	return type;
}

char *kh_name(const char *host, int port)
{
	char *n = port == 22 || port <= 0 ? xstrdup(host) : xasprintf("[%s]:%d", host, port);

	for (char *p = n; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return n;
}

/* OpenSSH's match_pattern: '*' and '?' only ('[' is literal, as in
 * "[host]:port"), case-insensitive (both sides are lowercased). */
static int wild(const char *s, const char *p, size_t plen)
{
	for (;;) {
		if (!plen)
			return !*s;
		if (*p == '*') {
			while (plen && *p == '*')
				p++, plen--;
			if (!plen)
				return 1;
			for (; *s; s++)
				if (wild(s, p, plen))
					return 1;
			return 0;
		}
		if (!*s)
			return 0;
		if (*p != '?' && tolower((unsigned char)*p) != *s)
			return 0;
		s++, p++, plen--;
	}
}

/* A comma list of patterns: 1 if one matches and no negated one does. */
static int match_list(const char *name, const char *list, size_t len)
{
	int got = 0;

	while (len) {
		const char *comma = memchr(list, ',', len);
		size_t n = comma ? (size_t)(comma - list) : len;
		int neg = n && list[0] == '!';
		if (wild(name, list + neg, n - (size_t)neg)) {
			if (neg)
				return 0;
			got = 1;
		}
		if (!comma)
			break;
		len -= n + 1;
		list = comma + 1;
	}
	return got;
}

/* A hashed name (|1|salt|hash): let libssh2 do the HMAC-SHA1. The line
 * given to it carries a placeholder key, so its key type does not matter. */
static int match_hashed(LIBSSH2_SESSION *s, const char *field, size_t n, const char *name)
{
	LIBSSH2_KNOWNHOSTS *kh = libssh2_knownhost_init(s);
	struct libssh2_knownhost *e = NULL;
	char *line;
	int rc, hit = 0;

	if (!kh)
		return 0;
	line = xasprintf("%.*s ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n",
			 (int)n, field);
	if (libssh2_knownhost_readline(kh, line, strlen(line), LIBSSH2_KNOWNHOST_FILE_OPENSSH) == 0) {
		/* Key type 0: any key of a matching host counts (MATCH or MISMATCH). */
		rc = libssh2_knownhost_checkp(kh, name, -1, "x", 0,
					      LIBSSH2_KNOWNHOST_TYPE_PLAIN | LIBSSH2_KNOWNHOST_KEYENC_BASE64,
					      &e);
		hit = rc == LIBSSH2_KNOWNHOST_CHECK_MATCH || rc == LIBSSH2_KNOWNHOST_CHECK_MISMATCH;
	}
	free(line);
	libssh2_knownhost_free(kh);
	return hit;
}

void kh_entry_release(struct kh_entry *e)
{
	if (!e)
		return;
	free(e->file);
	free(e->type);
	free(e->blob);
	memset(e, 0, sizeof(*e));
}

void kh_list_release(struct kh_list *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		kh_entry_release(&l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* Next whitespace-separated field of [*p, end). */
static int field(const char **p, const char *end, const char **f, size_t *n)
{
	const char *s = *p;

	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	if (s == end)
		return 0;
	*f = s;
	while (s < end && *s != ' ' && *s != '\t')
		s++;
	*n = (size_t)(s - *f);
	*p = s;
	return 1;
}

int kh_parse_line(LIBSSH2_SESSION *s, const char *line, size_t len, const char *name,
		  struct kh_entry *e)
{
	const char *p = line, *end = line + len, *hosts, *type, *key;
	size_t nh, nt, nk;
	struct strbuf blob = STRBUF_INIT;
	int revoked = 0;

	memset(e, 0, sizeof(*e));
	while (end > p && (end[-1] == '\n' || end[-1] == '\r'))
		end--;
	if (!field(&p, end, &hosts, &nh) || hosts[0] == '#')
		return 0;
	if (hosts[0] == '@') {
		/* Certificates are not supported: a CA line vouches for no key here. */
		if (nh != 8 || memcmp(hosts, "@revoked", 8))
			return 0;
		revoked = 1;
		if (!field(&p, end, &hosts, &nh))
			return 0;
	}
	if (!field(&p, end, &type, &nt) || !field(&p, end, &key, &nk))
		return 0;
	if (isdigit((unsigned char)type[0]))
		return 0; /* SSH1 RSA "bits e n": never offered over SSH2 */
	if (nh > 3 && !memcmp(hosts, "|1|", 3)) {
		if (!match_hashed(s, hosts, nh, name))
			return 0;
	} else if (!match_list(name, hosts, nh)) {
		return 0;
	}
	if (b64_decode(key, nk, &blob) < 0 || !blob.len) {
		sb_release(&blob);
		return 0;
	}
	char *btype = ssh_blob_type((unsigned char *)blob.buf, blob.len);
	if (!btype || strlen(btype) != nt || memcmp(btype, type, nt)) {
		/* A key whose blob says another type than the line: not usable. */
		free(btype);
		sb_release(&blob);
		return 0;
	}
	e->type = btype;
	e->bloblen = blob.len;
	e->blob = (unsigned char *)sb_detach(&blob, NULL);
	e->revoked = revoked;
	return 1;
}

int kh_scan_file(LIBSSH2_SESSION *s, const char *path, const char *name,
		 struct kh_list *out, struct gr_err *err)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int lineno = 0;

	if (!f) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return gr_errf(err, GR_EIO, "cannot read '%s': %s", path, strerror(errno));
	}
	while ((n = getline(&line, &cap, f)) >= 0) {
		struct kh_entry e;
		lineno++;
		if (!kh_parse_line(s, line, (size_t)n, name, &e))
			continue;
		e.file = xstrdup(path);
		e.line = lineno;
		out->v = xrealloc(out->v, (out->n + 1) * sizeof(*out->v));
		out->v[out->n++] = e;
	}
	int rc = ferror(f) ? gr_errf(err, GR_EIO, "cannot read '%s': %s", path, strerror(errno)) : 0;
	free(line);
	fclose(f);
	return rc;
}

enum kh_verdict kh_judge(const struct kh_list *l, const char *type,
			 const unsigned char *blob, size_t len, const struct kh_entry **which)
{
	const struct kh_entry *changed = NULL, *other = NULL;

	*which = NULL;
	for (size_t i = 0; i < l->n; i++) {
		const struct kh_entry *e = &l->v[i];
		if (e->revoked && e->bloblen == len && !memcmp(e->blob, blob, len)) {
			*which = e;
			return KH_REVOKED;
		}
	}
	for (size_t i = 0; i < l->n; i++) {
		const struct kh_entry *e = &l->v[i];
		if (e->revoked)
			continue;
		if (!strcmp(e->type, type)) {
			if (e->bloblen == len && !memcmp(e->blob, blob, len)) {
				*which = e;
				return KH_MATCH;
			}
			if (!changed)
				changed = e;
		} else if (!other) {
			other = e;
		}
	}
	if (changed) {
		*which = changed;
		return KH_CHANGED;
	}
	if (other) {
		*which = other;
		return KH_OTHER_TYPE;
	}
	return KH_UNKNOWN;
}

char *kh_hostkey_prefs(const struct kh_list *l)
{
	/* OpenSSH's order, less DSA and certificates (not supported here). */
	static const char *const order[] = {
		"ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
		"ecdsa-sha2-nistp521", "rsa-sha2-512", "rsa-sha2-256", "ssh-rsa",
	};
	struct strbuf sb = STRBUF_INIT;
	int first[GR_ARRAY_SIZE(order)] = { 0 };

	/* Known types first, so the host shows a key we can check. */
	for (size_t i = 0; i < l->n; i++) {
		for (size_t k = 0; k < GR_ARRAY_SIZE(order); k++) {
			int rsa = !strcmp(l->v[i].type, "ssh-rsa") && k >= 4;
			if (l->v[i].revoked || first[k] || (strcmp(l->v[i].type, order[k]) && !rsa))
				continue;
			first[k] = 1;
			sb_addf(&sb, "%s%s", sb.len ? "," : "", order[k]);
		}
	}
	for (size_t k = 0; k < GR_ARRAY_SIZE(order); k++)
		if (!first[k])
			sb_addf(&sb, "%s%s", sb.len ? "," : "", order[k]);
	return sb_detach(&sb, NULL);
}

static int has_line(const char *buf, const char *line)
{
	for (const char *p = buf; (p = strstr(p, line)) != NULL; p++)
		if (p == buf || p[-1] == '\n')
			return 1;
	return 0;
}

int kh_append(const char *path, const char *name, const char *type,
	      const unsigned char *blob, size_t len, struct gr_err *err)
{
	char *dir = xstrdup(path), *slash = strrchr(dir, '/'), *b64 = NULL, *line = NULL;
	struct strbuf old = STRBUF_INIT;
	int fd = -1, rc = 0;

	if (slash && slash != dir) {
		*slash = '\0';
		if ((rc = mkdir_p(dir, 0700, err)) < 0)
			goto out;
	}
	fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = gr_errf(err, GR_EIO, "cannot write '%s': %s", path, strerror(errno));
		goto out;
	}
	/* Two first connections at once: the second finds the first's line. */
	if (flock(fd, LOCK_EX) < 0) {
		rc = gr_errf(err, GR_EIO, "cannot lock '%s': %s", path, strerror(errno));
		goto out;
	}
	b64 = b64_encode(blob, len, 1);
	line = xasprintf("%s %s %s\n", name, type, b64);
	if ((rc = read_file(path, &old, err)) < 0)
		goto out;
	if (old.len && has_line(old.buf, line))
		goto out;
	if (old.len && old.buf[old.len - 1] != '\n' && write_full(fd, "\n", 1) < 0)
		goto werr;
	if (write_full(fd, line, strlen(line)) < 0 || fsync(fd) < 0)
		goto werr;
	goto out;
werr:
	rc = gr_errf(err, GR_EIO, "cannot write '%s': %s", path, strerror(errno));
out:
	if (fd >= 0)
		close(fd);
	sb_release(&old);
	free(line);
	free(b64);
	free(dir);
	return rc;
}

/* The known_hosts files for h: [remote] known_hosts alone when set, else
 * ssh_config's UserKnownHostsFile (resolved with OpenSSH's defaults; none
 * at all for "UserKnownHostsFile none"), then the system-wide ones, which
 * are read, never written. Returns how many are the user's: accept-new
 * writes to the first of those. */
static size_t kh_files(const struct ssh_hop *h, const struct ssh_opts *o, struct strvec *files)
{
	size_t user;

	if (o->known_hosts && *o->known_hosts) {
		sv_push(files, o->known_hosts);
		return 1;
	}
	for (size_t i = 0; i < h->t.known_hosts_files.n; i++) {
		char *p = expand_home(h->t.known_hosts_files.v[i]);
		sv_push(files, p);
		free(p);
	}
	user = files->n;
	sv_push(files, "/etc/ssh/ssh_known_hosts");
	sv_push(files, "/etc/ssh/ssh_known_hosts2");
	return user;
}

int ssh_hostkey_prepare(struct ssh_hop *h, const struct ssh_opts *o, struct kh_list *known,
			struct gr_err *err)
{
	struct strvec files = STRVEC_INIT;
	char *prefs;
	int rc = 0;

	kh_files(h, o, &files);
	for (size_t i = 0; i < files.n && rc == 0; i++)
		rc = kh_scan_file(h->s, files.v[i], h->khname, known, err);
	sv_clear(&files);
	if (rc < 0)
		return rc;
	prefs = kh_hostkey_prefs(known);
	rc = ssh_method_pref(h, LIBSSH2_METHOD_HOSTKEY, prefs, err);
	free(prefs);
	return rc;
}

int ssh_hostkey_check(struct ssh_hop *h, const struct ssh_opts *o, const struct kh_list *known,
		      struct gr_err *err)
{
	const struct kh_entry *e;
	size_t len;
	int ktype, rc = 0, shk = h->t.strict_host_key_checking;
	size_t nuser;
	const unsigned char *blob = (const unsigned char *)libssh2_session_hostkey(h->s, &len, &ktype);
	const unsigned char *sha = (const unsigned char *)libssh2_hostkey_hash(h->s, LIBSSH2_HOSTKEY_HASH_SHA256);
	char *type = blob ? ssh_blob_type(blob, len) : NULL;
	char *fp = NULL, *detail = NULL;
	struct strvec files = STRVEC_INIT;

	if (!blob || !sha || !type) {
		rc = gr_errf(err, GR_ESSH, "%s sent no usable host key", h->desc);
		goto out;
	}
	fp = kh_fingerprint(sha);
	switch (kh_judge(known, type, blob, len, &e)) {
	case KH_MATCH:
		detail = xasprintf("%s key %s known (%s:%d)", ssh_type_label(type), fp, e->file, e->line);
		break;
	case KH_REVOKED:
		rc = gr_errf(err, GR_EHOSTKEY, "host key for '%s' is revoked (%s:%d): %s key %s",
			     h->khname, e->file, e->line, ssh_type_label(type), fp);
		gr_hintf(err, "the host's administrator revoked this key; ask them for the new one");
		break;
	case KH_CHANGED:
	case KH_OTHER_TYPE:
		rc = gr_errf(err, GR_EHOSTKEY,
			     "host key for '%s' has changed: it offers %s key %s, but %s:%d has another %s key",
			     h->khname, ssh_type_label(type), fp, e->file, e->line,
			     ssh_type_label(e->type));
		gr_hintf(err, "someone may be intercepting the connection; if the host was reinstalled, "
			 "remove the old key with: ssh-keygen -R '%s' -f '%s'", h->khname, e->file);
		break;
	case KH_UNKNOWN:
		if (o->accept_new)
			shk = GR_SHK_ACCEPT_NEW;
		nuser = kh_files(h, o, &files);
		if (shk == GR_SHK_ACCEPT_NEW && !nuser) {
			rc = gr_errf(err, GR_EHOSTKEY, "host key for '%s' is not known (%s key %s), and "
				     "there is no known_hosts file to record it in", h->khname,
				     ssh_type_label(type), fp);
			gr_hintf(err, "UserKnownHostsFile is none for this host; set [remote] known_hosts");
		} else if (shk == GR_SHK_ACCEPT_NEW) {
			if ((rc = kh_append(files.v[0], h->khname, type, blob, len, err)) < 0)
				break;
			detail = xasprintf("%s key %s was not known: added to %s", ssh_type_label(type),
					   fp, files.v[0]);
			if (!ssh_observed())
				ssh_say("added '%s' (%s key %s) to %s", h->khname,
					ssh_type_label(type), fp, files.v[0]);
		} else if (shk == GR_SHK_NO) {
			detail = xasprintf("%s key %s is not known; accepted (StrictHostKeyChecking no)",
					   ssh_type_label(type), fp);
			if (!ssh_observed())
				ssh_say("warning: host key for '%s' is not known (%s key %s); "
					"connecting anyway (StrictHostKeyChecking no)",
					h->khname, ssh_type_label(type), fp);
		} else {
			rc = gr_errf(err, GR_EHOSTKEY, "host key for '%s' is not known (%s key %s)",
				     h->khname, ssh_type_label(type), fp);
			gr_hintf(err, "if that is the host's fingerprint, rerun once as 'gpurun "
				 "--accept-new-host-key ...' (or set 'StrictHostKeyChecking accept-new' "
				 "for it in ~/.ssh/config) to record it in %s",
				 nuser ? files.v[0] : "[remote] known_hosts");
		}
		break;
	}
out:
	ssh_report(h, SSH_STEP_HOSTKEY, rc, detail, NULL, err);
	sv_clear(&files);
	free(detail);
	free(fp);
	free(type);
	return rc;
}
