/* The virtio-net device's ingress in "replies only" mode
 * (devices/net/net_ingress.c): what of the TAP's may reach the guest. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "devices/net/net_ingress.h"
#include "tests/test_net_frames.h"
#include "tests/unit.h"

#define SEC 1000000000ull

static uint8_t b[TF_MAX];
static struct net_ingress in;

/* The frame in b, as the guest sent it, becomes the answer to it: its
 * addresses and ports swapped (IPv4 or IPv6, TCP or UDP at l4). */
static void answer(size_t l3, size_t l4, int family)
{
	uint8_t t[16];
	size_t a = family == 4 ? 4 : 16, src = family == 4 ? 12 : 8;

	memcpy(t, b + l3 + src, a);
	memcpy(b + l3 + src, b + l3 + src + a, a);
	memcpy(b + l3 + src + a, t, a);
	memcpy(t, b + l4, 2);
	memcpy(b + l4, b + l4 + 2, 2);
	memcpy(b + l4 + 2, t, 2);
}

static enum net_verdict check(size_t len, uint64_t now)
{
	return net_ingress_check(&in, b, len < NET_INSPECT_MAX ? len : NET_INSPECT_MAX, len, now);
}

/* What the guest sent, noted as the device does after its egress checks. */
static void sent(size_t len, uint64_t now)
{
	struct net_flow fl;

	ck_assert_int_eq(net_frame_parse(b, len, len, &fl), NET_PASS);
	net_ingress_note(&in, &fl, now);
}

static void setup(void)
{
	memset(&in, 0, sizeof(in));
	in.replies_only = true;
}

START_TEST(off_lets_everything_in)
{
	size_t n = tf_tcp4(b, "10.0.0.2", 22);

	in.replies_only = false;
	b[34 + 13] = 0x02; /* a SYN */
	ck_assert_int_eq(check(n, 1), NET_PASS);
	ck_assert_int_eq(check(3, 1), NET_PASS); /* unparsed: not even a runt */
}
END_TEST

START_TEST(no_connection_opens_in)
{
	size_t n = tf_tcp4(b, "10.0.0.2", 22), l4 = 14 + 20;

	b[l4 + 13] = 0x02; /* SYN */
	ck_assert_int_eq(check(n, 1), NET_DROP_INGRESS);
	b[l4 + 13] = 0x02 | 0x01; /* SYN FIN */
	ck_assert_int_eq(check(n, 1), NET_DROP_INGRESS);
	b[l4 + 13] = 0x12; /* SYN ACK: the answer to the guest's own SYN */
	ck_assert_int_eq(check(n, 1), NET_PASS);
	b[l4 + 13] = 0x10; /* ACK */
	ck_assert_int_eq(check(n, 1), NET_PASS);
	b[l4 + 13] = 0x04; /* RST */
	ck_assert_int_eq(check(n, 1), NET_PASS);
	n = tf_tcp6(b, "fd00::2", 22);
	b[14 + 40 + 13] = 0x02;
	ck_assert_int_eq(check(n, 1), NET_DROP_INGRESS);
	b[14 + 40 + 13] = 0x18;
	ck_assert_int_eq(check(n, 1), NET_PASS);
}
END_TEST

START_TEST(udp_only_from_where_the_guest_sent)
{
	size_t n = tf_udp4(b, "1.2.3.4", 53, 4), l4 = 14 + 20;

	sent(n, 10 * SEC); /* 10.0.0.2:40000 -> 1.2.3.4:53 */
	answer(14, l4, 4); /* 1.2.3.4:53 -> 10.0.0.2:40000 */
	ck_assert_int_eq(check(n, 11 * SEC), NET_PASS);
	tf_be16(b + l4, 54); /* another port of that host */
	ck_assert_int_eq(check(n, 11 * SEC), NET_DROP_INGRESS);
	tf_be16(b + l4, 53);
	tf_be16(b + l4 + 2, 40001); /* to another port of the guest */
	ck_assert_int_eq(check(n, 11 * SEC), NET_DROP_INGRESS);
	tf_be16(b + l4 + 2, 40000);
	b[14 + 15] = 5; /* from 1.2.3.5 */
	ck_assert_int_eq(check(n, 11 * SEC), NET_DROP_INGRESS);
	b[14 + 15] = 4;
	/* idle too long: gone, until the guest sends on it again */
	ck_assert_int_eq(check(n, 10 * SEC + NET_UDP_IDLE_NS), NET_PASS);
	ck_assert_int_eq(check(n, 11 * SEC + NET_UDP_IDLE_NS), NET_DROP_INGRESS);
	answer(14, l4, 4);
	sent(n, 12 * SEC + NET_UDP_IDLE_NS);
	answer(14, l4, 4);
	ck_assert_int_eq(check(n, 13 * SEC + NET_UDP_IDLE_NS), NET_PASS);
	/* IPv6 likewise */
	n = tf_udp6(b, "2001:db8::53", 53);
	ck_assert_int_eq(check(n, 1), NET_DROP_INGRESS); /* its own packet, inbound: nobody's reply */
	sent(n, 1);
	answer(14, 14 + 40, 6);
	ck_assert_int_eq(check(n, 2), NET_PASS);
}
END_TEST

START_TEST(the_oldest_flow_makes_room)
{
	size_t n = tf_udp4(b, "1.2.3.4", 53, 0), l4 = 14 + 20;

	for (unsigned i = 0; i <= NET_UDP_FLOWS; i++) { /* one more than kept, a ms apart */
		tf_be16(b + l4, (uint16_t)(1000 + i));
		sent(n, (1 + i) * (SEC / 1000));
	}
	answer(14, l4, 4);
	tf_be16(b + l4 + 2, 1000); /* the first: replaced */
	ck_assert_int_eq(check(n, SEC), NET_DROP_INGRESS);
	tf_be16(b + l4 + 2, 1001); /* the second: kept */
	ck_assert_int_eq(check(n, SEC), NET_PASS);
	tf_be16(b + l4 + 2, 1000 + NET_UDP_FLOWS);
	ck_assert_int_eq(check(n, SEC), NET_PASS);
}
END_TEST

START_TEST(no_ping_but_errors_and_replies)
{
	size_t l4 = tf_ip4(b, tf_eth(b, ETH_P_IP, false), IPPROTO_ICMP, "10.0.0.2", 5, 8, 0), n = l4 + 8;
	static const uint8_t refused4[] = { 8, 13, 15, 17 }, passed4[] = { 0, 3, 11, 12 };

	memset(b + l4, 0, 8);
	for (size_t i = 0; i < sizeof(refused4); i++) {
		b[l4] = refused4[i];
		ck_assert_msg(check(n, 1) == NET_DROP_INGRESS, "ICMP type %u", refused4[i]);
	}
	for (size_t i = 0; i < sizeof(passed4); i++) {
		b[l4] = passed4[i];
		ck_assert_msg(check(n, 1) == NET_PASS, "ICMP type %u", passed4[i]);
	}
	n = tf_icmp6(b, "fd00::2", 128); /* echo request */
	ck_assert_int_eq(check(n, 1), NET_DROP_INGRESS);
	n = tf_icmp6(b, "fd00::2", 139); /* node information query */
	ck_assert_int_eq(check(n, 1), NET_DROP_INGRESS);
	static const uint8_t passed6[] = { 1, 2, 3, 129, 133, 134, 135, 136, 137 };
	for (size_t i = 0; i < sizeof(passed6); i++) {
		n = tf_icmp6(b, "fd00::2", passed6[i]);
		ck_assert_msg(check(n, 1) == NET_PASS, "ICMPv6 type %u", passed6[i]);
	}
}
END_TEST

START_TEST(the_rest_stays_out)
{
	size_t n = tf_arp(b);

	ck_assert_int_eq(check(n, 1), NET_PASS);
	/* another ethertype (LLDP), another IP protocol (GRE), a runt, a
	 * header cut short */
	n = tf_eth(b, 0x88cc, false) + 20;
	ck_assert_int_eq(check(n, 1), NET_DROP_INGRESS);
	n = tf_ip4(b, tf_eth(b, ETH_P_IP, false), 47, "10.0.0.2", 5, 8, 0) + 8;
	ck_assert_int_eq(check(n, 1), NET_DROP_INGRESS);
	ck_assert_int_eq(check(10, 1), NET_DROP_INGRESS);
	n = tf_tcp4(b, "10.0.0.2", 22);
	ck_assert_int_eq(check(n - 10, 1), NET_DROP_INGRESS);
	/* a first fragment is checked by its L4 header (and only UDP comes
	 * in fragments: a_tail_only_after_its_first) */
	size_t l4 = tf_ip4(b, tf_eth(b, ETH_P_IP, false), IPPROTO_TCP, "10.0.0.2", 5, 20, 0x2000);
	tf_tcp(b, l4, 22, 5);
	b[l4 + 13] = 0x02;
	ck_assert_int_eq(check(l4 + 20, 1), NET_DROP_INGRESS); /* a SYN, in a first fragment */
	l4 = tf_ip4(b, tf_eth(b, ETH_P_IP, false), IPPROTO_TCP, "10.0.0.2", 5, 8, 0x2000);
	ck_assert_int_eq(check(l4 + 8, 1), NET_DROP_INGRESS); /* too short to show its flags */
	/* ... even padded (a 60-byte frame) with a SYN ACK where its flags
	 * would be: padding is not the datagram (the second fragment's SYN
	 * would be what the guest reassembles; helper-62's find) */
	memset(b + l4 + 8, 0, 60 - (l4 + 8));
	b[l4 + 13] = 0x12;
	ck_assert_int_eq(check(60, 1), NET_DROP_INGRESS);
	/* another protocol's first fragment, one byte of it inspected (its
	 * ports were read past that: the fuzzer's find) */
	l4 = tf_ip4(b, tf_eth(b, ETH_P_IP, false), 255, "10.0.0.2", 5, 1, 0x2000);
	{
		uint8_t *exact = malloc(l4 + 1);

		memcpy(exact, b, l4 + 1);
		ck_assert_int_eq(net_ingress_check(&in, exact, l4 + 1, l4 + 1, 1), NET_DROP_INGRESS);
		free(exact);
	}
	/* a UDP answer in fragments: its first one checked by its ports (its
	 * length field is the whole datagram's) */
	n = tf_udp4(b, "1.2.3.4", 53, 4);
	sent(n, 1);
	answer(14, 14 + 20, 4);
	tf_be16(b + 14 + 6, 0x2000);
	tf_be16(b + 14 + 20 + 4, 1400);
	ck_assert_int_eq(check(n, 2), NET_PASS);
	b[14 + 20] ^= 1; /* from another port */
	ck_assert_int_eq(check(n, 2), NET_DROP_INGRESS);
	/* the guest's own fragmented datagram opens its flow too */
	memset(&in.udp, 0, sizeof(in.udp));
	n = tf_udp4(b, "5.6.7.8", 53, 4);
	tf_be16(b + 14 + 6, 0x2000);
	tf_be16(b + 14 + 20 + 4, 1400);
	sent(n, 1);
	tf_be16(b + 14 + 6, 0);
	tf_be16(b + 14 + 20 + 4, 12);
	answer(14, 14 + 20, 4);
	ck_assert_int_eq(check(n, 2), NET_PASS);
	/* IPv6: a fragmented UDP answer's first fragment (its length the
	 * whole datagram's) on a flow the guest opened */
	n = tf_udp6(b, "2001:db8::53", 53);
	sent(n, 1);
	{
		size_t off = tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), IPPROTO_FRAGMENT, "fd00::2", 8 + 8);

		inet_pton(AF_INET6, "2001:db8::53", b + 14 + 8); /* from the resolver */
		off = tf_ext6(b, off, IPPROTO_FRAGMENT, IPPROTO_UDP, 8, 0);
		b[off - 8 + 3] |= 1; /* M: more fragments */
		tf_udp(b, off, 40000, 3000);
		tf_be16(b + off, 53);
		ck_assert_int_eq(check(off + 8, 2), NET_PASS);
		/* a later fragment header after a first one: no L4 header (its
		 * flags were read from the Ethernet header: helper-62) */
		off = tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), IPPROTO_FRAGMENT, "fd00::2", 8 + 8 + 20);
		off = tf_ext6(b, off, IPPROTO_FRAGMENT, IPPROTO_FRAGMENT, 8, 0);
		off = tf_ext6(b, off, IPPROTO_FRAGMENT, IPPROTO_TCP, 8, 5);
		struct net_flow fl;
		ck_assert_int_eq(net_frame_parse(b, off + 20, off + 20, &fl), NET_PASS);
		ck_assert(!fl.first_fragment && !fl.has_l4);
		/* an atomic fragment (offset 0, no M: RFC 6946) is a whole
		 * datagram, checked as one (helper-66: it was a fragment, so
		 * its TCP or ICMPv6 reply was dropped) */
		off = tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), IPPROTO_FRAGMENT, "fd00::2", 8 + 20);
		off = tf_ext6(b, off, IPPROTO_FRAGMENT, IPPROTO_TCP, 8, 0);
		tf_tcp(b, off, 22, 5);
		b[off + 13] = 0x10; /* ACK */
		ck_assert_int_eq(net_frame_parse(b, off + 20, off + 20, &fl), NET_PASS);
		ck_assert(!fl.fragment && fl.has_l4 && fl.proto == IPPROTO_TCP);
		ck_assert_int_eq(check(off + 20, 2), NET_PASS);
		b[off + 13] = 0x02; /* SYN: still no connection in */
		ck_assert_int_eq(check(off + 20, 2), NET_DROP_INGRESS);
	}
}
END_TEST

/* b: a UDP answer from 1.2.3.4:53 to the guest's port 40000 (the flow
 * its DNS query opened: flow() notes it) in fragments of identification
 * id: the first (offset 0, MF, the UDP header's length the whole
 * datagram's) when first, else a tail (offset 24 bytes). Returns the
 * frame's length. */
static size_t udp4_fragment(uint16_t id, bool first)
{
	size_t n = tf_udp4(b, "1.2.3.4", 53, 16);

	answer(14, 14 + 20, 4);
	tf_be16(b + 14 + 4, id);
	tf_be16(b + 14 + 6, first ? 0x2000 : 3);
	if (first)
		tf_be16(b + 14 + 20 + 4, 1400);
	return n;
}

static void flow(uint64_t now)
{
	sent(tf_udp4(b, "1.2.3.4", 53, 16), now);
}

START_TEST(a_tail_only_after_its_first)
{
	size_t n;

	flow(1 * SEC);
	/* a tail whose first never came: it would only wait in the guest's
	 * reassembly queue */
	n = udp4_fragment(7, false);
	ck_assert_int_eq(check(n, 1 * SEC), NET_DROP_INGRESS);
	n = udp4_fragment(7, true);
	ck_assert_int_eq(check(n, 1 * SEC), NET_PASS);
	n = udp4_fragment(7, false);
	ck_assert_int_eq(check(n, 2 * SEC), NET_PASS);
	ck_assert_int_eq(check(n, 2 * SEC), NET_PASS); /* a datagram has many tails */
	/* another identification, source, destination or protocol: another
	 * datagram */
	tf_be16(b + 14 + 4, 8);
	ck_assert_int_eq(check(n, 2 * SEC), NET_DROP_INGRESS);
	tf_be16(b + 14 + 4, 7);
	b[14 + 15] = 5;
	ck_assert_int_eq(check(n, 2 * SEC), NET_DROP_INGRESS);
	b[14 + 15] = 4;
	b[14 + 19] = 3;
	ck_assert_int_eq(check(n, 2 * SEC), NET_DROP_INGRESS);
	b[14 + 19] = 2;
	b[14 + 9] = IPPROTO_TCP;
	ck_assert_int_eq(check(n, 2 * SEC), NET_DROP_INGRESS);
	b[14 + 9] = IPPROTO_UDP;
	ck_assert_int_eq(check(n, 1 * SEC + NET_FRAG_TTL_NS), NET_PASS);
	ck_assert_int_eq(check(n, 2 * SEC + NET_FRAG_TTL_NS), NET_DROP_INGRESS); /* reassembly gave up */
	/* a refused first (from a port the guest did not send to) lets no
	 * tail in */
	flow(3 * SEC);
	n = udp4_fragment(9, true);
	tf_be16(b + 14 + 20, 54);
	ck_assert_int_eq(check(n, 3 * SEC), NET_DROP_INGRESS);
	n = udp4_fragment(9, false);
	ck_assert_int_eq(check(n, 3 * SEC), NET_DROP_INGRESS);
	/* only UDP comes in fragments: a TCP ACK or an ICMP echo reply in a
	 * first fragment would pass its stateless check, and then its tails
	 * (helper-65: any number of datagrams queued, the table flushed) */
	size_t l4 = tf_ip4(b, tf_eth(b, ETH_P_IP, false), IPPROTO_TCP, "10.0.0.2", 5, 24, 0x2000);
	tf_tcp(b, l4, 22, 5);
	b[l4 + 13] = 0x10;
	ck_assert_int_eq(check(l4 + 24, 3 * SEC), NET_DROP_INGRESS);
	l4 = tf_ip4(b, tf_eth(b, ETH_P_IP, false), IPPROTO_ICMP, "10.0.0.2", 5, 24, 0x2000);
	memset(b + l4, 0, 8); /* type 0: echo reply */
	ck_assert_int_eq(check(l4 + 24, 3 * SEC), NET_DROP_INGRESS);
	/* the last NET_FRAGS datagrams are kept */
	flow(4 * SEC);
	for (unsigned i = 0; i <= NET_FRAGS; i++)
		ck_assert_int_eq(check(udp4_fragment((uint16_t)(100 + i), true), 4 * SEC + i * SEC / 1000), NET_PASS);
	ck_assert_int_eq(check(udp4_fragment(100, false), 5 * SEC), NET_DROP_INGRESS);
	ck_assert_int_eq(check(udp4_fragment(101, false), 5 * SEC), NET_PASS);
	/* IPv6: a UDP answer in two fragments, the tail's identification
	 * and next header those of its first */
	n = tf_udp6(b, "2001:db8::53", 53);
	sent(n, 1);
	for (int tail = 0; tail < 2; tail++) {
		size_t off = tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), IPPROTO_FRAGMENT, "fd00::2", 8 + 8);

		inet_pton(AF_INET6, "2001:db8::53", b + 14 + 8);
		off = tf_ext6(b, off, IPPROTO_FRAGMENT, IPPROTO_UDP, 8, tail ? 2 : 0);
		b[off - 8 + 3] |= tail ? 0 : 1;
		b[off - 8 + 7] = 0x42; /* identification */
		tf_udp(b, off, 40000, 24);
		tf_be16(b + off, 53);
		if (!tail)
			ck_assert_int_eq(check(off + 8, 2), NET_PASS);
		else {
			ck_assert_int_eq(check(off + 8, 2), NET_PASS);
			b[off - 8 + 7] = 0x43;
			ck_assert_int_eq(check(off + 8, 2), NET_DROP_INGRESS);
		}
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net_ingress");
	TCase *tc = tcase_create("ingress");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, off_lets_everything_in);
	tcase_add_test(tc, no_connection_opens_in);
	tcase_add_test(tc, udp_only_from_where_the_guest_sent);
	tcase_add_test(tc, the_oldest_flow_makes_room);
	tcase_add_test(tc, no_ping_but_errors_and_replies);
	tcase_add_test(tc, the_rest_stays_out);
	tcase_add_test(tc, a_tail_only_after_its_first);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
