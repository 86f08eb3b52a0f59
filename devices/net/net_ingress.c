#include "devices/net/net_ingress.h"

#include <string.h>

#include <linux/if_ether.h>
#include <netinet/in.h>

#define TCP_SYN 0x02
#define TCP_ACK 0x10

static size_t addr_len(uint8_t family)
{
	return family == 4 ? 4 : 16;
}

void net_ingress_note(struct net_ingress *in, const struct net_flow *sent, uint64_t now_ns)
{
	struct net_udp_flow *slot = NULL, *oldest = &in->udp[0];

	if (!in->replies_only || sent->proto != IPPROTO_UDP || !(sent->has_l4 || sent->l4_peeked) || !sent->family)
		return;
	for (unsigned i = 0; i < NET_UDP_FLOWS; i++) {
		struct net_udp_flow *u = &in->udp[i];

		if (u->seen_ns && u->family == sent->family && u->lport == sent->sport && u->rport == sent->dport &&
		    !memcmp(u->remote, sent->dst, addr_len(sent->family))) {
			slot = u;
			break;
		}
		if (u->seen_ns < oldest->seen_ns)
			oldest = u; /* a free slot (0) is the oldest of all */
	}
	if (!slot) {
		slot = oldest;
		memset(slot, 0, sizeof(*slot));
		slot->family = sent->family;
		memcpy(slot->remote, sent->dst, addr_len(sent->family));
		slot->lport = sent->sport;
		slot->rport = sent->dport;
	}
	slot->seen_ns = now_ns ? now_ns : 1;
}

/* A UDP datagram from the TAP: a reply on a flow the guest opened. */
static bool udp_reply(const struct net_ingress *in, const struct net_flow *fl, uint64_t now_ns)
{
	for (unsigned i = 0; i < NET_UDP_FLOWS; i++) {
		const struct net_udp_flow *u = &in->udp[i];

		if (u->seen_ns && u->family == fl->family && u->lport == fl->dport && u->rport == fl->sport &&
		    !memcmp(u->remote, fl->src, addr_len(fl->family)))
			return now_ns - u->seen_ns <= NET_UDP_IDLE_NS || now_ns < u->seen_ns;
	}
	return false;
}

enum net_verdict net_ingress_check(struct net_ingress *in, const uint8_t *f, size_t cap, size_t len, uint64_t now_ns)
{
	struct net_flow fl;

	if (!in->replies_only)
		return NET_PASS;
	if (net_frame_parse(f, cap, len, &fl) != NET_PASS)
		return NET_DROP_INGRESS;
	if (fl.ethertype == ETH_P_ARP)
		return NET_PASS;
	if (!fl.family)
		return NET_DROP_INGRESS; /* another ethertype, or a second VLAN tag */
	if (fl.fragment && !fl.first_fragment)
		return NET_PASS;
	if (!fl.has_l4 && !fl.l4_peeked) /* a first fragment too short to tell */
		return NET_DROP_INGRESS;
	switch (fl.proto) {
	case IPPROTO_TCP: return (fl.tcp_flags & (TCP_SYN | TCP_ACK)) == TCP_SYN ? NET_DROP_INGRESS : NET_PASS;
	case IPPROTO_UDP: return udp_reply(in, &fl, now_ns) ? NET_PASS : NET_DROP_INGRESS;
	case IPPROTO_ICMP:
		/* RFC 792/950: echo, timestamp, information and address mask requests */
		return fl.family == 4 && fl.icmp_type != 8 && fl.icmp_type != 13 && fl.icmp_type != 15 &&
				       fl.icmp_type != 17
			       ? NET_PASS
			       : NET_DROP_INGRESS;
	case IPPROTO_ICMPV6:
		/* RFC 4443 echo request, RFC 4620 node information query */
		return fl.family == 6 && fl.icmp6_type != 128 && fl.icmp6_type != 139 ? NET_PASS : NET_DROP_INGRESS;
	default: return NET_DROP_INGRESS;
	}
}
