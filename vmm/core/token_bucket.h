/* Token buckets and the rate limiter built from two of them (bytes and
 * operations), in the model of Firecracker's RateLimiter. Pure: the caller
 * passes the time (ns of one monotonic clock), so tests drive a fake one.
 *
 * A bucket holds up to size tokens, starts full, and refills continuously
 * at size tokens per refill_ns (the fraction of a token made carries over:
 * the refill is exact over any number of calls). An optional one-time burst
 * is spent before the bucket's own tokens and never refilled. Taking more
 * than the bucket (and burst) holds leaves it in debt: the refill pays
 * the debt off before anything else, so nothing passes for as long as it
 * takes to refill what was overdrawn.
 *
 * Asking for n tokens (bucket_wait_ns):
 *   - n <= what is there: passes now;
 *   - n <= size but more than is there: waits until the refill covers it;
 *   - n > size (it could never fit): passes as soon as the bucket is out
 *     of debt, and takes it into debt for the rest.
 * Over a long run no more than size tokens per refill_ns pass, plus the
 * burst, plus the bucket's initial contents.
 *
 * Arithmetic: elapsed * size and tokens * refill_ns are formed in 128
 * bits (both factors are below 2^64, so the products fit), results are
 * capped at what is needed, and waits saturate at UINT64_MAX: no size,
 * refill time or elapsed time overflows. A clock that goes back refills
 * nothing.
 */
#ifndef TVM_TOKEN_BUCKET_H
#define TVM_TOKEN_BUCKET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/core/err.h"
#include "vmm/core/tvm_types.h"

#define BUCKET_DEFAULT_REFILL_MS 1000
#define BUCKET_MAX_DEBT (1ULL << 32) /* most tokens a saved bucket may owe (a request is < 4 GiB) */

struct token_bucket {
	uint64_t size;      /* tokens; 0: unlimited (the other fields unused) */
	uint64_t refill_ns; /* time to refill size tokens, > 0 when size is */
	uint64_t burst_cfg; /* one-time burst as configured */
	uint64_t budget;    /* tokens there now, <= size */
	uint64_t burst;     /* one-time burst left */
	uint64_t debt;      /* tokens overdrawn; budget and burst are 0 while > 0 */
	uint64_t last_ns;   /* time up to which the refill is counted */
	uint64_t frac;      /* part of a token made by then, times refill_ns (< refill_ns) */
};

/* Set b up from c (see struct tvm_bucket), full, at time now. Returns 0,
 * or -EINVAL with e naming what (a burst without a size). */
int bucket_init(struct token_bucket *b, const struct tvm_bucket *c, uint64_t now, const char *what, struct tvm_err *e);

/* ns until n tokens may be taken (0: now); see the list above. */
uint64_t bucket_wait_ns(struct token_bucket *b, uint64_t n, uint64_t now);

/* Take n tokens: from the burst, then the bucket, the rest as debt. */
void bucket_take(struct token_bucket *b, uint64_t n, uint64_t now);

/* Whether two buckets have the same configuration (size, refill, burst). */
bool bucket_same_config(const struct token_bucket *a, const struct token_bucket *b);

/* A rate limiter: both buckets must allow a request; plus how often and
 * how long requests were held. */
struct limiter {
	struct token_bucket bytes, ops;
	uint64_t throttled;     /* requests held at least once */
	uint64_t throttled_ns;  /* time they were held, counted when each passed */
	uint64_t waiting_since; /* when the request held now was first held */
	bool held;              /* a request is being held */
};

/* Set l up from c at time now; what names it in e ("drive 0 limit").
 * Returns 0 or -EINVAL. */
int limiter_init(struct limiter *l, const struct tvm_rate_limit *c, uint64_t now, const char *what, struct tvm_err *e);

/* Whether any bucket of l limits anything. */
bool limiter_active(const struct limiter *l);

/* ns until a request of bytes and ops may pass (0: now); nothing is
 * taken. A nonzero answer holds the request (counted once however often
 * it asks again); a zero one after that counts the time it was held. */
uint64_t limiter_wait_ns(struct limiter *l, uint64_t bytes, uint64_t ops, uint64_t now);

/* Take bytes and ops (debt when short). */
void limiter_take(struct limiter *l, uint64_t bytes, uint64_t ops, uint64_t now);

/* limiter_wait_ns, then limiter_take when it answers 0. */
uint64_t limiter_admit(struct limiter *l, uint64_t bytes, uint64_t ops, uint64_t now);

/* A request that was held is gone (device reset): stop counting its time. */
void limiter_forget_wait(struct limiter *l);

/* Snapshot encoding of a limiter: each bucket's configuration and state
 * (size, refill_ns, burst_cfg, budget, burst, debt: 6 u64, little
 * endian), bytes then ops. The counters are not kept. */
#define LIMITER_STATE_LEN (2 * 6 * 8)

void limiter_encode(const struct limiter *l, uint8_t out[LIMITER_STATE_LEN]);

/* Decode p (LIMITER_STATE_LEN bytes) into l with its refill counted from
 * now, counters zero. Every value is checked (refill time > 0 and at most
 * 2^32 - 1 ms, budget <= size, burst left <= configured, debt <=
 * BUCKET_MAX_DEBT; an unlimited bucket all zero). Returns 0 or -EINVAL
 * (l untouched). */
int limiter_decode(const uint8_t *p, struct limiter *l, uint64_t now);

#endif
