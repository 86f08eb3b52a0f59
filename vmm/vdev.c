#include "vmm/vdev.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

static void on_interrupt(void *ctx)
{
	struct vdev *d = ctx;

	eventfd_write(d->irq_fd, 1);
}

static void on_notify(void *opaque, uint32_t events)
{
	struct vdev_queue *q = opaque;
	eventfd_t v;

	(void)events;
	if (eventfd_read(q->fd, &v) == 0)
		virtio_mmio_notify(&q->d->t, q->index);
}

int vdev_attach(struct vdev *d, unsigned slot, const char *name, const struct virtio_dev_ops *ops, void *dev,
		void (*close_dev)(void *dev), struct kvm_sys *k, struct bus *mmio, struct event_loop *loop,
		const struct guest_mem *mem, char *cmdline, size_t cap, struct tvm_err *e)
{
	size_t used = strlen(cmdline);
	int r;

	memset(d, 0, sizeof(*d));
	d->dev = dev;
	d->close_dev = close_dev;
	d->irq_fd = -1;
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		d->q[i] = (struct vdev_queue){ .d = d, .index = i, .fd = -1 };
	if (slot >= VDEV_MAX)
		return tvm_errf(e, ENOSPC, "%s: more than %d virtio devices", name, VDEV_MAX);
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->base = VDEV_MMIO_BASE + slot * VDEV_MMIO_STRIDE;
	d->gsi = VDEV_FIRST_GSI + slot;

	r = virtio_mmio_init(&d->t, ops, dev, mem, on_interrupt, d, e);
	if (r)
		return r;
	d->t_ready = true;
	d->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->irq_fd < 0)
		return tvm_errf(e, errno, "%s: eventfd: %s", name, strerror(errno));
	r = kvm_irqfd(k, d->gsi, d->irq_fd, e);
	for (unsigned i = 0; !r && i < ops->num_queues; i++) {
		d->q[i].fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (d->q[i].fd < 0)
			return tvm_errf(e, errno, "%s: eventfd: %s", name, strerror(errno));
		r = kvm_ioeventfd(k, d->base + VIRTIO_MMIO_NOTIFY_OFF, i, d->q[i].fd, e);
		if (!r)
			r = ev_add(loop, d->q[i].fd, EPOLLIN, on_notify, &d->q[i], e);
	}
	if (!r)
		r = bus_register(mmio, d->base, VIRTIO_MMIO_WINDOW, d->name, virtio_mmio_io, &d->t, e);
	if (r)
		return r;
	/* The window is VIRTIO_MMIO_WINDOW bytes; announce the whole page. */
	if (snprintf(cmdline + used, cap - used, " virtio_mmio.device=4K@0x%llx:%u", (unsigned long long)d->base,
		     d->gsi) >= (int)(cap - used))
		return tvm_errf(e, E2BIG, "%s: guest command line too long", name);
	return 0;
}

void vdev_destroy(struct vdev *d, struct event_loop *loop)
{
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++) {
		if (d->q[i].fd >= 0) {
			ev_del(loop, d->q[i].fd);
			close(d->q[i].fd);
			d->q[i].fd = -1;
		}
	}
	if (d->t_ready)
		virtio_mmio_destroy(&d->t);
	d->t_ready = false;
	if (d->irq_fd >= 0)
		close(d->irq_fd);
	d->irq_fd = -1;
	if (d->dev && d->close_dev)
		d->close_dev(d->dev);
	d->dev = NULL;
}
