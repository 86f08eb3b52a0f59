/* The seccomp filters of vmm/sandbox: every case runs in a forked child
 * that confines itself and then makes calls; the parent reads how it
 * ended (exit status 0: every call was let through; SIGSYS: killed). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/kvm.h>
#include <linux/seccomp.h>

#include "tests/test_confine.h"
#include "tests/unit.h"
#include "vmm/sandbox/seccomp.h"
#include "vmm/snapshot/snapshot_io.h"

#define ALL_F (SC_F_UDS | SC_F_NET)
#define X32_BIT 0x40000000L

/* Which call a child was making when it ended (shared with the parent). */
static volatile long *progress;

static void setup(void)
{
	progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne((void *)progress, MAP_FAILED);
}

static void teardown(void)
{
	munmap((void *)progress, 4096);
}

typedef void (*child_fn)(const void *arg);

/* Fork; the child confines itself as role (mode, log_fd) and runs fn. The
 * child's wait status. No core files: SIGSYS would write one. */
static int run_confined(enum sc_role role, unsigned features, enum tvm_seccomp mode, int log_fd, child_fn fn,
			const void *arg)
{
	int status;
	pid_t pid;

	*progress = -1;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		confine_child(role, features, mode, log_fd);
		fn(arg);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return status;
}

static int killed_by_sigsys(int status)
{
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS;
}

static int exited_ok(int status)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A call with every argument -1 (bad fd, bad pointer, bad size: it fails
 * harmlessly) but arg a set to v. */
static long call_with(long nr, int a, long v)
{
	long args[6] = { -1, -1, -1, -1, -1, -1 };

	if (a >= 0)
		args[a] = v;
	return syscall(nr, args[0], args[1], args[2], args[3], args[4], args[5]);
}

static int never_called(long nr)
{
	/* They end the child or return into nowhere; the child's own
	 * _exit() (exit_group) is the one call every case makes. */
	return nr == __NR_exit || nr == __NR_exit_group || nr == __NR_rt_sigreturn;
}

struct role_case {
	enum sc_role role;
	unsigned features;
};

static struct sc_rule rules[SC_MAX_RULES];

static int load_rules(struct role_case rc)
{
	struct tvm_err e = { 0 };
	int n = sc_rules(rc.role, rc.features, rules, SC_MAX_RULES, &e);

	ck_assert_msg(n > 0, "%s: %s", sc_role_name(rc.role), e.msg);
	return n;
}

static int allows(int n, long nr)
{
	for (int i = 0; i < n; i++)
		if (rules[i].nr == nr)
			return 1;
	return 0;
}

/* Every allowed call with every allowed value of its checked argument;
 * an SC_ERRNO rule must fail with its errno (exit 3 otherwise). */
static void make_allowed_calls(const void *arg)
{
	int n = *(const int *)arg;

	for (int i = 0; i < n; i++) {
		const struct sc_rule *r = &rules[i];

		*progress = r->nr;
		if (never_called(r->nr))
			continue;
		switch (r->kind) {
		case SC_ALLOW: call_with(r->nr, -1, 0); break;
		case SC_IN:
			for (unsigned v = 0; v < r->nval; v++)
				call_with(r->nr, r->arg, r->val[v]);
			break;
		case SC_NOBITS: call_with(r->nr, r->arg, 0); break;
		case SC_BITS: call_with(r->nr, r->arg, r->val[0]); break;
		case SC_ERRNO:
			if (call_with(r->nr, -1, 0) != -1 || errno != (int)r->val[0])
				_exit(3);
			break;
		}
	}
	*progress = -1;
}

static const struct role_case every_role[] = {
	{ SC_VCPU, 0 },    { SC_VCPU, ALL_F }, { SC_EVLOOP, 0 },     { SC_EVLOOP, ALL_F }, { SC_SERIAL, 0 },
	{ SC_SIGNALS, 0 }, { SC_MAIN, 0 },     { SC_MAIN, ALL_F },   { SC_SNAPSHOT, 0 },   { SC_SNAPSHOT, ALL_F },
	{ SC_EXEC, 0 },    { SC_PAUSER, 0 },   { SC_PAUSER, ALL_F }, { SC_DAEMON, 0 },
};

START_TEST(allowed_calls_pass)
{
	struct role_case rc = every_role[_i];
	int n = load_rules(rc);
	int status = run_confined(rc.role, rc.features, TVM_SECCOMP_KILL, -1, make_allowed_calls, &n);
	const char *name = sc_syscall_name(*progress);

	ck_assert_msg(exited_ok(status), "%s (features %u): status 0x%x during %s (%ld)", sc_role_name(rc.role),
		      rc.features, status, name ? name : "?", *progress);
}
END_TEST

/* A value of arg that the rule refuses: not in the list, or with (SC_NOBITS)
 * or without (SC_BITS) its bits. */
static long perturbed(const struct sc_rule *r)
{
	uint32_t v = r->val[0] + 1;

	if (r->kind == SC_NOBITS)
		return r->val[0];
	if (r->kind == SC_BITS)
		return 0;
	for (unsigned i = 0; i < r->nval; i++)
		if (r->val[i] == v) {
			v++;
			i = (unsigned)-1;
		}
	return v;
}

static void make_perturbed_call(const void *arg)
{
	const struct sc_rule *r = arg;

	call_with(r->nr, r->arg, perturbed(r));
}

START_TEST(perturbed_arguments_kill)
{
	struct role_case rc = every_role[_i];
	int n = load_rules(rc), checked = 0;

	for (int i = 0; i < n; i++) {
		struct sc_rule r = rules[i];
		int status;

		if (r.kind == SC_ALLOW || r.kind == SC_ERRNO)
			continue;
		status = run_confined(rc.role, rc.features, TVM_SECCOMP_KILL, -1, make_perturbed_call, &r);
		ck_assert_msg(killed_by_sigsys(status), "%s: %s with arg %u = 0x%lx: status 0x%x",
			      sc_role_name(rc.role), sc_syscall_name(r.nr), r.arg, perturbed(&r), status);
		checked++;
	}
	ck_assert_int_gt(checked, 0); /* every role checks some argument (mmap's PROT_EXEC at least) */
}
END_TEST

static void make_call(const void *arg)
{
	call_with(*(const long *)arg, -1, 0);
}

/* Every named call the role does not allow kills (with bad arguments: the
 * filter looks at the number first). */
START_TEST(forbidden_calls_kill)
{
	struct role_case rc = every_role[_i];
	int n = load_rules(rc), checked = 0;

	for (long nr = 0; nr < 512; nr++) {
		int status;

		if (!sc_syscall_name(nr) || allows(n, nr))
			continue;
		status = run_confined(rc.role, rc.features, TVM_SECCOMP_KILL, -1, make_call, &nr);
		ck_assert_msg(killed_by_sigsys(status), "%s: %s (%ld) was let through: status 0x%x",
			      sc_role_name(rc.role), sc_syscall_name(nr), nr, status);
		checked++;
	}
	ck_assert_int_gt(checked, 40);
}
END_TEST

/* What no role may do, whatever the tables say. */
START_TEST(no_role_execs_forks_or_opens_where_it_opens_nothing)
{
	struct role_case rc = every_role[_i];
	int n = load_rules(rc);
	int opens = rc.role == SC_MAIN || rc.role == SC_SNAPSHOT || rc.role == SC_EXEC || rc.role == SC_PAUSER ||
		    rc.role == SC_DAEMON;

	ck_assert(!allows(n, __NR_execve) && !allows(n, __NR_execveat));
	ck_assert(!allows(n, __NR_fork) && !allows(n, __NR_vfork) && !allows(n, __NR_ptrace));
	ck_assert(!allows(n, __NR_open) && !allows(n, __NR_openat2) && !allows(n, __NR_creat));
	ck_assert_int_eq(allows(n, __NR_openat), opens);
	/* Threads are made only where the event loop is restarted, and by
	 * the daemon (a thread per connection and per exec). */
	ck_assert_int_eq(allows(n, __NR_clone), rc.role == SC_SNAPSHOT || rc.role == SC_PAUSER || rc.role == SC_DAEMON);
	/* What the daemon leaves to its privileged helper. */
	if (rc.role == SC_DAEMON)
		ck_assert(!allows(n, __NR_ioctl) && !allows(n, __NR_bind) && !allows(n, __NR_listen) &&
			  !allows(n, __NR_mount) && !allows(n, __NR_unshare) && !allows(n, __NR_setns) &&
			  !allows(n, __NR_socketpair) && !allows(n, __NR_prctl) && !allows(n, __NR_seccomp));
}
END_TEST

static void socket_inet(const void *arg)
{
	(void)arg;
	socket(AF_INET, SOCK_STREAM, 0);
}

static void socket_unix(const void *arg)
{
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	(void)arg;
	_exit(fd >= 0 ? 0 : 4);
}

static void socket_netlink(const void *arg)
{
	(void)arg;
	socket(AF_NETLINK, SOCK_RAW, 0);
}

START_TEST(sockets_are_unix_only)
{
	/* The event loop dials uds_path_PORT only with a hybrid socket. */
	ck_assert(exited_ok(run_confined(SC_EVLOOP, SC_F_UDS, TVM_SECCOMP_KILL, -1, socket_unix, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_EVLOOP, SC_F_UDS, TVM_SECCOMP_KILL, -1, socket_inet, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_EVLOOP, 0, TVM_SECCOMP_KILL, -1, socket_unix, NULL)));
	ck_assert(exited_ok(run_confined(SC_EXEC, 0, TVM_SECCOMP_KILL, -1, socket_unix, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_EXEC, 0, TVM_SECCOMP_KILL, -1, socket_inet, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_VCPU, ALL_F, TVM_SECCOMP_KILL, -1, socket_unix, NULL)));
	/* The daemon: no netlink, no packet socket either (its helper lists
	 * the host's addresses and makes the TAPs). */
	ck_assert(exited_ok(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, socket_unix, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, socket_inet, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, socket_netlink, NULL)));
}
END_TEST

static void fork_by_clone(const void *arg)
{
	(void)arg;
	/* A fork: were it let through, both processes exit 0 here. */
	syscall(__NR_clone, SIGCHLD, 0, 0, 0, 0);
}

static void thread_flag_only(const void *arg)
{
	(void)arg;
	/* Not pthread_create's flag set: were it let through, the kernel
	 * would refuse it (EINVAL) and the child exit 0. */
	syscall(__NR_clone, CLONE_THREAD, 0, 0, 0, 0);
}

static void thread_in_new_namespaces(const void *arg)
{
	(void)arg;
	syscall(__NR_clone,
		CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM | CLONE_NEWNS |
			CLONE_NEWNET,
		0, 0, 0, 0);
}

static void *thread_body(void *arg)
{
	return arg;
}

/* A real thread, as the event loop's restart makes one (clone3 first,
 * ENOSYS, then clone). */
static void pthread_thread(const void *arg)
{
	pthread_t t;

	(void)arg;
	if (pthread_create(&t, NULL, thread_body, NULL) || pthread_join(t, NULL))
		_exit(4);
}

static void clone3_call(const void *arg)
{
	(void)arg;
	if (syscall(__NR_clone3, NULL, 0) != -1 || errno != ENOSYS)
		_exit(4);
}

/* snapshot create --out an existing directory (a jail's stage is one):
 * it is listed to see that it holds nothing else. */
static void snapshot_into_existing_dir(const void *arg)
{
	struct tvm_err e = { 0 };

	if (snap_mkdir(arg, &e))
		_exit(4);
}

START_TEST(snapshot_lists_an_existing_output_dir)
{
	char dir[] = "/tmp/tvm-seccomp-XXXXXX";

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert(exited_ok(run_confined(SC_SNAPSHOT, 0, TVM_SECCOMP_KILL, -1, snapshot_into_existing_dir, dir)));
	/* main never writes a snapshot */
	ck_assert(
		killed_by_sigsys(run_confined(SC_MAIN, ALL_F, TVM_SECCOMP_KILL, -1, snapshot_into_existing_dir, dir)));
	rmdir(dir);
}
END_TEST

START_TEST(threads_only_where_the_event_loop_restarts)
{
	ck_assert(killed_by_sigsys(run_confined(SC_SNAPSHOT, 0, TVM_SECCOMP_KILL, -1, fork_by_clone, NULL)));
	ck_assert(exited_ok(run_confined(SC_SNAPSHOT, 0, TVM_SECCOMP_KILL, -1, pthread_thread, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_SNAPSHOT, 0, TVM_SECCOMP_KILL, -1, thread_flag_only, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_SNAPSHOT, 0, TVM_SECCOMP_KILL, -1, thread_in_new_namespaces, NULL)));
	ck_assert(exited_ok(run_confined(SC_SNAPSHOT, 0, TVM_SECCOMP_KILL, -1, clone3_call, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_MAIN, ALL_F, TVM_SECCOMP_KILL, -1, pthread_thread, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_MAIN, ALL_F, TVM_SECCOMP_KILL, -1, clone3_call, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_EVLOOP, ALL_F, TVM_SECCOMP_KILL, -1, fork_by_clone, NULL)));
	/* The daemon makes threads (its first sets glibc's SIGSETXID
	 * handler), never a process: its helper does. */
	ck_assert(exited_ok(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, pthread_thread, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, fork_by_clone, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, thread_in_new_namespaces, NULL)));
}
END_TEST

static void map_rw(const void *arg)
{
	char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)arg;
	if (p == MAP_FAILED)
		_exit(4);
	p[0] = 1;
	if (mprotect(p, 4096, PROT_READ) < 0)
		_exit(5);
	munmap(p, 8192);
}

static void map_exec(const void *arg)
{
	(void)arg;
	mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static void protect_exec(const void *arg)
{
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	(void)arg;
	if (p == MAP_FAILED)
		_exit(4);
	mprotect(p, 4096, PROT_READ | PROT_EXEC);
}

START_TEST(memory_is_never_executable)
{
	enum sc_role role = every_role[_i].role;

	ck_assert(exited_ok(run_confined(role, ALL_F, TVM_SECCOMP_KILL, -1, map_rw, NULL)));
	ck_assert(killed_by_sigsys(run_confined(role, ALL_F, TVM_SECCOMP_KILL, -1, map_exec, NULL)));
	ck_assert(killed_by_sigsys(run_confined(role, ALL_F, TVM_SECCOMP_KILL, -1, protect_exec, NULL)));
}
END_TEST

static volatile sig_atomic_t kicked;

static void on_kick(int sig)
{
	(void)sig;
	kicked = 1;
}

static void kick_self(const void *arg)
{
	(void)arg;
	if (syscall(__NR_tgkill, getpid(), syscall(__NR_gettid), TVM_KICK_SIGNAL) < 0 || !kicked)
		_exit(4);
}

static void signal_self(const void *arg)
{
	syscall(__NR_tgkill, getpid(), syscall(__NR_gettid), *(const int *)arg);
}

/* kill(pid, 0) where pid is sent as *arg: ESRCH or success when let
 * through. */
static void kill_probe(const void *arg)
{
	kill(*(const pid_t *)arg, 0);
}

/* A signal to a VMM is the helper's (PRIV_KILL, checked to be that VMM):
 * the daemon signals no process, not even itself by kill(). */
START_TEST(the_daemon_signals_no_process)
{
	pid_t self = getpid(), all = -1, group = -getpgrp(), own_group = 0, lowest = (pid_t)0x80000000u;

	ck_assert(killed_by_sigsys(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, kill_probe, &self)));
	ck_assert(killed_by_sigsys(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, kill_probe, &all)));
	ck_assert(killed_by_sigsys(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, kill_probe, &group)));
	ck_assert(killed_by_sigsys(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, kill_probe, &own_group)));
	ck_assert(killed_by_sigsys(run_confined(SC_DAEMON, 0, TVM_SECCOMP_KILL, -1, kill_probe, &lowest)));
}
END_TEST

START_TEST(only_the_kick_and_abort_are_sent)
{
	struct sigaction sa = { .sa_handler = on_kick };
	int usr1 = SIGUSR1, kill9 = SIGKILL;

	sigemptyset(&sa.sa_mask);
	sigaction(TVM_KICK_SIGNAL, &sa, NULL); /* inherited by the children */
	ck_assert(exited_ok(run_confined(SC_MAIN, 0, TVM_SECCOMP_KILL, -1, kick_self, NULL)));
	ck_assert(killed_by_sigsys(run_confined(SC_VCPU, 0, TVM_SECCOMP_KILL, -1, signal_self, &usr1)));
	ck_assert(killed_by_sigsys(run_confined(SC_SIGNALS, 0, TVM_SECCOMP_KILL, -1, signal_self, &kill9)));
	signal(TVM_KICK_SIGNAL, SIG_DFL);
}
END_TEST

/* ioctl(-1, request): EBADF when let through. */
static void ioctl_on_bad_fd(const void *arg)
{
	if (syscall(__NR_ioctl, -1, *(const long *)arg, 0) != -1 || errno != EBADF)
		_exit(4);
}

static int ioctl_status(enum sc_role role, long request)
{
	return run_confined(role, ALL_F, TVM_SECCOMP_KILL, -1, ioctl_on_bad_fd, &request);
}

START_TEST(ioctls_are_the_roles_own)
{
	ck_assert(exited_ok(ioctl_status(SC_VCPU, KVM_RUN)));
	/* The kernel reads the request as an unsigned int, the filter its
	 * low 32 bits: high bits change neither. */
	ck_assert(exited_ok(ioctl_status(SC_VCPU, (long)KVM_RUN | (1L << 32))));
	ck_assert(killed_by_sigsys(ioctl_status(SC_VCPU, KVM_SET_REGS)));
	ck_assert(killed_by_sigsys(ioctl_status(SC_VCPU, KVM_CREATE_VCPU)));
	ck_assert(killed_by_sigsys(ioctl_status(SC_EVLOOP, KVM_RUN)));
	ck_assert(exited_ok(ioctl_status(SC_SERIAL, KVM_IRQ_LINE)));
	ck_assert(killed_by_sigsys(ioctl_status(SC_SERIAL, KVM_RUN)));
	ck_assert(exited_ok(ioctl_status(SC_MAIN, TCGETS)));
	ck_assert(killed_by_sigsys(ioctl_status(SC_MAIN, KVM_RUN)));
	ck_assert(exited_ok(ioctl_status(SC_SNAPSHOT, KVM_GET_XSAVE)));
	ck_assert(killed_by_sigsys(ioctl_status(SC_SNAPSHOT, KVM_SET_XSAVE)));
	ck_assert(killed_by_sigsys(ioctl_status(SC_EXEC, KVM_GET_REGS)));
	ck_assert(killed_by_sigsys(ioctl_status(SC_DAEMON, TCGETS)));
}
END_TEST

static void x32_call(const void *arg)
{
	(void)arg;
	syscall(X32_BIT | __NR_getpid);
}

/* i386's getpid (20) through the 32-bit entry: seccomp sees
 * AUDIT_ARCH_I386. */
static void int80_call(const void *arg)
{
	long ret;

	(void)arg;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
	(void)ret;
}

/* Does this kernel run an i386 system call made by int 0x80 from a 64-bit
 * process (getpid, unconfined, in a child)? Some do not (no IA32
 * emulation; a kernel that is itself a paravirtualized guest): a SIGSEGV. */
static int int80_works(void)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		long ret;

		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

		if (null >= 0) /* its death is an answer, not a sanitizer's report */
			dup2(null, 2);
		__asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory", "r8", "r9", "r10", "r11");
		_exit(ret == getpid() ? 0 : 1);
	}
	return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

START_TEST(other_abis_kill)
{
	enum sc_role role = every_role[_i].role;

	ck_assert(killed_by_sigsys(run_confined(role, ALL_F, TVM_SECCOMP_KILL, -1, x32_call, NULL)));
	/* (Where int 0x80 is a SIGSEGV, the filter never sees it.) */
	if (int80_works())
		ck_assert(killed_by_sigsys(run_confined(role, ALL_F, TVM_SECCOMP_KILL, -1, int80_call, NULL)));
}
END_TEST

static void forbidden_open(const void *arg)
{
	(void)arg;
	syscall(__NR_openat, AT_FDCWD, "/", O_RDONLY);
}

static void *listen_body(void *arg)
{
	syscall(__NR_listen, -1, 0);
	return arg;
}

/* A forbidden call from a thread made after the filter (the daemon
 * confines its main thread only). */
static void forbidden_listen_in_thread(const void *arg)
{
	pthread_t t;

	(void)arg;
	if (!pthread_create(&t, NULL, listen_body, NULL))
		pthread_join(t, NULL);
}

/* TVM_SECCOMP_LOG: what the child wrote to fd[1] before it ended. */
static int run_logged(enum sc_role role, child_fn fn, char *out, size_t cap)
{
	int fd[2], status;
	ssize_t n;

	ck_assert_int_eq(pipe(fd), 0);
	status = run_confined(role, 0, TVM_SECCOMP_LOG, fd[1], fn, NULL);
	close(fd[1]);
	n = read(fd[0], out, cap - 1);
	close(fd[0]);
	out[n > 0 ? n : 0] = 0;
	return status;
}

START_TEST(log_mode_names_the_role_and_the_call)
{
	char line[512];
	int status = run_logged(SC_EVLOOP, forbidden_open, line, sizeof(line));

	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == TVM_SECCOMP_EXIT, "status 0x%x", status);
	ck_assert_str_eq(line, "tinyvmm: seccomp: the event loop thread made a forbidden system call: openat (257)\n");
	if (int80_works()) {
		status = run_logged(SC_VCPU, int80_call, line, sizeof(line));
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == TVM_SECCOMP_EXIT);
		ck_assert_str_eq(line, "tinyvmm: seccomp: the vcpu thread made a forbidden system call: number 20 of "
				       "architecture 0x40000003 (i386, int 0x80)\n");
	} else {
		printf("test_seccomp: SKIPPED: the log line of an int 0x80 call: this kernel does not run them\n");
	}
	status = run_logged(SC_SERIAL, x32_call, line, sizeof(line));
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == TVM_SECCOMP_EXIT);
	ck_assert_str_eq(line,
			 "tinyvmm: seccomp: the serial input thread made a forbidden system call: x32 number 39\n");
	/* A thread that inherited its filter is named by it, its line on its
	 * creator's log fd. */
	status = run_logged(SC_DAEMON, forbidden_listen_in_thread, line, sizeof(line));
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == TVM_SECCOMP_EXIT, "status 0x%x", status);
	ck_assert_str_eq(line, "tinyvmm: seccomp: the daemon thread made a forbidden system call: listen (50)\n");
	/* Allowed calls still pass in log mode. */
	status = run_logged(SC_MAIN, map_rw, line, sizeof(line));
	ck_assert(exited_ok(status));
	ck_assert_str_eq(line, "");
}
END_TEST

START_TEST(every_role_compiles)
{
	struct sock_filter prog[SC_MAX_INSNS];
	struct tvm_err e = { 0 };

	for (int r = 0; r < SC_ROLE_COUNT; r++) {
		ck_assert_int_gt(sc_build(r, ALL_F, TVM_SECCOMP_KILL, prog, SC_MAX_INSNS, &e), 10);
		ck_assert_int_gt(sc_build(r, 0, TVM_SECCOMP_LOG, prog, SC_MAX_INSNS, &e), 10);
		ck_assert_int_eq(sc_build(r, 0, TVM_SECCOMP_OFF, prog, SC_MAX_INSNS, &e), -EINVAL);
		ck_assert_int_eq(sc_build(r, 0, TVM_SECCOMP_KILL, prog, 8, &e), -E2BIG);
	}
	ck_assert_int_eq(sc_build(SC_ROLE_COUNT, 0, TVM_SECCOMP_KILL, prog, SC_MAX_INSNS, &e), -EINVAL);
	/* The ABI checks come first and stand on their own: an x32 number
	 * can match no rule today (rules compare whole numbers), but the
	 * program must not depend on that. */
	int n = sc_build(SC_VCPU, 0, TVM_SECCOMP_KILL, prog, SC_MAX_INSNS, &e);
	ck_assert_uint_eq(prog[0].code, BPF_LD | BPF_W | BPF_ABS);
	ck_assert_uint_eq(prog[0].k, offsetof(struct seccomp_data, arch));
	ck_assert(prog[1].code == (BPF_JMP | BPF_JEQ | BPF_K) && prog[1].k == AUDIT_ARCH_X86_64 && prog[1].jt == 1 &&
		  prog[1].jf == 0);
	ck_assert(prog[2].code == (BPF_RET | BPF_K) && prog[2].k == SECCOMP_RET_KILL_PROCESS);
	ck_assert(prog[3].code == (BPF_LD | BPF_W | BPF_ABS) && prog[3].k == offsetof(struct seccomp_data, nr));
	ck_assert(prog[4].code == (BPF_JMP | BPF_JSET | BPF_K) && prog[4].k == X32_BIT && prog[4].jt == 0 &&
		  prog[4].jf == 1);
	ck_assert(prog[5].code == (BPF_RET | BPF_K) && prog[5].k == SECCOMP_RET_KILL_PROCESS);
	ck_assert(prog[n - 1].code == (BPF_RET | BPF_K) && prog[n - 1].k == SECCOMP_RET_KILL_PROCESS);
	ck_assert_int_eq(sc_supported(TVM_SECCOMP_KILL, &e), 0);
	ck_assert_int_eq(sc_supported(TVM_SECCOMP_LOG, &e), 0);
}
END_TEST

START_TEST(kick_and_features_resolve)
{
	struct tvm_config c;
	int n = load_rules((struct role_case){ SC_VCPU, 0 }), found = 0;

	for (int i = 0; i < n; i++)
		if (rules[i].nr == __NR_tgkill) {
			ck_assert_int_eq(rules[i].kind, SC_IN);
			ck_assert_int_eq(rules[i].arg, 2);
			ck_assert_uint_eq(rules[i].val[0], (uint32_t)TVM_KICK_SIGNAL);
			ck_assert_uint_eq(rules[i].val[1], SIGABRT);
			found = 1;
		}
	ck_assert(found);
	/* The vCPU is the hot path: its ioctl is tested first. */
	ck_assert_int_eq(rules[0].nr, __NR_ioctl);
	tvm_config_init(&c);
	ck_assert_uint_eq(sc_features(&c), 0);
	c.vsock_uds = "/tmp/x.sock";
	c.net.enabled = 1;
	ck_assert_uint_eq(sc_features(&c), SC_F_UDS | SC_F_NET);
	c.vsock_cid = 0; /* no vsock device: the path is unused */
	ck_assert_uint_eq(sc_features(&c), SC_F_NET);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("seccomp");
	TCase *tc = tcase_create("filters");
	int nroles = (int)(sizeof(every_role) / sizeof(every_role[0]));

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_role_compiles);
	tcase_add_test(tc, kick_and_features_resolve);
	tcase_add_loop_test(tc, allowed_calls_pass, 0, nroles);
	tcase_add_loop_test(tc, perturbed_arguments_kill, 0, nroles);
	tcase_add_loop_test(tc, forbidden_calls_kill, 0, nroles);
	tcase_add_loop_test(tc, no_role_execs_forks_or_opens_where_it_opens_nothing, 0, nroles);
	tcase_add_loop_test(tc, memory_is_never_executable, 0, nroles);
	tcase_add_loop_test(tc, other_abis_kill, 0, nroles);
	tcase_add_test(tc, sockets_are_unix_only);
	tcase_add_test(tc, threads_only_where_the_event_loop_restarts);
	tcase_add_test(tc, snapshot_lists_an_existing_output_dir);
	tcase_add_test(tc, only_the_kick_and_abort_are_sent);
	tcase_add_test(tc, the_daemon_signals_no_process);
	tcase_add_test(tc, ioctls_are_the_roles_own);
	tcase_add_test(tc, log_mode_names_the_role_and_the_call);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
