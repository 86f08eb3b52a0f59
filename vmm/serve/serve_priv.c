/* The daemon's privileged helper (serve.h, "The privileged helper").
 *
 * tinyvmm serve forks it before it reads a client's byte and before it
 * confines itself (seccomp role SC_DAEMON: no exec, no fork, no ioctl,
 * Unix sockets only, no signal). It then asks the helper for the few
 * things that need more: a sandbox's VMM started (this binary's `run`) or
 * signalled, a sandbox's TAP made or removed, the host's IPv4 addresses,
 * its own socket removed at its stop. A daemon taken over by a client can
 * ask for nothing else: every request is checked here, once, by
 * priv_parse, before use (no other program, no process but a VMM, no
 * interface but a tvs one, no address outside net_range, one log fd).
 *
 * Transport: a SOCK_SEQPACKET socketpair, one request and one answer at a
 * time (the daemon's side holds a mutex across both). A VMM is made with
 * clone(CLONE_PARENT): it is the daemon's child, which reaps and re-adopts
 * it as any other; the helper keeps no child, only the list of the VMMs
 * it started (for PRIV_KILL). The helper ends at
 * its socket's EOF, or with the daemon (PR_SET_PDEATHSIG). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devices/net/net_filter.h"
#include "vmm/core/file_open.h"
#include "vmm/core/guest_files.h"
#include "vmm/kvm/kvm.h"
#include "vmm/sandbox/jail.h"
#include "vmm/serve/serve.h"

static void put_err(char *err, size_t cap, const char *msg)
{
	if (cap)
		snprintf(err, cap, "%s", msg);
}

/* "tvs" and 8 lowercase hex digits, NUL-padded: a sandbox's TAP
 * (net_tap_name), never another interface. */
static bool tap_name_ok(const char name[PRIV_NAME_LEN])
{
	if (memcmp(name, "tvs", 3))
		return false;
	for (int i = 3; i < 11; i++)
		if (!hex_lower(name[i]))
			return false;
	for (int i = 11; i < PRIV_NAME_LEN; i++)
		if (name[i])
			return false;
	return true;
}

static bool number(const char *v)
{
	return *v && strlen(v) <= 9 && strspn(v, "0123456789") == strlen(v);
}

/* s is "<state>/sandboxes/sbx_<32 hex>" + tail ("/paused-" takes a
 * generation after it): the id's 32 hex digits into id[33], or false. */
static bool sandbox_path(const struct priv_limits *lim, const char *s, const char *tail, char id[33])
{
	size_t k = strlen(lim->state_dir);

	if (strncmp(s, lim->state_dir, k) || strncmp(s + k, "/sandboxes/sbx_", 15))
		return false;
	s += k + 15;
	for (int i = 0; i < 32; i++)
		if (!hex_lower(s[i]))
			return false;
	memcpy(id, s, 32);
	id[32] = 0;
	s += 32;
	if (!strcmp(tail, "/paused-"))
		return !strncmp(s, tail, 8) && number(s + 8);
	return !strcmp(s, tail);
}

/* "02:" and 5 bytes of lowercase hex, colon-separated (net_mac). */
static bool mac_ok(const char *v)
{
	if (strlen(v) != 17 || strncmp(v, "02:", 3))
		return false;
	for (int i = 3; i < 17; i++)
		if (i % 3 == 2 ? v[i] != ':' : !hex_lower(v[i]))
			return false;
	return true;
}

/* The flags vmm_argv gives, each at most once but the egress values. */
static const char *const once[] = { "--vsock-uds",         "--pause-to",     "--serial-out", "--idle-timeout",
				    "--no-inplace-drives", "--jail",         "--jail-dir",   "--cgroup-parent",
				    "--snapshot",          "--mem",          "--cpus",       "--net",
				    "--net-mac",           "--net-deny-all", "--net-ingress" };
/* once[0..ALWAYS) must each be given; then --jail and --jail-dir when the
 * daemon jails, --cgroup-parent when it has one; the network flags need
 * --net, and --net needs --net-ingress replies (no sandbox is reachable
 * from the host). */
#define ALWAYS 5
#define JAIL_AT 5
#define CGROUP_AT 7
#define NET_AT 11
#define NONCE (sizeof(once) / sizeof(once[0]))

bool net_egress_value_ok(const char *flag, const char *value, unsigned *ndns)
{
	struct tvm_err e = { 0 };
	struct net_rule r;
	struct net_policy p = { 0 };

	if (!strcmp(flag, "--net-dns"))
		return ++*ndns <= TVM_MAX_NET_DNS && !net_policy_add_dns(&p, value, &e);
	return !strcmp(flag, "--net-allow") && !net_rule_parse(value, &r, &e);
}

/* One flag f (value v, NULL: none) of a spawn; id: the sandbox its paths
 * name, set by the first. Whether vmm_argv could have given it. */
static bool spawn_arg_ok(const struct priv_limits *lim, const char *f, const char *v, char id[33], unsigned *ndns)
{
	char other[33], jail_dir[300];

	if (!v)
		return false;
	if (!strcmp(f, "--vsock-uds") || !strcmp(f, "--pause-to") || !strcmp(f, "--snapshot")) {
		if (!sandbox_path(lim, v, f[2] == 'v' ? "/vsock.sock" : "/paused-", other) ||
		    (*id && strcmp(id, other)))
			return false;
		memcpy(id, other, 33);
		return true;
	}
	if (!strcmp(f, "--serial-out"))
		return !strcmp(v, "/dev/null");
	if (!strcmp(f, "--mem")) /* the shapes a create may ask for (serve.h) */
		return number(v) && atoi(v) >= SB_MEM_MIB_MIN && atoi(v) <= SB_MEM_MIB_MAX;
	if (!strcmp(f, "--cpus"))
		return number(v) && atoi(v) >= 1 && atoi(v) <= SB_CPUS_MAX;
	if (!strcmp(f, "--idle-timeout"))
		return number(v);
	if (!strcmp(f, "--cgroup-parent"))
		return lim->cgroup_parent[0] && !strcmp(v, lim->cgroup_parent);
	if (!strcmp(f, "--jail-dir")) {
		snprintf(jail_dir, sizeof(jail_dir), "%s/jail", lim->state_dir);
		return !strcmp(v, jail_dir);
	}
	if (!strcmp(f, "--net")) {
		char tap[PRIV_NAME_LEN] = "";

		if (strlen(v) >= PRIV_NAME_LEN)
			return false;
		memcpy(tap, v, strlen(v));
		return tap_name_ok(tap); /* its sandbox's: checked at the end */
	}
	if (!strcmp(f, "--net-mac"))
		return mac_ok(v);
	if (!strcmp(f, "--net-ingress"))
		return !strcmp(v, "replies");
	if (!strcmp(f, "--net-allow") || !strcmp(f, "--net-dns"))
		return net_egress_value_ok(f, v, ndns);
	return false;
}

/* argv[2..argc) of a spawn (see priv_parse): 0, or -EPERM with err. */
static int spawn_args_ok(const struct priv_limits *lim, const char *const *argv, uint32_t argc, char *err, size_t cap)
{
	unsigned seen[NONCE] = { 0 }, ndns = 0, egress = 0;
	char id[33] = "";
	const char *tap = NULL;

	for (uint32_t i = 2; i < argc; i++) {
		const char *f = argv[i];
		bool flag_only =
			!strcmp(f, "--jail") || !strcmp(f, "--net-deny-all") || !strcmp(f, "--no-inplace-drives");
		size_t k;

		for (k = 0; k < NONCE && strcmp(f, once[k]); k++)
			;
		if (k < NONCE && seen[k]++) {
			snprintf(err, cap, "spawn: %.40s given twice", f);
			return -EPERM;
		}
		if (!flag_only && !spawn_arg_ok(lim, f, i + 1 < argc ? argv[i + 1] : NULL, id, &ndns)) {
			snprintf(err, cap, "spawn: argument %u (%.40s) is not one the daemon gives", i, f);
			return -EPERM;
		}
		if (!strcmp(f, "--net"))
			tap = argv[i + 1];
		egress += !strcmp(f, "--net-allow");
		i += !flag_only;
	}
	for (size_t k = 0; k < NONCE; k++)
		if (!seen[k] && (k < ALWAYS || (lim->jail && (k == JAIL_AT || k == JAIL_AT + 1)) ||
				 (lim->cgroup_parent[0] && k == CGROUP_AT))) {
			snprintf(err, cap, "spawn: %s missing (the daemon always gives it)", once[k]);
			return -EPERM;
		}
	if (!seen[NET_AT] && (seen[NET_AT + 1] || seen[NET_AT + 2] || seen[NET_AT + 3] || ndns || egress)) {
		snprintf(err, cap, "spawn: network flags without --net");
		return -EPERM;
	}
	if (seen[NET_AT] && !seen[NET_AT + 3]) {
		snprintf(err, cap, "spawn: --net without --net-ingress replies (the daemon always gives it)");
		return -EPERM;
	}
	if (tap && strncmp(tap + 3, id, 8)) {
		snprintf(err, cap, "spawn: --net is another sandbox's TAP");
		return -EPERM;
	}
	return 0;
}

/* The argc NUL-terminated strings filling a request's body into m->argv
 * (what names them in an error: "spawn", "kill"): 0 or -EINVAL. */
static int unpack_args(const void *buf, size_t n, const struct priv_head *h, const char *what, struct priv_msg *m,
		       char *err, size_t cap)
{
	const char *p = (const char *)buf + sizeof(*h), *end = (const char *)buf + n;

	for (uint32_t i = 0; i < h->argc; i++) {
		const char *z = memchr(p, 0, (size_t)(end - p));

		if (!z) {
			snprintf(err, cap, "%s: an argument is not NUL-terminated", what);
			return -EINVAL;
		}
		m->argv[i] = p;
		p = z + 1;
	}
	if (p != end) {
		snprintf(err, cap, "%s: bytes after the last argument", what);
		return -EINVAL;
	}
	m->argv[h->argc] = NULL;
	m->argc = h->argc;
	return 0;
}

/* PRIV_KILL's arguments: PID, START (its start time, field 22 of
 * /proc/PID/stat), SIG (SIGTERM, SIGKILL or SIGUSR1: a stop, its end, a
 * pause) and the sandbox's socket (<state>/sandboxes/sbx_<id>/vsock.sock).
 * 0 or -EPERM. Whether that pid is the VMM is the helper's look, then. */
static int kill_args_ok(const struct priv_limits *lim, const struct priv_msg *m, char *err, size_t cap)
{
	char id[33];
	const char *sig = m->argv[2];

	if (m->argc != 4 || !number(m->argv[0]) || atoi(m->argv[0]) <= 0 || !*m->argv[1] || strlen(m->argv[1]) > 20 ||
	    strspn(m->argv[1], "0123456789") != strlen(m->argv[1]) || !strcmp(m->argv[1], "0") || !number(sig) ||
	    (atoi(sig) != SIGTERM && atoi(sig) != SIGKILL && atoi(sig) != SIGUSR1) ||
	    !sandbox_path(lim, m->argv[3], "/vsock.sock", id)) {
		put_err(err, cap, "kill: PID START SIG (TERM, KILL or USR1) and a sandbox's socket are expected");
		return -EPERM;
	}
	return 0;
}

int priv_parse(const void *buf, size_t n, unsigned nfds, const struct priv_limits *lim, struct priv_msg *m, char *err,
	       size_t cap)
{
	const struct priv_head *h = buf;
	uint32_t mask;
	int r;

	memset(m, 0, sizeof(*m));
	if (n < sizeof(*h)) {
		put_err(err, cap, "request shorter than its head");
		return -EINVAL;
	}
	m->op = h->op;
	m->host = h->host;
	memcpy(m->name, h->name, PRIV_NAME_LEN);
	if (h->op != PRIV_SPAWN && h->op != PRIV_KILL && (n != sizeof(*h) || nfds)) {
		put_err(err, cap, "request with a body or a file it does not take");
		return -EINVAL;
	}
	switch (h->op) {
	case PRIV_SPAWN:
		if (nfds != 1) {
			put_err(err, cap, "spawn: exactly one file (the VMM's log) is expected");
			return -EINVAL;
		}
		if (h->argc < 2 || h->argc > PRIV_MAX_ARGS) {
			put_err(err, cap, "spawn: argument count out of range");
			return -EINVAL;
		}
		if ((r = unpack_args(buf, n, h, "spawn", m, err, cap)))
			return r;
		if (strcmp(m->argv[0], lim->exe) || strcmp(m->argv[1], "run")) {
			put_err(err, cap, "spawn: only this binary's `run` is started");
			return -EPERM;
		}
		return spawn_args_ok(lim, m->argv, m->argc, err, cap);
	case PRIV_KILL:
		if (nfds || h->argc != 4) {
			put_err(err, cap, "kill: four arguments and no file are expected");
			return -EINVAL;
		}
		if ((r = unpack_args(buf, n, h, "kill", m, err, cap)))
			return r;
		return kill_args_ok(lim, m, err, cap);
	case PRIV_TAP_UP:
		mask = ~0u << (32 - lim->net_prefix);
		if (!tap_name_ok(h->name) || (h->host & mask) != lim->net_base || (h->host & 3u) != 1) {
			put_err(err, cap, "tap: not a sandbox's TAP, or its address is outside net_range");
			return -EPERM;
		}
		return 0;
	case PRIV_TAP_DOWN:
		if (!tap_name_ok(h->name)) {
			put_err(err, cap, "tap: not a sandbox's TAP");
			return -EPERM;
		}
		return 0;
	case PRIV_ADDRS:
	case PRIV_HOST:
	case PRIV_SOCKET_BOUND:
	case PRIV_SOCKET_GONE: return 0;
	default: put_err(err, cap, "unknown request"); return -EINVAL;
	}
}

/* The directories a spawn's paths go through beneath the state dir
 * (sandboxes, the sandbox's, the snapshot it resumes from) are real ones,
 * not symlinks: the root VMM would follow one out of the state dir. The
 * confined daemon cannot make a symlink (Landlock), so this looks at what
 * someone else (root) may have put there. 0 or -EPERM with err. */
static int spawn_dirs_real(const struct priv_limits *lim, const struct priv_msg *m, char *err, size_t cap)
{
	char path[sizeof(lim->state_dir) + 64];
	struct stat st;

	for (uint32_t i = 2; i + 1 < m->argc; i++) {
		const char *v = m->argv[i + 1];
		size_t base = strlen(lim->state_dir), sbx = base + 15 + 32; /* "/sandboxes/sbx_" + id */
		bool snap = !strcmp(m->argv[i], "--snapshot");

		if (strcmp(m->argv[i], "--vsock-uds") && !snap)
			continue;
		/* priv_parse made v <state>/sandboxes/sbx_<id>/..., so the
		 * prefixes below are whole components */
		size_t ends[] = { base + 10, sbx, snap ? strlen(v) : 0 };
		for (size_t k = 0; k < 3 && ends[k]; k++) {
			snprintf(path, sizeof(path), "%.*s", (int)ends[k], v);
			if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
				snprintf(err, cap, "spawn: %.150s is not a directory of the daemon's", path);
				return -EPERM;
			}
		}
	}
	return 0;
}

/* The VMM, as the daemon's child: its own session (a ^C to the daemon's
 * terminal is not one to the sandboxes, which outlive a daemon restart),
 * no signal blocked, stdin /dev/null, stdout and stderr its log. */
static int spawn(const struct priv_msg *m, int logfd, int exe)
{
	sigset_t all, old;
	long pid;

	/* Until its exec the child runs the helper's code with the helper's
	 * signal handlers (those of whatever forked it: a test runner's
	 * SIGTERM handler signals its process group): a signal sent to it
	 * meanwhile (a stop right after the spawn) waits until they are the
	 * defaults, then does what it does to a VMM. */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	pid = syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, NULL, NULL, 0);
	if (pid == 0) {
		struct sigaction dfl = { .sa_handler = SIG_DFL };
		sigset_t none;
		int null = open("/dev/null", O_RDONLY);

		for (int sig = 1; sig < NSIG; sig++)
			sigaction(sig, &dfl, NULL); /* SIGKILL and SIGSTOP refuse: theirs already */
		setsid();
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		dup2(null, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		close_range(3, ~0u, CLOSE_RANGE_CLOEXEC); /* exe among them: gone at the exec */
		execveat(exe, "", (char *const *)m->argv, environ, AT_EMPTY_PATH);
		_exit(127);
	}
	if (pid < 0)
		pid = -errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	return (int)pid;
}

static void answer(int fd, const struct priv_reply *rep)
{
	size_t len = offsetof(struct priv_reply, addrs);

	if (rep->r > 0 && rep->op == PRIV_ADDRS)
		len += (size_t)rep->r * sizeof(rep->addrs[0]);
	if (send(fd, rep, len, MSG_NOSIGNAL) < 0) {
		/* the daemon is gone: the next recvmsg sees its EOF */
	}
}

bool vmm_cmdline_is(pid_t pid, const char *uds)
{
	/* vmm_argv's head: EXE, "run", "--vsock-uds", its socket (EXE is not
	 * compared: the daemon's binary may have been replaced since) */
	const char *want[3] = { "run", "--vsock-uds", uds };
	char path[64], cmd[8192];
	const char *a, *end;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	n = file_read_small(AT_FDCWD, path, 0, cmd, sizeof(cmd));
	end = cmd + (n > 0 ? n : 0);
	a = cmd + strnlen(cmd, (size_t)(end - cmd)) + 1; /* argv[1] */
	for (int i = 0; i < 3; i++) {
		/* whole (its NUL before the end read) and equal */
		if (a >= end || strnlen(a, (size_t)(end - a)) == (size_t)(end - a) || strcmp(a, want[i]))
			return false;
		a += strlen(a) + 1;
	}
	return true;
}

/* Field 4 of /proc/PID/stat (after the command's ')'), or -1. */
static pid_t proc_ppid(pid_t pid)
{
	char buf[1024], *p;
	int ppid;

	if (jail_pid_stat(pid, buf, sizeof(buf)) <= 0 || !(p = strrchr(buf, ')')) ||
	    sscanf(p + 1, " %*c %d", &ppid) != 1)
		return -1;
	return ppid;
}

/* The VMMs this helper started, for PRIV_KILL's first rule: being the
 * daemon's child is not enough (a daemon that is a PID namespace's init,
 * or a subreaper, adopts every orphan; a launcher's children came
 * before). The last SPAWNED_MAX, by pid and start time. */
#define SPAWNED_MAX 4096
static struct {
	pid_t pid;
	unsigned long long start;
} spawned[SPAWNED_MAX];
static unsigned nspawned;

static void spawned_add(pid_t pid)
{
	unsigned long long start = 0;

	jail_pid_start(pid, &start);
	spawned[nspawned % SPAWNED_MAX].pid = pid;
	spawned[nspawned % SPAWNED_MAX].start = start;
	nspawned++;
}

static bool spawned_has(pid_t pid, unsigned long long start)
{
	for (unsigned i = 0; i < SPAWNED_MAX && i < nspawned; i++)
		if (spawned[i].pid == pid && spawned[i].start == start)
			return true;
	return false;
}

/* PRIV_KILL: the signal goes to that process only if it is a VMM of the
 * daemon: it has the start time given, and this helper started it (with
 * CLONE_PARENT: the daemon's child still) or its command line is that
 * sandbox's VMM's (a previous daemon's, re-adopted). Held by a pidfd
 * from before the look: a pid reused in between is another process,
 * which the look refuses, and the pidfd never reaches. */
static int vmm_kill(const struct priv_msg *m, char *err, size_t cap)
{
	pid_t pid = atoi(m->argv[0]);
	unsigned long long start = strtoull(m->argv[1], NULL, 10), now = 0;
	int sig = atoi(m->argv[2]), pfd = (int)syscall(SYS_pidfd_open, pid, 0), r = 0;

	/* A kernel without pidfds (before 5.3): the looks, then kill() */
	if (pfd < 0 && errno != ENOSYS)
		return -errno;
	if (jail_pid_start(pid, &now) || now != start ||
	    !((spawned_has(pid, start) && proc_ppid(pid) == getppid()) || vmm_cmdline_is(pid, m->argv[3]))) {
		snprintf(err, cap, "kill: pid %d is not that sandbox's VMM", (int)pid);
		r = -EPERM;
	} else if ((pfd >= 0 ? syscall(SYS_pidfd_send_signal, pfd, sig, NULL, 0) : kill(pid, sig)) < 0) {
		r = -errno;
	}
	if (pfd >= 0)
		close(pfd);
	return r;
}

/* The daemon's listening socket as the helper saw it once bound. */
struct bound_socket {
	bool bound, gone;
	struct stat st;
};

/* PRIV_SOCKET_BOUND, sent once, before the daemon reads a client's byte:
 * the socket at the path is the daemon's; its inode is kept. */
static int socket_bound(const struct priv_limits *lim, struct bound_socket *b)
{
	if (b->bound)
		return -EALREADY;
	b->bound = true;
	if (lstat(lim->socket_path, &b->st) < 0)
		return -errno;
	return S_ISSOCK(b->st.st_mode) ? 0 : -ENOTSOCK;
}

/* exe: the daemon's own binary (lim->exe, its /proc/self/exe at start,
 * opened O_PATH before any client), what every spawn executes: a file put
 * at its path later is never run. */
/* PRIV_HOST, as the VMMs it starts will find the host (its environment
 * and binary are the daemon's). */
static int host_look(char *looked, size_t cap)
{
	int r = access("/dev/kvm", R_OK | W_OK) < 0 ? errno : 0;

	if (r >= PRIV_HOST_NO_GUEST)
		r = EIO;
	if (guest_files_found(looked, cap))
		r |= PRIV_HOST_NO_GUEST;
	return r;
}

static void __attribute__((noreturn)) helper_main(int fd, int exe, const struct priv_limits *lim)
{
	static struct bound_socket sock;
	static char buf[PRIV_MAX_MSG];
	static struct priv_msg m;
	static struct priv_reply rep;

	for (;;) {
		union {
			char b[CMSG_SPACE(sizeof(int) * 8)];
			struct cmsghdr align;
		} cm;
		struct iovec iov = { buf, sizeof(buf) };
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)
		};
		int fds[8];
		unsigned nfds = 0;
		ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

		if (n == 0) { /* the daemon's end closed, or an empty request */
			struct pollfd pf = { .fd = fd, .events = POLLIN };

			if (poll(&pf, 1, 0) == 1 && (pf.revents & POLLHUP))
				_exit(0);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			_exit(1);
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) && nfds < 8; i++)
				memcpy(&fds[nfds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		}
		memset(&rep, 0, offsetof(struct priv_reply, addrs));
		rep.op = n >= (ssize_t)sizeof(uint32_t) ? ((const struct priv_head *)buf)->op : 0;
		if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
			rep.r = -E2BIG;
			put_err(rep.err, sizeof(rep.err), "request too large");
		} else if ((rep.r = priv_parse(buf, (size_t)n, nfds, lim, &m, rep.err, sizeof(rep.err))) == 0) {
			switch (m.op) {
			case PRIV_SPAWN: {
				struct stat st;

				/* a log file, not a socket or a device to hand a VMM */
				if (fstat(fds[0], &st) < 0 || !S_ISREG(st.st_mode)) {
					rep.r = -EINVAL;
					put_err(rep.err, sizeof(rep.err), "spawn: the log is not a regular file");
				} else if ((rep.r = spawn_dirs_real(lim, &m, rep.err, sizeof(rep.err)))) {
					/* said */
				} else if ((rep.r = spawn(&m, fds[0], exe)) < 0) {
					snprintf(rep.err, sizeof(rep.err), "fork: %s", strerror(-rep.r));
				} else {
					spawned_add(rep.r);
				}
				break;
			}
			case PRIV_TAP_UP: rep.r = net_tap_up(m.name, m.host, rep.err, sizeof(rep.err)); break;
			case PRIV_TAP_DOWN: rep.r = net_tap_down(m.name); break;
			case PRIV_ADDRS: rep.r = net_host_addrs(rep.addrs, PRIV_MAX_ADDRS); break;
			case PRIV_SOCKET_BOUND: rep.r = socket_bound(lim, &sock); break;
			case PRIV_KILL: rep.r = vmm_kill(&m, rep.err, sizeof(rep.err)); break;
			case PRIV_HOST: rep.r = host_look(rep.err, sizeof(rep.err)); break;
			case PRIV_SOCKET_GONE:
				/* once, and only the socket bound: never a
				 * successor's, nor one put at the path since */
				if (!sock.bound || sock.gone) {
					rep.r = -EPERM;
				} else {
					sock.gone = true;
					rep.r = srv_socket_stale_remove(lim->socket_path, &sock.st);
				}
				if (rep.r < 0)
					snprintf(rep.err, sizeof(rep.err), "%.100s: %s", lim->socket_path,
						 strerror(-rep.r));
				break;
			}
		}
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]);
		answer(fd, &rep);
	}
}

int priv_start(struct srv *s)
{
	struct priv_limits lim = { .net_base = s->cfg.net_base,
				   .net_prefix = s->cfg.net_prefix,
				   .jail = s->cfg.jail == 1 || (s->cfg.jail < 0 && geteuid() == 0) };
	pid_t daemon = getpid(), pid;
	int sv[2];

	snprintf(lim.exe, sizeof(lim.exe), "%s", s->cfg.exe);
	snprintf(lim.state_dir, sizeof(lim.state_dir), "%s", s->cfg.state_dir);
	snprintf(lim.cgroup_parent, sizeof(lim.cgroup_parent), "%s", s->cfg.cgroup_parent);
	snprintf(lim.socket_path, sizeof(lim.socket_path), "%s", s->cfg.socket_path);
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		int err = errno;

		close(sv[0]);
		close(sv[1]);
		return -err;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		/* Nothing of the daemon's but its stderr: no listening
		 * socket, no state lock (a helper must not keep either). */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != daemon || null < 0 || dup2(null, 0) < 0 ||
		    dup2(null, 1) < 0 || dup3(sv[1], 3, O_CLOEXEC) < 0 ||
		    dup3(open(lim.exe, O_PATH | O_CLOEXEC), 4, O_CLOEXEC) < 0)
			_exit(1);
		close_range(5, ~0u, 0);
		setsid();
		prctl(PR_SET_NAME, "tinyvmm-priv");
		helper_main(3, 4, &lim);
	}
	close(sv[1]);
	s->priv.fd = sv[0];
	s->priv.pid = pid;
	pthread_mutex_init(&s->priv.mu, NULL);
	pthread_mutex_init(&s->priv.host_mu, NULL);
	return priv_host(s);
}

/* The channel is given up (the helper gone, or stuck past PRIV_TIMEOUT_MS):
 * no request goes to it again (the supervisor then stops the daemon).
 * Under priv.mu. */
static void give_up_locked(struct srv *s)
{
	if (s->priv.fd >= 0) {
		close(s->priv.fd);
		__atomic_store_n(&s->priv.fd, -1, __ATOMIC_RELEASE);
	}
}

void priv_stop(struct srv *s)
{
	pthread_mutex_lock(&s->priv.mu);
	give_up_locked(s);
	pthread_mutex_unlock(&s->priv.mu);
	/* Its EOF ends it. One stopped or stuck is left to its death
	 * signal (PR_SET_PDEATHSIG), sent when the daemon's main thread
	 * ends: the daemon may signal nothing itself. */
	for (int i = 0; i < 200 && !s->priv.reaped; i++) {
		pid_t w = waitpid(s->priv.pid, NULL, WNOHANG);

		if (w == s->priv.pid || (w < 0 && errno != EINTR))
			s->priv.reaped = true;
		else
			usleep(10000);
	}
	s->priv.reaped = true;
}

bool priv_alive(struct srv *s)
{
	/* The supervisor and a health request may both look: one reaps it,
	 * the other's waitpid fails; reaped is set with atomics. */
	if (!__atomic_load_n(&s->priv.reaped, __ATOMIC_ACQUIRE) && waitpid(s->priv.pid, NULL, WNOHANG) == s->priv.pid)
		__atomic_store_n(&s->priv.reaped, true, __ATOMIC_RELEASE);
	return !__atomic_load_n(&s->priv.reaped, __ATOMIC_ACQUIRE) &&
	       __atomic_load_n(&s->priv.fd, __ATOMIC_ACQUIRE) >= 0;
}

unsigned srv_problems(struct srv *s, char p[SRV_PROBLEMS][SRV_PROBLEM_LEN], bool guest)
{
	char looked[2 * PATH_MAX + 8];
	unsigned n = 0;

	int kvm;
	bool no_guest;

	/* as the helper last saw the host (priv_host): the daemon's view
	 * shows neither /dev nor the guest */
	pthread_mutex_lock(&s->priv.host_mu);
	kvm = s->priv.kvm_errno;
	no_guest = s->priv.no_guest;
	snprintf(looked, sizeof(looked), "%s", s->priv.looked);
	pthread_mutex_unlock(&s->priv.host_mu);
	if (kvm)
		snprintf(p[n++], SRV_PROBLEM_LEN, "/dev/kvm: %s: no sandbox can start%s", strerror(kvm),
			 kvm_open_hint(kvm));
	if (!priv_alive(s))
		snprintf(p[n++], SRV_PROBLEM_LEN,
			 "the daemon's privileged helper is gone: no sandbox can start (restart the daemon)");
	if (guest && no_guest)
		snprintf(p[n++], SRV_PROBLEM_LEN,
			 "no guest kernel and base image in %.200s: no sandbox of the default template can start "
			 "(tinyvmm serve's VMMs take the guest from $TINYVMM_DATA_DIR)",
			 looked);
	return n;
}

/* One request (with fd, -1: none) and its answer. rep->r, or -EPIPE when
 * the helper is gone. */
static int call(struct srv *s, const void *req, size_t len, int fd, struct priv_reply *rep)
{
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { (void *)req, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	pthread_mutex_lock(&s->priv.mu);
	n = -1;
	if (s->priv.fd >= 0) {
		struct pollfd pf = { .fd = s->priv.fd, .events = POLLIN };
		int r;

		do
			n = sendmsg(s->priv.fd, &mh, MSG_NOSIGNAL);
		while (n < 0 && errno == EINTR);
		/* Every request is quick (a fork, a TAP's ioctls): a helper
		 * that does not answer is stuck or stopped, and is given up
		 * rather than hold every caller (some hold srv.mu). */
		do
			r = n == (ssize_t)len ? poll(&pf, 1, PRIV_TIMEOUT_MS) : -1;
		while (r < 0 && errno == EINTR);
		n = r == 1 ? recv(s->priv.fd, rep, sizeof(*rep), MSG_DONTWAIT) : -1;
		if (r == 0)
			give_up_locked(s);
	}
	pthread_mutex_unlock(&s->priv.mu);
	if (n < (ssize_t)offsetof(struct priv_reply, addrs) ||
	    (rep->r > 0 && rep->op == PRIV_ADDRS &&
	     (rep->r > PRIV_MAX_ADDRS ||
	      (size_t)n != offsetof(struct priv_reply, addrs) + (size_t)rep->r * sizeof(rep->addrs[0])))) {
		snprintf(rep->err, sizeof(rep->err), "the daemon's privileged helper is gone");
		return rep->r = -EPIPE;
	}
	rep->err[sizeof(rep->err) - 1] = 0;
	return rep->r;
}

/* A request of op with argv (NULL-terminated) packed after its head, and
 * fd (-1: none): its answer, as call. */
static int call_args(struct srv *s, uint32_t op, const char *const argv[], int fd, struct priv_reply *rep)
{
	struct priv_head h = { .op = op };
	size_t len = sizeof(h);
	char *req;
	int r;

	for (h.argc = 0; argv[h.argc]; h.argc++)
		len += strlen(argv[h.argc]) + 1;
	if (len > PRIV_MAX_MSG || !(req = malloc(len))) {
		put_err(rep->err, sizeof(rep->err), "arguments too long");
		return rep->r = -E2BIG;
	}
	memcpy(req, &h, sizeof(h));
	len = sizeof(h);
	for (uint32_t i = 0; i < h.argc; i++) {
		size_t k = strlen(argv[i]) + 1;

		memcpy(req + len, argv[i], k);
		len += k;
	}
	r = call(s, req, len, fd, rep);
	free(req);
	return r;
}

/* A request that is its head alone: its answer's r. */
static int call_op(struct srv *s, uint32_t op)
{
	struct priv_head h = { .op = op };
	struct priv_reply rep;

	return call(s, &h, sizeof(h), -1, &rep);
}

pid_t priv_spawn(struct srv *s, char *const argv[], int logfd, char *err, size_t cap)
{
	struct priv_reply rep;
	int r = call_args(s, PRIV_SPAWN, (const char *const *)argv, logfd, &rep);

	if (r < 0)
		put_err(err, cap, rep.err);
	return r;
}

int priv_tap_up(struct srv *s, const char *name, uint32_t host, char *err, size_t cap)
{
	struct priv_head h = { .op = PRIV_TAP_UP, .host = host };
	struct priv_reply rep;
	int r;

	memcpy(h.name, name, strnlen(name, PRIV_NAME_LEN - 1));
	r = call(s, &h, sizeof(h), -1, &rep);
	if (r < 0)
		put_err(err, cap, rep.err);
	return r;
}

int priv_tap_down(struct srv *s, const char *name)
{
	struct priv_head h = { .op = PRIV_TAP_DOWN };
	struct priv_reply rep;

	memcpy(h.name, name, strnlen(name, PRIV_NAME_LEN - 1));
	return call(s, &h, sizeof(h), -1, &rep);
}

int srv_socket_stale_remove(const char *path, const struct stat *bound)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, r = 0;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	/* Not the one bound: a successor's (an inode number freed may be
	 * used again; its change time, set by its bind and chmod, differs). */
	if (bound && (st.st_dev != bound->st_dev || st.st_ino != bound->st_ino ||
		      st.st_ctim.tv_sec != bound->st_ctim.tv_sec || st.st_ctim.tv_nsec != bound->st_ctim.tv_nsec))
		return -ESTALE;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	/* Only a refusal says nobody listens: a full backlog (EAGAIN) is
	 * someone, and a socket of another kind (EPROTOTYPE, a datagram
	 * one's) is another service's. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN)
		r = -EADDRINUSE;
	else if (errno != ECONNREFUSED)
		r = -errno;
	else if (unlink(path) < 0 && errno != ENOENT)
		r = -errno;
	close(fd);
	return r;
}

int priv_socket_bound(struct srv *s)
{
	return call_op(s, PRIV_SOCKET_BOUND);
}

int priv_kill(struct srv *s, const struct sandbox *sb, int sig)
{
	char pid[16], start[24], signo[8];
	const char *argv[] = { pid, start, signo, sb->uds, NULL };
	struct priv_reply rep;

	snprintf(pid, sizeof(pid), "%d", (int)sb->pid);
	snprintf(start, sizeof(start), "%llu", sb->pid_start);
	snprintf(signo, sizeof(signo), "%d", sig);
	return call_args(s, PRIV_KILL, argv, -1, &rep);
}

int priv_socket_gone(struct srv *s)
{
	return call_op(s, PRIV_SOCKET_GONE);
}

int priv_host(struct srv *s)
{
	struct priv_head h = { .op = PRIV_HOST };
	struct priv_reply rep;
	int r = call(s, &h, sizeof(h), -1, &rep);

	if (r < 0)
		return r;
	pthread_mutex_lock(&s->priv.host_mu);
	s->priv.kvm_errno = r & (PRIV_HOST_NO_GUEST - 1);
	s->priv.no_guest = r & PRIV_HOST_NO_GUEST;
	snprintf(s->priv.looked, sizeof(s->priv.looked), "%s", rep.err);
	pthread_mutex_unlock(&s->priv.host_mu);
	return 0;
}

int priv_addrs(struct srv *s, uint32_t *out, size_t cap)
{
	struct priv_head h = { .op = PRIV_ADDRS };
	struct priv_reply rep;
	int r = call(s, &h, sizeof(h), -1, &rep);

	if (r < 0)
		return r;
	if ((size_t)r > cap)
		r = (int)cap;
	memcpy(out, rep.addrs, (size_t)r * sizeof(*out));
	return r;
}
