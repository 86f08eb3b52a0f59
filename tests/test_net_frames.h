/* Frame builders for the virtio-net tests and fuzz seeds: Ethernet, VLAN,
 * ARP, IPv4 (with options), IPv6 (with extension headers), TCP, UDP,
 * ICMPv6, written into a caller's buffer. Each returns the offset where the
 * next header goes. Checksums are left zero (nothing here checks them). */
#ifndef TVM_TESTS_NET_FRAMES_H
#define TVM_TESTS_NET_FRAMES_H

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <linux/if_ether.h>
#include <netinet/in.h>

#define TF_MAX 2048

static const uint8_t tf_src_mac[6] = { 0x02, 0x74, 0x76, 0, 0, 1 };

static inline void tf_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* Ethernet header (with one 802.1Q tag when vlan); returns the L3 offset. */
static inline size_t tf_eth(uint8_t *b, uint16_t type, bool vlan)
{
	memset(b, 0xff, 6);
	memcpy(b + 6, tf_src_mac, 6);
	if (!vlan) {
		tf_be16(b + 12, type);
		return 14;
	}
	tf_be16(b + 12, ETH_P_8021Q);
	tf_be16(b + 14, 42);
	tf_be16(b + 16, type);
	return 18;
}

/* IPv4 header of ihl words (options filled with NOPs) for l4len payload
 * bytes, flags_frag the raw flags/fragment-offset field; returns the L4
 * offset. */
static inline size_t tf_ip4(uint8_t *b, size_t off, uint8_t proto, const char *dst, unsigned ihl, size_t l4len,
			    uint16_t flags_frag)
{
	uint8_t *p = b + off;

	memset(p, 0, ihl * 4);
	p[0] = (uint8_t)(0x40 | ihl);
	tf_be16(p + 2, (uint16_t)(ihl * 4 + l4len));
	tf_be16(p + 6, flags_frag);
	p[8] = 64;
	p[9] = proto;
	inet_pton(AF_INET, "10.0.0.2", p + 12);
	inet_pton(AF_INET, dst, p + 16);
	memset(p + 20, 1, ihl * 4 - 20); /* NOP options */
	return off + ihl * 4;
}

/* IPv6 header for paylen payload bytes; returns the payload offset. */
static inline size_t tf_ip6(uint8_t *b, size_t off, uint8_t nh, const char *dst, size_t paylen)
{
	uint8_t *p = b + off;

	memset(p, 0, 40);
	p[0] = 0x60;
	tf_be16(p + 4, (uint16_t)paylen);
	p[6] = nh;
	p[7] = 64;
	inet_pton(AF_INET6, "fd00::2", p + 8);
	inet_pton(AF_INET6, dst, p + 24);
	return off + 40;
}

/* IPv6 extension header (len bytes, a multiple of 8; AH: of 4) with next
 * header nh; a fragment header gets offset frag_off (8-byte units). */
static inline size_t tf_ext6(uint8_t *b, size_t off, uint8_t type, uint8_t nh, size_t len, uint16_t frag_off)
{
	uint8_t *p = b + off;

	memset(p, 0, len);
	p[0] = nh;
	if (type == IPPROTO_FRAGMENT)
		tf_be16(p + 2, (uint16_t)(frag_off << 3));
	else if (type == IPPROTO_AH)
		p[1] = (uint8_t)(len / 4 - 2);
	else
		p[1] = (uint8_t)(len / 8 - 1);
	return off + len;
}

static inline size_t tf_udp(uint8_t *b, size_t off, uint16_t dport, size_t len)
{
	memset(b + off, 0, 8);
	tf_be16(b + off, 40000);
	tf_be16(b + off + 2, dport);
	tf_be16(b + off + 4, (uint16_t)len);
	return off + len;
}

static inline size_t tf_tcp(uint8_t *b, size_t off, uint16_t dport, unsigned doff)
{
	memset(b + off, 0, doff * 4);
	tf_be16(b + off, 40000);
	tf_be16(b + off + 2, dport);
	b[off + 12] = (uint8_t)(doff << 4);
	return off + doff * 4;
}

/* Whole frames. */
static inline size_t tf_udp4(uint8_t *b, const char *dst, uint16_t dport, size_t payload)
{
	size_t l4 = tf_ip4(b, tf_eth(b, ETH_P_IP, false), IPPROTO_UDP, dst, 5, 8 + payload, 0);
	memset(b + l4 + 8, 0xab, payload);
	return tf_udp(b, l4, dport, 8 + payload);
}

static inline size_t tf_tcp4(uint8_t *b, const char *dst, uint16_t dport)
{
	return tf_tcp(b, tf_ip4(b, tf_eth(b, ETH_P_IP, false), IPPROTO_TCP, dst, 5, 20, 0), dport, 5);
}

static inline size_t tf_udp6(uint8_t *b, const char *dst, uint16_t dport)
{
	return tf_udp(b, tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), IPPROTO_UDP, dst, 8), dport, 8);
}

static inline size_t tf_tcp6(uint8_t *b, const char *dst, uint16_t dport)
{
	return tf_tcp(b, tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), IPPROTO_TCP, dst, 20), dport, 5);
}

/* ICMPv6 (hop limit 255, as neighbour discovery sends it). */
static inline size_t tf_icmp6(uint8_t *b, const char *dst, uint8_t type)
{
	size_t off = tf_ip6(b, tf_eth(b, ETH_P_IPV6, false), IPPROTO_ICMPV6, dst, 24);

	b[off - 40 + 7] = 255;
	memset(b + off, 0, 24);
	b[off] = type;
	return off + 24;
}

static inline size_t tf_arp(uint8_t *b)
{
	size_t off = tf_eth(b, ETH_P_ARP, false);
	uint8_t *p = b + off;

	memset(p, 0, 28);
	tf_be16(p, 1);
	tf_be16(p + 2, ETH_P_IP);
	p[4] = 6;
	p[5] = 4;
	tf_be16(p + 6, 1); /* request */
	memcpy(p + 8, tf_src_mac, 6);
	inet_pton(AF_INET, "10.0.0.2", p + 14);
	inet_pton(AF_INET, "10.0.0.1", p + 24);
	return off + 28;
}

#endif
