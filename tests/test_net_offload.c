/* virtio-net offloads: the tx header check (every field, every bound,
 * GSO only on the TCP it names), what a received header may claim, and the
 * TAP flags that follow from the negotiated features. */
#include <endian.h>
#include <stdlib.h>

#include <linux/if_tun.h>

#include "devices/net/net_offload.h"
#include "tests/test_net_frames.h"
#include "tests/unit.h"

#define F(bit) (1ULL << (bit))
#define CSUM F(VIRTIO_NET_F_CSUM)
#define TSO4 (F(VIRTIO_NET_F_HOST_TSO4) | CSUM)
#define TSO6 (F(VIRTIO_NET_F_HOST_TSO6) | CSUM)
#define MAXF 1518u /* MTU 1500 + 14 + one VLAN tag */

static uint8_t *big; /* NET_GSO_MAX_FRAME + 64 bytes of frame */

static void setup(void)
{
	big = calloc(1, NET_GSO_MAX_FRAME + 64);
}

static void teardown(void)
{
	free(big);
}

static struct virtio_net_hdr_v1 hdr(uint8_t flags, uint8_t gso, uint16_t hdr_len, uint16_t gso_size, uint16_t start,
				    uint16_t off)
{
	return (struct virtio_net_hdr_v1){ .flags = flags,
					   .gso_type = gso,
					   .hdr_len = htole16(hdr_len),
					   .gso_size = htole16(gso_size),
					   .csum_start = htole16(start),
					   .csum_offset = htole16(off),
					   .num_buffers = htole16(7) };
}

/* Check h on the len-byte frame in big, inspecting min(len, 256) bytes
 * from an exactly sized copy (ASan sees any read past it). */
static enum net_verdict check(const struct virtio_net_hdr_v1 *h, uint64_t features, size_t len,
			      struct virtio_net_hdr_v1 *out)
{
	size_t cap = len < NET_INSPECT_MAX ? len : NET_INSPECT_MAX;
	uint8_t *copy = malloc(cap);
	enum net_verdict v;

	memcpy(copy, big, cap);
	v = net_offload_check_tx(h, features, copy, cap, len, MAXF, out);
	free(copy);
	return v;
}

/* A TCP/IPv4 (or IPv6) segment of len bytes in big: Ethernet, IP, 20-byte TCP. */
static size_t tcp_frame(bool v6, size_t len)
{
	size_t l3 = tf_eth(big, v6 ? ETH_P_IPV6 : ETH_P_IP, false), l4;

	if (v6)
		l4 = tf_ip6(big, l3, IPPROTO_TCP, "fd00::1", len - l3 - 40);
	else
		l4 = tf_ip4(big, l3, IPPROTO_TCP, "10.0.0.1", 5, len - l3 - 20, 0x4000 /* DF */);
	tf_tcp(big, l4, 80, 5);
	return len;
}

START_TEST(plain_header_passes_and_is_rebuilt)
{
	struct virtio_net_hdr_v1 h = hdr(0, VIRTIO_NET_HDR_GSO_NONE, 54, 1448, 34, 16), out;

	tcp_frame(false, 100);
	ck_assert_int_eq(check(&h, 0, 100, &out), NET_PASS);
	/* hdr_len, gso_size, csum fields and num_buffers mean nothing here. */
	ck_assert_uint_eq(out.flags | out.gso_type | out.hdr_len | out.gso_size | out.csum_start | out.csum_offset |
				  out.num_buffers,
			  0);
	ck_assert_int_eq(check(&h, 0, MAXF, &out), NET_PASS);
	ck_assert_int_eq(check(&h, 0, MAXF + 1, &out), NET_DROP_OVERSIZE);
	ck_assert_int_eq(check(&h, TSO4, MAXF + 1, &out), NET_DROP_OVERSIZE); /* no GSO asked */
}
END_TEST

START_TEST(flags)
{
	struct virtio_net_hdr_v1 h, out;

	tcp_frame(false, 100);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 34, 16);
	ck_assert_int_eq(check(&h, 0, 100, &out), NET_DROP_VNET_HDR); /* CSUM not negotiated */
	ck_assert_int_eq(check(&h, F(VIRTIO_NET_F_GUEST_CSUM), 100, &out), NET_DROP_VNET_HDR);
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_PASS);
	ck_assert_uint_eq(out.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
	ck_assert_uint_eq(le16toh(out.csum_start), 34);
	ck_assert_uint_eq(le16toh(out.csum_offset), 16);
	ck_assert_uint_eq(out.num_buffers, 0);
	for (unsigned bit = 1; bit < 8; bit++) {
		h = hdr((uint8_t)(1u << bit), 0, 0, 0, 0, 0); /* DATA_VALID, RSC_INFO, unknown */
		ck_assert_int_eq(check(&h, ~0ULL, 100, &out), NET_DROP_VNET_HDR);
	}
}
END_TEST

/* The host writes the checksum at csum_start + csum_offset: anywhere but
 * the L4 checksum field that could rewrite an approved address or port
 * (a TCP SYN to an allowed port, its destination port rewritten by the
 * "checksum" after the filter said yes). */
START_TEST(checksum_must_be_the_l4_checksum)
{
	struct virtio_net_hdr_v1 h, out;
	size_t l4;

	tcp_frame(false, 100);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 34, 16);
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_PASS);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 26, 10); /* lands on the TCP destination port */
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_DROP_VNET_HDR);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 34, 2); /* the port itself */
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_DROP_VNET_HDR);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 10, 0); /* the source MAC */
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_DROP_VNET_HDR);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 34, 6); /* UDP's offset on TCP */
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_DROP_VNET_HDR);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 0xffff, 0xffff);
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_DROP_VNET_HDR);
	/* UDP: offset 6. IPv6 and VLAN move the L4 header. */
	l4 = tf_ip4(big, tf_eth(big, ETH_P_IP, false), IPPROTO_UDP, "10.0.0.1", 5, 66, 0);
	tf_udp(big, l4, 53, 66);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 34, 6);
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_PASS);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 34, 16);
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_DROP_VNET_HDR);
	tcp_frame(true, 100);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 54, 16);
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_PASS);
	l4 = tf_ip4(big, tf_eth(big, ETH_P_IP, true), IPPROTO_TCP, "10.0.0.1", 5, 100 - 38, 0);
	tf_tcp(big, l4, 80, 5);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 38, 16);
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_PASS);
	/* Not TCP/UDP of a whole IP packet: nothing for the host to fill in. */
	tf_icmp6(big, "ff02::1", 135);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 54, 2);
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_DROP_VNET_HDR);
	l4 = tf_ip4(big, tf_eth(big, ETH_P_IP, false), IPPROTO_UDP, "10.0.0.1", 5, 66, 0x2000 /* MF */);
	tf_udp(big, l4, 53, 66);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0, 0, 0, 34, 6);
	ck_assert_int_eq(check(&h, CSUM, 100, &out), NET_DROP_VNET_HDR);
	tf_arp(big);
	ck_assert_int_ne(check(&h, CSUM, 100, &out), NET_PASS);
}
END_TEST

START_TEST(tso_good)
{
	struct virtio_net_hdr_v1 h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34, 16), out;
	size_t len = tcp_frame(false, 30000);

	ck_assert_int_eq(check(&h, TSO4, len, &out), NET_PASS);
	ck_assert_uint_eq(out.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
	ck_assert_uint_eq(le16toh(out.hdr_len), 54);
	ck_assert_uint_eq(le16toh(out.gso_size), 1448);
	ck_assert_uint_eq(out.num_buffers, 0);
	/* The largest IPv4 packet there is, plus Ethernet. */
	len = tcp_frame(false, 14 + 65535);
	ck_assert_int_eq(check(&h, TSO4, len, &out), NET_PASS);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 74, 1428, 54, 16);
	len = tcp_frame(true, 20000);
	ck_assert_int_eq(check(&h, TSO6, len, &out), NET_PASS);
	ck_assert_uint_eq(out.gso_type, VIRTIO_NET_HDR_GSO_TCPV6);
}
END_TEST

START_TEST(tso_refused)
{
	struct virtio_net_hdr_v1 h, out;
	size_t len = tcp_frame(false, 3000);

	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34, 16);
	ck_assert_int_eq(check(&h, CSUM, len, &out), NET_DROP_VNET_HDR); /* HOST_TSO4 not negotiated */
	ck_assert_int_eq(check(&h, TSO6, len, &out), NET_DROP_VNET_HDR);
	h.flags = 0; /* GSO without NEEDS_CSUM */
	ck_assert_int_eq(check(&h, TSO4, len, &out), NET_DROP_VNET_HDR);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 54, 0, 34, 16);
	ck_assert_int_eq(check(&h, TSO4, len, &out), NET_DROP_VNET_HDR); /* gso_size 0 */
	h.gso_size = htole16(NET_GSO_MIN_SIZE - 1);                      /* thousands of segments from one frame */
	ck_assert_int_eq(check(&h, TSO4, len, &out), NET_DROP_VNET_HDR);
	h.gso_size = htole16(NET_GSO_MIN_SIZE);
	ck_assert_int_eq(check(&h, TSO4, len, &out), NET_PASS);
	h.gso_size = htole16(MAXF - 54); /* segments of exactly max_frame */
	ck_assert_int_eq(check(&h, TSO4, len, &out), NET_PASS);
	h.gso_size = htole16(MAXF - 54 + 1); /* one byte over the MTU */
	ck_assert_int_eq(check(&h, TSO4, len, &out), NET_DROP_VNET_HDR);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 3001, 1448, 34, 16);
	ck_assert_int_eq(check(&h, TSO4, len, &out), NET_DROP_VNET_HDR); /* hdr_len past the frame */
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN, 54, 1448, 34, 16);
	ck_assert_int_eq(check(&h, ~0ULL, len, &out), NET_DROP_VNET_HDR);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_UDP, 42, 1472, 34, 6);
	ck_assert_int_eq(check(&h, ~0ULL, len, &out), NET_DROP_VNET_HDR);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0x42, 54, 1448, 34, 16);
	ck_assert_int_eq(check(&h, ~0ULL, len, &out), NET_DROP_VNET_HDR);
}
END_TEST

/* The host kernel segments by the headers: they must be what gso_type says. */
START_TEST(tso_headers_must_match)
{
	struct virtio_net_hdr_v1 h4 = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34, 16);
	struct virtio_net_hdr_v1 h6 = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 74, 1428, 54, 16);
	struct virtio_net_hdr_v1 out;
	size_t l4;

	tcp_frame(true, 3000);
	ck_assert_int_eq(check(&h4, ~0ULL, 3000, &out), NET_DROP_VNET_HDR); /* TCPV4 on IPv6 */
	tcp_frame(false, 3000);
	ck_assert_int_eq(check(&h6, ~0ULL, 3000, &out), NET_DROP_VNET_HDR); /* TCPV6 on IPv4 */
	l4 = tf_ip4(big, tf_eth(big, ETH_P_IP, false), IPPROTO_UDP, "10.0.0.1", 5, 3000 - 34, 0);
	tf_udp(big, l4, 53, 3000 - 34);
	ck_assert_int_eq(check(&h4, ~0ULL, 3000, &out), NET_DROP_VNET_HDR); /* UDP */
	l4 = tf_ip4(big, tf_eth(big, ETH_P_IP, false), IPPROTO_TCP, "10.0.0.1", 5, 3000 - 34, 0x2000 /* MF */);
	tf_tcp(big, l4, 80, 5);
	ck_assert_int_eq(check(&h4, ~0ULL, 3000, &out), NET_DROP_VNET_HDR); /* a fragment */
	tf_eth(big, ETH_P_ARP, false);
	ck_assert_int_ne(check(&h4, ~0ULL, 3000, &out), NET_PASS); /* not IP at all */
	tcp_frame(false, 3000);
	big[14 + 2] = 0x0f; /* IPv4 total length past the frame */
	big[14 + 3] = 0xff;
	ck_assert_int_eq(check(&h4, ~0ULL, 3000, &out), NET_DROP_MALFORMED);
	/* The longest headers (60-byte IPv4 with options, 60-byte TCP) pass,
	 * with csum_start at the TCP header; a frame shorter than its headers
	 * does not. */
	l4 = tf_ip4(big, tf_eth(big, ETH_P_IP, false), IPPROTO_TCP, "10.0.0.1", 15, 3000 - 74, 0);
	tf_tcp(big, l4, 80, 15);
	ck_assert_int_eq(check(&h4, ~0ULL, 3000, &out), NET_DROP_VNET_HDR); /* csum_start 34 */
	h4 = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 134, 1384, 74, 16);
	ck_assert_int_eq(check(&h4, ~0ULL, 3000, &out), NET_PASS);
	ck_assert_int_eq(check(&h4, ~0ULL, 120, &out), NET_DROP_MALFORMED);
}
END_TEST

START_TEST(tso_sizes)
{
	struct virtio_net_hdr_v1 h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 74, 1428, 54, 16), out;

	tcp_frame(true, NET_GSO_MAX_FRAME);
	ck_assert_int_eq(check(&h, TSO6, NET_GSO_MAX_FRAME, &out), NET_PASS);
	ck_assert_int_eq(check(&h, TSO6, NET_GSO_MAX_FRAME + 1, &out), NET_DROP_OVERSIZE);
}
END_TEST

START_TEST(rx_header_claims_only_what_was_negotiated)
{
	const uint64_t gcsum = F(VIRTIO_NET_F_GUEST_CSUM), gtso4 = F(VIRTIO_NET_F_GUEST_TSO4);
	struct virtio_net_hdr_v1 h;

	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34, 16);
	net_offload_rx_hdr(&h, 0);
	ck_assert_uint_eq(h.flags | h.gso_type | h.hdr_len | h.gso_size | h.csum_start | h.csum_offset, 0);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34, 16);
	net_offload_rx_hdr(&h, gcsum);
	ck_assert_uint_eq(h.flags, VIRTIO_NET_HDR_F_NEEDS_CSUM);
	ck_assert_uint_eq(le16toh(h.csum_start), 34);
	ck_assert_uint_eq(h.gso_type | h.hdr_len | h.gso_size, 0);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34, 16);
	net_offload_rx_hdr(&h, gcsum | gtso4);
	ck_assert_uint_eq(h.gso_type, VIRTIO_NET_HDR_GSO_TCPV4);
	ck_assert_uint_eq(le16toh(h.gso_size), 1448);
	h = hdr(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV6, 74, 1428, 54, 16);
	net_offload_rx_hdr(&h, gcsum | gtso4); /* TSO6 not taken */
	ck_assert_uint_eq(h.gso_type, VIRTIO_NET_HDR_GSO_NONE);
	h = hdr(VIRTIO_NET_HDR_F_DATA_VALID, 0, 0, 0, 34, 16);
	net_offload_rx_hdr(&h, gcsum);
	ck_assert_uint_eq(h.flags, VIRTIO_NET_HDR_F_DATA_VALID);
	ck_assert_uint_eq(h.csum_start | h.csum_offset, 0); /* only with NEEDS_CSUM */
	h = hdr(0x80 | VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34, 16);
	net_offload_rx_hdr(&h, ~0ULL);
	ck_assert_uint_eq(h.flags | h.gso_type, 0);
}
END_TEST

START_TEST(tap_flags_and_rx_size)
{
	const uint64_t gcsum = F(VIRTIO_NET_F_GUEST_CSUM);

	ck_assert_uint_eq(net_offload_tun_flags(0), 0);
	ck_assert_uint_eq(net_offload_tun_flags(CSUM | F(VIRTIO_NET_F_HOST_TSO4)),
			  0); /* tx features: not the TAP's business */
	ck_assert_uint_eq(net_offload_tun_flags(gcsum), TUN_F_CSUM);
	ck_assert_uint_eq(net_offload_tun_flags(F(VIRTIO_NET_F_GUEST_TSO4)), 0); /* TSO needs GUEST_CSUM */
	ck_assert_uint_eq(net_offload_tun_flags(gcsum | F(VIRTIO_NET_F_GUEST_TSO4) | F(VIRTIO_NET_F_GUEST_TSO6)),
			  TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6);
	ck_assert_uint_eq(net_offload_rx_max(gcsum, MAXF), MAXF);
	ck_assert_uint_eq(net_offload_rx_max(F(VIRTIO_NET_F_GUEST_TSO6), MAXF), MAXF);
	ck_assert_uint_eq(net_offload_rx_max(gcsum | F(VIRTIO_NET_F_GUEST_TSO6), MAXF), NET_GSO_MAX_FRAME);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net_offload");
	TCase *tc = tcase_create("net_offload");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, plain_header_passes_and_is_rebuilt);
	tcase_add_test(tc, flags);
	tcase_add_test(tc, checksum_must_be_the_l4_checksum);
	tcase_add_test(tc, tso_good);
	tcase_add_test(tc, tso_refused);
	tcase_add_test(tc, tso_headers_must_match);
	tcase_add_test(tc, tso_sizes);
	tcase_add_test(tc, rx_header_claims_only_what_was_negotiated);
	tcase_add_test(tc, tap_flags_and_rx_size);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
