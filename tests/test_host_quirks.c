/* The nested kvm_pvm host's CPUID changes (vmm/kvm/host_quirks.c): CX16
 * and the VMCALL-based KVM paravirtual features hidden, nothing else. */
#include <check.h>
#include <stdlib.h>

#include <asm/kvm_para.h>

#include "vmm/kvm/host_quirks.h"
#include "tests/unit.h"

#define CX16 (1u << 13)

static struct kvm_cpuid2 *table(void)
{
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + 3 * sizeof(struct kvm_cpuid_entry2));

	ck_assert_ptr_nonnull(c);
	c->nent = 3;
	c->entries[0] = (struct kvm_cpuid_entry2){ .function = 1, .ecx = ~0u, .edx = ~0u };
	c->entries[1] = (struct kvm_cpuid_entry2){ .function = KVM_CPUID_FEATURES, .eax = ~0u, .edx = ~0u };
	c->entries[2] = (struct kvm_cpuid_entry2){ .function = 7, .ebx = ~0u };
	return c;
}

START_TEST(hides_cx16_and_vmcall_features_only)
{
	struct kvm_cpuid2 *c = table();
	uint32_t vmcall =
		(1u << KVM_FEATURE_PV_SEND_IPI) | (1u << KVM_FEATURE_PV_SCHED_YIELD) | (1u << KVM_FEATURE_PV_UNHALT);

	host_quirks_cpuid(c);
	ck_assert_uint_eq(c->entries[0].ecx, ~CX16);
	ck_assert_uint_eq(c->entries[0].edx, ~0u);
	/* An SMP guest's first PV IPI is a VMCALL, which never completes on
	 * this host: without these bits it uses the APIC. */
	ck_assert_uint_eq(c->entries[1].eax, ~vmcall);
	ck_assert_uint_eq(c->entries[1].eax & (1u << KVM_FEATURE_CLOCKSOURCE2), 1u << KVM_FEATURE_CLOCKSOURCE2);
	ck_assert_uint_eq(c->entries[1].edx, ~0u);
	ck_assert_uint_eq(c->entries[2].ebx, ~0u);
	free(c);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("host_quirks");
	TCase *tc = tcase_create("cpuid");

	tcase_add_test(tc, hides_cx16_and_vmcall_features_only);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(suite());
}
