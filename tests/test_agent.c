/* The guest agent, run on this host in Unix-socket test mode: jobs, their
 * streams, limits, and connection handling. */
#include "guest/agent.h" /* its limits */
#include "tests/test_agent_client.h"

#include <pwd.h>
#include <sys/stat.h>

static struct ac_conn *c;
static struct ac_out o[AC_MAX_IDS];

static void setup(void)
{
	ac_start();
	c = ac_open();
}

static void teardown(void)
{
	ac_out_free(o, AC_MAX_IDS);
	if (c)
		ac_close(c);
	c = NULL;
	ac_stop();
}

static void run_sh(const char *script)
{
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", script) }, o);
	ck_assert_msg(!o[1].failed, "job failed: %s", o[1].emsg);
}

START_TEST(ready_fields)
{
	struct ac_conn *c2 = ac_connect();
	struct tvp_msg m;

	ac_expect(c2, &m, TVP_READY);
	ck_assert_uint_eq(m.ready.max_payload, TVP_MAX_PAYLOAD);
	ck_assert_uint_eq(m.ready.caps & TVP_CAP_SYSTEM, 0);
	ck_assert_uint_eq(!!(m.ready.caps & TVP_CAP_SETUID), geteuid() == 0);
	ck_assert_uint_gt(m.ready.boot_us, 0);
	ck_assert(m.ready.agent.len > 0 && !memcmp(m.ready.agent.p, "tinyvmm-agent", 13));
	ac_close(c2);
}
END_TEST

START_TEST(exit_codes)
{
	static const int codes[] = { 0, 1, 42 };

	for (int i = 0; i < 3; i++) {
		char script[32];

		snprintf(script, sizeof(script), "exit %d", codes[i]);
		run_sh(script);
		ck_assert_int_eq(o[1].r.exit_code, codes[i]);
		ck_assert_uint_eq(o[1].r.signal, 0);
		ck_assert_uint_eq(o[1].flags, 0);
		ck_assert_uint_gt(o[1].r.wall_us, 0);
		ck_assert_uint_gt(o[1].r.max_rss_kib, 0);
		ac_out_free(o, AC_MAX_IDS);
	}
}
END_TEST

START_TEST(killed_by_signal)
{
	run_sh("kill -TERM $$");
	ck_assert_uint_eq(o[1].r.signal, SIGTERM);
	ck_assert_int_eq(o[1].r.exit_code, 128 + SIGTERM);
}
END_TEST

START_TEST(cpu_time_reported)
{
	run_sh("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done");
	ck_assert_uint_gt(o[1].r.user_us + o[1].r.sys_us, 1000);
	ck_assert_uint_ge(o[1].r.wall_us, o[1].r.user_us / 2);
}
END_TEST

START_TEST(stdout_stderr_apart_in_order)
{
	run_sh("echo o1; echo e1 >&2; echo o2; echo e2 >&2; echo o3");
	ck_assert_str_eq(o[1].out, "o1\no2\no3\n");
	ck_assert_str_eq(o[1].err, "e1\ne2\n");
	ck_assert_uint_eq(o[1].r.stdout_bytes, 9);
	ck_assert_uint_eq(o[1].r.stderr_bytes, 6);
}
END_TEST

START_TEST(large_output_in_order)
{
	size_t n = 0;
	char *want = malloc(2 << 20);

	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("seq", "1", "200000") }, o);
	for (int i = 1; i <= 200000; i++)
		n += (size_t)sprintf(want + n, "%d\n", i);
	ck_assert_uint_eq(o[1].outlen, n);
	ck_assert(!memcmp(o[1].out, want, n));
	ck_assert_int_eq(o[1].r.exit_code, 0);
	free(want);
}
END_TEST

START_TEST(stdin_bytes)
{
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("cat"), .in = "hello\0world", .inlen = 11 }, o);
	ck_assert_uint_eq(o[1].outlen, 11);
	ck_assert(!memcmp(o[1].out, "hello\0world", 11));
}
END_TEST

START_TEST(no_stdin_is_eof)
{
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("cat") }, o);
	ck_assert_uint_eq(o[1].outlen, 0);
	ck_assert_int_eq(o[1].r.exit_code, 0);
}
END_TEST

/* 3 MiB through cat in 200 KiB STDIN frames: both directions must apply
 * backpressure without deadlock or loss. */
START_TEST(stdin_stream)
{
	size_t total = 3 << 20, chunk = 200 << 10;
	uint8_t *data = malloc(total);
	struct tvp_msg m = { .type = TVP_STDIN, .id = 1 };

	for (size_t i = 0; i < total; i++)
		data[i] = (uint8_t)(i * 7 + i / 1000);
	memset(o, 0, sizeof(o));
	ac_exec(c, 1,
		&(struct ac_job){ .argv = AC_ARGV("cat"), .flags = TVP_EXEC_STDIN_STREAM, .in = data, .inlen = 10 });
	for (size_t off = 10; off < total; off += chunk) {
		m.data.data = (struct tvp_bytes){ data + off, (uint32_t)(total - off < chunk ? total - off : chunk) };
		ac_send(c, &m);
	}
	ac_send(c, &(struct tvp_msg){ .type = TVP_STDIN_CLOSE, .id = 1 });
	ac_wait(c, o, 1);
	ck_assert_uint_eq(o[1].outlen, total);
	ck_assert(!memcmp(o[1].out, data, total));
	free(data);
}
END_TEST

START_TEST(env_and_cwd)
{
	ac_run(c,
	       &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "echo \"$FOO|$TINYVMM_TEST_QUIRK\"; pwd"),
				 .env = AC_ARGV("FOO=bar baz"),
				 .cwd = "/tmp" },
	       o);
	ck_assert_str_eq(o[1].out, "bar baz|from-init\n/tmp\n");
	ac_out_free(o, AC_MAX_IDS);

	/* A job entry replaces the inherited one. */
	ac_run(c,
	       &(struct ac_job){
		       .argv = AC_ARGV("/bin/sh", "-c", "env | grep -c TINYVMM_TEST_QUIRK; echo $TINYVMM_TEST_QUIRK"),
		       .env = AC_ARGV("TINYVMM_TEST_QUIRK=job") },
	       o);
	ck_assert_str_eq(o[1].out, "1\njob\n");
	ac_out_free(o, AC_MAX_IDS);

	/* Default cwd is /, and the job gets umask 022. */
	run_sh("pwd; umask");
	ck_assert_str_eq(o[1].out, "/\n0022\n");
}
END_TEST

START_TEST(path_lookup)
{
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("echo", "hi") }, o);
	ck_assert_str_eq(o[1].out, "hi\n");
	ac_out_free(o, AC_MAX_IDS);

	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("sh", "-c", "echo $0"), .env = AC_ARGV("PATH=/nonexistent:/bin") },
	       o);
	ck_assert_str_eq(o[1].out, "sh\n");
}
END_TEST

START_TEST(spawn_errors)
{
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("/nonexistent/prog") }, o);
	ck_assert(o[1].failed);
	ck_assert_uint_eq(o[1].ecode, TVP_ERR_SPAWN);
	ck_assert_int_eq(o[1].eerrno, ENOENT);
	ck_assert_msg(strstr(o[1].emsg, "/nonexistent/prog"), "message: %s", o[1].emsg);
	ac_out_free(o, AC_MAX_IDS);

	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("no-such-program-here") }, o);
	ck_assert_int_eq(o[1].eerrno, ENOENT);
	ac_out_free(o, AC_MAX_IDS);

	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("true"), .cwd = "/nonexistent-dir" }, o);
	ck_assert_uint_eq(o[1].ecode, TVP_ERR_SPAWN);
	ck_assert_msg(strstr(o[1].emsg, "chdir"), "message: %s", o[1].emsg);
	/* The directory is named, and the error is "could not run" (EACCES),
	 * not ENOENT, which hosts take for "command not found". */
	ck_assert_msg(strstr(o[1].emsg, "/nonexistent-dir: No such file"), "message: %s", o[1].emsg);
	ck_assert_int_eq(o[1].eerrno, EACCES);
	ac_out_free(o, AC_MAX_IDS);

	/* Limits need cgroups, which a test-mode agent never sets up: refused
	 * with one line, nothing run. */
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("true"), .pids_max = 8 }, o);
	ck_assert_uint_eq(o[1].ecode, TVP_ERR_UNSUPPORTED);
	ck_assert_int_eq(o[1].eerrno, EOPNOTSUPP);
	ck_assert_msg(strstr(o[1].emsg, "cgroup v2"), "message: %s", o[1].emsg);
	ac_out_free(o, AC_MAX_IDS);
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("true"), .mem_max = 1 << 20 }, o);
	ck_assert_uint_eq(o[1].ecode, TVP_ERR_UNSUPPORTED);
	ac_out_free(o, AC_MAX_IDS);

	/* The connection is still fine. */
	run_sh("echo ok");
	ck_assert_str_eq(o[1].out, "ok\n");
}
END_TEST

/* The job's shell starts a background sleep and waits: on timeout both
 * die, as the whole process group is killed. */
START_TEST(timeout_kills_group)
{
	pid_t bg;

	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "sleep 30 & echo $!; wait"), .timeout_ms = 300 },
	       o);
	ck_assert(!o[1].failed);
	ck_assert_uint_eq(o[1].flags & TVP_RESULT_TIMED_OUT, TVP_RESULT_TIMED_OUT);
	ck_assert_uint_eq(o[1].r.signal, SIGKILL);
	ck_assert_uint_lt(o[1].r.wall_us, 10000000);
	bg = (pid_t)atoi(o[1].out);
	ck_assert_int_gt(bg, 1);
	ck_assert_msg(ac_pid_gone(bg, 5000), "background child %d survived", (int)bg);
}
END_TEST

/* Without TVP_EXEC_KEEP_GROUP, what the job left behind dies with it. */
START_TEST(exit_kills_leftovers)
{
	pid_t bg;

	run_sh("sleep 30 >/dev/null 2>&1 & echo $!");
	bg = (pid_t)atoi(o[1].out);
	ck_assert_int_gt(bg, 1);
	ck_assert_msg(ac_pid_gone(bg, 5000), "left-over child %d survived", (int)bg);
	ac_out_free(o, AC_MAX_IDS);

	/* With it, the background process lives on (until we kill it). */
	ac_run(c,
	       &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "sleep 30 >/dev/null 2>&1 & echo $!"),
				 .flags = TVP_EXEC_KEEP_GROUP },
	       o);
	bg = (pid_t)atoi(o[1].out);
	ck_assert_int_eq(kill(bg, 0), 0);
	kill(bg, SIGKILL);
}
END_TEST

START_TEST(kill_request)
{
	struct tvp_msg m;

	memset(o, 0, sizeof(o));
	ac_exec(c, 1, &(struct ac_job){ .argv = AC_ARGV("sleep", "30") });
	/* An id in use is refused. */
	ac_exec(c, 1, &(struct ac_job){ .argv = AC_ARGV("true") });
	ac_expect(c, &m, TVP_ERROR);
	ck_assert_uint_eq(m.id, 1);
	ck_assert_uint_eq(m.error.code, TVP_ERR_BUSY);
	ac_send(c, &(struct tvp_msg){ .type = TVP_KILL, .id = 1, .kill = { SIGINT } });
	ac_wait(c, o, 1);
	ck_assert_uint_eq(o[1].r.signal, SIGINT);
	ck_assert_uint_eq(o[1].flags & TVP_RESULT_KILLED, TVP_RESULT_KILLED);
	/* KILL for a job that is gone is ignored; a bad signal is an error. */
	ac_send(c, &(struct tvp_msg){ .type = TVP_KILL, .id = 1 });
	ac_send(c, &(struct tvp_msg){ .type = TVP_KILL, .id = 2, .kill = { 99 } });
	ac_out_free(o, AC_MAX_IDS);
	ac_wait(c, o, 2);
	ck_assert_uint_eq(o[2].ecode, TVP_ERR_STATE);
}
END_TEST

START_TEST(output_caps)
{
	long rss0, hwm;

	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "echo 0123456789 >&2; echo hi"), .stderr_cap = 4 },
	       o);
	ck_assert_uint_eq(o[1].errlen, 4);
	ck_assert(!memcmp(o[1].err, "0123", 4));
	ck_assert_str_eq(o[1].out, "hi\n");
	ck_assert_uint_eq(o[1].flags, TVP_RESULT_STDERR_TRUNC);
	ck_assert_uint_eq(o[1].r.stderr_bytes, 11);
	ac_out_free(o, AC_MAX_IDS);

	rss0 = ac_status_kib(ac_agent_pid, "VmRSS");
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("head", "-c", "20971520", "/dev/zero"), .stdout_cap = 1 << 20 }, o);
	hwm = ac_status_kib(ac_agent_pid, "VmHWM");
	ck_assert_uint_eq(o[1].outlen, 1 << 20);
	ck_assert_uint_eq(o[1].flags, TVP_RESULT_STDOUT_TRUNC);
	ck_assert_uint_eq(o[1].r.stdout_bytes, 20 << 20);
	ck_assert_int_eq(o[1].r.exit_code, 0);
	/* The agent streams: it never holds more than a few chunks. */
	ck_assert_msg(hwm - rss0 < 8 * 1024, "agent RSS grew from %ld to %ld KiB", rss0, hwm);
}
END_TEST

START_TEST(two_jobs_one_connection)
{
	memset(o, 0, sizeof(o));
	ac_exec(c, 1, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "sleep 1; echo one") });
	ac_exec(c, 2, &(struct ac_job){ .argv = AC_ARGV("echo", "two") });
	ac_wait(c, o, 2);
	ck_assert_str_eq(o[2].out, "two\n");
	ck_assert_msg(!o[1].done, "job 1 ended before job 2");
	ac_wait(c, o, 1);
	ck_assert_str_eq(o[1].out, "one\n");
}
END_TEST

START_TEST(two_connections)
{
	struct ac_conn *c2 = ac_open();
	struct ac_out o2[AC_MAX_IDS] = { 0 };

	memset(o, 0, sizeof(o));
	ac_exec(c, 1, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "sleep 1; echo slow") });
	ac_exec(c2, 1, &(struct ac_job){ .argv = AC_ARGV("echo", "fast") });
	ac_wait(c2, o2, 1);
	ck_assert_str_eq(o2[1].out, "fast\n");
	ck_assert(!o[1].done);
	ac_wait(c, o, 1);
	ck_assert_str_eq(o[1].out, "slow\n");
	ac_out_free(o2, AC_MAX_IDS);
	ac_close(c2);
}
END_TEST

/* Each kind of bad input ends its own connection only: a job on another
 * connection finishes, and a new connection works. */
START_TEST(malformed_ends_only_that_connection)
{
	static const uint8_t bad_magic[16] = { 'G', 'E', 'T', ' ', '/' };
	uint8_t hdr[TVP_HDR_SIZE], exec_trunc[TVP_HDR_SIZE + 4];

	memset(o, 0, sizeof(o));
	ac_exec(c, 1, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "sleep 0.5; echo survived") });
	for (int kind = 0; kind < 4; kind++) {
		struct ac_conn *bad = ac_open();

		switch (kind) {
		case 0: ac_send_raw(bad, bad_magic, sizeof(bad_magic)); break;
		case 1: /* length over the cap: refused before any allocation */
			tvp_put_header(hdr, TVP_EXEC, 0, 1, TVP_MAX_PAYLOAD + 1);
			ac_send_raw(bad, hdr, sizeof(hdr));
			break;
		case 2: /* EXEC whose payload ends inside its first field */
			tvp_put_header(exec_trunc, TVP_EXEC, 0, 1, 4);
			memset(exec_trunc + TVP_HDR_SIZE, 0xff, 4);
			ac_send_raw(bad, exec_trunc, sizeof(exec_trunc));
			break;
		case 3: /* unsupported protocol version in HELLO */
			ac_send(bad, &(struct tvp_msg){ .type = TVP_HELLO, .hello = { 99, 0, tvp_cstr("x") } });
			break;
		}
		ck_assert_uint_eq(ac_expect_close(bad), kind == 3 ? TVP_ERR_UNSUPPORTED : TVP_ERR_PROTO);
		ac_close(bad);
	}
	ac_wait(c, o, 1);
	ck_assert_str_eq(o[1].out, "survived\n");
	ac_out_free(o, AC_MAX_IDS);
	ac_close(c);
	c = ac_open();
	run_sh("echo new");
	ck_assert_str_eq(o[1].out, "new\n");
}
END_TEST

START_TEST(unknown_type_keeps_connection)
{
	uint8_t frame[TVP_HDR_SIZE + 3];
	struct tvp_msg m;

	tvp_put_header(frame, 0x7e, 0, 5, 3);
	memcpy(frame + TVP_HDR_SIZE, "abc", 3);
	ac_send_raw(c, frame, sizeof(frame));
	ac_send(c, &(struct tvp_msg){ .type = TVP_HELLO, .hello = { TVP_VERSION, 0, tvp_cstr("test") } });
	ac_send(c, &(struct tvp_msg){ .type = TVP_RESULT, .id = 6 }); /* the agent's own type */
	ac_expect(c, &m, TVP_ERROR);
	ck_assert_uint_eq(m.error.code, TVP_ERR_UNSUPPORTED);
	ck_assert_uint_eq(m.id, 5);
	ac_expect(c, &m, TVP_ERROR);
	ck_assert_uint_eq(m.error.code, TVP_ERR_UNSUPPORTED);
	ck_assert_uint_eq(m.id, 6);
	run_sh("echo still");
	ck_assert_str_eq(o[1].out, "still\n");
}
END_TEST

/* Start a job that prints its pid and sleeps; returns the pid. */
static pid_t start_sleeper(void)
{
	struct tvp_msg m;
	pid_t pid;

	ac_exec(c, 1, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "echo $$; exec sleep 30") });
	ac_expect(c, &m, TVP_STDOUT);
	pid = (pid_t)atoi((const char *)m.data.data.p);
	ck_assert_int_gt(pid, 1);
	return pid;
}

/* Closing the connection, or only its sending side, cancels its jobs. */
START_TEST(closing_connection_kills_its_jobs)
{
	pid_t pid = start_sleeper();

	ac_close(c);
	c = NULL;
	ck_assert_msg(ac_pid_gone(pid, 5000), "job %d outlived its connection", (int)pid);
	c = ac_open();
	pid = start_sleeper();
	shutdown(c->fd, SHUT_WR);
	ck_assert_uint_eq(ac_expect_close(c), 0);
	ck_assert_msg(ac_pid_gone(pid, 5000), "job %d outlived its half-closed connection", (int)pid);
}
END_TEST

START_TEST(seed_and_shutdown_in_test_mode)
{
	static const uint8_t rnd[32] = { 1, 2, 3 };
	struct tvp_msg m;

	ac_send(c, &(struct tvp_msg){ .type = TVP_SEED, .id = 3, .seed = { 1, { rnd, sizeof(rnd) } } });
	ac_expect(c, &m, TVP_OK);
	ck_assert_uint_eq(m.id, 3);
	ck_assert_uint_eq(m.ok.of_type, TVP_SEED);
	ck_assert_uint_eq(m.ok.value, 0); /* not applied outside the guest */
	ac_send(c, &(struct tvp_msg){ .type = TVP_SHUTDOWN });
	ck_assert_uint_eq(ac_expect_close(c), 0);
	ck_assert_int_eq(ac_wait_exit(10000), 0);
}
END_TEST

/* Every slot taken: a new connection takes the slot of the one quiet
 * longest (no whole frame for AGENT_EVICT_IDLE_MS) that has no job, no
 * unread request, and is not the keeper (the first to send SEED), which
 * gets a LIMIT error and EOF. */
START_TEST(idle_connection_gives_its_slot_to_a_new_one)
{
	static const uint8_t rnd[32] = { 7 };
	struct ac_conn *others[AGENT_MAX_CONNS - 1], *late, *late2;
	struct ac_out ob[AC_MAX_IDS] = { 0 }, ol[AC_MAX_IDS] = { 0 }, o2[AC_MAX_IDS] = { 0 };
	struct tvp_msg m;

	ac_send(c, &(struct tvp_msg){ .type = TVP_SEED, .id = 1, .seed = { 1, { rnd, sizeof(rnd) } } });
	ac_expect(c, &m, TVP_OK);
	/* others[0], quiet longest after c, is busy: its job outlasts the wait */
	others[0] = ac_open();
	ac_exec(others[0], 1, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "sleep 8; echo busy") });
	while (others[0]->outlen)
		ac_io(others[0], 100);
	usleep(100 * 1000);
	/* others[1] sends SEED too (a keeper is open: it is not one) */
	others[1] = ac_open();
	ac_send(others[1], &(struct tvp_msg){ .type = TVP_SEED, .id = 1, .seed = { 1, { rnd, sizeof(rnd) } } });
	ac_expect(others[1], &m, TVP_OK);
	usleep(100 * 1000);
	for (int i = 2; i < AGENT_MAX_CONNS - 1; i++)
		others[i] = ac_open();
	usleep(AGENT_EVICT_IDLE_MS * 1000 / 2);
	/* bytes of a frame trickled in are not a frame: still quiet */
	ac_send_raw(others[1], "\0\0", 2);
	while (others[1]->outlen)
		ac_io(others[1], 100);
	usleep((AGENT_EVICT_IDLE_MS / 2 + 500) * 1000);
	late = ac_open();
	ac_run(late, &(struct ac_job){ .argv = AC_ARGV("echo", "late") }, ol);
	ck_assert_str_eq(ol[1].out, "late\n");
	ck_assert_uint_eq(ac_expect_close(others[1]), TVP_ERR_LIMIT);
	/* A request that came in with the new connection, not read yet: that
	 * connection is not quiet (others[3] goes instead). */
	ck_assert_int_eq(kill(ac_agent_pid, SIGSTOP), 0);
	late2 = ac_connect();
	usleep(100 * 1000);
	ac_exec(others[2], 1, &(struct ac_job){ .argv = AC_ARGV("echo", "asked") });
	while (others[2]->outlen)
		ac_io(others[2], 100);
	ck_assert_int_eq(kill(ac_agent_pid, SIGCONT), 0);
	ac_expect(late2, &m, TVP_READY);
	ac_wait(others[2], o2, 1);
	ck_assert_str_eq(o2[1].out, "asked\n");
	ck_assert_uint_eq(ac_expect_close(others[3]), TVP_ERR_LIMIT);
	ac_wait(others[0], ob, 1);
	ck_assert_str_eq(ob[1].out, "busy\n");
	run_sh("echo keeper"); /* on c, the oldest: kept */
	ck_assert_str_eq(o[1].out, "keeper\n");
	ac_out_free(ob, AC_MAX_IDS);
	ac_out_free(ol, AC_MAX_IDS);
	ac_out_free(o2, AC_MAX_IDS);
	ac_close(late);
	ac_close(late2);
	for (int i = 0; i < AGENT_MAX_CONNS - 1; i++)
		ac_close(others[i]);
}
END_TEST

START_TEST(run_as_user)
{
	if (geteuid() != 0)
		return; /* only root can switch */
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "id -u; id -g; id -G"), .uid = 1000, .gid = 1001 },
	       o);
	ck_assert_str_eq(o[1].out, "1000\n1001\n1001\n");
}
END_TEST

START_TEST(many_jobs)
{
	/* More jobs than the agent runs at once, in waves of AC_MAX_IDS - 1. */
	for (int wave = 0; wave < 3; wave++) {
		memset(o, 0, sizeof(o));
		for (uint32_t id = 1; id < AC_MAX_IDS; id++)
			ac_exec(c, id, &(struct ac_job){ .argv = AC_ARGV("/bin/sh", "-c", "echo $$") });
		for (uint32_t id = 1; id < AC_MAX_IDS; id++) {
			ac_wait(c, o, id);
			ck_assert_int_eq(o[id].r.exit_code, 0);
			ck_assert_uint_gt(o[id].outlen, 1);
		}
		ac_out_free(o, AC_MAX_IDS);
	}
}
END_TEST

#define PID1_ENV_SCRIPT                                                                                                        \
	"echo \"$HOME|$LANG|$USER|$LOGNAME\"; pwd; case $PATH in \"$HOME/.local/bin:\"*) echo local;; *) echo nolocal;; esac;" \
	"cd \"$(awk -F: '$3 == 1000 {print $6}' /etc/passwd)\" 2>/dev/null && echo enter || echo noenter"

/* Run PID1_ENV_SCRIPT as job j of the PID 1 agent; want_home_lang: the
 * "$HOME|$LANG" the job sets, NULL: those of this host's uid 1000. */
static void pid1_job_env(const struct ac_job *j, const char *want_home_lang)
{
	struct passwd *pw = getpwuid(1000);
	const char *home = pw && pw->pw_dir[0] == '/' ? pw->pw_dir : "/";
	const char *name = pw ? pw->pw_name : "";
	bool local = pw && strcmp(home, "/");
	char want[1024], *cwd, *next;

	ac_run(c, j, o);
	ck_assert_msg(!o[1].failed, "job failed: %s", o[1].emsg);
	/* The home as passwd has it, however enterable. */
	cwd = strchr(o[1].out, '\n');
	ck_assert_ptr_nonnull(cwd);
	next = strchr(++cwd, '\n');
	ck_assert_ptr_nonnull(next);
	*next++ = 0;
	if (want_home_lang) {
		snprintf(want, sizeof(want), "%s|%s|%s\n", want_home_lang, name, name);
	} else {
		snprintf(want, sizeof(want), "%s|C.UTF-8|%s|%s\n", home, name, name);
		ck_assert_msg(!strncmp(next, local ? "local\n" : "nolocal\n", local ? 6 : 8), "got %s", next);
	}
	ck_assert_msg(!strncmp(o[1].out, want, strlen(want)), "got %s, want %s", o[1].out, want);
	/* The default cwd is the passwd home whatever HOME the job sets. */
	if (strstr(next, "noenter"))
		ck_assert_str_eq(cwd, "/");
	else
		ck_assert_str_eq(cwd, home);
	ac_out_free(o, AC_MAX_IDS);
}

/* PID 1 mode, in fresh pid/mount/uts/net namespaces so that its mounts,
 * hostname and reboot stay there. Skipped where namespaces are not allowed. */
START_TEST(pid1_in_namespaces)
{
	static const char *const wrap[] = {
		"unshare", "-pf", "-m", "-u", "-n", "-C", "--propagation", "private", NULL
	};
	static const uint8_t rnd[16] = { 9 };
	char sock[108], cmd[160];
	struct tvp_msg m;
	int st, n;

	if (system("unshare -pf -m -u -n -C --propagation private true 2>/dev/null") != 0)
		return;
	ac_close(c);
	ac_stop();
	/* /tmp and /run are mounted over in there: the socket lives elsewhere. */
	snprintf(sock, sizeof(sock), "/var/tmp/tinyvmm-agent-pid1-%d.sock", (int)getpid());
	ac_start_at(ac_agent_bin(), wrap, sock);
	c = ac_connect();
	ac_expect(c, &m, TVP_READY);
	ck_assert_uint_eq(m.ready.caps, TVP_CAP_SYSTEM | TVP_CAP_SETUID);
	run_sh("id -u; id -g; hostname; stat -c %a /tmp; readlink /dev/fd; echo $$; echo $TINYVMM_TEST_QUIRK;"
	       "cat /sys/class/net/lo/flags");
	/* Default identity 1000:1000, own hostname, fresh /tmp, /dev links, the
	 * job is the namespace's second process, init's environment passed on. */
	static const char want[] = "1000\n1000\ntinyvmm\n1777\n/proc/self/fd\n2\nfrom-init\n0x";
	ck_assert_msg(!strncmp(o[1].out, want, sizeof(want) - 1), "got: %s", o[1].out);
	ck_assert_uint_eq(strtoul(strrchr(o[1].out, 'x') + 1, NULL, 16) & 1, 1); /* lo is up */
	ac_out_free(o, AC_MAX_IDS);

	/* As init the agent gives jobs their user's login environment and home
	 * (here this host's uid 1000, if any), falling back to / when the home
	 * cannot be entered; job entries still win. */
	pid1_job_env(&(struct ac_job){ .argv = AC_ARGV("sh", "-c", PID1_ENV_SCRIPT) }, NULL);
	pid1_job_env(
		&(struct ac_job){ .argv = AC_ARGV("sh", "-c", PID1_ENV_SCRIPT), .env = AC_ARGV("HOME=/tmp", "LANG=C") },
		"/tmp|C");
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("pwd"), .cwd = "/proc" }, o);
	ck_assert_str_eq(o[1].out, "/proc\n");
	ac_out_free(o, AC_MAX_IDS);
	/* The agent runs ahead of its jobs (nice -10), the jobs at 0. */
	run_sh("cut -d' ' -f19 /proc/self/stat /proc/1/stat");
	ck_assert_str_eq(o[1].out, "0\n-10\n");
	ac_out_free(o, AC_MAX_IDS);
	/* As init it mounts cgroup2 (its own cgroup namespace here) and runs
	 * each job in a cgroup of its own. */
	run_sh("grep '^0::' /proc/self/cgroup");
	ck_assert_msg(!strncmp(o[1].out, "0::/job-", 8), "got: %s", o[1].out);
	n = atoi(o[1].out + 8);

	ac_out_free(o, AC_MAX_IDS);
	/* A root job that takes the next names makes the agent skip them (the
	 * directories it made are its own: they stay). */
	snprintf(cmd, sizeof(cmd), "mkdir /sys/fs/cgroup/job-%d /sys/fs/cgroup/job-%d && grep '^0::' /proc/self/cgroup",
		 n + 2, n + 3);
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("sh", "-c", cmd), .root = true }, o);
	snprintf(cmd, sizeof(cmd), "0::/job-%d\n", n + 1);
	ck_assert_msg(o[1].out && !strcmp(o[1].out, cmd), "got %s, stderr %s", o[1].out, o[1].err);
	ac_out_free(o, AC_MAX_IDS);
	run_sh("grep '^0::' /proc/self/cgroup");
	snprintf(cmd, sizeof(cmd), "0::/job-%d\n", n + 4);
	ck_assert_str_eq(o[1].out, cmd);
	ac_out_free(o, AC_MAX_IDS);
	/* They are on the host's cgroup2 tree (this namespace's root is our
	 * cgroup): remove them. */
	snprintf(cmd, sizeof(cmd), "rmdir /sys/fs/cgroup/job-%d /sys/fs/cgroup/job-%d && echo gone", n + 2, n + 3);
	ac_run(c, &(struct ac_job){ .argv = AC_ARGV("sh", "-c", cmd), .root = true }, o);
	ck_assert_str_eq(o[1].out, "gone\n");
	ac_out_free(o, AC_MAX_IDS);

	/* The hostname through a file PUT, as tinyvmm serve sets a fork's:
	 * /proc/sys checks the effective uid, so only as root (the default
	 * identity's PUT is refused; it was let through as root before) */
	for (int as_root = 0; as_root < 2; as_root++) {
		static const uint8_t name[] = "sbx-put";
		uint32_t id = 40 + (uint32_t)as_root, who = as_root ? 0 : TVP_ID_DEFAULT;

		ac_send(c, &(struct tvp_msg){ .type = TVP_PUT_FILE,
					      .id = id,
					      .put = { 0644, who, who, tvp_cstr("/proc/sys/kernel/hostname") } });
		ac_send(c, &(struct tvp_msg){
				   .type = TVP_FILE_DATA, .id = id, .data = { .data = { name, sizeof(name) - 1 } } });
		ac_send(c, &(struct tvp_msg){ .type = TVP_FILE_END, .id = id, .file_end = { sizeof(name) - 1, 0 } });
		ck_assert_int_eq(ac_recv(c, &m), 1);
		if (as_root) {
			ck_assert_uint_eq(m.type, TVP_OK);
		} else {
			ck_assert_uint_eq(m.type, TVP_ERROR);
			ck_assert_int_eq(m.error.sys_errno, EACCES);
			ck_assert_int_eq(ac_recv(c, &m), 1); /* its FILE_DATA and FILE_END: no such transfer */
			ck_assert_int_eq(ac_recv(c, &m), 1);
		}
	}
	run_sh("hostname");
	ck_assert_str_eq(o[1].out, "sbx-put\n");
	ac_out_free(o, AC_MAX_IDS);
	/* Entropy only: the clock is not namespaced. */
	ac_send(c, &(struct tvp_msg){ .type = TVP_SEED, .id = 2, .seed = { 0, { rnd, sizeof(rnd) } } });
	ac_expect(c, &m, TVP_OK);
	ck_assert_uint_eq(m.ok.value, 1);
	/* SHUTDOWN: reboot() in a pid namespace ends its init. */
	ac_send(c, &(struct tvp_msg){ .type = TVP_SHUTDOWN });
	ck_assert_uint_eq(ac_expect_close(c), 0);
	st = ac_wait_exit(10000);
	ck_assert_msg(WIFSIGNALED(st) || WIFEXITED(st), "status 0x%x", st);
	unlink(sock);
}
END_TEST

static Suite *agent_suite(void)
{
	Suite *s = suite_create("agent");
	TCase *tc = tcase_create("jobs");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, ready_fields);
	tcase_add_test(tc, exit_codes);
	tcase_add_test(tc, killed_by_signal);
	tcase_add_test(tc, cpu_time_reported);
	tcase_add_test(tc, stdout_stderr_apart_in_order);
	tcase_add_test(tc, large_output_in_order);
	tcase_add_test(tc, stdin_bytes);
	tcase_add_test(tc, no_stdin_is_eof);
	tcase_add_test(tc, stdin_stream);
	tcase_add_test(tc, env_and_cwd);
	tcase_add_test(tc, path_lookup);
	tcase_add_test(tc, spawn_errors);
	tcase_add_test(tc, timeout_kills_group);
	tcase_add_test(tc, exit_kills_leftovers);
	tcase_add_test(tc, kill_request);
	tcase_add_test(tc, output_caps);
	tcase_add_test(tc, two_jobs_one_connection);
	tcase_add_test(tc, two_connections);
	tcase_add_test(tc, malformed_ends_only_that_connection);
	tcase_add_test(tc, unknown_type_keeps_connection);
	tcase_add_test(tc, closing_connection_kills_its_jobs);
	tcase_add_test(tc, seed_and_shutdown_in_test_mode);
	tcase_add_test(tc, idle_connection_gives_its_slot_to_a_new_one);
	tcase_add_test(tc, run_as_user);
	tcase_add_test(tc, many_jobs);
	tcase_add_test(tc, pid1_in_namespaces);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(agent_suite());
}
