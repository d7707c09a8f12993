/* A user-space WAN emulator for tests and benchmarks (this kernel has no
 * netem): a TCP proxy that delays each direction by a fixed one-way time,
 * limits it to a rate, counts bytes, and can cut every connection or stop
 * accepting on a signal.
 *
 *   delayproxy --to HOST:PORT [--listen PORT] [--delay MS] [--rate BYTES/S]
 *              [--port-file F] [--stats F]
 *   SIGUSR1: cut every connection now (RST both sides)
 *   SIGUSR2: toggle "down": refuse new connections and cut current ones
 *   SIGTERM: write stats and exit
 * The signals are blocked except inside ppoll, and each one pending is
 * taken as ppoll returns, before any accept: a cut acts on the connections
 * open when it was sent, never on one accepted after it.
 * DELAYPROXY_IDLE_PAUSE_MS (tests of this proxy only): pause that long
 * before each wait while no connection is open, to widen the window a
 * signal used to fall into.
 * Stats file: "up N\ndown N\nconns N\n" (up = client to server bytes). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXCONN 64
#define CHUNK 65536
#define QUEUE_MAX (1u << 20) /* stop reading a side while this much is in flight */

struct chunk {
	struct chunk *next;
	uint64_t due_us;
	size_t len, off;
	char data[];
};

struct dir {
	int from, to;
	struct chunk *head, *tail;
	size_t queued;
	int eof_seen;    /* from side closed: shut down to side when drained */
	int shut;
};

struct link {
	uint64_t busy_until_us; /* serialisation: when the link is free again */
	uint64_t bytes;
};

struct conn {
	int used;
	struct dir d[2]; /* 0: client->server, 1: server->client */
};

static struct conn conns[MAXCONN];
static struct link links[2];
static uint64_t delay_us, rate_bps, nconns;
static volatile sig_atomic_t want_cut, want_toggle, want_exit;
static int down;
static const char *stats_path;

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void on_sig(int s)
{
	if (s == SIGUSR1) want_cut = 1;
	else if (s == SIGUSR2) want_toggle = 1;
	else want_exit = 1;
}

static void write_stats(void)
{
	if (!stats_path)
		return;
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", stats_path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "up %llu\ndown %llu\nconns %llu\n", (unsigned long long)links[0].bytes,
		(unsigned long long)links[1].bytes, (unsigned long long)nconns);
	fclose(f);
	rename(tmp, stats_path);
}

static void rst_close(int fd)
{
	struct linger l = { 1, 0 };
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static void conn_close(struct conn *c, int rst)
{
	for (int i = 0; i < 2; i++) {
		struct chunk *ch = c->d[i].head;
		while (ch) {
			struct chunk *n = ch->next;
			free(ch);
			ch = n;
		}
	}
	if (rst) {
		rst_close(c->d[0].from);
		rst_close(c->d[0].to);
	} else {
		close(c->d[0].from);
		close(c->d[0].to);
	}
	memset(c, 0, sizeof(*c));
	write_stats();
}

static int connect_to(const char *host, const char *port)
{
	struct addrinfo hints = { 0 }, *res, *ai;
	int fd = -1;

	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -1;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

static void pump_read(struct conn *c, int i, uint64_t now)
{
	struct dir *d = &c->d[i];
	struct chunk *ch = malloc(sizeof(*ch) + CHUNK);
	ssize_t r;

	if (!ch)
		abort();
	r = read(d->from, ch->data, CHUNK);
	if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
		free(ch);
		return;
	}
	if (r <= 0) {
		free(ch);
		d->eof_seen = 1;
		return;
	}
	ch->len = (size_t)r;
	ch->off = 0;
	ch->next = NULL;
	/* Serialise on the link at the rate, then propagate for the delay. */
	uint64_t start = links[i].busy_until_us > now ? links[i].busy_until_us : now;
	uint64_t ser = rate_bps ? (uint64_t)r * 1000000u / rate_bps : 0;
	links[i].busy_until_us = start + ser;
	ch->due_us = start + ser + delay_us;
	links[i].bytes += (uint64_t)r;
	static uint64_t last_stats;
	if (now - last_stats > 50000) {
		write_stats();
		last_stats = now;
	}
	if (d->tail)
		d->tail->next = ch;
	else
		d->head = ch;
	d->tail = ch;
	d->queued += ch->len;
}

/* Returns -1 if the connection broke. */
static int pump_write(struct conn *c, int i, uint64_t now)
{
	struct dir *d = &c->d[i];

	while (d->head && d->head->due_us <= now) {
		struct chunk *ch = d->head;
		ssize_t w = write(d->to, ch->data + ch->off, ch->len - ch->off);
		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -1;
		}
		ch->off += (size_t)w;
		d->queued -= (size_t)w;
		if (ch->off < ch->len)
			return 0;
		d->head = ch->next;
		if (!d->head)
			d->tail = NULL;
		free(ch);
	}
	if (!d->head && d->eof_seen && !d->shut) {
		shutdown(d->to, SHUT_WR);
		d->shut = 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *to = NULL, *port_file = NULL;
	long listen_port = 0;
	char host[256], port[32];
	int lfd;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!v) {
			fprintf(stderr, "delayproxy: option '%s' needs a value\n", a);
			return 2;
		}
		if (!strcmp(a, "--to")) to = v;
		else if (!strcmp(a, "--listen")) listen_port = strtol(v, NULL, 10);
		else if (!strcmp(a, "--delay")) delay_us = strtoull(v, NULL, 10) * 1000u;
		else if (!strcmp(a, "--rate")) rate_bps = strtoull(v, NULL, 10);
		else if (!strcmp(a, "--port-file")) port_file = v;
		else if (!strcmp(a, "--stats")) stats_path = v;
		else {
			fprintf(stderr, "delayproxy: unknown option '%s'\n", a);
			return 2;
		}
		i++;
	}
	const char *pause_env = getenv("DELAYPROXY_IDLE_PAUSE_MS");
	long idle_pause_ms = 0;
	if (pause_env) {
		char *end;
		errno = 0;
		idle_pause_ms = strtol(pause_env, &end, 10);
		if (errno || end == pause_env || *end || idle_pause_ms < 0 || idle_pause_ms > 10000) {
			fprintf(stderr, "delayproxy: DELAYPROXY_IDLE_PAUSE_MS must be 0 to 10000, not '%s'\n",
				pause_env);
			return 2;
		}
	}
	const char *colon = to ? strrchr(to, ':') : NULL;
	if (!colon || (size_t)(colon - to) >= sizeof(host)) {
		fprintf(stderr, "usage: delayproxy --to HOST:PORT [--listen PORT] [--delay MS] [--rate B/S] [--port-file F] [--stats F]\n");
		return 2;
	}
	memcpy(host, to, (size_t)(colon - to));
	host[colon - to] = '\0';
	snprintf(port, sizeof(port), "%s", colon + 1);

	struct sockaddr_in sa = { 0 };
	socklen_t sl = sizeof(sa);
	int one = 1;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)listen_port);
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 64) < 0) {
		perror("delayproxy: bind");
		return 1;
	}
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	if (port_file) {
		char tmp[4096];
		snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
		FILE *f = fopen(tmp, "w");
		if (!f || fprintf(f, "%d\n", ntohs(sa.sin_port)) < 0 || fclose(f) != 0 ||
		    rename(tmp, port_file) < 0) {
			perror("delayproxy: port file");
			return 1;
		}
	} else {
		printf("%d\n", ntohs(sa.sin_port));
		fflush(stdout);
	}
	struct sigaction sig = { 0 };
	sig.sa_handler = on_sig;
	sigaction(SIGUSR1, &sig, NULL);
	sigaction(SIGUSR2, &sig, NULL);
	sigaction(SIGTERM, &sig, NULL);
	sigaction(SIGINT, &sig, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigset_t block, waitmask;
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigaddset(&block, SIGUSR2);
	sigaddset(&block, SIGTERM);
	sigaddset(&block, SIGINT);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	write_stats();

	while (!want_exit) {
		struct pollfd pfd[1 + MAXCONN * 4];
		int owner[1 + MAXCONN * 4], kind[1 + MAXCONN * 4];
		int n = 0, timeout = -1;
		uint64_t now = now_us();

		pfd[n] = (struct pollfd){ lfd, POLLIN, 0 };
		owner[n] = -1;
		kind[n++] = 0;
		for (int i = 0; i < MAXCONN; i++) {
			struct conn *c = &conns[i];
			if (!c->used)
				continue;
			for (int k = 0; k < 2; k++) {
				struct dir *d = &c->d[k];
				if (!d->eof_seen && d->queued < QUEUE_MAX) {
					pfd[n] = (struct pollfd){ d->from, POLLIN, 0 };
					owner[n] = i;
					kind[n++] = 1 + k;
				}
				if (d->head) {
					if (d->head->due_us <= now) {
						pfd[n] = (struct pollfd){ d->to, POLLOUT, 0 };
						owner[n] = i;
						kind[n++] = 3 + k;
					} else {
						int ms = (int)((d->head->due_us - now + 999) / 1000);
						if (timeout < 0 || ms < timeout)
							timeout = ms;
					}
				}
			}
		}
		/* Stats lag reads by at most this much. */
		if (timeout < 0 || timeout > 100)
			timeout = 100;
		if (n == 1 && idle_pause_ms > 0)
			usleep((useconds_t)idle_pause_ms * 1000);
		struct timespec ts = { timeout / 1000, (long)(timeout % 1000) * 1000000 };
		int pr = ppoll(pfd, (nfds_t)n, &ts, &waitmask);
		if (pr < 0 && errno != EINTR) {
			perror("delayproxy: ppoll");
			break;
		}
		/* A signal is taken only in ppoll, which leaves it pending when
		 * it returns ready: take it now, before this round accepts. */
		static const struct timespec zero;
		for (int sg; (sg = sigtimedwait(&block, NULL, &zero)) > 0;)
			on_sig(sg);
		if (want_cut || want_toggle) {
			if (want_toggle)
				down = !down;
			if (want_cut || down)
				for (int i = 0; i < MAXCONN; i++)
					if (conns[i].used)
						conn_close(&conns[i], 1);
			want_cut = want_toggle = 0;
		}
		if (pr < 0)
			continue;
		now = now_us();
		static uint64_t stats_due;
		if (now >= stats_due) {
			write_stats();
			stats_due = now + 100000;
		}
		for (int j = 0; j < n; j++) {
			if (!pfd[j].revents)
				continue;
			if (kind[j] == 0) {
				int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
				if (cfd < 0)
					continue;
				if (down) {
					rst_close(cfd);
					continue;
				}
				int sfd = connect_to(host, port);
				int slot = -1;
				for (int i = 0; i < MAXCONN && slot < 0; i++)
					if (!conns[i].used)
						slot = i;
				if (sfd < 0 || slot < 0) {
					rst_close(cfd);
					if (sfd >= 0)
						close(sfd);
					continue;
				}
				fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK);
				setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				setsockopt(sfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
				conns[slot].used = 1;
				conns[slot].d[0] = (struct dir){ .from = cfd, .to = sfd };
				conns[slot].d[1] = (struct dir){ .from = sfd, .to = cfd };
				nconns++;
				continue;
			}
			struct conn *c = &conns[owner[j]];
			if (!c->used)
				continue;
			if (kind[j] <= 2)
				pump_read(c, kind[j] - 1, now);
			else if (pump_write(c, kind[j] - 3, now) < 0)
				conn_close(c, 1);
		}
		for (int i = 0; i < MAXCONN; i++) {
			struct conn *c = &conns[i];
			if (!c->used)
				continue;
			for (int k = 0; k < 2 && c->used; k++) {
				struct dir *d = &c->d[k];
				/* due data, or an end of stream to pass on */
				int due = d->head ? d->head->due_us <= now : d->eof_seen && !d->shut;
				if (due && pump_write(c, k, now) < 0)
					conn_close(c, 1);
			}
			if (c->used && c->d[0].shut && c->d[1].shut)
				conn_close(c, 0);
		}
	}
	write_stats();
	return 0;
}

