/* Public-key authentication as OpenSSH's client does it: keys from
 * ssh-agent first, then identity files ([remote] identity, then IdentityFile)
 * offered by their public half, so a passphrase is asked for (on the
 * terminal) only for a key the host would accept. Secrets are wiped. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "compat.h"
#include "ssh_int.h"

struct idkey {
	char *path;
	int explicit_;           /* [remote] identity: a missing file is an error */
	struct strbuf priv;      /* the private key file, wiped on release */
	char *pubtext;           /* "type base64" for libssh2, or NULL to derive */
	struct strbuf blob;      /* public key blob, if known */
	char *type;
	int encrypted;
	char *problem;           /* why it cannot be used; NULL when usable */
};

static void idkey_release(struct idkey *k)
{
	free(k->path);
	if (k->priv.buf)
		compat_explicit_bzero(k->priv.buf, k->priv.alloc);
	sb_release(&k->priv);
	free(k->pubtext);
	sb_release(&k->blob);
	free(k->type);
	free(k->problem);
}

/* The base64 body between a PEM-style BEGIN and END line. */
static int pem_body(const char *text, const char *begin, struct strbuf *out)
{
	const char *p = strstr(text, begin), *end;
	struct strbuf b64 = STRBUF_INIT;
	int rc;

	if (!p)
		return -1;
	p += strlen(begin);
	end = strstr(p, "-----END");
	if (!end)
		return -1;
	for (; p < end; p++)
		if (*p != '\n' && *p != '\r' && *p != ' ' && *p != '\t')
			sb_add(&b64, p, 1);
	rc = b64.len ? b64_decode(b64.buf, b64.len, out) : -1;
	sb_release(&b64);
	return rc;
}

static uint32_t rd32(const unsigned char *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* openssh-key-v1: magic, cipher, kdf, kdf options, key count, then the
 * public key in the clear: enough to offer the key without decrypting. */
static int parse_openssh_key(struct idkey *k)
{
	struct strbuf raw = STRBUF_INIT;
	const unsigned char *p, *end;
	const char *strs[4];
	uint32_t lens[4];
	int rc = -1;

	if (pem_body(k->priv.buf, "-----BEGIN OPENSSH PRIVATE KEY-----", &raw) < 0)
		goto out;
	p = (const unsigned char *)raw.buf;
	end = p + raw.len;
	if (raw.len < 15 || memcmp(p, "openssh-key-v1", 15))
		goto out;
	p += 15;
	/* cipher, kdf, kdf options, then (after nkeys) the first public key */
	for (int i = 0; i < 4; i++) {
		if (i == 3) {
			if (end - p < 4)
				goto out;
			p += 4; /* number of keys */
		}
		if (end - p < 4 || rd32(p) > (uint32_t)(end - p - 4))
			goto out;
		lens[i] = rd32(p);
		strs[i] = (const char *)p + 4;
		p += 4 + lens[i];
	}
	k->encrypted = !(lens[0] == 4 && !memcmp(strs[0], "none", 4));
	sb_add(&k->blob, strs[3], lens[3]);
	rc = 0;
out:
	sb_release(&raw);
	return rc;
}

/* Read a key file into k->priv (one buffer, so nothing secret is left in
 * a realloc'd copy). 0, or an errno value. */
static int read_secret(const char *path, struct strbuf *sb)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC), e;

	if (fd < 0)
		return errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) {
		e = S_ISDIR(st.st_mode) ? EISDIR : errno ? errno : EINVAL;
		close(fd);
		return e;
	}
	sb_grow(sb, (size_t)st.st_size + 1);
	ssize_t r = read_full(fd, sb->buf, (size_t)st.st_size);
	e = errno;
	close(fd);
	if (r < 0)
		return e;
	sb->len = (size_t)r;
	sb->buf[sb->len] = '\0';
	return 0;
}

/* Read a key file and learn what we can without a passphrase. */
static void idkey_load(struct idkey *k)
{
	struct strbuf pub = STRBUF_INIT;
	char *pubpath;
	int e;

	if ((e = read_secret(k->path, &k->priv)) != 0) {
		k->problem = xasprintf("cannot read key '%s': %s", k->path, strerror(e));
		return;
	}
	if (strstr(k->priv.buf, "-----BEGIN OPENSSH PRIVATE KEY-----")) {
		if (parse_openssh_key(k) < 0) {
			k->problem = xasprintf("key '%s' is damaged (not a valid OpenSSH private key)", k->path);
			return;
		}
	} else if (strstr(k->priv.buf, "-----BEGIN ENCRYPTED PRIVATE KEY-----") ||
		   (strstr(k->priv.buf, "PRIVATE KEY-----") && strstr(k->priv.buf, "ENCRYPTED"))) {
		k->encrypted = 1;
	} else if (!strstr(k->priv.buf, "PRIVATE KEY-----")) {
		k->problem = xasprintf("'%s' is not a private key", k->path);
		return;
	}
	/* The .pub beside it names the key when the private file does not. */
	pubpath = xasprintf("%s.pub", k->path);
	if (!k->blob.len && read_file(pubpath, &pub, NULL) == 0) {
		char *sp = strchr(pub.buf, ' ');
		if (sp) {
			size_t n = strcspn(sp + 1, " \t\r\n");
			if (b64_decode(sp + 1, n, &k->blob) < 0)
				sb_reset(&k->blob);
		}
	}
	free(pubpath);
	sb_release(&pub);
	if (k->blob.len) {
		char *b = b64_encode((unsigned char *)k->blob.buf, k->blob.len, 1);
		k->type = ssh_blob_type((unsigned char *)k->blob.buf, k->blob.len);
		if (k->type)
			k->pubtext = xasprintf("%s %s", k->type, b);
		free(b);
	}
	if (k->type && !strncmp(k->type, "sk-", 3))
		k->problem = xasprintf("key '%s' is a security-key (%s) key, which libssh2 1.10 cannot use",
				       k->path, k->type);
}

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

/* Ask on /dev/tty with echo off. 0, GR_ENOTFOUND if there is no terminal
 * to ask on, GR_ECANCEL if interrupted (the signal is re-raised after the
 * terminal is restored). */
static int ask_passphrase(const char *path, int again, char *buf, size_t size)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGTSTP };
	struct sigaction sa = { 0 }, old[GR_ARRAY_SIZE(sigs)];
	struct termios t, saved;
	size_t n = 0;
	int fd, rc = 0;
	char c;

	/* Only when a person is there: stdin or stderr a terminal too. */
	if (!isatty(0) && !isatty(2))
		return GR_ENOTFOUND;
	fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return GR_ENOTFOUND;
	if (tcgetattr(fd, &saved) < 0) {
		close(fd);
		return GR_ENOTFOUND;
	}
	got_signal = 0;
	sa.sa_handler = on_signal; /* no SA_RESTART: read() must return */
	for (size_t i = 0; i < GR_ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &sa, &old[i]);
	t = saved;
	t.c_lflag &= ~(tcflag_t)(ECHO | ECHOE | ECHOK | ECHONL);
	t.c_lflag |= ICANON;
	tcsetattr(fd, TCSAFLUSH, &t);
	dprintf(fd, "%s passphrase for key '%s': ", again ? "Wrong passphrase; enter the" : "Enter",
		path);
	for (;;) {
		ssize_t r = read(fd, &c, 1);
		if (r < 0 && errno == EINTR && !got_signal)
			continue;
		if (r <= 0 || got_signal) {
			rc = GR_ECANCEL;
			break;
		}
		if (c == '\n' || c == '\r')
			break;
		if (n + 1 < size)
			buf[n++] = c;
	}
	buf[n] = '\0';
	c = 0;
	tcsetattr(fd, TCSAFLUSH, &saved);
	if (write(fd, "\n", 1) < 0) {
		/* the prompt's line end is cosmetic */
	}
	close(fd);
	for (size_t i = 0; i < GR_ARRAY_SIZE(sigs); i++)
		sigaction(sigs[i], &old[i], NULL);
	if (got_signal) {
		compat_explicit_bzero(buf, size);
		raise(got_signal);
	}
	return rc;
}

/* One libssh2 call, retried on EAGAIN until the hop's deadline. */
#define AUTH_RETRY(h, deadline, rc, call)                                      \
	do {                                                                   \
		while (((rc) = (call)) == LIBSSH2_ERROR_EAGAIN)                \
			if (ssh_hop_wait((h), (deadline), NULL) < 0)           \
				break;                                         \
	} while (0)

static int timed_out(struct ssh_hop *h, struct gr_err *err)
{
	return gr_errf(err, GR_ETIMEOUT, "%s did not finish authentication within %d s",
		       h->desc, h->timeout_ms / 1000);
}

/* Offer the agent's keys. 1 = authenticated, 0 = not, < 0 = error. */
static int try_agent(struct ssh_hop *h, struct idkey *keys, size_t nkeys, struct strbuf *tried,
		     struct strvec *offered, int *noffered, struct gr_err *err)
{
	LIBSSH2_AGENT *agent = NULL;
	struct libssh2_agent_publickey *id = NULL;
	const char *sock = getenv("SSH_AUTH_SOCK");
	int rc = 0, n = 0, skipped = 0;

	if (!sock || !*sock)
		return 0;
	agent = libssh2_agent_init(h->s);
	/* Talking to the local agent blocks (a unix socket, answered at once). */
	if (!agent || libssh2_agent_connect(agent) < 0) {
		sb_addf(tried, "%sssh-agent at %s: cannot connect", tried->len ? "; " : "", sock);
		goto out;
	}
	if (libssh2_agent_list_identities(agent) < 0) {
		sb_addf(tried, "%sssh-agent: cannot list keys", tried->len ? "; " : "");
		goto out;
	}
	while (libssh2_agent_get_identity(agent, &id, id) == 0) {
		if (h->t.identities_only) {
			int mine = 0;
			for (size_t i = 0; i < nkeys && !mine; i++)
				mine = keys[i].blob.len == id->blob_len &&
				       !memcmp(keys[i].blob.buf, id->blob, id->blob_len);
			if (!mine) {
				skipped++;
				continue;
			}
		}
		uint64_t deadline = now_ms() + (uint64_t)h->timeout_ms;
		n++;
		AUTH_RETRY(h, deadline, rc, libssh2_agent_userauth(agent, h->t.user, id));
		if (rc == LIBSSH2_ERROR_EAGAIN) {
			rc = timed_out(h, err);
			goto out;
		}
		if (rc == 0) {
			char *detail = xasprintf("publickey as %s with ssh-agent key '%s'", h->t.user,
						 id->comment ? id->comment : "");
			ssh_report(h, SSH_STEP_AUTH, 0, detail, NULL, NULL);
			free(detail);
			rc = 1;
			goto out;
		}
		char *b = b64_encode(id->blob, id->blob_len, 1);
		sv_push(offered, b);
		free(b);
		if (rc == LIBSSH2_ERROR_SOCKET_DISCONNECT || rc == LIBSSH2_ERROR_SOCKET_RECV ||
		    rc == LIBSSH2_ERROR_SOCKET_SEND) {
			rc = gr_errf(err, GR_EAUTH, "%s closed the connection during authentication: %s",
				     h->desc, ssh_lasterr(h->s));
			gr_hintf(err, "too many keys offered? its MaxAuthTries may be lower than the keys "
				 "in your ssh-agent; set IdentitiesOnly yes and IdentityFile for this host");
			goto out;
		}
		rc = 0;
	}
	if (n)
		sb_addf(tried, "%sssh-agent: %d key%s refused", tried->len ? "; " : "", n,
			n == 1 ? "" : "s");
	if (skipped)
		sb_addf(tried, "%sssh-agent: %d key%s not offered (IdentitiesOnly)",
			tried->len ? "; " : "", skipped, skipped == 1 ? "" : "s");
	if (!n && !skipped)
		sb_addf(tried, "%sssh-agent: no keys", tried->len ? "; " : "");
	*noffered += n;
out:
	if (agent) {
		libssh2_agent_disconnect(agent);
		libssh2_agent_free(agent);
	}
	return rc;
}

/* Offer one identity file. 1 = authenticated, 0 = refused, < 0 = error.
 * With its public half known, the host is asked first (libssh2 queries
 * before signing), so an encrypted key's passphrase is asked for only when
 * the host would take the key; without it, we must ask up front. */
static int try_key(struct ssh_hop *h, struct idkey *k, struct strbuf *tried, struct gr_err *err)
{
	char pass[1024] = "";
	int rc = 0, asked = 0, locked = k->encrypted && !k->pubtext;

	for (;;) {
		if (locked) {
			if (asked >= 3) {
				k->problem = xasprintf("wrong passphrase for key '%s'", k->path);
				rc = 0;
				break;
			}
			compat_explicit_bzero(pass, sizeof(pass));
			rc = ask_passphrase(k->path, asked > 0, pass, sizeof(pass));
			if (rc == GR_ECANCEL) {
				rc = gr_errf(err, GR_ECANCEL, "interrupted while asking for the passphrase of '%s'",
					     k->path);
				break;
			}
			if (rc == GR_ENOTFOUND) {
				k->problem = xasprintf("key '%s' is encrypted and no terminal is available to ask "
						       "for its passphrase", k->path);
				rc = 0;
				break;
			}
			asked++;
		}
		uint64_t deadline = now_ms() + (uint64_t)h->timeout_ms;
		AUTH_RETRY(h, deadline, rc,
			   libssh2_userauth_publickey_frommemory(
				   h->s, h->t.user, strlen(h->t.user), k->pubtext,
				   k->pubtext ? strlen(k->pubtext) : 0, k->priv.buf, k->priv.len,
				   pass));
		if (rc == LIBSSH2_ERROR_EAGAIN) {
			rc = timed_out(h, err);
			break;
		}
		if (rc == 0) {
			char *detail = xasprintf("publickey as %s with %s%s", h->t.user, k->path,
						 asked ? " (passphrase asked)" : "");
			ssh_report(h, SSH_STEP_AUTH, 0, detail, NULL, NULL);
			free(detail);
			rc = 1;
			break;
		}
		if (rc == LIBSSH2_ERROR_SOCKET_DISCONNECT || rc == LIBSSH2_ERROR_SOCKET_RECV ||
		    rc == LIBSSH2_ERROR_SOCKET_SEND) {
			rc = gr_errf(err, GR_ESSH, "%s closed the connection during authentication: %s",
				     h->desc, ssh_lasterr(h->s));
			break;
		}
		/* The host refused the public half ("Username/PublicKey
		 * combination invalid"), or rejected the signature. */
		int refused = rc == LIBSSH2_ERROR_AUTHENTICATION_FAILED ||
			      (rc == LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED &&
			       !strstr(ssh_lasterr(h->s), "Callback returned error"));
		if (refused) {
			sb_addf(tried, "%s%s: refused", tried->len ? "; " : "", k->path);
			if (k->type && !strcmp(k->type, "ssh-rsa"))
				sb_adds(tried, " (libssh2 1.10 signs RSA with SHA-1, which OpenSSH 8.8+ refuses)");
			rc = 0;
			break;
		}
		/* The private half did not open: encrypted, or a wrong passphrase. */
		if (!k->encrypted) {
			k->problem = xasprintf("cannot use key '%s': %s", k->path, ssh_lasterr(h->s));
			rc = 0;
			break;
		}
		locked = 1;
	}
	compat_explicit_bzero(pass, sizeof(pass));
	return rc;
}

/* The methods the host allows (a "none" request), or NULL. */
static const char *methods(struct ssh_hop *h)
{
	uint64_t deadline = now_ms() + (uint64_t)h->timeout_ms;
	const char *list;

	while (!(list = libssh2_userauth_list(h->s, h->t.user, (unsigned)strlen(h->t.user))))
		if (libssh2_session_last_errno(h->s) != LIBSSH2_ERROR_EAGAIN ||
		    ssh_hop_wait(h, deadline, NULL) < 0)
			return NULL;
	return list;
}

static void add_key(struct idkey **keys, size_t *n, const char *path, int explicit_)
{
	char *p = expand_home(path);

	for (size_t i = 0; i < *n; i++) {
		if (!strcmp((*keys)[i].path, p)) {
			free(p);
			return;
		}
	}
	*keys = xrealloc(*keys, (*n + 1) * sizeof(**keys));
	memset(&(*keys)[*n], 0, sizeof(**keys));
	(*keys)[*n].path = p;
	(*keys)[*n].explicit_ = explicit_;
	(*n)++;
}

int ssh_authenticate(struct ssh_hop *h, const struct ssh_opts *o, struct gr_err *err)
{
	static const char *const defaults[] = {
		"~/.ssh/id_rsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk", "~/.ssh/id_ed25519",
		"~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss", "~/.ssh/id_dsa",
	};
	struct idkey *keys = NULL;
	struct strbuf tried = STRBUF_INIT;
	struct strvec offered = STRVEC_INIT;
	struct idkey *pk = NULL;
	const char *list;
	size_t nkeys = 0;
	int rc = 0, noffered = 0;

	/* No "none" request for the method list first (as ssh does): it costs
	 * a round trip, and it is only needed to explain a failure. */
	if (o->identity && *o->identity)
		add_key(&keys, &nkeys, o->identity, 1);
	for (size_t i = 0; i < h->t.identity_files.n; i++)
		add_key(&keys, &nkeys, h->t.identity_files.v[i], 0);
	if (!h->t.identity_files.n)
		for (size_t i = 0; i < GR_ARRAY_SIZE(defaults); i++)
			add_key(&keys, &nkeys, defaults[i], 0);
	for (size_t i = 0; i < nkeys; i++) {
		struct stat st;
		if (!keys[i].explicit_ && stat(keys[i].path, &st) < 0 && errno == ENOENT) {
			keys[i].problem = xstrdup(""); /* silently absent */
			continue;
		}
		idkey_load(&keys[i]);
	}

	if ((rc = try_agent(h, keys, nkeys, &tried, &offered, &noffered, err)) != 0)
		goto out;
	if (!getenv("SSH_AUTH_SOCK"))
		sb_addf(&tried, "no ssh-agent: SSH_AUTH_SOCK is not set");

	for (size_t i = 0; i < nkeys; i++) {
		struct idkey *k = &keys[i];
		if (k->problem) {
			if (*k->problem)
				sb_addf(&tried, "%s%s: unusable", tried.len ? "; " : "", k->path);
			continue;
		}
		/* The agent offered it already and it was refused. */
		int dup = 0;
		if (k->blob.len) {
			char *b = b64_encode((unsigned char *)k->blob.buf, k->blob.len, 1);
			for (size_t j = 0; j < offered.n && !dup; j++)
				dup = !strcmp(b, offered.v[j]);
			free(b);
		}
		if (dup)
			continue;
		noffered++;
		if ((rc = try_key(h, k, &tried, err)) != 0)
			goto out;
	}

	for (size_t i = 0; i < nkeys && !pk; i++)
		if (keys[i].problem && *keys[i].problem)
			pk = &keys[i];
	list = methods(h);
	if (list && !strstr(list, "publickey")) {
		rc = gr_errf(err, GR_EAUTH, "%s accepts no public keys (it offers: %s)", h->desc, list);
		gr_hintf(err, "gpurun signs in with keys only: install your public key there (ssh-copy-id)");
	} else if (pk) {
		rc = gr_errf(err, GR_EAUTH, "%s", pk->problem);
		if (strstr(pk->problem, "no terminal"))
			gr_hintf(err, "add it to your ssh-agent once (ssh-add '%s'): gpurun uses the agent's keys",
				 pk->path);
		else if (strstr(pk->problem, "wrong passphrase"))
			gr_hintf(err, "or add it to your ssh-agent (ssh-add '%s'), which asks once", pk->path);
		else if (pk->explicit_)
			gr_hintf(err, "check [remote] identity in gpurun.ini");
		else
			gr_hintf(err, "check IdentityFile for '%s' in ~/.ssh/config", h->t.alias);
	} else if (!noffered) {
		rc = gr_errf(err, GR_EAUTH, "no key to offer %s (%s)", h->desc, tried.buf);
		gr_hintf(err, "make one with 'ssh-keygen -t ed25519' and install it there with "
			 "ssh-copy-id; [remote] identity or IdentityFile names it");
	} else {
		rc = gr_errf(err, GR_EAUTH, "%s accepted none of the keys offered (%s)", h->desc, tried.buf);
		gr_hintf(err, "is your public key in ~/.ssh/authorized_keys for '%s' there? "
			 "[remote] identity or IdentityFile picks the key", h->t.user);
	}
out:
	if (rc < 0)
		ssh_report(h, SSH_STEP_AUTH, rc, NULL, NULL, err);
	for (size_t i = 0; i < nkeys; i++)
		idkey_release(&keys[i]);
	free(keys);
	sb_release(&tried);
	sv_clear(&offered);
	return rc < 0 ? rc : 0;
}
