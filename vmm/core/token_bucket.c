#include "vmm/core/token_bucket.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

typedef unsigned __int128 u128;

#define NS_PER_MS 1000000ULL

static uint64_t sat64(u128 v)
{
	return v > UINT64_MAX ? UINT64_MAX : (uint64_t)v;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

int bucket_init(struct token_bucket *b, const struct tvm_bucket *c, uint64_t now, const char *what, struct tvm_err *e)
{
	memset(b, 0, sizeof(*b));
	if (!c->size)
		return c->one_time_burst ? tvm_errf(e, EINVAL, "%s: a one-time burst needs a bucket size", what) : 0;
	b->size = c->size;
	b->refill_ns = (uint64_t)(c->refill_ms ? c->refill_ms : BUCKET_DEFAULT_REFILL_MS) * NS_PER_MS;
	b->burst_cfg = c->one_time_burst;
	b->budget = b->size;
	b->burst = b->burst_cfg;
	b->last_ns = now;
	return 0;
}

/* Count the tokens made since last_ns: they pay the debt, then fill the
 * bucket. What is left of a token stays in frac (as a numerator over
 * refill_ns), so the refill over many calls is exactly that of one. */
static void refill(struct token_bucket *b, uint64_t now)
{
	u128 acc, made;

	if (now <= b->last_ns)
		return;
	/* elapsed * size <= (2^64 - 1)^2 = 2^128 - 2^65 + 1, and frac <
	 * refill_ns < 2^64: the sum fits 128 bits. */
	acc = (u128)(now - b->last_ns) * b->size + b->frac;
	made = acc / b->refill_ns;
	b->last_ns = now;
	if (made >= (u128)b->debt + (b->size - b->budget)) {
		b->debt = 0;
		b->budget = b->size;
		b->frac = 0; /* full: the time beyond makes nothing */
		return;
	}
	b->frac = (uint64_t)(acc % b->refill_ns);
	if (made >= b->debt) {
		b->budget += (uint64_t)(made - b->debt); /* below size - budget, checked above */
		b->debt = 0;
	} else {
		b->debt -= (uint64_t)made;
	}
}

uint64_t bucket_wait_ns(struct token_bucket *b, uint64_t n, uint64_t now)
{
	uint64_t missing;

	if (!b->size)
		return 0;
	refill(b, now);
	if (!b->debt) {
		if (n > b->size || n <= (u128)b->budget + b->burst)
			return 0;
		missing = n - b->budget - b->burst; /* n > budget + burst: no wrap */
	} else {
		/* In debt budget and burst are empty; an oversized request
		 * waits for the debt only. */
		missing = n > b->size ? b->debt : sat64((u128)b->debt + n);
	}
	/* The first w with frac + w * size >= missing * refill_ns (frac <
	 * refill_ns <= missing * refill_ns < 2^128). Counted from last_ns,
	 * which is now unless the clock went back. */
	return sat64(((u128)missing * b->refill_ns - b->frac + b->size - 1) / b->size +
		     (b->last_ns > now ? b->last_ns - now : 0));
}

void bucket_take(struct token_bucket *b, uint64_t n, uint64_t now)
{
	uint64_t k;

	if (!b->size)
		return;
	refill(b, now);
	k = min64(n, b->burst);
	b->burst -= k;
	n -= k;
	k = min64(n, b->budget);
	b->budget -= k;
	n -= k;
	b->debt = sat64((u128)b->debt + n);
}

bool bucket_same_config(const struct token_bucket *a, const struct token_bucket *b)
{
	return a->size == b->size && a->refill_ns == b->refill_ns && a->burst_cfg == b->burst_cfg;
}

int limiter_init(struct limiter *l, const struct tvm_rate_limit *c, uint64_t now, const char *what, struct tvm_err *e)
{
	char sub[224];
	int r;

	memset(l, 0, sizeof(*l));
	snprintf(sub, sizeof(sub), "%s bytes", what);
	r = bucket_init(&l->bytes, &c->bytes, now, sub, e);
	if (r)
		return r;
	snprintf(sub, sizeof(sub), "%s operations", what);
	return bucket_init(&l->ops, &c->ops, now, sub, e);
}

bool limiter_active(const struct limiter *l)
{
	return l->bytes.size || l->ops.size;
}

uint64_t limiter_wait_ns(struct limiter *l, uint64_t bytes, uint64_t ops, uint64_t now)
{
	uint64_t wb = bucket_wait_ns(&l->bytes, bytes, now), wo = bucket_wait_ns(&l->ops, ops, now);
	uint64_t w = wb > wo ? wb : wo;

	if (w && !l->held) {
		l->held = true;
		l->waiting_since = now;
		l->throttled++;
	} else if (!w && l->held) {
		l->held = false;
		l->throttled_ns += now > l->waiting_since ? now - l->waiting_since : 0;
	}
	return w;
}

void limiter_take(struct limiter *l, uint64_t bytes, uint64_t ops, uint64_t now)
{
	bucket_take(&l->bytes, bytes, now);
	bucket_take(&l->ops, ops, now);
}

uint64_t limiter_admit(struct limiter *l, uint64_t bytes, uint64_t ops, uint64_t now)
{
	uint64_t w = limiter_wait_ns(l, bytes, ops, now);

	if (!w)
		limiter_take(l, bytes, ops, now);
	return w;
}

void limiter_forget_wait(struct limiter *l)
{
	l->held = false;
}

static uint8_t *put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
	return p + 8;
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

static uint8_t *encode_bucket(uint8_t *p, const struct token_bucket *b)
{
	p = put64(p, b->size);
	p = put64(p, b->refill_ns);
	p = put64(p, b->burst_cfg);
	p = put64(p, b->budget);
	p = put64(p, b->burst);
	return put64(p, b->debt);
}

void limiter_encode(const struct limiter *l, uint8_t out[LIMITER_STATE_LEN])
{
	encode_bucket(encode_bucket(out, &l->bytes), &l->ops);
}

static bool decode_bucket(const uint8_t *p, struct token_bucket *b, uint64_t now)
{
	*b = (struct token_bucket){ .size = get64(p),
				    .refill_ns = get64(p + 8),
				    .burst_cfg = get64(p + 16),
				    .budget = get64(p + 24),
				    .burst = get64(p + 32),
				    .debt = get64(p + 40),
				    .last_ns = now };
	if (!b->size)
		return !b->refill_ns && !b->burst_cfg && !b->budget && !b->burst && !b->debt;
	return b->refill_ns && b->refill_ns <= UINT32_MAX * NS_PER_MS && b->budget <= b->size &&
	       b->burst <= b->burst_cfg && b->debt <= BUCKET_MAX_DEBT && (!b->debt || (!b->budget && !b->burst));
}

int limiter_decode(const uint8_t *p, struct limiter *l, uint64_t now)
{
	struct limiter x = { 0 };

	if (!decode_bucket(p, &x.bytes, now) || !decode_bucket(p + LIMITER_STATE_LEN / 2, &x.ops, now))
		return -EINVAL;
	*l = x;
	return 0;
}
