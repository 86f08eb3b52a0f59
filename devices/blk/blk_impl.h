/* Inside the virtio-blk device: its state, shared by virtio_blk.c
 * (requests, ops, open/close) and blk_persist.c (snapshot state). */
#ifndef TVM_BLK_IMPL_H
#define TVM_BLK_IMPL_H

#include <stdint.h>
#include <sys/uio.h>

#include "devices/blk/blk_image.h"
#include "devices/blk/virtio_blk.h"
#include "devices/virtio/throttle.h"
#include "devices/virtio/virtqueue.h"

struct virtio_blk {
	struct blk_image img;
	char id[VIRTIO_BLK_ID_BYTES];   /* NUL padded, not terminated when 20 long */
	struct virtio_blk_config cfg;   /* little endian, as the driver reads it */
	uint64_t features;              /* offered */
	struct virtqueue *vq;           /* set while the driver has the device running */
	struct vq_chain chain;          /* the request being served */
	struct iovec data[VQ_MAX_SEGS]; /* its data part */
	struct vq_throttle thr;         /* the drive's rate limit: one limiter, "io" */
};

/* blk_persist.c: the snapshot hooks (the device's blob is its limiter
 * state, devices/virtio/throttle.h; none without a limit). */
long blk_save(void *dev, void *buf, size_t cap);
int blk_restore(void *dev, const void *buf, size_t len);

#endif
