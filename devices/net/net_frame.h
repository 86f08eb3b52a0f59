/* Ethernet frame parser for the virtio-net egress filter: pure functions
 * over a byte buffer, no allocation, every offset bounds-checked.
 *
 * What it reads (RFC/IEEE references in net_frame.c):
 *  - Ethernet II, with at most one 802.1Q tag (0x8100); a second tag (QinQ)
 *    leaves the inner type unparsed (ethertype 0x8100, family 0).
 *  - ARP for IPv4 over Ethernet (hlen 6, plen 4, 28 bytes), noting
 *    whether the sender hardware address is the frame's source MAC.
 *  - IPv4: version, IHL >= 5 (options skipped), total length within the
 *    frame (shorter is Ethernet padding), fragments (MF or offset != 0: a
 *    non-first fragment has no L4 header; a first one's is parsed).
 *  - IPv6: payload length within the frame (0, a jumbogram, is malformed),
 *    extension headers hop-by-hop, routing, fragment, destination options
 *    and AH walked, at most NET_MAX_EXT_HDRS of them (an atomic fragment,
 *    offset 0 without M, is no fragment: RFC 6946); the other extension
 *    headers of the IANA registry (135, 139, 140, 253, 254) are rejected,
 *    since we cannot know what follows them.
 *  - TCP (data offset >= 5, header within the L3 payload), UDP (8 bytes,
 *    length field consistent), ICMP and ICMPv6 type. Other protocols:
 *    number only.
 *
 * cap and len: the parser only reads f[0..cap); len is the frame's real
 * length (cap <= len; the device copies only the first NET_INSPECT_MAX
 * bytes out of guest memory so the guest cannot change what was checked).
 * A header needed past cap but inside len counts as malformed.
 */
#ifndef TVM_NET_FRAME_H
#define TVM_NET_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NET_ETH_HLEN 14
#define NET_VLAN_HLEN 4
#define NET_INSPECT_MAX 256 /* bytes of a frame the filter looks at */
#define NET_MAX_EXT_HDRS 8  /* IPv6 extension headers walked before giving up */

/* Outcome of parsing or filtering one frame. NET_PASS is 0; the others are
 * drop reasons (the device counts them; net_verdict_name gives a label). */
enum net_verdict {
	NET_PASS = 0,
	NET_DROP_RUNT,      /* shorter than an Ethernet header */
	NET_DROP_OVERSIZE,  /* longer than MTU + Ethernet header (+ one VLAN tag); NET_GSO_MAX_FRAME with GSO */
	NET_DROP_VNET_HDR,  /* virtio-net header asks for an offload not negotiated, or out of bounds */
	NET_DROP_BAD_CHAIN, /* descriptor chain of the wrong shape (no header, wrong direction, too many buffers) */
	NET_DROP_MALFORMED, /* an L2/L3/L4 header truncated or inconsistent, or past NET_INSPECT_MAX */
	NET_DROP_FRAGMENT,  /* IP fragment while the policy is an allow-list */
	NET_DROP_POLICY,    /* well formed, not allowed by the policy */
	NET_DROP_SPOOF,     /* source MAC is not the device's (allow-list only) */
	NET_DROP_BACKEND,   /* the TAP refused the frame, or sent one the guest could not take */
	NET_DROP_INGRESS,   /* a TAP frame that is no reply to the guest (net_ingress.h) */
	NET_VERDICT_NR
};

/* What the filter needs of a frame. Addresses in network byte order. */
struct net_flow {
	uint16_t ethertype;  /* after the VLAN tag, host order */
	uint8_t family;      /* 4, 6, or 0 when not IP */
	uint8_t proto;       /* IP protocol of the L4 header (IPv6: after extension headers) */
	uint8_t dst[16];     /* destination address; IPv4 in dst[0..4) */
	uint8_t src[16];     /* source address, likewise */
	bool fragment;       /* IPv4 MF/offset, or an IPv6 fragment header */
	bool first_fragment; /* of those, the first: IPv4's L4 header begins at l4_off, unchecked
			      * (IPv6's is parsed as usual, has_l4) */
	uint32_t frag_id;    /* of a fragment: IPv4's identification, IPv6's fragment header's */
	uint8_t frag_proto;  /* of a fragment: IPv4's protocol, IPv6's fragment header's next header
			      * (the same in every fragment of a datagram) */
	bool l4_peeked;      /* an IPv4 first fragment whose part of the datagram holds the ports
			      * (TCP: and flags) or ICMP type: those are filled */
	bool has_l4;         /* L4 header present and checked (not a non-first fragment) */
	uint16_t dport;      /* TCP/UDP destination port when has_l4 */
	uint16_t sport;      /* TCP/UDP source port when has_l4 */
	uint8_t tcp_flags;   /* TCP: the flags byte (FIN 0x01, SYN 0x02, RST 0x04, ACK 0x10) */
	uint8_t icmp_type;   /* ICMP type when proto is 1 and has_l4 */
	uint8_t icmp6_type;  /* ICMPv6 type when proto is 58 and has_l4 */
	uint8_t ttl;         /* IPv4 TTL, IPv6 hop limit */
	uint16_t l4_off;     /* when has_l4 (or an IPv4 first_fragment): offset of the L4 header in the frame */
	uint16_t l4_hlen;    /* when has_l4: its length (TCP data offset, UDP 8, ICMPv6 4, else 0) */
	bool arp_sha_is_src; /* ARP: sender hardware address is the Ethernet source */
};

/* Parse f[0..cap) of a len-byte frame into *fl. Returns NET_PASS,
 * NET_DROP_RUNT or NET_DROP_MALFORMED; *fl is filled only on NET_PASS. */
enum net_verdict net_frame_parse(const uint8_t *f, size_t cap, size_t len, struct net_flow *fl);

/* Short lowercase label of v ("runt", "policy", ...), for stats output. */
const char *net_verdict_name(enum net_verdict v);

#endif
