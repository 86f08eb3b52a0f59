/* One vCPU's architectural state for a snapshot (KVM API doc sections
 * 4.12-4.13 REGS/SREGS, 4.23 FPU, 4.42/4.43 XSAVE/XCRS, 4.18-4.19 MSRs,
 * 4.57-4.58 LAPIC, 4.31-4.32 VCPU_EVENTS, 4.38-4.39 MP_STATE, 4.33-4.34
 * DEBUGREGS, 4.55-4.56 TSC_KHZ), its save and restore through the vCPU fd,
 * and its encoding in a SNAP_VCPU section.
 *
 * Save runs on any thread while the vCPU thread is parked (vcpu_pause.h)
 * or not started; restore runs before the vCPU thread starts.
 */
#ifndef TVM_VCPU_STATE_H
#define TVM_VCPU_STATE_H

#include <stdint.h>

#include <linux/kvm.h>

#include "vmm/kvm/kvm.h"
#include "vmm/snapshot/snapshot_format.h"
#include "vmm/kvm/vcpu.h"

#define VCPU_STATE_MAX_MSRS 512

enum {
	VCPU_HAS_XSAVE = 1u << 0, /* xsave valid, else fpu */
	VCPU_HAS_XCRS = 1u << 1,
	VCPU_HAS_DEBUGREGS = 1u << 2,
};

struct vcpu_state {
	uint32_t flags;   /* VCPU_HAS_* */
	uint32_t tsc_khz; /* 0: unknown (KVM_GET_TSC_KHZ unsupported) */
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	uint32_t xsave[1024]; /* struct kvm_xsave's region (it ends in a flexible array) */
	struct kvm_fpu fpu;
	struct kvm_xcrs xcrs;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events events;
	struct kvm_mp_state mp;
	struct kvm_debugregs dregs;
	uint32_t nmsrs;
	struct kvm_msr_entry msrs[VCPU_STATE_MAX_MSRS];
};

/* The MSRs to save: KVM_GET_MSR_INDEX_LIST of /dev/kvm, into a malloc'd
 * array (caller frees). Returns 0 or -errno. */
int vcpu_msr_list(struct kvm_sys *k, uint32_t **idx, uint32_t *n, struct tvm_err *e);

/* Read v's state into s. msrs: the list from vcpu_msr_list(); those
 * KVM_GET_MSRS refuses on this vCPU are left out. -errno naming the ioctl. */
int vcpu_state_save(struct vcpu *v, struct kvm_sys *k, const uint32_t *msrs, uint32_t nmsrs, struct vcpu_state *s,
		    struct tvm_err *e);

/* Load s into v (created, CPUID set, thread not started), in the order
 * TSC_KHZ, SREGS, REGS, XSAVE/FPU, XCRS, LAPIC, MSRS, DEBUGREGS,
 * VCPU_EVENTS, MP_STATE. -errno naming the ioctl that failed. */
int vcpu_state_restore(struct vcpu *v, struct kvm_sys *k, const struct vcpu_state *s, struct tvm_err *e);

/* Append / parse the SNAP_VCPU section (index = vCPU index). Parse checks
 * the payload length, flags and MSR count. */
void vcpu_state_write(struct snap_w *w, uint32_t index, const struct vcpu_state *s);
int vcpu_state_read(const struct snap_section *sec, struct vcpu_state *s, struct tvm_err *e);

#endif
