/* Rule strings for the egress policy (syntax in net_filter.h). */
#include "devices/net/net_filter.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <netinet/in.h>

#define RULE_MAX 128 /* longest rule string looked at */

/* Decimal number of 1..max digits-only characters in s[0..n), into *v.
 * Returns false for anything else (sign, spaces, empty, too big). */
static bool parse_num(const char *s, size_t n, unsigned max, unsigned *v)
{
	unsigned x = 0;

	if (n == 0 || n > 5)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		x = x * 10 + (unsigned)(s[i] - '0');
	}
	if (x > max)
		return false;
	*v = x;
	return true;
}

/* "ADDR[/LEN]" in s[0..n) into r (family, addr, prefix). what names the
 * option for messages. */
static int parse_cidr(const char *what, const char *orig, const char *s, size_t n, struct net_rule *r,
		      struct tvm_err *e)
{
	char addr[INET6_ADDRSTRLEN + 1];
	const char *slash = memchr(s, '/', n);
	size_t alen = slash ? (size_t)(slash - s) : n;
	unsigned max, len;

	if (alen == 0 || alen >= sizeof(addr))
		return tvm_errf(e, EINVAL, "%s %s: expected an IPv4 or IPv6 address", what, orig);
	memcpy(addr, s, alen);
	addr[alen] = 0;
	if (inet_pton(AF_INET, addr, r->addr) == 1)
		r->family = 4;
	else if (inet_pton(AF_INET6, addr, r->addr) == 1)
		r->family = 6;
	else
		return tvm_errf(e, EINVAL, "%s %s: \"%s\" is not an IPv4 or IPv6 address", what, orig, addr);
	max = r->family == 4 ? 32 : 128;
	len = max;
	if (slash) {
		const char *d = slash + 1;
		size_t dn = n - alen - 1;

		if (!parse_num(d, dn, 999, &len))
			return tvm_errf(e, EINVAL, "%s %s: prefix length is not a number%s", what, orig,
					r->family == 6 && memchr(d, ':', dn)
						? " (put an IPv6 CIDR with a port in brackets: [2001:db8::/32]:443)"
						: "");
		if (len > max)
			return tvm_errf(e, EINVAL, "%s %s: prefix length over %u", what, orig, max);
	}
	r->prefix = (uint8_t)len;
	for (unsigned bit = len; bit < max; bit++)
		if (r->addr[bit / 8] & (0x80 >> (bit % 8)))
			return tvm_errf(e, EINVAL, "%s %s: address has bits set past the /%u prefix", what, orig, len);
	return 0;
}

/* ":PORT[/tcp|udp]" in s[0..n) (n may be 0: no port). */
static int parse_port(const char *orig, const char *s, size_t n, struct net_rule *r, struct tvm_err *e)
{
	const char *slash;
	size_t pn;
	unsigned port;

	if (n == 0)
		return 0;
	if (s[0] != ':')
		return tvm_errf(e, EINVAL, "net-allow %s: expected \":PORT\" after the address", orig);
	s++, n--;
	slash = memchr(s, '/', n);
	pn = slash ? (size_t)(slash - s) : n;
	if (!parse_num(s, pn, 65535, &port) || port == 0)
		return tvm_errf(e, EINVAL, "net-allow %s: port must be 1..65535", orig);
	r->port = (uint16_t)port;
	if (!slash)
		return 0;
	if (n - pn - 1 == 3 && !memcmp(slash + 1, "tcp", 3))
		r->proto = IPPROTO_TCP;
	else if (n - pn - 1 == 3 && !memcmp(slash + 1, "udp", 3))
		r->proto = IPPROTO_UDP;
	else
		return tvm_errf(e, EINVAL, "net-allow %s: protocol must be tcp or udp", orig);
	return 0;
}

int net_rule_parse(const char *s, struct net_rule *r, struct tvm_err *e)
{
	size_t n = strnlen(s, RULE_MAX + 1);
	const char *colon;
	size_t alen;
	int ret;

	memset(r, 0, sizeof(*r));
	if (n == 0)
		return tvm_errf(e, EINVAL, "net-allow: empty rule");
	if (n > RULE_MAX)
		return tvm_errf(e, EINVAL, "net-allow %.32s...: longer than %d characters", s, RULE_MAX);
	if (s[0] == '[') {
		const char *end = memchr(s, ']', n);

		if (!end)
			return tvm_errf(e, EINVAL, "net-allow %s: missing ']'", s);
		ret = parse_cidr("net-allow", s, s + 1, (size_t)(end - s - 1), r, e);
		if (!ret && r->family != 6)
			ret = tvm_errf(e, EINVAL, "net-allow %s: brackets are for IPv6 addresses", s);
		return ret ? ret : parse_port(s, end + 1, n - (size_t)(end + 1 - s), r, e);
	}
	/* Without brackets, one colon separates an IPv4 CIDR from the port;
	 * more make the whole string an IPv6 CIDR. */
	colon = memchr(s, ':', n);
	alen = colon && !memchr(colon + 1, ':', n - (size_t)(colon + 1 - s)) ? (size_t)(colon - s) : n;
	ret = parse_cidr("net-allow", s, s, alen, r, e);
	return ret ? ret : parse_port(s, s + alen, n - alen, r, e);
}

static int add(struct net_policy *p, const struct net_rule *r, const char *what, const char *s, struct tvm_err *e)
{
	if (p->nr >= NET_MAX_RULES)
		return tvm_errf(e, ENOSPC, "%s %s: more than %d rules", what, s, NET_MAX_RULES);
	p->r[p->nr++] = *r;
	p->restricted = true;
	return 0;
}

int net_policy_add_rule(struct net_policy *p, const char *s, struct tvm_err *e)
{
	struct net_rule r;
	int ret = net_rule_parse(s, &r, e);

	return ret ? ret : add(p, &r, "net-allow", s, e);
}

int net_policy_add_dns(struct net_policy *p, const char *addr, struct tvm_err *e)
{
	size_t n = strnlen(addr, RULE_MAX + 1);
	struct net_rule r = { 0 };
	int ret;

	if (n > RULE_MAX || memchr(addr, '/', n) || memchr(addr, '[', n))
		return tvm_errf(e, EINVAL, "net-dns %.64s: expected a plain IPv4 or IPv6 address", addr);
	ret = parse_cidr("net-dns", addr, addr, n, &r, e);
	if (ret)
		return ret;
	if (p->nr + 2 > NET_MAX_RULES)
		return tvm_errf(e, ENOSPC, "net-dns %s: more than %d rules", addr, NET_MAX_RULES);
	r.port = 53;
	r.proto = IPPROTO_UDP;
	add(p, &r, "net-dns", addr, e);
	r.proto = IPPROTO_TCP;
	return add(p, &r, "net-dns", addr, e);
}
