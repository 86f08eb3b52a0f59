/* bzImage loader (Linux x86 boot protocol). */
#include <errno.h>

#include "tests/test_boot_common.h"

#define RAM (16 * TB_MIB)
#define CAP (4 * TB_MIB)

static struct tb_ram ram;
static uint8_t img[CAP];
static struct boot_kernel k;
static struct tvm_err err;
static struct tb_bz bz;

static void setup(void)
{
	tb_ram_init(&ram, RAM);
	memset(&k, 0x5a, sizeof(k));
	memset(&err, 0, sizeof(err));
	bz = tb_bz_default();
}

static void teardown(void)
{
	tb_ram_fini(&ram);
}

static size_t build(void)
{
	return tb_build_bzimage(img, CAP, &bz);
}

static int load(size_t len)
{
	return boot_load_kernel(&ram.m, img, len, &k, &err);
}

/* As in test_boot_elf: code, message, zeroed *k, RAM at 1 MiB untouched. */
static void expect_fail(size_t len, int code, const char *what)
{
	static const struct boot_kernel zero;

	memset(&k, 0x5a, sizeof(k));
	ck_assert_int_eq(load(len), -code);
	ck_assert_int_eq(err.code, code);
	ck_assert_msg(strstr(err.msg, what) != NULL, "message \"%s\" lacks \"%s\"", err.msg, what);
	ck_assert(memcmp(&k, &zero, sizeof(k)) == 0);
	ck_assert(tb_all(&ram, 0x100000, 0x1000, TB_FILL));
}

START_TEST(good_bzimage_loads)
{
	size_t len = build(), pm = tb_bz_pm_off(&bz);

	ck_assert_uint_eq(pm, 1024);
	ck_assert_int_eq(load(len), 0);
	ck_assert_int_eq(k.is_bzimage, 1);
	ck_assert_uint_eq(k.entry, 0x100200);
	ck_assert_uint_eq(k.load_start, 0x100000);
	/* Relocatable, 2 MiB aligned: runs at 2 MiB, needs init_size 2 MiB. */
	ck_assert_uint_eq(k.load_end, 0x400000);
	ck_assert_uint_eq(k.protocol, 0x020f);
	ck_assert_uint_eq(k.initrd_addr_max, 0x7fffffff);
	ck_assert_uint_eq(k.cmdline_size, 2047);
	ck_assert_uint_eq(k.pvh_entry, 0);
	ck_assert(memcmp(tb_gpa(&ram, 0x100000, 0x1000), img + pm, 0x1000) == 0);
	ck_assert(tb_all(&ram, 0x101000, 0x1000, TB_FILL));
	ck_assert(tb_all(&ram, 0, 0x100000, TB_FILL)); /* nothing below 1 MiB */
	/* Header copied up to its end (0x202 + 0x6a), zero after. */
	ck_assert(memcmp(k.setup_header, img + 0x1f1, 0x26c - 0x1f1) == 0);
	for (size_t i = 0x26c - 0x1f1; i < sizeof(k.setup_header); i++)
		ck_assert_uint_eq(k.setup_header[i], 0);
}
END_TEST

START_TEST(direct_call_equals_dispatch)
{
	struct boot_kernel k2;
	size_t len = build();

	ck_assert_int_eq(boot_load_bzimage(&ram.m, img, len, &k2, &err), 0);
	ck_assert_int_eq(load(len), 0);
	ck_assert(memcmp(&k, &k2, sizeof(k)) == 0);
}
END_TEST

/* Every truncation of the setup area and of the first 0x200 bytes of the
 * protected-mode code fails with the matching reason; one more byte loads. */
START_TEST(every_truncation)
{
	size_t pm = tb_bz_pm_off(&bz);

	build();
	for (size_t l = 0; l <= pm + 0x200; l++) {
		if (l < 0x206)
			expect_fail(l, ENOEXEC, "not an ELF vmlinux or bzImage");
		else if (l < 0x208)
			expect_fail(l, EINVAL, "setup header truncated");
		else if (l < 0x26c)
			expect_fail(l, EINVAL, "setup header ends at 0x26c, past the end of the");
		else if (l <= pm)
			expect_fail(l, EINVAL, "setup_sects 1 puts the protected-mode code at 0x400, past the end");
		else
			expect_fail(l, EINVAL, "too short for the 64-bit entry at +0x200");
	}
	ck_assert_int_eq(load(pm + 0x201), 0);
	ck_assert_uint_eq(k.load_end, 0x400000);
}
END_TEST

START_TEST(bad_magic)
{
	size_t len = build();

	img[0x1fe] = 0x55;
	img[0x1ff] = 0x55;
	expect_fail(len, EINVAL, "boot_flag 0x5555 at 0x1fe is not 0xaa55");
	build();
	img[0x205] = 's';
	expect_fail(len, ENOEXEC, "not an ELF vmlinux or bzImage");
	ck_assert_int_eq(boot_load_bzimage(&ram.m, img, len, &k, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "no \"HdrS\" magic at 0x202"));
}
END_TEST

START_TEST(old_protocol)
{
	bz.version = 0x0205;
	expect_fail(build(), EINVAL, "boot protocol 2.05 is older than 2.06");
	bz.version = 0x020b;
	expect_fail(build(), EINVAL, "boot protocol 2.11 has no xloadflags (2.12+)");
	bz.version = 0x020c;
	ck_assert_int_eq(load(build()), 0);
	ck_assert_uint_eq(k.protocol, 0x020c);
}
END_TEST

START_TEST(short_or_long_header)
{
	bz.hdr_len = 0x5e; /* ends at 0x260, before init_size */
	expect_fail(build(), EINVAL, "setup header ends at 0x260, before init_size ends at 0x264");
	/* A header longer than boot_params' 0x290 is clamped. */
	bz.hdr_len = 0xff;
	ck_assert_int_eq(load(build()), 0);
	ck_assert(memcmp(k.setup_header, img + 0x1f1, sizeof(k.setup_header)) == 0);
	ck_assert_uint_eq(k.setup_header[0x28f - 0x1f1], tb_byte(0x28f));
}
END_TEST

START_TEST(setup_sects)
{
	bz.setup_sects = 200; /* code at 201 * 512, cut to a 5 KiB file */
	build();
	expect_fail(5120, EINVAL,
		    "setup_sects 200 puts the protected-mode code at 0x19200, past the end of the 5120-byte file");
	bz = tb_bz_default();
	bz.setup_sects = 0; /* means 4 */
	ck_assert_int_eq(load(build()), 0);
	ck_assert(memcmp(tb_gpa(&ram, 0x100000, 0x1000), img + 5 * 512, 0x1000) == 0);
	bz.setup_sects = 255; /* the largest: 128 KiB of setup code */
	ck_assert_int_eq(load(build()), 0);
	ck_assert(memcmp(tb_gpa(&ram, 0x100000, 0x1000), img + 256 * 512, 0x1000) == 0);
}
END_TEST

START_TEST(flags_required)
{
	bz.xloadflags = 0x2; /* XLF_CAN_BE_LOADED_ABOVE_4G alone */
	expect_fail(build(), EINVAL, "xloadflags 0x2 lack XLF_KERNEL_64");
	bz = tb_bz_default();
	bz.loadflags = 0x80;
	expect_fail(build(), EINVAL, "loadflags 0x80 lack LOADED_HIGH");
}
END_TEST

START_TEST(runtime_area)
{
	/* Not relocatable: runs at pref_address. */
	bz.relocatable = 0;
	bz.pref_address = 8 * TB_MIB;
	bz.init_size = 0x100000;
	ck_assert_int_eq(load(build()), 0);
	ck_assert_uint_eq(k.load_end, 9 * TB_MIB);
	/* Relocatable, aligned above pref_address. */
	bz = tb_bz_default();
	bz.kernel_alignment = 0x800000;
	ck_assert_int_eq(load(build()), 0);
	ck_assert_uint_eq(k.load_end, 8 * TB_MIB + 0x200000);
	/* Relocatable, pref_address (LOAD_PHYSICAL_ADDR) above the aligned address. */
	bz.kernel_alignment = 0x200000;
	bz.pref_address = 0x1000000 - 0x200000;
	ck_assert_int_eq(load(build()), 0);
	ck_assert_uint_eq(k.load_end, 16 * TB_MIB);
	/* Payload larger than the runtime area. */
	bz = tb_bz_default();
	bz.pm_size = 3 * TB_MIB;
	bz.init_size = 0x100000;
	ck_assert_int_eq(load(build()), 0);
	ck_assert_uint_eq(k.load_end, 4 * TB_MIB);
	ck_assert(memcmp(tb_gpa(&ram, 0x100000, bz.pm_size), img + 1024, bz.pm_size) == 0);
}
END_TEST

START_TEST(runtime_area_bad)
{
	bz.init_size = 0xe00001; /* 2 MiB + init_size ends one byte past 16 MiB of RAM */
	expect_fail(
		build(), ENOSPC,
		"decompression area (pref_address/kernel_alignment, init_size): [0x200000, +0xe00001) is outside low guest RAM, which ends at 0x1000000 (16 MiB RAM)");
	bz.init_size = 0xe00000;
	ck_assert_int_eq(load(build()), 0);
	ck_assert_uint_eq(k.load_end, RAM);
	memset(tb_gpa(&ram, 0x100000, 0x1000), TB_FILL, 0x1000);

	bz = tb_bz_default();
	bz.relocatable = 0;
	bz.pref_address = UINT64_MAX - 0x1000; /* + init_size wraps */
	expect_fail(build(), ENOSPC, "outside low guest RAM");
	bz.pref_address = 0; /* would decompress over the zero page */
	expect_fail(build(), EINVAL, "[0x0, +0x200000) overlaps the boot area below 1 MiB");
	bz = tb_bz_default();
	bz.kernel_alignment = 0x300000;
	expect_fail(build(), EINVAL, "kernel_alignment 0x300000 is not a power of two");
	bz.kernel_alignment = 0;
	expect_fail(build(), EINVAL, "kernel_alignment 0x0 is not a power of two");
	bz.kernel_alignment = 0x80000000; /* largest u32 power of two: no overflow, just too high */
	expect_fail(build(), ENOSPC, "[0x80000000, +0x200000) is outside low guest RAM");
}
END_TEST

START_TEST(payload_past_ram)
{
	struct tb_ram small;
	struct tvm_err e2 = { 0 };

	tb_ram_init(&small, 2 * TB_MIB);
	bz.pm_size = TB_MIB + 1;
	bz.init_size = 0;
	bz.pref_address = 0x100000;
	bz.relocatable = 0;
	ck_assert_int_eq(boot_load_kernel(&small.m, img, build(), &k, &e2), -ENOSPC);
	ck_assert_str_eq(
		e2.msg,
		"bzImage protected-mode code: [0x100000, +0x100001) is outside low guest RAM, which ends at 0x200000 (2 MiB RAM)");
	ck_assert(tb_all(&small, 0x100000, TB_MIB, TB_FILL));
	bz.pm_size = TB_MIB;
	ck_assert_int_eq(boot_load_kernel(&small.m, img, build(), &k, &e2), 0);
	ck_assert_uint_eq(k.load_end, 2 * TB_MIB);
	tb_ram_fini(&small);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("boot_bzimage");
	TCase *tc = tcase_create("bzimage");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, good_bzimage_loads);
	tcase_add_test(tc, direct_call_equals_dispatch);
	tcase_add_test(tc, every_truncation);
	tcase_add_test(tc, bad_magic);
	tcase_add_test(tc, old_protocol);
	tcase_add_test(tc, short_or_long_header);
	tcase_add_test(tc, setup_sects);
	tcase_add_test(tc, flags_required);
	tcase_add_test(tc, runtime_area);
	tcase_add_test(tc, runtime_area_bad);
	tcase_add_test(tc, payload_past_ram);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) {
		bz = tb_bz_default();
		return tb_write_seed(argv[2], "bzimage_min", img, build());
	}
	return tvm_run_suite(suite());
}
