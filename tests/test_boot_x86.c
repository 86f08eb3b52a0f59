/* GDT, identity page tables and vCPU registers for the 64-bit entry. */
#include <errno.h>

#include "tests/test_boot_common.h"

#define RAM (16 * TB_MIB)

static struct tb_ram ram;
static struct tvm_err err;

static void setup(void)
{
	tb_ram_init(&ram, RAM);
	memset(&err, 0, sizeof(err));
}

static void teardown(void)
{
	tb_ram_fini(&ram);
}

static uint64_t rd64(uint64_t gpa)
{
	uint64_t v;
	memcpy(&v, tb_gpa(&ram, gpa, 8), 8);
	return v;
}

/* Walk the 4-level tables like the MMU; returns 1 and *pa if mapped. */
static int walk(uint64_t va, uint64_t *pa)
{
	uint64_t pml4e = rd64(BOOT_PML4_ADDR + ((va >> 39) & 511) * 8), pdpte, pde;

	if (!(pml4e & 1))
		return 0;
	pdpte = rd64((pml4e & ~0xfffULL) + ((va >> 30) & 511) * 8);
	if (!(pdpte & 1) || (pdpte & 0x80))
		return 0;
	pde = rd64((pdpte & ~0xfffULL) + ((va >> 21) & 511) * 8);
	if (!(pde & 1) || !(pde & 0x80) || !(pde & 2))
		return 0;
	*pa = (pde & ~0x1fffffULL) + (va & 0x1fffff);
	return 1;
}

START_TEST(gdt_bytes)
{
	static const uint64_t want[] = { 0, 0, 0x00af9b000000ffffULL, 0x00cf93000000ffffULL, 0x00008b0000000067ULL, 0 };

	ck_assert_int_eq(boot_write_gdt_and_page_tables(&ram.m, &err), 0);
	for (int i = 0; i < 6; i++)
		ck_assert_uint_eq(rd64(BOOT_GDT_ADDR + 8 * i), want[i]);
	ck_assert(tb_all(&ram, BOOT_GDT_ADDR + sizeof(want), 0x10, TB_FILL));
	ck_assert(tb_all(&ram, 0, BOOT_GDT_ADDR, TB_FILL));
}
END_TEST

START_TEST(page_tables_identity_4g)
{
	static const uint64_t probes[] = { 0,          0x1234,     0x1fffff,   0x200000,   0x1000000 + 0x345,
					   0x3fffffff, 0x40000000, 0xbfffffff, 0xc0000000, 0xfee00000,
					   0xffffffff };
	uint64_t pa;

	ck_assert_int_eq(boot_write_gdt_and_page_tables(&ram.m, &err), 0);
	ck_assert_uint_eq(rd64(BOOT_PML4_ADDR), 0xa003);
	for (int i = 1; i < 512; i++)
		ck_assert_uint_eq(rd64(BOOT_PML4_ADDR + 8 * i), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_uint_eq(rd64(0xa000 + 8 * i), (0xb000 + 0x1000ULL * i) | 3);
	for (int i = 4; i < 512; i++)
		ck_assert_uint_eq(rd64(0xa000 + 8 * i), 0);
	/* Every 2 MiB page of the first 4 GiB, in order. */
	for (uint64_t i = 0; i < 2048; i++)
		ck_assert_uint_eq(rd64(0xb000 + 8 * i), (i << 21) | 0x83);
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		ck_assert_msg(walk(probes[i], &pa), "0x%llx unmapped", (unsigned long long)probes[i]);
		ck_assert_uint_eq(pa, probes[i]);
	}
	ck_assert(!walk(0x100000000ULL, &pa));
	ck_assert(!walk(0x8000000000ULL, &pa));
	ck_assert(tb_all(&ram, 0xf000, 0x1000, TB_FILL)); /* tables end at 0xf000 */
}
END_TEST

START_TEST(tables_need_ram)
{
	struct tb_ram tiny;

	tb_ram_init(&tiny, 0xe000);
	ck_assert_int_eq(boot_write_gdt_and_page_tables(&tiny.m, &err), -EFAULT);
	ck_assert_str_eq(err.msg, "boot tables: page tables [0x9000, +0x6000) are not guest RAM");
	tb_ram_fini(&tiny);
}
END_TEST

START_TEST(regs)
{
	struct boot_kernel k = { .entry = 0x1000000 };
	struct kvm_regs r, want = { 0 };

	memset(&r, 0x5a, sizeof(r));
	boot_vcpu_regs(&k, &r);
	want.rip = 0x1000000;
	want.rsi = BOOT_ZERO_PAGE_ADDR;
	want.rsp = want.rbp = BOOT_STACK_TOP;
	want.rflags = 2;
	ck_assert(memcmp(&r, &want, sizeof(r)) == 0);
}
END_TEST

static void check_seg(const struct kvm_segment *s, uint16_t sel, uint8_t type, uint8_t s_bit, uint8_t db, uint8_t l,
		      uint8_t g, uint32_t limit)
{
	ck_assert_uint_eq(s->selector, sel);
	ck_assert_uint_eq(s->base, 0);
	ck_assert_uint_eq(s->limit, limit);
	ck_assert_uint_eq(s->type, type);
	ck_assert_uint_eq(s->present, 1);
	ck_assert_uint_eq(s->dpl, 0);
	ck_assert_uint_eq(s->db, db);
	ck_assert_uint_eq(s->s, s_bit);
	ck_assert_uint_eq(s->l, l);
	ck_assert_uint_eq(s->g, g);
	ck_assert_uint_eq(s->avl, 0);
	ck_assert_uint_eq(s->unusable, 0);
}

START_TEST(sregs_long_mode)
{
	struct kvm_sregs s, before;

	memset(&s, 0x5a, sizeof(s));
	s.cr0 = 0x60000010; /* reset value: CD|NW|ET */
	before = s;
	boot_vcpu_sregs(&s);
	check_seg(&s.cs, 0x10, 0xb, 1, 0, 1, 1, 0xffffffff);
	check_seg(&s.ds, 0x18, 0x3, 1, 1, 0, 1, 0xffffffff);
	check_seg(&s.es, 0x18, 0x3, 1, 1, 0, 1, 0xffffffff);
	check_seg(&s.fs, 0x18, 0x3, 1, 1, 0, 1, 0xffffffff);
	check_seg(&s.gs, 0x18, 0x3, 1, 1, 0, 1, 0xffffffff);
	check_seg(&s.ss, 0x18, 0x3, 1, 1, 0, 1, 0xffffffff);
	check_seg(&s.tr, 0x20, 0xb, 0, 0, 0, 0, 0x67);
	ck_assert_uint_eq(s.ldt.selector, 0);
	ck_assert_uint_eq(s.ldt.present, 0);
	ck_assert_uint_eq(s.ldt.unusable, 1);
	ck_assert_uint_eq(s.gdt.base, BOOT_GDT_ADDR);
	ck_assert_uint_eq(s.gdt.limit, 6 * 8 - 1);
	ck_assert_uint_eq(s.cr0, 0x80000031); /* PG|NE|ET|PE, CD/NW cleared */
	ck_assert_uint_eq(s.cr3, BOOT_PML4_ADDR);
	ck_assert_uint_eq(s.cr4, 0x20);
	ck_assert_uint_eq(s.efer, 0x500);
	/* Untouched: IDT, CR2, CR8, APIC base, pending interrupts. */
	ck_assert(memcmp(&s.idt, &before.idt, sizeof(s.idt)) == 0);
	ck_assert_uint_eq(s.cr2, before.cr2);
	ck_assert_uint_eq(s.cr8, before.cr8);
	ck_assert_uint_eq(s.apic_base, before.apic_base);
	ck_assert(memcmp(s.interrupt_bitmap, before.interrupt_bitmap, sizeof(s.interrupt_bitmap)) == 0);
}
END_TEST

/* The caches must say what the descriptors in guest memory say. */
static void check_against_gdt(const struct kvm_segment *s)
{
	uint64_t d = rd64(BOOT_GDT_ADDR + (s->selector & ~7u));
	uint32_t raw_limit = (uint32_t)((d & 0xffff) | ((d >> 32) & 0xf0000));

	ck_assert_uint_eq(s->base, ((d >> 16) & 0xffffff) | ((d >> 56) << 24));
	ck_assert_uint_eq(s->limit, ((d >> 55) & 1) ? raw_limit * 4096 + 4095 : raw_limit);
	ck_assert_uint_eq(s->type, (d >> 40) & 0xf);
	ck_assert_uint_eq(s->s, (d >> 44) & 1);
	ck_assert_uint_eq(s->dpl, (d >> 45) & 3);
	ck_assert_uint_eq(s->present, (d >> 47) & 1);
	ck_assert_uint_eq(s->l, (d >> 53) & 1);
	ck_assert_uint_eq(s->db, (d >> 54) & 1);
	ck_assert_uint_eq(s->g, (d >> 55) & 1);
	ck_assert_uint_le(s->selector + 7u, 6 * 8 - 1); /* within the GDT limit */
}

START_TEST(sregs_match_gdt)
{
	struct kvm_sregs s = { 0 };

	ck_assert_int_eq(boot_write_gdt_and_page_tables(&ram.m, &err), 0);
	boot_vcpu_sregs(&s);
	check_against_gdt(&s.cs);
	check_against_gdt(&s.ds);
	check_against_gdt(&s.ss);
	check_against_gdt(&s.tr);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("boot_x86");
	TCase *tc = tcase_create("x86");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, gdt_bytes);
	tcase_add_test(tc, page_tables_identity_4g);
	tcase_add_test(tc, tables_need_ram);
	tcase_add_test(tc, regs);
	tcase_add_test(tc, sregs_long_mode);
	tcase_add_test(tc, sregs_match_gdt);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(suite());
}
