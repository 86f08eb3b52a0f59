#include "devices/net/net_filter.h"

#include <string.h>

#include <netinet/in.h>

void net_policy_init(struct net_policy *p)
{
	memset(p, 0, sizeof(*p));
}

void net_policy_deny_all(struct net_policy *p)
{
	p->restricted = true;
}

/* The first prefix bits of a and b agree. */
static bool prefix_eq(const uint8_t *a, const uint8_t *b, unsigned prefix)
{
	unsigned whole = prefix / 8, rest = prefix % 8;

	if (memcmp(a, b, whole))
		return false;
	return !rest || ((a[whole] ^ b[whole]) & (uint8_t)(0xff << (8 - rest))) == 0;
}

bool net_rule_match(const struct net_rule *r, const struct net_flow *fl)
{
	if (r->family != fl->family || !prefix_eq(r->addr, fl->dst, r->prefix))
		return false;
	if (!r->port)
		return true;
	if (!fl->has_l4 || (fl->proto != IPPROTO_TCP && fl->proto != IPPROTO_UDP))
		return false;
	return fl->dport == r->port && (!r->proto || r->proto == fl->proto);
}

/* RFC 4861 4: router/neighbour solicitation and advertisement, redirect;
 * only as the link sees them (hop limit 255, RFC 4861 6.1/7.1) and only to
 * link-local unicast (fe80::/10) or link-local multicast (ff02::/16), so no
 * router forwards them: otherwise ICMPv6 133-137 would be a way past the
 * allow-list to any IPv6 host. */
static bool is_nd(const struct net_flow *fl)
{
	bool link_scope =
		(fl->dst[0] == 0xfe && (fl->dst[1] & 0xc0) == 0x80) || (fl->dst[0] == 0xff && fl->dst[1] == 0x02);

	return fl->family == 6 && fl->proto == IPPROTO_ICMPV6 && fl->has_l4 && fl->icmp6_type >= 133 &&
	       fl->icmp6_type <= 137 && fl->ttl == 255 && link_scope;
}

enum net_verdict net_filter(const struct net_policy *p, const uint8_t *f, size_t cap, size_t len)
{
	struct net_flow fl;
	enum net_verdict v;

	if (!p->restricted)
		return NET_PASS;
	v = net_frame_parse(f, cap, len, &fl);
	if (v != NET_PASS)
		return v;
	if (fl.ethertype == 0x0806) /* ETH_P_ARP, validated by the parser */
		return fl.arp_sha_is_src ? NET_PASS : NET_DROP_SPOOF;
	if (!fl.family)
		return NET_DROP_POLICY;
	if (fl.fragment)
		return NET_DROP_FRAGMENT;
	if (is_nd(&fl))
		return NET_PASS;
	for (unsigned i = 0; i < p->nr && i < NET_MAX_RULES; i++)
		if (net_rule_match(&p->r[i], &fl))
			return NET_PASS;
	return NET_DROP_POLICY;
}
