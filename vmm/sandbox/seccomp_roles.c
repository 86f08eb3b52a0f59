/* The allow-list of each thread role (ARCHITECTURE.md, "Thread roles and
 * their seccomp allow-lists", has them as a table). Found by reading the
 * code each thread runs and confirmed with strace -f on real runs of the
 * release binary: boot and job, template snapshot and restore, snapshot
 * create, --net, --put/--get, --metrics, exec, --console.
 *
 * Every thread is fully set up before its filter goes on (KVM_SET_*, the
 * TAP, eventfds and timerfds made, files opened), so no role creates fds
 * other than sockets, and none opens a file but the CLI's main threads
 * (--put/--get, --metrics, a snapshot's files). */
#include "vmm/sandbox/seccomp_roles.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <linux/prctl.h>
#include <linux/seccomp.h>

/* One rule per line reads as the table it is. */
/* Exactly the flags glibc's pthread_create gives clone (2.36, as strace
 * shows): a thread, never a process or new namespaces. */
#define SC_THREAD_CLONE_FLAGS                                                                              \
	(CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS | \
	 CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID)

/* clang-format off */
#define N_VALS(...) (sizeof((uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t))
#define ALLOW(name) { .nr = __NR_##name, .kind = SC_ALLOW }
#define ONE_OF(name, a, ...) \
	{ .nr = __NR_##name, .kind = SC_IN, .arg = a, .val = { __VA_ARGS__ }, .nval = N_VALS(__VA_ARGS__) }
#define WITHOUT(name, a, bits) { .nr = __NR_##name, .kind = SC_NOBITS, .arg = a, .val = { bits }, .nval = 1 }
#define WITH(name, a, bits) { .nr = __NR_##name, .kind = SC_BITS, .arg = a, .val = { bits }, .nval = 1 }
#define FAILS(name, err) { .nr = __NR_##name, .kind = SC_ERRNO, .val = { err }, .nval = 1 }
#define SET(r) { r, sizeof(r) / sizeof(r[0]), 0 }
#define SET_IF(f, r) { r, sizeof(r) / sizeof(r[0]), f }

/* Every thread: memory (never executable), locks, the signals a thread
 * may send (kicks, abort) or take (the kick's handler returns), its own
 * end and the process's. */
static const struct sc_rule base[] = {
	ALLOW(futex),
	ALLOW(write),
	ALLOW(close),
	WITHOUT(mmap, 2, PROT_EXEC),
	WITHOUT(mprotect, 2, PROT_EXEC),
	ALLOW(munmap),
	ALLOW(madvise),
	ALLOW(mremap),
	ALLOW(brk),
	ALLOW(rt_sigprocmask),
	ALLOW(rt_sigreturn),
	ALLOW(restart_syscall),
	ONE_OF(tgkill, 2, SC_VAL_KICK, SIGABRT),
	ONE_OF(tkill, 1, SC_VAL_KICK, SIGABRT),
	ALLOW(getpid),
	ALLOW(gettid),
	ALLOW(clock_gettime),
	ALLOW(sched_yield),
	ALLOW(sched_getaffinity),
	ALLOW(exit),
	ALLOW(exit_group),
};

/* A thread that may end the VM (vm_end: kicks, the serial thread's stop
 * eventfd, every vsock connection dropped and unwatched) or restart a
 * device (watches and its rate limiters' timers). */
static const struct sc_rule vm_end[] = {
	ALLOW(epoll_ctl),
	ALLOW(timerfd_settime),
	ALLOW(timerfd_gettime),
};

/* The vCPU's own ioctls: run, COM1's interrupt, and the registers and
 * address translation that describe a KVM_EXIT_INTERNAL_ERROR. */
static const struct sc_rule vcpu[] = {
	ONE_OF(ioctl, 1, KVM_RUN, KVM_IRQ_LINE, KVM_GET_REGS, KVM_TRANSLATE),
};

/* The guest's driver (re)starting virtio-net sets the TAP's offloads. */
static const struct sc_rule tap[] = {
	ONE_OF(ioctl, 1, TUNSETOFFLOAD),
};

/* Device work: virtqueues and their backends (drive images and overlays,
 * vsock sockets, the TAP), interrupts through irqfds (write). */
static const struct sc_rule device_io[] = {
	ALLOW(read),     ALLOW(readv),    ALLOW(writev),    ALLOW(pread64),  ALLOW(pwrite64), ALLOW(preadv),
	ALLOW(pwritev),  ALLOW(preadv2),  ALLOW(pwritev2),  ALLOW(fdatasync), ALLOW(fsync),   ALLOW(fallocate),
	ALLOW(sendmsg),  ALLOW(sendto),   ALLOW(recvfrom),  ALLOW(recvmsg),  ALLOW(shutdown),
};

/* The event loop's wait. */
static const struct sc_rule evloop[] = {
	ALLOW(epoll_wait),
	ALLOW(epoll_pwait),
};

/* The hybrid vsock socket: clients accepted, the guest's connections
 * dialled to uds_path_PORT. Unix sockets only. */
static const struct sc_rule uds[] = {
	ALLOW(accept4),
	ONE_OF(socket, 0, AF_UNIX),
	ALLOW(connect),
};

/* Host input for COM1: wait, read, raise IRQ 4. */
static const struct sc_rule serial[] = {
	ALLOW(poll),
	ALLOW(ppoll),
	ALLOW(read),
	ONE_OF(ioctl, 1, KVM_IRQ_LINE),
};

/* tinyvmm run's SIGINT/SIGTERM/SIGHUP, and its wake-up at the end. */
static const struct sc_rule signals[] = {
	ALLOW(rt_sigtimedwait),
};

/* An agent client: waits and retries through a booting guest, SEED's
 * entropy, stdin forwarded, non-blocking sockets; a job whose guest does
 * not answer by its timeout + grace ends with our side shut down. */
static const struct sc_rule agent[] = {
	ALLOW(poll),
	ONE_OF(shutdown, 1, SHUT_WR),
	ALLOW(ppoll),
	ALLOW(clock_nanosleep),
	ALLOW(nanosleep),
	ALLOW(getrandom),
	ALLOW(read),
	ALLOW(recvfrom),
	ALLOW(sendto),
	ONE_OF(fcntl, 1, F_GETFL, F_SETFL, F_GETFD, F_SETFD),
};

/* An in-process agent connection is a socketpair. */
static const struct sc_rule local_pair[] = {
	ONE_OF(socketpair, 0, AF_UNIX),
};

/* The VM's host cgroup, removed by tvm_vm_destroy on the main thread once
 * the process is moved out of it (vmm/sandbox/cgroup.c: a write to
 * cgroup.procs, then rmdir, retried after 10 ms sleeps while busy). */
static const struct sc_rule cgroup_rm[] = {
	ALLOW(rmdir),
	ALLOW(clock_nanosleep),
};

/* tinyvmm exec dials the VM's hybrid socket. */
static const struct sc_rule dial[] = {
	ONE_OF(socket, 0, AF_UNIX),
	ALLOW(connect),
};

/* Files of the CLI: --put read, --get written beside its target and
 * renamed, --metrics, the hybrid socket unlinked and the VM's cgroup left
 * at the end; stdio asks
 * whether stdout is a terminal, and a console's terminal is restored. */
static const struct sc_rule files[] = {
	ALLOW(openat),
	ALLOW(newfstatat),
	ALLOW(fstat),
	ALLOW(statx),
	ALLOW(lseek),
	ALLOW(umask),
	ALLOW(fchmod),
	ALLOW(rename),
	ALLOW(unlink),
	ALLOW(rmdir), /* the VM's cgroup, at its end */
	ONE_OF(ioctl, 1, TCGETS, TCSETS, TCSETSW, TCSETSF, TIOCGWINSZ),
};

/* tvm_vm_snapshot on the calling thread: vCPU and VM state read (the
 * vCPU threads are parked), the files written and synced, and the event
 * loop stopped and started again: a new thread (clone with CLONE_THREAD
 * only; clone3 answers ENOSYS and glibc falls back to clone), which
 * inherits this filter and then adds its own. */
static const struct sc_rule snapshot[] = {
	ONE_OF(ioctl, 1, KVM_GET_REGS, KVM_GET_SREGS, KVM_GET_FPU, KVM_GET_XSAVE, KVM_GET_XCRS, KVM_GET_LAPIC,
	       KVM_GET_MSRS, KVM_GET_MSR_INDEX_LIST, KVM_CHECK_EXTENSION, KVM_GET_DEBUGREGS, KVM_GET_VCPU_EVENTS,
	       KVM_GET_MP_STATE, KVM_GET_TSC_KHZ, KVM_GET_IRQCHIP, KVM_GET_PIT2, KVM_GET_CLOCK),
	ALLOW(mkdir),
	ALLOW(getdents64), /* an existing output directory must hold no other files */
	ALLOW(ftruncate),
	ALLOW(copy_file_range),
	ONE_OF(clone, 0, SC_THREAD_CLONE_FLAGS),
	FAILS(clone3, ENOSYS),
	ALLOW(set_robust_list),
	ALLOW(rseq),
	ONE_OF(prctl, 0, PR_SET_NO_NEW_PRIVS),
	ONE_OF(seccomp, 0, SECCOMP_SET_MODE_FILTER),
};

/* tinyvmm serve's threads (SC_DAEMON). What the daemon asks of the host
 * beyond its own files and sockets (a VMM started, a TAP made or
 * removed, the host's addresses) its privileged helper does; a thread
 * here may only talk to it. It signals no process (a signal to a VMM is
 * the helper's, checked to be that VMM: PRIV_KILL); the sole
 * rt_sigaction is glibc's SIGSETXID handler, set at the first
 * pthread_create. */
static const struct sc_rule serve_daemon[] = {
	ALLOW(poll),
	ALLOW(read),
	ALLOW(recvfrom),
	ALLOW(sendto),
	ALLOW(accept4),
	ALLOW(getsockopt), /* SO_PEERCRED of each client */
	ONE_OF(socket, 0, AF_UNIX),
	ALLOW(connect),
	ALLOW(sendmsg),
	ALLOW(recvmsg),
	ALLOW(shutdown),
	ALLOW(ppoll),
	ALLOW(clock_nanosleep),
	ALLOW(nanosleep),
	ALLOW(getrandom),
	ALLOW(pread64),
	ALLOW(pwrite64),
	ALLOW(readv),
	ALLOW(writev),
	ALLOW(lseek),
	ALLOW(fsync),
	ALLOW(fdatasync),
	ONE_OF(fcntl, 1, F_GETFL, F_SETFL, F_GETFD, F_SETFD),
	ALLOW(openat),
	ALLOW(newfstatat),
	ALLOW(fstat),
	ALLOW(statx), /* jail_remove_tree: a mount is never crossed */
	ALLOW(getdents64),
	ALLOW(mkdir),
	ALLOW(rmdir),
	ALLOW(unlink),
	ALLOW(unlinkat),
	ALLOW(rename),
	ALLOW(renameat),
	ALLOW(renameat2),
	ALLOW(linkat), /* a fork's snapshot files, hard links of its parent's */
	ALLOW(readlink),
	ALLOW(readlinkat),
	ALLOW(getcwd), /* realpath of a relative path: a template's base */
	ALLOW(access),
	ALLOW(faccessat),
	ALLOW(faccessat2),
	ALLOW(flock),
	ALLOW(pipe2), /* an exec's control pipe */
	ALLOW(wait4),
	ALLOW(waitid),
	ALLOW(geteuid),
	ALLOW(getuid),
	ALLOW(getegid),
	ALLOW(getgid),
	ALLOW(sysinfo), /* qsort's first large sort asks for the memory size */
	ALLOW(time),    /* where the vDSO is missing */
	ALLOW(gettimeofday),
	ONE_OF(clone, 0, SC_THREAD_CLONE_FLAGS),
	FAILS(clone3, ENOSYS),
	ALLOW(set_robust_list),
	ALLOW(rseq),
	ONE_OF(rt_sigaction, 0, 33 /* SIGSETXID */),
};

#if defined(__SANITIZE_ADDRESS__)
/* Test builds only (ASan+UBSan): what the sanitizer runtime calls on a
 * thread's behalf (its alternate signal stack is taken down as the thread
 * ends; a thread it starts sets its signal handlers). The release
 * binary's filters never have these. */
static const struct sc_rule sanitizer[] = {
	ALLOW(sigaltstack),
	ALLOW(rt_sigaction),
};
#define SANITIZER SET(sanitizer),
#else
#define SANITIZER
#endif

const struct sc_role_def sc_role_defs[SC_ROLE_COUNT] = {
	[SC_VCPU] = { "vcpu", { SET(vcpu), SET(base), SET(vm_end), SET_IF(SC_F_NET, tap), SANITIZER } },
	[SC_EVLOOP] = { "event loop",
			{ SET(evloop), SET(device_io), SET(base), SET(vm_end), SET_IF(SC_F_UDS, uds), SANITIZER } },
	[SC_SERIAL] = { "serial input", { SET(serial), SET(base), SANITIZER } },
	[SC_SIGNALS] = { "signal waiter", { SET(signals), SET(base), SET(vm_end), SANITIZER } },
	[SC_MAIN] = { "main", { SET(agent), SET(base), SET(vm_end), SET(device_io), SET(local_pair), SET(files),
				SET_IF(SC_F_UDS, uds), SET_IF(SC_F_CGROUP, cgroup_rm), SANITIZER } },
	/* SC_MAIN, and all the event loop's (the restarted loop inherits this). */
	[SC_SNAPSHOT] = { "snapshot main",
			  { SET(agent), SET(base), SET(vm_end), SET(device_io), SET(local_pair), SET(files), SET(snapshot),
			    SET(evloop), SET_IF(SC_F_UDS, uds), SET_IF(SC_F_CGROUP, cgroup_rm), SANITIZER } },
	[SC_EXEC] = { "exec main", { SET(agent), SET(base), SET(dial), SET(files), SANITIZER } },
	/* SC_SIGNALS, and what tvm_vm_snapshot needs (SC_SNAPSHOT's less the agent). */
	[SC_PAUSER] = { "pause waiter",
			{ SET(signals), SET(base), SET(vm_end), SET(device_io), SET(files), SET(snapshot), SET(evloop),
			  SET_IF(SC_F_UDS, uds), SANITIZER } },
	[SC_DAEMON] = { "daemon", { SET(serve_daemon), SET(base), SANITIZER } },
};
/* clang-format on */
