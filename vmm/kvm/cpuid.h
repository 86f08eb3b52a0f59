/* Per-vCPU CPUID, derived from KVM_GET_SUPPORTED_CPUID (KVM API doc 4.46).
 *
 * KVM reports what it can virtualise; a VMM must still give each vCPU its
 * own identity: APIC ids in leaves 0x1/0xb/0x1f/0x8000001e, package topology
 * (all vCPUs one package, one thread per core), and the hypervisor bit.
 */
#ifndef TVM_CPUID_H
#define TVM_CPUID_H

#include <linux/kvm.h>

/* Rewrite a copy of the supported table in place for vCPU index (APIC id)
 * out of ncpus. */
void cpuid_normalize(struct kvm_cpuid2 *cpuid, unsigned index, unsigned ncpus);

#endif
