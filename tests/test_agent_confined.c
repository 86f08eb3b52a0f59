/* The agent client as tinyvmm serve runs it, under the daemon's seccomp
 * role (SC_DAEMON, vmm/sandbox/seccomp_roles.c): every call the daemon
 * makes to a sandbox's agent (the keeper's SEED, an exec with stdin, its
 * output and a signal through the control pipe, a file streamed in and
 * out) must pass its filter, on a host without KVM too. The real agent
 * runs in Unix-socket test mode behind a stand-in for the VMM's hybrid
 * vsock socket ("CONNECT 1024\n", "OK ...\n", then the bytes relayed);
 * the calls run in a forked child that confined itself in log mode, so a
 * call the role lacks ends it with exit 159 and a line naming the call. */
#include "tests/test_agent_client.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>

#include "tests/test_confine.h"
#include "vmm/tinyvmm.h"

static char uds[108];
static int lfd = -1;

/* Relay a and b both ways until either end closes. */
static void relay(int a, int b)
{
	char buf[65536];

	for (;;) {
		struct pollfd pf[2] = { { .fd = a, .events = POLLIN }, { .fd = b, .events = POLLIN } };

		if (poll(pf, 2, -1) < 0)
			return;
		for (int i = 0; i < 2; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t n = recv(pf[i].fd, buf, sizeof(buf), 0);

			if (n <= 0)
				return;
			for (ssize_t off = 0; off < n;) {
				ssize_t w = send(pf[1 - i].fd, buf + off, (size_t)(n - off), MSG_NOSIGNAL);

				if (w <= 0)
					return;
				off += w;
			}
		}
	}
}

/* One hybrid vsock connection: the CONNECT line, "OK", then the agent. */
static void *vmm_conn(void *arg)
{
	int c = (int)(intptr_t)arg, agent;
	char line[64];
	size_t n = 0;

	while (n < sizeof(line) - 1 && recv(c, line + n, 1, 0) == 1 && line[n] != '\n')
		n++;
	line[n] = 0;
	if (!strcmp(line, "CONNECT 1024") && (agent = ac_try_connect()) >= 0) {
		if (send(c, "OK 1073741824\n", 14, MSG_NOSIGNAL) == 14)
			relay(c, agent);
		close(agent);
	}
	close(c);
	return NULL;
}

static void *vmm_main(void *arg)
{
	int c;

	(void)arg;
	while ((c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		pthread_t t;

		if (pthread_create(&t, NULL, vmm_conn, (void *)(intptr_t)c))
			close(c);
		else
			pthread_detach(t);
	}
	return NULL;
}

static void setup(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	ac_start();
	snprintf(uds, sizeof(uds), "/tmp/tinyvmm-confined-%d.sock", (int)getpid());
	unlink(uds);
	strcpy(sa.sun_path, uds);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 16), 0);
}

static void teardown(void)
{
	unlink(uds);
	ac_stop();
}

/* The exec thread's control path: stdin then EOF, as POST .../stdin. */
static int ctl_pipe[2];

static void on_control(void *ctx, struct tvm_agent *a)
{
	char c;
	struct tvm_err e = { 0 };

	(void)ctx;
	while (read(ctl_pipe[0], &c, 1) == 1) {
		if (c == 's')
			tvm_agent_job_stdin(a, "from stdin", 10, &e);
		else if (c == 'e')
			tvm_agent_job_stdin(a, NULL, 0, &e);
		else if (c == 'k')
			tvm_agent_job_signal(a, SIGTERM, &e);
	}
}

/* The daemon's calls, confined. Returns (in the child) 0, or 10 + the
 * step that failed. */
static int as_the_daemon(const char *dir)
{
	struct tvm_agent_addr to = { .uds_path = uds };
	struct tvm_agent *keeper, *a;
	struct tvm_err e = { 0 };
	struct tvm_job j;
	struct tvm_job_result res;
	struct ac_collected o = { 0 };
	char path[128];
	uint64_t size = 0;

	if (tvm_agent_connect(&to, 10000, TVM_AGENT_SEED, &keeper, &e)) /* sb_keeper */
		return 11;
	if (tvm_agent_connect(&to, 10000, 0, &a, &e)) /* sb_agent */
		return 12;
	/* POST .../execs: a shell with stdin given, then one fed through the
	 * control pipe, then one signalled */
	const char *sh[] = { "/bin/sh", "-c", "cat; echo out-of-sh; exit 3", NULL };
	tvm_job_init(&j);
	j.argv = sh;
	j.stdin_data = "in-";
	j.stdin_len = 3;
	j.on_output = ac_on_output;
	j.ctx = &o;
	j.timeout_ms = 20000;
	if (tvm_agent_exec(a, &j, &res, &e) || res.exit_code != 3 || strcmp(o.buf, "in-out-of-sh\n"))
		return 13;
	const char *cat[] = { "cat", NULL };
	if (pipe2(ctl_pipe, O_CLOEXEC | O_NONBLOCK) || write(ctl_pipe[1], "se", 2) != 2)
		return 14;
	o.len = 0;
	o.buf[0] = 0;
	tvm_job_init(&j);
	j.argv = cat;
	j.stdin_open = 1;
	j.control_fd = ctl_pipe[0];
	j.on_control = on_control;
	j.on_output = ac_on_output;
	j.ctx = &o;
	j.timeout_ms = 20000;
	if (tvm_agent_exec(a, &j, &res, &e) || res.exit_code != 0 || strcmp(o.buf, "from stdin"))
		return 15;
	const char *sleep_argv[] = { "sleep", "100", NULL };
	if (write(ctl_pipe[1], "k", 1) != 1)
		return 16;
	tvm_job_init(&j);
	j.argv = sleep_argv;
	j.control_fd = ctl_pipe[0];
	j.on_control = on_control;
	j.timeout_ms = 60000;
	if (tvm_agent_exec(a, &j, &res, &e) || res.signal != SIGTERM)
		return 17;
	/* PUT and GET .../files, streamed */
	snprintf(path, sizeof(path), "%s/f", dir);
	struct ac_gen in = { .n = 3u << 20 };
	struct ac_check back = { 0 };
	if (tvm_agent_put_stream(a, path, 0644, 0, ac_gen_read, &in, &size, &e) || size != in.n)
		return 18;
	if (tvm_agent_get_stream(a, path, 4u << 20, 0, ac_check_write, &back, &size, &e) || back.off != in.n ||
	    back.bad)
		return 19;
	tvm_agent_close(a);
	tvm_agent_close(keeper);
	return 0;
}

START_TEST(the_daemons_agent_calls_pass_its_filter)
{
	char dir[] = "/tmp/tinyvmm-confined-XXXXXX";
	int status;
	pid_t pid;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	chmod(dir, 0777); /* the agent's default user writes the file */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* check's handlers are not the daemon's (its SIGTERM one
		 * signals the process group) */
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGALRM, SIG_DFL);
		confine_child(SC_DAEMON, 0, TVM_SECCOMP_LOG, 2);
		_exit(as_the_daemon(dir));
	}
	/* The stand-in VMM's threads only now: a fork of a process with
	 * threads may copy a lock one of them holds (the child's malloc
	 * would wait for ever). The child's connects wait in the backlog. */
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, vmm_main, NULL), 0);
	pthread_detach(t);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != TVM_SECCOMP_EXIT,
		      "the daemon's filter refused a call of the agent client (its line is above): status 0x%x",
		      status);
	ck_assert_msg(WEXITSTATUS(status) == 0, "step %d failed", WEXITSTATUS(status) - 10);
	char f[64];
	snprintf(f, sizeof(f), "%s/f", dir);
	unlink(f);
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("agent_confined");
	TCase *tc = tcase_create("daemon");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, the_daemons_agent_calls_pass_its_filter);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
