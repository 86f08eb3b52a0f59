#include "devices/net/net_ingress.h"

#include <string.h>

#include <linux/if_ether.h>
#include <netinet/in.h>

#define TCP_SYN 0x02
#define TCP_ACK 0x10

/* The key of fl's UDP flow, seen from the guest (out: fl was sent by it;
 * else fl came from the TAP), or of its fragmented datagram. */
static void key_of(struct net_ingress_key *k, const struct net_flow *fl, bool out, bool frag)
{
	size_t alen = fl->family == 4 ? 4 : 16;

	memset(k, 0, sizeof(*k));
	k->family = fl->family;
	if (frag) {
		k->frag_id = fl->frag_id;
		k->proto = fl->frag_proto;
		memcpy(k->remote, fl->src, alen);
		memcpy(k->local, fl->dst, alen);
		return;
	}
	k->proto = IPPROTO_UDP;
	k->lport = out ? fl->sport : fl->dport;
	k->rport = out ? fl->dport : fl->sport;
	memcpy(k->remote, out ? fl->dst : fl->src, alen);
	memcpy(k->local, out ? fl->src : fl->dst, alen);
}

/* k's entry in t[0..n) seen within ttl_ns of now_ns, or NULL. */
static const struct net_ingress_entry *find(const struct net_ingress_entry *t, unsigned n,
					    const struct net_ingress_key *k, uint64_t ttl_ns, uint64_t now_ns)
{
	for (unsigned i = 0; i < n; i++)
		if (t[i].seen_ns && !memcmp(&t[i].key, k, sizeof(*k)))
			return now_ns - t[i].seen_ns <= ttl_ns || now_ns < t[i].seen_ns ? &t[i] : NULL;
	return NULL;
}

/* Notes k in t[0..n) as seen at now_ns: its entry, or the least recently
 * seen one (a free slot first) replaced. */
static void note(struct net_ingress_entry *t, unsigned n, const struct net_ingress_key *k, uint64_t now_ns)
{
	struct net_ingress_entry *slot = NULL, *oldest = &t[0];

	for (unsigned i = 0; i < n && !slot; i++) {
		if (t[i].seen_ns && !memcmp(&t[i].key, k, sizeof(*k)))
			slot = &t[i];
		else if (t[i].seen_ns < oldest->seen_ns)
			oldest = &t[i]; /* a free slot (0) is the oldest of all */
	}
	if (!slot) {
		slot = oldest;
		memcpy(&slot->key, k, sizeof(*k)); /* padding too: keys are compared as bytes */
	}
	slot->seen_ns = now_ns ? now_ns : 1;
}

void net_ingress_note(struct net_ingress *in, const struct net_flow *sent, uint64_t now_ns)
{
	struct net_ingress_key k;

	if (!in->replies_only || sent->proto != IPPROTO_UDP || !(sent->has_l4 || sent->l4_peeked) || !sent->family)
		return;
	key_of(&k, sent, true, false);
	note(in->udp, NET_UDP_FLOWS, &k, now_ns);
}

/* Whether fl, from the TAP with its L4 header known, may reach the guest. */
static bool l4_reply(const struct net_ingress *in, const struct net_flow *fl, uint64_t now_ns)
{
	struct net_ingress_key k;

	switch (fl->proto) {
	case IPPROTO_TCP: return (fl->tcp_flags & (TCP_SYN | TCP_ACK)) != TCP_SYN;
	case IPPROTO_UDP:
		key_of(&k, fl, false, false);
		return find(in->udp, NET_UDP_FLOWS, &k, NET_UDP_IDLE_NS, now_ns);
	case IPPROTO_ICMP:
		/* RFC 792/950: echo, timestamp, information and address mask requests */
		return fl->family == 4 && fl->icmp_type != 8 && fl->icmp_type != 13 && fl->icmp_type != 15 &&
		       fl->icmp_type != 17;
	case IPPROTO_ICMPV6:
		/* RFC 4443 echo request, RFC 4620 node information query */
		return fl->family == 6 && fl->icmp6_type != 128 && fl->icmp6_type != 139;
	default: return false;
	}
}

enum net_verdict net_ingress_check(struct net_ingress *in, const uint8_t *f, size_t cap, size_t len, uint64_t now_ns)
{
	struct net_ingress_key k;
	struct net_flow fl;

	if (!in->replies_only)
		return NET_PASS;
	if (net_frame_parse(f, cap, len, &fl) != NET_PASS)
		return NET_DROP_INGRESS;
	if (fl.ethertype == ETH_P_ARP)
		return NET_PASS;
	if (!fl.family)
		return NET_DROP_INGRESS;         /* another ethertype, or a second VLAN tag */
	if (fl.fragment && !fl.first_fragment) { /* a tail: its first must have passed */
		key_of(&k, &fl, false, true);
		return find(in->frags, NET_FRAGS, &k, NET_FRAG_TTL_NS, now_ns) ? NET_PASS : NET_DROP_INGRESS;
	}
	if (!fl.has_l4 && !fl.l4_peeked) /* a first fragment too short to tell */
		return NET_DROP_INGRESS;
	/* Only UDP replies come in fragments (large DNS answers): TCP sets
	 * DF, ICMP errors are small. A TCP ACK or ICMP reply's first
	 * fragment passes its stateless check, and its tails would then:
	 * any number of datagrams queued in the guest, the table flushed. */
	if (fl.fragment && fl.proto != IPPROTO_UDP)
		return NET_DROP_INGRESS;
	if (!l4_reply(in, &fl, now_ns))
		return NET_DROP_INGRESS;
	if (fl.fragment) {
		key_of(&k, &fl, false, true);
		note(in->frags, NET_FRAGS, &k, now_ns);
	}
	return NET_PASS;
}
