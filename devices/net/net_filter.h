/* Egress policy of the virtio-net device: which guest frames may reach the
 * TAP. Pure functions; the device calls net_filter() on every tx frame.
 *
 * Modes:
 *  - allow all (a zeroed or net_policy_init'ed policy without rules): every
 *    frame passes unparsed (the device still drops runts, oversized frames
 *    and bad virtio-net headers).
 *  - allow-list (after any net_policy_add_rule / _add_dns / _deny_all):
 *    a frame passes when it is well formed (devices/net/net_frame.h) and
 *      . it is ARP whose sender hardware address is the frame's source
 *        (else NET_DROP_SPOOF), or IPv6 neighbour discovery (ICMPv6
 *        133-137: router and neighbour solicitation/advertisement,
 *        redirect) with hop limit 255 to a link-local unicast or multicast
 *        address, so the link works but nothing routable gets out; or
 *      . it is IP, not a fragment, and a rule matches its destination.
 *    Anything else is dropped: other ethertypes (also QinQ), IP fragments
 *    (a non-first fragment has no port to check; the guest's path MTU
 *    discovery avoids them), malformed headers, and IPv6 MLD reports (so
 *    multicast listeners are not announced; ND still works on a TAP).
 *
 * Rules, "CIDR[:PORT[/tcp|udp]]": destination address in CIDR (IPv4 or
 * IPv6; IPv6 with a port goes in brackets, "[2001:db8::/32]:443/tcp"; a
 * bare address is a /32 or /128); with PORT only TCP and UDP to that
 * destination port (and only that protocol with /tcp or /udp), without it
 * every protocol. "deny all but DNS" is an allow-list with only the
 * resolvers' rules: net_policy_add_dns(p, "10.0.2.3") allows UDP and TCP
 * port 53 to 10.0.2.3.
 *
 * What the filter does NOT see or do:
 *  - names: rules are addresses. Allowing "example.com" needs the VMM to
 *    resolve it (or to follow the guest's DNS answers) and add rules; a
 *    later step.
 *  - payloads and connection state: a rule for a destination allows every
 *    packet to it (any source port, any TCP flags); the guest can tunnel
 *    anything through an allowed destination, including DNS to an allowed
 *    resolver (names are not restricted by allowing DNS).
 *  - ingress: frames from the TAP to the guest are not filtered (the host
 *    decides what it routes to the TAP).
 *  - source addresses: the guest may use any source IP (the host's
 *    rp_filter/firewall should pin it); only the source MAC is checked,
 *    by the device.
 */
#ifndef TVM_NET_FILTER_H
#define TVM_NET_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/net/net_frame.h"
#include "vmm/core/err.h"

#define NET_MAX_RULES 64

/* One allow rule. addr is masked to prefix bits (network byte order). */
struct net_rule {
	uint8_t family; /* 4 or 6 */
	uint8_t prefix; /* 0..32 or 0..128 */
	uint8_t proto;  /* 0: any (with port: TCP or UDP), else IPPROTO_TCP/UDP */
	uint16_t port;  /* 0: any protocol, any port */
	uint8_t addr[16];
};

struct net_policy {
	bool restricted; /* allow-list mode; false: allow all */
	unsigned nr;
	struct net_rule r[NET_MAX_RULES];
};

/* Allow-all policy. A zeroed struct is the same. */
void net_policy_init(struct net_policy *p);

/* Switch to allow-list mode without adding a rule (nothing but ARP and ND
 * passes until rules are added). */
void net_policy_deny_all(struct net_policy *p);

/* Parse s ("CIDR[:PORT[/tcp|udp]]") into *r. Returns 0, or -EINVAL with
 * e = "net-allow S: reason" (e.g. "net-allow 10.0.0.0/33: prefix length
 * over 32"). */
int net_rule_parse(const char *s, struct net_rule *r, struct tvm_err *e);

/* Parse s and add it; switches p to allow-list mode. Returns 0, -EINVAL
 * (see net_rule_parse) or -ENOSPC past NET_MAX_RULES. */
int net_policy_add_rule(struct net_policy *p, const char *s, struct tvm_err *e);

/* Allow DNS (UDP and TCP port 53) to the resolver at addr (an IPv4 or IPv6
 * address, no prefix, no port); switches p to allow-list mode. Returns 0,
 * -EINVAL with e = "net-dns ADDR: reason", or -ENOSPC. */
int net_policy_add_dns(struct net_policy *p, const char *addr, struct tvm_err *e);

/* Whether r allows fl (an IP flow, not a fragment). */
bool net_rule_match(const struct net_rule *r, const struct net_flow *fl);

/* Verdict on the len-byte frame whose first cap bytes are f (cap <= len;
 * see net_frame.h): NET_PASS or the drop reason (RUNT, MALFORMED, FRAGMENT,
 * POLICY, SPOOF for ARP). Never reads past f[cap). */
enum net_verdict net_filter(const struct net_policy *p, const uint8_t *f, size_t cap, size_t len);

#endif
