/* The daemon's network bookkeeping (vmm/serve/serve_net.c) that needs no
 * TAP: a fork's child's egress flags made from its parent's, and the MAC
 * made from a sandbox's id. Built here with a stand-in for the flag list. */
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

START_TEST(mac_from_id)
{
	struct sandbox sb = { .id = "sbx_0a1b2c3d4e5f60718293a4b5c6d7e8f9" };
	char mac[18];

	net_mac(&sb, mac);
	ck_assert_str_eq(mac, "02:0a:1b:2c:3d:4e"); /* locally administered, unicast */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("serve_net");
	TCase *tc = tcase_create("fork");

	tcase_add_test(tc, child_rules_name_its_own_30);
	tcase_add_test(tc, mac_from_id);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
