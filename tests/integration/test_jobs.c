/* Jobs end to end (issues: virtio-blk root disk, vsock + agent): one VM
 * boots the real guest with the base image as a copy-on-write root disk
 * and runs every job below; a second VM, started at the same time from the
 * same base, checks isolation; a third, read-only. No wall-clock asserts.
 *
 * With TINYVMM_IT_JAIL=1 the same jobs run in VMs of `./tinyvmm run --jail`
 * (the host walls issue: "the jobs suite also passes under --jail"),
 * reached through their --vsock-uds sockets; their jails are gone after. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/integration/it_common.h"
#include "tests/integration/it_jail.h"
#include "vmm/tinyvmm.h"

#define BOOT_MS 600000

struct vm_handle {
	struct tvm_vm *vm; /* in-process */
	pid_t pid;         /* jailed: its tinyvmm process */
	char uds[108];
};

static struct vm_handle main_vm, twin_vm;
static char base_sum_before[128];
static struct it_jail jail;

static void sha256(const char *path, char *out, size_t len)
{
	char cmd[600];
	FILE *p;

	snprintf(cmd, sizeof(cmd), "sha256sum '%s' | cut -c1-64", path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(fgets(out, (int)len, p));
	pclose(p);
}

/* ./tinyvmm run --jail for h: a long-lived VM of the same kernel and base
 * image, booted (not restored: as in-process), reached at h->uds. */
static void boot_jailed(struct vm_handle *h, int read_only)
{
	char root[PATH_MAX + 8];
	char *argv[] = { "tinyvmm", "run",          IT_JAIL_BOOT(&jail), root,    "--vsock-uds",
			 h->uds,    "--serial-out", "/dev/null",         "--ttl", "1800",
			 NULL };

	snprintf(root, sizeof(root), "%s%s", getenv("TINYVMM_ROOTFS"), read_only ? ",ro" : "");
	h->pid = it_jail_spawn(argv);
}

static void boot(struct vm_handle *h, const char *tag, int read_only)
{
	struct tvm_config c;
	struct tvm_err e = { 0 };

	if (jail.on) {
		snprintf(h->uds, sizeof(h->uds), "/tmp/tinyvmm-it-%s-%d.sock", tag, getpid());
		boot_jailed(h, read_only);
		return;
	}
	tvm_config_init(&c);
	c.seccomp = TVM_SECCOMP_KILL;
	c.kernel_path = it_guest("vmlinux");
	c.cmdline = "console=ttyS0 reboot=k panic=-1 quiet";
	c.serial_out_fd = -1;
	c.drives[0] = (struct tvm_drive){ .path = getenv("TINYVMM_ROOTFS"), .cow = !read_only, .read_only = read_only };
	c.nr_drives = 1;
	c.root_drive = 1;
	snprintf(h->uds, sizeof(h->uds), "/tmp/tinyvmm-it-%s-%d.sock", tag, getpid());
	c.vsock_uds = h->uds;
	c.ttl_ms = 1800000; /* whatever happens to the test, the VM goes */
	ck_assert_msg(c.drives[0].path, "TINYVMM_ROOTFS is not set (run through make integration)");
	ck_assert_msg(tvm_vm_create(&c, &h->vm, &e) == 0, "create: %s", e.msg);
	ck_assert_msg(tvm_vm_start(h->vm, &e) == 0, "start: %s", e.msg);
}

static struct tvm_agent *agent(struct vm_handle *h)
{
	struct tvm_agent *a;
	struct tvm_err e = { 0 };
	struct tvm_agent_addr to =
		jail.on ? (struct tvm_agent_addr){ .uds_path = h->uds } : (struct tvm_agent_addr){ .vm = h->vm };

	ck_assert_msg(tvm_agent_connect(&to, BOOT_MS, 0, &a, &e) == 0, "agent: %s", e.msg);
	return a;
}

/* Run job j (argv and limits; its output collected into o) on h. */
static struct tvm_job_result run_job(struct vm_handle *h, struct tvm_job j, struct it_out *o)
{
	struct tvm_agent *a = agent(h);
	struct tvm_err e = { 0 };
	struct tvm_job_result r;

	j.on_output = it_collect;
	j.ctx = o;
	ck_assert_msg(tvm_agent_exec(a, &j, &r, &e) == 0, "exec %s: %s", j.argv[0], e.msg);
	tvm_agent_close(a);
	return r;
}

/* Run argv (root: as root, else as the default user) and collect its output. */
static struct tvm_job_result run(struct vm_handle *h, const char *const *argv, struct it_out *o, int root)
{
	return run_job(h,
		       (struct tvm_job){ .argv = argv,
					 .uid = root ? TVM_ID_ROOT : TVM_ID_DEFAULT,
					 .gid = root ? TVM_ID_ROOT : TVM_ID_DEFAULT },
		       o);
}

static void setup(void)
{
	it_jail_init(&jail, "jobs");
	sha256(getenv("TINYVMM_ROOTFS"), base_sum_before, sizeof(base_sum_before));
	/* Both boot at once: the second one is the isolation check's twin. */
	boot(&main_vm, "main", 0);
	boot(&twin_vm, "twin", 0);
}

static void teardown(void)
{
	tvm_vm_destroy(main_vm.vm);
	tvm_vm_destroy(twin_vm.vm);
	it_jail_end(&main_vm.pid, SIGTERM);
	it_jail_end(&twin_vm.pid, SIGTERM);
}

START_TEST(exit_codes_and_signals)
{
	static const char *const codes[] = { "0", "1", "42" };
	struct it_out o = { 0 };

	for (int i = 0; i < 3; i++) {
		const char *argv[] = { "sh", "-c", "exit $0", codes[i], NULL };
		struct tvm_job_result r = run(&main_vm, argv, &o, 0);
		ck_assert_int_eq(r.exit_code, atoi(codes[i]));
		ck_assert_int_eq(r.signal, 0);
	}
	const char *kill9[] = { "sh", "-c", "kill -9 $$", NULL };
	struct tvm_job_result r = run(&main_vm, kill9, &o, 0);
	ck_assert_int_eq(r.signal, 9);
	ck_assert_int_eq(r.exit_code, 128 + 9);
	it_out_free(&o);
}
END_TEST

START_TEST(streams_apart_and_in_order)
{
	const char *argv[] = { "sh", "-c", "echo out1; echo err1 >&2; echo out2; echo err2 >&2", NULL };
	struct it_out o = { 0 };
	struct tvm_job_result r = run(&main_vm, argv, &o, 0);

	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_str_eq(it_str(&o, 1), "out1\nout2\n");
	ck_assert_str_eq(it_str(&o, 2), "err1\nerr2\n");
	it_out_free(&o);
}
END_TEST

START_TEST(stdin_env_workdir)
{
	const char *const env[] = { "GREETING=hello there", NULL };
	const char *argv[] = { "sh", "-c", "echo \"$GREETING\"; pwd; id -u; cat", NULL };
	struct tvm_agent *a = agent(&main_vm);
	struct it_out o = { 0 };
	struct tvm_err e = { 0 };
	struct tvm_job j = { .argv = argv,
			     .env = env,
			     .cwd = "/tmp",
			     .uid = TVM_ID_DEFAULT,
			     .gid = TVM_ID_DEFAULT,
			     .stdin_data = "from stdin\n",
			     .stdin_len = 11,
			     .on_output = it_collect,
			     .ctx = &o };
	struct tvm_job_result r;

	ck_assert_msg(tvm_agent_exec(a, &j, &r, &e) == 0, "exec: %s", e.msg);
	tvm_agent_close(a);
	ck_assert_int_eq(r.exit_code, 0);
	/* The default user is unprivileged. */
	ck_assert_str_eq(it_str(&o, 1), "hello there\n/tmp\n1000\nfrom stdin\n");
	it_out_free(&o);
}
END_TEST

/* Secure by default: a job that leaves uid and gid zero ({ .argv = argv })
 * runs as the agent's unprivileged user; root only when asked for. */
START_TEST(zero_job_unprivileged_root_when_asked)
{
	const char *argv[] = { "sh", "-c", "id -u; id -g", NULL };
	struct tvm_agent *a = agent(&main_vm);
	struct it_out o = { 0 };
	struct tvm_err e = { 0 };
	struct tvm_job j = { .argv = argv, .on_output = it_collect, .ctx = &o };
	struct tvm_job_result r;

	ck_assert_msg(tvm_agent_exec(a, &j, &r, &e) == 0, "exec: %s", e.msg);
	tvm_agent_close(a);
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_str_eq(it_str(&o, 1), "1000\n1000\n");
	it_out_free(&o);
	r = run(&main_vm, argv, &o, 1); /* TVM_ID_ROOT */
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_str_eq(it_str(&o, 1), "0\n0\n");
	it_out_free(&o);
}
END_TEST

/* A child that outlives its parent must die too, and (the limits issue:
 * each job has its own cgroup in the guest) so must one that left the
 * job's process group with setsid. */
START_TEST(timeout_kills_the_group_and_what_left_it)
{
	const char *argv[] = { "sh", "-c", "setsid sh -c 'while :; do sleep 1; done' & sleep 1000 & sleep 1000", NULL };
	const char *ps[] = { "sh", "-c",
			     "ps -eo args | grep -c -e '^sh -c while' -e '^sleep' || true; "
			     "ls /sys/fs/cgroup | grep -c '^job-'",
			     NULL };
	struct it_out o = { 0 };
	struct tvm_job_result r = run_job(
		&main_vm,
		(struct tvm_job){ .argv = argv, .timeout_ms = 4000, .uid = TVM_ID_DEFAULT, .gid = TVM_ID_DEFAULT }, &o);

	ck_assert_int_eq(r.timed_out, 1);
	ck_assert_int_eq(r.signal, 9);
	it_out_free(&o);
	o = (struct it_out){ 0 };
	run(&main_vm, ps, &o, 0);
	/* nothing of it left, and one job cgroup: this job's own */
	ck_assert_str_eq(it_str(&o, 1), "0\n1\n");
	it_out_free(&o);
}
END_TEST

/* A fork bomb is held by its pids limit, reported, and the VM goes on. */
START_TEST(fork_bomb_is_held_by_job_pids)
{
	const char *argv[] = { "sh", "-c", "while :; do sleep 100 & done", NULL };
	const char *after[] = { "sh", "-c", "echo alive", NULL };
	struct it_out o = { 0 };
	struct tvm_job_result r =
		run_job(&main_vm, (struct tvm_job){ .argv = argv, .timeout_ms = 120000, .pids_max = 12 }, &o);

	ck_assert_msg(r.pids_limited, "not flagged: exit %d, stderr: %s", r.exit_code, it_str(&o, 2));
	ck_assert_int_eq(r.timed_out, 0); /* the shell gave up when its fork failed */
	ck_assert_int_eq(r.oom_killed, 0);
	it_out_free(&o);
	o = (struct it_out){ 0 };
	r = run(&main_vm, after, &o, 0);
	ck_assert_int_eq(r.pids_limited, 0);
	ck_assert_str_eq(it_str(&o, 1), "alive\n");
	it_out_free(&o);
}
END_TEST

/* Past its memory limit the job (not the VM) is killed, and says so. */
START_TEST(job_over_its_memory_is_oom_killed)
{
	const char *argv[] = { "python3", "-c", "b = b'x' * (96 << 20); print(len(b))", NULL };
	struct it_out o = { 0 };
	struct tvm_job_result r = run_job(&main_vm, (struct tvm_job){ .argv = argv, .mem_max_bytes = 24 << 20 }, &o);

	ck_assert_msg(r.oom_killed, "not flagged: exit %d, stderr: %s", r.exit_code, it_str(&o, 2));
	ck_assert_int_eq(r.signal, 9);
	it_out_free(&o);
	o = (struct it_out){ 0 };
	r = run(&main_vm, argv, &o, 0); /* without the limit it fits */
	ck_assert_int_eq(r.oom_killed, 0);
	ck_assert_str_eq(it_str(&o, 1), "100663296\n");
	it_out_free(&o);
}
END_TEST

struct flood {
	struct it_out o;  /* stderr only */
	size_t out_bytes; /* stdout is counted, not kept: we measure the VMM */
	long peak_rss;    /* VMM RSS without guest RAM, sampled as output arrives */
};

static void flood_collect(void *ctx, int stream, const void *buf, size_t len)
{
	struct flood *f = ctx;
	long rss = jail.on ? 0 : tvm_vm_vmm_rss_kib(main_vm.vm);

	if (stream == 1) {
		size_t i = 0;

		/* One check call per chunk, not per byte: in check's no-fork mode
		 * each one, passing too, is a record the runner keeps and reads
		 * back (a million of them took minutes and memory). */
		while (i < len && ((const uint8_t *)buf)[i] == 0)
			i++;
		ck_assert_msg(i == len, "byte %zu of a chunk of zeros is %u", f->out_bytes + i,
			      ((const uint8_t *)buf)[i < len ? i : 0]);
		f->out_bytes += len;
	} else {
		it_collect(&f->o, stream, buf, len);
	}
	if (rss > f->peak_rss)
		f->peak_rss = rss;
}

START_TEST(flood_is_truncated_and_bounded)
{
	/* 20 MiB of output, 1 MiB kept: the VMM must not hold the rest. */
	const char *argv[] = { "sh", "-c", "head -c 20971520 /dev/zero; echo done >&2", NULL };
	struct tvm_agent *a = agent(&main_vm);
	struct tvm_err e = { 0 };
	struct flood f = { 0 };
	struct tvm_job j = { .argv = argv,
			     .stdout_cap = 1 << 20,
			     .uid = TVM_ID_DEFAULT,
			     .gid = TVM_ID_DEFAULT,
			     .on_output = flood_collect,
			     .ctx = &f };
	struct tvm_job_result r;
	/* Jailed, the VMM is another process: its memory is measured here
	 * in-process (the same device code). */
	long before = jail.on ? 0 : tvm_vm_vmm_rss_kib(main_vm.vm);

	ck_assert(jail.on || before > 0);
	ck_assert_msg(tvm_agent_exec(a, &j, &r, &e) == 0, "exec: %s", e.msg);
	tvm_agent_close(a);
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_int_eq(r.stdout_truncated, 1);
	ck_assert_uint_eq(f.out_bytes, 1 << 20);
	ck_assert_str_eq(it_str(&f.o, 2), "done\n");
	/* While 20 MiB went through, the VMM (guest RAM not counted) grew by
	 * far less: the vsock credit window (256 KiB), the decoder's frame
	 * buffer, allocator slack and ASan's quarantine (4 MiB here). */
	if (!jail.on) {
		ck_assert_int_lt(f.peak_rss - before, 8 * 1024);
		ck_assert_int_lt(tvm_vm_vmm_rss_kib(main_vm.vm) - before, 8 * 1024);
	}
	it_out_free(&f.o);
}
END_TEST

START_TEST(put_get_round_trip)
{
	size_t n = 5 << 20, got_len = 0;
	uint8_t *data = malloc(n);
	void *got = NULL;
	struct tvm_agent *a = agent(&main_vm);
	struct tvm_err e = { 0 };
	uint32_t x = 12345;

	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245 + 12345;
		data[i] = (uint8_t)(x >> 16);
	}
	ck_assert_msg(tvm_agent_put_file(a, "/tmp/it/blob.bin", 0644, data, n, &e) == 0, "put: %s", e.msg);
	ck_assert_msg(tvm_agent_get_file(a, "/tmp/it/blob.bin", n, &got, &got_len, &e) == 0, "get: %s", e.msg);
	ck_assert_uint_eq(got_len, n);
	ck_assert_int_eq(memcmp(got, data, n), 0);
	/* A cap below the size is refused, not cut silently. */
	free(got);
	ck_assert_int_lt(tvm_agent_get_file(a, "/tmp/it/blob.bin", n - 1, &got, &got_len, &e), 0);
	ck_assert_int_lt(tvm_agent_get_file(a, "/nonexistent/file", n, &got, &got_len, &e), 0);
	ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/file"));
	tvm_agent_close(a);
	free(data);
}
END_TEST

struct par {
	const char *word;
	struct it_out o;
	struct tvm_job_result r;
};

static void *par_job(void *arg)
{
	struct par *p = arg;
	const char *argv[] = { "sh", "-c", "sleep 2; echo $0", p->word, NULL };

	p->r = run(&main_vm, argv, &p->o, 0);
	return NULL;
}

START_TEST(two_jobs_at_once)
{
	struct par p[2] = { { .word = "first" }, { .word = "second" } };
	pthread_t t[2];

	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, par_job, &p[i]);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	ck_assert_str_eq(it_str(&p[0].o, 1), "first\n");
	ck_assert_str_eq(it_str(&p[1].o, 1), "second\n");
	ck_assert_int_eq(p[0].r.exit_code, 0);
	ck_assert_int_eq(p[1].r.exit_code, 0);
	it_out_free(&p[0].o);
	it_out_free(&p[1].o);
}
END_TEST

START_TEST(disk_write_sync_read_and_isolation)
{
	const char *write[] = { "sh", "-c", "echo $0 > /root/mark && sync && cat /root/mark", "main-vm", NULL };
	const char *look[] = { "sh", "-c", "cat /root/mark 2>/dev/null || echo absent", NULL };
	struct it_out o = { 0 };
	struct tvm_job_result r = run(&main_vm, write, &o, 1);

	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_str_eq(it_str(&o, 1), "main-vm\n");
	it_out_free(&o);
	/* The twin, started from the same base at the same time, does not
	 * see it; and its own write stays its own. */
	run(&twin_vm, look, &o, 1);
	ck_assert_str_eq(it_str(&o, 1), "absent\n");
	it_out_free(&o);
	const char *write2[] = { "sh", "-c", "echo $0 > /root/mark && sync", "twin-vm", NULL };
	run(&twin_vm, write2, &o, 1);
	run(&main_vm, look, &o, 1);
	ck_assert_str_eq(it_str(&o, 1), "main-vm\n");
	it_out_free(&o);
}
END_TEST

/* Local clients that connect to the hybrid socket and never finish their
 * CONNECT line, one per connection slot of the device, do not lock the
 * agent out: a normal exec works, and the device closes them at their
 * deadline. */
START_TEST(half_open_clients_do_not_lock_out_exec)
{
	enum { SLOTS = 256 }; /* the device's connection slots (VSOCK_MAX_CONNS) */
	const char *argv[] = { "echo", "through", NULL };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct it_out o = { 0 };
	struct tvm_err e = { 0 };
	struct tvm_job j = { .argv = argv, .on_output = it_collect, .ctx = &o };
	struct tvm_job_result r;
	struct tvm_agent *a;
	int fds[SLOTS], left = SLOTS;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", main_vm.uds);
	for (int i = 0; i < SLOTS; i++) {
		fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		ck_assert_int_eq(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
		ck_assert_int_eq(write(fds[i], "CONNECT", 7), 7);
	}
	/* Accepted in order: ours comes after all of them. */
	ck_assert_msg(tvm_agent_connect_uds(main_vm.uds, TVM_AGENT_PORT, 10000, &a, &e) == 0, "uds: %s", e.msg);
	ck_assert_msg(tvm_agent_exec(a, &j, &r, &e) == 0, "exec: %s", e.msg);
	tvm_agent_close(a);
	ck_assert_int_eq(r.exit_code, 0);
	ck_assert_str_eq(it_str(&o, 1), "through\n");
	it_out_free(&o);
	/* Every one of them ends with EOF, evicted or at its deadline (no
	 * wall-clock assert: up to a minute each). */
	for (int i = 0; i < SLOTS; i++) {
		struct pollfd pf = { .fd = fds[i], .events = POLLIN };
		char b;

		if (poll(&pf, 1, 60000) == 1 && read(fds[i], &b, 1) == 0)
			left--;
		close(fds[i]);
	}
	ck_assert_int_eq(left, 0);
}
END_TEST

struct py_ctx {
	const char **argv;
	struct it_out o;
	struct tvm_job_result r;
};

static void *py_thread(void *arg)
{
	struct py_ctx *c = arg;

	c->r = run(&main_vm, c->argv, &c->o, 0);
	return NULL;
}

START_TEST(hybrid_vsock_exec_and_guest_connects_out)
{
	struct tvm_agent *a;
	struct tvm_err e = { 0 };
	struct tvm_job_result r;
	struct it_out o = { 0 };
	const char *argv[] = { "sh", "-c", "echo via-uds", NULL };
	struct tvm_job j = {
		.argv = argv, .uid = TVM_ID_DEFAULT, .gid = TVM_ID_DEFAULT, .on_output = it_collect, .ctx = &o
	};
	char path[PATH_MAX + 8];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd, cfd;
	char buf[32] = { 0 };

	/* Host -> guest through the Firecracker-style socket. */
	ck_assert_msg(tvm_agent_connect_uds(main_vm.uds, TVM_AGENT_PORT, 10000, &a, &e) == 0, "uds: %s", e.msg);
	ck_assert_msg(tvm_agent_exec(a, &j, &r, &e) == 0, "exec: %s", e.msg);
	tvm_agent_close(a);
	ck_assert_str_eq(it_str(&o, 1), "via-uds\n");
	it_out_free(&o);

	/* Guest -> host: CID 2 port 5005 lands on "<uds>_5005". Jailed, the
	 * VMM's socket is in the jail (h->uds is a link to it): so is its
	 * "_5005", and the jail's uid must be able to connect. */
	if (jail.on) {
		char real[PATH_MAX];

		ck_assert_ptr_nonnull(realpath(main_vm.uds, real));
		snprintf(path, sizeof(path), "%s_5005", real);
	} else {
		snprintf(path, sizeof(path), "%s_5005", main_vm.uds);
	}
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	unlink(path);
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(chmod(path, 0666), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);
	const char *py[] = { "python3", "-c",
			     "import socket\n"
			     "s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)\n"
			     "s.connect((2, 5005))\n"
			     "s.sendall(b'ping from guest')\n"
			     "print(s.recv(64).decode())\n",
			     NULL };
	struct py_ctx ctx = { .argv = py };
	pthread_t t;

	/* The job blocks until we answer, so it runs on a thread. */
	pthread_create(&t, NULL, py_thread, &ctx);
	cfd = accept(lfd, NULL, NULL);
	ck_assert_int_ge(cfd, 0);
	ck_assert_int_eq(read(cfd, buf, 15), 15);
	ck_assert_str_eq(buf, "ping from guest");
	ck_assert_int_eq(write(cfd, "pong from host", 14), 14);
	pthread_join(t, NULL);
	close(cfd);
	close(lfd);
	unlink(path);
	ck_assert_int_eq(ctx.r.exit_code, 0);
	ck_assert_str_eq(it_str(&ctx.o, 1), "pong from host\n");
	it_out_free(&ctx.o);
}
END_TEST

START_TEST(cli_exec_on_running_vm)
{
	char out[128], err[128], *o;
	char *argv[] = { "tinyvmm", "exec", "--vsock-uds", main_vm.uds,       "-e", "X=seven",
			 "--",      "sh",   "-c",          "echo $X; exit 7", NULL };

	it_tmp(out, sizeof(out), "out");
	it_tmp(err, sizeof(err), "err");
	ck_assert_int_eq(it_run_cli(argv, out, err, 0), 7);
	o = it_slurp(out);
	ck_assert_str_eq(o, "seven\n");
	free(o);
	unlink(out);
	unlink(err);
}
END_TEST

START_TEST(cli_run_job_with_files_and_json)
{
	char out[128], err[128], in[128], back[128], *o;
	int fd;
	char put[300], get[300];
	char *argv[] = { "tinyvmm", "run", "--kernel", (char *)it_guest("vmlinux"), "--rootfs",
			 getenv("TINYVMM_ROOTFS"), "--put", put, "--get", get, "--json", "--timeout", "120",
			 /* jailed: the run is too (else a second --timeout) */
			 jail.on ? "--jail" : "--timeout", jail.on ? jail.opt : "120", "--", "sh", "-c",
			 "tr a-z A-Z < /tmp/in.txt > /tmp/out.txt; echo 'said\"hi\"'; exit 3", NULL };

	it_tmp(out, sizeof(out), "out");
	it_tmp(err, sizeof(err), "err");
	it_tmp(in, sizeof(in), "in");
	it_tmp(back, sizeof(back), "back");
	fd = open(in, O_WRONLY);
	ck_assert_int_eq(write(fd, "hello file\n", 11), 11);
	close(fd);
	snprintf(put, sizeof(put), "%s:/tmp/in.txt", in);
	snprintf(get, sizeof(get), "/tmp/out.txt:%s", back);
	/* The job's exit status is tinyvmm's. */
	ck_assert_int_eq(it_run_cli(argv, out, err, 0), 3);
	o = it_slurp(out);
	ck_assert_msg(strstr(o, "\"exit_code\":3") && strstr(o, "\"stdout\":\"said\\\"hi\\\"\\n\""), "json: %s", o);
	free(o);
	o = it_slurp(back);
	ck_assert_str_eq(o, "HELLO FILE\n");
	free(o);
	unlink(out);
	unlink(err);
	unlink(in);
	unlink(back);
}
END_TEST

START_TEST(read_only_root_refuses_writes)
{
	struct vm_handle ro = { 0 };
	const char *argv[] = { "sh", "-c", "echo x > /root/ro-test && echo wrote || echo refused", NULL };
	struct it_out o = { 0 };

	boot(&ro, "ro", 1);
	run(&ro, argv, &o, 1);
	ck_assert_str_eq(it_str(&o, 1), "refused\n");
	it_out_free(&o);
	tvm_vm_destroy(ro.vm);
	it_jail_end(&ro.pid, SIGTERM);
}
END_TEST

struct stuck {
	struct tvm_agent *a;
	struct tvm_job_result r;
	int rc;
	int done;
};

static void *stuck_job(void *arg)
{
	struct stuck *st = arg;
	const char *argv[] = { "sleep", "1000", NULL };
	struct tvm_job j = { .argv = argv, .uid = TVM_ID_DEFAULT, .gid = TVM_ID_DEFAULT };
	struct tvm_err e = { 0 };

	st->rc = tvm_agent_exec(st->a, &j, &st->r, &e);
	__atomic_store_n(&st->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

START_TEST(stopping_the_vm_ends_a_running_job)
{
	/* What --ttl and Ctrl-C do in job mode: the VM is stopped while the
	 * host waits on a job; the wait must end, with an error. Runs last on
	 * main_vm. */
	struct stuck st = { .a = agent(&main_vm) };
	pthread_t t;
	int i;

	pthread_create(&t, NULL, stuck_job, &st);
	sleep(3);
	ck_assert_int_eq(__atomic_load_n(&st.done, __ATOMIC_ACQUIRE), 0);
	if (jail.on)
		kill(main_vm.pid, SIGTERM);
	else
		tvm_vm_stop(main_vm.vm);
	for (i = 0; i < 600 && !__atomic_load_n(&st.done, __ATOMIC_ACQUIRE); i++)
		usleep(100000);
	ck_assert_msg(st.done, "the job's caller still waits 60 s after the VM was stopped");
	pthread_join(t, NULL);
	ck_assert_int_lt(st.rc, 0);
	tvm_agent_close(st.a);
	if (jail.on) /* stopped by SIGTERM: 128 + 15 */
		ck_assert_int_eq(it_jail_end(&main_vm.pid, 0), 143);
	else
		ck_assert_int_eq(tvm_vm_exit_reason(main_vm.vm), TVM_EXIT_STOPPED);
}
END_TEST

START_TEST(base_image_unchanged)
{
	char after[128];

	/* Runs last: every VM above wrote to its copy-on-write root. */
	teardown();
	main_vm.vm = twin_vm.vm = NULL;
	sha256(getenv("TINYVMM_ROOTFS"), after, sizeof(after));
	ck_assert_str_eq(after, base_sum_before);
	it_jail_done(&jail);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("jobs");
	TCase *tc = tcase_create("jobs");

	/* One VM for all tests (it_run_suite does not fork), and generous
	 * timeouts for the emulated guest kernel. */
	tcase_add_unchecked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 900);
	tcase_add_test(tc, exit_codes_and_signals);
	tcase_add_test(tc, streams_apart_and_in_order);
	tcase_add_test(tc, stdin_env_workdir);
	tcase_add_test(tc, zero_job_unprivileged_root_when_asked);
	tcase_add_test(tc, timeout_kills_the_group_and_what_left_it);
	tcase_add_test(tc, fork_bomb_is_held_by_job_pids);
	tcase_add_test(tc, job_over_its_memory_is_oom_killed);
	tcase_add_test(tc, put_get_round_trip);
	tcase_add_test(tc, two_jobs_at_once);
	tcase_add_test(tc, disk_write_sync_read_and_isolation);
	tcase_add_test(tc, hybrid_vsock_exec_and_guest_connects_out);
	tcase_add_test(tc, half_open_clients_do_not_lock_out_exec);
	tcase_add_test(tc, flood_is_truncated_and_bounded);
	tcase_add_test(tc, cli_exec_on_running_vm);
	tcase_add_test(tc, cli_run_job_with_files_and_json);
	tcase_add_test(tc, read_only_root_refuses_writes);
	tcase_add_test(tc, stopping_the_vm_ends_a_running_job);
	tcase_add_test(tc, base_image_unchanged);
	suite_add_tcase(su, tc);
	return it_run_suite(su);
}
