/* How a device with host-side fds (vsock's sockets, net's TAP) gets them
 * watched and its queues run, injected so that no device depends on the
 * event loop. The VMM maps it to its event loop and virtio_mmio_notify();
 * tests to a small poll loop.
 */
#ifndef TVM_FD_WATCH_H
#define TVM_FD_WATCH_H

#include <stdint.h>

/* fd callback: events are the epoll events that fired. */
typedef void (*fd_watch_cb)(void *arg, uint32_t events);

/* All three are required.
 *  watch:   call cb(arg, events) on the event-loop thread while fd has any
 *           of epoll_events (level triggered). Returns 0 or -errno. May be
 *           called with the device's mutex (and maybe the transport lock)
 *           held, so it must not call into the device or the transport.
 *  unwatch: stop watching fd (same locking). A callback already under way
 *           may still run afterwards; the devices tolerate that.
 *  kick:    run the device on queue (the VMM maps it to
 *           virtio_mmio_notify()). Never called with any device or
 *           transport lock held. */
struct fd_watch_ops {
	int (*watch)(void *ctx, int fd, uint32_t epoll_events, fd_watch_cb cb, void *arg);
	void (*unwatch)(void *ctx, int fd);
	void (*kick)(void *ctx, unsigned queue);
	void *ctx;
};

#endif
