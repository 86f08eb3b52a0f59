#include "vmm/kvm/host_quirks.h"

#include <unistd.h>

bool host_quirks_detect(void)
{
	return access("/sys/module/kvm_pvm", F_OK) == 0;
}

/* noxsave: XSAVE/XRSTOR are not emulated. no_int3_selftest: int3 at CPL0
 * is not emulated (our guest kernel patch reads this word). clearcpuid:
 * clac (SMAP) and popcnt are not emulated; without erms/fsrm the kernel's
 * string copies run 8% faster in the emulator. GLIBC_TUNABLES reaches init's
 * environment and keeps glibc off AVX, whose state the guest kernel cannot
 * switch between processes on this host. */
const char *host_quirks_cmdline(void)
{
	return "noxsave no_int3_selftest clearcpuid=smap,popcnt,erms,fsrm "
	       "GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX,-AVX2,-AVX512F,-AVX512VL,-AVX512BW,-AVX512DQ,-AVX512CD,-AVX_Usable,-AVX2_Usable,-AVX512F_Usable,-AVX512VL_Usable,-AVX_Fast_Unaligned_Load,-ERMS,-FSRM,-XSAVE,-XSAVEC";
}

#define CPUID_1_ECX_CX16 (1u << 13)

void host_quirks_cpuid(struct kvm_cpuid2 *cpuid)
{
	for (unsigned i = 0; i < cpuid->nent; i++) {
		struct kvm_cpuid_entry2 *e = &cpuid->entries[i];
		/* cmpxchg16b faults in the emulator; Linux uses it only when
		 * CPUID says it exists. */
		if (e->function == 1)
			e->ecx &= ~CPUID_1_ECX_CX16;
	}
}
