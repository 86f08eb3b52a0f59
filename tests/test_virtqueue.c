#include <check.h>
#include <errno.h>

#include "devices/virtio/virtqueue.h"
#include "tests/test_virtio_driver.h"
#include "tests/unit.h"

#define QS 16
#define IND 0x40000 /* an indirect table */
#define F_IND (1ULL << VIRTIO_RING_F_INDIRECT_DESC)
#define F_EVT (1ULL << VIRTIO_RING_F_EVENT_IDX)

static struct td d;
static struct virtqueue vq;
static struct vq_chain c;

static int enable(uint16_t num, uint64_t desc, uint64_t avail, uint64_t used, uint64_t features)
{
	vq_reset(&vq);
	vq.num = num;
	vq.desc_gpa = desc;
	vq.avail_gpa = avail;
	vq.used_gpa = used;
	return vq_enable(&vq, &d.mem, VQ_MAX_SIZE, features, NULL);
}

static void setup(void)
{
	td_init(&d, QS);
	ck_assert_int_eq(enable(QS, TD_DESC, TD_AVAIL, TD_USED, F_IND | F_EVT), 0);
}

static void teardown(void)
{
	td_fini(&d);
}

/* The shape of the popped chain. */
static void assert_chain(uint16_t head, uint16_t n, uint16_t nreadable, uint32_t rlen, uint32_t wlen)
{
	ck_assert_uint_eq(c.head, head);
	ck_assert_uint_eq(c.n, n);
	ck_assert_uint_eq(c.nreadable, nreadable);
	ck_assert_uint_eq(c.readable_len, rlen);
	ck_assert_uint_eq(c.writable_len, wlen);
}

/* The queue must now be broken for good. */
static void assert_broken(void)
{
	ck_assert_int_eq(vq_pop(&vq, &c), -EIO);
	ck_assert(vq.broken);
	ck_assert_int_eq(vq_pop(&vq, &c), -EIO);
}

START_TEST(enable_rejects_bad_layouts)
{
	struct tvm_err e = { 0 };

	ck_assert_int_eq(enable(0, TD_DESC, TD_AVAIL, TD_USED, 0), -EINVAL);
	ck_assert_int_eq(enable(3, TD_DESC, TD_AVAIL, TD_USED, 0), -EINVAL);
	ck_assert_int_eq(enable(48, TD_DESC, TD_AVAIL, TD_USED, 0), -EINVAL);
	/* Over the device's maximum. */
	vq_reset(&vq);
	vq.num = 512, vq.desc_gpa = TD_DESC, vq.avail_gpa = TD_AVAIL, vq.used_gpa = TD_USED;
	ck_assert_int_eq(vq_enable(&vq, &d.mem, 256, 0, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "512"));
	/* Misaligned rings. */
	ck_assert_int_eq(enable(QS, TD_DESC + 8, TD_AVAIL, TD_USED, 0), -EINVAL);
	ck_assert_int_eq(enable(QS, TD_DESC, TD_AVAIL + 1, TD_USED, 0), -EINVAL);
	ck_assert_int_eq(enable(QS, TD_DESC, TD_AVAIL, TD_USED + 2, 0), -EINVAL);
	/* Outside RAM, partly outside, or wrapping the address space. */
	ck_assert_int_eq(enable(QS, TD_RAM, TD_AVAIL, TD_USED, 0), -EINVAL);
	ck_assert_int_eq(enable(QS, TD_RAM - 16 * QS + 16, TD_AVAIL, TD_USED, 0), -EINVAL);
	ck_assert_int_eq(enable(QS, TD_DESC, TD_RAM - 6 - 2 * QS + 2, TD_USED, 0), -EINVAL);
	ck_assert_int_eq(enable(QS, TD_DESC, TD_AVAIL, TD_RAM - 8 * QS - 4, 0), -EINVAL);
	ck_assert_int_eq(enable(QS, 0xfffffffffffffff0ULL, TD_AVAIL, TD_USED, 0), -EINVAL);
	ck_assert(!vq.ready);
	/* Exactly at the end of RAM is fine, and so is the largest size. */
	ck_assert_int_eq(enable(QS, TD_RAM - 16 * QS, TD_RAM - 16 * QS - 6 - 2 * QS - 2, TD_USED, 0), 0);
	ck_assert_int_eq(enable(VQ_MAX_SIZE, 0x400000, 0x600000, 0x700000, 0), 0);
	ck_assert(vq.ready);
}
END_TEST

START_TEST(direct_chain)
{
	uint32_t id, len;

	td_desc(&d, 5, TD_DATA, 16, VRING_DESC_F_NEXT, 9);
	td_desc(&d, 9, TD_DATA + 0x1000, 512, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 2);
	td_desc(&d, 2, TD_DATA + 0x2000, 1, VRING_DESC_F_WRITE, 0);
	ck_assert_int_eq(vq_pop(&vq, &c), 0);
	td_post(&d, 5);
	ck_assert_int_eq(vq_pop(&vq, &c), 1);
	assert_chain(5, 3, 1, 16, 513);
	ck_assert_ptr_eq(c.iov[0].iov_base, d.ram + TD_DATA);
	ck_assert_ptr_eq(c.iov[1].iov_base, d.ram + TD_DATA + 0x1000);
	ck_assert_uint_eq(c.iov[1].iov_len, 512);
	ck_assert_ptr_eq(c.iov[2].iov_base, d.ram + TD_DATA + 0x2000);
	ck_assert_int_eq(vq_pop(&vq, &c), 0);

	vq_push(&vq, c.head, 300);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	td_used(&d, 0, &id, &len);
	ck_assert_uint_eq(id, 5);
	ck_assert_uint_eq(len, 300);
}
END_TEST

START_TEST(indirect_chain)
{
	td_desc_at(&d, IND, 0, TD_DATA, 16, VRING_DESC_F_NEXT, 2);
	td_desc_at(&d, IND, 2, TD_DATA + 0x1000, 4096, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 1);
	td_desc_at(&d, IND, 1, TD_DATA + 0x3000, 1, VRING_DESC_F_WRITE, 0);
	/* A direct readable buffer may come before the indirect one; WRITE on
	 * the indirect descriptor itself is ignored (spec 2.7.5.3.2). */
	td_desc(&d, 0, TD_DATA + 0x4000, 8, VRING_DESC_F_NEXT, 1);
	td_desc(&d, 1, IND, 3 * 16, VRING_DESC_F_INDIRECT | VRING_DESC_F_WRITE, 0);
	td_post(&d, 0);
	ck_assert_int_eq(vq_pop(&vq, &c), 1);
	assert_chain(0, 4, 2, 24, 4097);
	ck_assert_ptr_eq(c.iov[0].iov_base, d.ram + TD_DATA + 0x4000);
	ck_assert_ptr_eq(c.iov[1].iov_base, d.ram + TD_DATA);
	ck_assert_ptr_eq(c.iov[3].iov_base, d.ram + TD_DATA + 0x3000);
}
END_TEST

START_TEST(indirect_not_negotiated)
{
	ck_assert_int_eq(enable(QS, TD_DESC, TD_AVAIL, TD_USED, 0), 0);
	td_desc_at(&d, IND, 0, TD_DATA, 16, 0, 0);
	td_desc(&d, 0, IND, 16, VRING_DESC_F_INDIRECT, 0);
	td_post(&d, 0);
	assert_broken();
}
END_TEST

START_TEST(bad_indirect_tables)
{
	/* Each case on a fresh queue: NEXT with INDIRECT, nested, length not a
	 * multiple of 16, empty, over VQ_MAX_SEGS entries, outside RAM, loop. */
	static const struct {
		uint64_t addr;
		uint32_t len;
		uint16_t flags;
	} cases[] = {
		{ IND, 32, VRING_DESC_F_INDIRECT | VRING_DESC_F_NEXT },
		{ IND + 0x100, 16, VRING_DESC_F_INDIRECT },
		{ IND, 24, VRING_DESC_F_INDIRECT },
		{ IND, 0, VRING_DESC_F_INDIRECT },
		{ IND, 16 * (VQ_MAX_SEGS + 1), VRING_DESC_F_INDIRECT },
		{ TD_RAM - 16, 32, VRING_DESC_F_INDIRECT },
		{ IND + 0x200, 32, VRING_DESC_F_INDIRECT },
	};

	td_desc_at(&d, IND, 0, TD_DATA, 16, 0, 0);
	td_desc_at(&d, IND, 1, TD_DATA, 16, 0, 0);
	td_desc_at(&d, IND + 0x100, 0, IND, 16, VRING_DESC_F_INDIRECT, 0); /* nested */
	td_desc_at(&d, IND + 0x200, 0, TD_DATA, 16, VRING_DESC_F_NEXT, 1); /* 0 -> 1 -> 0 */
	td_desc_at(&d, IND + 0x200, 1, TD_DATA, 16, VRING_DESC_F_NEXT, 0);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(enable(QS, TD_DESC, TD_AVAIL, TD_USED, F_IND), 0);
		d.avail_idx = 0;
		td_desc(&d, 0, cases[i].addr, cases[i].len, cases[i].flags, 1);
		td_desc(&d, 1, TD_DATA, 1, VRING_DESC_F_WRITE, 0);
		td_post(&d, 0);
		ck_assert_msg(vq_pop(&vq, &c) == -EIO, "case %u accepted", i);
	}
}
END_TEST

START_TEST(descriptor_loop)
{
	td_desc(&d, 0, TD_DATA, 16, VRING_DESC_F_NEXT, 1);
	td_desc(&d, 1, TD_DATA, 16, VRING_DESC_F_NEXT, 0);
	td_post(&d, 0);
	assert_broken();
}
END_TEST

START_TEST(self_loop)
{
	td_desc(&d, 3, TD_DATA, 16, VRING_DESC_F_NEXT, 3);
	td_post(&d, 3);
	assert_broken();
}
END_TEST

START_TEST(longest_chain_is_queue_size)
{
	for (unsigned i = 0; i < QS; i++)
		td_desc(&d, i, TD_DATA + i, 1, i + 1 < QS ? VRING_DESC_F_NEXT : 0, i + 1);
	td_post(&d, 0);
	ck_assert_int_eq(vq_pop(&vq, &c), 1);
	ck_assert_uint_eq(c.n, QS);
	ck_assert_uint_eq(c.readable_len, QS);
}
END_TEST

START_TEST(head_out_of_range)
{
	td_post(&d, QS);
	assert_broken();
}
END_TEST

START_TEST(next_out_of_range)
{
	td_desc(&d, 0, TD_DATA, 16, VRING_DESC_F_NEXT, QS);
	td_post(&d, 0);
	assert_broken();
}
END_TEST

START_TEST(buffer_outside_ram)
{
	td_desc(&d, 0, TD_RAM - 8, 16, 0, 0);
	td_post(&d, 0);
	assert_broken();
}
END_TEST

START_TEST(buffer_address_wraps)
{
	td_desc(&d, 0, UINT64_MAX - 4, 16, 0, 0);
	td_post(&d, 0);
	assert_broken();
}
END_TEST

START_TEST(huge_length)
{
	td_desc(&d, 0, 0, UINT32_MAX, 0, 0);
	td_post(&d, 0);
	assert_broken();
}
END_TEST

START_TEST(chain_over_4gib)
{
	/* 1024 aliases of an 8 MiB buffer: 8 GiB, over the spec's 2^32 - 1. */
	for (unsigned i = 0; i < VQ_MAX_SEGS; i++)
		td_desc_at(&d, IND, i, 0, 8u << 20, i + 1 < VQ_MAX_SEGS ? VRING_DESC_F_NEXT : 0, i + 1);
	td_desc(&d, 0, IND, 16 * VQ_MAX_SEGS, VRING_DESC_F_INDIRECT, 0);
	td_post(&d, 0);
	assert_broken();
}
END_TEST

START_TEST(segment_cap)
{
	/* Exactly VQ_MAX_SEGS buffers pass; one more direct buffer in front does not. */
	for (unsigned i = 0; i < VQ_MAX_SEGS; i++)
		td_desc_at(&d, IND, i, TD_DATA, 1, i + 1 < VQ_MAX_SEGS ? VRING_DESC_F_NEXT : 0, i + 1);
	td_desc(&d, 0, IND, 16 * VQ_MAX_SEGS, VRING_DESC_F_INDIRECT, 0);
	td_desc(&d, 1, TD_DATA, 1, VRING_DESC_F_NEXT, 0);
	td_post(&d, 0);
	ck_assert_int_eq(vq_pop(&vq, &c), 1);
	ck_assert_uint_eq(c.n, VQ_MAX_SEGS);
	td_post(&d, 1);
	assert_broken();
}
END_TEST

START_TEST(zero_length_skipped)
{
	/* Its address is never looked at. */
	td_desc(&d, 0, 0xdead000000000000ULL, 0, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 1);
	td_desc(&d, 1, TD_DATA, 16, VRING_DESC_F_NEXT, 2);
	td_desc(&d, 2, TD_DATA + 16, 0, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 3);
	td_desc(&d, 3, TD_DATA + 32, 1, VRING_DESC_F_WRITE, 0);
	td_post(&d, 0);
	ck_assert_int_eq(vq_pop(&vq, &c), 1);
	assert_chain(0, 2, 1, 16, 1);
	ck_assert_ptr_eq(c.iov[1].iov_base, d.ram + TD_DATA + 32);
}
END_TEST

START_TEST(readable_after_writable)
{
	td_desc(&d, 0, TD_DATA, 1, VRING_DESC_F_NEXT | VRING_DESC_F_WRITE, 1);
	td_desc(&d, 1, TD_DATA + 16, 16, 0, 0);
	td_post(&d, 0);
	assert_broken();
}
END_TEST

START_TEST(avail_index_jump)
{
	td_desc(&d, 0, TD_DATA, 16, 0, 0);
	td_set_avail_idx(&d, QS + 1);
	assert_broken();
	/* Exactly a full ring is legal. */
	ck_assert_int_eq(enable(QS, TD_DESC, TD_AVAIL, TD_USED, 0), 0);
	td_set_avail_idx(&d, QS);
	for (int i = 0; i < QS; i++)
		ck_assert_int_eq(vq_pop(&vq, &c), 1);
	ck_assert_int_eq(vq_pop(&vq, &c), 0);
}
END_TEST

START_TEST(index_wraps_at_65536)
{
	td_desc(&d, 0, TD_DATA, 16, 0, 0);
	td_set_avail_idx(&d, 0);
	for (unsigned i = 0; i < 70000; i++) {
		td_post(&d, 0);
		ck_assert_int_eq(vq_pop(&vq, &c), 1);
		vq_push(&vq, c.head, 0);
	}
	ck_assert_uint_eq(td_used_idx(&d), 70000 % 65536);
	ck_assert_int_eq(vq_pop(&vq, &c), 0);
}
END_TEST

START_TEST(not_ready)
{
	vq_disable(&vq);
	td_desc(&d, 0, TD_DATA, 16, 0, 0);
	td_post(&d, 0);
	ck_assert_int_eq(vq_pop(&vq, &c), 0);
	vq_push(&vq, 0, 1);
	ck_assert_uint_eq(td_used_idx(&d), 0);
	ck_assert(!vq_should_interrupt(&vq));
}
END_TEST

static void pop_push(void)
{
	td_desc(&d, 0, TD_DATA, 16, 0, 0);
	td_post(&d, 0);
	ck_assert_int_eq(vq_pop(&vq, &c), 1);
	vq_push(&vq, c.head, 0);
}

START_TEST(no_interrupt_flag)
{
	ck_assert_int_eq(enable(QS, TD_DESC, TD_AVAIL, TD_USED, 0), 0);
	ck_assert(!vq_should_interrupt(&vq)); /* nothing pushed */
	pop_push();
	ck_assert(vq_should_interrupt(&vq));
	ck_assert(!vq_should_interrupt(&vq)); /* nothing new */
	td_put16(&d, TD_AVAIL, VRING_AVAIL_F_NO_INTERRUPT);
	pop_push();
	ck_assert(!vq_should_interrupt(&vq));
	td_put16(&d, TD_AVAIL, 0);
	pop_push();
	ck_assert(vq_should_interrupt(&vq));
}
END_TEST

START_TEST(event_idx_interrupts)
{
	/* used_event = 0: interrupt when used->idx passes 0 -> 1 only. */
	td_set_used_event(&d, 0);
	pop_push();
	ck_assert(vq_should_interrupt(&vq));
	pop_push();
	ck_assert(!vq_should_interrupt(&vq));
	/* The flag is ignored with event idx. */
	td_put16(&d, TD_AVAIL, VRING_AVAIL_F_NO_INTERRUPT);
	td_set_used_event(&d, 4);
	pop_push(); /* 3 */
	pop_push(); /* 4 */
	ck_assert(!vq_should_interrupt(&vq));
	pop_push(); /* 5: passes used_event 4 */
	ck_assert(vq_should_interrupt(&vq));
	/* Several pushes in one batch crossing the event: one interrupt. */
	td_set_used_event(&d, 6);
	pop_push();
	pop_push();
	pop_push();
	ck_assert(vq_should_interrupt(&vq));
}
END_TEST

START_TEST(event_idx_publishes_avail_event)
{
	td_put16(&d, TD_USED + 4 + 8 * QS, 0xbeef);
	pop_push();
	pop_push();
	/* Not written while entries remain ... */
	ck_assert_uint_eq(td_avail_event(&d), 0xbeef);
	ck_assert_int_eq(vq_pop(&vq, &c), 0);
	/* ... but when the ring runs empty: notify me at entry 2. */
	ck_assert_uint_eq(td_avail_event(&d), 2);
	/* An entry that raced in is still found by the same pop. */
	td_post(&d, 0);
	ck_assert_int_eq(vq_pop(&vq, &c), 1);
}
END_TEST

START_TEST(reset_forgets)
{
	vq_reset(&vq);
	ck_assert(!vq.ready);
	ck_assert_uint_eq(vq.num, 0);
	ck_assert_uint_eq(vq.desc_gpa, 0);
	ck_assert_int_eq(vq_pop(&vq, &c), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("virtqueue");
	TCase *tc = tcase_create("split");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, enable_rejects_bad_layouts);
	tcase_add_test(tc, direct_chain);
	tcase_add_test(tc, indirect_chain);
	tcase_add_test(tc, indirect_not_negotiated);
	tcase_add_test(tc, bad_indirect_tables);
	tcase_add_test(tc, descriptor_loop);
	tcase_add_test(tc, self_loop);
	tcase_add_test(tc, longest_chain_is_queue_size);
	tcase_add_test(tc, head_out_of_range);
	tcase_add_test(tc, next_out_of_range);
	tcase_add_test(tc, buffer_outside_ram);
	tcase_add_test(tc, buffer_address_wraps);
	tcase_add_test(tc, huge_length);
	tcase_add_test(tc, chain_over_4gib);
	tcase_add_test(tc, segment_cap);
	tcase_add_test(tc, zero_length_skipped);
	tcase_add_test(tc, readable_after_writable);
	tcase_add_test(tc, avail_index_jump);
	tcase_add_test(tc, index_wraps_at_65536);
	tcase_add_test(tc, not_ready);
	tcase_add_test(tc, no_interrupt_flag);
	tcase_add_test(tc, event_idx_interrupts);
	tcase_add_test(tc, event_idx_publishes_avail_event);
	tcase_add_test(tc, reset_forgets);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
