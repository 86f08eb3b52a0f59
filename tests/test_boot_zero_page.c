/* Zero page, command line, e820 map and initrd placement. Zero page fields
 * are checked at their raw boot.rst / zero-page.rst offsets, independently
 * of boot/bootparam.h. */
#include <errno.h>

#include "tests/test_boot_common.h"

#define RAM (16 * TB_MIB)
#define CAP 0x4000
#define ZP BOOT_ZERO_PAGE_ADDR

static struct tb_ram ram;
static uint8_t img[CAP];
static struct boot_kernel k;
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

static void load_elf(void)
{
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, tb_good_elf(img, CAP), &k, &err), 0);
}

static void load_bzimage(void)
{
	struct tb_bz bz = tb_bz_default();

	ck_assert_int_eq(boot_load_kernel(&ram.m, img, tb_build_bzimage(img, CAP, &bz), &k, &err), 0);
}

static uint8_t zp8(const struct tb_ram *r, uint64_t off)
{
	return *tb_gpa(r, ZP + off, 1);
}

static uint16_t zp16(const struct tb_ram *r, uint64_t off)
{
	uint16_t v;
	memcpy(&v, tb_gpa(r, ZP + off, 2), 2);
	return v;
}

static uint32_t zp32(const struct tb_ram *r, uint64_t off)
{
	uint32_t v;
	memcpy(&v, tb_gpa(r, ZP + off, 4), 4);
	return v;
}

static uint64_t zp64(const struct tb_ram *r, uint64_t off)
{
	uint64_t v;
	memcpy(&v, tb_gpa(r, ZP + off, 8), 8);
	return v;
}

static void check_e820_entry(const struct boot_e820 *x, uint64_t addr, uint64_t size, uint32_t type)
{
	ck_assert_uint_eq(x->addr, addr);
	ck_assert_uint_eq(x->size, size);
	ck_assert_uint_eq(x->type, type);
}

/* Zero page e820 (0x1e8 count, 0x2d0 table of 20-byte entries) equals boot_e820(). */
static void check_zero_page_e820(const struct tb_ram *r)
{
	struct boot_e820 map[8];
	int n = boot_e820(&r->m, map, 8);

	ck_assert_uint_eq(zp8(r, 0x1e8), n);
	for (int i = 0; i < n; i++) {
		ck_assert_uint_eq(zp64(r, 0x2d0 + 20 * i), map[i].addr);
		ck_assert_uint_eq(zp64(r, 0x2d0 + 20 * i + 8), map[i].size);
		ck_assert_uint_eq(zp32(r, 0x2d0 + 20 * i + 16), map[i].type);
	}
	ck_assert(tb_all(r, ZP + 0x2d0 + 20 * n, 0x1000 - 0x2d0 - 20 * n, 0));
}

START_TEST(e820_small)
{
	struct boot_e820 map[8];

	ck_assert_int_eq(boot_e820(&ram.m, map, 8), 3);
	check_e820_entry(&map[0], 0, 0x9f000, BOOT_E820_RAM);
	check_e820_entry(&map[1], 0x9f000, 0x61000, BOOT_E820_RESERVED);
	check_e820_entry(&map[2], 0x100000, RAM - 0x100000, BOOT_E820_RAM);
}
END_TEST

START_TEST(e820_above_hole)
{
	struct tb_ram big;
	struct boot_e820 map[8];

	tb_ram_init(&big, 5 * TB_GIB);
	ck_assert_int_eq(boot_e820(&big.m, map, 8), 4);
	check_e820_entry(&map[0], 0, 0x9f000, BOOT_E820_RAM);
	check_e820_entry(&map[1], 0x9f000, 0x61000, BOOT_E820_RESERVED);
	check_e820_entry(&map[2], 0x100000, 3 * TB_GIB - 0x100000, BOOT_E820_RAM);
	check_e820_entry(&map[3], 4 * TB_GIB, 2 * TB_GIB, BOOT_E820_RAM);
	tb_ram_fini(&big);

	tb_ram_init(&big, 3 * TB_GIB); /* exactly up to the hole: nothing above */
	ck_assert_int_eq(boot_e820(&big.m, map, 8), 3);
	check_e820_entry(&map[2], 0x100000, 3 * TB_GIB - 0x100000, BOOT_E820_RAM);
	tb_ram_fini(&big);
}
END_TEST

START_TEST(e820_tiny_and_capacity)
{
	struct tb_ram tiny;
	struct boot_e820 map[4];

	tb_ram_init(&tiny, 512 * 1024);
	ck_assert_int_eq(boot_e820(&tiny.m, map, 4), 2);
	check_e820_entry(&map[0], 0, 512 * 1024, BOOT_E820_RAM);
	check_e820_entry(&map[1], 0x9f000, 0x61000, BOOT_E820_RESERVED);
	tb_ram_fini(&tiny);

	/* Too small an array: writes max entries, returns the full count. */
	memset(map, 0x77, sizeof(map));
	ck_assert_int_eq(boot_e820(&ram.m, map, 2), 3);
	check_e820_entry(&map[1], 0x9f000, 0x61000, BOOT_E820_RESERVED);
	ck_assert_uint_eq(map[2].addr, 0x7777777777777777ULL);
	ck_assert_int_eq(boot_e820(&ram.m, map, 0), 3);
}
END_TEST

START_TEST(zero_page_bzimage)
{
	uint64_t initrd;
	uint8_t rd[0x1234];

	load_bzimage();
	tb_fill(rd, 0, sizeof(rd));
	ck_assert_int_eq(boot_load_initrd(&ram.m, &k, rd, sizeof(rd), &initrd, &err), 0);
	ck_assert_int_eq(boot_write_zero_page(&ram.m, &k, "console=ttyS0 quiet", initrd, sizeof(rd), &err), 0);

	/* Setup header as in the image, except the fields the loader writes. */
	for (size_t off = 0x1f1; off < 0x26c; off++) {
		if (off == 0x210 || off == 0x211 || (off >= 0x218 && off < 0x220) || (off >= 0x228 && off < 0x22c))
			continue;
		ck_assert_msg(zp8(&ram, off) == img[off], "zero page byte 0x%zx", off);
	}
	ck_assert_uint_eq(zp16(&ram, 0x1fe), 0xaa55);
	ck_assert_uint_eq(zp16(&ram, 0x206), 0x020f);
	ck_assert_uint_eq(zp8(&ram, 0x210), 0xff);        /* type_of_loader */
	ck_assert_uint_eq(zp8(&ram, 0x211) & 1, 1);       /* LOADED_HIGH */
	ck_assert_uint_eq(zp32(&ram, 0x218), initrd);     /* ramdisk_image */
	ck_assert_uint_eq(zp32(&ram, 0x21c), sizeof(rd)); /* ramdisk_size */
	ck_assert_uint_eq(zp32(&ram, 0x228), BOOT_CMDLINE_ADDR);
	ck_assert_uint_eq(zp32(&ram, 0x0c0), 0); /* ext_ramdisk_image */
	ck_assert_uint_eq(zp32(&ram, 0x0c4), 0);
	ck_assert_uint_eq(zp32(&ram, 0x0c8), 0); /* ext_cmd_line_ptr */
	/* Nothing else: below the header (but e820_entries) and 0x26c..0x2d0. */
	ck_assert(tb_all(&ram, ZP, 0x1e8, 0));
	ck_assert(tb_all(&ram, ZP + 0x1e9, 0x1f1 - 0x1e9, 0));
	ck_assert(tb_all(&ram, ZP + 0x26c, 0x2d0 - 0x26c, 0));
	check_zero_page_e820(&ram);
	ck_assert_str_eq((const char *)tb_gpa(&ram, BOOT_CMDLINE_ADDR, 20), "console=ttyS0 quiet");
	ck_assert(memcmp(tb_gpa(&ram, initrd, sizeof(rd)), rd, sizeof(rd)) == 0);
}
END_TEST

START_TEST(zero_page_elf_synthesised)
{
	load_elf();
	ck_assert_int_eq(boot_write_zero_page(&ram.m, &k, NULL, 0, 0, &err), 0);
	ck_assert_uint_eq(zp16(&ram, 0x1fe), 0xaa55);
	ck_assert(memcmp(tb_gpa(&ram, ZP + 0x202, 4), "HdrS", 4) == 0);
	ck_assert_uint_ge(zp16(&ram, 0x206), 0x020c);
	ck_assert_uint_eq(zp8(&ram, 0x210), 0xff);
	ck_assert_uint_eq(zp8(&ram, 0x211) & 1, 1);
	ck_assert_uint_eq(zp32(&ram, 0x218), 0); /* no initrd */
	ck_assert_uint_eq(zp32(&ram, 0x21c), 0);
	ck_assert_uint_eq(zp32(&ram, 0x228), BOOT_CMDLINE_ADDR);
	ck_assert_uint_eq(zp32(&ram, 0x22c), 0x7fffffff);
	ck_assert_uint_eq(zp32(&ram, 0x230), 0x1000000);
	ck_assert_uint_eq(zp32(&ram, 0x238), BOOT_ELF_CMDLINE_SIZE);
	ck_assert_uint_eq(zp8(&ram, 0x1f1), 0); /* no setup sectors: not a real-mode image */
	check_zero_page_e820(&ram);
	ck_assert_uint_eq(*tb_gpa(&ram, BOOT_CMDLINE_ADDR, 1), 0); /* NULL cmdline is "" */
}
END_TEST

START_TEST(zero_page_high_initrd_fields)
{
	struct tb_ram big;

	tb_ram_init(&big, 9 * TB_GIB); /* 6 GiB above 4 GiB */
	load_elf();
	/* Only the fields are under test: pretend a 4 GiB + 16 initrd at 4 GiB + 4 KiB. */
	ck_assert_int_eq(boot_write_zero_page(&big.m, &k, "x", 4 * TB_GIB + 0x1000, 4 * TB_GIB + 0x10, &err), 0);
	ck_assert_uint_eq(zp32(&big, 0x218), 0x1000);
	ck_assert_uint_eq(zp32(&big, 0x0c0), 1);
	ck_assert_uint_eq(zp32(&big, 0x21c), 0x10);
	ck_assert_uint_eq(zp32(&big, 0x0c4), 1);
	ck_assert_uint_eq(zp8(&big, 0x1e8), 4);
	check_zero_page_e820(&big);
	tb_ram_fini(&big);
}
END_TEST

START_TEST(zero_page_initrd_not_ram)
{
	load_elf();
	ck_assert_int_eq(boot_write_zero_page(&ram.m, &k, "", RAM - 0x1000, 0x1001, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "zero page: initrd [0xfff000, +0x1001) is not guest RAM");
	ck_assert(tb_all(&ram, ZP, 0x1000, TB_FILL));
}
END_TEST

START_TEST(cmdline_limits)
{
	static char line[BOOT_CMDLINE_MAX + 2];

	load_bzimage(); /* cmdline_size 2047 */
	memset(line, 'a', 2048);
	line[2048] = 0;
	ck_assert_int_eq(boot_write_zero_page(&ram.m, &k, line, 0, 0, &err), -E2BIG);
	ck_assert_int_eq(err.code, E2BIG);
	ck_assert_str_eq(err.msg, "command line: 2048 bytes, but the kernel (cmdline_size) accepts at most 2047");
	ck_assert(tb_all(&ram, ZP, 0x1000, TB_FILL));
	ck_assert(tb_all(&ram, BOOT_CMDLINE_ADDR, BOOT_CMDLINE_MAX, TB_FILL));
	line[2047] = 0;
	ck_assert_int_eq(boot_write_zero_page(&ram.m, &k, line, 0, 0, &err), 0);
	ck_assert_uint_eq(strlen((const char *)tb_gpa(&ram, BOOT_CMDLINE_ADDR, 2048)), 2047);

	/* A kernel that accepts more than tinyvmm's buffer. */
	k.cmdline_size = 0xffffffff;
	memset(line, 'b', BOOT_CMDLINE_MAX);
	line[BOOT_CMDLINE_MAX] = 0;
	ck_assert_int_eq(boot_write_zero_page(&ram.m, &k, line, 0, 0, &err), -E2BIG);
	ck_assert_str_eq(err.msg, "command line: 4096 bytes, but tinyvmm (BOOT_CMDLINE_MAX - 1) accepts at most 4095");
	line[BOOT_CMDLINE_MAX - 1] = 0;
	ck_assert_int_eq(boot_write_zero_page(&ram.m, &k, line, 0, 0, &err), 0);
	ck_assert_uint_eq(*tb_gpa(&ram, BOOT_CMDLINE_ADDR + BOOT_CMDLINE_MAX - 1, 1), 0);
}
END_TEST

START_TEST(zero_page_ram_too_small)
{
	struct tb_ram tiny;

	load_elf();
	tb_ram_init(&tiny, 0x8000); /* holds the zero page, not the command line */
	ck_assert_int_eq(boot_write_zero_page(&tiny.m, &k, "x", 0, 0, &err), -EFAULT);
	ck_assert_str_eq(err.msg, "command line: GPA 0x20000 is not guest RAM");
	tb_ram_fini(&tiny);
}
END_TEST

START_TEST(initrd_top_of_ram)
{
	uint8_t rd[0x1234];
	uint64_t gpa = 1;

	tb_fill(rd, 0, sizeof(rd));
	load_elf();
	ck_assert_int_eq(boot_load_initrd(&ram.m, &k, rd, sizeof(rd), &gpa, &err), 0);
	ck_assert_uint_eq(gpa, (RAM - sizeof(rd)) & ~0xfffULL);
	ck_assert_uint_eq(gpa, 0xffe000);
	ck_assert(memcmp(tb_gpa(&ram, gpa, sizeof(rd)), rd, sizeof(rd)) == 0);
	ck_assert(tb_all(&ram, gpa - 0x100, 0x100, TB_FILL));
	ck_assert(tb_all(&ram, gpa + sizeof(rd), RAM - gpa - sizeof(rd), TB_FILL));

	/* Below initrd_addr_max (the highest byte the initrd may occupy). */
	k.initrd_addr_max = 0x7fffff;
	ck_assert_int_eq(boot_load_initrd(&ram.m, &k, rd, sizeof(rd), &gpa, &err), 0);
	ck_assert_uint_eq(gpa, 0x7fe000);
	ck_assert_uint_le(gpa + sizeof(rd) - 1, 0x7fffff);
	/* A whole number of pages ends exactly at initrd_addr_max + 1. */
	ck_assert_int_eq(boot_load_initrd(&ram.m, &k, rd, 0x1000, &gpa, &err), 0);
	ck_assert_uint_eq(gpa, 0x7ff000);
}
END_TEST

START_TEST(initrd_empty)
{
	uint64_t gpa = 1;

	load_elf();
	ck_assert_int_eq(boot_load_initrd(&ram.m, &k, NULL, 0, &gpa, &err), 0);
	ck_assert_uint_eq(gpa, 0);
}
END_TEST

START_TEST(initrd_too_big_or_overlapping)
{
	static uint8_t rd[12 * TB_MIB + 1];
	uint64_t gpa = 1;

	load_bzimage(); /* occupies [1 MiB, 4 MiB) */
	ck_assert_uint_eq(k.load_end, 4 * TB_MIB);
	/* Exactly the free space fits, at the kernel end. */
	ck_assert_int_eq(boot_load_initrd(&ram.m, &k, rd, 12 * TB_MIB, &gpa, &err), 0);
	ck_assert_uint_eq(gpa, 4 * TB_MIB);
	memset(tb_gpa(&ram, 4 * TB_MIB, 12 * TB_MIB), TB_FILL, 12 * TB_MIB);
	ck_assert_int_eq(boot_load_initrd(&ram.m, &k, rd, sizeof(rd), &gpa, &err), -ENOSPC);
	ck_assert_uint_eq(gpa, 0);
	ck_assert_str_eq(
		err.msg,
		"12582913 bytes do not fit between the kernel end 0x400000 and 0x1000000 (12582912 bytes free)");
	/* Would overlap the kernel once page aligned down. */
	k.load_end = RAM - 0x1000 + 1;
	ck_assert_int_eq(boot_load_initrd(&ram.m, &k, rd, 0x10, &gpa, &err), -ENOSPC);
	/* Bigger than the whole address range below the ceiling. */
	k.initrd_addr_max = 0xfff;
	ck_assert_int_eq(boot_load_initrd(&ram.m, &k, rd, 0x2000, &gpa, &err), -ENOSPC);
	ck_assert(tb_all(&ram, 4 * TB_MIB, 12 * TB_MIB, TB_FILL));
}
END_TEST

START_TEST(initrd_big_ram)
{
	struct tb_ram big;
	uint8_t rd[0x100];
	uint64_t gpa;

	tb_ram_init(&big, 5 * TB_GIB);
	tb_fill(rd, 0, sizeof(rd));
	ck_assert_int_eq(boot_load_kernel(&big.m, img, tb_good_elf(img, CAP), &k, &err), 0);
	/* ELF: initrd_addr_max 0x7fffffff caps it at 2 GiB. */
	ck_assert_int_eq(boot_load_initrd(&big.m, &k, rd, sizeof(rd), &gpa, &err), 0);
	ck_assert_uint_eq(gpa, 2 * TB_GIB - 0x1000);
	ck_assert(memcmp(tb_gpa(&big, gpa, sizeof(rd)), rd, sizeof(rd)) == 0);
	/* 0xffffffff: the MMIO hole caps it, never above 4 GiB. */
	k.initrd_addr_max = 0xffffffff;
	ck_assert_int_eq(boot_load_initrd(&big.m, &k, rd, sizeof(rd), &gpa, &err), 0);
	ck_assert_uint_eq(gpa, GM_MMIO_HOLE_START - 0x1000);
	tb_ram_fini(&big);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("boot_zero_page");
	TCase *tc = tcase_create("zero_page");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, e820_small);
	tcase_add_test(tc, e820_above_hole);
	tcase_add_test(tc, e820_tiny_and_capacity);
	tcase_add_test(tc, zero_page_bzimage);
	tcase_add_test(tc, zero_page_elf_synthesised);
	tcase_add_test(tc, zero_page_high_initrd_fields);
	tcase_add_test(tc, zero_page_initrd_not_ram);
	tcase_add_test(tc, cmdline_limits);
	tcase_add_test(tc, zero_page_ram_too_small);
	tcase_add_test(tc, initrd_top_of_ram);
	tcase_add_test(tc, initrd_empty);
	tcase_add_test(tc, initrd_too_big_or_overlapping);
	tcase_add_test(tc, initrd_big_ram);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(suite());
}
