/* The daemon's network bookkeeping (vmm/serve/serve_net.c): a fork's
 * child's egress flags made from its parent's, the MAC made from a
 * sandbox's id, the claim of a /30, and (as root) a real TAP as the
 * helper makes it. Built here with a stand-in for the flag list. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/serve/serve_net.c"
#include "tests/unit.h"

int sb_net_arg_add(struct sandbox *sb, const char *flag, const char *value)
{
	char **v = realloc(sb->net_args, (sb->nnet_args + 3) * sizeof(*v));

	ck_assert_ptr_nonnull(v);
	sb->net_args = v;
	v[sb->nnet_args++] = strdup(flag);
	if (value)
		v[sb->nnet_args++] = strdup(value);
	v[sb->nnet_args] = NULL;
	return 0;
}

/* The privileged helper's answers (vmm/serve/serve_priv.c): the host's
 * addresses are host_addrs; a TAP is never made here. */
static uint32_t host_addrs[4];
static int nhost_addrs;

int priv_addrs(struct srv *s, uint32_t *out, size_t cap)
{
	(void)s;
	ck_assert_uint_ge(cap, (size_t)nhost_addrs);
	memcpy(out, host_addrs, sizeof(uint32_t) * (size_t)nhost_addrs);
	return nhost_addrs;
}

int priv_tap_up(struct srv *s, const char *name, uint32_t host, char *err, size_t cap)
{
	(void)s, (void)name, (void)host, (void)err, (void)cap;
	return -ENOSYS;
}

int priv_tap_down(struct srv *s, const char *name)
{
	(void)s, (void)name;
	return -ENOSYS;
}

static void free_args(struct sandbox *sb)
{
	for (unsigned i = 0; i < sb->nnet_args; i++)
		free(sb->net_args[i]);
	free(sb->net_args);
}

/* Only what names the parent's own /30 (an address, or a CIDR of prefix
 * 30 or more inside it) moves to the child's /30; the rest is the
 * parent's policy as it was. */
START_TEST(child_rules_name_its_own_30)
{
	static const char *const parent[] = {
		"--net-allow",    "10.232.0.0/30:8099/tcp", /* its whole /30 */
		"--net-allow",    "10.232.0.1:8098/tcp",    /* its gateway */
		"--net-allow",    "10.232.0.1/32",          /* the default rules' */
		"--net-allow",    "10.232.0.2/31",          /* part of it */
		"--net-allow",    "10.232.0.13/32",         /* 10.232.0.1 as a prefix of the text only */
		"--net-allow",    "10.232.0.0/24:80/tcp",   /* wider: the user's, kept */
		"--net-allow",    "10.232.0.0/29",          /* wider too */
		"--net-allow",    "::/0",
		"--net-dns",      "10.232.0.1",
		"--net-dns",      "2001:db8::1",
		"--net-deny-all",
	};
	static const char *const want[] = {
		"--net-allow",    "10.232.0.4/30:8099/tcp",
		"--net-allow",    "10.232.0.5:8098/tcp",
		"--net-allow",    "10.232.0.5/32",
		"--net-allow",    "10.232.0.6/31",
		"--net-allow",    "10.232.0.13/32",
		"--net-allow",    "10.232.0.0/24:80/tcp",
		"--net-allow",    "10.232.0.0/29",
		"--net-allow",    "::/0",
		"--net-dns",      "10.232.0.5",
		"--net-dns",      "2001:db8::1",
		"--net-deny-all",
	};
	struct sandbox p = { .net_host = 0x0ae80001,
			     .net_args = (char **)parent,
			     .nnet_args = sizeof(parent) / sizeof(*parent) };
	struct sandbox c = { .net_host = 0x0ae80005 };

	ck_assert_int_eq(net_inherit_args(&c, &p), 0);
	ck_assert_uint_eq(c.nnet_args, sizeof(want) / sizeof(*want));
	for (unsigned i = 0; i < c.nnet_args; i++)
		ck_assert_str_eq(c.net_args[i], want[i]);
	ck_assert_ptr_null(c.net_args[c.nnet_args]);
	free_args(&c);
}
END_TEST

/* A /30 is claimed by address: not one another sandbox holds, not one
 * the host has an address in (the helper's list), the lowest else. */
START_TEST(claim_skips_held_and_host_30s)
{
	static struct srv s;
	struct host_addrs h;
	struct sandbox a = { 0 }, b = { 0 };

	s.cfg.net_base = 0x0ad30000;
	s.cfg.net_prefix = 28; /* 4 /30s */
	host_addrs[0] = 0x7f000001;
	host_addrs[1] = 0x0ad30002; /* the first /30's guest end, on a host interface */
	nhost_addrs = 2;
	net_host_addrs_ask(&s, &h);
	ck_assert_uint_eq(net_free_locked(&s, &h), 3);
	ck_assert_int_eq(net_claim_locked(&s, &a, &h), 0);
	ck_assert_uint_eq(a.net_host, 0x0ad30005);
	s.sandboxes = &a;
	ck_assert_int_eq(net_claim_locked(&s, &b, &h), 0);
	ck_assert_uint_eq(b.net_host, 0x0ad30009);
	a.next = &b;
	ck_assert_uint_eq(net_free_locked(&s, &h), 1);
	host_addrs[2] = 0x0ad3000d;
	nhost_addrs = 3;
	ck_assert_uint_eq(net_free_locked(&s, &h), 1); /* what was asked is what counts */
	net_host_addrs_ask(&s, &h);
	ck_assert_uint_eq(net_free_locked(&s, &h), 0);
	struct sandbox c = { 0 };
	ck_assert_int_eq(net_claim_locked(&s, &c, &h), -ENOSPC);
	nhost_addrs = 0;
}
END_TEST

/* A saved state's host end is input: only what a range could give. */
START_TEST(host_ends_a_tap_may_have)
{
	ck_assert(net_host_ok(0x0ad30005));  /* 10.211.0.5 */
	ck_assert(!net_host_ok(0x0ad30006)); /* not a /30's first host */
	ck_assert(!net_host_ok(0xfffffffd)); /* 255.255.255.253 */
	ck_assert(!net_host_ok(0xe0000001)); /* multicast */
	ck_assert(!net_host_ok(0x7f000001)); /* loopback */
	ck_assert(!net_host_ok(0x00000005)); /* 0/8 */
}
END_TEST

START_TEST(mac_from_id)
{
	struct sandbox sb = { .id = "sbx_0a1b2c3d4e5f60718293a4b5c6d7e8f9" };
	char mac[18];

	net_mac(&sb, mac);
	ck_assert_str_eq(mac, "02:0a:1b:2c:3d:4e"); /* locally administered, unicast */
}
END_TEST

/* One sysctl of a TAP, read back: its first byte, or 0 if unreadable. */
static char tap_sysctl_value(const char *fmt, const char *name)
{
	char path[96], v = 0;
	FILE *f;

	snprintf(path, sizeof(path), fmt, name);
	if (!(f = fopen(path, "r")))
		return 0;
	if (fread(&v, 1, 1, f) != 1)
		v = 0;
	fclose(f);
	return v;
}

/* A real TAP as the helper makes it (root and /dev/net/tun, else this
 * says why and passes): its host end, strict rp_filter, IPv6 off (a
 * guest's IPv6 with a spoofed source would be forwarded otherwise). */
START_TEST(tap_pins_the_guests_source)
{
	char name[IFNAMSIZ], err[200] = "";
	uint32_t a, host = 0x0afefd01; /* 10.254.253.1, a /30 no test uses */
	struct ifaddrs *ifs;
	bool found = false;
	int r;

	if (geteuid() != 0 || access("/dev/net/tun", R_OK | W_OK) < 0) {
		fprintf(stderr, "tap_pins_the_guests_source: skipped (needs root and /dev/net/tun)\n");
		return;
	}
	snprintf(name, sizeof(name), "tvt%x", (unsigned)getpid() & 0xfffffff);
	r = net_tap_up(name, host, err, sizeof(err));
	if (r == -EADDRINUSE) {
		fprintf(stderr, "tap_pins_the_guests_source: skipped (%s)\n", err);
		return;
	}
	ck_assert_msg(r == 0, "%s", err);
	ck_assert_int_eq(getifaddrs(&ifs), 0);
	for (const struct ifaddrs *i = ifs; i; i = i->ifa_next)
		found |= !strcmp(i->ifa_name, name) && ifa_ipv4(i, &a) && a == host;
	freeifaddrs(ifs);
	char rp = tap_sysctl_value("/proc/sys/net/ipv4/conf/%s/rp_filter", name);
	bool v6 = access("/proc/sys/net/ipv6/conf/all", F_OK) == 0;
	char off6 = tap_sysctl_value("/proc/sys/net/ipv6/conf/%s/disable_ipv6", name);

	ck_assert_int_eq(net_tap_down(name), 0);
	ck_assert(found);
	ck_assert_int_eq(rp, '1');
	if (v6)
		ck_assert_int_eq(off6, '1');
	ck_assert_uint_eq(if_nametoindex(name), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("serve_net");
	TCase *tc = tcase_create("fork");

	tcase_add_test(tc, child_rules_name_its_own_30);
	tcase_add_test(tc, mac_from_id);
	tcase_add_test(tc, host_ends_a_tap_may_have);
	tcase_add_test(tc, claim_skips_held_and_host_30s);
	tcase_add_test(tc, tap_pins_the_guests_source);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
