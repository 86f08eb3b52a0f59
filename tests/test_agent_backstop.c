/* The host's backstop for a job's timeout (vmm/agent_client.c): the guest
 * agent kills a job at its timeout, but a stopped or hostile guest never
 * sends the RESULT. A thread plays such an agent over a socketpair: silent
 * after READY, stuck in the middle of a frame, or streaming output without
 * end. tvm_agent_exec must come back by timeout + TVM_JOB_HOST_GRACE_MS
 * with timed_out and host_timed_out set, and shut its sending side (the
 * agent's cue to kill the job). The grace makes each such case last about
 * 5 s; nothing here asserts on elapsed time. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "guest/protocol.h"
#include "tests/unit.h"
#include "vmm/tinyvmm.h"

enum behaviour {
	SILENT,     /* READY, then nothing */
	HALF_FRAME, /* READY, then a STDOUT frame cut short */
	STREAMING,  /* READY, then STDOUT frames every 5 ms, never a RESULT */
	ANSWERS,    /* READY, then after 50 ms a RESULT flagged TIMED_OUT */
};

struct agent {
	int fd;
	enum behaviour how;
	int saw_eof; /* the host shut down its sending side */
	size_t stdout_sent;
	pthread_t thread;
};

static void send_bytes(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void send_msg(int fd, const struct tvp_msg *m)
{
	uint8_t buf[512];
	size_t len = sizeof(buf);

	ck_assert_int_eq(tvp_encode(m, buf, sizeof(buf), &len), 0);
	send_bytes(fd, buf, len);
}

/* Host bytes are read and dropped until EOF; what the agent sends depends
 * on how. */
static void *agent_main(void *arg)
{
	struct agent *a = arg;
	struct tvp_msg m = { .type = TVP_READY };
	uint8_t hdr[TVP_HDR_SIZE], buf[4096];
	int ticks = 0;

	m.ready = (struct tvp_ready){ TVP_VERSION, TVP_CAP_SYSTEM, TVP_MAX_PAYLOAD, 1, tvp_cstr("backstop") };
	send_msg(a->fd, &m);
	if (a->how == HALF_FRAME) {
		tvp_put_header(hdr, TVP_STDOUT, 0, 1, 1000);
		send_bytes(a->fd, hdr, sizeof(hdr));
		send_bytes(a->fd, "only ten b", 10);
	}
	for (;;) {
		struct pollfd pf = { .fd = a->fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pf, 1, 5) < 0)
			break;
		if (pf.revents & (POLLIN | POLLHUP)) {
			n = recv(a->fd, buf, sizeof(buf), MSG_DONTWAIT);
			if (n == 0) {
				a->saw_eof = 1;
				break;
			}
		}
		if (a->how == STREAMING) {
			tvp_put_header(hdr, TVP_STDOUT, 0, 1, 4);
			if (send(a->fd, hdr, sizeof(hdr), MSG_NOSIGNAL) < 0 || send(a->fd, "tick", 4, MSG_NOSIGNAL) < 0)
				break;
			a->stdout_sent += 4;
		}
		if (a->how == ANSWERS && ++ticks == 10) {
			m = (struct tvp_msg){ .type = TVP_RESULT, .flags = TVP_RESULT_TIMED_OUT, .id = 1 };
			m.result = (struct tvp_result){ .exit_code = 137, .signal = 9, .wall_us = 100000 };
			send_msg(a->fd, &m);
		}
	}
	close(a->fd);
	return NULL;
}

static size_t got_stdout;

static void on_output(void *ctx, int stream, const void *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	if (stream == 1)
		got_stdout += len;
}

/* Run `true` with timeout_ms against an agent behaving how. */
static int run(enum behaviour how, uint32_t timeout_ms, struct agent *ag, struct tvm_job_result *res, struct tvm_err *e)
{
	static const char *const argv[] = { "true", NULL };
	struct tvm_job j = { .argv = argv, .timeout_ms = timeout_ms, .on_output = on_output };
	struct tvm_agent *a;
	int sv[2], r;

	got_stdout = 0;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	*ag = (struct agent){ .fd = sv[1], .how = how };
	ck_assert_int_eq(pthread_create(&ag->thread, NULL, agent_main, ag), 0);
	ck_assert_int_eq(tvm_agent_open(sv[0], 2000, &a, e), 0);
	memset(res, 0xa5, sizeof(*res));
	r = tvm_agent_exec(a, &j, res, e);
	if (how != ANSWERS) {
		/* The agent must see our EOF while the connection is still
		 * open: from the shutdown, not the close. */
		pthread_join(ag->thread, NULL);
		tvm_agent_close(a);
	} else {
		tvm_agent_close(a);
		pthread_join(ag->thread, NULL);
	}
	return r;
}

/* Silent after READY; stuck in a frame (recv_msg's wait covers a frame
 * begun and never finished); streaming output (the socket stays readable,
 * the deadline holds all the same, what came before it is passed on). */
START_TEST(agent_never_answers)
{
	static const struct {
		enum behaviour how;
		uint32_t timeout_ms;
		int output;
	} cases[] = { { SILENT, 1, 0 }, { HALF_FRAME, 100, 0 }, { STREAMING, 50, 1 } };

	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct tvm_job_result res;
		struct tvm_err e = { 0 };
		struct agent ag;

		ck_assert_msg(run(cases[i].how, cases[i].timeout_ms, &ag, &res, &e) == 0, "case %u: %s", i, e.msg);
		ck_assert_int_eq(res.timed_out, 1);
		ck_assert_int_eq(res.host_timed_out, 1);
		ck_assert_int_eq(res.signal, SIGKILL);
		ck_assert_int_eq(res.exit_code, 128 + SIGKILL);
		ck_assert_int_eq(res.stdout_truncated, 0);
		ck_assert_uint_ge(res.wall_ms, cases[i].timeout_ms);
		ck_assert_msg(ag.saw_eof, "case %u: the agent was not told to stop", i);
		ck_assert_msg((got_stdout > 0) == cases[i].output, "case %u: %zu bytes of output", i, got_stdout);
	}
}
END_TEST

/* A guest that honours its timeout: its RESULT, no backstop. */
START_TEST(agent_answers_in_time)
{
	struct tvm_job_result res;
	struct tvm_err e = { 0 };
	struct agent ag;

	ck_assert_msg(run(ANSWERS, 10, &ag, &res, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(res.timed_out, 1);
	ck_assert_int_eq(res.host_timed_out, 0);
	ck_assert_int_eq(res.exit_code, 137);
	ck_assert_uint_eq(res.wall_ms, 100); /* the agent's figure */
}
END_TEST

START_TEST(grace)
{
	ck_assert_uint_eq(TVM_JOB_HOST_GRACE_MS(0), 5000);
	ck_assert_uint_eq(TVM_JOB_HOST_GRACE_MS(120000), 17000);
	ck_assert_uint_eq(TVM_JOB_HOST_GRACE_MS(UINT32_MAX), 5000 + UINT32_MAX / 10);
}
END_TEST

static Suite *backstop_suite(void)
{
	Suite *s = suite_create("agent backstop");
	TCase *tc = tcase_create("exec");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, agent_never_answers);
	tcase_add_test(tc, agent_answers_in_time);
	tcase_add_test(tc, grace);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(backstop_suite());
}
