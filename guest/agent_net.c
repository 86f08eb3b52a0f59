/* The guest's network, configured by the agent (PID 1) from the host's
 * command-line word `tinyvmm.net=ADDR/PREFIX[,gw=ADDR][,dns=ADDR]` (IPv4):
 * eth0 gets the address and comes up, the default route goes via gw, and
 * /etc/resolv.conf names dns. The host's NET request does it for a VM
 * restored from another's snapshot (a template's guest has no address, a
 * fork's child has its parent's), with a MAC of its own if given. No DHCP: the guest kernel has no IP_PNP and
 * the VMM's egress filter would drop DHCP under an allow-list anyway. */
#include "guest/agent.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <net/route.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define NET_IF "eth0"

static void set_sin(struct sockaddr *sa, struct in_addr a)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr = a };

	memcpy(sa, &sin, sizeof(sin));
}

/* "XX:XX:XX:XX:XX:XX", hex, unicast (a NIC's own address). */
static bool mac_parse(const char *s, uint8_t mac[6])
{
	for (int i = 0; i < 6; i++, s += 3) {
		unsigned v;
		char hex[3] = { s[0], s[0] ? s[1] : 0, 0 };

		if (!isxdigit((unsigned char)hex[0]) || !isxdigit((unsigned char)hex[1]) || s[2] != (i < 5 ? ':' : 0) ||
		    sscanf(hex, "%2x", &v) != 1)
			return false;
		mac[i] = (uint8_t)v;
	}
	return !(mac[0] & 1);
}

/* Parse "ADDR/PREFIX[,gw=ADDR][,dns=ADDR]"; false on anything else. */
bool net_parse(const char *spec, struct net_cfg *c)
{
	char buf[128], *save = NULL, *tok, *slash, *end;
	long prefix;

	memset(c, 0, sizeof(*c));
	if (strlen(spec) >= sizeof(buf))
		return false;
	strcpy(buf, spec);
	tok = strtok_r(buf, ",", &save);
	if (!tok || !(slash = strchr(tok, '/')))
		return false;
	*slash = 0;
	prefix = strtol(slash + 1, &end, 10);
	if (*end || end == slash + 1 || prefix < 1 || prefix > 32 || inet_pton(AF_INET, tok, &c->addr) != 1)
		return false;
	c->mask.s_addr = htonl(prefix == 32 ? 0xffffffffu : ~(0xffffffffu >> prefix));
	while ((tok = strtok_r(NULL, ",", &save))) {
		if (!strncmp(tok, "gw=", 3) && !c->has_gw && inet_pton(AF_INET, tok + 3, &c->gw) == 1)
			c->has_gw = true;
		else if (!strncmp(tok, "dns=", 4) && !c->has_dns && inet_pton(AF_INET, tok + 4, &c->dns) == 1)
			c->has_dns = true;
		else if (!strncmp(tok, "mac=", 4) && !c->has_mac && mac_parse(tok + 4, c->mac))
			c->has_mac = true;
		else
			return false;
	}
	return true;
}

/* Set eth0 as c says: 0, or -errno with *what the step that failed. An
 * address it had before goes (SIOCSIFADDR replaces it, and the kernel
 * flushes the routes through it), and so does its default route, so a
 * second call re-addresses it. */
static int net_apply(const struct net_cfg *c, const char **what)
{
	struct ifreq ifr = { .ifr_name = NET_IF };
	struct rtentry rt = { .rt_flags = RTF_UP, .rt_dev = (char *)NET_IF };
	struct in_addr any = { .s_addr = INADDR_ANY };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = 0;

	*what = "socket";
	if (s < 0)
		return -errno;
	set_sin(&rt.rt_dst, any);
	set_sin(&rt.rt_genmask, any);
	/* no gateway named: any default route of eth0 matches */
	for (int i = 0; i < 8 && ioctl(s, SIOCDELRT, &rt) == 0; i++)
		;
	if (c->has_mac) {
		ifr.ifr_hwaddr.sa_family = ARPHRD_ETHER;
		memcpy(ifr.ifr_hwaddr.sa_data, c->mac, 6);
		*what = "its MAC";
		if (ioctl(s, SIOCSIFHWADDR, &ifr) < 0)
			goto fail;
	}
	set_sin(&ifr.ifr_addr, c->addr);
	*what = "its address";
	if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
		goto fail;
	set_sin(&ifr.ifr_netmask, c->mask);
	*what = "its netmask";
	if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		goto fail;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	*what = "up";
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		goto fail;
	if (c->has_gw) {
		rt.rt_flags = RTF_UP | RTF_GATEWAY;
		set_sin(&rt.rt_gateway, c->gw);
		*what = "its default route";
		if (ioctl(s, SIOCADDRT, &rt) < 0)
			goto fail;
	}
	close(s);
	return 0;
fail:
	r = -errno;
	close(s);
	return r;
}

/* /etc/resolv.conf names c's dns, if it has one: 0 or -errno. */
static int resolv_write(const struct net_cfg *c, const char **what)
{
	FILE *f;
	int r = 0;

	if (!c->has_dns)
		return 0;
	*what = "/etc/resolv.conf";
	f = fopen("/etc/resolv.conf", "we");
	if (!f)
		return -errno;
	if (fprintf(f, "nameserver %s\n", inet_ntoa(c->dns)) < 0)
		r = -EIO;
	if (fclose(f) && !r)
		r = -errno;
	return r;
}

void net_request(struct conn *c, const struct tvp_msg *m)
{
	char spec[TVP_MAX_NET + 1];
	struct net_cfg cfg;
	const char *what;
	int r;

	/* parse checked len <= TVP_MAX_NET and no NUL inside */
	memcpy(spec, m->net.spec.p, m->net.spec.len);
	spec[m->net.spec.len] = 0;
	if (!net_parse(spec, &cfg)) {
		conn_send_error(c, m->id, TVP_ERR_SYSTEM, EINVAL,
				"NET %s: expected ADDR/PREFIX[,gw=ADDR][,dns=ADDR][,mac=XX:XX:XX:XX:XX:XX]", spec);
		return;
	}
	if (!ag.system) {
		conn_send_ok(c, m->id, TVP_NET, 0); /* a test agent leaves the host's network alone */
		return;
	}
	if ((r = net_apply(&cfg, &what)) < 0 || (r = resolv_write(&cfg, &what)) < 0) {
		conn_send_error(c, m->id, TVP_ERR_SYSTEM, -r, NET_IF " %s: %s", what, strerror(-r));
		return;
	}
	agent_log(NET_IF " is now %s", spec);
	conn_send_ok(c, m->id, TVP_NET, 1);
}

void net_setup_from_cmdline(void)
{
	char spec[128];
	struct net_cfg c;
	const char *what;
	int r;

	if (!sys_cmdline_get("tinyvmm.net", spec, sizeof(spec)))
		return;
	if (!net_parse(spec, &c)) {
		agent_log("tinyvmm.net=%s: expected ADDR/PREFIX[,gw=ADDR][,dns=ADDR]", spec);
		return;
	}
	if ((r = net_apply(&c, &what)) < 0 || (r = resolv_write(&c, &what)) < 0)
		agent_log(NET_IF " %s: %s", what, strerror(-r));
}
