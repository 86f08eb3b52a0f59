#include "vmm/kvm/event_loop.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* An event names its slot and the slot's generation at ev_add: a slot
 * freed and taken again (by another thread, or by a handler earlier in
 * the same epoll_wait batch) is a new generation, and an event still in
 * the batch for the old one is dropped, not given to the new handler
 * (level-triggered: a condition that still holds is reported again). */
#define STOP_EVENT UINT64_MAX

static uint64_t ev_data(const struct event_loop *l, const struct ev_handler *slot)
{
	return (uint64_t)(slot - l->h) << 32 | slot->gen;
}

int ev_init(struct event_loop *l, struct tvm_err *e)
{
	memset(l, 0, sizeof(*l));
	l->stop_fd = -1;
	pthread_mutex_init(&l->lock, NULL);
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0)
		return tvm_errf(e, errno, "event loop: epoll_create1: %s", strerror(errno));
	l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (l->stop_fd < 0)
		return tvm_errf(e, errno, "event loop: eventfd: %s", strerror(errno));
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = STOP_EVENT };
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->stop_fd, &ev) < 0)
		return tvm_errf(e, errno, "event loop: epoll_ctl: %s", strerror(errno));
	return 0;
}

int ev_add(struct event_loop *l, int fd, uint32_t events, ev_fn fn, void *opaque, struct tvm_err *e)
{
	struct ev_handler *slot = NULL;
	struct epoll_event ev = { .events = events };

	pthread_mutex_lock(&l->lock);
	for (int i = 0; i < EV_MAX_HANDLERS && !slot; i++)
		if (!l->h[i].used)
			slot = &l->h[i];
	if (!slot) {
		pthread_mutex_unlock(&l->lock);
		return tvm_errf(e, ENOSPC, "event loop: more than %d handlers", EV_MAX_HANDLERS);
	}
	*slot = (struct ev_handler){ .fd = fd, .fn = fn, .opaque = opaque, .used = true, .gen = slot->gen + 1 };
	ev.data.u64 = ev_data(l, slot);
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		int err = errno;
		slot->used = false;
		pthread_mutex_unlock(&l->lock);
		return tvm_errf(e, err, "event loop: epoll_ctl add fd %d: %s", fd, strerror(err));
	}
	pthread_mutex_unlock(&l->lock);
	return 0;
}

void ev_del(struct event_loop *l, int fd)
{
	pthread_mutex_lock(&l->lock);
	for (int i = 0; i < EV_MAX_HANDLERS; i++) {
		if (l->h[i].used && l->h[i].fd == fd) {
			epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL);
			l->h[i].used = false;
		}
	}
	pthread_mutex_unlock(&l->lock);
}

static void *loop_thread(void *arg)
{
	struct event_loop *l = arg;
	struct epoll_event evs[16];
	sigset_t set;

	/* Signals belong to the embedding program's own threads. */
	sigfillset(&set);
	pthread_sigmask(SIG_SETMASK, &set, NULL);
	if (l->thread_init && l->thread_init(l->thread_init_arg))
		return NULL;
	for (;;) {
		int n = epoll_wait(l->epfd, evs, 16, -1);

		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			uint64_t d = evs[i].data.u64;
			struct ev_handler copy;

			if (d == STOP_EVENT)
				return NULL;
			/* A handler may remove itself or others; read the slot
			 * under the lock and skip slots freed or reused meanwhile. */
			pthread_mutex_lock(&l->lock);
			copy = l->h[d >> 32];
			pthread_mutex_unlock(&l->lock);
			if (copy.used && copy.gen == (uint32_t)d)
				copy.fn(copy.opaque, evs[i].events);
		}
	}
	return NULL;
}

int ev_start(struct event_loop *l, struct tvm_err *e)
{
	int r = pthread_create(&l->thread, NULL, loop_thread, l);

	if (r)
		return tvm_errf(e, r, "event loop: pthread_create: %s", strerror(r));
	l->running = true;
	return 0;
}

void ev_stop(struct event_loop *l)
{
	if (!l->running)
		return;
	eventfd_write(l->stop_fd, 1);
	pthread_join(l->thread, NULL);
	l->running = false;
	/* Consume the stop so that ev_start can run the loop again. */
	eventfd_t v;
	eventfd_read(l->stop_fd, &v);
}

void ev_destroy(struct event_loop *l)
{
	ev_stop(l);
	if (l->epfd > 0)
		close(l->epfd);
	if (l->stop_fd >= 0)
		close(l->stop_fd);
	l->epfd = l->stop_fd = -1;
	pthread_mutex_destroy(&l->lock);
}
