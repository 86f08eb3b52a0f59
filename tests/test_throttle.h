/* For the rate-limit tests of the devices: a fake clock the limiters read
 * (devices/virtio/throttle.h takes one), and the limiter's timer fired by
 * hand, as the event loop would once it expires: the device's timerfd is
 * found among the fds the test's watch ops (struct tw) hold. */
#ifndef TVM_TESTS_THROTTLE_H
#define TVM_TESTS_THROTTLE_H

#include <check.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>

#include "devices/virtio/throttle.h"
#include "tests/test_virtio_vsock_loop.h"

#define TT_MS 1000000ULL
#define TT_S 1000000000ULL

static uint64_t tt_now; /* ns, the limiters' clock */

static inline uint64_t tt_clock(void)
{
	return tt_now;
}

/* Whether the device's timer is set (it would fire). */
static inline bool tt_armed(const struct vq_throttle *th)
{
	struct itimerspec its;

	ck_assert_int_ge(th->fd, 0);
	ck_assert_int_eq(timerfd_gettime(th->fd, &its), 0);
	return its.it_value.tv_sec || its.it_value.tv_nsec;
}

/* Run the timer's callback now (the timer must be watched). */
static inline void tt_fire(struct tw *w, const struct vq_throttle *th)
{
	for (int i = 0; i < w->n; i++) {
		if (w->e[i].fd == th->fd) {
			w->e[i].cb(w->e[i].arg, EPOLLIN);
			return;
		}
	}
	ck_abort_msg("the limiter's timer is not watched");
}

#endif
