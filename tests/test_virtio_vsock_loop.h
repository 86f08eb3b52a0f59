/* A small single-threaded poll loop standing in for the VMM's event loop
 * as the devices' fd-watch ops (struct fd_watch_ops), for the vsock and
 * net tests and fuzz targets. Like the event loop: level triggered, one
 * registration per fd, callbacks run outside any lock; kick runs the
 * transport on the queue. */
#ifndef TVM_TESTS_VIRTIO_VSOCK_LOOP_H
#define TVM_TESTS_VIRTIO_VSOCK_LOOP_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/epoll.h>

#include "devices/vsock/virtio_vsock.h"

struct tw_entry {
	int fd;
	uint32_t events;
	fd_watch_cb cb;
	void *arg;
};

struct tw {
	struct tw_entry e[VSOCK_MAX_CONNS + 8];
	int n;
	struct virtio_mmio *t; /* kick target */
	int kicks[3];
};

static inline int tw_watch(void *ctx, int fd, uint32_t events, fd_watch_cb cb, void *arg)
{
	struct tw *w = ctx;

	for (int i = 0; i < w->n; i++)
		if (w->e[i].fd == fd)
			return -EEXIST; /* as epoll_ctl(ADD) would */
	if (w->n == (int)(sizeof(w->e) / sizeof(w->e[0])))
		return -ENOSPC;
	w->e[w->n++] = (struct tw_entry){ fd, events, cb, arg };
	return 0;
}

static inline void tw_unwatch(void *ctx, int fd)
{
	struct tw *w = ctx;

	for (int i = 0; i < w->n; i++)
		if (w->e[i].fd == fd)
			w->e[i] = w->e[--w->n];
}

static inline void tw_kick(void *ctx, unsigned q)
{
	struct tw *w = ctx;

	if (q < 3)
		__atomic_fetch_add(&w->kicks[q], 1, __ATOMIC_RELAXED);
	virtio_mmio_notify(w->t, q);
}

static inline bool tw_watched(struct tw *w, int fd, uint32_t *events)
{
	for (int i = 0; i < w->n; i++)
		if (w->e[i].fd == fd) {
			if (events)
				*events = w->e[i].events;
			return true;
		}
	return false;
}

static inline uint32_t tw_epoll(short re)
{
	return (re & POLLIN ? EPOLLIN : 0) | (re & POLLOUT ? EPOLLOUT : 0) | (re & POLLERR ? EPOLLERR : 0) |
	       (re & POLLHUP ? EPOLLHUP : 0);
}

/* One round: poll every watched fd, run the callbacks of the ready ones.
 * Returns how many ran. */
static inline int tw_round(struct tw *w, int timeout_ms)
{
	struct pollfd p[VSOCK_MAX_CONNS + 8];
	struct tw_entry snap[VSOCK_MAX_CONNS + 8];
	int n = w->n, ran = 0;

	memcpy(snap, w->e, sizeof(snap[0]) * (size_t)n);
	for (int i = 0; i < n; i++)
		p[i] = (struct pollfd){ .fd = snap[i].fd,
					.events = (short)((snap[i].events & EPOLLIN ? POLLIN : 0) |
							  (snap[i].events & EPOLLOUT ? POLLOUT : 0)) };
	if (poll(p, (nfds_t)n, timeout_ms) <= 0)
		return 0;
	for (int i = 0; i < n; i++) {
		/* Callbacks may unwatch others: run only what is still watched,
		 * as the event loop does. */
		if (!p[i].revents || !tw_watched(w, snap[i].fd, NULL))
			continue;
		snap[i].cb(snap[i].arg, tw_epoll(p[i].revents));
		ran++;
	}
	return ran;
}

#endif
