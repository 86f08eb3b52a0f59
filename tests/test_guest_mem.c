#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vmm/core/guest_mem.h"
#include "tests/unit.h"

START_TEST(small_layout)
{
	struct guest_mem m;
	struct tvm_err e = { 0 };

	ck_assert_int_eq(gm_init_anon(&m, 16 << 20, &e), 0);
	ck_assert_int_eq(m.nr, 1);
	ck_assert_uint_eq(gm_low_end(&m), 16 << 20);
	ck_assert_ptr_eq(gm_ptr(&m, 0, 16 << 20), m.base);
	ck_assert_ptr_eq(gm_ptr(&m, (16 << 20) - 1, 1), m.base + (16 << 20) - 1);
	ck_assert_ptr_null(gm_ptr(&m, (16 << 20) - 1, 2));
	ck_assert_ptr_null(gm_ptr(&m, 16 << 20, 0));
	ck_assert_ptr_null(gm_ptr(&m, 16 << 20, 1));
	ck_assert_ptr_null(gm_ptr(&m, 4096, UINT64_MAX));
	ck_assert_ptr_null(gm_ptr(&m, UINT64_MAX, 2));
	ck_assert_ptr_null(gm_ptr(&m, UINT64_MAX - 4095, 4096));
	gm_destroy(&m);
}
END_TEST

START_TEST(hole_layout)
{
	/* 4 GiB of RAM: 3 GiB below the hole, 1 GiB at 4 GiB. Reserved, never
	 * touched beyond a few pages. */
	uint64_t size = 4ULL << 30;
	void *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct guest_mem m;
	uint32_t v = 0xdeadbeef, got = 0;

	ck_assert_ptr_ne(buf, MAP_FAILED);
	ck_assert_int_eq(gm_init_buffer(&m, buf, size, NULL), 0);
	ck_assert_int_eq(m.nr, 2);
	ck_assert_uint_eq(gm_low_end(&m), GM_MMIO_HOLE_START);
	ck_assert_uint_eq(m.r[1].gpa, GM_MMIO_HOLE_END);
	ck_assert_uint_eq(m.r[1].size, size - GM_MMIO_HOLE_START);
	/* Nothing in the hole, and no access spans it. */
	ck_assert_ptr_null(gm_ptr(&m, GM_MMIO_HOLE_START, 1));
	ck_assert_ptr_null(gm_ptr(&m, 0xfee00000, 4));
	ck_assert_ptr_null(gm_ptr(&m, GM_MMIO_HOLE_START - 2, 4));
	ck_assert_ptr_eq(gm_ptr(&m, GM_MMIO_HOLE_END, 8), (uint8_t *)buf + GM_MMIO_HOLE_START);
	ck_assert_int_eq(gm_write(&m, GM_MMIO_HOLE_END + 16, &v, 4), 0);
	ck_assert_int_eq(gm_read(&m, GM_MMIO_HOLE_END + 16, &got, 4), 0);
	ck_assert_uint_eq(got, v);
	ck_assert_int_eq(gm_read(&m, GM_MMIO_HOLE_END + m.r[1].size - 2, &got, 4), -EFAULT);
	ck_assert_int_eq(gm_write(&m, GM_MMIO_HOLE_START - 2, &v, 4), -EFAULT);
	gm_destroy(&m); /* does not unmap a caller's buffer */
	munmap(buf, size);
}
END_TEST

START_TEST(bad_sizes)
{
	struct guest_mem m;
	struct tvm_err e = { 0 };
	char buf[8192];

	ck_assert_int_eq(gm_init_anon(&m, 0, &e), -EINVAL);
	ck_assert_int_eq(gm_init_anon(&m, 4097, &e), -EINVAL);
	ck_assert_int_eq(gm_init_buffer(&m, buf, (1ULL << 40) + 4096, &e), -EINVAL);
	ck_assert_int_eq(e.code, EINVAL);
	ck_assert_int_eq(m.nr, 0);
	ck_assert_ptr_null(gm_ptr(&m, 0, 1));
}
END_TEST

START_TEST(map_file_is_private_and_checked)
{
	struct guest_mem m;
	char path[] = "/tmp/tinyvmm-gm-XXXXXX";
	uint8_t page[8192], back[8192];
	int fd = mkstemp(path);

	ck_assert_int_ge(fd, 0);
	unlink(path);
	for (size_t i = 0; i < sizeof(page); i++)
		page[i] = (uint8_t)(i * 7);
	ck_assert_int_eq(write(fd, page, sizeof(page)), (ssize_t)sizeof(page));
	ck_assert_int_eq(gm_init_anon(&m, 16 << 20, NULL), 0);
	ck_assert_int_eq(gm_map_file(&m, 0x100000, fd, 0, 8192), 0);
	ck_assert_int_eq(gm_read(&m, 0x100000, back, 8192), 0);
	ck_assert_int_eq(memcmp(back, page, 8192), 0);
	/* Guest writes stay private: the file is unchanged. */
	ck_assert_int_eq(gm_write(&m, 0x100000, "zz", 2), 0);
	ck_assert_int_eq(pread(fd, back, 2, 0), 2);
	ck_assert_uint_eq(back[0], page[0]);
	ck_assert_uint_eq(back[1], page[1]);
	/* RAM around it is untouched. */
	ck_assert_int_eq(gm_read(&m, 0x100000 - 1, back, 1), 0);
	ck_assert_uint_eq(back[0], 0);
	ck_assert_int_eq(gm_map_file(&m, 0x100001, fd, 0, 4096), -EINVAL);
	ck_assert_int_eq(gm_map_file(&m, 0x100000, fd, 1, 4096), -EINVAL);
	ck_assert_int_eq(gm_map_file(&m, 0x100000, fd, 0, 100), -EINVAL);
	ck_assert_int_eq(gm_map_file(&m, 0x100000, fd, 0, 0), -EINVAL);
	ck_assert_int_eq(gm_map_file(&m, (16 << 20) - 4096, fd, 0, 8192), -EFAULT);
	gm_destroy(&m);
	close(fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("guest_mem");
	TCase *tc = tcase_create("guest_mem");

	tcase_add_test(tc, small_layout);
	tcase_add_test(tc, hole_layout);
	tcase_add_test(tc, bad_sizes);
	tcase_add_test(tc, map_file_is_private_and_checked);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
