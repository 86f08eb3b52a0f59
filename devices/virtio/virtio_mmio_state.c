/* Saving and restoring the virtio-mmio transport (virtio_mmio.h). */
#include "devices/virtio/virtio_mmio.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#include <linux/virtio_config.h>

#define STATUS_BITS                                                                           \
	(VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK | \
	 VIRTIO_CONFIG_S_DRIVER_OK | VIRTIO_CONFIG_S_FAILED | VIRTIO_CONFIG_S_NEEDS_RESET)

void virtio_mmio_save(struct virtio_mmio *t, struct virtio_mmio_state *s)
{
	memset(s, 0, sizeof(*s));
	s->device_id = t->ops->device_id;
	s->num_queues = t->ops->num_queues;
	s->offered = t->offered;
	s->acked = t->acked;
	s->status = t->status;
	s->dev_features_sel = t->dev_features_sel;
	s->drv_features_sel = t->drv_features_sel;
	s->queue_sel = t->queue_sel;
	s->shm_sel = t->shm_sel;
	s->int_status = t->int_status;
	s->config_generation = t->config_generation;
	s->active = t->active;
	for (unsigned i = 0; i < t->ops->num_queues; i++) {
		const struct virtqueue *vq = &t->vqs[i];

		s->q[i] = (struct virtio_mmio_queue_state){
			.num = vq->num,
			.desc_gpa = vq->desc_gpa,
			.avail_gpa = vq->avail_gpa,
			.used_gpa = vq->used_gpa,
			.ready = vq->ready,
			.broken = vq->broken,
			.last_avail = vq->last_avail,
			.used_idx = vq->used_idx,
			.signalled_used = vq->signalled_used,
		};
	}
}

static int restore_queue(struct virtio_mmio *t, unsigned i, const struct virtio_mmio_queue_state *q, struct tvm_err *e)
{
	struct virtqueue *vq = &t->vqs[i];
	uint16_t used;

	vq_reset(vq);
	if (q->num > VQ_MAX_SIZE || q->ready > 1 || q->broken > 1)
		return tvm_errf(e, EINVAL, "queue %u: size %u or flags out of range", i, q->num);
	vq->num = (uint16_t)q->num;
	vq->desc_gpa = q->desc_gpa;
	vq->avail_gpa = q->avail_gpa;
	vq->used_gpa = q->used_gpa;
	if (!q->ready)
		return 0;
	/* The same checks as the driver's QueueReady write. */
	if (vq_enable(vq, t->mem, t->ops->queue_max, t->acked, e) < 0) {
		tvm_err_prefix(e, "queue %u", i);
		return -EINVAL;
	}
	memcpy(&used, &vq->used->idx, sizeof(used));
	if (le16toh(used) != q->used_idx) {
		vq->ready = false;
		return tvm_errf(e, EINVAL, "queue %u: used index %u, guest memory has %u", i, q->used_idx,
				le16toh(used));
	}
	vq->last_avail = q->last_avail;
	vq->used_idx = q->used_idx;
	vq->signalled_used = q->signalled_used;
	vq->broken = q->broken;
	return 0;
}

static int restore_locked(struct virtio_mmio *t, const struct virtio_mmio_state *s, struct tvm_err *e)
{
	int r;

	if (s->device_id != t->ops->device_id || s->num_queues != t->ops->num_queues)
		return tvm_errf(e, EINVAL, "device id %u with %u queues, this VM has %u with %u", s->device_id,
				s->num_queues, t->ops->device_id, t->ops->num_queues);
	if (s->offered != t->offered)
		return tvm_errf(e, EINVAL, "offered features 0x%llx, this device offers 0x%llx",
				(unsigned long long)s->offered, (unsigned long long)t->offered);
	if ((s->acked & ~s->offered) || (s->status & ~STATUS_BITS) || s->active > 1 ||
	    (s->active && !(s->status & VIRTIO_CONFIG_S_DRIVER_OK)))
		return tvm_errf(e, EINVAL, "features 0x%llx, status 0x%x or active %u inconsistent",
				(unsigned long long)s->acked, s->status, s->active);
	t->acked = s->acked;
	t->status = s->status;
	t->dev_features_sel = s->dev_features_sel;
	t->drv_features_sel = s->drv_features_sel;
	t->queue_sel = s->queue_sel;
	t->shm_sel = s->shm_sel;
	t->int_status = s->int_status & (VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG);
	t->config_generation = s->config_generation;
	for (unsigned i = 0; i < t->ops->num_queues; i++) {
		r = restore_queue(t, i, &s->q[i], e);
		if (r)
			return r;
	}
	if (s->active) {
		r = t->ops->activate(t->dev, t->vqs, t->acked);
		if (r < 0)
			return tvm_errf(e, -r, "activate: %s", strerror(-r));
		t->active = true;
	}
	return 0;
}

int virtio_mmio_restore(struct virtio_mmio *t, const struct virtio_mmio_state *s, struct tvm_err *e)
{
	int r;

	pthread_mutex_lock(&t->lock);
	r = restore_locked(t, s, e);
	if (r) {
		tvm_err_prefix(e, "virtio-mmio device %u", t->ops->device_id);
		for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
			vq_reset(&t->vqs[i]);
		t->active = false;
		t->status = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}
