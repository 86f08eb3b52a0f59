/* Attaching a virtio-mmio device to a VM: its MMIO window on the bus, one
 * ioeventfd per queue (QueueNotify writes complete in KVM and wake the event
 * loop), an irqfd for its interrupt, and the guest command-line word
 * `virtio_mmio.device=<size>@<base>:<irq>` (Linux
 * drivers/virtio/virtio_mmio.c, VIRTIO_MMIO_CMDLINE_DEVICES).
 */
#ifndef TVM_VDEV_H
#define TVM_VDEV_H

#include <stdint.h>

#include "devices/virtio/virtio_mmio.h"
#include "vmm/kvm/bus.h"
#include "vmm/kvm/event_loop.h"
#include "vmm/kvm/kvm.h"

#define VDEV_MMIO_BASE 0xd0000000ULL /* first device window, in the MMIO hole */
#define VDEV_MMIO_STRIDE 0x1000ULL   /* one page per device */
#define VDEV_FIRST_GSI 5             /* after COM1's IRQ 4; IOAPIC pins 5..23 */
#define VDEV_MAX 16

struct vdev;

/* One queue's notification source. */
struct vdev_queue {
	struct vdev *d;
	unsigned index;
	int fd; /* ioeventfd, -1 when not set up */
};

struct vdev {
	struct virtio_mmio t;
	bool t_ready;     /* t initialised (destroy it) */
	uint64_t base;    /* GPA of the MMIO window */
	unsigned gsi;
	int irq_fd;       /* irqfd eventfd */
	struct vdev_queue q[VIRTIO_MMIO_MAX_QUEUES];
	void *dev;                 /* the device model, closed by close_dev */
	void (*close_dev)(void *dev);
	char name[32];
};

/* Attach device dev (ops, closed with close_dev on vdev_destroy, also when
 * this fails) as slot number slot (0..VDEV_MAX-1): window at
 * VDEV_MMIO_BASE + slot * VDEV_MMIO_STRIDE, GSI VDEV_FIRST_GSI + slot.
 * Appends the command-line word to cmdline (cap bytes). -errno on failure. */
int vdev_attach(struct vdev *d, unsigned slot, const char *name, const struct virtio_dev_ops *ops, void *dev,
		void (*close_dev)(void *dev), struct kvm_sys *k, struct bus *mmio, struct event_loop *loop,
		const struct guest_mem *mem, char *cmdline, size_t cap, struct tvm_err *e);

/* Undo vdev_attach (the event loop must be stopped first). */
void vdev_destroy(struct vdev *d, struct event_loop *loop);

#endif
