/* One epoll thread for device backends: ioeventfds (queue notifications),
 * sockets, timers. Handlers run on that thread, one at a time.
 */
#ifndef TVM_EVENT_LOOP_H
#define TVM_EVENT_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/core/err.h"

/* Called on the loop thread with the epoll events that fired. */
typedef void (*ev_fn)(void *opaque, uint32_t events);

#define EV_MAX_HANDLERS 512 /* vsock alone may watch 258 fds */

struct ev_handler {
	int fd;
	ev_fn fn;
	void *opaque;
	bool used;
	uint32_t gen; /* bumped by each ev_add of this slot: its epoll events carry it */
};

struct event_loop {
	int epfd;
	int stop_fd; /* eventfd: written to end the thread */
	pthread_t thread;
	bool running;
	pthread_mutex_t lock; /* guards h[] against add/remove from other threads */
	struct ev_handler h[EV_MAX_HANDLERS];
	/* First thing on the loop's thread, each time it starts (the VM
	 * confines the thread there); nonzero: the thread ends at once. NULL:
	 * nothing. Set after ev_init. */
	int (*thread_init)(void *arg);
	void *thread_init_arg;
};

/* Create the epoll set (no thread yet). -errno on failure. */
int ev_init(struct event_loop *l, struct tvm_err *e);

/* Watch fd for events (EPOLLIN etc.); fn runs on the loop thread. The fd
 * stays owned by the caller. -ENOSPC when full, -errno from epoll_ctl. */
int ev_add(struct event_loop *l, int fd, uint32_t events, ev_fn fn, void *opaque, struct tvm_err *e);

/* Stop watching fd. Safe from a handler; from another thread, the handler
 * may still be running when this returns unless the loop is stopped. */
void ev_del(struct event_loop *l, int fd);

/* Start / stop-and-join the thread. ev_stop is idempotent; the loop may be
 * started again after it (a snapshot stops it while saving). */
int ev_start(struct event_loop *l, struct tvm_err *e);
void ev_stop(struct event_loop *l);

/* ev_stop, then close the epoll set. Safe on a zeroed struct with fds -1. */
void ev_destroy(struct event_loop *l);

#endif
