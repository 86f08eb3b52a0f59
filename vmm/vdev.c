#include "vmm/vdev.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "devices/virtio/throttle.h"

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

int vdev_attach(struct vdev *d, unsigned slot, const struct vdev_spec *s, const struct vdev_host *h, struct tvm_err *e)
{
	size_t used = strlen(h->cmdline);
	int r;

	memset(d, 0, sizeof(*d));
	d->dev = s->dev;
	d->close_dev = s->close_dev;
	d->unit = s->unit;
	d->irq_fd = -1;
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		d->q[i] = (struct vdev_queue){ .d = d, .index = i, .fd = -1 };
	if (slot >= VDEV_MAX)
		return tvm_errf(e, ENOSPC, "%s: more than %d virtio devices", s->name, VDEV_MAX);
	snprintf(d->name, sizeof(d->name), "%s", s->name);
	d->loop = h->loop;
	d->base = VDEV_MMIO_BASE + slot * VDEV_MMIO_STRIDE;
	d->gsi = VDEV_FIRST_GSI + slot;

	r = virtio_mmio_init(&d->t, s->ops, s->dev, h->mem, on_interrupt, d, e);
	if (r)
		return r;
	d->t_ready = true;
	virtio_mmio_set_log(&d->t, d->name, h->log, h->ctx);
	d->irq_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (d->irq_fd < 0)
		return tvm_errf(e, errno, "%s: eventfd: %s", d->name, strerror(errno));
	r = kvm_irqfd(h->kvm, d->gsi, d->irq_fd, e);
	for (unsigned i = 0; !r && i < s->ops->num_queues; i++) {
		d->q[i].fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (d->q[i].fd < 0)
			return tvm_errf(e, errno, "%s: eventfd: %s", d->name, strerror(errno));
		r = kvm_ioeventfd(h->kvm, d->base + VIRTIO_MMIO_NOTIFY_OFF, i, d->q[i].fd, e);
		if (!r)
			r = ev_add(h->loop, d->q[i].fd, EPOLLIN, on_notify, &d->q[i], e);
	}
	if (!r)
		r = bus_register(h->mmio, d->base, VIRTIO_MMIO_WINDOW, d->name, virtio_mmio_io, &d->t, e);
	if (r)
		return r;
	/* The window is VIRTIO_MMIO_WINDOW bytes; announce the whole page. */
	if (snprintf(h->cmdline + used, h->cmdline_cap - used, " virtio_mmio.device=4K@0x%llx:%u",
		     (unsigned long long)d->base, d->gsi) >= (int)(h->cmdline_cap - used))
		return tvm_errf(e, E2BIG, "%s: guest command line too long", d->name);
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

void vdev_kick(struct vdev *d)
{
	uint32_t pending;

	pthread_mutex_lock(&d->t.lock);
	pending = d->t.int_status;
	pthread_mutex_unlock(&d->t.lock);
	if (pending)
		eventfd_write(d->irq_fd, 1);
	for (unsigned q = 0; q < d->t.ops->num_queues; q++)
		virtio_mmio_notify(&d->t, q);
}

static int fd_watch(void *ctx, int fd, uint32_t events, fd_watch_cb cb, void *arg)
{
	return ev_add(((struct vdev *)ctx)->loop, fd, events, cb, arg, NULL);
}

static void fd_unwatch(void *ctx, int fd)
{
	ev_del(((struct vdev *)ctx)->loop, fd);
}

static void fd_kick(void *ctx, unsigned queue)
{
	virtio_mmio_notify(&((struct vdev *)ctx)->t, queue);
}

struct fd_watch_ops vdev_fd_watch(struct vdev *d)
{
	return (struct fd_watch_ops){ .watch = fd_watch, .unwatch = fd_unwatch, .kick = fd_kick, .ctx = d };
}

static void write_limiters(const struct vdev *d, FILE *f)
{
	struct vq_throttle *t = d->t_ready && d->t.ops->throttle ? d->t.ops->throttle(d->t.dev) : NULL;
	bool any = false;

	for (unsigned i = 0; t && i < VQ_THROTTLE_MAX; i++) {
		struct vq_throttle_stats s;

		vq_throttle_stats(t, i, &s);
		if (!s.active)
			continue;
		fprintf(f, "%s\"%s\":{\"throttled\":%llu,\"throttled_us\":%llu}", any ? "," : ",\"limiters\":{", s.name,
			(unsigned long long)s.throttled, (unsigned long long)(s.throttled_ns / 1000));
		any = true;
	}
	if (any)
		fprintf(f, "}");
}

void vdev_write_metrics(const struct vdev *d, unsigned n, FILE *f)
{
	fprintf(f, ",\"devices\":[");
	for (unsigned i = 0; i < n; i++) {
		fprintf(f, "%s{\"name\":\"%s\",\"needs_reset\":%llu", i ? "," : "", d[i].name,
			(unsigned long long)virtio_mmio_needs_resets(&d[i].t));
		write_limiters(&d[i], f);
		fprintf(f, "}");
	}
	fprintf(f, "]");
}
