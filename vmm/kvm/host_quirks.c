#include "vmm/kvm/host_quirks.h"

#include <unistd.h>

#include <asm/kvm_para.h>

bool host_quirks_detect(void)
{
	return access("/sys/module/kvm_pvm", F_OK) == 0;
}

/* noxsave: XSAVE/XRSTOR are not emulated. no_int3_selftest: int3 at CPL0
 * is not emulated (our guest kernel patch reads this word). clearcpuid:
 * clac (SMAP) and popcnt are not emulated; without erms/fsrm the kernel's
 * string copies run 8% faster in the emulator. nofsgsbase: with FSGSBASE an
 * SMP kernel's paranoid entry (NMI, #DB, #MC) finds its CPU's per-CPU base
 * with LSL, which is not emulated either (KVM_EXIT_INTERNAL_ERROR on a
 * second vCPU); without it the entry reads MSR_GS_BASE. clocksource:
 * the guest's TSC is the host's here (a restore cannot set it back), so
 * a TSC clock would jump by the time a snapshot was stored (RCU stall
 * reports, every timer due at once); kvm-clock is set back with the
 * snapshot (KVM_SET_CLOCK). GLIBC_TUNABLES reaches init's
 * environment and keeps glibc off AVX, whose state the guest kernel cannot
 * switch between processes on this host. */
const char *host_quirks_cmdline(void)
{
	return "noxsave nofsgsbase no_int3_selftest clearcpuid=smap,popcnt,erms,fsrm clocksource=kvm-clock "
	       "GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-AVX_Usable,-AVX2_Usable,-AVX512F_Usable,-AVX512VL_Usable,-AVX_Fast_Unaligned_Load,-ERMS,-FSRM,-XSAVE,-XSAVEC";
}

#define CPUID_1_ECX_CX16 (1u << 13)
/* The KVM paravirtual features whose guest side is a VMCALL hypercall
 * (send IPI, sched yield, and the unhalt kick of PV spinlocks). */
#define KVM_FEATURES_VMCALL \
	((1u << KVM_FEATURE_PV_SEND_IPI) | (1u << KVM_FEATURE_PV_SCHED_YIELD) | (1u << KVM_FEATURE_PV_UNHALT))

void host_quirks_cpuid(struct kvm_cpuid2 *cpuid)
{
	for (unsigned i = 0; i < cpuid->nent; i++) {
		struct kvm_cpuid_entry2 *e = &cpuid->entries[i];
		/* cmpxchg16b faults in the emulator; Linux uses it only when
		 * CPUID says it exists. */
		if (e->function == 1)
			e->ecx &= ~CPUID_1_ECX_CX16;
		/* VMCALL from the guest kernel never completes in the emulator
		 * (the vCPU stays on it): an SMP guest's first PV IPI hung
		 * its boot. Without these bits Linux uses the APIC. */
		if (e->function == KVM_CPUID_FEATURES)
			e->eax &= ~KVM_FEATURES_VMCALL;
	}
}
