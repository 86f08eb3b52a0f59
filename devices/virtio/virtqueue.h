/* The split virtqueue (virtio 1.2 section 2.7), device side, hardened
 * against a hostile driver. This is the only code that reads or writes the
 * rings in guest memory.
 *
 * The transport fills the driver's queue registers into struct virtqueue
 * (num, desc_gpa, avail_gpa, used_gpa) and calls vq_enable() when the driver
 * writes QueueReady = 1: the layout is validated there once and the three
 * ring areas are resolved to host pointers. After that every value read from
 * the rings (indices, descriptors) is read once into a local and checked
 * before use.
 *
 * Error policy: a driver that breaks the ring format (available index
 * running more than num ahead, head or next index >= table size, a loop, a
 * buffer outside RAM, readable after writable, bad indirect table, a chain
 * over 2^32 - 1 bytes or over VQ_MAX_SEGS buffers) gets the queue marked
 * broken: vq_pop() returns -EIO from then on and the transport sets
 * NEEDS_RESET. A correct driver never triggers this; the VMM carries on.
 *
 * Not thread-safe: the caller (the transport) serialises all calls.
 */
#ifndef TVM_VIRTQUEUE_H
#define TVM_VIRTQUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <linux/virtio_ring.h>

#include "vmm/core/guest_mem.h"

#define VQ_MAX_SIZE 32768 /* largest queue size the split ring allows */

/* Most non-empty buffers one chain may have, and the most entries in one
 * indirect table. 1024 is IOV_MAX, so a chain's iov can go to preadv()
 * as is. Linux sizes indirect tables by segment count (virtio-blk's
 * seg_max + 2), not by the ring size, hence a fixed cap rather than num. */
#define VQ_MAX_SEGS 1024

/* One popped descriptor chain as host buffers inside guest memory.
 * Device-readable buffers come first (iov[0..nreadable)), device-writable
 * ones after (iov[nreadable..n)); spec 2.7.4.2 requires that order and
 * vq_pop() enforces it. Zero-length descriptors are skipped entirely (their
 * address is not checked, they do not appear here), so every iov_len >= 1.
 * The pointers stay valid as long as guest memory is mapped; the guest may
 * change the bytes at any time, so read a header once into a local. */
struct vq_chain {
	uint16_t head;         /* descriptor index to give back to vq_push() */
	uint16_t nreadable;    /* entries of iov that are device-readable */
	uint16_t n;            /* entries of iov in total */
	uint32_t readable_len; /* bytes in iov[0..nreadable) */
	uint32_t writable_len; /* bytes in iov[nreadable..n) */
	struct iovec iov[VQ_MAX_SEGS];
};

struct virtqueue {
	/* Driver's registers, written by the transport while not ready. */
	uint16_t num;       /* QueueNum: entries */
	uint64_t desc_gpa;  /* QueueDesc */
	uint64_t avail_gpa; /* QueueDriver */
	uint64_t used_gpa;  /* QueueDevice */

	/* Below: owned by this module, set by vq_enable(). */
	bool ready;     /* validated and in use */
	bool broken;    /* the driver broke the ring format; stays until vq_reset() */
	bool event_idx; /* VIRTIO_RING_F_EVENT_IDX negotiated */
	bool indirect;  /* VIRTIO_RING_F_INDIRECT_DESC negotiated */
	const struct guest_mem *mem;
	struct vring_desc *desc;   /* [num] */
	struct vring_avail *avail; /* ring[num], then used_event */
	struct vring_used *used;   /* ring[num], then avail_event */
	uint16_t last_avail;       /* next available entry to pop (free-running) */
	uint16_t used_idx;         /* our copy of used->idx (free-running) */
	uint16_t signalled_used;   /* used_idx when vq_should_interrupt() last ran */
};

/* Forget everything, including the driver's registers (device reset). */
void vq_reset(struct virtqueue *vq);

/* Validate the queue described by num/desc_gpa/avail_gpa/used_gpa and start
 * using it (spec 2.7: num a power of two in 1..max_size; descriptor table
 * 16 * num bytes aligned 16; available ring 6 + 2 * num bytes aligned 2;
 * used ring 6 + 8 * num bytes aligned 4; all entirely in RAM). features are
 * the negotiated feature bits (only INDIRECT_DESC and EVENT_IDX matter).
 * mem is borrowed and must have a host mapping aligned to 16 bytes.
 * Returns 0, or -EINVAL with e naming the bad value (queue not ready). */
int vq_enable(struct virtqueue *vq, const struct guest_mem *mem, uint16_t max_size, uint64_t features,
	      struct tvm_err *e);

/* Stop using the queue (QueueReady = 0); registers are kept. */
void vq_disable(struct virtqueue *vq);

/* Take the next available chain into *c. Returns 1 when a chain was taken,
 * 0 when the ring is empty (or the queue is not ready), -EIO when the queue
 * is broken (see the error policy above). With EVENT_IDX, an empty ring
 * also publishes avail_event so the driver notifies for the next entry. */
int vq_pop(struct virtqueue *vq, struct vq_chain *c);

/* Give back the last n chains popped (none of them pushed): the next pops
 * return them again, read afresh from the ring. For a device that holds
 * popped buffers it cannot keep across a snapshot. n must not exceed the
 * chains popped since the queue was enabled. */
void vq_unpop(struct virtqueue *vq, uint16_t n);

/* Return chain head to the driver with len bytes written into its writable
 * buffers (spec 2.7.8: len is a lower bound of the bytes written, counted
 * from the first writable byte). Publishes used->idx with release order. */
void vq_push(struct virtqueue *vq, uint16_t head, uint32_t len);

/* The driver's avail->idx as it is now (free-running; 0 when the queue is
 * not ready), and a request for a notification once it moves on, whatever
 * the device has popped (EVENT_IDX: avail_event set to it, spec 2.7.10;
 * without EVENT_IDX the driver notifies anyway). For a device that waits
 * for the driver to give buffers back. The guest may change the index at
 * any time: a hint, never an index to use. */
uint16_t vq_watch_avail(struct virtqueue *vq);

/* Whether the driver wants an interrupt for the entries pushed since the
 * previous call (spec 2.7.10: used_event with EVENT_IDX, else
 * VRING_AVAIL_F_NO_INTERRUPT). False when nothing was pushed. */
bool vq_should_interrupt(struct virtqueue *vq);

#endif
