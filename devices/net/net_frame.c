#include "devices/net/net_frame.h"

#include <string.h>

#include <linux/if_ether.h>
#include <netinet/in.h>

/* A bounded view of the frame: [off, end) may be read, end <= cap. Every
 * read goes through need(), so no offset computed from frame bytes can
 * reach past the buffer. */
struct cur {
	const uint8_t *f;
	size_t cap;
};

/* Whether n bytes at off lie inside the inspected bytes (overflow-safe:
 * off and n are both bounded by the frame length, far below SIZE_MAX). */
static bool need(const struct cur *c, size_t off, size_t n)
{
	return off <= c->cap && n <= c->cap - off;
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* TCP (RFC 9293 3.1), UDP (RFC 768), ICMP (RFC 792), ICMPv6 (RFC 4443 2.1) header at off,
 * inside an L3 payload ending at end. Other protocols carry nothing the
 * filter uses. */
static enum net_verdict parse_l4(const struct cur *c, size_t off, size_t end, struct net_flow *fl)
{
	const uint8_t *p;
	size_t avail = end - off;

	switch (fl->proto) {
	case IPPROTO_TCP:
		if (avail < 20 || !need(c, off, 20))
			return NET_DROP_MALFORMED;
		p = c->f + off;
		if ((p[12] >> 4) < 5 || (size_t)(p[12] >> 4) * 4 > avail)
			return NET_DROP_MALFORMED;
		fl->sport = be16(p);
		fl->dport = be16(p + 2);
		fl->tcp_flags = p[13];
		fl->l4_hlen = (uint16_t)((p[12] >> 4) * 4);
		break;
	case IPPROTO_UDP:
		if (avail < 8 || !need(c, off, 8))
			return NET_DROP_MALFORMED;
		p = c->f + off;
		/* a first fragment's length is the whole datagram's */
		if (be16(p + 4) < 8 || (be16(p + 4) > avail && !fl->first_fragment))
			return NET_DROP_MALFORMED;
		fl->sport = be16(p);
		fl->dport = be16(p + 2);
		fl->l4_hlen = 8;
		break;
	case IPPROTO_ICMP:
	case IPPROTO_ICMPV6:
		if (avail < 4 || !need(c, off, 4))
			return NET_DROP_MALFORMED;
		*(fl->proto == IPPROTO_ICMP ? &fl->icmp_type : &fl->icmp6_type) = c->f[off];
		fl->l4_hlen = 4;
		break;
	default: break;
	}
	fl->has_l4 = true;
	fl->l4_off = (uint16_t)off; /* small: inside the inspected bytes, or one extension header past them */
	return NET_PASS;
}

/* A first IPv4 fragment's L4 header, as far as this fragment's part of the
 * datagram [off, end) holds what the ingress checks read: ports, TCP
 * flags, an ICMP type. Not when it does not (RFC 1858: a TCP header cut
 * before its flags shows none): l4_peeked stays false. Bytes it holds but
 * past the inspected ones are malformed, as any header's. */
static enum net_verdict peek_l4(const struct cur *c, size_t off, size_t end, struct net_flow *fl)
{
	size_t n = fl->proto == IPPROTO_TCP ? 14 : fl->proto == IPPROTO_UDP ? 4 : fl->proto == IPPROTO_ICMP ? 1 : 0;
	const uint8_t *p = c->f + off;

	if (!n || end < off || end - off < n)
		return NET_PASS;
	if (!need(c, off, n))
		return NET_DROP_MALFORMED;
	if (n >= 4) {
		fl->sport = be16(p);
		fl->dport = be16(p + 2);
	}
	fl->tcp_flags = n >= 14 ? p[13] : 0;
	fl->icmp_type = p[0];
	fl->l4_peeked = true;
	return NET_PASS;
}

/* RFC 791 3.1. l3 is the IPv4 header's offset, l3len the frame bytes from
 * there on (the datagram plus any Ethernet padding). */
static enum net_verdict parse_ipv4(const struct cur *c, size_t l3, size_t l3len, struct net_flow *fl)
{
	const uint8_t *p;
	size_t ihl, total;
	uint16_t frag;

	if (l3len < 20 || !need(c, l3, 20))
		return NET_DROP_MALFORMED;
	p = c->f + l3;
	ihl = (size_t)(p[0] & 0xf) * 4;
	total = be16(p + 2);
	if ((p[0] >> 4) != 4 || ihl < 20 || total < ihl || total > l3len)
		return NET_DROP_MALFORMED;
	fl->family = 4;
	fl->ttl = p[8];
	fl->proto = p[9];
	memcpy(fl->src, p + 12, 4);
	memcpy(fl->dst, p + 16, 4);
	frag = be16(p + 6);
	fl->fragment = (frag & 0x3fff) != 0; /* MF bit or a fragment offset */
	if (fl->fragment) {
		/* policy decides; a non-first one has no L4 header, a first
		 * one part of it (its lengths are the whole datagram's) */
		fl->first_fragment = !(frag & 0x1fff);
		fl->frag_id = be16(p + 4);
		fl->frag_proto = fl->proto;
		fl->l4_off = (uint16_t)(l3 + ihl);
		return fl->first_fragment ? peek_l4(c, l3 + ihl, l3 + total, fl) : NET_PASS;
	}
	return parse_l4(c, l3 + ihl, l3 + total, fl);
}

/* RFC 8200 4: walk the extension headers the filter knows how to skip. */
static enum net_verdict parse_ipv6(const struct cur *c, size_t l3, size_t l3len, struct net_flow *fl)
{
	const uint8_t *p;
	size_t off, end;
	uint8_t nh;

	if (l3len < 40 || !need(c, l3, 40))
		return NET_DROP_MALFORMED;
	p = c->f + l3;
	if ((p[0] >> 4) != 6 || be16(p + 4) == 0 || be16(p + 4) > l3len - 40)
		return NET_DROP_MALFORMED;
	fl->family = 6;
	fl->ttl = p[7];
	memcpy(fl->src, p + 8, 16);
	memcpy(fl->dst, p + 24, 16);
	nh = p[6];
	off = l3 + 40;
	end = off + be16(p + 4);
	for (int i = 0;; i++) {
		size_t hlen;

		switch (nh) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS:
		case IPPROTO_AH:
		case IPPROTO_FRAGMENT: break;
		case 135:
		case 139:
		case 140:
		case 253:
		case 254: /* mobility, HIP, shim6, experiments */ return NET_DROP_MALFORMED;
		default: fl->proto = nh; return parse_l4(c, off, end, fl);
		}
		if (i == NET_MAX_EXT_HDRS || end - off < 8 || !need(c, off, 8))
			return NET_DROP_MALFORMED;
		p = c->f + off;
		if (nh == IPPROTO_FRAGMENT && !(be16(p + 2) & 0xfff9)) {
			hlen = 8; /* RFC 6946: an atomic fragment (offset 0, no M) is a whole datagram */
		} else if (nh == IPPROTO_FRAGMENT) {
			hlen = 8;
			fl->fragment = true;
			fl->frag_id = (uint32_t)be16(p + 4) << 16 | be16(p + 6);
			fl->frag_proto = p[0];
			if (be16(p + 2) & 0xfff8) { /* non-first: no L4 header */
				fl->proto = p[0];
				fl->first_fragment = false; /* whatever a header before said */
				return NET_PASS;
			}
			fl->first_fragment = true; /* part of its L4 header, after any further extension headers */
		} else if (nh == IPPROTO_AH) {
			hlen = ((size_t)p[1] + 2) * 4; /* RFC 4302 2.2: 32-bit words minus 2 */
		} else {
			hlen = ((size_t)p[1] + 1) * 8; /* 8-octet units not counting the first */
		}
		if (hlen > end - off)
			return NET_DROP_MALFORMED;
		nh = p[0];
		off += hlen;
	}
}

/* RFC 826, Ethernet/IPv4 only. */
static enum net_verdict parse_arp(const struct cur *c, size_t l3, size_t l3len, struct net_flow *fl)
{
	const uint8_t *p;

	if (l3len < 28 || !need(c, l3, 28))
		return NET_DROP_MALFORMED;
	p = c->f + l3;
	if (be16(p) != 1 || be16(p + 2) != ETH_P_IP || p[4] != 6 || p[5] != 4)
		return NET_DROP_MALFORMED;
	fl->arp_sha_is_src = !memcmp(p + 8, c->f + 6, 6);
	return NET_PASS;
}

enum net_verdict net_frame_parse(const uint8_t *f, size_t cap, size_t len, struct net_flow *fl)
{
	struct cur c = { f, cap < len ? cap : len };
	struct net_flow out = { 0 };
	size_t l3 = NET_ETH_HLEN;
	enum net_verdict v;

	if (len < NET_ETH_HLEN)
		return NET_DROP_RUNT;
	if (!need(&c, 0, NET_ETH_HLEN))
		return NET_DROP_MALFORMED;
	out.ethertype = be16(f + 12);
	if (out.ethertype == ETH_P_8021Q) {
		if (len < l3 + NET_VLAN_HLEN || !need(&c, l3, NET_VLAN_HLEN))
			return NET_DROP_MALFORMED;
		out.ethertype = be16(f + 16);
		l3 += NET_VLAN_HLEN;
	}
	switch (out.ethertype) {
	case ETH_P_IP: v = parse_ipv4(&c, l3, len - l3, &out); break;
	case ETH_P_IPV6: v = parse_ipv6(&c, l3, len - l3, &out); break;
	case ETH_P_ARP: v = parse_arp(&c, l3, len - l3, &out); break;
	default: v = NET_PASS; break;
	}
	if (v == NET_PASS)
		*fl = out;
	return v;
}

const char *net_verdict_name(enum net_verdict v)
{
	static const char *const names[NET_VERDICT_NR] = {
		[NET_PASS] = "pass",
		[NET_DROP_RUNT] = "runt",
		[NET_DROP_OVERSIZE] = "oversized",
		[NET_DROP_VNET_HDR] = "bad_vnet_header",
		[NET_DROP_BAD_CHAIN] = "bad_chain",
		[NET_DROP_MALFORMED] = "malformed",
		[NET_DROP_FRAGMENT] = "fragment",
		[NET_DROP_POLICY] = "policy",
		[NET_DROP_SPOOF] = "spoofed_mac",
		[NET_DROP_BACKEND] = "backend",
		[NET_DROP_INGRESS] = "ingress",
	};

	return (unsigned)v < NET_VERDICT_NR ? names[v] : "unknown";
}
