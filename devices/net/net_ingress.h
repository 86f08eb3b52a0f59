/* Ingress of the virtio-net device in "replies only" mode
 * (tvm_net.ingress_replies): which frames from the TAP may reach the
 * guest. The guest may open connections out (as its egress policy
 * allows); nothing outside may open one in: a server in the guest is not
 * reachable from the host (another user's process, another sandbox's
 * owner). Pure functions over a table the device keeps, run with its
 * transport lock held (tx and rx are both queue runs).
 *
 * A TAP frame passes when it is
 *  - ARP;
 *  - TCP without SYN, or with SYN and ACK (a reply to the guest's own
 *    SYN): a SYN alone, a new connection in, is dropped. Stateless: a
 *    forged segment of a connection that does not exist gets the guest's
 *    RST, and connections the guest had before a pause still work after
 *    its resume (no table to lose);
 *  - UDP from an address and port the guest sent UDP to, from the port it
 *    sent from, within NET_UDP_IDLE_NS of its last datagram on that flow
 *    (DNS answers, NTP): the last NET_UDP_FLOWS flows are kept, the
 *    least recently used replaced;
 *  - ICMP other than a request (echo, timestamp, information, address
 *    mask: no ping, no discovery), so errors (unreachable, too big for
 *    path MTU discovery, time exceeded) and echo replies pass; ICMPv6
 *    other than an echo or node information query (neighbour and router
 *    discovery, errors, replies pass);
 *  - an IP fragment of a UDP datagram (TCP sets DF, ICMP errors are
 *    small: TCP and ICMP fragments are dropped): the first is checked
 *    as above by the part of its UDP header its share of the datagram
 *    holds (not Ethernet padding after it), and refused when too short
 *    to show its ports (RFC 1858); one after the first only when its
 *    first passed (same addresses, identification and protocol) within
 *    NET_FRAG_TTL_NS, the last NET_FRAGS datagrams kept. So what a host
 *    process can queue in the guest's reassembly is bounded by the UDP
 *    flows the guest opened. The cost: a datagram whose fragments come
 *    out of order (a tail before its first) is lost and sent again by
 *    its sender; on a TAP they come in order.
 * Anything else is dropped and counted (NET_DROP_INGRESS): other
 * ethertypes, other IP protocols, malformed headers.
 */
#ifndef TVM_NET_INGRESS_H
#define TVM_NET_INGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/net/net_frame.h"

#define NET_UDP_FLOWS 256                        /* UDP flows the guest opened, kept */
#define NET_UDP_IDLE_NS (180ull * 1000000000ull) /* a flow with no datagram out this long is gone */
#define NET_FRAGS 64                             /* fragmented datagrams whose first fragment passed, kept */
#define NET_FRAG_TTL_NS (60ull * 1000000000ull)  /* IPv6's reassembly time (RFC 8200 4.5), IPv4's is less */

/* What an entry of the device's tables is known by: a UDP flow the guest
 * sent on (its local address and port, the remote ones), or a fragmented
 * datagram from the TAP whose first fragment passed (source, destination,
 * identification, protocol). Addresses in network byte order, ports host
 * order. Built zeroed whole (the tables compare keys as bytes). */
struct net_ingress_key {
	uint32_t frag_id;
	uint16_t lport, rport;
	uint8_t family, proto;
	uint8_t remote[16], local[16];
};

struct net_ingress_entry {
	uint64_t seen_ns; /* when it was last noted; 0: slot free */
	struct net_ingress_key key;
};

struct net_ingress {
	bool replies_only; /* off: every TAP frame passes unparsed */
	struct net_ingress_entry udp[NET_UDP_FLOWS];
	struct net_ingress_entry frags[NET_FRAGS];
};

/* A frame the guest sent (it passed the egress checks): a UDP datagram
 * opens or refreshes its flow. now_ns: a monotonic clock. */
void net_ingress_note(struct net_ingress *in, const struct net_flow *sent, uint64_t now_ns);

/* Whether f[0..cap) of a len-byte TAP frame may reach the guest:
 * NET_PASS or NET_DROP_INGRESS. */
enum net_verdict net_ingress_check(struct net_ingress *in, const uint8_t *f, size_t cap, size_t len, uint64_t now_ns);

#endif
