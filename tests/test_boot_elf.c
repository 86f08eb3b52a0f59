/* ELF vmlinux loader and the kernel-format dispatch. */
#include <errno.h>

#include "tests/test_boot_common.h"

#define RAM (16 * TB_MIB)
#define CAP 0x4000

static struct tb_ram ram;
static uint8_t img[CAP];
static struct boot_kernel k;
static struct tvm_err err;

static void setup(void)
{
	tb_ram_init(&ram, RAM);
	memset(&k, 0x5a, sizeof(k)); /* so a failed load visibly zeroes it */
	memset(&err, 0, sizeof(err));
}

static void teardown(void)
{
	tb_ram_fini(&ram);
}

static Elf64_Ehdr *ehdr(void)
{
	return (Elf64_Ehdr *)img;
}

static Elf64_Phdr *phdr(int i)
{
	return (Elf64_Phdr *)(img + sizeof(Elf64_Ehdr) + (size_t)i * sizeof(Elf64_Phdr));
}

/* Load must fail with code, a message containing what, a zeroed *k and
 * nothing written where the reference segments would go. */
static void expect_fail(size_t len, int code, const char *what)
{
	static const struct boot_kernel zero;
	int r = boot_load_kernel(&ram.m, img, len, &k, &err);

	ck_assert_int_eq(r, -code);
	ck_assert_int_eq(err.code, code);
	ck_assert_msg(strstr(err.msg, what) != NULL, "message \"%s\" lacks \"%s\"", err.msg, what);
	ck_assert(memcmp(&k, &zero, sizeof(k)) == 0);
	ck_assert(tb_all(&ram, 0x100000, 0x1000, TB_FILL));
	ck_assert(tb_all(&ram, 0x200000, 0x100, TB_FILL));
}

START_TEST(good_elf_loads_segments)
{
	size_t len = tb_good_elf(img, CAP);

	ck_assert_uint_eq(len, 0x1400);
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.entry, TB_ELF_ENTRY);
	ck_assert_uint_eq(k.load_start, 0x100000);
	ck_assert_uint_eq(k.load_end, 0x200100);
	ck_assert_int_eq(k.is_bzimage, 0);
	ck_assert_uint_eq(k.protocol, 0);
	ck_assert_uint_eq(k.initrd_addr_max, 0x7fffffff);
	ck_assert_uint_eq(k.cmdline_size, BOOT_ELF_CMDLINE_SIZE);
	ck_assert_uint_eq(k.pvh_entry, 0);
	/* File bytes at their p_paddr, bss zeroed, nothing beyond p_memsz. */
	ck_assert(memcmp(tb_gpa(&ram, 0x100000, 0x300), img + 0x1000, 0x300) == 0);
	ck_assert(tb_all(&ram, 0x100300, 0xd00, 0));
	ck_assert(tb_all(&ram, 0x101000, 0x100, TB_FILL));
	ck_assert(tb_all(&ram, 0xff000, 0x1000, TB_FILL));
	ck_assert(memcmp(tb_gpa(&ram, 0x200000, 0x100), img + 0x1300, 0x100) == 0);
	ck_assert(tb_all(&ram, 0x200100, 0x100, TB_FILL));
}
END_TEST

START_TEST(plan_lists_segments_and_copies_nothing)
{
	size_t len = tb_good_elf(img, CAP);

	ck_assert_int_eq(boot_plan_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.entry, TB_ELF_ENTRY);
	ck_assert_uint_eq(k.load_start, 0x100000);
	ck_assert_uint_eq(k.load_end, 0x200100);
	ck_assert_int_eq(k.nsegs, 2);
	ck_assert_uint_eq(k.segs[0].gpa, 0x100000);
	ck_assert_uint_eq(k.segs[0].file_off, 0x1000);
	ck_assert_uint_eq(k.segs[0].filesz, 0x300);
	ck_assert_uint_eq(k.segs[0].memsz, 0x1000);
	ck_assert_uint_eq(k.segs[1].gpa, 0x200000);
	ck_assert_uint_eq(k.segs[1].file_off, 0x1300);
	ck_assert_uint_eq(k.segs[1].filesz, 0x100);
	/* The caller places the bytes: RAM is as it was. */
	ck_assert(tb_all(&ram, 0x100000, 0x1000, TB_FILL));
	ck_assert(tb_all(&ram, 0x200000, 0x200, TB_FILL));
	/* The same checks as a load: a truncated image is refused, k zeroed. */
	ck_assert_int_eq(boot_plan_kernel(&ram.m, img, 0x1200, &k, &err), -EINVAL);
	ck_assert_int_eq(k.nsegs, 0);
}
END_TEST

START_TEST(direct_call_equals_dispatch)
{
	struct boot_kernel k2;
	size_t len = tb_good_elf(img, CAP);

	ck_assert_int_eq(boot_load_elf(&ram.m, img, len, &k2, &err), 0);
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert(memcmp(&k, &k2, sizeof(k)) == 0);
}
END_TEST

/* Every truncation fails cleanly: the header area, the program headers and
 * the segment data (the last segment ends at the end of the file). */
START_TEST(every_truncation_fails)
{
	size_t len = tb_good_elf(img, CAP);

	for (size_t l = 0; l < len; l++) {
		int code = l < SELFMAG ? ENOEXEC : EINVAL;
		const char *what = l < SELFMAG                                       ? "not an ELF vmlinux or bzImage"
				   : l < sizeof(Elf64_Ehdr)                          ? "ELF header truncated"
				   : l < sizeof(Elf64_Ehdr) + 2 * sizeof(Elf64_Phdr) ? "program headers"
										     : "file range";

		memset(&k, 0x5a, sizeof(k));
		expect_fail(l, code, what);
	}
}
END_TEST

START_TEST(wrong_ident_machine_type)
{
	size_t len = tb_good_elf(img, CAP);

	ehdr()->e_ident[EI_CLASS] = ELFCLASS32;
	expect_fail(len, EINVAL, "not ELFCLASS64");
	tb_good_elf(img, CAP);
	ehdr()->e_ident[EI_DATA] = ELFDATA2MSB;
	expect_fail(len, EINVAL, "not little-endian");
	tb_good_elf(img, CAP);
	ehdr()->e_ident[EI_VERSION] = 0;
	expect_fail(len, EINVAL, "EV_CURRENT");
	tb_good_elf(img, CAP);
	ehdr()->e_machine = EM_386;
	expect_fail(len, EINVAL, "machine 3 is not EM_X86_64");
	tb_good_elf(img, CAP);
	ehdr()->e_type = ET_DYN;
	expect_fail(len, EINVAL, "type 3 is not ET_EXEC");
	tb_good_elf(img, CAP);
	ehdr()->e_phentsize = 32;
	expect_fail(len, EINVAL, "e_phentsize 32");
}
END_TEST

START_TEST(bad_program_header_table)
{
	size_t len = tb_good_elf(img, CAP);

	ehdr()->e_phnum = 0;
	expect_fail(len, EINVAL, "e_phnum 0");
	ehdr()->e_phnum = PN_XNUM;
	expect_fail(len, EINVAL, "e_phnum 65535");
	ehdr()->e_phnum = 0xfffe; /* 3.6 MB of headers in a 5 KiB file */
	expect_fail(len, EINVAL, "program headers [0x40, +65534 * 56) are outside the 5120-byte file");
	ehdr()->e_phnum = 2;
	ehdr()->e_phoff = UINT64_MAX - 8; /* offset + size would wrap */
	expect_fail(len, EINVAL, "are outside the");
	ehdr()->e_phoff = len - sizeof(Elf64_Phdr);
	expect_fail(len, EINVAL, "are outside the");
}
END_TEST

START_TEST(file_range_overflow_and_bounds)
{
	size_t len = tb_good_elf(img, CAP);

	/* p_offset + p_filesz wraps past 2^64 to a small value. */
	phdr(0)->p_filesz = UINT64_MAX - 0x800;
	phdr(0)->p_memsz = UINT64_MAX;
	expect_fail(len, EINVAL, "program header 0: file range [0x1000, +0xfffffffffffff7ff)");
	tb_good_elf(img, CAP);
	phdr(1)->p_offset = UINT64_MAX;
	phdr(1)->p_filesz = 2;
	expect_fail(len, EINVAL, "program header 1: file range");
	tb_good_elf(img, CAP);
	phdr(1)->p_filesz = 0x101; /* one byte past the end of the file */
	phdr(1)->p_memsz = 0x200;
	expect_fail(len, EINVAL, "outside the 5120-byte file");
}
END_TEST

START_TEST(filesz_greater_than_memsz)
{
	size_t len = tb_good_elf(img, CAP);

	phdr(0)->p_memsz = 0x2ff;
	expect_fail(len, EINVAL, "program header 0: p_filesz 0x300 > p_memsz 0x2ff");
}
END_TEST

START_TEST(segment_outside_guest_ram)
{
	size_t len = tb_good_elf(img, CAP);

	phdr(1)->p_paddr = RAM - 0x80; /* straddles the end of RAM */
	expect_fail(len, ENOSPC, "program header 1 segment: [0xffff80, +0x100) is outside low guest RAM");
	phdr(1)->p_paddr = UINT64_MAX - 0x10; /* paddr + memsz wraps */
	expect_fail(len, ENOSPC, "outside low guest RAM");
	tb_good_elf(img, CAP);
	phdr(0)->p_memsz = UINT64_MAX;
	expect_fail(len, ENOSPC, "program header 0 segment");
}
END_TEST

START_TEST(segment_in_boot_area)
{
	size_t len = tb_good_elf(img, CAP);

	phdr(0)->p_paddr = BOOT_ZERO_PAGE_ADDR;
	ehdr()->e_entry = BOOT_ZERO_PAGE_ADDR;
	expect_fail(len, EINVAL, "[0x7000, +0x1000) overlaps the boot area below 1 MiB");
}
END_TEST

START_TEST(overlapping_segments)
{
	struct tb_seg s[] = { { PT_LOAD, 0x200000, 0x1000, 0x300, 0x1000 },
			      { PT_LOAD, 0x1fff01, 0x1300, 0x100, 0x100 } };
	size_t len = tb_good_elf(img, CAP);

	phdr(1)->p_paddr = 0x100fff; /* its first byte is segment 0's last bss byte */
	expect_fail(len, EINVAL,
		    "program header 1: segment [0x100fff, +0x100) overlaps an earlier one at [0x100000, +0x1000)");
	/* Its last byte is the earlier segment's first. */
	len = tb_build_elf(img, CAP, 0x200000, s, 2);
	expect_fail(len, EINVAL,
		    "program header 1: segment [0x1fff01, +0x100) overlaps an earlier one at [0x200000, +0x1000)");
}
END_TEST

START_TEST(adjacent_segments)
{
	struct tb_seg s[] = { { PT_LOAD, 0x200000, 0x1000, 0x300, 0x1000 },
			      { PT_LOAD, 0x1fff00, 0x1300, 0x100, 0x100 } };
	size_t len = tb_good_elf(img, CAP);

	phdr(1)->p_paddr = 0x101000; /* right after segment 0 */
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.load_end, 0x101100);
	ck_assert(memcmp(tb_gpa(&ram, 0x101000, 0x100), img + 0x1300, 0x100) == 0);
	len = tb_build_elf(img, CAP, 0x200000, s, 2); /* right before it */
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.load_start, 0x1fff00);
	ck_assert_uint_eq(k.load_end, 0x201000);
	ck_assert(memcmp(tb_gpa(&ram, 0x1fff00, 0x100), img + 0x1300, 0x100) == 0);
}
END_TEST

START_TEST(entry_outside_segments)
{
	size_t len = tb_good_elf(img, CAP);

	ehdr()->e_entry = 0x101000; /* one past segment 0's p_memsz */
	expect_fail(len, EINVAL, "entry point 0x101000 is not inside a loaded segment");
	ehdr()->e_entry = 0xffffffff81000000ULL; /* a virtual address */
	expect_fail(len, EINVAL, "entry point");
	ehdr()->e_entry = 0x100fff; /* last bss byte: inside */
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.entry, 0x100fff);
}
END_TEST

START_TEST(non_load_and_empty_segments_ignored)
{
	struct tb_seg s[] = {
		{ PT_NOTE, 0x7000, 0x1000, 0x10, 0x10 }, /* not loaded, so not in the boot area */
		{ PT_LOAD, 0x300000, 0x1010, 0, 0 },     /* empty */
		{ PT_GNU_STACK, 0, 0, 0, 0 },
		{ PT_LOAD, 0x100000, 0x1000, 0x300, 0x1000 },
	};
	size_t len = tb_build_elf(img, CAP, TB_ELF_ENTRY, s, 4);

	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.load_start, 0x100000);
	ck_assert_uint_eq(k.load_end, 0x101000);
	ck_assert(tb_all(&ram, 0x7000, 0x10, TB_FILL));
	ck_assert(tb_all(&ram, 0x300000, 0x10, TB_FILL));

	memset(tb_gpa(&ram, 0x100000, 0x1000), TB_FILL, 0x1000);
	s[3].type = PT_NOTE;
	len = tb_build_elf(img, CAP, TB_ELF_ENTRY, s, 4);
	expect_fail(len, EINVAL, "no non-empty PT_LOAD segment");
}
END_TEST

START_TEST(too_many_load_segments)
{
	struct tb_seg s[33];

	for (int i = 0; i < 33; i++)
		s[i] = (struct tb_seg){ PT_LOAD, 0x100000 + (uint64_t)i * 0x1000, 0x1000 + (uint64_t)i * 16, 16,
					0x1000 };
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, tb_build_elf(img, CAP, TB_ELF_ENTRY, s, 32), &k, &err), 0);
	ck_assert_uint_eq(k.load_end, 0x120000);
	memset(tb_gpa(&ram, 0x100000, 0x20000), TB_FILL, 0x20000);
	expect_fail(tb_build_elf(img, CAP, TB_ELF_ENTRY, s, 33), EINVAL,
		    "program header 32: more than 32 PT_LOAD segments");
}
END_TEST

START_TEST(segment_above_4g_rejected)
{
	struct tb_ram big;
	size_t len = tb_good_elf(img, CAP);
	struct tvm_err e2 = { 0 };

	tb_ram_init(&big, 5 * TB_GIB); /* [0, 3 GiB) and [4 GiB, 6 GiB) */
	ck_assert_int_eq(big.m.nr, 2);
	phdr(1)->p_paddr = 4 * TB_GIB; /* RAM, but not low RAM */
	ck_assert_int_eq(boot_load_kernel(&big.m, img, len, &k, &e2), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(e2.msg, "low guest RAM, which ends at 0xc0000000"));
	phdr(1)->p_paddr = GM_MMIO_HOLE_START - 0x80; /* straddles into the hole */
	ck_assert_int_eq(boot_load_kernel(&big.m, img, len, &k, &e2), -ENOSPC);
	phdr(1)->p_paddr = GM_MMIO_HOLE_START - 0x100; /* just fits */
	ck_assert_int_eq(boot_load_kernel(&big.m, img, len, &k, &e2), 0);
	ck_assert_uint_eq(k.load_end, GM_MMIO_HOLE_START);
	tb_ram_fini(&big);
}
END_TEST

/* A PT_NOTE holding a Xen note of type 18 (PHYS32_ENTRY). */
static size_t elf_with_note(uint32_t namesz, const char *name, uint32_t descsz, uint64_t entry)
{
	struct tb_seg s[] = { tb_elf_segs[0], tb_elf_segs[1], { PT_NOTE, 0, 0x1400, 0, 0 } };
	uint8_t note[64] = { 0 };
	size_t nl = 12, len;

	memcpy(note, &namesz, 4);
	memcpy(note + 4, &descsz, 4);
	memcpy(note + 8, &(uint32_t){ 18 }, 4);
	memcpy(note + 12, name, strlen(name) + 1);
	nl += (strlen(name) + 1 + 3) & ~3u;
	memcpy(note + nl, &entry, 8);
	nl += 8;
	s[2].filesz = nl;
	s[2].memsz = nl;
	len = tb_build_elf(img, CAP, TB_ELF_ENTRY, s, 3);
	memcpy(img + 0x1400, note, nl);
	return len;
}

START_TEST(pvh_note_detected)
{
	size_t len = elf_with_note(4, "Xen", 8, 0x100020);

	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.pvh_entry, 0x100020);
	ck_assert_uint_eq(k.entry, TB_ELF_ENTRY);

	len = elf_with_note(4, "Xen", 4, 0x200004); /* 32-bit descriptor */
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.pvh_entry, 0x200004);
}
END_TEST

START_TEST(pvh_note_ignored_when_bad)
{
	size_t len = elf_with_note(4, "Xen", 8, 0x500000); /* not in a segment */

	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.pvh_entry, 0);
	len = elf_with_note(4, "Gnu", 8, 0x100020); /* other owner */
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.pvh_entry, 0);
	len = elf_with_note(0xffffffff, "Xen", 8, 0x100020); /* namesz runs off the note */
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.pvh_entry, 0);
	len = elf_with_note(4, "Xen", 0xfffffffd, 0x100020); /* descsz wraps when padded in 32 bits */
	ck_assert_int_eq(boot_load_kernel(&ram.m, img, len, &k, &err), 0);
	ck_assert_uint_eq(k.pvh_entry, 0);
}
END_TEST

START_TEST(not_a_kernel)
{
	memset(img, 0, CAP);
	expect_fail(CAP, ENOEXEC, "not an ELF vmlinux or bzImage (16384 bytes");
	expect_fail(0, ENOEXEC, "not an ELF vmlinux or bzImage");
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("boot_elf");
	TCase *tc = tcase_create("elf");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, good_elf_loads_segments);
	tcase_add_test(tc, direct_call_equals_dispatch);
	tcase_add_test(tc, plan_lists_segments_and_copies_nothing);
	tcase_add_test(tc, every_truncation_fails);
	tcase_add_test(tc, wrong_ident_machine_type);
	tcase_add_test(tc, bad_program_header_table);
	tcase_add_test(tc, file_range_overflow_and_bounds);
	tcase_add_test(tc, filesz_greater_than_memsz);
	tcase_add_test(tc, segment_outside_guest_ram);
	tcase_add_test(tc, segment_in_boot_area);
	tcase_add_test(tc, overlapping_segments);
	tcase_add_test(tc, adjacent_segments);
	tcase_add_test(tc, entry_outside_segments);
	tcase_add_test(tc, non_load_and_empty_segments_ignored);
	tcase_add_test(tc, too_many_load_segments);
	tcase_add_test(tc, segment_above_4g_rejected);
	tcase_add_test(tc, pvh_note_detected);
	tcase_add_test(tc, pvh_note_ignored_when_bad);
	tcase_add_test(tc, not_a_kernel);
	suite_add_tcase(s, tc);
	return s;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) {
		size_t len = tb_good_elf(img, CAP);

		if (tb_write_seed(argv[2], "elf_min", img, len))
			return EXIT_FAILURE;
		len = elf_with_note(4, "Xen", 8, 0x100020);
		return tb_write_seed(argv[2], "elf_pvh_note", img, len);
	}
	return tvm_run_suite(suite());
}
