/* virtio block device (virtio 1.2 section 5.2) over a blk_image, one
 * request queue. Plugs into the virtio-mmio transport through
 * virtio_blk_ops; requests run synchronously in the queue's notify (the
 * event-loop thread), data moving with preadv/pwritev straight between the
 * image and guest memory.
 *
 * Requests: IN, OUT, FLUSH (fdatasync), GET_ID, DISCARD, WRITE_ZEROES. A
 * request is parsed by bytes, not by descriptors (any layout, spec 2.6.4):
 * the first 16 readable bytes are the header, the last writable byte the
 * status; data is the readable rest (OUT, DISCARD, WRITE_ZEROES) or the
 * writable rest (IN, GET_ID), and the other direction must be empty. A
 * malformed request gets VIRTIO_BLK_S_IOERR (unknown type: UNSUPP) and no
 * I/O; a chain with no writable byte is completed with nothing written.
 * The used length counts the writable bytes written from the first one on:
 * data plus status when the data part was filled, else the data bytes
 * filled (spec 2.7.8.2 makes it a lower bound).
 *
 * Offered features: SEG_MAX, SIZE_MAX, BLK_SIZE (512), FLUSH, and RO for a
 * read-only drive, else DISCARD and WRITE_ZEROES.
 *
 * Rate limit (blk_opts.limit): one limiter over the queue, costing each
 * request one operation and its data bytes (the chain's bytes but header
 * and status). A request the limiter holds stays on the ring (un-popped)
 * and the queue stops until the limiter's timer kicks it
 * (devices/virtio/throttle.h). The order of requests is kept.
 *
 * Snapshot state (a copy-on-write drive's blocks): devices/blk/blk_persist.h;
 * the device's own blob is its limiter's state (none without a limit).
 */
#ifndef TVM_VIRTIO_BLK_H
#define TVM_VIRTIO_BLK_H

#include <stdint.h>

#include <linux/virtio_blk.h>

#include "devices/blk/blk_image.h"
#include "devices/virtio/virtio_mmio.h"

#define VIRTIO_BLK_QUEUE_MAX 256                      /* QueueNumMax */
#define VIRTIO_BLK_SEG_MAX (VIRTIO_BLK_QUEUE_MAX - 2) /* data buffers per request */
#define VIRTIO_BLK_SIZE_MAX (1u << 20)                /* bytes per data buffer */
#define VIRTIO_BLK_DISCARD_SECTORS (1u << 21)         /* per discard segment: 1 GiB */
#define VIRTIO_BLK_ZEROES_SECTORS (1u << 16)          /* per write-zeroes segment: 32 MiB */
#define VIRTIO_BLK_DWZ_SEGS 32                        /* segments per discard/write-zeroes request */

struct virtio_blk; /* devices/blk/blk_impl.h */

/* Open the drive described by o (see struct blk_opts) and build the device.
 * Returns 0 and *out (free with virtio_blk_close), or -errno with
 * "drive PATH: reason" in e; -EINVAL also for an id over 20 bytes. */
int virtio_blk_open(struct virtio_blk **out, const struct blk_opts *o, struct tvm_err *e);
void virtio_blk_close(struct virtio_blk *b);

/* For virtio_mmio_init(&t, &virtio_blk_ops, blk, ...). */
extern const struct virtio_dev_ops virtio_blk_ops;

/* The virtio-blk device transport t runs, or NULL when t runs another kind
 * of device: how the VMM finds its drives among its virtio devices. */
struct virtio_blk *virtio_blk_of(const struct virtio_mmio *t);

/* The drive's size in bytes (a positive multiple of BLK_SECTOR). */
uint64_t virtio_blk_size(const struct virtio_blk *b);

#endif
