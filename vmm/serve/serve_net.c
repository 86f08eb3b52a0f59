/* The host side of a networked sandbox. Each one gets a TAP of its own,
 * made here persistent (it outlives a VMM that crashed, until the daemon
 * removes it) and given the host end of a /30 out of cfg.net_range; its VMM
 * attaches to that TAP and hands the guest the other end (--net-ip,
 * --net-gw). The guest thus reaches the host at once; routing beyond it
 * (ip_forward, NAT) is the host admin's, as for Docker's userland-less
 * bridges. Ownership: a sandbox holds its slot while its VMM may run and
 * while it is paused; the TAP goes when the VMM is reaped (not by a
 * pause) or when a restarted daemon does not re-adopt it. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/if_tun.h>

#include "vmm/serve/serve.h"

#define TAP_FLAGS (IFF_TAP | IFF_NO_PI | IFF_VNET_HDR) /* as the VMM opens it (devices/net/net_tap.c) */

int net_range_parse(const char *v, uint32_t *base, unsigned *prefix)
{
	char addr[INET_ADDRSTRLEN];
	const char *slash = strchr(v, '/');
	struct in_addr a;
	char *end;
	unsigned long p;

	if (!slash || (size_t)(slash - v) >= sizeof(addr))
		return -EINVAL;
	memcpy(addr, v, (size_t)(slash - v));
	addr[slash - v] = 0;
	errno = 0;
	p = strtoul(slash + 1, &end, 10);
	if (inet_pton(AF_INET, addr, &a) != 1 || slash[1] < '0' || slash[1] > '9' || *end || errno || p < 8 || p > 30)
		return -EINVAL;
	*prefix = (unsigned)p;
	*base = ntohl(a.s_addr) & ~((1u << (32 - p)) - 1);
	return net_host_ok(*base | 1) ? 0 : -EINVAL;
}

bool net_host_ok(uint32_t host)
{
	/* a /30's first host; not "this network" (0/8), loopback (127/8),
	 * multicast and above (224/3) */
	return (host & 3) == 1 && (host >> 24) != 0 && (host >> 24) != 127 && (host >> 24) < 224;
}

void net_tap_name(const struct sandbox *sb, char out[IFNAMSIZ])
{
	/* "sbx_" + 32 random hex digits: 8 of them name it, unlike any other
	 * daemon's (and short of IFNAMSIZ) */
	snprintf(out, IFNAMSIZ, "tvs%.8s", sb->id + 4);
}

void net_mac(const struct sandbox *sb, char out[18])
{
	const char *h = sb->id + 4;

	snprintf(out, 18, "02:%.2s:%.2s:%.2s:%.2s:%.2s", h, h + 2, h + 4, h + 6, h + 8);
}

static void addr_str(uint32_t a, char out[INET_ADDRSTRLEN])
{
	struct in_addr in = { .s_addr = htonl(a) };

	inet_ntop(AF_INET, &in, out, INET_ADDRSTRLEN);
}

void net_addrs(const struct sandbox *sb, char host[INET_ADDRSTRLEN], char guest[INET_ADDRSTRLEN])
{
	addr_str(sb->net_host, host);
	addr_str(sb->net_host + 1, guest);
}

int net_egress_rules(const struct srv *s, const struct sandbox *sb, char rules[][32], size_t cap)
{
	size_t n = 0;

	/* the complement of the range, a CIDR per prefix bit: the address
	 * with that bit flipped, the bits after it cleared */
	for (unsigned i = 0; i < s->cfg.net_prefix && n < cap; i++) {
		uint32_t mask = ~0u << (31 - i);
		char a[INET_ADDRSTRLEN];

		addr_str((s->cfg.net_base ^ (1u << (31 - i))) & mask, a);
		snprintf(rules[n++], 32, "%s/%u", a, i + 1);
	}
	if (n + 2 > cap)
		return -E2BIG;
	char host[INET_ADDRSTRLEN], guest[INET_ADDRSTRLEN];
	net_addrs(sb, host, guest);
	snprintf(rules[n++], 32, "%s/32", host);
	snprintf(rules[n++], 32, "::/0");
	return (int)n;
}

/* val ("A.B.C.D[/P][:PORT[/PROTO]]", checked at its create) names
 * addresses of p's /30 only (P 30 or more): the same of c's into out. */
static bool moved_to_child(const char *val, uint32_t p_host, uint32_t c_host, char *out, size_t cap)
{
	char addr[INET_ADDRSTRLEN];
	size_t n = strcspn(val, "/:");
	const char *rest = val + n;
	struct in_addr a;
	uint32_t h;

	if (n >= sizeof(addr))
		return false;
	memcpy(addr, val, n);
	addr[n] = 0;
	if (inet_pton(AF_INET, addr, &a) != 1)
		return false; /* IPv6 */
	h = ntohl(a.s_addr);
	if ((h >> 2) != (p_host >> 2) || (*rest == '/' && strtoul(rest + 1, NULL, 10) < 30))
		return false;
	addr_str((c_host & ~3u) | (h & 3u), addr);
	return (size_t)snprintf(out, cap, "%s%s", addr, rest) < cap;
}

int net_inherit_args(struct sandbox *c, const struct sandbox *p)
{
	char v[96];

	for (unsigned i = 0; i < p->nnet_args; i++) {
		const char *flag = p->net_args[i], *val = NULL;

		if (i + 1 < p->nnet_args && strncmp(p->net_args[i + 1], "--", 2))
			val = p->net_args[++i];
		if (val && moved_to_child(val, p->net_host, c->net_host, v, sizeof(v)))
			val = v;
		if (sb_net_arg_add(c, flag, val))
			return -ENOMEM;
	}
	return 0;
}

/* Whether a and b (host order) are in one /30. */
static bool same_30(uint32_t a, uint32_t b)
{
	return (a >> 2) == (b >> 2);
}

/* Interface address i's IPv4 address (host order) into *a, if it has one. */
static bool ifa_ipv4(const struct ifaddrs *i, uint32_t *a)
{
	if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
		return false;
	*a = ntohl(((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
	return true;
}

/* Whether one of the host's addresses (n of them) is in the /30 of host
 * (host order): a TAP a crashed daemon left, another daemon's range. */
static bool on_host(const uint32_t *addrs, int n, uint32_t host)
{
	for (int i = 0; i < n; i++)
		if (same_30(addrs[i], host))
			return true;
	return false;
}

int net_host_addrs(uint32_t *out, size_t cap)
{
	struct ifaddrs *ifs;
	size_t n = 0;

	if (getifaddrs(&ifs) < 0)
		return -errno;
	for (const struct ifaddrs *i = ifs; i && n < cap; i = i->ifa_next)
		n += ifa_ipv4(i, &out[n]);
	freeifaddrs(ifs);
	return (int)n;
}

void net_host_addrs_ask(struct srv *s, struct host_addrs *h)
{
	h->n = priv_addrs(s, h->a, PRIV_MAX_ADDRS);
}

/* The free /30s of the range, lowest first: sb (NULL: none) gets the
 * first and the count is 1, else (sb NULL) all are counted. */
static unsigned free_slots_locked(struct srv *s, struct sandbox *sb, const struct host_addrs *h)
{
	unsigned nslots = 1u << (30 - s->cfg.net_prefix), nfree = 0;

	for (unsigned n = 0; n < nslots && !(sb && nfree); n++) {
		uint32_t host = s->cfg.net_base + 4 * n + 1;
		bool used = on_host(h->a, h->n, host);

		/* by address, not by slot: a sandbox re-adopted from a
		 * daemon with another range keeps what it has */
		for (struct sandbox *o = s->sandboxes; o && !used; o = o->next)
			used = o != sb && o->net_claimed && (o->net_host >> 2) == (host >> 2);
		if (!used && sb) {
			sb->net_host = host;
			sb->net_claimed = true;
		}
		nfree += !used;
	}
	return nfree;
}

int net_claim_locked(struct srv *s, struct sandbox *sb, const struct host_addrs *h)
{
	return free_slots_locked(s, sb, h) ? 0 : -ENOSPC;
}

unsigned net_free_locked(struct srv *s, const struct host_addrs *h)
{
	return free_slots_locked(s, NULL, h);
}

/* A TUNSETIFF on name (which makes it if absent): the fd, or -errno. */
static int tap_attach(const char *name)
{
	struct ifreq ifr = { .ifr_flags = TAP_FLAGS };
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	if (ioctl(fd, TUNSETIFF, &ifr) < 0) {
		int err = errno;
		close(fd);
		return -err;
	}
	return fd;
}

static int set_addr(int sock, const char *name, unsigned long req, uint32_t a)
{
	struct ifreq ifr = { 0 };
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;

	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	sin->sin_family = AF_INET;
	sin->sin_addr.s_addr = htonl(a);
	return ioctl(sock, req, &ifr);
}

/* One of the TAP's sysctls (fmt names its file, with %s for the TAP).
 * absent_ok: a missing file is no error (IPv6 not in the kernel). */
static int tap_sysctl(const char *fmt, const char *name, bool absent_ok)
{
	char path[96];
	int fd, r = 0;

	snprintf(path, sizeof(path), fmt, name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return absent_ok && errno == ENOENT ? 0 : -errno;
	if (write(fd, "1\n", 2) != 2)
		r = -errno;
	close(fd);
	return r;
}

/* The host takes only what the guest sends from its own address:
 *  - IPv4: strict reverse-path filtering, so a source not routed back
 *    through this TAP (another sandbox's, anyone's) is dropped and no
 *    host service or forwarded peer is fooled by a spoofed source;
 *  - IPv6: off on the TAP (Linux has no rp_filter for it, and a sandbox
 *    is given no IPv6 address): a forwarding host would otherwise pass on
 *    IPv6 packets with any source the guest wrote. */
static int pin_sources(const char *name, const char **what)
{
	int r;

	*what = "rp_filter";
	if ((r = tap_sysctl("/proc/sys/net/ipv4/conf/%s/rp_filter", name, false)) < 0)
		return r;
	*what = "disable_ipv6";
	return tap_sysctl("/proc/sys/net/ipv6/conf/%s/disable_ipv6", name, true);
}

int net_tap_up(const char *name, uint32_t host, char *err, size_t cap)
{
	const char *what = "/dev/net/tun";
	int fd, sock = -1, r = 0;
	struct ifaddrs *ifs;

	/* Its /30 on another interface (another sandbox's TAP, the host's):
	 * the daemon claims none such, so a request for one is refused. */
	if (getifaddrs(&ifs) == 0) {
		uint32_t a;

		for (const struct ifaddrs *i = ifs; i && !r; i = i->ifa_next)
			if (ifa_ipv4(i, &a) && strcmp(i->ifa_name, name) && same_30(a, host)) {
				snprintf(err, cap, "network: TAP %s: its /30 is on %s already", name, i->ifa_name);
				r = -EADDRINUSE;
			}
		freeifaddrs(ifs);
		if (r)
			return r;
	}

	fd = tap_attach(name);
	if (fd < 0) {
		snprintf(err, cap, "network: TAP %s: %s", name, strerror(-fd));
		return fd;
	}
	if (ioctl(fd, TUNSETPERSIST, 1L) < 0) {
		what = "TUNSETPERSIST";
		r = -errno;
	} else if ((sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
		what = "socket";
		r = -errno;
	} else {
		struct ifreq ifr = { 0 };

		snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
		if (set_addr(sock, name, SIOCSIFADDR, host) < 0)
			what = "its address", r = -errno;
		else if (set_addr(sock, name, SIOCSIFNETMASK, ~3u) < 0)
			what = "its netmask", r = -errno;
		else if (ioctl(sock, SIOCGIFFLAGS, &ifr) < 0)
			what = "its flags", r = -errno;
		else if ((ifr.ifr_flags |= IFF_UP), ioctl(sock, SIOCSIFFLAGS, &ifr) < 0)
			what = "up", r = -errno;
		else
			r = pin_sources(name, &what);
	}
	if (sock >= 0)
		close(sock);
	if (r < 0) {
		ioctl(fd, TUNSETPERSIST, 0L); /* gone at the close */
		snprintf(err, cap, "network: TAP %s: %s: %s", name, what, strerror(-r));
	}
	close(fd);
	return r;
}

int net_setup(struct srv *s, struct sandbox *sb, char *err, size_t cap)
{
	char name[IFNAMSIZ];

	net_tap_name(sb, name);
	return priv_tap_up(s, name, sb->net_host, err, cap);
}

int net_remove_tap(struct srv *s, const char *id)
{
	char name[IFNAMSIZ];

	snprintf(name, sizeof(name), "tvs%.8s", id + 4);
	return priv_tap_down(s, name);
}

int net_tap_down(const char *name)
{
	int fd, r = 0;

	/* Absent already: a TUNSETIFF would make it. */
	if (if_nametoindex(name) == 0)
		return 0;
	fd = tap_attach(name);
	if (fd < 0)
		return fd;
	if (ioctl(fd, TUNSETPERSIST, 0L) < 0)
		r = -errno;
	close(fd);
	return r;
}

void net_release(struct srv *s, struct sandbox *sb)
{
	int r;

	/* Paused: its snapshot's guest has the address, the resume the TAP. */
	if (!sb->net_enabled || (sb->paused && sb->state != SB_ENDED))
		return;
	r = net_remove_tap(s, sb->id);
	if (!r) {
		sb->net_claimed = false;
	} else if (!sb->net_warned) { /* the supervisor tries again */
		char name[IFNAMSIZ];

		net_tap_name(sb, name);
		fprintf(stderr, "tinyvmm serve: sandbox %s: TAP %s not removed yet: %s\n", sb->id, name, strerror(-r));
		sb->net_warned = true;
	}
}
