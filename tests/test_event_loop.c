#include <check.h>
#include <errno.h>
#include <stdatomic.h>
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
	tcase_add_test(tc, bad_fd_and_full);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
