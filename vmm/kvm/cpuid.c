#include "vmm/kvm/cpuid.h"

#define CPUID_1_ECX_HYPERVISOR (1u << 31)
#define CPUID_1_EDX_HTT (1u << 28)

static unsigned order(unsigned n) /* bits needed to number n items */
{
	unsigned b = 0;

	while ((1u << b) < n)
		b++;
	return b;
}

void cpuid_normalize(struct kvm_cpuid2 *cpuid, unsigned index, unsigned ncpus)
{
	for (unsigned i = 0; i < cpuid->nent; i++) {
		struct kvm_cpuid_entry2 *e = &cpuid->entries[i];

		switch (e->function) {
		case 0x1:
			e->ebx = (e->ebx & 0x0000ffff) | (index << 24) | ((ncpus & 0xff) << 16);
			e->ecx |= CPUID_1_ECX_HYPERVISOR;
			if (ncpus > 1)
				e->edx |= CPUID_1_EDX_HTT;
			else
				e->edx &= ~CPUID_1_EDX_HTT;
			break;
		case 0x4: /* deterministic cache parameters: cores per package - 1 */
			e->eax = (e->eax & 0x03ffffff) | ((ncpus - 1) << 26);
			break;
		case 0xb:
		case 0x1f: /* extended topology: level 0 = SMT (1 thread), 1 = core */
			e->edx = index;
			if (e->index == 0) {
				e->eax = 0;
				e->ebx = 1;
				e->ecx = (1u << 8) | 0;
			} else if (e->index == 1) {
				e->eax = order(ncpus);
				e->ebx = ncpus;
				e->ecx = (2u << 8) | 1;
			} else {
				e->eax = 0;
				e->ebx = 0;
				e->ecx = e->index;
			}
			break;
		case 0x8000001e: /* AMD extended APIC id */
			e->eax = index;
			e->ebx = 0;
			break;
		default: break;
		}
	}
}
