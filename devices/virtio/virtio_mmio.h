/* virtio over MMIO, version 2 ("modern") register layout (virtio 1.2
 * section 4.2.2). The transport owns the registers, the device status state
 * machine (section 2.1, 3.1), feature negotiation and the virtqueues; a
 * device plugs in through struct virtio_dev_ops and knows nothing of MMIO.
 *
 * Threads: virtio_mmio_io() runs on vCPU threads, virtio_mmio_notify() on
 * the event-loop thread (or on a vCPU thread for a QueueNotify write that
 * reached the handler). One mutex per transport serialises both; every
 * virtio_dev_ops callback and the interrupt callback run with it held and
 * must not call back into the transport.
 */
#ifndef TVM_VIRTIO_MMIO_H
#define TVM_VIRTIO_MMIO_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/virtio_mmio.h>

#include "devices/virtio/virtqueue.h"
#include "vmm/core/err.h"
#include "vmm/core/guest_mem.h"

#define VIRTIO_MMIO_WINDOW 0x200                        /* bytes of MMIO space per device */
#define VIRTIO_MMIO_NOTIFY_OFF VIRTIO_MMIO_QUEUE_NOTIFY /* 0x050: ioeventfd here, datamatch = queue index, 4 bytes */
#define VIRTIO_MMIO_MAX_QUEUES 8
#define VIRTIO_MMIO_VENDOR 0x4d4d5654 /* VendorID register value: "TVMM" */

struct vq_throttle; /* devices/virtio/throttle.h */

/* What a device provides. Every callback gets the dev pointer given to
 * virtio_mmio_init() and runs with the transport lock held. */
struct virtio_dev_ops {
	uint32_t device_id;   /* spec 5: 2 = block */
	uint16_t num_queues;  /* 1..VIRTIO_MMIO_MAX_QUEUES */
	uint16_t queue_max;   /* QueueNumMax: power of two, 1..VQ_MAX_SIZE */
	uint32_t config_size; /* bytes of device configuration space (at 0x100) */

	/* Device-specific feature bits offered (bits 0..23 and 50..63, spec
	 * 2.2; other bits are dropped). The transport adds VIRTIO_F_VERSION_1,
	 * VIRTIO_RING_F_INDIRECT_DESC and VIRTIO_RING_F_EVENT_IDX itself.
	 * Asked once, at virtio_mmio_init(). */
	uint64_t (*features)(void *dev);
	/* Read/write len (1, 2 or 4) bytes at off in the configuration space;
	 * off + len <= config_size is guaranteed. Values little endian.
	 * config_write may be NULL (writes ignored). */
	void (*config_read)(void *dev, uint32_t off, uint8_t *data, uint32_t len);
	void (*config_write)(void *dev, uint32_t off, const uint8_t *data, uint32_t len);
	/* The driver set DRIVER_OK. vqs[0..num_queues) are the device's queues
	 * (owned by the transport, valid until reset; a queue the driver did
	 * not set up has ready == false). features: the negotiated bits.
	 * Return 0, or -errno to put the device into NEEDS_RESET. */
	int (*activate)(void *dev, struct virtqueue *vqs, uint64_t features);
	/* The driver reset the device (status 0); drop the queue pointers. */
	void (*reset)(void *dev);
	/* Queue `queue` (ready, not broken) has work: pop, process and push
	 * chains. Return 0, or -EIO when vq_pop() reported a broken queue. The
	 * transport then decides about the interrupt (vq_should_interrupt). */
	int (*notify)(void *dev, unsigned queue);
	/* Snapshot hooks, optional (NULL: nothing device-specific to keep).
	 * save writes at most cap bytes to buf and returns the length used or
	 * -errno (called with the transport lock held, before the transport
	 * saves its queue positions, so it may give popped chains back with
	 * vq_unpop); restore runs on a
	 * fresh device before the transport's own state is restored and the VM
	 * runs, and returns 0 or -errno for a blob it refuses. */
	long (*save)(void *dev, void *buf, size_t cap);
	int (*restore)(void *dev, const void *buf, size_t len);
	/* The device's rate limiters (devices/virtio/throttle.h), for
	 * metrics; optional (NULL: none). Any thread, no lock held. */
	struct vq_throttle *(*throttle)(void *dev);
};

/* Raise the device's interrupt (irqfd write in the VMM; tests count). Called
 * after InterruptStatus was updated, with the transport lock held. */
typedef void (*virtio_interrupt_fn)(void *ctx);

/* Where the transport reports a device gone to NEEDS_RESET: one line, no
 * newline (the VMM writes it to the VM's log). Called with the transport
 * lock held (on a vCPU or the event-loop thread); must not call back. */
typedef void (*virtio_log_fn)(void *ctx, const char *line);

struct virtio_mmio {
	pthread_mutex_t lock;
	const struct virtio_dev_ops *ops;
	void *dev;
	const struct guest_mem *mem;
	virtio_interrupt_fn interrupt;
	void *irq_ctx;

	uint64_t offered; /* device features incl. transport bits */
	uint64_t acked;   /* DriverFeatures */
	uint32_t status;  /* Status register */
	uint32_t dev_features_sel, drv_features_sel, queue_sel, shm_sel;
	uint32_t int_status; /* InterruptStatus: VIRTIO_MMIO_INT_VRING | _CONFIG */
	uint32_t config_generation;
	bool active;        /* DRIVER_OK set and ops->activate succeeded */
	struct tvm_err err; /* why NEEDS_RESET was last set: "queue N: reason" or a failed start */
	struct virtqueue vqs[VIRTIO_MMIO_MAX_QUEUES];

	const char *name; /* for the log line (virtio_mmio_set_log), else NULL */
	virtio_log_fn log;
	void *log_ctx;
	uint64_t needs_resets; /* times NEEDS_RESET was set (__atomic; virtio_mmio_needs_resets) */
};

/* Set up t for dev. mem, ops and dev are borrowed and must outlive t.
 * Returns 0 or -EINVAL (bad ops: queue counts, missing callbacks). */
int virtio_mmio_init(struct virtio_mmio *t, const struct virtio_dev_ops *ops, void *dev, const struct guest_mem *mem,
		     virtio_interrupt_fn interrupt, void *irq_ctx, struct tvm_err *e);
void virtio_mmio_destroy(struct virtio_mmio *t);

/* Name the device (e.g. "virtio-blk0", borrowed, must outlive t) and give
 * the transport its log: when the device goes to NEEDS_RESET (a broken
 * queue, a queue refused at QueueReady, a failed start), log gets one line
 * "NAME: device needs reset: REASON", the reason naming the queue. Once per
 * reset cycle: again only after the driver has reset the device. Without
 * a log, nothing is written (the count still runs). */
void virtio_mmio_set_log(struct virtio_mmio *t, const char *name, virtio_log_fn log, void *ctx);

/* How many times the device went to NEEDS_RESET since init (at most once
 * per reset cycle). Any thread. */
uint64_t virtio_mmio_needs_resets(const struct virtio_mmio *t);

/* Bus handler (vmm/kvm/bus.h bus_io_fn) for the VIRTIO_MMIO_WINDOW bytes at the
 * device's base; opaque is the struct virtio_mmio. Registers take aligned
 * 4-byte accesses only (others: reads return 0, writes are ignored); the
 * configuration space at 0x100 takes 1, 2 or 4 bytes. */
void virtio_mmio_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);

/* The driver notified queue `queue` (ioeventfd on VIRTIO_MMIO_NOTIFY_OFF),
 * or a device event source has new data for it: run the device on it if
 * DRIVER_OK is set and the queue is ready, then interrupt if the driver
 * wants one. A broken queue sets NEEDS_RESET with a config interrupt. */
void virtio_mmio_notify(struct virtio_mmio *t, unsigned queue);

/* The transport's registers and queue positions, for a snapshot
 * (devices/virtio/virtio_mmio_state.c). Queue host pointers are not kept: restore
 * resolves them again through vq_enable(). */
struct virtio_mmio_queue_state {
	uint32_t num;
	uint64_t desc_gpa, avail_gpa, used_gpa;
	uint32_t ready, broken;
	uint16_t last_avail, used_idx, signalled_used;
};

struct virtio_mmio_state {
	uint32_t device_id, num_queues;
	uint64_t offered, acked;
	uint32_t status, dev_features_sel, drv_features_sel, queue_sel, shm_sel;
	uint32_t int_status, config_generation, active;
	struct virtio_mmio_queue_state q[VIRTIO_MMIO_MAX_QUEUES];
};

/* Copy t's state into s. The caller holds t->lock (a snapshot holds every
 * transport's lock while it saves, so no queue moves meanwhile). */
void virtio_mmio_save(struct virtio_mmio *t, struct virtio_mmio_state *s);

/* Put s into a freshly initialised t (same device) as if the driver had
 * written it: the device id, queue count and offered features must match,
 * acked features be offered, every ready queue pass vq_enable() (and its
 * used index in guest memory agree), and an active device is activated
 * again. Returns 0 or -EINVAL with e naming the device, queue and value.
 * Nothing is notified; the caller kicks the queues once the VM runs. */
int virtio_mmio_restore(struct virtio_mmio *t, const struct virtio_mmio_state *s, struct tvm_err *e);

/* The device's configuration changed (e.g. capacity): bump
 * ConfigGeneration and send a configuration change interrupt. */
void virtio_mmio_config_changed(struct virtio_mmio *t);

#endif
