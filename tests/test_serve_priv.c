/* The daemon's privileged helper (vmm/serve/serve_priv.c): its request
 * check against hostile requests (a daemon taken over by a client), and
 * the helper process itself: a spawn is the caller's child, a refused or
 * malformed request leaves it serving, and it ends with its daemon. The
 * TAP work is replaced by stand-ins that count their calls; the program a
 * spawn starts is /bin/echo. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "vmm/serve/serve_priv.c"
#include "tests/unit.h"

/* Calls the stand-ins got, in the helper: a letter each on this fd (the
 * helper's stderr, a pipe to the test). */
static int calls_fd = -1;

static void said(char what)
{
	if (calls_fd >= 0 && write(calls_fd, &what, 1) != 1)
		_exit(9);
}

int net_tap_up(const char *name, uint32_t host, char *err, size_t cap)
{
	(void)name;
	(void)host;
	(void)err;
	(void)cap;
	said('u');
	return 0;
}

int net_tap_down(const char *name)
{
	(void)name;
	said('d');
	return 0;
}

int net_host_addrs(uint32_t *out, size_t cap)
{
	if (cap < 2) /* no ck_assert here: check's own pipe is not this process's fd 3 */
		return -E2BIG;
	out[0] = 0x7f000001;
	out[1] = 0x0ad30005;
	said('a');
	return 2;
}

/* The state dir the requests name: made (with SBX) by the tests that
 * spawn through the real helper, which looks at the directories. */
#define STATE "/tmp/tvm-priv-test-state"

static const struct priv_limits lim = { .exe = "/usr/bin/tinyvmm",
					.state_dir = STATE,
					.cgroup_parent = "tinyvmm",
					.jail = true,
					.net_base = 0x0ad30000,
					.net_prefix = 16 };

/* A sandbox's directory under lim.state_dir, and another's. */
#define SBX STATE "/sandboxes/sbx_0a1b2c3d0123456789abcdef01234567"
#define SBY STATE "/sandboxes/sbx_ffffffff0123456789abcdef01234567"
/* What vmm_argv gives a create (its head and tail around the optional
 * middle): the test's baseline. */
#define VMM_HEAD                                                                                  \
	"/usr/bin/tinyvmm", "run", "--vsock-uds", SBX "/vsock.sock", "--serial-out", "/dev/null", \
		"--no-inplace-drives", "--pause-to", SBX "/paused-1"
#define VMM_TAIL "--idle-timeout", "600", "--cgroup-parent", "tinyvmm", "--jail", "--jail-dir", STATE "/jail"

/* A request: head h, then the strings of argv (NULL-terminated) packed. */
static size_t build(char *buf, size_t cap, struct priv_head h, const char *const *argv)
{
	size_t n = sizeof(h);

	memcpy(buf, &h, sizeof(h));
	for (; argv && *argv; argv++) {
		size_t k = strlen(*argv) + 1;

		ck_assert_uint_le(n + k, cap);
		memcpy(buf + n, *argv, k);
		n += k;
	}
	return n;
}

static int parse(const char *buf, size_t n, unsigned nfds, char *err)
{
	static struct priv_msg m;

	err[0] = 0;
	return priv_parse(buf, n, nfds, &lim, &m, err, 200);
}

static struct priv_head spawn_head(uint32_t argc)
{
	return (struct priv_head){ .op = PRIV_SPAWN, .argc = argc };
}

static struct priv_head tap_head(uint32_t op, const char *name, uint32_t host)
{
	struct priv_head h = { .op = op, .host = host };

	memcpy(h.name, name, strnlen(name, PRIV_NAME_LEN));
	return h;
}

static size_t count(const char *const *v)
{
	size_t n = 0;

	while (v[n])
		n++;
	return n;
}

/* priv_parse of a spawn of argv with one file. */
static int parse_argv(const char *const *argv, char *err)
{
	static char buf[PRIV_MAX_MSG];
	size_t n = build(buf, sizeof(buf), spawn_head((uint32_t)count(argv)), argv);

	return parse(buf, n, 1, err);
}

START_TEST(a_spawn_is_only_this_binarys_run)
{
	static char buf[PRIV_MAX_MSG];
	static struct priv_msg m;
	const char *ok[] = { VMM_HEAD, "--mem", "512", "--cpus", "1", VMM_TAIL, NULL };
	char err[200];
	size_t n = build(buf, sizeof(buf), spawn_head((uint32_t)count(ok)), ok);

	ck_assert_int_eq(priv_parse(buf, n, 1, &lim, &m, err, sizeof(err)), 0);
	ck_assert_uint_eq(m.argc, count(ok));
	ck_assert_str_eq(m.argv[3], SBX "/vsock.sock");
	ck_assert_ptr_null(m.argv[m.argc]);

	const char *sh[] = { "/bin/sh", "run", "--vsock-uds", SBX "/vsock.sock", "--pause-to", SBX "/paused-1", NULL };
	ck_assert_int_eq(parse_argv(sh, err), -EPERM);
	ck_assert_str_eq(err, "spawn: only this binary's `run` is started");
	const char *serve[] = { "/usr/bin/tinyvmm", "serve", NULL };
	ck_assert_int_eq(parse_argv(serve, err), -EPERM);
	/* a prefix of the path is not the path */
	const char *prefix[] = { "/usr/bin/tinyvmm2", "run", NULL };
	ck_assert_int_eq(parse_argv(prefix, err), -EPERM);
}
END_TEST

/* Only what vmm_argv gives: its flags, each path one of the same
 * sandbox's under the state dir, the jail when the daemon jails. */
START_TEST(a_spawn_has_only_the_daemons_flags)
{
	char err[200];
	const char *create[] = { VMM_HEAD, "--mem", "512", "--cpus", "2", VMM_TAIL, NULL };
	const char *resume[] = { VMM_HEAD, "--snapshot", SBX "/paused-12", VMM_TAIL, NULL };
	const char *net[] = { VMM_HEAD,
			      VMM_TAIL,
			      "--net",
			      "tvs0a1b2c3d",
			      "--net-ingress",
			      "replies",
			      "--net-mac",
			      "02:0a:1b:2c:3d:01",
			      "--net-allow",
			      "10.0.0.0/8:443/tcp",
			      "--net-allow",
			      "::/0",
			      "--net-dns",
			      "10.0.0.53",
			      NULL };
	const char *deny[] = { VMM_HEAD,         VMM_TAIL,        "--net",   "tvs0a1b2c3d",
			       "--net-deny-all", "--net-ingress", "replies", NULL };
	/* a network open to the host: never the daemon's */
	const char *open_in[] = { VMM_HEAD, VMM_TAIL, "--net", "tvs0a1b2c3d", "--net-deny-all", NULL };
	const char *open_all[] = { VMM_HEAD, VMM_TAIL, "--net", "tvs0a1b2c3d", "--net-ingress", "all", NULL };
	const char *no_net[] = { VMM_HEAD, VMM_TAIL, "--net-ingress", "replies", NULL };

	ck_assert_int_eq(parse_argv(create, err), 0);
	ck_assert_int_eq(parse_argv(resume, err), 0);
	ck_assert_int_eq(parse_argv(net, err), 0);
	ck_assert_int_eq(parse_argv(deny, err), 0);
	ck_assert_int_eq(parse_argv(open_in, err), -EPERM);
	ck_assert_str_eq(err, "spawn: --net without --net-ingress replies (the daemon always gives it)");
	ck_assert_int_eq(parse_argv(open_all, err), -EPERM);
	ck_assert_int_eq(parse_argv(no_net, err), -EPERM);

	/* a flag it never gives, or one of its with a value it never gives */
	static const char *const bad[][2] = {
		{ "--no-seccomp", NULL },
		{ "--seccomp", "off" },
		{ "--put", "/etc/shadow:/x" },
		{ "--get", "/x:/etc/passwd" },
		{ "--kernel", "/boot/vmlinuz" },
		{ "--drive", "/dev/sda" },
		{ "--metrics", "/etc/cron.d/x" },
		{ "--snapshot", STATE "/templates/0/t" },
		{ "--snapshot", SBY "/paused-1" },
		{ "--snapshot", SBX "/paused-1/../../../../../../etc" },
		{ "--snapshot", SBX "/paused-" },
		{ "--serial-out", "/tmp/x" },
		{ "--mem", "lots" },
		{ "--mem", "" },
		{ "--cgroup-parent", "/" },
		{ "--jail-dir", "/" },
		{ "--net", "eth0" },
		{ "--net", "tvsffffffff" },
		{ "--net", "tvs0a1b2c3d0" },
		{ "--net-mac", "ff:ff:ff:ff:ff:ff" },
		{ "--net-allow", "bogus" },
		{ "--net-dns", "10.0.0.0/8" },
		{ "--vsock-uds", SBX "/vsock.sock" }, /* twice */
		{ "--idle-timeout", NULL },           /* no value: the last argument */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *argv[] = { VMM_HEAD, VMM_TAIL, bad[i][0], bad[i][1], NULL };

		ck_assert_msg(parse_argv(argv, err) == -EPERM, "%s %s was taken", bad[i][0], bad[i][1]);
	}
	/* paths of another sandbox, or of none */
	const char *mixed[] = { "/usr/bin/tinyvmm", "run",           "--vsock-uds", SBX "/vsock.sock",
				"--pause-to",       SBY "/paused-1", VMM_TAIL,      NULL };
	ck_assert_int_eq(parse_argv(mixed, err), -EPERM);
	const char *outside[] = { "/usr/bin/tinyvmm", "run",           "--vsock-uds", "/run/docker.sock",
				  "--pause-to",       SBX "/paused-1", VMM_TAIL,      NULL };
	ck_assert_int_eq(parse_argv(outside, err), -EPERM);
	const char *prefix[] = {
		"/usr/bin/tinyvmm", "run",
		"--vsock-uds",      "/var/lib/tinyvmm/serve2/sandboxes/sbx_0a1b2c3d0123456789abcdef01234567/vsock.sock",
		"--pause-to",       SBX "/paused-1",
		VMM_TAIL,           NULL
	};
	ck_assert_int_eq(parse_argv(prefix, err), -EPERM);
	/* the TAP of another sandbox, given before the paths */
	const char *tap_first[] = { "/usr/bin/tinyvmm", "run",           "--net",
				    "tvsffffffff",      "--vsock-uds",   SBX "/vsock.sock",
				    "--serial-out",     "/dev/null",     "--no-inplace-drives",
				    "--pause-to",       SBX "/paused-1", VMM_TAIL,
				    "--net-ingress",    "replies",       NULL };
	ck_assert_int_eq(parse_argv(tap_first, err), -EPERM);
	ck_assert_str_eq(err, "spawn: --net is another sandbox's TAP");
	/* the daemon jails: no VMM without --jail; and five resolvers */
	const char *unjailed[] = { VMM_HEAD, "--idle-timeout", "600", NULL };
	ck_assert_int_eq(parse_argv(unjailed, err), -EPERM);
	ck_assert_str_eq(err, "spawn: --jail missing (the daemon always gives it)");
	/* each flag the daemon always gives, left out */
	static const char *const always[] = { "--no-inplace-drives", "--serial-out", "--idle-timeout",
					      "--cgroup-parent", "--jail-dir" };
	for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++) {
		const char *full[] = { VMM_HEAD, VMM_TAIL, NULL };
		const char *argv[32];
		size_t n = 0;

		for (size_t k = 0; full[k]; k++) {
			if (!strcmp(full[k], always[i])) {
				k += strcmp(always[i], "--no-inplace-drives") != 0; /* and its value */
				continue;
			}
			argv[n++] = full[k];
		}
		argv[n] = NULL;
		ck_assert_msg(parse_argv(argv, err) == -EPERM, "without %s", always[i]);
		char want[120];
		snprintf(want, sizeof(want), "spawn: %s missing (the daemon always gives it)", always[i]);
		ck_assert_str_eq(err, want);
	}
	/* shapes no create may ask for; network flags without a network */
	const char *big[] = { VMM_HEAD, VMM_TAIL, "--mem", "999999999", NULL };
	ck_assert_int_eq(parse_argv(big, err), -EPERM);
	const char *small[] = { VMM_HEAD, VMM_TAIL, "--mem", "1", NULL };
	ck_assert_int_eq(parse_argv(small, err), -EPERM);
	const char *cpus[] = { VMM_HEAD, VMM_TAIL, "--cpus", "9", NULL };
	ck_assert_int_eq(parse_argv(cpus, err), -EPERM);
	const char *nonet[] = { VMM_HEAD, VMM_TAIL, "--net-allow", "0.0.0.0/0", NULL };
	ck_assert_int_eq(parse_argv(nonet, err), -EPERM);
	ck_assert_str_eq(err, "spawn: network flags without --net");
	const char *dns5[] = { VMM_HEAD,   VMM_TAIL,    "--net-dns", "10.0.0.1",  "--net-dns", "10.0.0.2", "--net-dns",
			       "10.0.0.3", "--net-dns", "10.0.0.4",  "--net-dns", "10.0.0.5",  NULL };
	ck_assert_int_eq(parse_argv(dns5, err), -EPERM);
}
END_TEST

START_TEST(malformed_spawns_are_refused)
{
	static char buf[PRIV_MAX_MSG];
	const char *ok[] = { "/usr/bin/tinyvmm", "run", NULL };
	char err[200];
	size_t n = build(buf, sizeof(buf), spawn_head(2), ok);

	/* its log: one file, no more, no less */
	ck_assert_int_eq(parse(buf, n, 0, err), -EINVAL);
	ck_assert_int_eq(parse(buf, n, 2, err), -EINVAL);
	ck_assert_str_eq(err, "spawn: exactly one file (the VMM's log) is expected");
	/* argc that the bytes do not hold, or out of range */
	n = build(buf, sizeof(buf), spawn_head(3), ok);
	ck_assert_int_eq(parse(buf, n, 1, err), -EINVAL);
	ck_assert_str_eq(err, "spawn: an argument is not NUL-terminated");
	n = build(buf, sizeof(buf), spawn_head(1), ok);
	ck_assert_int_eq(parse(buf, n, 1, err), -EINVAL);
	ck_assert_str_eq(err, "spawn: argument count out of range");
	n = build(buf, sizeof(buf), spawn_head(0), NULL);
	ck_assert_int_eq(parse(buf, n, 1, err), -EINVAL);
	n = build(buf, sizeof(buf), spawn_head(PRIV_MAX_ARGS + 1), ok);
	ck_assert_int_eq(parse(buf, n, 1, err), -EINVAL);
	n = build(buf, sizeof(buf), spawn_head(0xffffffffu), ok);
	ck_assert_int_eq(parse(buf, n, 1, err), -EINVAL);
	/* the last argument cut short of its NUL, bytes after the last */
	n = build(buf, sizeof(buf), spawn_head(2), ok);
	ck_assert_int_eq(parse(buf, n - 1, 1, err), -EINVAL);
	buf[n] = 'x';
	ck_assert_int_eq(parse(buf, n + 1, 1, err), -EINVAL);
	ck_assert_str_eq(err, "spawn: bytes after the last argument");
	/* a head cut short; no head at all */
	ck_assert_int_eq(parse(buf, sizeof(struct priv_head) - 1, 1, err), -EINVAL);
	ck_assert_int_eq(parse(buf, 0, 0, err), -EINVAL);
	/* the most arguments there may be pass */
	static const char *many[PRIV_MAX_ARGS + 1];
	const char *head[] = { VMM_HEAD, VMM_TAIL, "--net", "tvs0a1b2c3d", "--net-ingress", "replies" };
	int k = (int)(sizeof(head) / sizeof(head[0]));
	memcpy(many, head, sizeof(head));
	if ((PRIV_MAX_ARGS - k) % 2)
		many[k++] = "--net-deny-all";
	while (k < PRIV_MAX_ARGS) {
		many[k++] = "--net-allow";
		many[k++] = "10.0.0.0/8";
	}
	n = build(buf, sizeof(buf), spawn_head(PRIV_MAX_ARGS), many);
	ck_assert_int_eq(parse(buf, n, 1, err), 0);
}
END_TEST

/* A kill names a pid, its start time, a stop's, an end's or a pause's
 * signal and a sandbox's socket: nothing else passes the parse. */
START_TEST(kills_are_checked_requests)
{
	static char buf[4096];
	char err[200];
	struct priv_head h = { .op = PRIV_KILL, .argc = 4 };
	const char *ok[] = { "1234", "987654", "15", SBX "/vsock.sock", NULL };
	size_t n = build(buf, sizeof(buf), h, ok);

	ck_assert_int_eq(parse(buf, n, 0, err), 0);
	ck_assert_int_eq(parse(buf, n, 1, err), -EINVAL); /* no file */
	const char *bad[][4] = {
		{ "0", "987654", "15", SBX "/vsock.sock" },    { "-1", "987654", "15", SBX "/vsock.sock" },
		{ "1234", "0", "15", SBX "/vsock.sock" },      { "1234", "98x", "15", SBX "/vsock.sock" },
		{ "1234", "987654", "2", SBX "/vsock.sock" },  { "1234", "987654", "19", SBX "/vsock.sock" },
		{ "1234", "987654", "15", "/tmp/vsock.sock" }, { "1234", "987654", "15", SBX "/../x/vsock.sock" },
		{ "1234", "987654", "15", SBX "/paused-1" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *argv[] = { bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL };

		n = build(buf, sizeof(buf), h, argv);
		ck_assert_msg(parse(buf, n, 0, err) == -EPERM, "case %zu", i);
	}
	h.argc = 3;
	n = build(buf, sizeof(buf), h, ok);
	ck_assert_int_eq(parse(buf, n, 0, err), -EINVAL);
}
END_TEST

START_TEST(taps_are_the_sandboxes_own)
{
	char buf[sizeof(struct priv_head) + 8], err[200];
	size_t n;

	n = build(buf, sizeof(buf), tap_head(PRIV_TAP_UP, "tvs0a1b2c3d", 0x0ad30005), NULL);
	ck_assert_int_eq(parse(buf, n, 0, err), 0);
	n = build(buf, sizeof(buf), tap_head(PRIV_TAP_DOWN, "tvs0a1b2c3d", 0), NULL);
	ck_assert_int_eq(parse(buf, n, 0, err), 0);
	/* the range's last /30 */
	n = build(buf, sizeof(buf), tap_head(PRIV_TAP_UP, "tvs0a1b2c3d", 0x0ad3fffd), NULL);
	ck_assert_int_eq(parse(buf, n, 0, err), 0);

	static const char *const bad_names[] = { "eth0", "tvs0a1b2c3",  "tvs0A1B2C3D", "tvs0a1b2c3g",
						 "lo",   "tvs../b2c3d", "xvs0a1b2c3d", "tvs0a1b2c3d0" };
	for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
		n = build(buf, sizeof(buf), tap_head(PRIV_TAP_UP, bad_names[i], 0x0ad30005), NULL);
		ck_assert_msg(parse(buf, n, 0, err) == -EPERM, "TAP_UP %s", bad_names[i]);
		n = build(buf, sizeof(buf), tap_head(PRIV_TAP_DOWN, bad_names[i], 0), NULL);
		ck_assert_msg(parse(buf, n, 0, err) == -EPERM, "TAP_DOWN %s", bad_names[i]);
	}
	/* a byte after the name's NUL */
	struct priv_head h = tap_head(PRIV_TAP_DOWN, "tvs0a1b2c3d", 0);
	h.name[13] = 'x';
	n = build(buf, sizeof(buf), h, NULL);
	ck_assert_int_eq(parse(buf, n, 0, err), -EPERM);
	/* addresses: outside the range, not a /30's host end, the network's */
	static const uint32_t bad_hosts[] = { 0x0ad40001, 0x0a000001, 0x0ad30004, 0x0ad30006,
					      0x0ad30007, 0,          0xffffffff, 0x7f000001 };
	for (size_t i = 0; i < sizeof(bad_hosts) / sizeof(bad_hosts[0]); i++) {
		n = build(buf, sizeof(buf), tap_head(PRIV_TAP_UP, "tvs0a1b2c3d", bad_hosts[i]), NULL);
		ck_assert_msg(parse(buf, n, 0, err) == -EPERM, "host 0x%x", bad_hosts[i]);
	}
	ck_assert_str_eq(err, "tap: not a sandbox's TAP, or its address is outside net_range");
	/* a body or a file it does not take */
	n = build(buf, sizeof(buf), tap_head(PRIV_TAP_UP, "tvs0a1b2c3d", 0x0ad30005), NULL);
	ck_assert_int_eq(parse(buf, n, 1, err), -EINVAL);
	ck_assert_int_eq(parse(buf, n + 1, 0, err), -EINVAL);
	n = build(buf, sizeof(buf), tap_head(PRIV_ADDRS, "", 0), NULL);
	ck_assert_int_eq(parse(buf, n, 0, err), 0);
	ck_assert_int_eq(parse(buf, n, 1, err), -EINVAL);
	/* no such request */
	n = build(buf, sizeof(buf), tap_head(0, "", 0), NULL);
	ck_assert_int_eq(parse(buf, n, 0, err), -EINVAL);
	n = build(buf, sizeof(buf), tap_head(PRIV_HOST, "", 0), NULL);
	ck_assert_int_eq(parse(buf, n, 0, err), 0);
	ck_assert_int_eq(parse(buf, n + 1, 0, err), -EINVAL);
	n = build(buf, sizeof(buf), tap_head(PRIV_HOST + 1, "", 0), NULL);
	ck_assert_int_eq(parse(buf, n, 0, err), -EINVAL);
	ck_assert_str_eq(err, "unknown request");
}
END_TEST

/* A daemon's srv with a helper whose exe is /bin/echo (and sock, or
 * none, its listening socket's path); calls[0] reads what the stand-ins
 * were asked. */
static const char *helper_exe = "/bin/echo"; /* the binary the helper starts */

static void start_helper_on(struct srv *s, int calls[2], const char *sock)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->cfg.exe, sizeof(s->cfg.exe), "%s", helper_exe);
	snprintf(s->cfg.socket_path, sizeof(s->cfg.socket_path), "%s", sock ? sock : "");
	snprintf(s->cfg.state_dir, sizeof(s->cfg.state_dir), "%s", STATE);
	ck_assert_int_eq(system("rm -rf " STATE " && mkdir -p " SBX), 0);
	s->cfg.net_base = 0x0ad30000;
	s->cfg.net_prefix = 16;
	ck_assert_int_eq(pipe(calls), 0);
	/* The helper keeps only fds 0 to 3 of ours: the pipe goes as its
	 * stderr. */
	int saved = dup(2);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_eq(dup2(calls[1], 2), 2);
	calls_fd = 2;
	ck_assert_int_eq(priv_start(s), 0);
	calls_fd = -1;
	dup2(saved, 2);
	close(saved);
	close(calls[1]);
}

static void start_helper(struct srv *s, int calls[2])
{
	start_helper_on(s, calls, NULL);
}

static char next_call(int fd)
{
	char c = 0;

	ck_assert_int_eq(read(fd, &c, 1), 1);
	return c;
}

/* A raw request on the helper's socket, with fds[nfds]: its answer. */
static struct priv_reply raw(struct srv *s, const void *req, size_t len, const int *fds, unsigned nfds)
{
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { (void *)req, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct priv_reply rep;

	memset(&rep, 0, sizeof(rep));
	if (nfds) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	ck_assert_int_eq(sendmsg(s->priv.fd, &mh, MSG_NOSIGNAL), (ssize_t)len);
	ck_assert_int_ge(recv(s->priv.fd, &rep, sizeof(rep), 0), (ssize_t)offsetof(struct priv_reply, addrs));
	return rep;
}

/* PRIV_HOST: /dev/kvm and the guest as the helper (and so a VMM) finds
 * them, asked at its start and again later: the daemon's own view shows
 * neither. */
START_TEST(the_helper_says_what_the_host_has_for_a_vmm)
{
	struct srv s;
	int calls[2], kvm = access("/dev/kvm", R_OK | W_OK) < 0 ? errno : 0, fd;
	char dir[] = "/tmp/tvm-priv-guest-XXXXXX", p[64], want[80];
	char problem[SRV_PROBLEMS][SRV_PROBLEM_LEN];
	const char *old = getenv("TINYVMM_DATA_DIR");
	char *keep = old ? strdup(old) : NULL;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	setenv("TINYVMM_DATA_DIR", dir, 1); /* the helper has the daemon's environment */
	start_helper(&s, calls);
	ck_assert_int_eq(s.priv.kvm_errno, kvm);
	ck_assert(s.priv.no_guest);
	ck_assert_str_eq(s.priv.looked, dir);
	ck_assert_uint_eq(srv_problems(&s, problem, true), kvm ? 2 : 1);
	snprintf(want, sizeof(want), "no guest kernel and base image in %s: ", dir);
	ck_assert_msg(!strncmp(problem[kvm ? 1 : 0], want, strlen(want)), "%s", problem[kvm ? 1 : 0]);
	ck_assert_uint_eq(srv_problems(&s, problem, false), kvm ? 1 : 0);
	/* the guest put there later: the next look finds it */
	snprintf(p, sizeof(p), "%s/" GUEST_KERNEL, dir);
	ck_assert_int_ge(fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/" GUEST_IMAGE, dir);
	ck_assert_int_ge(fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), 0);
	close(fd);
	ck_assert(s.priv.no_guest);
	ck_assert_int_eq(priv_host(&s), 0);
	ck_assert(!s.priv.no_guest);
	ck_assert_uint_eq(srv_problems(&s, problem, true), kvm ? 1 : 0);
	priv_stop(&s);
	/* no helper: the last look stays, and says the helper is gone */
	ck_assert_int_eq(priv_host(&s), -EPIPE);
	ck_assert_uint_eq(srv_problems(&s, problem, true), kvm ? 2 : 1);
	ck_assert_str_eq(problem[kvm ? 1 : 0],
			 "the daemon's privileged helper is gone: no sandbox can start (restart the daemon)");
	close(calls[0]);
	if (keep)
		setenv("TINYVMM_DATA_DIR", keep, 1);
	else
		unsetenv("TINYVMM_DATA_DIR");
	free(keep);
	snprintf(p, sizeof(p), "rm -rf %s", dir);
	ck_assert_int_eq(system(p), 0);
}
END_TEST

START_TEST(a_spawned_program_is_the_daemons_child)
{
	struct srv s;
	int calls[2], status;
	char log[] = "/tmp/tvm-priv-XXXXXX", out[512] = "", err[200] = "";
	int logfd = mkstemp(log);
	char *argv[] = { "/bin/echo",      "run",           "--vsock-uds",         SBX "/vsock.sock",
			 "--pause-to",     SBX "/paused-1", "--serial-out",        "/dev/null",
			 "--idle-timeout", "600",           "--no-inplace-drives", NULL };

	ck_assert_int_ge(logfd, 0);
	start_helper(&s, calls);
	pid_t pid = priv_spawn(&s, argv, logfd, err, sizeof(err));
	ck_assert_msg(pid > 0, "%s", err);
	/* CLONE_PARENT: ours to reap, not the helper's */
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_gt(pread(logfd, out, sizeof(out) - 1, 0), 0);
	ck_assert_str_eq(out, "run --vsock-uds " SBX "/vsock.sock --pause-to " SBX
			      "/paused-1 --serial-out /dev/null --idle-timeout 600 --no-inplace-drives\n");
	close(logfd);
	unlink(log);

	/* the sandbox's directory a symlink (out of the state dir): refused,
	 * nothing started */
	ck_assert_int_eq(system("rm -rf " SBX " && mkdir -p " STATE "/elsewhere && ln -s " STATE "/elsewhere " SBX), 0);
	logfd = open(log, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(logfd, 0);
	ck_assert_int_eq(priv_spawn(&s, argv, logfd, err, sizeof(err)), -EPERM);
	ck_assert_str_eq(err, "spawn: " SBX " is not a directory of the daemon's");
	usleep(200000);
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), 0); /* the helper runs; no program was started */
	close(logfd);
	unlink(log);

	/* the host's addresses, through the helper */
	uint32_t a[4];
	ck_assert_int_eq(priv_addrs(&s, a, 4), 2);
	ck_assert_uint_eq(a[1], 0x0ad30005);
	ck_assert_int_eq(next_call(calls[0]), 'a');
	ck_assert_int_eq(priv_tap_up(&s, "tvs0a1b2c3d", 0x0ad30005, err, sizeof(err)), 0);
	ck_assert_int_eq(next_call(calls[0]), 'u');
	ck_assert_int_eq(priv_tap_down(&s, "tvs0a1b2c3d"), 0);
	ck_assert_int_eq(next_call(calls[0]), 'd');
	/* refused: never reaches the stand-ins */
	ck_assert_int_eq(priv_tap_up(&s, "eth0", 0x0ad30005, err, sizeof(err)), -EPERM);
	ck_assert_str_eq(err, "tap: not a sandbox's TAP, or its address is outside net_range");
	ck_assert_int_eq(priv_tap_down(&s, "lo"), -EPERM);
	priv_stop(&s);
	ck_assert_int_eq(read(calls[0], out, 1), 0); /* no other call was made */
	close(calls[0]);
	ck_assert_int_eq(system("rm -rf " STATE), 0);
}
END_TEST

/* A Unix socket of type at path (a stream one listening, backlog 0): its
 * fd. */
static int bound_at(const char *path, int type)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (type == SOCK_STREAM)
		ck_assert_int_eq(listen(fd, 0), 0);
	return fd;
}

static bool exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* Only a socket nobody listens on goes: not a live one, not one whose
 * backlog is full (a connect would block), not another kind's (a
 * datagram socket: another service's), not a file. */
START_TEST(only_a_stale_socket_is_removed)
{
	char dir[] = "/tmp/tvm-priv-sock-XXXXXX", path[64];
	int fd, c;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/api.sock", dir);
	ck_assert_int_eq(srv_socket_stale_remove(path, NULL), 0); /* absent */
	fd = bound_at(path, SOCK_STREAM);
	ck_assert_int_eq(srv_socket_stale_remove(path, NULL), -EADDRINUSE);
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); /* fill its backlog */
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	connect(c, (struct sockaddr *)&sa, sizeof(sa));
	ck_assert_int_eq(srv_socket_stale_remove(path, NULL), -EADDRINUSE); /* at once, not blocked */
	close(c);
	close(fd);
	ck_assert(exists(path));
	ck_assert_int_eq(srv_socket_stale_remove(path, NULL), 0); /* nobody: it goes */
	ck_assert(!exists(path));
	fd = bound_at(path, SOCK_DGRAM);
	ck_assert_int_eq(srv_socket_stale_remove(path, NULL), -EPROTOTYPE);
	close(fd);
	ck_assert(exists(path));
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	close(fd);
	ck_assert_int_eq(srv_socket_stale_remove(path, NULL), -EEXIST);
	ck_assert(exists(path));
	unlink(path);
	rmdir(dir);
}
END_TEST

/* The daemon may remove nothing outside its state dir: its helper removes
 * its socket at its stop, once, and only the very socket it was told of
 * before any client (its inode): never a successor's made since. */
START_TEST(the_helper_removes_the_daemons_socket_at_its_stop)
{
	char dir[] = "/tmp/tvm-priv-sock-XXXXXX", path[64];
	struct srv s;
	int calls[2], fd;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/api.sock", dir);
	/* told of it, then it is closed: it goes, once */
	start_helper_on(&s, calls, path);
	ck_assert_int_eq(priv_socket_gone(&s), -EPERM); /* not told of one yet */
	fd = bound_at(path, SOCK_STREAM);
	ck_assert_int_eq(priv_socket_bound(&s), 0);
	ck_assert_int_eq(priv_socket_bound(&s), -EALREADY); /* once: not after a client */
	close(fd);
	ck_assert_int_eq(priv_socket_gone(&s), 0);
	ck_assert(!exists(path));
	fd = bound_at(path, SOCK_STREAM);
	close(fd); /* stale, but not the one it was told of, and once only */
	ck_assert_int_eq(priv_socket_gone(&s), -EPERM);
	ck_assert(exists(path));
	priv_stop(&s);
	close(calls[0]);
	unlink(path);

	/* a successor's socket at the path since: it stays */
	start_helper_on(&s, calls, path);
	fd = bound_at(path, SOCK_STREAM);
	ck_assert_int_eq(priv_socket_bound(&s), 0);
	close(fd);
	unlink(path);
	fd = bound_at(path, SOCK_STREAM);
	close(fd);
	ck_assert_int_eq(priv_socket_gone(&s), -ESTALE);
	ck_assert(exists(path));
	priv_stop(&s);
	close(calls[0]);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* A sleeping process: our child, or (grandchild) one whose parent is
 * gone, as a previous daemon's VMM is; argv: its command line (run by
 * sh's name "run" in dir, for a VMM's head), or NULL for sleep. */
static pid_t sleeper(bool grandchild, const char *dir, char *const argv[])
{
	int p[2];
	pid_t pid, got = 0;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (grandchild && fork() != 0)
			_exit(0);
		pid_t me = getpid();
		if (write(p[1], &me, sizeof(me)) != sizeof(me))
			_exit(1);
		if (argv) {
			if (chdir(dir) == 0)
				execv("run", argv);
		} else {
			execl("/bin/sleep", "sleep", "100", (char *)NULL);
		}
		_exit(127);
	}
	ck_assert_int_eq(read(p[0], &got, sizeof(got)), sizeof(got));
	close(p[0]);
	close(p[1]);
	if (grandchild)
		ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
	usleep(200000); /* its exec done */
	return got;
}

/* PRIV_KILL end to end: the helper signals a VMM it started (the
 * daemon's child), or a previous daemon's VMM by its command line, with
 * the start time given; never another of the daemon's children (one it
 * inherited, or adopted as a namespace's init), a stranger, itself, nor
 * one named with another start time. */
START_TEST(the_helper_signals_only_a_vmm)
{
	struct srv s;
	struct sandbox sb = { 0 };
	int calls[2], status, logfd;
	char dir[] = "/tmp/tvm-priv-kill-XXXXXX", script[64], old[PATH_MAX], err[200] = "";
	char log[] = "/tmp/tvm-priv-XXXXXX";

	/* "VMMs" that wait: /bin/sh running ./run (its argv[1]) from here */
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(script, sizeof(script), "%s/run", dir);
	FILE *f = fopen(script, "w");
	ck_assert_ptr_nonnull(f);
	fputs("#!/bin/sh\nwhile :; do sleep 1; done\n", f);
	fclose(f);
	chmod(script, 0755);
	ck_assert_ptr_nonnull(getcwd(old, sizeof(old)));
	ck_assert_int_eq(chdir(dir), 0);
	helper_exe = "/bin/sh";
	start_helper(&s, calls);
	helper_exe = "/bin/echo";
	snprintf(sb.uds, sizeof(sb.uds), SBX "/vsock.sock");

	/* one it started: signalled, with its start time only */
	char *argv[] = { s.cfg.exe,        "run",           "--vsock-uds",         SBX "/vsock.sock",
			 "--pause-to",     SBX "/paused-1", "--serial-out",        "/dev/null",
			 "--idle-timeout", "600",           "--no-inplace-drives", NULL };
	logfd = mkstemp(log);
	ck_assert_int_ge(logfd, 0);
	sb.pid = priv_spawn(&s, argv, logfd, err, sizeof(err));
	ck_assert_msg(sb.pid > 0, "%s", err);
	close(logfd);
	unlink(log);
	ck_assert_int_eq(jail_pid_start(sb.pid, &sb.pid_start), 0);
	sb.pid_start++;
	ck_assert_int_eq(priv_kill(&s, &sb, SIGTERM), -EPERM); /* another start time */
	sb.pid_start--;
	ck_assert_int_eq(priv_kill(&s, &sb, SIGTERM), 0);
	ck_assert_int_eq(waitpid(sb.pid, &status, 0), sb.pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
	ck_assert_int_eq(priv_kill(&s, &sb, SIGTERM), -ESRCH); /* reaped: gone */
	/* the daemon's child it did not start: refused */
	sb.pid = sleeper(false, NULL, NULL);
	ck_assert_int_eq(jail_pid_start(sb.pid, &sb.pid_start), 0);
	ck_assert_int_eq(priv_kill(&s, &sb, SIGKILL), -EPERM);
	ck_assert_int_eq(kill(sb.pid, 0), 0);
	kill(sb.pid, SIGKILL);
	waitpid(sb.pid, NULL, 0);
	/* not our child, any command line: refused */
	sb.pid = sleeper(true, NULL, NULL);
	ck_assert_int_eq(jail_pid_start(sb.pid, &sb.pid_start), 0);
	ck_assert_int_eq(priv_kill(&s, &sb, SIGKILL), -EPERM);
	ck_assert_int_eq(kill(sb.pid, 0), 0);
	kill(sb.pid, SIGKILL);
	/* the helper itself: refused */
	sb.pid = s.priv.pid;
	ck_assert_int_eq(jail_pid_start(sb.pid, &sb.pid_start), 0);
	ck_assert_int_eq(priv_kill(&s, &sb, SIGKILL), -EPERM);
	/* not our child, but that sandbox's VMM's command line: signalled */
	char *vmm[] = { "run", "--vsock-uds", sb.uds, NULL };
	sb.pid = sleeper(true, dir, vmm);
	ck_assert_int_eq(jail_pid_start(sb.pid, &sb.pid_start), 0);
	ck_assert_int_eq(priv_kill(&s, &sb, SIGKILL), 0);
	for (int i = 0; i < 100 && kill(sb.pid, 0) == 0; i++)
		usleep(20000);
	ck_assert_int_eq(kill(sb.pid, 0), -1);
	priv_stop(&s);
	close(calls[0]);
	ck_assert_int_eq(chdir(old), 0);
	unlink(script);
	rmdir(dir);
}
END_TEST

START_TEST(hostile_requests_leave_the_helper_serving)
{
	static char buf[PRIV_MAX_MSG + 4096];
	struct srv s;
	int calls[2], sv[2];
	char log[] = "/tmp/tvm-priv-XXXXXX";
	int logfd = mkstemp(log);
	const char *sh[] = { "/bin/sh", "run", NULL },
		   *ok[] = { "/bin/echo",      "run",           "--vsock-uds",         SBX "/vsock.sock",
			     "--pause-to",     SBX "/paused-1", "--serial-out",        "/dev/null",
			     "--idle-timeout", "600",           "--no-inplace-drives", NULL };
	struct priv_reply rep;
	size_t n;

	ck_assert_int_ge(logfd, 0);
	start_helper(&s, calls);
	/* another program */
	n = build(buf, sizeof(buf), spawn_head(2), sh);
	rep = raw(&s, buf, n, &logfd, 1);
	ck_assert_int_eq(rep.r, -EPERM);
	/* a socket for a log: a VMM's stdout must be a file */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	n = build(buf, sizeof(buf), spawn_head(11), ok);
	rep = raw(&s, buf, n, &sv[0], 1);
	ck_assert_int_eq(rep.r, -EINVAL);
	ck_assert_str_eq(rep.err, "spawn: the log is not a regular file");
	/* three files */
	int three[3] = { logfd, sv[0], sv[1] };
	rep = raw(&s, buf, n, three, 3);
	ck_assert_int_eq(rep.r, -EINVAL);
	/* over the largest request: cut short by the socket, refused whole */
	memset(buf + n, 'a', sizeof(buf) - n);
	rep = raw(&s, buf, sizeof(buf), &logfd, 1);
	ck_assert_int_eq(rep.r, -E2BIG);
	/* a lone byte; an empty request (a read of 0, not the daemon's end) */
	rep = raw(&s, "x", 1, NULL, 0);
	ck_assert_int_eq(rep.r, -EINVAL);
	rep = raw(&s, "", 0, NULL, 0);
	ck_assert_int_eq(rep.r, -EINVAL);
	ck_assert_str_eq(rep.err, "request shorter than its head");
	/* still serving, and it made no process and no other call */
	uint32_t a[2];
	ck_assert_int_eq(priv_addrs(&s, a, 2), 2);
	ck_assert_int_eq(next_call(calls[0]), 'a');
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), 0); /* the helper only: running */
	priv_stop(&s);
	ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);
	ck_assert_int_eq(errno, ECHILD);
	close(sv[0]);
	close(sv[1]);
	close(logfd);
	unlink(log);
	close(calls[0]);
}
END_TEST

/* Whether pid runs (not gone, not a zombie no one reaped yet). */
static bool running(pid_t pid)
{
	char path[64], st[512];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, st, sizeof(st) - 1);
	close(fd);
	if (n <= 0)
		return false;
	st[n] = 0;
	char *paren = strrchr(st, ')');
	return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

START_TEST(the_helper_ends_with_its_daemon)
{
	int p[2], status;
	pid_t daemon, helper = 0;

	ck_assert_int_eq(pipe(p), 0);
	daemon = fork();
	ck_assert_int_ge(daemon, 0);
	if (daemon == 0) {
		struct srv s;
		int calls[2];

		start_helper(&s, calls);
		if (write(p[1], &s.priv.pid, sizeof(pid_t)) != sizeof(pid_t))
			_exit(1);
		pause(); /* until SIGKILL: no priv_stop, no EOF of ours */
		_exit(0);
	}
	close(p[1]);
	ck_assert_int_eq(read(p[0], &helper, sizeof(helper)), sizeof(helper));
	ck_assert(running(helper));
	kill(daemon, SIGKILL);
	ck_assert_int_eq(waitpid(daemon, &status, 0), daemon);
	/* PR_SET_PDEATHSIG: killed with it (whoever reaps it) */
	for (int i = 0; i < 500 && running(helper); i++)
		usleep(10000);
	ck_assert_msg(!running(helper), "the helper %d outlived its daemon", helper);
	close(p[0]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("serve_priv");
	TCase *tc = tcase_create("helper");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_spawn_is_only_this_binarys_run);
	tcase_add_test(tc, a_spawn_has_only_the_daemons_flags);
	tcase_add_test(tc, malformed_spawns_are_refused);
	tcase_add_test(tc, taps_are_the_sandboxes_own);
	tcase_add_test(tc, kills_are_checked_requests);
	tcase_add_test(tc, the_helper_says_what_the_host_has_for_a_vmm);
	tcase_add_test(tc, a_spawned_program_is_the_daemons_child);
	tcase_add_test(tc, hostile_requests_leave_the_helper_serving);
	tcase_add_test(tc, only_a_stale_socket_is_removed);
	tcase_add_test(tc, the_helper_signals_only_a_vmm);
	tcase_add_test(tc, the_helper_removes_the_daemons_socket_at_its_stop);
	tcase_add_test(tc, the_helper_ends_with_its_daemon);
	suite_add_tcase(s, tc);
	int r = tvm_run_suite(s);

	if (system("rm -rf " STATE))
		r = 1;
	return r;
}
