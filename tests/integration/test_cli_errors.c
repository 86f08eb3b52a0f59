/* ./tinyvmm against bad user input: malformed numbers, bad files (FIFOs,
 * directories, empty, garbage), bad drive specs, files that must survive a
 * failed run. Nothing here boots a guest: every case fails before the VM
 * starts, with exit status 125 and exactly one "tinyvmm: ..." line naming
 * the thing and the reason. It runs on a host without KVM too: what is
 * found only once KVM is open is skipped there (have_kvm). Each run has a
 * 20 s alarm, so a hang (a FIFO opened for reading blocks forever) fails
 * the test instead of the run. The `exec` cases talk to a fake agent
 * behind a fake hybrid vsock socket (a child process of the test), which
 * lies the way a hostile guest can. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "tests/integration/it_common.h"
#include "tests/unit.h"
#include "guest/protocol.h"

static char dir[64];
static char path_buf[16][128];
static int npath;

/* dir/name, in a buffer that lives for the test. */
static const char *p(const char *name)
{
	char *b = path_buf[npath++ % 16];

	snprintf(b, 128, "%s/%s", dir, name);
	return b;
}

static void write_file(const char *name, const void *data, size_t len)
{
	int fd = open(p(name), O_WRONLY | O_CREAT | O_TRUNC, 0644);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void setup(void)
{
	char elf[100] = "\x7f"
			"ELF\x02\x01\x01";
	char sectors[4096] = { 0 };

	snprintf(dir, sizeof(dir), "/tmp/tinyvmm-cli-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	write_file("empty", "", 0);
	write_file("garbage", "this is not a kernel, it is a text file of some length\n", 55);
	elf[0x10] = 2;    /* ET_EXEC */
	elf[0x12] = 0x3e; /* x86-64 */
	elf[0x14] = 1;    /* EV_CURRENT */
	elf[0x20] = 0x40; /* e_phoff */
	elf[0x36] = 56;   /* e_phentsize */
	elf[0x38] = 4;    /* e_phnum: 4 headers past the end of a 100-byte file */
	write_file("trunc-elf", elf, sizeof(elf));
	write_file("img", sectors, sizeof(sectors));
	write_file("precious", "precious\n", 9);
	ck_assert_int_eq(mkfifo(p("fifo"), 0644), 0);
	ck_assert_int_eq(mkdir(p("adir"), 0755), 0);
}

static void teardown(void)
{
	static const char *const names[] = { "empty", "garbage", "trunc-elf", "img", "precious", "fifo",
					     "out",   "err",     "sock",      "got", "envs" };

	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(p(names[i]));
	rmdir(p("adir"));
	rmdir(dir);
}

/* Run ./tinyvmm args... (NULL-terminated, without argv[0]) and check: exit
 * status want_st (64: a wrong command line, 125: tinyvmm failed), no stdout, one stderr line that starts with "tinyvmm: " and
 * contains want (the host quirk notice comes only once a VM starts, so not
 * before an error). */
static void expect_error(int want_st, const char *want, const char *const *args)
{
	char *argv[32] = { "tinyvmm" };
	char *out, *err, *line, *save = NULL;
	int n = 1, lines = 0, st;

	while (*args)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	st = it_run_cli(argv, p("out"), p("err"), 20);
	out = it_slurp(p("out"));
	err = it_slurp(p("err"));
	ck_assert_msg(st == want_st, "%s ...: status %d, want %d (1000 + signal when killed), stderr: %s", argv[1], st,
		      want_st, err);
	ck_assert_msg(!*out, "stdout not empty: %s", out);
	ck_assert_msg(strstr(err, want), "want \"%s\" in: %s", want, err);
	for (line = strtok_r(err, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		ck_assert_msg(!strncmp(line, "tinyvmm: ", 9), "stray line: %s", line);
		lines++;
	}
	ck_assert_int_eq(lines, 1);
	free(out);
	free(err);
}

/* Whether this host has a usable /dev/kvm. The errors after it in a test
 * are found once KVM is open (the kernel, the drives, the vsock device
 * come after it); without it they are skipped, saying so, and the rest of
 * the suite runs (make integration runs it on any host). */
static bool have_kvm(const char *test)
{
	if (access("/dev/kvm", R_OK | W_OK) == 0)
		return true;
	printf("test_cli_errors: %s: the rest SKIPPED: no usable /dev/kvm\n", test);
	return false;
}

#define E(want, ...) expect_error(125, want, (const char *const[]){ __VA_ARGS__, NULL })
#define U(want, ...) expect_error(EXIT_USAGE_ST, want, (const char *const[]){ __VA_ARGS__, NULL })
#define EXIT_USAGE_ST 64 /* vmm/cli/cli_report.h */

START_TEST(numbers)
{
	U("--mem: '12abc' is not a number", "run", "--kernel", p("garbage"), "--mem", "12abc");
	U("--mem: '-1' is not a number", "run", "--kernel", p("garbage"), "--mem", "-1");
	U("--mem: '' is not a number", "run", "--kernel", p("garbage"), "--mem", "");
	U("--cpus: '99999999999' is too large (at most 4294967295)", "run", "--kernel", p("garbage"), "--cpus",
	  "99999999999");
	U("--job-mem 10: at least 1M (a job needs some memory to start)", "run", "--kernel", p("garbage"), "--job-mem",
	  "10", "--", "true");
	U("--job-pids 0: at least 1 (the job itself)", "run", "--kernel", p("garbage"), "--job-pids", "0", "--",
	  "true");
	U("--output-cap: '1x' is not a number", "run", "--kernel", p("garbage"), "--output-cap", "1x", "--", "true");
	U("--ttl: '-1' is not a number of seconds", "run", "--kernel", p("garbage"), "--ttl", "-1");
	U("--ttl: '1e99' is not a number of seconds", "run", "--kernel", p("garbage"), "--ttl", "1e99");
	/* NaN passed the range check and became 0 ms: no TTL at all. */
	U("--ttl: 'nan' is not a number of seconds", "run", "--kernel", p("garbage"), "--ttl", "nan");
	U("--timeout: 'nan' is not a number of seconds", "run", "--kernel", p("garbage"), "--timeout", "nan", "--",
	  "true");
	U("--timeout: 'inf' is not a number of seconds", "run", "--kernel", p("garbage"), "--timeout", "inf", "--",
	  "true");
	E("memory: 0 MiB is out of range", "run", "--kernel", p("garbage"), "--mem", "0");
	E("memory: 4294967295 MiB is out of range", "run", "--kernel", p("garbage"), "--mem", "4294967295");
	E("cpus: 0 is out of range", "run", "--kernel", p("garbage"), "--cpus", "0");
	E("cpus: 65 is out of range", "run", "--kernel", p("garbage"), "--cpus", "65");
	U("--quirks: 'maybe' is not auto, on or off", "run", "--kernel", p("garbage"), "--quirks", "maybe");
	if (!have_kvm("numbers"))
		return;
	E("vsock: guest CID 2 is not in", "run", "--kernel", p("garbage"), "--vsock-cid", "2");
}
END_TEST

START_TEST(usage_errors)
{
	/* No kernel given and none where defaults are looked for. */
	setenv("TINYVMM_DATA_DIR", dir, 1);
	E("no guest kernel: give --kernel", "run");
	E("no guest kernel: give --kernel", "run", "--", "true");
	unsetenv("TINYVMM_DATA_DIR");
	/* Used to print the whole usage without naming the word. */
	U("unknown command 'runn'", "runn");
	U("unknown command 'snapshot creat'", "snapshot", "creat");
	U("unknown command 'image bild'", "image", "bild");
	/* a known word used wrongly is not an unknown one */
	U("tinyvmm: image needs a subcommand: tinyvmm image build", "image");
	U("tinyvmm: snapshot needs a subcommand: tinyvmm snapshot create", "snapshot");
	U("tinyvmm: host takes no arguments", "host", "x");
	U("--json reports a job of run or exec: snapshot create has none", "snapshot", "create", "--out", p("snap"),
	  "--json", "--", "true");
	U("image build needs --out FILE", "image", "build", "--packages", "jq");
	/* The script's own options are not the user's: --init would make any
	 * file root can read the image's /sbin/init. */
	U("image build: unknown option '--init'", "image", "build", "--out", p("new"), "--init", "/etc/shadow");
	U("image build: --copy needs a value", "image", "build", "--out", p("new"), "--copy");
	/* said before minutes of building, not by cp at the end */
	E("its folder", "image", "build", "--out", p("missing/img.ext4"), "--packages", "jq");
	E(": is a folder (give a file name)", "image", "build", "--out", p("adir"), "--packages", "jq");
	E("image build: --out /proc/tvm-image.ext4: ", "image", "build", "--out", "/proc/tvm-image.ext4", "--packages",
	  "jq"); /* root may write any folder, not that one */
	/* Used to be accepted and ignored. */
	U("--mem: a restore takes kernel, command line, memory", "run", "--snapshot", p("adir"), "--mem", "512");
	U("--cmdline-append: a restore takes", "run", "--snapshot", p("adir"), "--cmdline-append", "x=1");
	U("unexpected argument 'extra'", "run", "--kernel", p("garbage"), "extra");
	/* the last mode used to win: ",cow,rw" wrote the image in place */
	char modes[200];
	snprintf(modes, sizeof(modes), "%s,cow,rw", p("img"));
	U("cow and rw: one mode only (ro, rw or cow)", "run", "--kernel", p("garbage"), "--rootfs", modes);
	/* outputs that cannot be written: said at once, not after the run */
	U("--metrics", "run", "--kernel", p("garbage"), "--metrics", p("missing/m.json"));
	U(": a directory, not a file", "run", "--kernel", p("garbage"), "--metrics", p("adir"));
	U(": exists and is not a directory", "snapshot", "create", "--kernel", p("garbage"), "--out", p("img"));
	U("its folder", "snapshot", "create", "--kernel", p("garbage"), "--out", p("missing/snap"));
	E("is a directory (name a file)", "run", "--kernel", p("garbage"), "--get", "/tmp/x:/tmp", "--", "true");
	U("exec needs --vsock-uds PATH and -- CMD", "exec", "--", "true");
	U("--rootfs given twice", "run", "--kernel", p("garbage"), "--rootfs", p("img"), "--rootfs", p("img"));
	/* -e NAME alone takes our value (docker's -e); a name must be one. */
	U("-e 1BAD: expected NAME=VALUE or NAME", "run", "--kernel", p("garbage"), "-e", "1BAD", "--", "true");
	U("-e =x: expected NAME=VALUE or NAME", "run", "--kernel", p("garbage"), "-e", "=x", "--", "true");
	U("--env-file /nonexistent/envs: No such file or directory", "run", "--kernel", p("garbage"), "--env-file",
	  "/nonexistent/envs", "--", "true");
	write_file("envs", "# comment\nA=1\n\nB C=2\n", 20);
	U("envs:4: B C=2: expected NAME=VALUE or NAME", "run", "--kernel", p("garbage"), "--env-file", p("envs"), "--",
	  "true");
	/* Guest paths that cannot work are refused before a VM starts. */
	U("--put ", "run", "--kernel", p("garbage"), "--put", "/etc/hostname:rel/x", "--", "true");
	U("the guest path 'rel/x' must be absolute and name a file", "run", "--kernel", p("garbage"), "--put",
	  "/etc/hostname:rel/x", "--", "true");
	U("the guest path '/tmp/' must be absolute and name a file", "run", "--kernel", p("garbage"), "--put",
	  "/etc/hostname:/tmp/", "--", "true");
	U("--get out:/tmp/o: the guest path 'out' must be", "run", "--kernel", p("garbage"), "--get", "out:/tmp/o",
	  "--", "true");
	U("--put nocolon: expected SRC:DST", "run", "--kernel", p("garbage"), "--put", "nocolon", "--", "true");
	U("--get :x: expected SRC:DST", "run", "--kernel", p("garbage"), "--get", ":x", "--", "true");
	/* Used to be getopt's "run: ..." line followed by the whole usage. */
	U("tinyvmm: unknown option --bogus (see tinyvmm --help)", "run", "--bogus");
	U("tinyvmm: unknown option -x (see tinyvmm --help)", "run", "-ix");
	U("tinyvmm: unknown option --nope (see tinyvmm --help)", "exec", "--nope");
	U("tinyvmm: --kernel needs a value", "run", "--kernel");
	U("tinyvmm: -e needs a value", "run", "-e");
	/* a long option's code is no short option's name (it said "-6") */
	U("tinyvmm: --pause-to needs a value", "run", "--pause-to");
	U("tinyvmm: --idle-timeout needs a value", "exec", "--idle-timeout");
	/* taken and ignored before: exec runs no VM */
	U("tinyvmm: --net: exec runs no VM (give it to the `run` that started it)", "exec", "--vsock-uds", p("sock"),
	  "--net", "auto", "--", "true");
	U("tinyvmm: --mem: exec runs no VM", "exec", "--vsock-uds", p("sock"), "--mem", "512", "--", "true");
	/* Was status 125 (said when the jail was built). */
	U("--jail-dir jails: must be an absolute path", "run", "--jail", "--jail-dir", "jails", "--", "true");
	U("--jail-dir jails: must be an absolute path", "gc", "--jail-dir", "jails");
	U("gc: unknown option '--bogus' (usage: tinyvmm gc [--jail-dir DIR])", "gc", "--bogus");
	U("--net-ingress: 'maybe' is not replies or all", "run", "--kernel", p("garbage"), "--net", "auto",
	  "--net-ingress", "maybe");
	U("--net-* options need --net TAP|auto", "run", "--kernel", p("garbage"), "--net-ingress", "replies");
}
END_TEST

/* --help after every command word is the help (stdout, status 0), not a
 * wrong command line: that command's own where it has one (exec's lists
 * no VM option, which it refuses). */
START_TEST(help_everywhere)
{
	/* the words, what the help must say, what it must not */
	static const char *const cases[][5] = {
		{ "--help", NULL, NULL, "Usage: tinyvmm run", "" },
		{ "host", "--help", NULL, "Usage: tinyvmm host\n", "VM options:" },
		{ "image", "--help", NULL, "Usage: tinyvmm image build", "VM options:" },
		{ "snapshot", "--help", NULL, "tinyvmm snapshot create", "" },
		{ "gc", "--help", NULL, "Usage: tinyvmm gc", "" },
		{ "run", "--help", NULL, "VM options:", "" },
		{ "exec", "--help", NULL, "Usage: tinyvmm exec --vsock-uds PATH", "VM options:" },
		{ "snapshot", "create", "--help", "--diff-from BASE", "" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *argv[5] = { "tinyvmm" }, *out, *err;
		const char *want = cases[i][3], *unwanted = cases[i][4];
		int n = 1, st;

		for (int k = 0; k < 3 && cases[i][k]; k++)
			argv[n++] = (char *)cases[i][k];
		st = it_run_cli(argv, p("out"), p("err"), 20);
		out = it_slurp(p("out"));
		err = it_slurp(p("err"));
		ck_assert_msg(st == 0 && strstr(out, want) && (!*unwanted || !strstr(out, unwanted)) && !*err,
			      "%s %s: status %d, stdout %.80s, stderr %s", cases[i][0], cases[i][1] ? cases[i][1] : "",
			      st, out, err);
		free(out);
		free(err);
	}
}
END_TEST

/* host says in its status whether a VM can start here (/dev/kvm). */
START_TEST(host_status)
{
	char *argv[] = { "tinyvmm", "host", NULL }, *out, *err;
	bool kvm = access("/dev/kvm", R_OK | W_OK) == 0;
	int st = it_run_cli(argv, p("out"), p("err"), 20);

	out = it_slurp(p("out"));
	err = it_slurp(p("err"));
	ck_assert_msg(st == (kvm ? 0 : 125), "status %d, stderr %s", st, err);
	ck_assert(!strncmp(out, kvm ? "kvm: /dev/kvm usable\n" : "kvm: /dev/kvm: ", kvm ? 21 : 15));
	ck_assert(strstr(out, "\ncmdline: "));
	free(out);
	free(err);
}
END_TEST

START_TEST(kernel_files)
{
	/* said before KVM is opened (a missing kernel on a host without KVM
	 * used to be the /dev/kvm line) */
	E(": No such file or directory", "run", "--kernel", p("nonexistent"));
	E("adir: not a non-empty regular file", "run", "--kernel", p("adir"));
	E("empty: not a non-empty regular file", "run", "--kernel", p("empty"));
	E("/dev/null: not a non-empty regular file", "run", "--kernel", "/dev/null");
	/* A FIFO used to block the open forever, with SIGINT/SIGTERM blocked. */
	E("fifo: not a non-empty regular file", "run", "--kernel", p("fifo"));
	E("initrd /nonexistent-initrd: No such file or directory", "run", "--kernel", p("garbage"), "--initrd",
	  "/nonexistent-initrd");
	if (!have_kvm("kernel_files"))
		return;
	E("not an ELF vmlinux or bzImage", "run", "--kernel", p("garbage"));
	E("outside the 100-byte file", "run", "--kernel", p("trunc-elf"));
}
END_TEST

START_TEST(drive_specs)
{
	char spec[256];

	U("--drive : no image path", "run", "--kernel", p("garbage"), "--drive", "");
	U("--drive ,: no image path", "run", "--kernel", p("garbage"), "--drive", ",");
	snprintf(spec, sizeof(spec), "%s,bogus", p("img"));
	U("unknown option 'bogus'", "run", "--kernel", p("garbage"), "--drive", spec);
	snprintf(spec, sizeof(spec), "%s,overlay-limit=x", p("img"));
	U("--drive: 'x' is not a number", "run", "--kernel", p("garbage"), "--drive", spec);
	snprintf(spec, sizeof(spec), "%s,bw=2X", p("img"));
	U("--drive bw: '2X' is not a number (K, M or G may follow", "run", "--kernel", p("garbage"), "--drive", spec);
	snprintf(spec, sizeof(spec), "%s,bw=17179869184G", p("img")); /* 2^64 */
	U("--drive bw: '17179869184G' is not a number", "run", "--kernel", p("garbage"), "--drive", spec);
	snprintf(spec, sizeof(spec), "%s,iops=0", p("img"));
	U("--drive iops: the rate must be positive", "run", "--kernel", p("garbage"), "--drive", spec);
	snprintf(spec, sizeof(spec), "%s,ro,overlay=%s", p("img"), p("new"));
	U("overlay= needs copy-on-write mode", "run", "--kernel", p("garbage"), "--drive", spec);
	U("--disk-size: 'x' is not a number", "run", "--kernel", p("garbage"), "--disk-size", "x");
	U("--disk-size 1000: not a positive multiple of 512", "run", "--kernel", p("garbage"), "--disk-size", "1000");
	U("--disk-size 1025G: more than 1024G", "run", "--kernel", p("garbage"), "--disk-size", "1025G");
	U("--disk-size 512 bytes: smaller than the root image", "run", "--kernel", p("garbage"), "--rootfs", p("img"),
	  "--disk-size", "512");
	snprintf(spec, sizeof(spec), "%s,rw", p("img"));
	U("--disk-size: the root drive", "run", "--kernel", p("garbage"), "--rootfs", spec, "--disk-size", "1G");
	E("cannot open: No such file or directory", "run", "--kernel", p("garbage"), "--drive", p("nonexistent"));
	if (!have_kvm("drive_specs"))
		return;
	snprintf(spec, sizeof(spec), "%s,id=123456789012345678901", p("img"));
	E("is longer than 20 bytes", "run", "--kernel", p("garbage"), "--drive", spec);
	E("size 0 bytes is not a positive multiple of 512", "run", "--kernel", p("garbage"), "--drive", p("empty"));
	E("size 55 bytes is not a positive multiple of 512", "run", "--kernel", p("garbage"), "--drive", p("garbage"));
	/* FIFOs: read-only and copy-on-write opens used to block forever. */
	snprintf(spec, sizeof(spec), "%s,ro", p("fifo"));
	E("fifo: not a regular file or block device", "run", "--kernel", p("garbage"), "--drive", spec);
	E("fifo: not a regular file or block device", "run", "--kernel", p("garbage"), "--rootfs", p("fifo"));
	E("fifo: not a regular file or block device", "run", "--kernel", p("garbage"), "--drive", p("fifo"));
	E("adir: cannot open: Is a directory", "run", "--kernel", p("garbage"), "--drive", p("adir"));
	snprintf(spec, sizeof(spec), "%s,ro", p("adir"));
	E("adir: not a regular file or block device", "run", "--kernel", p("garbage"), "--drive", spec);
}
END_TEST

/* Network values are refused before any TAP is opened. */
START_TEST(net_values)
{
	E("net-allow 10.0.0.0/33: prefix length over 32", "run", "--kernel", p("garbage"), "--net", "auto",
	  "--net-allow", "10.0.0.0/33");
	/* A value cannot carry another word onto the guest command line. */
	E("net ip 10.0.0.2/24 init=/bin/sh: expected an IPv4 address with /PREFIX", "run", "--kernel", p("garbage"),
	  "--net", "auto", "--net-ip", "10.0.0.2/24 init=/bin/sh");
	E("net gw 1.2.3.4,dns=5: expected an IPv4 address", "run", "--kernel", p("garbage"), "--net", "auto",
	  "--net-ip", "10.0.0.2/24", "--net-gw", "1.2.3.4,dns=5");
	E("net mac 01:00:00:00:00:01: a multicast address", "run", "--kernel", p("garbage"), "--net", "auto",
	  "--net-mac", "01:00:00:00:00:01");
	/* 65604 is 68 in 16 bits: the device's own check would pass it */
	E("net: mtu 65604: must be 68..9000", "run", "--kernel", p("garbage"), "--net", "auto", "--net-mtu", "65604");
	U("unknown option 'bogus=1' (tap=, mac=, mtu=, rx-bw=", "run", "--kernel", p("garbage"), "--net",
	  "tap=x,bogus=1");
	/* Rate limits: a count with K, M or G, positive. */
	U("--net tx-bw: 'abc' is not a number (K, M or G may follow", "run", "--kernel", p("garbage"), "--net",
	  "auto,tx-bw=abc");
	U("--net rx-pps: the rate must be positive", "run", "--kernel", p("garbage"), "--net", "auto,rx-pps=0");
	U("--net tap=: empty TAP name", "run", "--kernel", p("garbage"), "--net", "tap=");
	E("net mac 01:00:00:00:00:01: a multicast address", "run", "--kernel", p("garbage"), "--net",
	  "auto,mac=01:00:00:00:00:01");
	/* Guest addresses the agent would refuse: used to boot without one. */
	E("net ip 10.0.0.2/40: expected an IPv4 address with /PREFIX (1..32)", "run", "--kernel", p("garbage"), "--net",
	  "auto", "--net-ip", "10.0.0.2/40");
	E("net ip 10.0.0.2: expected an IPv4 address with /PREFIX", "run", "--kernel", p("garbage"), "--net", "auto",
	  "--net-ip", "10.0.0.2");
	E("net gw 10.0.0.1: the guest needs an address too (--net-ip)", "run", "--kernel", p("garbage"), "--net",
	  "auto", "--net-gw", "10.0.0.1");
	/* A policy without a network used to be accepted and mean nothing. */
	U("--net-* options need --net TAP|auto", "run", "--kernel", p("garbage"), "--net-allow", "10.0.0.1/32");
	U("--net-* options need --net TAP|auto", "run", "--kernel", p("garbage"), "--net-no-offload");
}
END_TEST

/* A snapshot directory holding a FIFO: restore used to hang in open(). */
START_TEST(snapshot_dir_fifo)
{
	char state[160];

	ck_assert_int_eq(mkdir(p("snap"), 0755), 0);
	snprintf(state, sizeof(state), "%s/state", p("snap"));
	ck_assert_int_eq(mkfifo(state, 0644), 0);
	E("state: not a regular file", "run", "--snapshot", p("snap"));
	unlink(state);
	rmdir(p("snap"));
	E("adir/state: No such file or directory", "run", "--snapshot", p("adir"));
}
END_TEST

/* Files of the user's that a failed run must leave as they were. */
START_TEST(user_files_survive)
{
	char spec[256], *s;

	if (!have_kvm("user_files_survive"))
		return;
	snprintf(spec, sizeof(spec), "%s,cow,overlay=%s", p("img"), p("precious"));
	E("cannot create overlay", "run", "--kernel", p("garbage"), "--drive", spec);
	E("Address already in use", "run", "--kernel", p("garbage"), "--vsock-uds", p("precious"));
	E("--serial-out", "run", "--kernel", p("garbage"), "--serial-out", p("adir"));
	/* --serial-out appends: the failed run (bad kernel) keeps the old bytes. */
	E("not an ELF vmlinux or bzImage", "run", "--kernel", p("garbage"), "--serial-out", p("precious"));
	s = it_slurp(p("precious"));
	ck_assert_str_eq(s, "precious\n");
	free(s);
}
END_TEST

/* --vsock-uds where a VM (here: the test) listens is refused and leaves
 * that socket alone; a stale socket file (nobody listens) is replaced, and
 * removed when the run ends. */
START_TEST(vsock_uds_in_use)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int l, c;
	struct stat st;

	if (!have_kvm("vsock_uds_in_use"))
		return;
	l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", p("sock"));
	ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(l, 8), 0);
	E("address in use (another VM listens there)", "run", "--kernel", p("garbage"), "--vsock-uds", p("sock"));
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_eq(connect(c, (struct sockaddr *)&a, sizeof(a)), 0); /* still ours */
	close(c);
	close(l); /* the file stays: stale */
	E("not an ELF vmlinux or bzImage", "run", "--kernel", p("garbage"), "--vsock-uds", p("sock"));
	ck_assert_int_ne(lstat(p("sock"), &st), 0);
}
END_TEST

/* ---- a hostile agent behind a fake hybrid vsock socket ---- */

enum scenario {
	GET_ERROR,      /* GET_FILE -> ERROR */
	GET_OK,         /* GET_FILE -> "new content" */
	GET_SHORT,      /* GET_FILE -> 3 bytes, FILE_END says 10 */
	GET_EOF,        /* GET_FILE -> 3 bytes, then the connection closes */
	EXEC_ERROR_ESC, /* EXEC -> ERROR with a newline and terminal escapes */
	EXIT_256,       /* RESULT exit code 256 */
	FLOOD,          /* 4 MiB of stdout whatever the cap */
	BINARY,         /* stdout that is not UTF-8 */
};

static void fa_send(int fd, const void *buf, size_t len)
{
	const uint8_t *q = buf;

	while (len) {
		ssize_t n = send(fd, q, len, MSG_NOSIGNAL);
		if (n <= 0)
			_exit(0); /* the host hung up: fine */
		q += n;
		len -= (size_t)n;
	}
}

static void fa_msg(int fd, const struct tvp_msg *m)
{
	uint8_t buf[2048];
	size_t len;

	if (tvp_encode(m, buf, sizeof(buf), &len))
		_exit(97);
	fa_send(fd, buf, len);
}

static void fa_data(int fd, uint8_t type, uint32_t id, const void *data, uint32_t len)
{
	uint8_t hdr[TVP_HDR_SIZE];

	tvp_put_header(hdr, type, 0, id, len);
	fa_send(fd, hdr, sizeof(hdr));
	fa_send(fd, data, len);
}

static void fa_result(int fd, uint32_t id, int32_t code)
{
	struct tvp_msg m = { .type = TVP_RESULT, .id = id };

	m.result.exit_code = code;
	fa_msg(fd, &m);
}

static void fa_error(int fd, uint32_t id, int32_t err, const char *text)
{
	struct tvp_msg m = { .type = TVP_ERROR, .id = id };

	m.error = (struct tvp_error){ TVP_ERR_IO, err, tvp_cstr(text) };
	fa_msg(fd, &m);
}

static void fake_agent(int lfd, enum scenario sc)
{
	static uint8_t big[TVP_MAX_PAYLOAD];
	struct tvp_msg m = { .type = TVP_READY };
	struct tvp_decoder d;
	char line[64];
	size_t n = 0;
	int fd = accept(lfd, NULL, NULL);

	if (fd < 0)
		_exit(96);
	while (n < sizeof(line) - 1 && recv(fd, line + n, 1, 0) == 1 && line[n++] != '\n')
		;
	fa_send(fd, "OK 1073741824\n", 14);
	m.ready = (struct tvp_ready){ TVP_VERSION, 0, TVP_MAX_PAYLOAD, 1, tvp_cstr("fake") };
	fa_msg(fd, &m);
	tvp_decoder_init(&d, 0);
	for (;;) {
		struct tvp_frame f;
		size_t avail;
		void *space;
		ssize_t got;
		int r = tvp_decoder_next(&d, &f);

		if (r < 0 || (r == 1 && tvp_parse(&f, &m, NULL, 0)))
			_exit(95);
		if (r == 0) {
			space = tvp_decoder_space(&d, &avail);
			got = space ? recv(fd, space, avail, 0) : -1;
			if (got <= 0)
				_exit(0);
			tvp_decoder_commit(&d, (size_t)got);
			continue;
		}
		if (m.type == TVP_EXEC) {
			if (sc == EXEC_ERROR_ESC) {
				fa_error(fd, m.id, ENOENT, "execve: no\n\x1b[31mRED\x1b[0m\r");
				continue;
			}
			if (sc == FLOOD) {
				memset(big, 'A', sizeof(big));
				for (int i = 0; i < 4; i++)
					fa_data(fd, TVP_STDOUT, m.id, big, sizeof(big));
			}
			if (sc == BINARY)
				fa_data(fd, TVP_STDOUT, m.id, "\xc3\xa9\xff\xf0\x9f\x98\x80\xed\xa0\x80\\\"\xe2\x82",
					14);
			fa_result(fd, m.id, sc == EXIT_256 ? 256 : 0);
		} else if (m.type == TVP_GET_FILE) {
			struct tvp_msg end = { .type = TVP_FILE_END, .id = m.id, .file_end = { 11, 0644 } };

			if (sc == GET_ERROR) {
				fa_error(fd, m.id, ENOENT, "open /x: No such file or directory");
			} else if (sc == GET_OK) {
				fa_data(fd, TVP_FILE_DATA, m.id, "new content", 11);
				fa_msg(fd, &end);
			} else {
				fa_data(fd, TVP_FILE_DATA, m.id, "abc", 3);
				if (sc == GET_EOF)
					_exit(0);
				end.file_end.size = 10;
				fa_msg(fd, &end);
			}
		}
	}
}

/* Run `tinyvmm exec --vsock-uds SOCK args...` against the fake agent;
 * returns the exit status, stderr in *err (malloc'd), stdout in *out. */
static int run_exec(enum scenario sc, const char *const *args, char **out, char **err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char *argv[32] = { "tinyvmm", "exec", "--vsock-uds", (char *)p("sock") };
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), n = 4, st;
	pid_t agent;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", argv[3]);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 1), 0);
	agent = fork();
	if (agent == 0) { /* no check call here: see it_jail_spawn */
		alarm(30);
		fake_agent(lfd, sc);
		_exit(0);
	}
	ck_assert_int_ge(agent, 0);
	close(lfd);
	while (*args)
		argv[n++] = (char *)*args++;
	argv[n] = NULL;
	st = it_run_cli(argv, p("out"), p("err"), 20);
	kill(agent, SIGKILL);
	waitpid(agent, NULL, 0);
	unlink(p("sock"));
	*out = it_slurp(p("out"));
	*err = it_slurp(p("err"));
	ck_assert_msg(st < 1000, "tinyvmm killed by signal %d; stderr: %s", st - 1000, *err);
	return st;
}

static void assert_one_clean_line(const char *err)
{
	const char *nl = strchr(err, '\n');

	ck_assert_msg(!strncmp(err, "tinyvmm: ", 9), "stderr: %s", err);
	ck_assert_msg(nl && nl[1] == 0, "not one line: %s", err);
	for (const char *c = err; c < nl; c++)
		ck_assert_msg((unsigned char)*c >= 0x20 && *c != 0x7f, "control byte 0x%02x in: %s", *c, err);
}

/* No tinyvmm temporary file may be left next to a --get target. */
static void assert_no_temp_left(void)
{
	char cmd[160];

	snprintf(cmd, sizeof(cmd), "ls %s | grep -q tinyvmm-", dir);
	ck_assert_msg(system(cmd) != 0, "a .tinyvmm-XXXXXX file was left in %s", dir);
}

static void make_precious_0600(void)
{
	write_file("got", "precious\n", 9);
	ck_assert_int_eq(chmod(p("got"), 0600), 0);
}

static void assert_precious_intact(void)
{
	char *s = it_slurp(p("got"));
	struct stat st;

	ck_assert_str_eq(s, "precious\n");
	ck_assert_int_eq(stat(p("got"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	free(s);
}

START_TEST(get_failures_keep_the_users_file)
{
	static const enum scenario bad[] = { GET_ERROR, GET_SHORT, GET_EOF };
	char spec[160];

	snprintf(spec, sizeof(spec), "/x:%s", p("got"));
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *out, *err;
		int rc;

		make_precious_0600();
		rc = run_exec(bad[i], (const char *const[]){ "--get", spec, "--", "true", NULL }, &out, &err);
		ck_assert_msg(rc == 125, "scenario %u: status %d, stderr: %s", bad[i], rc, err);
		ck_assert_msg(strstr(err, "tinyvmm: --get /x:"), "stderr: %s", err);
		ck_assert_msg(strstr(err, bad[i] == GET_ERROR   ? "No such file or directory"
					  : bad[i] == GET_SHORT ? "agent said 10 bytes, sent 3"
								: "connection closed"),
			      "stderr: %s", err);
		assert_one_clean_line(err);
		assert_precious_intact();
		assert_no_temp_left();
		free(out);
		free(err);
	}
}
END_TEST

/* A successful --get replaces the file, keeping its 0600 mode (it used to
 * come back 0644, readable by everyone). */
START_TEST(get_keeps_the_mode)
{
	char spec[160], *out, *err, *s;
	struct stat st;

	snprintf(spec, sizeof(spec), "/x:%s", p("got"));
	make_precious_0600();
	ck_assert_int_eq(run_exec(GET_OK, (const char *const[]){ "--get", spec, "--", "true", NULL }, &out, &err), 0);
	ck_assert_str_eq(err, "");
	s = it_slurp(p("got"));
	ck_assert_str_eq(s, "new content");
	ck_assert_int_eq(stat(p("got"), &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	assert_no_temp_left();
	free(s);
	free(out);
	free(err);
}
END_TEST

START_TEST(agent_error_is_one_clean_line)
{
	char *out, *err;

	ck_assert_int_eq(run_exec(EXEC_ERROR_ESC, (const char *const[]){ "--", "nosuch", NULL }, &out, &err), 127);
	assert_one_clean_line(err);
	ck_assert_str_eq(err, "tinyvmm: job nosuch: agent: execve: no??[31mRED?[0m?\n");
	free(out);
	free(err);
}
END_TEST

/* Exit code 256 used to become our exit status 0: success. */
START_TEST(exit_code_out_of_range)
{
	char *out, *err;

	ck_assert_int_eq(run_exec(EXIT_256, (const char *const[]){ "--", "true", NULL }, &out, &err), 125);
	assert_one_clean_line(err);
	ck_assert_msg(strstr(err, "bad RESULT: exit code 256"), "stderr: %s", err);
	free(out);
	free(err);
}
END_TEST

/* --json keeps output in memory: the cap asked for is all it keeps,
 * whatever the agent sends. */
START_TEST(json_output_bounded_by_cap)
{
	char *out, *err;

	ck_assert_int_eq(run_exec(FLOOD, (const char *const[]){ "--json", "--output-cap", "10", "--", "true", NULL },
				  &out, &err),
			 0);
	ck_assert_str_eq(err, "");
	ck_assert_msg(strstr(out, "\"stdout\":\"AAAAAAAAAA\","), "stdout: %.200s", out);
	ck_assert_msg(strstr(out, "\"stdout_truncated\":true"), "stdout: %.200s", out);
	ck_assert_uint_lt(strlen(out), 1000);
	free(out);
	free(err);
}
END_TEST

/* Without --json a cut output used to be silent: it is said once. */
START_TEST(output_cut_is_said)
{
	char *out, *err;

	ck_assert_int_eq(run_exec(FLOOD, (const char *const[]){ "--output-cap", "10", "--", "true", NULL }, &out, &err),
			 0);
	ck_assert_str_eq(out, "AAAAAAAAAA");
	ck_assert_str_eq(err, "tinyvmm: job output cut at 10 bytes per stream (--output-cap): stdout\n");
	free(out);
	free(err);
}
END_TEST

/* Local --put/--get paths that cannot work: one line, status 125. */
START_TEST(put_get_bad_local_paths)
{
	char spec[160], want[256], *out, *err;

	snprintf(spec, sizeof(spec), "%s:/x", p("adir"));
	ck_assert_int_eq(run_exec(GET_OK, (const char *const[]){ "--put", spec, "--", "true", NULL }, &out, &err), 125);
	snprintf(want, sizeof(want), "tinyvmm: --put %s: Is a directory\n", p("adir"));
	ck_assert_str_eq(err, want);
	free(out);
	free(err);

	snprintf(spec, sizeof(spec), "%s:/x", p("nonexistent"));
	ck_assert_int_eq(run_exec(GET_OK, (const char *const[]){ "--put", spec, "--", "true", NULL }, &out, &err), 125);
	snprintf(want, sizeof(want), "tinyvmm: --put %s: No such file or directory\n", p("nonexistent"));
	ck_assert_str_eq(err, want);
	free(out);
	free(err);

	snprintf(spec, sizeof(spec), "/x:%s", p("adir"));
	ck_assert_int_eq(run_exec(GET_OK, (const char *const[]){ "--get", spec, "--", "true", NULL }, &out, &err), 125);
	snprintf(want, sizeof(want), "tinyvmm: --get %s: writing %s: Is a directory\n", spec, p("adir"));
	ck_assert_str_eq(err, want);
	assert_no_temp_left();
	free(out);
	free(err);

	snprintf(spec, sizeof(spec), "/x:%s/no/such/dir", dir);
	ck_assert_int_eq(run_exec(GET_OK, (const char *const[]){ "--get", spec, "--", "true", NULL }, &out, &err), 125);
	ck_assert_msg(strstr(err, "No such file or directory"), "stderr: %s", err);
	assert_one_clean_line(err);
	free(out);
	free(err);
}
END_TEST

/* --json must stay valid JSON (RFC 8259 wants UTF-8) whatever bytes the
 * job prints: invalid ones become U+FFFD, valid UTF-8 passes through. */
#define FFFD "\xef\xbf\xbd" /* U+FFFD in UTF-8 */
START_TEST(json_binary_output)
{
	char *out, *err;

	ck_assert_int_eq(run_exec(BINARY, (const char *const[]){ "--json", "--", "true", NULL }, &out, &err), 0);
	ck_assert_str_eq(err, "");
	ck_assert_msg(
		strstr(out, "\"stdout\":\"\xc3\xa9" FFFD "\xf0\x9f\x98\x80" FFFD FFFD FFFD "\\\\\\\"" FFFD FFFD "\","),
		"stdout: %s", out);
	free(out);
	free(err);
}
END_TEST

static Suite *cli_errors_suite(void)
{
	Suite *s = suite_create("cli_errors");
	TCase *tc = tcase_create("cli");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, numbers);
	tcase_add_test(tc, usage_errors);
	tcase_add_test(tc, help_everywhere);
	tcase_add_test(tc, host_status);
	tcase_add_test(tc, kernel_files);
	tcase_add_test(tc, drive_specs);
	tcase_add_test(tc, net_values);
	tcase_add_test(tc, snapshot_dir_fifo);
	tcase_add_test(tc, user_files_survive);
	tcase_add_test(tc, vsock_uds_in_use);
	suite_add_tcase(s, tc);

	tc = tcase_create("hostile_agent");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, get_failures_keep_the_users_file);
	tcase_add_test(tc, get_keeps_the_mode);
	tcase_add_test(tc, agent_error_is_one_clean_line);
	tcase_add_test(tc, exit_code_out_of_range);
	tcase_add_test(tc, json_output_bounded_by_cap);
	tcase_add_test(tc, output_cut_is_said);
	tcase_add_test(tc, json_binary_output);
	tcase_add_test(tc, put_get_bad_local_paths);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(cli_errors_suite());
}
