/* Token buckets and the limiter (vmm/core/token_bucket.c) on a fake clock:
 * refill arithmetic (exact over many small steps, no overflow with huge
 * sizes and elapsed times), one-time burst, over-consumption and its debt,
 * the limiter's two buckets and counters, and the snapshot encoding. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "vmm/core/token_bucket.h"
#include "tests/unit.h"

#define MS 1000000ULL
#define S 1000000000ULL

static struct token_bucket mk(uint64_t size, uint64_t burst, uint32_t refill_ms, uint64_t now)
{
	struct token_bucket b;
	struct tvm_bucket c = { .size = size, .one_time_burst = burst, .refill_ms = refill_ms };

	ck_assert_int_eq(bucket_init(&b, &c, now, "test", NULL), 0);
	return b;
}

START_TEST(starts_full_and_waits_exactly)
{
	struct token_bucket b = mk(1000, 0, 1000, 0); /* 1000 tokens per second: one per ms */

	ck_assert_uint_eq(bucket_wait_ns(&b, 1000, 0), 0);
	bucket_take(&b, 1000, 0);
	ck_assert_uint_eq(b.budget, 0);
	ck_assert_uint_eq(bucket_wait_ns(&b, 1, 0), 1 * MS);
	ck_assert_uint_eq(bucket_wait_ns(&b, 500, 0), 500 * MS);
	/* A quarter second later, a quarter is back. */
	ck_assert_uint_eq(bucket_wait_ns(&b, 500, 250 * MS), 250 * MS);
	ck_assert_uint_eq(b.budget, 250);
	ck_assert_uint_eq(bucket_wait_ns(&b, 500, 500 * MS), 0);
	/* Never more than full. */
	ck_assert_uint_eq(bucket_wait_ns(&b, 1, 100 * S), 0);
	ck_assert_uint_eq(b.budget, 1000);
}
END_TEST

START_TEST(default_refill_is_a_second)
{
	struct token_bucket b = mk(10, 0, 0, 0);

	ck_assert_uint_eq(b.refill_ns, 1 * S);
}
END_TEST

/* 3 tokens per ms is a token every 333333.3 ns: asked every ns, the
 * fractions must add up, not be dropped at each call. */
START_TEST(fractions_carry_over)
{
	struct token_bucket b = mk(3, 0, 1, 0);
	uint64_t t;

	bucket_take(&b, 3, 0);
	for (t = 1; t < 1 * MS; t += 7)
		bucket_wait_ns(&b, 3, t);
	ck_assert_uint_eq(b.budget, 2);
	/* One ms after the take the bucket is full again, not short. */
	ck_assert_uint_eq(bucket_wait_ns(&b, 3, 1 * MS), 0);
	ck_assert_uint_eq(b.budget, 3);
	/* And the wait for the next token counts the fraction already made. */
	bucket_take(&b, 3, 1 * MS);
	bucket_wait_ns(&b, 1, 1 * MS + 200000);
	ck_assert_uint_eq(bucket_wait_ns(&b, 1, 1 * MS + 200000), 333334 - 200000);
}
END_TEST

START_TEST(huge_sizes_do_not_overflow)
{
	/* 2^62 tokens per second: 250 ms make exactly 2^60 (the product
	 * elapsed * size is ~2^90). */
	struct token_bucket b = mk(1ULL << 62, 0, 1000, 0);

	bucket_take(&b, 1ULL << 62, 0);
	ck_assert_uint_eq(bucket_wait_ns(&b, 1ULL << 62, 250 * MS), 750 * MS);
	ck_assert_uint_eq(b.budget, 1ULL << 60);

	/* The largest bucket and the longest refill. */
	b = mk(UINT64_MAX, 0, UINT32_MAX, 0);
	bucket_take(&b, UINT64_MAX, 0);
	ck_assert_uint_eq(b.budget, 0);
	ck_assert_uint_eq(bucket_wait_ns(&b, UINT64_MAX, 0), (uint64_t)UINT32_MAX * MS);
	bucket_wait_ns(&b, 1, (uint64_t)UINT32_MAX * MS / 2);
	ck_assert_uint_eq(b.budget, UINT64_MAX / 2);
	ck_assert_uint_eq(bucket_wait_ns(&b, UINT64_MAX, UINT64_MAX), 0);
	ck_assert_uint_eq(b.budget, UINT64_MAX);
}
END_TEST

START_TEST(huge_elapsed_times_fill_it)
{
	struct token_bucket b = mk(1000, 0, 1, 5);

	bucket_take(&b, 1000, 5);
	ck_assert_uint_eq(bucket_wait_ns(&b, 1000, UINT64_MAX), 0);
	ck_assert_uint_eq(b.budget, 1000);
	/* A clock that went back refills nothing and breaks nothing. */
	bucket_take(&b, 1000, UINT64_MAX);
	ck_assert_uint_ne(bucket_wait_ns(&b, 1, 0), 0);
	ck_assert_uint_eq(b.budget, 0);
}
END_TEST

START_TEST(one_time_burst)
{
	struct token_bucket b = mk(100, 1000, 1000, 0);

	/* 1100 tokens at first, the burst spent first. */
	ck_assert_uint_eq(bucket_wait_ns(&b, 100, 0), 0);
	bucket_take(&b, 600, 0);
	ck_assert_uint_eq(b.burst, 400);
	ck_assert_uint_eq(b.budget, 100);
	bucket_take(&b, 500, 0);
	ck_assert_uint_eq(b.burst, 0);
	ck_assert_uint_eq(b.budget, 0);
	ck_assert_uint_eq(b.debt, 0);
	ck_assert_uint_eq(bucket_wait_ns(&b, 1, 0), 10 * MS);
	/* The refill brings the bucket back, never the burst. */
	ck_assert_uint_eq(bucket_wait_ns(&b, 100, 10 * S), 0);
	ck_assert_uint_eq(b.burst, 0);
	ck_assert_uint_eq(b.budget, 100);
	bucket_take(&b, 100, 10 * S);
	ck_assert_uint_ne(bucket_wait_ns(&b, 1, 10 * S), 0);
}
END_TEST

START_TEST(burst_needs_a_size)
{
	struct token_bucket b;
	struct tvm_err e = { 0 };

	ck_assert_int_eq(bucket_init(&b, &(struct tvm_bucket){ .one_time_burst = 5 }, 0, "drive x bytes", &e), -EINVAL);
	ck_assert_str_eq(e.msg, "drive x bytes: a one-time burst needs a bucket size");
}
END_TEST

START_TEST(unlimited_never_waits)
{
	struct token_bucket b = mk(0, 0, 0, 0);

	bucket_take(&b, UINT64_MAX, 0);
	ck_assert_uint_eq(bucket_wait_ns(&b, UINT64_MAX, 0), 0);
}
END_TEST

/* Firecracker's rule: a request larger than the bucket passes once, then
 * nothing passes for the time it overdrew. */
START_TEST(over_consumption_passes_once_then_owes)
{
	struct token_bucket b = mk(1000, 0, 1000, 0);

	bucket_take(&b, 200, 0); /* 800 left */
	ck_assert_uint_eq(bucket_wait_ns(&b, 5000, 0), 0);
	bucket_take(&b, 5000, 0);
	ck_assert_uint_eq(b.budget, 0);
	ck_assert_uint_eq(b.debt, 4200);
	/* Another oversized one waits for the debt only; a small one for
	 * the debt and itself. */
	ck_assert_uint_eq(bucket_wait_ns(&b, 5000, 0), 4200 * MS);
	ck_assert_uint_eq(bucket_wait_ns(&b, 1, 0), 4201 * MS);
	ck_assert_uint_eq(bucket_wait_ns(&b, 1, 4200 * MS), 1 * MS);
	ck_assert_uint_eq(b.debt, 0);
	ck_assert_uint_eq(bucket_wait_ns(&b, 5000, 4200 * MS), 0);
	ck_assert_uint_eq(bucket_wait_ns(&b, 1, 4201 * MS), 0);
}
END_TEST

/* Over a long run of requests of every size the rate holds: no more than
 * the initial bucket plus size per refill time passes. */
START_TEST(long_run_rate)
{
	struct token_bucket b = mk(64 * 1024, 0, 1000, 0);
	uint64_t now = 0, passed = 0, sizes[] = { 4096, 65536, 200000, 512, 131072 };

	for (int i = 0; i < 2000; i++) {
		uint64_t n = sizes[i % 5], w;

		while ((w = bucket_wait_ns(&b, n, now)))
			now += w;
		bucket_take(&b, n, now);
		passed += n;
	}
	/* By the last take's time at most 64 KiB + 64 KiB/s * now passed, and
	 * (the limiter never idles here) not much less. */
	ck_assert_uint_le(passed, 64 * 1024 + (uint64_t)((unsigned __int128)64 * 1024 * now / S) + 200000);
	ck_assert_uint_ge(passed, (uint64_t)((unsigned __int128)64 * 1024 * now / S));
}
END_TEST

START_TEST(limiter_needs_both_buckets)
{
	struct limiter l;
	struct tvm_rate_limit c = { .bytes = { .size = 1 << 20 }, .ops = { .size = 2 } };

	ck_assert_int_eq(limiter_init(&l, &c, 0, "test", NULL), 0);
	ck_assert(limiter_active(&l));
	ck_assert_uint_eq(limiter_admit(&l, 4096, 1, 0), 0);
	ck_assert_uint_eq(limiter_admit(&l, 4096, 1, 0), 0);
	/* Bytes to spare, no operation left: held, nothing taken. */
	ck_assert_uint_eq(limiter_admit(&l, 4096, 1, 0), 500 * MS);
	ck_assert_uint_eq(l.bytes.budget, (1 << 20) - 8192);
	ck_assert_uint_eq(l.throttled, 1);
	/* Asking again is the same request: counted once. */
	ck_assert_uint_eq(limiter_admit(&l, 4096, 1, 100 * MS), 400 * MS);
	ck_assert_uint_eq(l.throttled, 1);
	ck_assert_uint_eq(limiter_admit(&l, 4096, 1, 500 * MS), 0);
	ck_assert_uint_eq(l.throttled_ns, 500 * MS);
	/* Nothing limited: never held. */
	ck_assert_int_eq(limiter_init(&l, &(struct tvm_rate_limit){ 0 }, 0, "test", NULL), 0);
	ck_assert(!limiter_active(&l));
	ck_assert_uint_eq(limiter_admit(&l, UINT64_MAX, UINT64_MAX, 0), 0);
}
END_TEST

START_TEST(limiter_forgets_a_reset_request)
{
	struct limiter l;

	limiter_init(&l, &(struct tvm_rate_limit){ .ops = { .size = 1 } }, 0, "t", NULL);
	limiter_admit(&l, 0, 1, 0);
	ck_assert_uint_ne(limiter_wait_ns(&l, 0, 1, 0), 0);
	limiter_forget_wait(&l);
	/* The next request held is a new one. */
	ck_assert_uint_ne(limiter_wait_ns(&l, 0, 1, 10), 0);
	ck_assert_uint_eq(l.throttled, 2);
	ck_assert_uint_eq(limiter_wait_ns(&l, 0, 1, 1 * S), 0);
	ck_assert_uint_eq(l.throttled_ns, 1 * S - 10);
}
END_TEST

START_TEST(state_round_trip)
{
	struct limiter a, b;
	uint8_t buf[LIMITER_STATE_LEN];
	struct tvm_rate_limit c = { .bytes = { .size = 1000, .one_time_burst = 300, .refill_ms = 10 },
				    .ops = { .size = 5, .refill_ms = 2000 } };

	limiter_init(&a, &c, 0, "t", NULL);
	limiter_take(&a, 1200, 1, 0); /* burst gone, budget 100 */
	limiter_take(&a, 700, 5, 0);  /* bytes 600 in debt, ops 1 in debt */
	ck_assert_uint_eq(a.bytes.debt, 600);
	limiter_encode(&a, buf);
	ck_assert_int_eq(limiter_decode(buf, &b, 77 * S), 0);
	ck_assert_uint_eq(b.bytes.size, 1000);
	ck_assert_uint_eq(b.bytes.refill_ns, 10 * MS);
	ck_assert_uint_eq(b.bytes.burst_cfg, 300);
	ck_assert_uint_eq(b.bytes.burst, 0);
	ck_assert_uint_eq(b.bytes.budget, 0);
	ck_assert_uint_eq(b.bytes.debt, 600);
	ck_assert_uint_eq(b.ops.debt, 1);
	ck_assert_uint_eq(b.ops.refill_ns, 2 * S);
	ck_assert(bucket_same_config(&a.bytes, &b.bytes) && bucket_same_config(&a.ops, &b.ops));
	/* The refill counts from the restore's now, not from the saved clock. */
	ck_assert_uint_eq(bucket_wait_ns(&b.bytes, 1, 77 * S), 6 * MS + 10000);
	ck_assert_uint_eq(bucket_wait_ns(&b.ops, 1, 77 * S), 800 * MS);
	ck_assert_uint_eq(limiter_wait_ns(&b, 1, 1, 77 * S), 800 * MS);
}
END_TEST

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

START_TEST(state_refused_when_inconsistent)
{
	static const struct {
		unsigned field; /* u64 index in the bytes bucket: size, refill, burst_cfg, budget, burst, debt */
		uint64_t value;
	} bad[] = {
		{ 1, 0 },                             /* no refill time */
		{ 1, (uint64_t)UINT32_MAX * MS + 1 }, /* longer than any config gives */
		{ 3, 1001 },                          /* more than the bucket holds */
		{ 4, 301 },                           /* more burst left than configured */
		{ 5, BUCKET_MAX_DEBT + 1 },           /* debt no request can make */
	};
	struct limiter a, b;
	uint8_t good[LIMITER_STATE_LEN], buf[LIMITER_STATE_LEN];

	limiter_init(&a, &(struct tvm_rate_limit){ .bytes = { .size = 1000, .one_time_burst = 300 } }, 0, "t", NULL);
	limiter_encode(&a, good);
	ck_assert_int_eq(limiter_decode(good, &b, 0), 0);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(buf, good, sizeof(buf));
		put64(buf + 8 * bad[i].field, bad[i].value);
		ck_assert_msg(limiter_decode(buf, &b, 0) == -EINVAL, "field %u = %llu accepted", bad[i].field,
			      (unsigned long long)bad[i].value);
	}
	/* Debt while tokens remain is no state a bucket can be in. */
	memcpy(buf, good, sizeof(buf));
	put64(buf + 40, 5);
	ck_assert_int_eq(limiter_decode(buf, &b, 0), -EINVAL);
	/* An unlimited bucket (ops here) carries nothing else. */
	memcpy(buf, good, sizeof(buf));
	put64(buf + 48 + 24, 1);
	ck_assert_int_eq(limiter_decode(buf, &b, 0), -EINVAL);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("token_bucket");
	TCase *tc = tcase_create("bucket");

	tcase_add_test(tc, starts_full_and_waits_exactly);
	tcase_add_test(tc, default_refill_is_a_second);
	tcase_add_test(tc, fractions_carry_over);
	tcase_add_test(tc, huge_sizes_do_not_overflow);
	tcase_add_test(tc, huge_elapsed_times_fill_it);
	tcase_add_test(tc, one_time_burst);
	tcase_add_test(tc, burst_needs_a_size);
	tcase_add_test(tc, unlimited_never_waits);
	tcase_add_test(tc, over_consumption_passes_once_then_owes);
	tcase_add_test(tc, long_run_rate);
	suite_add_tcase(s, tc);
	tc = tcase_create("limiter");
	tcase_add_test(tc, limiter_needs_both_buckets);
	tcase_add_test(tc, limiter_forgets_a_reset_request);
	tcase_add_test(tc, state_round_trip);
	tcase_add_test(tc, state_refused_when_inconsistent);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(suite());
}
