/* The VM-wide KVM state of a snapshot: the in-kernel irqchip (PIC master,
 * PIC slave, IOAPIC: KVM_GET/SET_IRQCHIP), the PIT (KVM_GET/SET_PIT2) and
 * the kvmclock base (KVM_GET/SET_CLOCK), and its SNAP_VM section. */
#ifndef TVM_VM_STATE_H
#define TVM_VM_STATE_H

#include <linux/kvm.h>

#include "vmm/kvm/kvm.h"
#include "vmm/snapshot/snapshot_format.h"

struct vm_state {
	struct kvm_irqchip chip[3]; /* KVM_IRQCHIP_PIC_MASTER, _PIC_SLAVE, _IOAPIC */
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;
};

/* With every vCPU paused. -errno naming the ioctl. */
int vm_state_save(struct kvm_sys *k, struct vm_state *s, struct tvm_err *e);

/* After the vCPUs were created and their state restored, before they run.
 * The clock is set to the saved value (the guest's monotonic time goes on
 * from the snapshot; the wall clock comes with SEED). */
int vm_state_restore(struct kvm_sys *k, const struct vm_state *s, struct tvm_err *e);

void vm_state_write(struct snap_w *w, const struct vm_state *s);
int vm_state_read(const struct snap_section *sec, struct vm_state *s, struct tvm_err *e);

#endif
