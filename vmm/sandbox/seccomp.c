/* The seccomp compiler and installer (vmm/sandbox/seccomp.h): a role's
 * sets merged into one rule per call, emitted as a linear classic BPF
 * program, loaded into the calling thread; and the SIGSYS handler of
 * TVM_SECCOMP_LOG. */
#include "vmm/sandbox/seccomp.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/seccomp.h>

#include "vmm/sandbox/seccomp_roles.h"

#ifndef __X32_SYSCALL_BIT
#define __X32_SYSCALL_BIT 0x40000000
#endif

#define OFF_NR ((uint32_t)offsetof(struct seccomp_data, nr))
#define OFF_ARCH ((uint32_t)offsetof(struct seccomp_data, arch))
/* Low 32 bits of args[i] (x86_64 is little endian). */
#define OFF_ARG(i) ((uint32_t)(offsetof(struct seccomp_data, args) + 8 * (i)))

const char *sc_role_name(enum sc_role role)
{
	return (unsigned)role < SC_ROLE_COUNT ? sc_role_defs[role].name : "?";
}

unsigned sc_features(const struct tvm_config *c)
{
	return (c->vsock_cid && c->vsock_uds ? SC_F_UDS : 0) | (c->net.enabled ? SC_F_NET : 0) |
	       (c->cgroup.mode != TVM_CGROUP_OFF ? SC_F_CGROUP : 0);
}

static const char *call_name(char *buf, size_t cap, long nr)
{
	const char *s = sc_syscall_name(nr);

	if (s)
		return s;
	snprintf(buf, cap, "system call %ld", nr);
	return buf;
}

/* r joins the rule already kept for its call: any arguments wins, value
 * lists unite, identical tests stay; anything else is a table bug. */
static int merge(struct sc_rule *kept, const struct sc_rule *r, const char *role, struct tvm_err *e)
{
	char buf[32];

	if (kept->kind == SC_ALLOW)
		return 0;
	if (r->kind == SC_ALLOW) {
		*kept = *r;
		return 0;
	}
	if (r->kind == SC_IN && kept->kind == SC_IN && r->arg == kept->arg) {
		for (unsigned i = 0; i < r->nval; i++) {
			bool have = false;

			for (unsigned j = 0; j < kept->nval && !have; j++)
				have = kept->val[j] == r->val[i];
			if (have)
				continue;
			if (kept->nval == SC_MAX_VALS)
				return tvm_errf(e, E2BIG, "seccomp %s: %s: more than %d values", role,
						call_name(buf, sizeof(buf), r->nr), SC_MAX_VALS);
			kept->val[kept->nval++] = r->val[i];
		}
		return 0;
	}
	if (r->kind == kept->kind && r->arg == kept->arg && r->val[0] == kept->val[0])
		return 0;
	return tvm_errf(e, EINVAL, "seccomp %s: %s: conflicting rules", role, call_name(buf, sizeof(buf), r->nr));
}

int sc_rules(enum sc_role role, unsigned features, struct sc_rule *out, size_t cap, struct tvm_err *e)
{
	const struct sc_role_def *d;
	size_t n = 0;

	if ((unsigned)role >= SC_ROLE_COUNT)
		return tvm_errf(e, EINVAL, "seccomp: no role %d", (int)role);
	d = &sc_role_defs[role];
	for (unsigned s = 0; s < SC_MAX_SETS && d->sets[s].rules; s++) {
		const struct sc_set *set = &d->sets[s];

		if ((set->needs & features) != set->needs)
			continue;
		for (unsigned i = 0; i < set->n; i++) {
			struct sc_rule r = set->rules[i];
			size_t k;
			int err;

			for (unsigned v = 0; v < r.nval; v++)
				if (r.val[v] == SC_VAL_KICK)
					r.val[v] = (uint32_t)TVM_KICK_SIGNAL;
			for (k = 0; k < n && out[k].nr != r.nr; k++)
				;
			if (k < n) {
				if ((err = merge(&out[k], &r, d->name, e)))
					return err;
				continue;
			}
			if (n == cap)
				return tvm_errf(e, E2BIG, "seccomp %s: more than %zu calls", d->name, cap);
			out[n++] = r;
		}
	}
	return (int)n;
}

struct emitter {
	struct sock_filter *p;
	size_t n, cap;
};

static void emit(struct emitter *m, uint16_t code, uint32_t k, uint8_t jt, uint8_t jf)
{
	if (m->n < m->cap)
		m->p[m->n] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
	m->n++;
}

#define RET(m, v) emit(m, BPF_RET | BPF_K, v, 0, 0)

/* One rule: "if nr matches, decide; else go on to the next rule". The
 * block's size is known before it is written, so the skip is exact. */
static void emit_rule(struct emitter *m, const struct sc_rule *r, uint32_t bad)
{
	switch (r->kind) {
	case SC_ALLOW:
		emit(m, BPF_JMP | BPF_JEQ | BPF_K, r->nr, 0, 1);
		RET(m, SECCOMP_RET_ALLOW);
		break;
	case SC_ERRNO:
		emit(m, BPF_JMP | BPF_JEQ | BPF_K, r->nr, 0, 1);
		RET(m, SECCOMP_RET_ERRNO | (r->val[0] & SECCOMP_RET_DATA));
		break;
	case SC_IN:
		/* ld arg; jeq v0..vn-1 -> allow; ret bad; ret allow */
		emit(m, BPF_JMP | BPF_JEQ | BPF_K, r->nr, 0, (uint8_t)(r->nval + 3));
		emit(m, BPF_LD | BPF_W | BPF_ABS, OFF_ARG(r->arg), 0, 0);
		for (unsigned i = 0; i < r->nval; i++)
			emit(m, BPF_JMP | BPF_JEQ | BPF_K, r->val[i], (uint8_t)(r->nval - i), 0);
		RET(m, bad);
		RET(m, SECCOMP_RET_ALLOW);
		break;
	case SC_NOBITS:
		emit(m, BPF_JMP | BPF_JEQ | BPF_K, r->nr, 0, 4);
		emit(m, BPF_LD | BPF_W | BPF_ABS, OFF_ARG(r->arg), 0, 0);
		emit(m, BPF_JMP | BPF_JSET | BPF_K, r->val[0], 0, 1);
		RET(m, bad);
		RET(m, SECCOMP_RET_ALLOW);
		break;
	case SC_BITS:
		emit(m, BPF_JMP | BPF_JEQ | BPF_K, r->nr, 0, 5);
		emit(m, BPF_LD | BPF_W | BPF_ABS, OFF_ARG(r->arg), 0, 0);
		emit(m, BPF_ALU | BPF_AND | BPF_K, r->val[0], 0, 0);
		emit(m, BPF_JMP | BPF_JEQ | BPF_K, r->val[0], 1, 0);
		RET(m, bad);
		RET(m, SECCOMP_RET_ALLOW);
		break;
	}
}

int sc_build(enum sc_role role, unsigned features, enum tvm_seccomp mode, struct sock_filter *prog, size_t cap,
	     struct tvm_err *e)
{
	struct sc_rule rules[SC_MAX_RULES];
	struct emitter m = { prog, 0, cap };
	uint32_t bad = mode == TVM_SECCOMP_LOG ? SECCOMP_RET_TRAP : SECCOMP_RET_KILL_PROCESS;
	int n = sc_rules(role, features, rules, SC_MAX_RULES, e);

	if (n < 0)
		return n;
	if (mode != TVM_SECCOMP_KILL && mode != TVM_SECCOMP_LOG)
		return tvm_errf(e, EINVAL, "seccomp %s: mode %d is not kill or log", sc_role_name(role), (int)mode);
	/* An `int 0x80` call says AUDIT_ARCH_I386; x32 numbers carry a bit. */
	emit(&m, BPF_LD | BPF_W | BPF_ABS, OFF_ARCH, 0, 0);
	emit(&m, BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
	RET(&m, bad);
	emit(&m, BPF_LD | BPF_W | BPF_ABS, OFF_NR, 0, 0);
	emit(&m, BPF_JMP | BPF_JSET | BPF_K, __X32_SYSCALL_BIT, 0, 1);
	RET(&m, bad);
	for (int i = 0; i < n; i++)
		emit_rule(&m, &rules[i], bad);
	RET(&m, bad);
	if (m.n > cap || m.n > BPF_MAXINSNS)
		return tvm_errf(e, E2BIG, "seccomp %s: program of %zu instructions", sc_role_name(role), m.n);
	return (int)m.n;
}

/* The role and log fd of this thread, for the SIGSYS handler; a thread
 * that did not confine itself has its creator's filter, and the handler
 * uses the role and fd last confined in the process (tinyvmm serve
 * confines its main thread only, before it makes the others). */
static __thread const char *thread_role;
static __thread int thread_log_fd = -1;
static const char *volatile process_role;
static volatile int process_log_fd = -1;

static size_t put_str(char *buf, size_t n, size_t cap, const char *s)
{
	while (*s && n < cap)
		buf[n++] = *s++;
	return n;
}

static size_t put_num(char *buf, size_t n, size_t cap, unsigned long v, unsigned base)
{
	char tmp[24];
	size_t k = 0;

	do {
		tmp[k++] = "0123456789abcdef"[v % base];
		v /= base;
	} while (v);
	while (k && n < cap)
		buf[n++] = tmp[--k];
	return n;
}

/* TVM_SECCOMP_LOG: one line, then the process ends. Only write and
 * exit_group, which every role allows; no locks, no allocation. */
static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	char line[256];
	size_t n = 0, cap = sizeof(line) - 1;
	const char *name = sc_syscall_name(si->si_syscall);

	(void)sig;
	(void)uc;
	n = put_str(line, n, cap, "tinyvmm: seccomp: the ");
	n = put_str(line, n, cap, thread_role ? thread_role : process_role ? process_role : "unconfined");
	n = put_str(line, n, cap, " thread made a forbidden system call: ");
	if (si->si_arch != AUDIT_ARCH_X86_64) {
		n = put_str(line, n, cap, "number ");
		n = put_num(line, n, cap, (unsigned)si->si_syscall, 10);
		n = put_str(line, n, cap, " of architecture 0x");
		n = put_num(line, n, cap, si->si_arch, 16);
		n = put_str(line, n, cap, si->si_arch == AUDIT_ARCH_I386 ? " (i386, int 0x80)" : "");
	} else if (si->si_syscall & __X32_SYSCALL_BIT) {
		n = put_str(line, n, cap, "x32 number ");
		n = put_num(line, n, cap, (unsigned)si->si_syscall & ~(unsigned)__X32_SYSCALL_BIT, 10);
	} else {
		n = put_str(line, n, cap, name ? name : "number ");
		if (name)
			n = put_str(line, n, cap, " (");
		n = put_num(line, n, cap, (unsigned)si->si_syscall, 10);
		if (name)
			n = put_str(line, n, cap, ")");
	}
	line[n++] = '\n';
	int fd = thread_role ? thread_log_fd : process_log_fd;
	ssize_t w = write(fd >= 0 ? fd : 2, line, n);

	(void)w;
	_exit(TVM_SECCOMP_EXIT);
}

static void install_sigsys(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGSYS, &sa, NULL);
}

static pthread_once_t sigsys_once = PTHREAD_ONCE_INIT;

#ifdef TVM_SECCOMP_SELFTEST
static void *selftest_daemon(void *arg)
{
	syscall(SYS_listen, -1, 0);
	return arg;
}
#endif

int sc_confine(enum sc_role role, unsigned features, enum tvm_seccomp mode, int log_fd, struct tvm_err *e)
{
	struct sock_filter prog[SC_MAX_INSNS];
	struct sock_fprog fprog;
	sigset_t sys;
	int n;

	if (mode == TVM_SECCOMP_OFF)
		return 0;
	n = sc_build(role, features, mode, prog, SC_MAX_INSNS, e);
	if (n < 0)
		return n;
	fprog = (struct sock_fprog){ .len = (unsigned short)n, .filter = prog };
	thread_role = sc_role_name(role);
	process_role = thread_role;
	thread_log_fd = log_fd;
	process_log_fd = log_fd;
	if (mode == TVM_SECCOMP_LOG) {
		/* A blocked SIGSYS would be forced to its default action: a
		 * silent kill instead of the line. */
		pthread_once(&sigsys_once, install_sigsys);
		sigemptyset(&sys);
		sigaddset(&sys, SIGSYS);
		pthread_sigmask(SIG_UNBLOCK, &sys, NULL);
	}
	/* Without CAP_SYS_ADMIN a filter needs no_new_privs; with it, the
	 * thread keeps no way to gain privileges through exec anyway. */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return tvm_errf(e, errno, "seccomp %s thread: PR_SET_NO_NEW_PRIVS: %s", thread_role, strerror(errno));
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) < 0)
		return tvm_errf(e, errno, "seccomp %s thread: loading the filter: %s", thread_role, strerror(errno));
#ifdef TVM_SECCOMP_SELFTEST
	/* Test builds only (build/tinyvmm-seccomp-test, never the release
	 * binary): the event loop makes a call its role forbids, so a test
	 * sees TVM_SECCOMP_LOG's line and exit status. */
	if (role == SC_EVLOOP)
		syscall(SYS_openat, -100 /* AT_FDCWD */, "/", 0);
	/* and the daemon, from a thread it makes after (the line names the
	 * role it inherited): a listen(2), which it never calls once
	 * confined */
	if (role == SC_DAEMON) {
		pthread_t t;

		if (!pthread_create(&t, NULL, selftest_daemon, NULL))
			pthread_join(t, NULL);
	}
#endif
	return 0;
}

int sc_supported(enum tvm_seccomp mode, struct tvm_err *e)
{
	uint32_t action = mode == TVM_SECCOMP_LOG ? SECCOMP_RET_TRAP : SECCOMP_RET_KILL_PROCESS;

	if (mode == TVM_SECCOMP_OFF)
		return 0;
	if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) < 0)
		return tvm_errf(e, errno == EINVAL || errno == ENOSYS ? ENOSYS : errno,
				"seccomp: this kernel cannot %s a thread's forbidden calls (needs Linux 4.14): %s",
				mode == TVM_SECCOMP_LOG ? "trap" : "kill the process on", strerror(errno));
	return 0;
}
