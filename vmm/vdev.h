/* Attaching a virtio-mmio device to a VM: its MMIO window on the bus, one
 * ioeventfd per queue (QueueNotify writes complete in KVM and wake the event
 * loop), an irqfd for its interrupt, its NEEDS_RESET line in the VM's log,
 * and the guest command-line word `virtio_mmio.device=<size>@<base>:<irq>`
 * (Linux drivers/virtio/virtio_mmio.c, VIRTIO_MMIO_CMDLINE_DEVICES).
 */
#ifndef TVM_VDEV_H
#define TVM_VDEV_H

#include <stdint.h>
#include <stdio.h>

#include "devices/virtio/fd_watch.h"
#include "devices/virtio/virtio_mmio.h"
#include "vmm/kvm/bus.h"
#include "vmm/kvm/event_loop.h"
#include "vmm/kvm/kvm.h"

#define VDEV_MMIO_BASE 0xd0000000ULL /* first device window, in the MMIO hole */
#define VDEV_MMIO_STRIDE 0x1000ULL   /* one page per device */
#define VDEV_FIRST_GSI 5             /* after COM1's IRQ 4; IOAPIC pins 5..23 */
#define VDEV_MAX 16

/* What every device of a VM is wired to (the VM's, borrowed; all must
 * outlive the devices), like struct vcpu_host for the vCPUs. */
struct vdev_host {
	struct kvm_sys *kvm;         /* irqfd and ioeventfds */
	struct bus *mmio;            /* the devices' windows */
	struct event_loop *loop;     /* watches the ioeventfds */
	const struct guest_mem *mem; /* where the queues live */
	char *cmdline;               /* guest command line: each device appends its word */
	size_t cmdline_cap;          /* bytes at cmdline */
	/* One line, no newline (NEEDS_RESET reasons); NULL: not logged. Called
	 * on vCPU and event-loop threads. */
	void (*log)(void *ctx, const char *msg);
	void *ctx;
};

/* One device to attach. */
struct vdev_spec {
	const char *name; /* e.g. "virtio-blk0": messages, log, metrics (copied) */
	unsigned unit;    /* index among the devices of its kind (drive number) */
	const struct virtio_dev_ops *ops;
	void *dev; /* the device model, closed by close_dev */
	void (*close_dev)(void *dev);
};

struct vdev;

/* One queue's notification source. */
struct vdev_queue {
	struct vdev *d;
	unsigned index;
	int fd; /* ioeventfd, -1 when not set up */
};

struct vdev {
	struct virtio_mmio t;
	bool t_ready;  /* t initialised (destroy it) */
	uint64_t base; /* GPA of the MMIO window */
	unsigned gsi;
	unsigned unit; /* struct vdev_spec.unit */
	int irq_fd;    /* irqfd eventfd */
	struct vdev_queue q[VIRTIO_MMIO_MAX_QUEUES];
	void *dev; /* the device model, closed by close_dev */
	void (*close_dev)(void *dev);
	char name[32];
	struct event_loop *loop; /* the VM's, for vdev_fd_watch */
};

/* The fd-watch ops (devices/virtio/fd_watch.h) of the device attached, or
 * about to be attached, as d: fds watched on the VM's event loop, kick
 * runs d's queue. For a device that must be told before attachment and
 * uses them only once it runs (a drive's rate-limit timer). */
struct fd_watch_ops vdev_fd_watch(struct vdev *d);

/* Attach device s->dev (closed with s->close_dev on vdev_destroy, also
 * when this fails) to the VM h as slot number slot (0..VDEV_MAX-1): window
 * at VDEV_MMIO_BASE + slot * VDEV_MMIO_STRIDE, GSI VDEV_FIRST_GSI + slot.
 * Appends the command-line word to h->cmdline. -errno on failure (then
 * vdev_destroy cleans up what was done). */
int vdev_attach(struct vdev *d, unsigned slot, const struct vdev_spec *s, const struct vdev_host *h, struct tvm_err *e);

/* Undo vdev_attach (the event loop must be stopped first). */
void vdev_destroy(struct vdev *d, struct event_loop *loop);

/* After a restore, with the VM running: raise an interrupt still pending
 * in InterruptStatus (one may not have reached the guest) and run every
 * queue (work the driver queued just before the snapshot). Both are
 * harmless when spurious. */
void vdev_kick(struct vdev *d);

/* Append ,"devices":[{"name":NAME,"needs_reset":N},...] for d[0..n) to
 * the metrics JSON f (names are ours: no escaping needed). A device with
 * a rate limit adds "limiters":{"io"|"rx"|"tx":{"throttled":REQUESTS,
 * "throttled_us":TIME_HELD},...}. */
void vdev_write_metrics(const struct vdev *d, unsigned n, FILE *f);

#endif
