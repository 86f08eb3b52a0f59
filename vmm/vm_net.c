/* The VM's network: a virtio-net device over a TAP, with the egress policy
 * built from the config. Off unless asked for. */
#include <arpa/inet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/net/virtio_net.h"
#include "vmm/vm_impl.h"

static void net_kick(void *ctx, unsigned queue)
{
	struct tvm_vm *vm = ctx;

	virtio_mmio_notify(&vm->net_dev->t, queue);
}

static void close_net(void *dev)
{
	virtio_net_close(dev);
}

static int parse_mac(const char *s, uint8_t mac[6], struct tvm_err *e)
{
	unsigned b[6];
	char end;

	if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1], &b[2], &b[3], &b[4], &b[5], &end) != 6)
		return tvm_errf(e, EINVAL, "net mac %s: expected six hex bytes like 02:00:00:00:00:01", s);
	for (int i = 0; i < 6; i++)
		mac[i] = (uint8_t)b[i];
	if (mac[0] & 1)
		return tvm_errf(e, EINVAL, "net mac %s: a multicast address cannot be a NIC's", s);
	return 0;
}

static int build_policy(const struct tvm_net *n, struct net_policy *p, struct tvm_err *e)
{
	int r = 0;

	net_policy_init(p);
	if (n->nr_allow > TVM_MAX_NET_RULES || n->nr_dns > TVM_MAX_NET_DNS)
		return tvm_errf(e, EINVAL, "net: %u rules and %u resolvers, at most %d and %d", n->nr_allow, n->nr_dns,
				TVM_MAX_NET_RULES, TVM_MAX_NET_DNS);
	if (n->deny_all)
		net_policy_deny_all(p);
	for (unsigned i = 0; !r && i < n->nr_allow; i++)
		r = n->allow[i] ? net_policy_add_rule(p, n->allow[i], e)
				: tvm_errf(e, EINVAL, "net: allow rule %u is NULL", i);
	for (unsigned i = 0; !r && i < n->nr_dns; i++)
		r = n->dns[i] ? net_policy_add_dns(p, n->dns[i], e)
			      : tvm_errf(e, EINVAL, "net: resolver %u is NULL", i);
	return r;
}

/* A dotted-quad IPv4 address, with "/PREFIX" (1..32) when prefix: what the
 * agent takes, checked here so a bad value is the user's error at once
 * (not a guest without an address), and so a value cannot smuggle another
 * word onto the guest command line. */
static int ipv4_ok(const char *what, const char *v, bool prefix, struct tvm_err *e)
{
	char addr[16];
	struct in_addr a;
	const char *slash = strchr(v, '/');
	size_t alen = slash ? (size_t)(slash - v) : strlen(v);
	unsigned long bits = 0;
	char *end = NULL;

	if (prefix && slash && slash[1] >= '0' && slash[1] <= '9')
		bits = strtoul(slash + 1, &end, 10);
	if (alen >= sizeof(addr) || !prefix != !slash || (prefix && (!end || *end || bits < 1 || bits > 32)))
		goto bad;
	memcpy(addr, v, alen);
	addr[alen] = 0;
	if (inet_pton(AF_INET, addr, &a) == 1)
		return 0;
bad:
	return tvm_errf(e, EINVAL, "net %s %s: expected an IPv4 address%s", what, v,
			prefix ? " with /PREFIX (1..32)" : "");
}

/* The guest's addresses, as the agent takes them. */
static int guest_addrs_ok(const struct tvm_net *n, struct tvm_err *e)
{
	int r;

	if (!n->guest_ip)
		return n->guest_gw ? tvm_errf(e, EINVAL, "net gw %s: the guest needs an address too (--net-ip)",
					      n->guest_gw)
				   : 0;
	r = ipv4_ok("ip", n->guest_ip, true, e);
	if (!r && n->guest_gw)
		r = ipv4_ok("gw", n->guest_gw, false, e);
	if (!r && n->nr_dns)
		r = ipv4_ok("dns", n->dns[0], false, e);
	return r;
}

/* n's settings checked, and what the device is built from: the policy,
 * the MAC when n->mac (mac untouched without one). */
static int net_settings(const struct tvm_net *n, struct net_policy *policy, uint8_t mac[6], struct tvm_err *e)
{
	int r;

	/* before the device's own check: it takes the MTU as 16 bits */
	if (n->mtu > NET_MAX_MTU)
		return tvm_errf(e, EINVAL, "net: mtu %u: must be %d..%d", n->mtu, NET_MIN_MTU, NET_MAX_MTU);
	r = build_policy(n, policy, e);
	if (!r)
		r = guest_addrs_ok(n, e);
	if (!r && n->mac)
		r = parse_mac(n->mac, mac, e);
	return r;
}

int vm_check_net(const struct tvm_net *n, struct tvm_err *e)
{
	struct net_policy policy;
	uint8_t mac[6];

	return n->enabled ? net_settings(n, &policy, mac, e) : 0;
}

/* tinyvmm.net=ADDR/PREFIX[,gw=ADDR][,dns=ADDR] for the agent (guest/agent_net.c);
 * the addresses were checked by vm_check_net. */
static int guest_net_word(struct tvm_vm *vm, struct tvm_err *e)
{
	const struct tvm_net *n = &vm->cfg.net;
	char word[160];
	int w;

	if (!n->guest_ip)
		return 0;
	w = snprintf(word, sizeof(word), "tinyvmm.net=%s%s%s%s%s", n->guest_ip, n->guest_gw ? ",gw=" : "",
		     n->guest_gw ? n->guest_gw : "", n->nr_dns ? ",dns=" : "", n->nr_dns ? n->dns[0] : "");
	if (w < 0 || (size_t)w >= sizeof(word))
		return tvm_errf(e, E2BIG, "net: addresses too long for the guest command line");
	return vm_cmdline_add(vm, word, e);
}

_Static_assert((int)TVM_NET_DROP_COUNT == (int)NET_VERDICT_NR && (int)TVM_NET_DROP_RUNT == (int)NET_DROP_RUNT &&
		       (int)TVM_NET_DROP_BACKEND == (int)NET_DROP_BACKEND &&
		       (int)TVM_NET_DROP_INGRESS == (int)NET_DROP_INGRESS,
	       "tvm_net_drop mirrors enum net_verdict");

int tvm_vm_net_stats(const struct tvm_vm *vm, struct tvm_net_stats *out)
{
	struct net_stats s;

	memset(out, 0, sizeof(*out));
	if (!vm->net_dev)
		return -ENODEV;
	virtio_net_stats(vm->net_dev->dev, &s);
	*out = (struct tvm_net_stats){ .tx_frames = s.tx_frames,
				       .tx_bytes = s.tx_bytes,
				       .rx_frames = s.rx_frames,
				       .rx_bytes = s.rx_bytes,
				       .tx_gso = s.tx_gso,
				       .rx_gso = s.rx_gso,
				       .rx_dropped = s.rx_dropped,
				       .backend_down = s.backend_down };
	memcpy(out->dropped, s.drops, sizeof(out->dropped));
	return 0;
}

const char *tvm_net_drop_name(unsigned reason)
{
	return reason > 0 && reason < TVM_NET_DROP_COUNT ? net_verdict_name((enum net_verdict)reason) : "?";
}

void vm_net_announce(const struct tvm_vm *vm)
{
	const char *ifname;
	struct ifreq ifr = { 0 };
	char mac[NET_MAC_STR], host_mac[40] = "";
	int s;

	if (!vm->net_dev || vm->cfg.log_fd < 0)
		return;
	ifname = virtio_net_ifname(vm->net_dev->dev);
	/* The TAP's own MAC: what the guest's ARP entry for the host holds
	 * (a restore's TAP should get it too). */
	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", ifname);
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s >= 0 && ioctl(s, SIOCGIFHWADDR, &ifr) == 0)
		snprintf(host_mac, sizeof(host_mac), ", host side %s",
			 net_mac_format((const uint8_t *)ifr.ifr_hwaddr.sa_data, mac));
	if (s >= 0)
		close(s);
	dprintf(vm->cfg.log_fd, "tinyvmm: network on TAP %s (%s%s)\n", ifname,
		vm->net_restricted ? "egress allow-list"
				   : "egress unrestricted: no --net-allow/--net-dns/--net-deny-all",
		host_mac);
}

void vm_net_write_metrics(const struct tvm_vm *vm, FILE *f)
{
	struct tvm_net_stats s;

	if (tvm_vm_net_stats(vm, &s))
		return;
	fprintf(f,
		",\"net\":{\"tx_frames\":%llu,\"tx_bytes\":%llu,\"tx_gso\":%llu,\"rx_frames\":%llu,"
		"\"rx_bytes\":%llu,\"rx_gso\":%llu,\"rx_dropped\":%llu,\"backend_down\":%d,\"dropped\":{",
		(unsigned long long)s.tx_frames, (unsigned long long)s.tx_bytes, (unsigned long long)s.tx_gso,
		(unsigned long long)s.rx_frames, (unsigned long long)s.rx_bytes, (unsigned long long)s.rx_gso,
		(unsigned long long)s.rx_dropped, s.backend_down);
	for (unsigned i = 1; i < TVM_NET_DROP_COUNT; i++)
		fprintf(f, "%s\"%s\":%llu", i > 1 ? "," : "", tvm_net_drop_name(i), (unsigned long long)s.dropped[i]);
	fprintf(f, "}}");
}

int vm_add_net(struct tvm_vm *vm, struct tvm_err *e)
{
	const struct tvm_net *n = &vm->cfg.net;
	struct net_policy policy;
	struct net_opts o = {
		.tap_name = n->tap,
		.fd = -1,
		.id = vm->cfg.vsock_cid,
		.mtu = (uint16_t)n->mtu,
		.policy = &policy,
		.no_offload = n->no_offload,
		.ingress_replies = n->ingress_replies != 0,
		.rx_limit = n->rx,
		.tx_limit = n->tx,
		.io = { .watch = vm_watch, .unwatch = vm_unwatch, .kick = net_kick, .ctx = vm },
	};
	struct virtio_net *dev;
	int r;

	if (!n->enabled)
		return 0;
	r = net_settings(n, &policy, o.mac, e);
	if (!r)
		r = guest_net_word(vm, e);
	if (!r)
		r = virtio_net_open(&dev, &o, e);
	if (r)
		return r;
	vm->net_dev = &vm->vdevs[vm->nr_vdevs];
	r = vdev_attach(
		vm->net_dev, vm->nr_vdevs,
		&(struct vdev_spec){ .name = "virtio-net", .ops = &virtio_net_ops, .dev = dev, .close_dev = close_net },
		&vm->vdev_host, e);
	vm->nr_vdevs++;
	vm->net_restricted = policy.restricted;
	return r;
}
