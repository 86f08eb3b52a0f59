/* netbench: both ends of tools/bench-net.sh's TCP benchmark.
 *
 *   netbench server PORT BYTES ROUNDS   (host, in the script's network
 *                                        namespace; accepts one client)
 *   netbench client ADDR PORT           (guest, started by test-init for
 *                                        tinyvmm.test=netbench=...)
 *
 * All timing is done by the server with the host's CLOCK_MONOTONIC, so the
 * figures do not depend on the guest's clock. The server drives; over one
 * TCP connection it sends commands, each a struct cmd:
 *   'U' n   guest -> host: the client writes n bytes, the server answers
 *           with one byte once it has them all
 *   'D' n   host -> guest: the server writes n bytes, the client answers
 *           with one byte once it has them all
 *   'P' n   n round trips of one byte each way (TCP_NODELAY on both ends)
 *   'Q' 0   the client exits 0
 * Both ends are x86-64, so the struct goes in host byte order.
 * The server prints one line per measurement:
 *   netbench: guest-to-host <bytes> bytes <s> s <KiB/s> KiB/s
 *   netbench: host-to-guest <bytes> bytes <s> s <KiB/s> KiB/s
 *   netbench: rtt <rounds> rounds median <us> us p99 <us> us
 * and exits non-zero when the peer broke the protocol or went away. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct cmd {
	uint32_t op;
	uint32_t n;
};

static char buf[64 * 1024];

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Reads or writes exactly len bytes (p NULL: into / from the scratch
 * buffer, for bulk data). 0 on success, -1 on error or EOF. */
static int xfer(int fd, int out, void *p, size_t len)
{
	while (len) {
		size_t chunk = p ? len : (len < sizeof(buf) ? len : sizeof(buf));
		void *at = p ? p : buf;
		ssize_t r = out ? write(fd, at, chunk) : read(fd, at, chunk);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (p)
			p = (char *)p + r;
		len -= (size_t)r;
	}
	return 0;
}

static int nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int client(const char *addr, const char *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct cmd c;
	char b = 0;

	if (fd < 0 || inet_pton(AF_INET, addr, &sa.sin_addr) != 1 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || nodelay(fd) < 0) {
		fprintf(stderr, "netbench: connect to %s:%s: %s\n", addr, port, strerror(errno));
		return 1;
	}
	for (;;) {
		if (xfer(fd, 0, &c, sizeof(c)) < 0)
			break;
		if (c.op == 'Q')
			return 0;
		if (c.op == 'U' && xfer(fd, 1, NULL, c.n) == 0 && xfer(fd, 0, &b, 1) == 0)
			continue;
		if (c.op == 'D' && xfer(fd, 0, NULL, c.n) == 0 && xfer(fd, 1, &b, 1) == 0)
			continue;
		if (c.op == 'P') {
			uint32_t i;

			for (i = 0; i < c.n; i++)
				if (xfer(fd, 0, &b, 1) < 0 || xfer(fd, 1, &b, 1) < 0)
					break;
			if (i == c.n)
				continue;
		}
		break;
	}
	fprintf(stderr, "netbench: client: server went away or sent a bad command\n");
	return 1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* One bulk transfer: the command, n bytes one way, one byte back. */
static int bulk(int fd, uint32_t op, uint32_t n, const char *name)
{
	struct cmd c = { op, n };
	char b = 0;
	double t0 = now(), dt;

	/* 'U': read n, then ack; 'D': write n, then wait for the ack. */
	if (xfer(fd, 1, &c, sizeof(c)) < 0 || xfer(fd, op == 'D', NULL, n) < 0 || xfer(fd, op == 'U', &b, 1) < 0)
		return -1;
	dt = now() - t0;
	printf("netbench: %s %u bytes %.3f s %.1f KiB/s\n", name, n, dt, n / 1024.0 / dt);
	return 0;
}

static int server(const char *port, uint32_t bytes, uint32_t rounds)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };
	int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0), fd;
	struct cmd c = { 'P', rounds };
	double *rtt = calloc(rounds ? rounds : 1, sizeof(*rtt));
	char b = 0;

	if (ls < 0 || !rtt || setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(ls, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(ls, 1) < 0) {
		fprintf(stderr, "netbench: listen on port %s: %s\n", port, strerror(errno));
		return 1;
	}
	fd = accept(ls, NULL, NULL);
	if (fd < 0 || nodelay(fd) < 0) {
		fprintf(stderr, "netbench: accept: %s\n", strerror(errno));
		return 1;
	}
	if (bulk(fd, 'U', bytes, "guest-to-host") < 0 || bulk(fd, 'D', bytes, "host-to-guest") < 0 ||
	    xfer(fd, 1, &c, sizeof(c)) < 0)
		goto broken;
	for (uint32_t i = 0; i < rounds; i++) {
		double t0 = now();

		if (xfer(fd, 1, &b, 1) < 0 || xfer(fd, 0, &b, 1) < 0)
			goto broken;
		rtt[i] = (now() - t0) * 1e6;
	}
	c = (struct cmd){ 'Q', 0 };
	if (xfer(fd, 1, &c, sizeof(c)) < 0)
		goto broken;
	if (rounds) {
		qsort(rtt, rounds, sizeof(*rtt), cmp_double);
		printf("netbench: rtt %u rounds median %.0f us p99 %.0f us\n", rounds, rtt[rounds / 2],
		       rtt[(rounds * 99) / 100 < rounds ? (rounds * 99) / 100 : rounds - 1]);
	}
	free(rtt);
	return 0;
broken:
	fprintf(stderr, "netbench: server: the client went away mid-measurement\n");
	return 1;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "server"))
		return server(argv[2], (uint32_t)strtoul(argv[3], NULL, 0), (uint32_t)strtoul(argv[4], NULL, 0));
	if (argc == 4 && !strcmp(argv[1], "client"))
		return client(argv[2], argv[3]);
	fprintf(stderr, "usage: netbench server PORT BYTES ROUNDS | netbench client ADDR PORT\n");
	return 2;
}
