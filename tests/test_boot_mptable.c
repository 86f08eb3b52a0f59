/* MP table: parsed here at raw MP spec 1.4 offsets, the way Linux's
 * mpparse.c walks it, independently of boot/mpspec.h. */
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

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}

static uint8_t sum(const uint8_t *p, size_t len)
{
	uint8_t s = 0;

	while (len--)
		s += *p++;
	return s;
}

static void check_table(int n)
{
	const uint8_t *fp = tb_gpa(&ram, BOOT_MPTABLE_ADDR, 16), *c, *p;
	uint32_t phys;
	uint16_t len;
	int cpus = 0, buses = 0, ioapics = 0, ints = 0, lints = 0, entries = 0;

	/* Floating pointer: where Linux scans (top 1 KiB below 640 KiB). */
	ck_assert_uint_ge(BOOT_MPTABLE_ADDR, 639 * 1024);
	ck_assert_uint_le(BOOT_MPTABLE_ADDR + 16, 640 * 1024);
	ck_assert(memcmp(fp, "_MP_", 4) == 0);
	phys = get32(fp + 4);
	ck_assert_uint_eq(phys, BOOT_MPC_ADDR);
	ck_assert_uint_eq(fp[8], 1);
	ck_assert_uint_eq(fp[9], 4);
	ck_assert_uint_eq(sum(fp, 16), 0);
	ck_assert_uint_eq(fp[11], 0); /* a config table follows, no default config */

	c = tb_gpa(&ram, phys, 44);
	ck_assert(memcmp(c, "PCMP", 4) == 0);
	len = get16(c + 4);
	ck_assert_uint_eq(len, 44 + 20 * n + 8 + 8 + 16 * 8 + 2 * 8);
	ck_assert_uint_le(phys + len, BOOT_MPTABLE_ADDR); /* below the pointer, so below 0xa0000 */
	c = tb_gpa(&ram, phys, len);
	ck_assert_uint_eq(c[6], 4);
	ck_assert_uint_eq(sum(c, len), 0);
	ck_assert_uint_eq(get16(c + 34), n + 20); /* entry count */
	ck_assert_uint_eq(get32(c + 36), 0xfee00000);
	ck_assert(tb_all(&ram, phys + len, BOOT_MPTABLE_ADDR - phys - len, TB_FILL));

	for (p = c + 44; p < c + len; entries++) {
		switch (p[0]) {
		case 0: /* processor */
			ck_assert_uint_eq(p[1], cpus);
			ck_assert_uint_eq(p[2], 0x14);
			ck_assert_uint_eq(p[3], cpus == 0 ? 3 : 1);
			ck_assert_uint_ne(get32(p + 8) & 0x200, 0); /* CPUID APIC bit */
			cpus++;
			p += 20;
			break;
		case 1:
			ck_assert_uint_eq(p[1], 0);
			ck_assert(memcmp(p + 2, "ISA   ", 6) == 0);
			buses++;
			p += 8;
			break;
		case 2:
			ck_assert_uint_eq(p[1], n);
			ck_assert_uint_eq(p[2], 0x11);
			ck_assert_uint_eq(p[3], 1);
			ck_assert_uint_eq(get32(p + 4), 0xfec00000);
			ioapics++;
			p += 8;
			break;
		case 3: /* ISA IRQ ints -> IOAPIC pin ints, conforming */
			ck_assert_uint_eq(p[1], 0);
			ck_assert_uint_eq(get16(p + 2), 0);
			ck_assert_uint_eq(p[4], 0);
			ck_assert_uint_eq(p[5], ints);
			ck_assert_uint_eq(p[6], n);
			ck_assert_uint_eq(p[7], ints);
			ints++;
			p += 8;
			break;
		case 4: /* LINT0 ExtINT, LINT1 NMI, all local APICs */
			ck_assert_uint_eq(p[1], lints == 0 ? 3 : 1);
			ck_assert_uint_eq(p[6], 0xff);
			ck_assert_uint_eq(p[7], lints);
			lints++;
			p += 8;
			break;
		default: ck_abort_msg("unknown MP entry type %u at +0x%tx", p[0], p - c);
		}
	}
	ck_assert_ptr_eq(p, c + len);
	ck_assert_int_eq(cpus, n);
	ck_assert_int_eq(buses, 1);
	ck_assert_int_eq(ioapics, 1);
	ck_assert_int_eq(ints, 16);
	ck_assert_int_eq(lints, 2);
	ck_assert_int_eq(entries, n + 20);
}

START_TEST(one_cpu)
{
	ck_assert_int_eq(boot_write_mptable(&ram.m, 1, &err), 0);
	check_table(1);
}
END_TEST

START_TEST(four_cpus)
{
	ck_assert_int_eq(boot_write_mptable(&ram.m, 4, &err), 0);
	check_table(4);
}
END_TEST

START_TEST(max_cpus_fit)
{
	ck_assert_int_eq(boot_write_mptable(&ram.m, BOOT_MAX_CPUS, &err), 0);
	check_table(BOOT_MAX_CPUS);
	ck_assert(tb_all(&ram, BOOT_MPTABLE_ADDR + 16, 0xa0000 - BOOT_MPTABLE_ADDR - 16, TB_FILL));
}
END_TEST

START_TEST(bad_cpu_count)
{
	static const int bad[] = { 0, -1, BOOT_MAX_CPUS + 1, 255, -2147483647 - 1 };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[64];

		snprintf(want, sizeof(want), "mptable: %d CPUs is outside 1..64", bad[i]);
		ck_assert_int_eq(boot_write_mptable(&ram.m, bad[i], &err), -EINVAL);
		ck_assert_str_eq(err.msg, want);
	}
	ck_assert(tb_all(&ram, BOOT_MPC_ADDR, 0xa0000 - BOOT_MPC_ADDR, TB_FILL));
}
END_TEST

START_TEST(needs_ram)
{
	struct tb_ram small;

	tb_ram_init(&small, BOOT_MPC_ADDR); /* RAM ends where the config table starts */
	ck_assert_int_eq(boot_write_mptable(&small.m, 2, &err), -EFAULT);
	ck_assert_str_eq(err.msg, "mptable: [0x9f000, 0x9fc10) is not guest RAM");
	ck_assert(tb_all(&small, 0, BOOT_MPC_ADDR, TB_FILL));
	tb_ram_fini(&small);
	tb_ram_init(&small, 0xa0000); /* exactly enough */
	ck_assert_int_eq(boot_write_mptable(&small.m, 2, &err), 0);
	tb_ram_fini(&small);
}
END_TEST

/* The e820 map reserves what the MP table occupies. */
START_TEST(reserved_in_e820)
{
	struct boot_e820 map[8];
	int n = boot_e820(&ram.m, map, 8), found = 0;

	for (int i = 0; i < n; i++) {
		uint64_t end = map[i].addr + map[i].size;

		if (map[i].addr <= BOOT_MPC_ADDR && BOOT_MPTABLE_ADDR + 16 <= end) {
			ck_assert_uint_eq(map[i].type, BOOT_E820_RESERVED);
			found = 1;
		} else {
			ck_assert(end <= BOOT_MPC_ADDR || map[i].addr >= BOOT_MPTABLE_ADDR + 16);
		}
	}
	ck_assert(found);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("boot_mptable");
	TCase *tc = tcase_create("mptable");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, one_cpu);
	tcase_add_test(tc, four_cpus);
	tcase_add_test(tc, max_cpus_fit);
	tcase_add_test(tc, bad_cpu_count);
	tcase_add_test(tc, needs_ram);
	tcase_add_test(tc, reserved_in_e820);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(suite());
}
