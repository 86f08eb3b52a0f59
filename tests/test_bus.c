#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "vmm/kvm/bus.h"
#include "tests/unit.h"

struct rec {
	uint64_t off;
	uint32_t len;
	bool write;
	int calls;
	uint8_t val;
};

static void dev(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct rec *r = opaque;

	r->off = off;
	r->len = len;
	r->write = is_write;
	r->calls++;
	if (is_write)
		r->val = data[0];
	else
		memset(data, 0x5a, len);
}

START_TEST(overlap_rejected)
{
	struct bus b = { 0 };
	struct tvm_err e = { 0 };
	struct rec r = { 0 };

	ck_assert_int_eq(bus_register(&b, 0x100, 0x10, "a", dev, &r, &e), 0);
	ck_assert_int_eq(bus_register(&b, 0x10f, 1, "b", dev, &r, &e), -EEXIST);
	ck_assert_ptr_nonnull(strstr(e.msg, "overlaps a"));
	ck_assert_int_eq(bus_register(&b, 0xf0, 0x11, "c", dev, &r, &e), -EEXIST);
	ck_assert_int_eq(bus_register(&b, 0x0, 0x1000, "d", dev, &r, &e), -EEXIST);
	/* Adjacent on both sides is fine. */
	ck_assert_int_eq(bus_register(&b, 0x110, 0x10, "e", dev, &r, &e), 0);
	ck_assert_int_eq(bus_register(&b, 0xf0, 0x10, "f", dev, &r, &e), 0);
	ck_assert_int_eq(b.n, 3);
	ck_assert_uint_eq(b.r[0].base, 0xf0);
	ck_assert_uint_eq(b.r[2].base, 0x110);
}
END_TEST

START_TEST(bad_ranges)
{
	struct bus b = { 0 };
	struct tvm_err e = { 0 };

	ck_assert_int_eq(bus_register(&b, 0x100, 0, "zero", dev, NULL, &e), -EINVAL);
	ck_assert_int_eq(bus_register(&b, UINT64_MAX, 2, "wrap", dev, NULL, &e), -EINVAL);
	ck_assert_int_eq(bus_register(&b, UINT64_MAX, 1, "last byte", dev, NULL, &e), 0);
	for (int i = 1; i < BUS_MAX_RANGES; i++)
		ck_assert_int_eq(bus_register(&b, (uint64_t)i * 16, 16, "many", dev, NULL, &e), 0);
	ck_assert_int_eq(bus_register(&b, 0x100000, 1, "one too many", dev, NULL, &e), -ENOSPC);
}
END_TEST

START_TEST(dispatch)
{
	struct bus b = { 0 };
	struct rec r1 = { 0 }, r2 = { 0 };
	uint8_t data[8] = { 0x42 };

	ck_assert_int_eq(bus_register(&b, 0x3f8, 8, "uart", dev, &r1, NULL), 0);
	ck_assert_int_eq(bus_register(&b, 0xd0000000, 0x200, "mmio", dev, &r2, NULL), 0);
	ck_assert_int_eq(bus_dispatch(&b, 0x3fd, data, 1, true), 0);
	ck_assert_int_eq(r1.calls, 1);
	ck_assert_uint_eq(r1.off, 5);
	ck_assert_uint_eq(r1.val, 0x42);
	ck_assert_int_eq(bus_dispatch(&b, 0xd0000100, data, 4, false), 0);
	ck_assert_uint_eq(r2.off, 0x100);
	ck_assert_uint_eq(data[3], 0x5a);
	/* Unhandled reads float high; nothing is called. */
	ck_assert_int_eq(bus_dispatch(&b, 0x2f8, data, 2, false), -ENOENT);
	ck_assert_uint_eq(data[0], 0xff);
	ck_assert_uint_eq(data[1], 0xff);
	/* An access that straddles the end of a range is not the device's. */
	ck_assert_int_eq(bus_dispatch(&b, 0xd00001fe, data, 4, false), -ENOENT);
	ck_assert_int_eq(bus_dispatch(&b, 0x3ff, data, 2, true), -ENOENT);
	ck_assert_int_eq(r1.calls, 1);
	ck_assert_int_eq(r2.calls, 1);
	ck_assert_ptr_null(bus_find(&b, 0x400));
	ck_assert_ptr_null(bus_find(&b, 0x3f7));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bus");
	TCase *tc = tcase_create("bus");

	tcase_add_test(tc, overlap_rejected);
	tcase_add_test(tc, bad_ranges);
	tcase_add_test(tc, dispatch);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
