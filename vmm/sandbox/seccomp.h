/* Seccomp filters per thread role: hand-written classic BPF (no
 * libseccomp), one allow-list per kind of thread of a VMM process.
 *
 * Every program first checks that the call is an x86_64 one
 * (seccomp_data.arch: an `int 0x80` call is i386) and not an x32 number
 * (__X32_SYSCALL_BIT), then walks the role's allow-list. Arguments are
 * checked where they matter (always their low 32 bits, what the kernel
 * reads for an int or unsigned int argument): ioctl only with the request
 * numbers the role uses, socket/socketpair only AF_UNIX, mmap/mprotect
 * never with PROT_EXEC, tkill/tgkill only TVM_KICK_SIGNAL or SIGABRT,
 * fcntl only the commands used, clone only for a thread (CLONE_THREAD;
 * clone3, whose flags BPF cannot read, answers ENOSYS so that glibc falls
 * back to clone). Anything else is a violation: SECCOMP_RET_KILL_PROCESS,
 * or in TVM_SECCOMP_LOG mode SECCOMP_RET_TRAP, whose SIGSYS handler writes
 * one line naming the thread's role and the call, then exits with
 * TVM_SECCOMP_EXIT.
 *
 * The allow-lists are in seccomp_roles.c (ARCHITECTURE.md has them as a
 * table), the names of the calls in seccomp_names.c.
 */
#ifndef TVM_SECCOMP_H
#define TVM_SECCOMP_H

#include <stddef.h>
#include <stdint.h>

#include <linux/filter.h>

#include "vmm/core/err.h"
#include "vmm/core/tvm_types.h"

/* The kinds of thread of a VMM process. */
enum sc_role {
	SC_VCPU,     /* a vCPU: KVM_RUN and its exits (devices' registers, COM1, the i8042) */
	SC_EVLOOP,   /* the event loop: queue notifications, device backends, timers */
	SC_SERIAL,   /* the serial input thread: host input to COM1 */
	SC_SIGNALS,  /* tinyvmm run's signal waiter: SIGINT/SIGTERM/SIGHUP stop the VM */
	SC_MAIN,     /* tinyvmm run's main thread once its VM runs: agent client, job output,
		      * --get files, metrics, the end of the VM */
	SC_SNAPSHOT, /* tinyvmm snapshot create's main thread: SC_MAIN, saving the snapshot, and
		      * restarting the event loop (a thread, which then confines itself) */
	SC_EXEC,     /* tinyvmm exec: an agent client over the hybrid vsock socket, no VM */
	SC_PAUSER,   /* tinyvmm run --pause-to's signal waiter: SC_SIGNALS, and on SIGUSR1
		      * saving the VM (as SC_SNAPSHOT) before it stops it */
	SC_DAEMON,   /* every thread of tinyvmm serve once it listens: HTTP clients, agent
		      * clients, its state files; VMMs and TAPs only through its privileged
		      * helper (vmm/serve/serve_priv.c), so no exec, fork, ioctl or non-Unix socket */
	SC_ROLE_COUNT
};

/* What a VM has that widens some roles (bits of `features`). */
#define SC_F_UDS 1u    /* a hybrid vsock Unix socket: accept clients, dial uds_path_PORT */
#define SC_F_NET 2u    /* a TAP: TUNSETOFFLOAD when the guest's driver (re)starts the device */
#define SC_F_CGROUP 4u /* a host cgroup: tvm_vm_destroy removes it (rmdir, short waits while busy) */

/* The SC_F_* of a VM built from c. */
unsigned sc_features(const struct tvm_config *c);

/* One entry of an allow-list: the call nr, allowed when its argument arg
 * (low 32 bits) passes kind's test against val. */
enum sc_kind {
	SC_ALLOW,  /* any arguments */
	SC_IN,     /* arg is one of val[0..nval) */
	SC_NOBITS, /* arg & val[0] == 0 */
	SC_BITS,   /* arg & val[0] == val[0] */
	SC_ERRNO,  /* not run: fails with errno val[0] */
};

#define SC_MAX_VALS 32
#define SC_VAL_KICK 0xffffffffu /* in a rule's values: TVM_KICK_SIGNAL (SIGRTMIN is not a constant) */

struct sc_rule {
	uint16_t nr;
	uint8_t kind; /* enum sc_kind */
	uint8_t arg;  /* 0..5 */
	uint8_t nval;
	uint32_t val[SC_MAX_VALS];
};

/* The largest program any role compiles to (instructions). */
#define SC_MAX_INSNS 512
/* The most distinct calls one role allows. */
#define SC_MAX_RULES 160

/* Name of a role ("vcpu", "event loop", ...). */
const char *sc_role_name(enum sc_role role);

/* Name of an x86_64 system call number ("openat"), or NULL when it is not
 * one the table knows (seccomp_names.c: every call of an allow-list and
 * the ones a compromised thread would want). */
const char *sc_syscall_name(long nr);

/* The allow-list of role for a VM with features (SC_F_*): its sets merged
 * into one rule per call, in the order the program tests them, with
 * SC_VAL_KICK replaced. Writes at most cap rules to out; returns how many,
 * or -EINVAL / -E2BIG (conflicting rules, too many) with e filled. */
int sc_rules(enum sc_role role, unsigned features, struct sc_rule *out, size_t cap, struct tvm_err *e);

/* Compile role's allow-list into prog (at most cap instructions), with
 * mode's violation action (TVM_SECCOMP_KILL or TVM_SECCOMP_LOG). Returns
 * the number of instructions or -errno with e filled. */
int sc_build(enum sc_role role, unsigned features, enum tvm_seccomp mode, struct sock_filter *prog, size_t cap,
	     struct tvm_err *e);

/* Confine the calling thread to role's allow-list: PR_SET_NO_NEW_PRIVS,
 * then the filter (it lasts as long as the thread, and threads it creates
 * inherit it). TVM_SECCOMP_LOG also installs the SIGSYS handler (process
 * wide, once) and unblocks SIGSYS in this thread; log_fd is where its line
 * goes (-1: stderr). TVM_SECCOMP_OFF does nothing. Returns 0 or -errno with
 * e naming the role and the step. */
int sc_confine(enum sc_role role, unsigned features, enum tvm_seccomp mode, int log_fd, struct tvm_err *e);

/* Whether this kernel has seccomp filters with mode's action
 * (SECCOMP_RET_KILL_PROCESS needs Linux 4.14). 0, or -errno with e filled. */
int sc_supported(enum tvm_seccomp mode, struct tvm_err *e);

#endif
