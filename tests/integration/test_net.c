/* virtio-net end to end, entirely inside a network namespace this test
 * makes for itself (nothing outside it is touched): the VM's TAP gets the
 * host side address 10.77.0.1/24, a TCP echo server listens there on an
 * allowed port and on a port the VM's egress allow-list excludes, and the
 * guest (10.77.0.2, configured by the agent from --net-ip) echoes 1 MiB
 * through the allowed one while the other cannot even connect. Then the
 * guest throws malformed frames at the NIC and the VMM keeps serving.
 * Last, the VM is snapshotted and restored onto a new TAP. */
#include <arpa/inet.h>
#include <errno.h>
#include <sys/wait.h>
#include <signal.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/integration/it_common.h"
#include "vmm/tinyvmm.h"

#define TAP "tvmit0"
#define TAP2 "tvmit1" /* the restored VM's */
#define HOST_IP "10.77.0.1"
#define PORT_OK 7007
#define PORT_DENIED 7008
#define PORT_HTTP 7009 /* a host HTTP server: a file and a pip index */

static struct tvm_vm *vm;
static int netns_ok;
static double unlimited_tx_kibs; /* measured before the snapshot */

static int listen_on(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	inet_pton(AF_INET, HOST_IP, &sa.sin_addr);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(fd, 4), 0);
	return fd;
}

/* Echo every byte of each connection back until the peer shuts down. */
static void *echo_server(void *arg)
{
	int lfd = (int)(intptr_t)arg;

	for (;;) {
		char buf[65536];
		ssize_t n;
		int c = accept(lfd, NULL, NULL);

		if (c < 0)
			return NULL;
		while ((n = read(c, buf, sizeof(buf))) > 0)
			if (write(c, buf, (size_t)n) != n)
				break;
		close(c);
	}
}

static void setup(void)
{
	struct tvm_config c;
	struct tvm_err e = { 0 };
	pthread_t t;

	/* Our own namespace: the TAP, its address and the servers live and
	 * die with this process. */
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "test_net: unshare(CLONE_NEWNET): %s: skipped\n", strerror(errno));
		return;
	}
	netns_ok = 1;
	tvm_config_init(&c);
	c.seccomp = TVM_SECCOMP_KILL;
	c.kernel_path = it_guest("vmlinux");
	c.cmdline = "console=ttyS0 reboot=k panic=-1 quiet";
	c.serial_out_fd = -1;
	c.ttl_ms = 1800000;
	c.drives[0] = (struct tvm_drive){ .path = getenv("TINYVMM_ROOTFS"), .cow = 1 };
	c.nr_drives = 1;
	c.root_drive = 1;
	c.net = (struct tvm_net){ .enabled = 1,
				  .tap = TAP,
				  .guest_ip = "10.77.0.2/24",
				  .guest_gw = HOST_IP,
				  .allow = { HOST_IP ":7007/tcp", HOST_IP ":7009/tcp" },
				  .nr_allow = 2 };
	ck_assert_msg(tvm_vm_create(&c, &vm, &e) == 0, "create: %s", e.msg);
	ck_assert_int_eq(
		system("ip addr add " HOST_IP "/24 dev " TAP " && ip link set " TAP " up && ip link set lo up"), 0);
	pthread_create(&t, NULL, echo_server, (void *)(intptr_t)listen_on(PORT_OK));
	pthread_detach(t);
	pthread_create(&t, NULL, echo_server, (void *)(intptr_t)listen_on(PORT_DENIED));
	pthread_detach(t);
	ck_assert_msg(tvm_vm_start(vm, &e) == 0, "start: %s", e.msg);
}

/* Run argv in the guest as uid (TVM_ID_ROOT or TVM_ID_DEFAULT): it must
 * exit 0; returns its stdout (free it). */
static char *job_out(const char *const *argv, uint32_t uid)
{
	struct it_out o = { 0 };
	struct tvm_job j = {
		.argv = argv, .uid = uid, .gid = uid, .timeout_ms = 600000, .on_output = it_collect, .ctx = &o
	};
	struct tvm_agent *a;
	struct tvm_err e = { 0 };
	struct tvm_job_result r;
	char *out;

	ck_assert_msg(tvm_vm_agent_connect(vm, 600000, &a, &e) == 0, "agent: %s", e.msg);
	ck_assert_msg(tvm_agent_exec(a, &j, &r, &e) == 0, "exec: %s", e.msg);
	tvm_agent_close(a);
	ck_assert_msg(r.exit_code == 0, "exit %d, stdout: %s, stderr: %s", r.exit_code, it_str(&o, 1), it_str(&o, 2));
	out = strdup(it_str(&o, 1));
	it_out_free(&o);
	return out;
}

/* As job_out, and it must print exactly want. */
static void job(const char *const *argv, uint32_t uid, const char *want)
{
	char *out = job_out(argv, uid);

	ck_assert_str_eq(out, want);
	free(out);
}

/* Run python3 code as root in the guest (as job()). */
static void py(const char *code, const char *want)
{
	const char *argv[] = { "python3", "-c", code, NULL };

	job(argv, TVM_ID_ROOT, want);
}

/* The host's HTTP server (python3 -m http.server in our namespace) serves
 * dir: hello.txt, and a one-package pip index whose wheel the host makes. */
static pid_t http_server(const char *dir)
{
	char cmd[1024];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(PORT_HTTP) };
	pid_t pid;

	snprintf(
		cmd, sizeof(cmd),
		"set -e; cd %s; mkdir -p simple/tvmnet; echo 'hello from the host' > hello.txt; "
		"python3 -c 'import zipfile; z = zipfile.ZipFile(\"tvmnet-1.0-py3-none-any.whl\", \"w\"); "
		"[z.writestr(n, t) for n, t in ((\"tvmnet/__init__.py\", \"\"), "
		"(\"tvmnet-1.0.dist-info/METADATA\", \"Metadata-Version: 2.1\\nName: tvmnet\\nVersion: 1.0\\n\"), "
		"(\"tvmnet-1.0.dist-info/WHEEL\", \"Wheel-Version: 1.0\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n\"), "
		"(\"tvmnet-1.0.dist-info/RECORD\", \"\"))]; z.close()'; "
		"echo '<a href=\"../../tvmnet-1.0-py3-none-any.whl\">tvmnet-1.0-py3-none-any.whl</a>' "
		"> simple/tvmnet/index.html",
		dir);
	ck_assert_int_eq(system(cmd), 0);
	pid = fork();
	if (pid == 0) { /* no check call here: see it_jail_spawn */
		int null = open("/dev/null", O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* gone with us, even after a failed check */
		dup2(null, 1);
		dup2(null, 2);
		execlp("python3", "python3", "-m", "http.server", "--bind", HOST_IP, "--directory", dir, "7009",
		       (char *)NULL);
		_exit(127);
	}
	ck_assert_int_ge(pid, 0);
	inet_pton(AF_INET, HOST_IP, &sa.sin_addr);
	for (int i = 0; i < 300; i++) { /* up to 30 s for it to listen */
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), up;

		up = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		close(fd);
		if (up)
			return pid;
		usleep(100000);
	}
	kill(pid, SIGKILL);
	ck_abort_msg("python3 -m http.server did not listen on " HOST_IP ":7009");
	return -1;
}

/* As the sandbox user, with the allow-list letting the host's HTTP server
 * through: curl fetches a file and pip downloads a package from the
 * host's index; the port the list leaves out stays unreachable. */
START_TEST(curl_and_pip_reach_the_allowed_server_only)
{
	char dir[] = "/tmp/tinyvmm-it-http-XXXXXX", cmd[64];
	const char *argv[] = { "sh", "-c",
			       "curl -sfS -m 120 http://" HOST_IP ":7009/hello.txt && "
			       "if curl -s -m 5 -o /dev/null http://" HOST_IP ":7008/; "
			       "then echo reached 7008; else echo 7008 blocked; fi && "
			       "timeout 300 pip download -q --no-deps --trusted-host " HOST_IP
			       " --index-url http://" HOST_IP ":7009/simple/ -d /tmp/dl tvmnet && ls /tmp/dl",
			       NULL };
	pid_t srv;

	if (!netns_ok)
		return;
	ck_assert_ptr_nonnull(mkdtemp(dir));
	srv = http_server(dir);
	job(argv, TVM_ID_DEFAULT, "hello from the host\n7008 blocked\ntvmnet-1.0-py3-none-any.whl\n");
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* The guest's send rate through the echo port, by the guest's clock, in
 * KiB/s: 1 MiB sent, timed as the echo brings back what follows the first
 * 64 KiB (which may pass as a full bucket's burst). The limit tested is far
 * below what this host's emulated guest TCP reaches unlimited (~200 KiB/s). */
static double guest_tx_kibs(void)
{
	const char *argv[] = { "python3", "-c",
			       "import socket, threading, time\n"
			       "n = 1 << 20\n"
			       "s = socket.create_connection(('" HOST_IP "', 7007), timeout=300)\n"
			       "def send():\n"
			       "    s.sendall(bytes(n)); s.shutdown(socket.SHUT_WR)\n"
			       "t = threading.Thread(target=send); t.start()\n"
			       "got, t0, g0 = 0, None, 0\n"
			       "while True:\n"
			       "    b = s.recv(65536)\n"
			       "    if not b: break\n"
			       "    got += len(b)\n"
			       "    if t0 is None and got >= 64 << 10: t0, g0 = time.monotonic(), got\n"
			       "t1 = time.monotonic(); t.join()\n"
			       "print(got, (got - g0) / (t1 - t0) / 1024)\n",
			       NULL };
	char *out = job_out(argv, TVM_ID_DEFAULT);
	long got = 0;
	double kibs = 0;

	ck_assert_msg(sscanf(out, "%ld %lf", &got, &kibs) == 2 && got == 1 << 20, "guest said: %s", out);
	free(out);
	return kibs;
}

/* Python lines: try the port the allow-list excludes. */
#define PROBE_DENIED                                                       \
	"try:\n"                                                           \
	"    socket.create_connection(('" HOST_IP "', 7008), timeout=5)\n" \
	"    print('denied port reachable')\n"                             \
	"except OSError:\n"                                                \
	"    print('denied port blocked')\n"

START_TEST(echo_allowed_port_and_deny_the_other)
{
	struct tvm_net_stats st;

	if (!netns_ok)
		return;
	/* One python process for both checks: each start costs seconds in
	 * the emulated guest kernel. */
	/* Send on a thread while reading: an echo fills both directions, and
	 * sending 1 MiB before reading anything would deadlock on full
	 * buffers. */
	py("import socket, threading\n"
	   "data = bytes(range(256)) * 4096\n"
	   "s = socket.create_connection(('" HOST_IP "', 7007), timeout=300)\n"
	   "def send():\n"
	   "    s.sendall(data); s.shutdown(socket.SHUT_WR)\n"
	   "t = threading.Thread(target=send); t.start()\n"
	   "got = b''\n"
	   "while True:\n"
	   "    b = s.recv(65536)\n"
	   "    if not b: break\n"
	   "    got += b\n"
	   "t.join()\n"
	   "print(len(got), got == data)\n" PROBE_DENIED,
	   "1048576 True\ndenied port blocked\n");
	/* The counters saw it: 1 MiB each way, the guest's TCP handed us
	 * segmentation-offload frames, the denied SYNs were dropped. */
	ck_assert_int_eq(tvm_vm_net_stats(vm, &st), 0);
	ck_assert_uint_ge(st.tx_bytes, 1048576);
	ck_assert_uint_ge(st.rx_bytes, 1048576);
	ck_assert_uint_gt(st.tx_gso, 0);
	ck_assert_uint_gt(st.rx_gso, 0);
	ck_assert_uint_ge(st.dropped[TVM_NET_DROP_POLICY], 1);
	ck_assert_str_eq(tvm_net_drop_name(TVM_NET_DROP_POLICY), "policy");
	unlimited_tx_kibs = guest_tx_kibs();
	fprintf(stderr, "test_net: tx %llu frames (%llu TSO), rx %llu frames (%llu TSO)\n",
		(unsigned long long)st.tx_frames, (unsigned long long)st.tx_gso, (unsigned long long)st.rx_frames,
		(unsigned long long)st.rx_gso);
}
END_TEST

START_TEST(hostile_frames_leave_the_vmm_serving)
{
	if (!netns_ok)
		return;
	/* Raw frames from the guest: bad IPv4 header lengths, a truncated
	 * TCP header, junk ethertypes, maximum-size junk; the guest kernel
	 * itself refuses runts and oversized ones (counted as send errors). */
	py("import socket, os\n"
	   "s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)\n"
	   "s.bind(('eth0', 0))\n"
	   "mac = open('/sys/class/net/eth0/address').read().strip()\n"
	   "src = bytes.fromhex(mac.replace(':', ''))\n"
	   "dst = b'\\xff' * 6\n"
	   "frames = [dst + src + b'\\x08\\x00' + bytes([0x4f]) + os.urandom(30),\n"
	   "          dst + src + b'\\x08\\x00' + bytes([0x41]) + os.urandom(60),\n"
	   "          dst + src + b'\\x08\\x00' + bytes([0x45, 0, 0xff, 0xff]) + os.urandom(16),\n"
	   "          dst + src + b'\\x86\\xdd' + os.urandom(20),\n"
	   "          dst + src + b'\\x12\\x34' + os.urandom(1486),\n"
	   "          dst + src + b'\\x08\\x00' + os.urandom(4000),\n"
	   "          b'\\x01\\x02']\n"
	   "sent = errs = 0\n"
	   "for i in range(20):\n"
	   "    for f in frames:\n"
	   "        try:\n"
	   "            s.send(f); sent += 1\n"
	   "        except OSError:\n"
	   "            errs += 1\n"
	   "print('sent', sent > 0)\n",
	   "sent True\n");
	/* The VMM and the guest's network are still fine. */
	py("import socket\n"
	   "s = socket.create_connection(('" HOST_IP "', 7007), timeout=120)\n"
	   "s.sendall(b'still here'); s.shutdown(socket.SHUT_WR)\n"
	   "print(s.recv(100).decode())\n",
	   "still here\n");
	ck_assert_int_eq(tvm_vm_exit_reason(vm), TVM_EXIT_NONE);
}
END_TEST

/* Library callers' rule counts and entries are checked, not trusted. */
START_TEST(policy_counts_and_entries_checked)
{
	struct tvm_config c;
	struct tvm_vm *v = NULL;
	struct tvm_err e = { 0 };

	tvm_config_init(&c);
	c.kernel_path = it_guest("vmlinux");
	c.log_fd = -1;
	c.net = (struct tvm_net){ .enabled = 1, .tap = "tvmit9", .nr_allow = TVM_MAX_NET_RULES + 1 };
	ck_assert_int_eq(tvm_vm_create(&c, &v, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "at most"), "%s", e.msg);
	ck_assert_ptr_null(v);
	c.net = (struct tvm_net){ .enabled = 1, .tap = "tvmit9", .nr_dns = 1 }; /* dns[0] NULL */
	ck_assert_int_eq(tvm_vm_create(&c, &v, &e), -EINVAL);
	ck_assert_msg(strstr(e.msg, "resolver 0 is NULL"), "%s", e.msg);
}
END_TEST

/* The host side MAC of interface name, "xx:xx:xx:xx:xx:xx" (by ioctl:
 * /sys/class/net shows the namespace sysfs was mounted in, not ours). */
static void host_mac(const char *name, char mac[18])
{
	struct ifreq ifr = { 0 };
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	const uint8_t *m = (const uint8_t *)ifr.ifr_hwaddr.sa_data;

	snprintf(ifr.ifr_name, IFNAMSIZ, "%s", name);
	ck_assert_int_eq(ioctl(s, SIOCGIFHWADDR, &ifr), 0);
	close(s);
	snprintf(mac, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

/* Last: the VM with its network is snapshotted and ended (its TAP goes
 * with it); the restore gets a new TAP, given the old one's host address
 * and MAC, and its own allow-list; the guest's address comes back with
 * the snapshot. */
START_TEST(snapshot_restores_onto_a_new_tap)
{
	char dir[] = "/tmp/tinyvmm-it-net-XXXXXX", snap[64], cmd[256], mac[18];
	struct tvm_net_stats st;
	struct tvm_config c;
	struct tvm_err e = { 0 };
	double limited;

	if (!netns_ok)
		return;
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(snap, sizeof(snap), "%s/snap", dir);
	ck_assert_msg(tvm_vm_snapshot(vm, snap, &e) == 0, "snapshot: %s", e.msg);
	host_mac(TAP, mac);
	tvm_vm_stop(vm);
	tvm_vm_wait(vm, &e);
	tvm_vm_destroy(vm);
	vm = NULL;

	tvm_config_init(&c);
	c.seccomp = TVM_SECCOMP_KILL;
	c.serial_out_fd = -1;
	c.ttl_ms = 1800000;
	/* The allow-list is the restorer's, never the snapshot file's. */
	c.net = (struct tvm_net){ .enabled = 1, .tap = TAP2, .allow = { HOST_IP ":7007/tcp" }, .nr_allow = 1 };
	c.net.tx.bytes = (struct tvm_bucket){ .size = 64 << 10, .refill_ms = 1000 }; /* tx-bw=64K */
	ck_assert_msg(tvm_vm_restore(&c, snap, &vm, &e) == 0, "restore: %s", e.msg);
	snprintf(cmd, sizeof(cmd), "ip link set %s address %s && ip addr add %s/24 dev %s && ip link set %s up", TAP2,
		 mac, HOST_IP, TAP2, TAP2);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_msg(tvm_vm_start(vm, &e) == 0, "start: %s", e.msg);
	py("import socket\n"
	   "s = socket.create_connection(('" HOST_IP "', 7007), timeout=120)\n"
	   "s.sendall(b'restored'); s.shutdown(socket.SHUT_WR)\n"
	   "print(s.recv(100).decode())\n" PROBE_DENIED,
	   "restored\ndenied port blocked\n");
	ck_assert_int_eq(tvm_vm_net_stats(vm, &st), 0);
	ck_assert_uint_ge(st.dropped[TVM_NET_DROP_POLICY], 1);
	/* The limit given at restore holds, from the guest's side. */
	limited = guest_tx_kibs();
	printf("guest tx with tx-bw=64K after restore: %.1f KiB/s (unlimited before: %.1f KiB/s)\n", limited,
	       unlimited_tx_kibs);
	ck_assert_msg(limited >= 64 * 0.8 && limited <= 64 * 1.2, "%.1f KiB/s under a 64 KiB/s limit", limited);
	ck_assert_msg(unlimited_tx_kibs > 64 * 1.2, "unlimited only %.1f KiB/s: nothing to compare", unlimited_tx_kibs);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("net");
	TCase *tc = tcase_create("net");

	tcase_add_unchecked_fixture(tc, setup, NULL);
	tcase_set_timeout(tc, 1200);
	tcase_add_test(tc, echo_allowed_port_and_deny_the_other);
	tcase_add_test(tc, curl_and_pip_reach_the_allowed_server_only);
	tcase_add_test(tc, hostile_frames_leave_the_vmm_serving);
	tcase_add_test(tc, policy_counts_and_entries_checked);
	tcase_add_test(tc, snapshot_restores_onto_a_new_tap);
	suite_add_tcase(su, tc);
	return it_run_suite(su);
}
