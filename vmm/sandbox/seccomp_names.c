/* Names of the x86_64 system calls the seccomp log line may need: every
 * call of an allow-list (seccomp_roles.c) and the ones a compromised thread
 * would reach for. Others are logged by number. */
#include "vmm/sandbox/seccomp.h"

#include <sys/syscall.h>

/* clang-format off */
#define N(name) [__NR_##name] = #name

static const char *const names[] = {
	/* allowed somewhere */
	N(read), N(write), N(close), N(mmap), N(mprotect), N(munmap), N(madvise), N(mremap), N(brk),
	N(rt_sigprocmask), N(rt_sigreturn), N(restart_syscall), N(tgkill), N(tkill), N(getpid), N(gettid),
	N(clock_gettime), N(sched_yield), N(sched_getaffinity), N(exit), N(exit_group), N(futex),
	N(epoll_ctl), N(epoll_wait), N(epoll_pwait), N(timerfd_settime), N(timerfd_gettime), N(ioctl),
	N(readv), N(writev), N(pread64), N(pwrite64), N(preadv), N(pwritev), N(preadv2), N(pwritev2),
	N(fdatasync), N(fsync), N(fallocate), N(sendmsg), N(sendto), N(recvfrom), N(recvmsg), N(shutdown),
	N(accept4), N(socket), N(connect), N(socketpair), N(poll), N(ppoll), N(rt_sigtimedwait),
	N(clock_nanosleep), N(nanosleep), N(getrandom), N(fcntl), N(openat), N(newfstatat), N(fstat),
	N(statx), N(lseek), N(umask), N(fchmod), N(rename), N(unlink), N(mkdir), N(ftruncate),
	N(copy_file_range), N(clone), N(clone3), N(set_robust_list), N(rseq), N(prctl), N(seccomp),
	N(sigaltstack), N(rmdir), N(unlinkat), N(renameat), N(renameat2), N(faccessat), N(faccessat2),
	N(flock), N(wait4), N(waitid), N(geteuid), N(getuid), N(getegid), N(getgid), N(sysinfo),
	N(readlinkat), N(getcwd), N(time), N(gettimeofday),
	/* what an attacker wants */
	N(open), N(openat2), N(creat), N(execve), N(execveat), N(fork), N(vfork), N(ptrace), N(kill),
	N(rt_sigaction), N(bind), N(listen), N(accept), N(mount), N(umount2), N(pivot_root), N(chroot),
	N(unshare), N(setns), N(setuid), N(setgid), N(setresuid), N(setresgid), N(setgroups), N(capset),
	N(bpf), N(perf_event_open), N(keyctl), N(add_key), N(request_key), N(init_module), N(finit_module),
	N(delete_module), N(kexec_load), N(memfd_create), N(process_vm_readv), N(process_vm_writev),
	N(userfaultfd), N(io_uring_setup), N(pkey_mprotect), N(symlink), N(symlinkat), N(link), N(linkat),
	N(chmod), N(fchmodat), N(chown), N(fchown), N(dup), N(dup2), N(dup3), N(pipe), N(pipe2),
	N(eventfd2), N(timerfd_create), N(epoll_create1), N(getdents64), N(uname), N(getppid), N(stat),
	N(lstat), N(access), N(readlink), N(mknod), N(mknodat), N(reboot), N(swapon), N(iopl), N(ioperm),
	N(modify_ldt), N(arch_prctl), N(personality), N(name_to_handle_at), N(open_by_handle_at),
	N(process_madvise), N(pidfd_open), N(pidfd_getfd), N(landlock_restrict_self),
};
/* clang-format on */

const char *sc_syscall_name(long nr)
{
	if (nr < 0 || nr >= (long)(sizeof(names) / sizeof(names[0])))
		return NULL;
	return names[nr];
}
