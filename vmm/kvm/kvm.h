/* KVM system and VM file descriptors (Documentation/virt/kvm/api.rst).
 *
 * kvm_open() checks KVM_GET_API_VERSION == 12 and every capability tinyvmm
 * relies on, so a host that lacks one fails early with its name.
 */
#ifndef TVM_KVM_H
#define TVM_KVM_H

#include <stddef.h>
#include <stdint.h>

#include <linux/kvm.h>

#include "vmm/core/err.h"

/* Fixed addresses KVM needs inside the 32-bit MMIO hole (Intel VMX uses
 * them for real-mode emulation; harmless elsewhere). Three pages + one. */
#define KVM_TSS_ADDR 0xfffbd000ULL
#define KVM_IDENTITY_MAP_ADDR 0xfffbc000ULL

struct kvm_sys {
	int sys_fd;           /* /dev/kvm */
	int vm_fd;            /* KVM_CREATE_VM */
	size_t run_mmap_size; /* KVM_GET_VCPU_MMAP_SIZE, bytes */
};

/* " (what to do)" after an open or access of /dev/kvm failed with errno
 * err (missing, not permitted), "" otherwise: one wording wherever that is
 * found (the VM's open, a jail's plan, the daemon's start). Static text. */
const char *kvm_open_hint(int err);

/* Open /dev/kvm, check the API and capabilities, create an x86 VM with its
 * TSS and identity-map addresses set. -ENOENT/-EACCES for /dev/kvm, -ENOSYS
 * naming a missing capability. On failure nothing stays open. */
int kvm_open(struct kvm_sys *k, struct tvm_err *e);

/* In-kernel irqchip (PIC, IOAPIC, LAPICs) and PIT (dummy PC speaker).
 * Must run before vCPUs are created. */
int kvm_create_irqchip(struct kvm_sys *k, struct tvm_err *e);
int kvm_create_pit(struct kvm_sys *k, struct tvm_err *e);

/* Register host memory [host, host + size) as guest RAM at gpa in slot. */
int kvm_set_memory(struct kvm_sys *k, uint32_t slot, uint64_t gpa, uint64_t size, void *host, struct tvm_err *e);

/* KVM_GET_SUPPORTED_CPUID into a malloc'd table (caller frees). */
int kvm_supported_cpuid(struct kvm_sys *k, struct kvm_cpuid2 **out, struct tvm_err *e);

/* Set the level of an irqchip input (GSI). Returns 0 or -errno. */
int kvm_irq_line(struct kvm_sys *k, unsigned gsi, int level);

/* Signal eventfd fd when the guest writes the 4-byte value datamatch to
 * MMIO address addr (KVM_IOEVENTFD): the write completes in the kernel
 * without an exit to us. */
int kvm_ioeventfd(struct kvm_sys *k, uint64_t addr, uint32_t datamatch, int fd, struct tvm_err *e);

/* Inject an edge on gsi whenever eventfd fd is written (KVM_IRQFD). */
int kvm_irqfd(struct kvm_sys *k, unsigned gsi, int fd, struct tvm_err *e);

/* Close both descriptors; safe on a zeroed struct with fds set to -1. */
void kvm_close(struct kvm_sys *k);

#endif
