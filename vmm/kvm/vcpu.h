/* vCPUs: creation, initial state and the run loop (one thread each).
 *
 * The run loop dispatches KVM_EXIT_IO and KVM_EXIT_MMIO to the buses and
 * reports terminal exits (shutdown, internal error, failed entry) through
 * vcpu_host.on_end. Another thread stops a vCPU only by vcpu_kick(): set
 * immediate_exit and signal the thread. Registers are touched by the vCPU's
 * own thread, before its thread starts, or (snapshot) by the pausing
 * thread while the vCPU thread is parked (vmm/vcpu_pause.h).
 */
#ifndef TVM_VCPU_H
#define TVM_VCPU_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <linux/kvm.h>

#include "vmm/kvm/bus.h"
#include "vmm/core/err.h"
#include "vmm/core/guest_mem.h"
#include "vmm/kvm/kvm.h"
#include "vmm/core/metrics.h"
#include "vmm/kvm/vcpu_pause.h"

enum vcpu_exit_kind {
	VEXIT_IO,
	VEXIT_MMIO,
	VEXIT_HLT,
	VEXIT_INTR, /* KVM_RUN returned EINTR (kick or signal) */
	VEXIT_SHUTDOWN,
	VEXIT_SYSTEM_EVENT,
	VEXIT_INTERNAL_ERROR,
	VEXIT_FAIL_ENTRY,
	VEXIT_OTHER,
	VEXIT_COUNT,
};

/* What the vCPU threads share with the VM that owns them. */
struct vcpu_host {
	const struct bus *pio;
	const struct bus *mmio;
	const struct guest_mem *mem;
	struct metrics *metrics;
	atomic_bool *stopping;    /* set by the VM to make every loop return */
	struct vcpu_pause *pause; /* vmm/vcpu_pause.h; NULL: never paused */
	/* A terminal event: reason is an enum tvm_exit, msg one line. */
	void (*on_end)(void *ctx, int reason, const char *msg);
	void (*log)(void *ctx, const char *msg); /* unhandled I/O and such */
	/* First thing on each vCPU thread once its signal mask is set (the VM
	 * confines the thread there); nonzero: the thread ends at once (the
	 * VM was ended). NULL: nothing. */
	int (*thread_init)(void *ctx);
	void *ctx;
};

#define VCPU_UNHANDLED_LOG 16 /* distinct unhandled addresses logged per vCPU */

struct vcpu {
	int index; /* also its APIC id */
	int fd;
	struct kvm_run *run;
	size_t run_size;
	pthread_t thread;
	bool thread_started;
	const struct vcpu_host *host;
	_Atomic uint64_t exits[VEXIT_COUNT];
	_Atomic uint64_t cpu_ns_at_end;              /* its thread's CPU time, set as the thread ends... */
	atomic_bool ended;                           /* ...then this: its CPU clock is gone */
	unsigned unhandled_logged;                   /* distinct unhandled addresses logged */
	uint64_t unhandled_seen[VCPU_UNHANDLED_LOG]; /* ...which ones (space tag in bit 63) */
};

/* Create vCPU index, map its kvm_run, set CPUID (caller normalised it),
 * FPU, boot MSRs and LAPIC LINT0=ExtINT / LINT1=NMI. */
int vcpu_create(struct vcpu *v, struct kvm_sys *k, int index, const struct kvm_cpuid2 *cpuid,
		const struct vcpu_host *host, struct tvm_err *e);

/* Register access for the boot vCPU before it runs. */
int vcpu_get_sregs(struct vcpu *v, struct kvm_sregs *s, struct tvm_err *e);
int vcpu_set_sregs(struct vcpu *v, const struct kvm_sregs *s, struct tvm_err *e);
int vcpu_set_regs(struct vcpu *v, const struct kvm_regs *r, struct tvm_err *e);

/* Start the run-loop thread. */
int vcpu_start(struct vcpu *v, struct tvm_err *e);

/* Make a running vCPU leave KVM_RUN soon (any thread). */
void vcpu_kick(struct vcpu *v);

/* Join the thread if started, unmap and close. */
void vcpu_destroy(struct vcpu *v);

/* CPU time (user + system) of the vCPU's thread in ns: while it runs,
 * from its CPU clock; after it ended, what it used; 0 if never started. */
uint64_t vcpu_cpu_ns(struct vcpu *v);

/* JSON name of an exit kind, e.g. "io". */
const char *vcpu_exit_kind_name(enum vcpu_exit_kind k);

#endif
