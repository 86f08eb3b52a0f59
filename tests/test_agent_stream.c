/* The library's streamed and interactive agent calls (vmm/agent_client.c)
 * against the real agent in Unix-socket test mode: tvm_agent_put_stream /
 * tvm_agent_get_stream (a file that never sits whole in memory, a source
 * that fails, a sink that refuses, a cap), and a job's control path
 * (stdin_open + on_control: tvm_agent_job_stdin, tvm_agent_job_signal). */
#include "tests/test_agent_client.h"

#include <fcntl.h>
#include <sys/stat.h>

#include "vmm/tinyvmm.h"

static struct tvm_agent *a;
static char dir[64];

static void setup(void)
{
	struct tvm_err e = { 0 };
	int fd;

	snprintf(dir, sizeof(dir), "/tmp/tinyvmm-agent-stream-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ac_start();
	fd = ac_try_connect();
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(tvm_agent_open(fd, 5000, &a, &e), 0);
}

static void teardown(void)
{
	char cmd[128];

	tvm_agent_close(a);
	a = NULL;
	ac_stop();
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(put_get_stream_roundtrip)
{
	char path[128];
	struct ac_gen g = { .n = (3u << 20) + 12345 };
	struct ac_check k = { 0 };
	struct tvm_err e = { 0 };
	uint64_t size = 0;
	struct stat st;

	snprintf(path, sizeof(path), "%s/sub/dir/f.bin", dir);
	ck_assert_int_eq(tvm_agent_put_stream(a, path, 0640, TVM_ID_DEFAULT, ac_gen_read, &g, &size, &e), 0);
	ck_assert_uint_eq(size, g.n);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, g.n);
	ck_assert_uint_eq(st.st_mode & 0777, 0640);
	size = 0;
	ck_assert_int_eq(tvm_agent_get_stream(a, path, UINT64_MAX, TVM_ID_DEFAULT, ac_check_write, &k, &size, &e), 0);
	ck_assert_uint_eq(size, g.n);
	ck_assert_uint_eq(k.off, g.n);
	ck_assert_uint_eq(k.bad, 0);
	ck_assert_uint_gt(k.calls, 1); /* in pieces, never whole */
}
END_TEST

START_TEST(stream_errors)
{
	char path[128];
	struct ac_gen g = { .n = 1u << 20, .fail_at = 300000 };
	struct ac_check k = { .refuse_at = 100000 };
	struct tvm_err e = { 0 };

	/* A source that fails: the error names it, and the connection
	 * closes the transfer (the agent keeps what it wrote: the caller
	 * removes it, as tinyvmm serve does). */
	snprintf(path, sizeof(path), "%s/half.bin", dir);
	ck_assert_int_eq(tvm_agent_put_stream(a, path, 0644, TVM_ID_DEFAULT, ac_gen_read, &g, NULL, &e), -EIO);
	ck_assert_ptr_nonnull(strstr(e.msg, "source"));
	ck_assert_uint_le(g.off, g.fail_at + 7777);
	tvm_agent_close(a);
	int fd = ac_try_connect();
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(tvm_agent_open(fd, 5000, &a, &e), 0);

	/* A file to read back: over the cap, refused by the sink, missing. */
	g = (struct ac_gen){ .n = 1u << 20 };
	snprintf(path, sizeof(path), "%s/whole.bin", dir);
	ck_assert_int_eq(tvm_agent_put_stream(a, path, 0644, TVM_ID_DEFAULT, ac_gen_read, &g, NULL, &e), 0);
	ck_assert_int_eq(tvm_agent_get_stream(a, path, 1000, TVM_ID_DEFAULT, ac_check_write, &k, NULL, &e), -EFBIG);
	tvm_agent_close(a);
	fd = ac_try_connect();
	ck_assert_int_eq(tvm_agent_open(fd, 5000, &a, &e), 0);
	k = (struct ac_check){ .refuse_at = 100000 };
	ck_assert_int_eq(tvm_agent_get_stream(a, path, UINT64_MAX, TVM_ID_DEFAULT, ac_check_write, &k, NULL, &e),
			 -ENOSPC);
	ck_assert_ptr_nonnull(strstr(e.msg, "sink"));
	tvm_agent_close(a);
	fd = ac_try_connect();
	ck_assert_int_eq(tvm_agent_open(fd, 5000, &a, &e), 0);
	snprintf(path, sizeof(path), "%s/none", dir);
	ck_assert_int_eq(tvm_agent_get_stream(a, path, UINT64_MAX, TVM_ID_DEFAULT, ac_check_write, &k, NULL, &e),
			 -ENOENT);
}
END_TEST

/* The control side of an interactive job: a pipe the test writes one
 * byte to per action. */
struct ctl {
	int pipe[2];
	int sig;
	int r[4];
	unsigned calls;
};

static void on_control(void *ctx, struct tvm_agent *ag)
{
	struct ctl *c = ctx;
	struct tvm_err e = { 0 };
	char b;

	ck_assert_int_eq(read(c->pipe[0], &b, 1), 1);
	c->calls++;
	if (b == 's') {
		c->r[0] = tvm_agent_job_stdin(ag, "hello ", 6, &e);
		c->r[1] = tvm_agent_job_stdin(ag, "world", 5, &e);
		c->r[2] = tvm_agent_job_stdin(ag, NULL, 0, &e);
		/* closed: no more */
		c->r[3] = tvm_agent_job_stdin(ag, "x", 1, &e);
	} else if (b == 'k') {
		c->r[0] = tvm_agent_job_signal(ag, 0, &e);
		c->r[1] = tvm_agent_job_signal(ag, c->sig, &e);
	}
}

/* tvm_job.ctx is shared by on_output and on_control. */
struct both {
	struct ac_collected out;
	struct ctl ctl;
};

static void both_output(void *ctx, int stream, const void *p, size_t n)
{
	ac_on_output(&((struct both *)ctx)->out, stream, p, n);
}

static void both_control(void *ctx, struct tvm_agent *ag)
{
	on_control(&((struct both *)ctx)->ctl, ag);
}

START_TEST(stdin_through_on_control)
{
	const char *argv[] = { "cat", NULL };
	struct both b = { 0 };
	struct tvm_job j;
	struct tvm_job_result res;
	struct tvm_err e = { 0 };

	ck_assert_int_eq(pipe(b.ctl.pipe), 0);
	ck_assert_int_eq(write(b.ctl.pipe[1], "s", 1), 1);
	tvm_job_init(&j);
	j.argv = argv;
	j.stdin_open = 1;
	j.control_fd = b.ctl.pipe[0];
	j.on_control = both_control;
	j.on_output = both_output;
	j.ctx = &b;
	j.timeout_ms = 20000;
	ck_assert_int_eq(tvm_agent_exec(a, &j, &res, &e), 0);
	ck_assert_uint_eq(b.ctl.calls, 1);
	ck_assert_int_eq(b.ctl.r[0], 0);
	ck_assert_int_eq(b.ctl.r[1], 0);
	ck_assert_int_eq(b.ctl.r[2], 0);
	ck_assert_int_eq(b.ctl.r[3], -EINVAL);
	ck_assert_int_eq(res.exit_code, 0);
	ck_assert_int_eq(res.timed_out, 0);
	b.out.buf[b.out.len] = 0;
	ck_assert_str_eq(b.out.buf, "hello world");
	/* Outside a job: nothing to send to. */
	ck_assert_int_eq(tvm_agent_job_stdin(a, "x", 1, &e), -ESRCH);
	ck_assert_int_eq(tvm_agent_job_signal(a, SIGTERM, &e), -ESRCH);
	close(b.ctl.pipe[0]);
	close(b.ctl.pipe[1]);
}
END_TEST

START_TEST(signal_through_on_control)
{
	const char *argv[] = { "sleep", "100", NULL };
	struct both b = { .ctl.sig = SIGTERM };
	struct tvm_job j;
	struct tvm_job_result res;
	struct tvm_err e = { 0 };

	ck_assert_int_eq(pipe(b.ctl.pipe), 0);
	ck_assert_int_eq(write(b.ctl.pipe[1], "k", 1), 1);
	tvm_job_init(&j);
	j.argv = argv;
	j.control_fd = b.ctl.pipe[0];
	j.on_control = both_control;
	j.ctx = &b;
	j.timeout_ms = 60000;
	ck_assert_int_eq(tvm_agent_exec(a, &j, &res, &e), 0);
	ck_assert_int_eq(b.ctl.r[0], -EINVAL); /* signal 0 */
	ck_assert_int_eq(b.ctl.r[1], 0);
	ck_assert_int_eq(res.signal, SIGTERM);
	ck_assert_int_eq(res.timed_out, 0);
	/* stdin_open with stdin_data is refused before anything is sent */
	j.on_control = NULL;
	j.stdin_open = 1;
	j.stdin_data = "x";
	j.stdin_len = 1;
	ck_assert_int_eq(tvm_agent_exec(a, &j, &res, &e), -EINVAL);
	close(b.ctl.pipe[0]);
	close(b.ctl.pipe[1]);
}
END_TEST

static Suite *stream_suite(void)
{
	Suite *s = suite_create("agent_stream");
	TCase *tc = tcase_create("stream");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, put_get_stream_roundtrip);
	tcase_add_test(tc, stream_errors);
	tcase_add_test(tc, stdin_through_on_control);
	tcase_add_test(tc, signal_through_on_control);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(stream_suite());
}
