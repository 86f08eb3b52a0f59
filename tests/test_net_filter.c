/* Egress filter: frame parser edge cases (every truncation, IPv4 options,
 * fragments, IPv6 extension chains, VLAN, ARP, ND), rule matching and the
 * rule parser's messages. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "devices/net/net_filter.h"
#include "tests/test_net_frames.h"
#include "tests/unit.h"

static uint8_t b[TF_MAX];

/* An allow-list that allows every IP destination. */
static void open_policy(struct net_policy *p)
{
	net_policy_init(p);
	ck_assert_int_eq(net_policy_add_rule(p, "0.0.0.0/0", NULL), 0);
	ck_assert_int_eq(net_policy_add_rule(p, "::/0", NULL), 0);
}

/* Filter with the inspected bytes in a buffer of exactly cap bytes, so
 * ASan catches any read past them. */
static enum net_verdict filt(const struct net_policy *p, size_t cap, size_t len)
{
	uint8_t *copy = malloc(cap ? cap : 1);
	enum net_verdict v;

	memcpy(copy, b, cap);
	v = net_filter(p, copy, cap, len);
	free(copy);
	return v;
}

static enum net_verdict parse(size_t len, struct net_flow *fl)
{
	uint8_t *copy = malloc(len ? len : 1);
	enum net_verdict v;

	memcpy(copy, b, len);
	v = net_frame_parse(copy, len, len, fl);
	free(copy);
	return v;
}

/* The frame in b (len bytes, headers in the first hdr_end) passes only
 * when all headers are inspected, and every shorter frame is dropped. */
static void check_truncations(size_t len, size_t hdr_end)
{
	struct net_policy p;

	open_policy(&p);
	ck_assert_int_eq(filt(&p, len, len), NET_PASS);
	for (size_t cap = 0; cap <= len; cap++) {
		enum net_verdict v = filt(&p, cap, len);

		if (cap >= hdr_end)
			ck_assert_int_eq(v, NET_PASS);
		else
			ck_assert_int_eq(v, NET_DROP_MALFORMED);
	}
	for (size_t n = 0; n < len; n++) {
		enum net_verdict v = filt(&p, n, n);

		ck_assert_int_eq(v, n < NET_ETH_HLEN ? NET_DROP_RUNT : NET_DROP_MALFORMED);
	}
}

START_TEST(truncated_udp4)
{
	size_t n = tf_udp4(b, "1.2.3.4", 53, 10);
	check_truncations(n, n - 10);
}
END_TEST

START_TEST(truncated_tcp4)
{
	size_t n = tf_tcp4(b, "1.2.3.4", 443);
	check_truncations(n, n);
}
END_TEST

START_TEST(truncated_udp6)
{
	size_t n = tf_udp6(b, "2001:db8::1", 53);
	check_truncations(n, n);
}
END_TEST

START_TEST(truncated_tcp6)
{
	size_t n = tf_tcp6(b, "2001:db8::1", 443);
	check_truncations(n, n);
}
END_TEST

START_TEST(truncated_nd_arp_vlan)
{
	size_t n = tf_icmp6(b, "ff02::1:ff00:1", 135);
	check_truncations(n, n - 20);
	n = tf_arp(b);
	check_truncations(n, n);
	n = tf_udp(b, tf_ip4(b, tf_eth(b, ETH_P_IP, true), IPPROTO_UDP, "1.2.3.4", 5, 8, 0), 53, 8);
	check_truncations(n, n);
}
END_TEST

START_TEST(truncated_ext_chain)
{
	size_t off = tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), IPPROTO_HOPOPTS, "2001:db8::1", 8 + 16 + 8 + 12 + 20);

	off = tf_ext6(b, off, IPPROTO_HOPOPTS, IPPROTO_ROUTING, 8, 0);
	off = tf_ext6(b, off, IPPROTO_ROUTING, IPPROTO_DSTOPTS, 16, 0);
	off = tf_ext6(b, off, IPPROTO_DSTOPTS, IPPROTO_AH, 8, 0);
	off = tf_ext6(b, off, IPPROTO_AH, IPPROTO_TCP, 12, 0);
	off = tf_tcp(b, off, 443, 5);
	check_truncations(off, off);
}
END_TEST

START_TEST(ipv4_options)
{
	struct net_flow fl;

	for (unsigned ihl = 5; ihl <= 15; ihl++) {
		size_t n = tf_tcp(b, tf_ip4(b, 14, IPPROTO_TCP, "1.2.3.4", ihl, 20, 0), 8080, 5);

		tf_eth(b, ETH_P_IP, false);
		ck_assert_int_eq(parse(n, &fl), NET_PASS);
		ck_assert(fl.has_l4);
		ck_assert_uint_eq(fl.dport, 8080);
		ck_assert_uint_eq(fl.family, 4);
		check_truncations(n, n);
	}
}
END_TEST

START_TEST(ipv4_bad_headers)
{
	struct net_flow fl;
	size_t n = tf_tcp4(b, "1.2.3.4", 80);

	for (unsigned ihl = 0; ihl < 5; ihl++) {
		b[14] = (uint8_t)(0x40 | ihl);
		ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	}
	n = tf_tcp4(b, "1.2.3.4", 80);
	b[14] = 0x65; /* version 6 in an IPv4 ethertype */
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	n = tf_tcp4(b, "1.2.3.4", 80);
	tf_be16(b + 16, (uint16_t)(n - 14 + 1)); /* total length past the frame */
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	tf_be16(b + 16, 19); /* shorter than the header */
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	n = tf_tcp4(b, "1.2.3.4", 80);
	b[14 + 20 + 12] = 4 << 4; /* TCP data offset 4 */
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	b[14 + 20 + 12] = 6 << 4; /* data offset past the datagram */
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	n = tf_udp4(b, "1.2.3.4", 53, 0);
	tf_be16(b + 14 + 20 + 4, 7); /* UDP length under 8 */
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	tf_be16(b + 14 + 20 + 4, 9); /* UDP length past the datagram */
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
}
END_TEST

START_TEST(ipv4_padding)
{
	struct net_policy p;
	size_t n = tf_udp4(b, "1.2.3.4", 53, 0);

	open_policy(&p);
	memset(b + n, 0, 60 - n); /* Ethernet minimum frame: padding after the datagram */
	ck_assert_int_eq(filt(&p, 60, 60), NET_PASS);
}
END_TEST

START_TEST(fragments)
{
	struct net_policy p, all;
	struct net_flow fl;
	size_t n, off;

	open_policy(&p);
	net_policy_init(&all);
	/* IPv4 first fragment (MF), then a later one (offset 185 * 8). */
	n = tf_udp(b, tf_ip4(b, tf_eth(b, ETH_P_IP, false), IPPROTO_UDP, "1.2.3.4", 5, 8, 0x2000), 53, 8);
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_FRAGMENT);
	ck_assert_int_eq(filt(&all, n, n), NET_PASS);
	n = tf_ip4(b, tf_eth(b, ETH_P_IP, false), IPPROTO_UDP, "1.2.3.4", 5, 3, 185);
	ck_assert_int_eq(parse(n + 3, &fl), NET_PASS);
	ck_assert(fl.fragment && !fl.has_l4);
	ck_assert_int_eq(filt(&p, n + 3, n + 3), NET_DROP_FRAGMENT);
	ck_assert_int_eq(filt(&all, n + 3, n + 3), NET_PASS);
	/* IPv6: first fragment (offset 0, M) and a later one. */
	off = tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), IPPROTO_FRAGMENT, "2001:db8::1", 16);
	b[tf_ext6(b, off, IPPROTO_FRAGMENT, IPPROTO_UDP, 8, 0) - 5] |= 1;
	tf_udp(b, off + 8, 53, 8);
	ck_assert_int_eq(parse(off + 16, &fl), NET_PASS);
	ck_assert(fl.fragment && fl.has_l4);
	ck_assert_int_eq(filt(&p, off + 16, off + 16), NET_DROP_FRAGMENT);
	tf_ext6(b, off, IPPROTO_FRAGMENT, IPPROTO_UDP, 8, 100);
	ck_assert_int_eq(parse(off + 16, &fl), NET_PASS);
	ck_assert(fl.fragment && !fl.has_l4);
	ck_assert_uint_eq(fl.proto, IPPROTO_UDP);
	ck_assert_int_eq(filt(&p, off + 16, off + 16), NET_DROP_FRAGMENT);
	ck_assert_int_eq(filt(&all, off + 16, off + 16), NET_PASS);
}
END_TEST

/* A chain of k destination-options headers, then TCP. */
static size_t ext_chain(unsigned k)
{
	size_t off =
		tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), k ? IPPROTO_DSTOPTS : IPPROTO_TCP, "2001:db8::1", 8 * k + 20);

	for (unsigned i = 0; i < k; i++)
		off = tf_ext6(b, off, IPPROTO_DSTOPTS, i + 1 < k ? IPPROTO_DSTOPTS : IPPROTO_TCP, 8, 0);
	return tf_tcp(b, off, 22, 5);
}

START_TEST(ipv6_ext_headers)
{
	struct net_flow fl;
	size_t n, off;

	for (unsigned k = 0; k <= NET_MAX_EXT_HDRS; k++) {
		n = ext_chain(k);
		ck_assert_int_eq(parse(n, &fl), NET_PASS);
		ck_assert_uint_eq(fl.proto, IPPROTO_TCP);
		ck_assert_uint_eq(fl.dport, 22);
	}
	n = ext_chain(NET_MAX_EXT_HDRS + 1);
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	/* A header whose length runs past the payload. */
	n = ext_chain(2);
	b[14 + 40 + 8 + 1] = 3;
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	/* Extension headers we cannot skip. */
	n = ext_chain(1);
	b[14 + 6] = 135;
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	/* Payload length 0 (jumbogram) and past the frame, wrong version. */
	n = ext_chain(0);
	tf_be16(b + 14 + 4, 0);
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	tf_be16(b + 14 + 4, 21);
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	n = ext_chain(0);
	b[14] = 0x40;
	ck_assert_int_eq(parse(n, &fl), NET_DROP_MALFORMED);
	/* Other upper-layer protocols pass the parser with no port. */
	off = tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), IPPROTO_SCTP, "2001:db8::1", 12);
	ck_assert_int_eq(parse(off + 12, &fl), NET_PASS);
	ck_assert_uint_eq(fl.proto, IPPROTO_SCTP);
	ck_assert_uint_eq(fl.dport, 0);
}
END_TEST

START_TEST(vlan_and_other_ethertypes)
{
	struct net_policy p, all;
	struct net_flow fl;
	size_t n;

	net_policy_init(&p);
	ck_assert_int_eq(net_policy_add_rule(&p, "1.2.3.4:53/udp", NULL), 0);
	net_policy_init(&all);
	n = tf_udp(b, tf_ip4(b, tf_eth(b, ETH_P_IP, true), IPPROTO_UDP, "1.2.3.4", 5, 8, 0), 53, 8);
	ck_assert_int_eq(parse(n, &fl), NET_PASS);
	ck_assert_uint_eq(fl.ethertype, ETH_P_IP);
	ck_assert_int_eq(filt(&p, n, n), NET_PASS);
	tf_be16(b + 16, ETH_P_8021Q); /* QinQ: inner tag not parsed */
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_POLICY);
	n = tf_eth(b, 0x88cc, false) + 30; /* LLDP */
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_POLICY);
	ck_assert_int_eq(filt(&all, n, n), NET_PASS);
	ck_assert_int_eq(filt(&all, 5, 5), NET_PASS); /* allow all: not even parsed */
}
END_TEST

START_TEST(arp_and_nd_always)
{
	struct net_policy p;
	size_t n;

	net_policy_init(&p);
	net_policy_deny_all(&p);
	n = tf_arp(b);
	ck_assert_int_eq(filt(&p, n, n), NET_PASS);
	b[14 + 8] ^= 1; /* sender hardware address not the frame's source */
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_SPOOF);
	n = tf_arp(b);
	b[14 + 5] = 16; /* protocol address length */
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_MALFORMED);
	for (unsigned t = 128; t < 145; t++) {
		n = tf_icmp6(b, "ff02::2", (uint8_t)t);
		ck_assert_int_eq(filt(&p, n, n), t >= 133 && t <= 137 ? NET_PASS : NET_DROP_POLICY);
		n = tf_icmp6(b, "fe80::1", (uint8_t)t);
		ck_assert_int_eq(filt(&p, n, n), t >= 133 && t <= 137 ? NET_PASS : NET_DROP_POLICY);
		n = tf_icmp6(b, "febf::1", (uint8_t)t);
		ck_assert_int_eq(filt(&p, n, n), t >= 133 && t <= 137 ? NET_PASS : NET_DROP_POLICY);
	}
	/* ND only as the link sees it: routable destinations, or a hop limit
	 * other than 255, would take it past the allow-list. */
	n = tf_icmp6(b, "2001:db8::1", 135);
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_POLICY);
	n = tf_icmp6(b, "ff05::2", 133); /* site-local multicast */
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_POLICY);
	n = tf_icmp6(b, "fec0::1", 135); /* not fe80::/10 */
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_POLICY);
	n = tf_icmp6(b, "ff02::1:ff00:1", 135);
	b[14 + 7] = 254;
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_POLICY);
	n = tf_udp4(b, "1.2.3.4", 53, 0);
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_POLICY);
}
END_TEST

static struct net_flow flow(const char *dst, uint8_t proto, uint16_t port)
{
	struct net_flow fl = { .proto = proto, .has_l4 = true, .dport = port };

	if (inet_pton(AF_INET, dst, fl.dst) == 1) {
		fl.family = 4;
	} else {
		ck_assert_int_eq(inet_pton(AF_INET6, dst, fl.dst), 1);
		fl.family = 6;
	}
	return fl;
}

static bool match(const char *rule, const char *dst, uint8_t proto, uint16_t port)
{
	struct net_rule r;
	struct net_flow fl = flow(dst, proto, port);

	ck_assert_int_eq(net_rule_parse(rule, &r, NULL), 0);
	return net_rule_match(&r, &fl);
}

START_TEST(rule_cidr)
{
	ck_assert(match("10.0.0.0/8", "10.255.1.1", IPPROTO_TCP, 1));
	ck_assert(!match("10.0.0.0/8", "11.0.0.1", IPPROTO_TCP, 1));
	ck_assert(match("172.16.0.0/12", "172.31.255.255", IPPROTO_UDP, 1));
	ck_assert(!match("172.16.0.0/12", "172.32.0.0", IPPROTO_UDP, 1));
	ck_assert(match("0.0.0.0/0", "255.255.255.255", IPPROTO_ICMP, 0));
	ck_assert(!match("0.0.0.0/0", "::1", IPPROTO_TCP, 1));
	ck_assert(match("1.2.3.4/32", "1.2.3.4", IPPROTO_TCP, 1));
	ck_assert(match("1.2.3.4", "1.2.3.4", IPPROTO_TCP, 1));
	ck_assert(!match("1.2.3.4", "1.2.3.5", IPPROTO_TCP, 1));
	ck_assert(match("::/0", "2001:db8::1", IPPROTO_TCP, 1));
	ck_assert(!match("::/0", "1.2.3.4", IPPROTO_TCP, 1));
	ck_assert(match("2001:db8::/32", "2001:db8:ffff::1", IPPROTO_TCP, 1));
	ck_assert(!match("2001:db8::/32", "2001:db9::1", IPPROTO_TCP, 1));
	ck_assert(match("2001:db8::1/128", "2001:db8::1", IPPROTO_TCP, 1));
	ck_assert(!match("2001:db8::1/128", "2001:db8::2", IPPROTO_TCP, 1));
	ck_assert(match("2001:db8::1", "2001:db8::1", IPPROTO_TCP, 1));
	ck_assert(match("2001:db8::/33", "2001:db8:7fff::", IPPROTO_TCP, 1));
	ck_assert(!match("2001:db8::/33", "2001:db8:8000::", IPPROTO_TCP, 1));
}
END_TEST

START_TEST(rule_ports)
{
	struct net_rule r;

	ck_assert(match("1.2.3.4:443/tcp", "1.2.3.4", IPPROTO_TCP, 443));
	ck_assert(!match("1.2.3.4:443/tcp", "1.2.3.4", IPPROTO_UDP, 443));
	ck_assert(!match("1.2.3.4:443/tcp", "1.2.3.4", IPPROTO_TCP, 80));
	ck_assert(!match("1.2.3.4:443/tcp", "1.2.3.5", IPPROTO_TCP, 443));
	ck_assert(match("1.2.3.4:53", "1.2.3.4", IPPROTO_UDP, 53));
	ck_assert(match("1.2.3.4:53", "1.2.3.4", IPPROTO_TCP, 53));
	ck_assert(!match("1.2.3.4:53", "1.2.3.4", IPPROTO_ICMP, 0));
	ck_assert(!match("1.2.3.4:53", "1.2.3.4", IPPROTO_SCTP, 53));
	ck_assert(match("1.2.3.4", "1.2.3.4", IPPROTO_ICMP, 0));
	ck_assert(match("[2001:db8::/32]:443/udp", "2001:db8::5", IPPROTO_UDP, 443));
	ck_assert(!match("[2001:db8::/32]:443/udp", "2001:db8::5", IPPROTO_TCP, 443));
	ck_assert(match("[::1]", "::1", IPPROTO_ICMPV6, 0));
	ck_assert(match("10.0.0.0/8:65535", "10.1.1.1", IPPROTO_TCP, 65535));
	/* A port rule needs the L4 header (a non-first fragment has none). */
	{
		struct net_flow fl = flow("1.2.3.4", IPPROTO_TCP, 443);

		fl.has_l4 = false;
		ck_assert_int_eq(net_rule_parse("1.2.3.4:443", &r, NULL), 0);
		ck_assert(!net_rule_match(&r, &fl));
	}
}
END_TEST

START_TEST(dns_only)
{
	struct net_policy p;
	struct tvm_err e = { 0 };
	size_t n;

	net_policy_init(&p);
	ck_assert_int_eq(net_policy_add_dns(&p, "10.0.2.3", &e), 0);
	ck_assert_int_eq(net_policy_add_dns(&p, "2001:db8::53", &e), 0);
	ck_assert(p.restricted);
	n = tf_udp4(b, "10.0.2.3", 53, 20);
	ck_assert_int_eq(filt(&p, n, n), NET_PASS);
	n = tf_tcp4(b, "10.0.2.3", 53);
	ck_assert_int_eq(filt(&p, n, n), NET_PASS);
	n = tf_udp6(b, "2001:db8::53", 53);
	ck_assert_int_eq(filt(&p, n, n), NET_PASS);
	n = tf_udp4(b, "10.0.2.4", 53, 20);
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_POLICY);
	n = tf_tcp4(b, "10.0.2.3", 80);
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_POLICY);
	n = tf_tcp6(b, "2001:db8::53", 443);
	ck_assert_int_eq(filt(&p, n, n), NET_DROP_POLICY);
	ck_assert_int_eq(net_policy_add_dns(&p, "10.0.0.0/8", &e), -EINVAL);
	ck_assert_str_eq(e.msg, "net-dns 10.0.0.0/8: expected a plain IPv4 or IPv6 address");
	ck_assert_int_eq(net_policy_add_dns(&p, "resolver", &e), -EINVAL);
	ck_assert_str_eq(e.msg, "net-dns resolver: \"resolver\" is not an IPv4 or IPv6 address");
}
END_TEST

static void parse_err(const char *s, const char *msg)
{
	struct net_rule r;
	struct tvm_err e = { 0 };

	ck_assert_int_eq(net_rule_parse(s, &r, &e), -EINVAL);
	ck_assert_int_eq(e.code, EINVAL);
	ck_assert_str_eq(e.msg, msg);
}

START_TEST(rule_parse_errors)
{
	parse_err("10.0.0.0/33", "net-allow 10.0.0.0/33: prefix length over 32");
	parse_err("::/129", "net-allow ::/129: prefix length over 128");
	parse_err("10.0.0.0/", "net-allow 10.0.0.0/: prefix length is not a number");
	parse_err("10.0.0.0/-1", "net-allow 10.0.0.0/-1: prefix length is not a number");
	parse_err("10.0.0.0/ 8", "net-allow 10.0.0.0/ 8: prefix length is not a number");
	parse_err("10.0.0.1/8", "net-allow 10.0.0.1/8: address has bits set past the /8 prefix");
	parse_err("2001:db8::/32:443",
		  "net-allow 2001:db8::/32:443: prefix length is not a number (put an IPv6 CIDR with a port in "
		  "brackets: [2001:db8::/32]:443)");
	parse_err("", "net-allow: empty rule");
	parse_err("10.0.0.256", "net-allow 10.0.0.256: \"10.0.0.256\" is not an IPv4 or IPv6 address");
	parse_err("example.com:443", "net-allow example.com:443: \"example.com\" is not an IPv4 or IPv6 address");
	parse_err(":443", "net-allow :443: expected an IPv4 or IPv6 address");
	parse_err("1.2.3.4:0", "net-allow 1.2.3.4:0: port must be 1..65535");
	parse_err("1.2.3.4:65536", "net-allow 1.2.3.4:65536: port must be 1..65535");
	parse_err("1.2.3.4:", "net-allow 1.2.3.4:: port must be 1..65535");
	parse_err("1.2.3.4:80/sctp", "net-allow 1.2.3.4:80/sctp: protocol must be tcp or udp");
	parse_err("1.2.3.4:80/tcpx", "net-allow 1.2.3.4:80/tcpx: protocol must be tcp or udp");
	parse_err("1.2.3.4:80/", "net-allow 1.2.3.4:80/: protocol must be tcp or udp");
	parse_err("[2001:db8::1", "net-allow [2001:db8::1: missing ']'");
	parse_err("[1.2.3.4]:80", "net-allow [1.2.3.4]:80: brackets are for IPv6 addresses");
	parse_err("[::1]80", "net-allow [::1]80: expected \":PORT\" after the address");
}
END_TEST

START_TEST(rule_limits)
{
	struct net_policy p;
	struct tvm_err e = { 0 };
	char s[32];

	net_policy_init(&p);
	for (unsigned i = 0; i < NET_MAX_RULES; i++) {
		snprintf(s, sizeof(s), "10.0.%u.0/24", i);
		ck_assert_int_eq(net_policy_add_rule(&p, s, &e), 0);
	}
	ck_assert_int_eq(net_policy_add_rule(&p, "1.2.3.4", &e), -ENOSPC);
	ck_assert_str_eq(e.msg, "net-allow 1.2.3.4: more than 64 rules");
	ck_assert_int_eq(net_policy_add_dns(&p, "1.2.3.4", &e), -ENOSPC);
	ck_assert_uint_eq(p.nr, NET_MAX_RULES);
	ck_assert_str_eq(net_verdict_name(NET_DROP_POLICY), "policy");
	ck_assert_str_eq(net_verdict_name(NET_VERDICT_NR), "unknown");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net_filter");
	TCase *tc = tcase_create("net_filter");

	tcase_add_test(tc, truncated_udp4);
	tcase_add_test(tc, truncated_tcp4);
	tcase_add_test(tc, truncated_udp6);
	tcase_add_test(tc, truncated_tcp6);
	tcase_add_test(tc, truncated_nd_arp_vlan);
	tcase_add_test(tc, truncated_ext_chain);
	tcase_add_test(tc, ipv4_options);
	tcase_add_test(tc, ipv4_bad_headers);
	tcase_add_test(tc, ipv4_padding);
	tcase_add_test(tc, fragments);
	tcase_add_test(tc, ipv6_ext_headers);
	tcase_add_test(tc, vlan_and_other_ethertypes);
	tcase_add_test(tc, arp_and_nd_always);
	tcase_add_test(tc, rule_cidr);
	tcase_add_test(tc, rule_ports);
	tcase_add_test(tc, dns_only);
	tcase_add_test(tc, rule_parse_errors);
	tcase_add_test(tc, rule_limits);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
