/* tvm_agent_connect over a hybrid vsock Unix socket, against a fake VMM
 * that plays a VM still booting: its socket appears late, the guest refuses
 * the port (the agent does not listen yet), a CONNECT stays unanswered (the
 * guest's vsock driver is not up yet); then it answers with the agent's
 * READY. The client must wait through all of that within its deadline,
 * give up on what will never work, and send SEED when asked. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "guest/protocol.h"
#include "tests/unit.h"
#include "vmm/tinyvmm.h"

#define WAIT_MS 60000 /* deadline given to the client: never reached when it works */

/* What the fake VMM does with one connection, after reading its CONNECT. */
enum act {
	REFUSE,     /* close: the guest refused the port */
	SILENT,     /* no answer until the client hangs up */
	NOT_AGENT,  /* a line that is not "OK <port>" */
	ANSWER,     /* "OK", the agent's READY, then OK to each SEED */
	SEED_RESET, /* as ANSWER, but the SEED finds the connection closed: a
		     * restored guest's vsock transport reset ends the
		     * connections it accepted before it saw the reset */
	BUSY,       /* "OK", then the agent's ERROR LIMIT: its connections are all in use */
};

struct vmm {
	char path[108];
	int delay_ms;           /* before the socket exists */
	const enum act *script; /* one per connection; the last one repeats */
	unsigned nscript;
	atomic_uint conns; /* connections accepted */
	atomic_uint seeds; /* SEED frames received */
	atomic_bool stop;
	pthread_t thread;
};

static void send_msg(int fd, const struct tvp_msg *m)
{
	uint8_t buf[512];
	size_t len;

	ck_assert_int_eq(tvp_encode(m, buf, sizeof(buf), &len), 0);
	ck_assert_int_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

/* The agent's side of a connection, until the client closes it. */
static void serve_agent(struct vmm *v, int fd, bool reset_at_seed)
{
	struct tvp_msg m = { .type = TVP_READY };
	struct tvp_decoder d;

	send(fd, "OK 5\n", 5, MSG_NOSIGNAL);
	m.ready = (struct tvp_ready){ TVP_VERSION, TVP_CAP_SYSTEM, TVP_MAX_PAYLOAD, 1, tvp_cstr("fake") };
	send_msg(fd, &m);
	tvp_decoder_init(&d, 0);
	for (;;) {
		struct tvp_frame f;
		size_t avail;
		void *space;
		ssize_t got;
		int r = tvp_decoder_next(&d, &f);

		ck_assert_int_ge(r, 0);
		if (r == 0) {
			space = tvp_decoder_space(&d, &avail);
			got = space ? recv(fd, space, avail, 0) : -1;
			if (got <= 0)
				break;
			tvp_decoder_commit(&d, (size_t)got);
			continue;
		}
		ck_assert_int_eq(tvp_parse(&f, &m, NULL, 0), 0);
		if (m.type == TVP_SEED && reset_at_seed)
			break;
		if (m.type == TVP_SEED) {
			struct tvp_msg ok = { .type = TVP_OK, .id = m.id, .ok = { TVP_SEED, 1 } };

			ck_assert_uint_eq(m.seed.entropy.len, 64);
			ck_assert_uint_gt(m.seed.realtime_ns, 0);
			atomic_fetch_add(&v->seeds, 1);
			send_msg(fd, &ok);
		}
	}
	tvp_decoder_free(&d);
}

static void *vmm_main(void *arg)
{
	struct vmm *v = arg;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	usleep((useconds_t)v->delay_ms * 1000);
	memcpy(sa.sun_path, v->path, sizeof(v->path));
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 8), 0);
	while (!atomic_load(&v->stop)) {
		struct pollfd pf = { .fd = lfd, .events = POLLIN };
		unsigned n = atomic_load(&v->conns);
		enum act act = v->script[n < v->nscript ? n : v->nscript - 1];
		char c;
		int fd;

		if (poll(&pf, 1, 50) <= 0)
			continue;
		fd = accept(lfd, NULL, NULL);
		ck_assert_int_ge(fd, 0);
		atomic_fetch_add(&v->conns, 1);
		while (recv(fd, &c, 1, 0) == 1 && c != '\n')
			;
		if (act == SILENT) {
			pf = (struct pollfd){ .fd = fd, .events = POLLIN };
			poll(&pf, 1, WAIT_MS); /* readable when the client hangs up */
		} else if (act == NOT_AGENT) {
			send(fd, "NO\n", 3, MSG_NOSIGNAL);
		} else if (act == BUSY) {
			struct tvp_msg m = { .type = TVP_ERROR,
					     .error = { TVP_ERR_LIMIT, 0, tvp_cstr("too many connections") } };

			send(fd, "OK 5\n", 5, MSG_NOSIGNAL);
			send_msg(fd, &m);
		} else if (act == ANSWER || act == SEED_RESET) {
			serve_agent(v, fd, act == SEED_RESET);
		}
		close(fd);
	}
	close(lfd);
	return NULL;
}

static void vmm_start(struct vmm *v, int delay_ms, const enum act *script, unsigned n)
{
	snprintf(v->path, sizeof(v->path), "/tmp/tinyvmm-agent-connect-%d.sock", (int)getpid());
	unlink(v->path);
	v->delay_ms = delay_ms;
	v->script = script;
	v->nscript = n;
	ck_assert_int_eq(pthread_create(&v->thread, NULL, vmm_main, v), 0);
}

static void vmm_stop(struct vmm *v)
{
	atomic_store(&v->stop, true);
	pthread_join(v->thread, NULL);
	unlink(v->path);
}

/* Connect through v's socket and close again; returns tvm_agent_connect's
 * result. */
static int connect_to(struct vmm *v, int timeout_ms, unsigned flags, struct tvm_err *e)
{
	struct tvm_agent_addr to = { .uds_path = v->path };
	struct tvm_agent *a = (struct tvm_agent *)&to; /* must be reset on failure */
	int r = tvm_agent_connect(&to, timeout_ms, flags, &a, e);

	if (r)
		ck_assert_ptr_null(a);
	tvm_agent_close(a);
	return r;
}

#define SCRIPT(...) (const enum act[]){ __VA_ARGS__ }, sizeof((const enum act[]){ __VA_ARGS__ }) / sizeof(enum act)

/* The fake VMM acts out script (its socket made after delay_ms); the
 * client must get through with conns connections and seeds SEEDs. */
static void expect_connected(int delay_ms, const enum act *script, unsigned n, unsigned flags, unsigned conns,
			     unsigned seeds)
{
	struct vmm v = { 0 };
	struct tvm_err e = { 0 };

	vmm_start(&v, delay_ms, script, n);
	ck_assert_msg(connect_to(&v, WAIT_MS, flags, &e) == 0, "connect: %s", e.msg);
	vmm_stop(&v);
	ck_assert_uint_eq(atomic_load(&v.conns), conns);
	ck_assert_uint_eq(atomic_load(&v.seeds), seeds);
}

START_TEST(waits_through_refusal_and_unanswered_connect)
{
	/* The 3rd CONNECT is the first one answered. */
	expect_connected(0, SCRIPT(REFUSE, SILENT, ANSWER), 0, 3, 0);
}
END_TEST

START_TEST(waits_for_the_socket_to_appear)
{
	expect_connected(300, SCRIPT(ANSWER), 0, 1, 0);
}
END_TEST

START_TEST(seeds_when_asked)
{
	expect_connected(0, SCRIPT(REFUSE, ANSWER), TVM_AGENT_SEED, 2, 1);
}
END_TEST

START_TEST(a_connection_closed_at_its_seed_is_made_again)
{
	/* The first connection is reset as its SEED arrives: the client
	 * connects again and seeds that one (CI saw "agent: connection
	 * closed" from four restores at once). */
	expect_connected(0, SCRIPT(SEED_RESET, ANSWER), TVM_AGENT_SEED, 2, 1);
}
END_TEST

START_TEST(an_agent_with_no_connection_to_spare_is_asked_again)
{
	/* The agent takes 16 connections; a 17th client gets ERROR LIMIT
	 * instead of READY and waits for one to end (a hostile helper's idle
	 * clients locked `tinyvmm exec` out at once). */
	expect_connected(0, SCRIPT(BUSY, BUSY, ANSWER), 0, 3, 0);
}
END_TEST

START_TEST(not_an_agent_is_not_retried)
{
	struct vmm v = { 0 };
	struct tvm_err e = { 0 };

	vmm_start(&v, 0, SCRIPT(NOT_AGENT, ANSWER));
	ck_assert_int_eq(connect_to(&v, WAIT_MS, 0, &e), -EPROTO);
	ck_assert_ptr_nonnull(strstr(e.msg, "unexpected answer to CONNECT"));
	vmm_stop(&v);
	ck_assert_uint_eq(atomic_load(&v.conns), 1);
}
END_TEST

START_TEST(gives_up_at_the_deadline_saying_why)
{
	struct vmm v = { 0 };
	struct tvm_err e = { 0 };
	char want[200];

	vmm_start(&v, 0, SCRIPT(REFUSE));
	ck_assert_int_eq(connect_to(&v, 1000, 0, &e), -ETIMEDOUT);
	vmm_stop(&v);
	ck_assert_int_eq(e.code, ETIMEDOUT);
	/* Then what the last attempt met: a refusal, or no answer yet. */
	snprintf(want, sizeof(want), "agent: not ready within 1000 ms: vsock socket %s: ", v.path);
	ck_assert_msg(!strncmp(e.msg, want, strlen(want)), "%s", e.msg);
	ck_assert_uint_ge(atomic_load(&v.conns), 1);
}
END_TEST

/* A socket nobody listens on any more (its VMM ended): not a VM still
 * booting, so no wait to the deadline (`tinyvmm exec` waited 120 s). */
START_TEST(a_socket_nobody_listens_on_is_no_vm)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct tvm_agent_addr to = { .uds_path = sa.sun_path };
	struct tvm_agent *a;
	struct tvm_err e = { 0 };
	char want[200];
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/tvm-stale-%d.sock", (int)getpid());
	unlink(sa.sun_path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd); /* the file stays, nothing listens */
	ck_assert_int_eq(tvm_agent_connect(&to, WAIT_MS, 0, &a, &e), -ECONNREFUSED);
	ck_assert_ptr_null(a);
	snprintf(want, sizeof(want), "vsock socket %s: no VM listens there (a socket left by a VMM that ended?)",
		 sa.sun_path);
	ck_assert_str_eq(e.msg, want);
	unlink(sa.sun_path);
	/* a file that is no socket: said so, at once */
	fd = open(sa.sun_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(tvm_agent_connect(&to, WAIT_MS, 0, &a, &e), -ENOTSOCK);
	snprintf(want, sizeof(want), "vsock socket %s: not a socket", sa.sun_path);
	ck_assert_str_eq(e.msg, want);
	unlink(sa.sun_path);
}
END_TEST

START_TEST(one_address_exactly)
{
	struct tvm_agent_addr none = { 0 }, both = { .vm = (struct tvm_vm *)&none, .uds_path = "/x" };
	struct tvm_agent *a;
	struct tvm_err e = { 0 };

	ck_assert_int_eq(tvm_agent_connect(&none, 100, 0, &a, &e), -EINVAL);
	ck_assert_ptr_null(a);
	ck_assert_int_eq(tvm_agent_connect(&both, 100, 0, &a, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "agent: connect to a VM or to a vsock socket path (one of them)");
}
END_TEST

static Suite *agent_connect_suite(void)
{
	Suite *s = suite_create("agent_connect");
	TCase *tc = tcase_create("uds");

	/* An unanswered CONNECT is given up after 5 s. */
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, waits_through_refusal_and_unanswered_connect);
	tcase_add_test(tc, waits_for_the_socket_to_appear);
	tcase_add_test(tc, seeds_when_asked);
	tcase_add_test(tc, a_connection_closed_at_its_seed_is_made_again);
	tcase_add_test(tc, an_agent_with_no_connection_to_spare_is_asked_again);
	tcase_add_test(tc, not_an_agent_is_not_retried);
	tcase_add_test(tc, gives_up_at_the_deadline_saying_why);
	tcase_add_test(tc, one_address_exactly);
	tcase_add_test(tc, a_socket_nobody_listens_on_is_no_vm);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(agent_connect_suite());
}
