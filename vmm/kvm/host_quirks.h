/* Quirks of the nested kvm_pvm host, in one place (see DEVELOPERS.md).
 *
 * kvm_pvm runs guest kernel code in an emulator with known gaps. On such a
 * host the VMM hides CPUID features the emulator cannot execute and adds
 * guest command-line words that steer the (patched) guest kernel and glibc
 * around the rest. On any other KVM host nothing here applies.
 */
#ifndef TVM_HOST_QUIRKS_H
#define TVM_HOST_QUIRKS_H

#include <stdbool.h>

#include <linux/kvm.h>

/* True when the kvm_pvm module is loaded (/sys/module/kvm_pvm exists). */
bool host_quirks_detect(void);

/* Guest command-line words the quirky host needs (a constant string). */
const char *host_quirks_cmdline(void);

/* Adjust one vCPU's CPUID table for the quirky host: hide CX16, and the
 * KVM paravirtual features that the guest reaches by VMCALL. */
void host_quirks_cpuid(struct kvm_cpuid2 *cpuid);

#endif
