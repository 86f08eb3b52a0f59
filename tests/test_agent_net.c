/* The agent's parser of the host's tinyvmm.net= word (guest/agent_net.c),
 * built here with stand-ins for the agent's log and command line. */
#include <arpa/inet.h>
#include <check.h>
#include <stdarg.h>

#include "guest/agent_net.c"
#include "tests/unit.h"

void agent_log(const char *fmt, ...)
{
	(void)fmt;
}

bool sys_cmdline_get(const char *key, char *val, size_t len)
{
	(void)key;
	(void)val;
	(void)len;
	return false;
}

static const char *ip(struct in_addr a)
{
	return inet_ntoa(a);
}

START_TEST(good_specs)
{
	struct net_cfg c;

	ck_assert(net_parse("10.77.0.2/24,gw=10.77.0.1,dns=10.77.0.53", &c));
	ck_assert_str_eq(ip(c.addr), "10.77.0.2");
	ck_assert_str_eq(ip(c.mask), "255.255.255.0");
	ck_assert(c.has_gw && c.has_dns);
	ck_assert_str_eq(ip(c.gw), "10.77.0.1");
	ck_assert_str_eq(ip(c.dns), "10.77.0.53");
	ck_assert(net_parse("192.168.1.9/32", &c));
	ck_assert_str_eq(ip(c.mask), "255.255.255.255");
	ck_assert(!c.has_gw && !c.has_dns);
	ck_assert(net_parse("10.0.0.1/1", &c));
	ck_assert_str_eq(ip(c.mask), "128.0.0.0");
}
END_TEST

START_TEST(bad_specs)
{
	static const char *const bad[] = {
		"",
		"10.0.0.1",
		"10.0.0.1/",
		"10.0.0.1/0",
		"10.0.0.1/33",
		"10.0.0.1/24x",
		"10.0.0/24",
		"10.0.0.1/24,gw=",
		"10.0.0.1/24,gw=1.2.3",
		"10.0.0.1/24,dns=x",
		"10.0.0.1/24,route=1.1.1.1",
		"::1/64",
		"10.0.0.1/-1",
		"10.0.0.1/24,gw=10.0.0.1,gw=10.0.0.2",
		"10.0.0.1/24,dns=10.0.0.1,dns=10.0.0.2",
		/* longer than the parser's buffer */
		"10.0.0.1/24,gw=10.0.0.1,dns=10.0.0.1,xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	};
	struct net_cfg c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!net_parse(bad[i], &c), "accepted \"%s\"", bad[i]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_net");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, good_specs);
	tcase_add_test(tc, bad_specs);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
