/* The agent's parser of the host's tinyvmm.net= word and its NET request
 * (guest/agent_net.c), built here with stand-ins for the agent's log,
 * command line and replies. */
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

struct agent ag; /* not PID 1: a NET request is checked, not applied */

/* The last reply net_request sent. */
static struct {
	uint8_t of_type;
	uint32_t code;
	int err;
	uint64_t value;
	bool ok, error;
	char msg[256];
} reply;

void conn_send_ok(struct conn *c, uint32_t id, uint8_t of_type, uint64_t value)
{
	(void)c;
	(void)id;
	reply.ok = true;
	reply.of_type = of_type;
	reply.value = value;
}

void conn_send_error(struct conn *c, uint32_t id, uint32_t code, int err, const char *fmt, ...)
{
	va_list ap;

	(void)c;
	(void)id;
	reply.error = true;
	reply.code = code;
	reply.err = err;
	va_start(ap, fmt);
	vsnprintf(reply.msg, sizeof(reply.msg), fmt, ap);
	va_end(ap);
}

static void request(const char *spec)
{
	struct tvp_msg m = { .type = TVP_NET, .id = 7, .net = { .spec = tvp_cstr(spec) } };

	memset(&reply, 0, sizeof(reply));
	net_request(NULL, &m);
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
	ck_assert(!c.has_mac);
	ck_assert(net_parse("10.77.0.6/30,gw=10.77.0.5,mac=02:aB:0c:fF:10:9e", &c));
	ck_assert(c.has_mac && c.has_gw && !c.has_dns);
	ck_assert_mem_eq(c.mac, ((const uint8_t[]){ 0x02, 0xab, 0x0c, 0xff, 0x10, 0x9e }), 6);
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
		"10.0.0.1/24,mac=01:00:5e:00:00:01", /* multicast */
		"10.0.0.1/24,mac=02:00:00:00:00",
		"10.0.0.1/24,mac=02:00:00:00:00:00:",
		"10.0.0.1/24,mac=02:00:00:00:00:0g",
		"10.0.0.1/24,mac=02-00-00-00-00-01",
		"10.0.0.1/24,mac=2:0:0:0:0:1",
		"10.0.0.1/24,mac=02:00:00:00:00:01,mac=02:00:00:00:00:02",
		"10.0.0.1/24,mac=",
		/* longer than the parser's buffer */
		"10.0.0.1/24,gw=10.0.0.1,dns=10.0.0.1,xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
	};
	struct net_cfg c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(!net_parse(bad[i], &c), "accepted \"%s\"", bad[i]);
}
END_TEST

/* A NET request: a good spec is answered OK (value 0: a test agent
 * leaves the host's network alone); anything else is ERROR(SYSTEM,
 * EINVAL) naming the spec, and never applied. */
START_TEST(net_requests)
{
	request("10.77.0.6/30,gw=10.77.0.5,mac=02:00:00:00:00:07,dns=10.77.0.5");
	ck_assert(reply.ok && !reply.error);
	ck_assert_uint_eq(reply.of_type, TVP_NET);
	ck_assert_uint_eq(reply.value, 0);
	request("10.77.0.6/30,gw=10.77.0.5,mac=03:00:00:00:00:07");
	ck_assert(reply.error && !reply.ok);
	ck_assert_uint_eq(reply.code, TVP_ERR_SYSTEM);
	ck_assert_int_eq(reply.err, EINVAL);
	ck_assert_str_eq(reply.msg, "NET 10.77.0.6/30,gw=10.77.0.5,mac=03:00:00:00:00:07: expected "
				    "ADDR/PREFIX[,gw=ADDR][,dns=ADDR][,mac=XX:XX:XX:XX:XX:XX]");
	request("");
	ck_assert(reply.error && !reply.ok);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_net");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, good_specs);
	tcase_add_test(tc, bad_specs);
	tcase_add_test(tc, net_requests);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
