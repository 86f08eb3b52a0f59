#include <check.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "tests/unit.h"
#include "vmm/kvm/event_loop.h"

struct counter {
	int fd;
	_Atomic int calls;
	_Atomic uint64_t sum;
};

static void on_event(void *opaque, uint32_t events)
{
	struct counter *c = opaque;
	eventfd_t v;

	(void)events;
	if (eventfd_read(c->fd, &v) == 0)
		atomic_fetch_add(&c->sum, v);
	atomic_fetch_add(&c->calls, 1);
}

static void wait_sum(struct counter *c, uint64_t want)
{
	/* Bounded wait: the loop thread needs a moment to run. */
	for (int i = 0; i < 2000 && atomic_load(&c->sum) != want; i++)
		usleep(1000);
}

START_TEST(dispatches_and_removes)
{
	struct event_loop l;
	struct tvm_err e = { 0 };
	struct counter a = { .fd = eventfd(0, EFD_NONBLOCK) }, b = { .fd = eventfd(0, EFD_NONBLOCK) };

	ck_assert_int_eq(ev_init(&l, &e), 0);
	ck_assert_int_eq(ev_add(&l, a.fd, EPOLLIN, on_event, &a, &e), 0);
	ck_assert_int_eq(ev_add(&l, b.fd, EPOLLIN, on_event, &b, &e), 0);
	ck_assert_int_eq(ev_start(&l, &e), 0);
	eventfd_write(a.fd, 3);
	eventfd_write(b.fd, 5);
	wait_sum(&a, 3);
	wait_sum(&b, 5);
	ck_assert_uint_eq(atomic_load(&a.sum), 3);
	ck_assert_uint_eq(atomic_load(&b.sum), 5);
	ev_del(&l, a.fd);
	eventfd_write(a.fd, 7);
	eventfd_write(b.fd, 1);
	wait_sum(&b, 6);
	ck_assert_uint_eq(atomic_load(&b.sum), 6);
	ck_assert_uint_eq(atomic_load(&a.sum), 3); /* removed: not called again */
	ev_destroy(&l);
	ev_destroy(&l); /* idempotent */
	close(a.fd);
	close(b.fd);
}
END_TEST

/* Two ready handlers in one epoll_wait batch: the first to run removes
 * the other and adds a third, which takes the freed slot. The removed
 * one's event, still in the batch, must not reach the third (whose fd
 * is never ready): a vsock connection would be reset by a hang-up that
 * belonged to a client gone before it. */
struct swap {
	struct event_loop *l;
	int fds[2];
	struct counter third;
	_Atomic int first;
	_Atomic int ran;
	_Atomic bool added;
};

static struct swap sw;

static void on_swap(void *opaque, uint32_t events)
{
	int me = (int)(intptr_t)opaque;
	eventfd_t v;

	(void)events;
	eventfd_read(sw.fds[me], &v);
	if (atomic_exchange(&sw.first, 1) == 0) {
		ev_del(sw.l, sw.fds[!me]);
		sw.added = ev_add(sw.l, sw.third.fd, EPOLLIN, on_event, &sw.third, NULL) == 0;
	}
	atomic_fetch_add(&sw.ran, 1);
}

START_TEST(a_stale_event_never_reaches_a_reused_slot)
{
	struct event_loop l;
	struct tvm_err e = { 0 };
	struct counter marker = { .fd = eventfd(0, EFD_NONBLOCK) };

	memset(&sw, 0, sizeof(sw));
	sw.l = &l;
	sw.third.fd = eventfd(0, EFD_NONBLOCK);
	ck_assert_int_eq(ev_init(&l, &e), 0);
	for (int i = 0; i < 2; i++) {
		sw.fds[i] = eventfd(1, EFD_NONBLOCK); /* ready before the loop runs: one batch */
		ck_assert_int_eq(ev_add(&l, sw.fds[i], EPOLLIN, on_swap, (void *)(intptr_t)i, &e), 0);
	}
	ck_assert_int_eq(ev_start(&l, &e), 0);
	for (int i = 0; i < 2000 && !atomic_load(&sw.ran); i++)
		usleep(1000);
	/* An event after the batch: once it is seen, the batch is over. */
	ck_assert_int_eq(ev_add(&l, marker.fd, EPOLLIN, on_event, &marker, &e), 0);
	eventfd_write(marker.fd, 1);
	wait_sum(&marker, 1);
	ck_assert_uint_eq(atomic_load(&marker.sum), 1);
	int ran = atomic_load(&sw.ran), stale = atomic_load(&sw.third.calls);
	ck_assert(atomic_load(&sw.added));
	ck_assert_int_eq(ran, 1);
	ck_assert_int_eq(stale, 0);
	ev_destroy(&l);
	close(marker.fd);
	close(sw.third.fd);
	close(sw.fds[0]);
	close(sw.fds[1]);
}
END_TEST

START_TEST(bad_fd_and_full)
{
	struct event_loop l;
	struct tvm_err e = { 0 };
	int fds[EV_MAX_HANDLERS];

	ck_assert_int_eq(ev_init(&l, &e), 0);
	ck_assert_int_eq(ev_add(&l, -1, EPOLLIN, on_event, NULL, &e), -EBADF);
	for (int i = 0; i < EV_MAX_HANDLERS; i++) {
		fds[i] = eventfd(0, 0);
		ck_assert_int_eq(ev_add(&l, fds[i], EPOLLIN, on_event, NULL, &e), 0);
	}
	int extra = eventfd(0, 0);
	ck_assert_int_eq(ev_add(&l, extra, EPOLLIN, on_event, NULL, &e), -ENOSPC);
	ev_destroy(&l);
	for (int i = 0; i < EV_MAX_HANDLERS; i++)
		close(fds[i]);
	close(extra);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("event_loop");
	TCase *tc = tcase_create("event_loop");

	tcase_add_test(tc, dispatches_and_removes);
	tcase_add_test(tc, a_stale_event_never_reaches_a_reused_slot);
	tcase_add_test(tc, bad_fd_and_full);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
