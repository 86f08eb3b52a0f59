/* The guest's network, configured by the agent (PID 1) from the host's
 * command-line word `tinyvmm.net=ADDR/PREFIX[,gw=ADDR][,dns=ADDR]` (IPv4):
 * eth0 gets the address and comes up, the default route goes via gw, and
 * /etc/resolv.conf names dns. No DHCP: the guest kernel has no IP_PNP and
 * the VMM's egress filter would drop DHCP under an allow-list anyway. */
#include "guest/agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
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
		else
			return false;
	}
	return true;
}

static int net_apply(const struct net_cfg *c)
{
	struct ifreq ifr = { .ifr_name = NET_IF };
	struct rtentry rt = { .rt_flags = RTF_UP | RTF_GATEWAY, .rt_dev = (char *)NET_IF };
	struct in_addr any = { .s_addr = INADDR_ANY };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = -1;

	if (s < 0)
		return -1;
	set_sin(&ifr.ifr_addr, c->addr);
	if (ioctl(s, SIOCSIFADDR, &ifr) < 0)
		goto out;
	set_sin(&ifr.ifr_netmask, c->mask);
	if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0 || ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		goto out;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		goto out;
	if (c->has_gw) {
		set_sin(&rt.rt_dst, any);
		set_sin(&rt.rt_genmask, any);
		set_sin(&rt.rt_gateway, c->gw);
		if (ioctl(s, SIOCADDRT, &rt) < 0)
			goto out;
	}
	r = 0;
out:
	if (r)
		agent_log(NET_IF ": %s", strerror(errno));
	close(s);
	return r;
}

void net_setup_from_cmdline(void)
{
	char spec[128];
	struct net_cfg c;
	FILE *f;

	if (!sys_cmdline_get("tinyvmm.net", spec, sizeof(spec)))
		return;
	if (!net_parse(spec, &c)) {
		agent_log("tinyvmm.net=%s: expected ADDR/PREFIX[,gw=ADDR][,dns=ADDR]", spec);
		return;
	}
	if (net_apply(&c) || !c.has_dns)
		return;
	f = fopen("/etc/resolv.conf", "we");
	if (!f) {
		agent_log("/etc/resolv.conf: %s", strerror(errno));
		return;
	}
	fprintf(f, "nameserver %s\n", inet_ntoa(c.dns));
	fclose(f);
}
