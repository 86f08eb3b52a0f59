/* libFuzzer target for the virtio-net egress filter (devices/net/net_frame.c,
 * devices/net/net_filter.c, devices/net/net_rule.c).
 *
 * Input byte 0 picks the mode: 0xff, the rest is a rule string for
 * net_rule_parse(); otherwise bits 0-1 pick a policy (allow all, allow
 * every IP destination, DNS only, a few port rules) and byte 1 how many
 * leading bytes the filter may inspect; the rest is the frame. The
 * inspected bytes sit in a buffer of exactly that size, so ASan flags any
 * read past them. Beyond "no crash", checks: allow-all passes everything;
 * a parse that succeeds on a prefix gives the same flow on the whole
 * frame; the DNS-only policy passes only ARP, ND and port 53 to the
 * resolver; a parsed rule is canonical (prefix in range, host bits clear,
 * protocol only with a port). */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <netinet/in.h>

#include "devices/net/net_filter.h"
#include "devices/net/net_ingress.h"

static struct net_policy pol[4];

static void init_policies(void)
{
	static bool done;

	if (done)
		return;
	done = true;
	net_policy_init(&pol[0]);
	net_policy_init(&pol[1]);
	net_policy_add_rule(&pol[1], "0.0.0.0/0", NULL);
	net_policy_add_rule(&pol[1], "::/0", NULL);
	net_policy_init(&pol[2]);
	net_policy_add_dns(&pol[2], "10.0.2.3", NULL);
	net_policy_add_dns(&pol[2], "fd00::3", NULL);
	net_policy_init(&pol[3]);
	net_policy_add_rule(&pol[3], "10.0.0.0/8:443/tcp", NULL);
	net_policy_add_rule(&pol[3], "[2001:db8::/32]:53", NULL);
	net_policy_add_rule(&pol[3], "192.168.1.1", NULL);
}

static void check_rule(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	struct net_rule r;
	struct tvm_err e;
	unsigned max;

	memcpy(s, data, size);
	s[size] = 0;
	if (net_rule_parse(s, &r, &e) == 0) {
		max = r.family == 4 ? 32 : 128;
		if ((r.family != 4 && r.family != 6) || r.prefix > max || (r.proto && !r.port))
			abort();
		for (unsigned bit = r.prefix; bit < max; bit++)
			if (r.addr[bit / 8] & (0x80 >> (bit % 8)))
				abort();
	} else if (!memchr(e.msg, 0, sizeof(e.msg)) || e.code == 0) {
		abort();
	}
	free(s);
}

static bool is_resolver(const struct net_flow *fl)
{
	static const uint8_t v4[4] = { 10, 0, 2, 3 };
	static const uint8_t v6[16] = { 0xfd, 0, [15] = 3 };

	return fl->family == 4 ? !memcmp(fl->dst, v4, 4) : !memcmp(fl->dst, v6, 16);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *f;
	uint8_t *copy;
	size_t len, cap;
	struct net_flow a, b;
	enum net_verdict va, vb, v;
	const struct net_policy *p;

	if (size < 2)
		return 0;
	init_policies();
	if (data[0] == 0xff) {
		check_rule(data + 1, size - 1);
		return 0;
	}
	p = &pol[data[0] & 3];
	f = data + 2;
	len = size - 2;
	cap = data[1] == 0xff ? len : data[1] % (len + 1);
	copy = malloc(cap ? cap : 1);
	memcpy(copy, f, cap);

	v = net_filter(p, copy, cap, len);
	if (p == &pol[0] && v != NET_PASS)
		abort();
	va = net_frame_parse(copy, cap, len, &a);
	vb = net_frame_parse(f, len, len, &b);
	if (va == NET_PASS && (vb != NET_PASS || memcmp(&a, &b, sizeof(a))))
		abort();
	if (va == NET_DROP_RUNT && vb != NET_DROP_RUNT)
		abort();
	if (p == &pol[2] && v == NET_PASS) {
		bool arp = a.ethertype == 0x0806 && !a.family && a.arp_sha_is_src;
		bool nd = a.family == 6 && a.proto == IPPROTO_ICMPV6 && a.icmp6_type >= 133 && a.icmp6_type <= 137 &&
			  a.ttl == 255 &&
			  ((a.dst[0] == 0xfe && (a.dst[1] & 0xc0) == 0x80) || (a.dst[0] == 0xff && a.dst[1] == 2));
		bool dns = a.family && a.has_l4 && a.dport == 53 && !a.fragment && is_resolver(&a) &&
			   (a.proto == IPPROTO_UDP || a.proto == IPPROTO_TCP);

		if (va != NET_PASS || !(arp || nd || dns))
			abort();
	}
	if (p != &pol[0] && v == NET_PASS && (va != NET_PASS || a.fragment))
		abort();
	/* The same bytes from the TAP, replies only, to a device that saw
	 * nothing before: a TCP SYN alone never passes, nor anything the
	 * parser refuses, nor UDP (no flow noted), nor a fragment's tail (no
	 * first passed), nor a fragment of another protocol. */
	{
		static struct net_ingress in;
		enum net_verdict vi;

		memset(&in, 0, sizeof(in));
		in.replies_only = true;
		vi = net_ingress_check(&in, copy, cap, len, 1);
		if (vi == NET_PASS &&
		    (va != NET_PASS ||
		     (a.family && a.has_l4 && a.proto == IPPROTO_TCP && (a.tcp_flags & 0x12) == 0x02) ||
		     (a.family && a.has_l4 && a.proto == IPPROTO_UDP) || (a.fragment && !a.first_fragment) ||
		     (a.fragment && a.proto != IPPROTO_UDP)))
			abort();
	}
	free(copy);
	return 0;
}
