/* Rate limiting of a virtio device's queues: up to VQ_THROTTLE_MAX
 * limiters (vmm/core/token_bucket.h: bytes and operations), each gating
 * one queue, and one timerfd per device that runs a held queue again
 * when its tokens are back.
 *
 * A device asks before it serves a chain (vq_throttle_admit). When the
 * limiter holds the request, the device gives the chain back to the ring
 * (vq_unpop: the driver's buffers stay where they are, untouched) and
 * stops running that queue; the timer is armed for the moment the tokens
 * suffice and then kicks the queue (fd_watch_ops.kick), which asks again.
 * A driver that notifies meanwhile only re-arms the timer.
 *
 * The timerfd exists while a limiter is active (made at init, or when a
 * restore adopts saved limits) and is watched from the device's
 * activation on (vq_throttle_activate) until vq_throttle_close.
 *
 * Snapshots: vq_throttle_save encodes every limiter's configuration and
 * bucket state (nothing when no limiter is active, so a device without
 * limits saves what it saved before limits existed); vq_throttle_restore
 * takes them back, see there.
 *
 * Locking: the device calls admit/wait/take/reset with its transport
 * lock held; the timer callback runs on the event-loop thread; metrics
 * read from any thread. A mutex of its own guards the state; the kick
 * is made after dropping it. Lock order: transport, throttle.
 */
#ifndef TVM_THROTTLE_H
#define TVM_THROTTLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/virtio/fd_watch.h"
#include "vmm/core/err.h"
#include "vmm/core/token_bucket.h"

#define VQ_THROTTLE_MAX 2

/* One limiter: the queue it gates, its name in metrics, its limits. */
struct vq_limit {
	unsigned queue;
	const char *name; /* static string: "io", "rx", "tx" */
	struct tvm_rate_limit limit;
};

struct vq_throttle {
	pthread_mutex_t lock;
	bool active; /* some limiter limits something (fixed while queues run) */
	bool given;  /* the device's options set some limit */
	unsigned n;
	struct limiter lim[VQ_THROTTLE_MAX];
	unsigned queue[VQ_THROTTLE_MAX];
	const char *name[VQ_THROTTLE_MAX];
	uint64_t due[VQ_THROTTLE_MAX]; /* when a held queue may run again; 0: not held */
	int fd;                        /* timerfd; -1 while not active */
	bool watching;
	struct fd_watch_ops io;
	uint64_t (*clock)(void);
};

/* Set t up with the n limiters l (n <= VQ_THROTTLE_MAX), io for its timer
 * and kicks (borrowed; required when a limit is set) and clock (NULL:
 * CLOCK_MONOTONIC; tests give a fake one). what names the device in e.
 * Returns 0 or -errno: -EINVAL for a bad limit, a timerfd error. */
int vq_throttle_init(struct vq_throttle *t, const struct vq_limit *l, unsigned n, const struct fd_watch_ops *io,
		     uint64_t (*clock)(void), const char *what, struct tvm_err *e);

/* Stop watching and close the timer. The event loop must not run t's
 * callback any more (stopped, or the caller knows). */
void vq_throttle_close(struct vq_throttle *t);

/* The driver set DRIVER_OK: watch the timer (once). 0 or -errno. */
int vq_throttle_activate(struct vq_throttle *t);

/* Limiter i and a request of bytes and ops: 0 and the tokens taken, or
 * nonzero: held, the timer set to kick its queue when it may pass (the
 * caller gives the chain back and stops running the queue). */
uint64_t vq_throttle_admit(struct vq_throttle *t, unsigned i, uint64_t bytes, uint64_t ops);

/* Like vq_throttle_admit but nothing is taken: for a device that learns
 * a request's size only once it is served (net rx), then pays with
 * vq_throttle_take (in debt when it cost more). */
uint64_t vq_throttle_wait(struct vq_throttle *t, unsigned i, uint64_t bytes, uint64_t ops);
void vq_throttle_take(struct vq_throttle *t, unsigned i, uint64_t bytes, uint64_t ops);

/* Device reset: no request is held any more; the buckets keep their
 * tokens (a reset does not refill them). */
void vq_throttle_reset(struct vq_throttle *t);

/* Snapshot blob: u32 format (1), u32 limiter count, then each limiter's
 * LIMITER_STATE_LEN bytes (limiter_encode). Returns the bytes written to
 * buf (0 when no limiter is active) or -ENOSPC when cap is too small. */
long vq_throttle_save(struct vq_throttle *t, void *buf, size_t cap);

/* Take a saved blob back, on a device not yet running. The device's own
 * limits (when its options set any) win: a saved limiter with the same
 * configuration gives its bucket state, one with another is dropped;
 * otherwise the saved limiters and states are adopted (the timer made
 * now). Returns 0, or -EINVAL for a malformed blob or another limiter
 * count, -errno of timerfd_create. */
int vq_throttle_restore(struct vq_throttle *t, const void *buf, size_t len);

/* Counters of limiter i, for metrics. Any thread. */
struct vq_throttle_stats {
	const char *name;
	bool active;
	uint64_t throttled;    /* requests held */
	uint64_t throttled_ns; /* time they were held */
};
void vq_throttle_stats(struct vq_throttle *t, unsigned i, struct vq_throttle_stats *s);

#endif
