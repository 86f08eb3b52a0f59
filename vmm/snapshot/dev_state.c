#include "vmm/snapshot/dev_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void dev_state_write_virtio(struct snap_w *w, uint32_t slot, const struct virtio_mmio_state *s, const void *blob,
			    size_t blob_len)
{
	snap_w_begin(w, SNAP_VIRTIO, slot);
	snap_w_u32(w, s->device_id);
	snap_w_u32(w, s->num_queues);
	snap_w_u64(w, s->offered);
	snap_w_u64(w, s->acked);
	snap_w_u32(w, s->status);
	snap_w_u32(w, s->dev_features_sel);
	snap_w_u32(w, s->drv_features_sel);
	snap_w_u32(w, s->queue_sel);
	snap_w_u32(w, s->shm_sel);
	snap_w_u32(w, s->int_status);
	snap_w_u32(w, s->config_generation);
	snap_w_u32(w, s->active);
	for (unsigned i = 0; i < s->num_queues && i < VIRTIO_MMIO_MAX_QUEUES; i++) {
		const struct virtio_mmio_queue_state *q = &s->q[i];

		snap_w_u32(w, q->num);
		snap_w_u64(w, q->desc_gpa);
		snap_w_u64(w, q->avail_gpa);
		snap_w_u64(w, q->used_gpa);
		snap_w_u32(w, q->ready);
		snap_w_u32(w, q->broken);
		snap_w_u32(w, q->last_avail);
		snap_w_u32(w, q->used_idx);
		snap_w_u32(w, q->signalled_used);
	}
	snap_w_u32(w, (uint32_t)blob_len);
	snap_w_bytes(w, blob, blob_len);
	snap_w_end(w);
}

static uint16_t r_u16(struct snap_r *r)
{
	uint32_t v = snap_r_u32(r);

	if (v > UINT16_MAX)
		snap_r_fail(r);
	return (uint16_t)v;
}

int dev_state_read_virtio(const struct snap_section *sec, struct virtio_mmio_state *s, const uint8_t **blob,
			  size_t *blob_len, struct tvm_err *e)
{
	struct snap_r r;
	uint32_t n;

	memset(s, 0, sizeof(*s));
	snap_r_init(&r, sec);
	s->device_id = snap_r_u32(&r);
	s->num_queues = snap_r_u32(&r);
	if (s->num_queues > VIRTIO_MMIO_MAX_QUEUES)
		snap_r_fail(&r);
	s->offered = snap_r_u64(&r);
	s->acked = snap_r_u64(&r);
	s->status = snap_r_u32(&r);
	s->dev_features_sel = snap_r_u32(&r);
	s->drv_features_sel = snap_r_u32(&r);
	s->queue_sel = snap_r_u32(&r);
	s->shm_sel = snap_r_u32(&r);
	s->int_status = snap_r_u32(&r);
	s->config_generation = snap_r_u32(&r);
	s->active = snap_r_u32(&r);
	for (unsigned i = 0; i < s->num_queues && !r.bad; i++) {
		struct virtio_mmio_queue_state *q = &s->q[i];

		q->num = snap_r_u32(&r);
		q->desc_gpa = snap_r_u64(&r);
		q->avail_gpa = snap_r_u64(&r);
		q->used_gpa = snap_r_u64(&r);
		q->ready = snap_r_u32(&r);
		q->broken = snap_r_u32(&r);
		q->last_avail = r_u16(&r);
		q->used_idx = r_u16(&r);
		q->signalled_used = r_u16(&r);
	}
	n = snap_r_u32(&r);
	if (n > DEV_STATE_MAX_BLOB)
		snap_r_fail(&r);
	*blob_len = r.bad ? 0 : n;
	*blob = n && !r.bad ? snap_r_bytes(&r, n) : NULL;
	if (!snap_r_done(&r))
		return tvm_errf(e, EINVAL, "virtio device %u state: malformed section", sec ? sec->index : 0);
	return 0;
}

void dev_state_write_uart(struct snap_w *w, const struct uart_8250_regs *u)
{
	const uint8_t b[9] = { u->ier, u->lcr, u->mcr, u->scr, u->dll, u->dlm, u->fcr, u->thre_pending, u->irq_level };

	snap_w_begin(w, SNAP_UART, 0);
	snap_w_bytes(w, b, sizeof(b));
	snap_w_end(w);
}

int dev_state_read_uart(const struct snap_section *sec, struct uart_8250_regs *u, struct tvm_err *e)
{
	struct snap_r r;
	uint8_t b[9];

	snap_r_init(&r, sec);
	snap_r_copy(&r, b, sizeof(b));
	if (b[7] > 1 || b[8] > 1)
		snap_r_fail(&r);
	if (!snap_r_done(&r))
		return tvm_errf(e, EINVAL, "serial state: malformed section");
	*u = (struct uart_8250_regs){ .ier = b[0], .lcr = b[1], .mcr = b[2], .scr = b[3], .dll = b[4],
				      .dlm = b[5], .fcr = b[6], .thre_pending = b[7], .irq_level = b[8] };
	return 0;
}

void dev_state_write_disk(struct snap_w *w, uint32_t drive, const uint64_t *map, uint64_t nwords)
{
	snap_w_begin(w, SNAP_DISK, drive);
	snap_w_u64(w, nwords);
	for (uint64_t i = 0; i < nwords; i++)
		snap_w_u64(w, map[i]);
	snap_w_end(w);
}

int dev_state_read_disk(const struct snap_section *sec, uint64_t max_words, uint64_t **map, uint64_t *nwords,
			struct tvm_err *e)
{
	struct snap_r r;
	uint64_t n;

	*map = NULL;
	*nwords = 0;
	snap_r_init(&r, sec);
	n = snap_r_u64(&r);
	/* The count is checked against the bytes present before allocating. */
	if (n > max_words || n > (r.len - r.off) / 8) {
		snap_r_fail(&r);
		n = 0;
	}
	if (!r.bad) {
		*map = malloc(n ? n * 8 : 8);
		if (!*map)
			return tvm_errf(e, ENOMEM, "drive %u map: out of memory", sec->index);
		for (uint64_t i = 0; i < n; i++)
			(*map)[i] = snap_r_u64(&r);
	}
	if (!snap_r_done(&r)) {
		free(*map);
		*map = NULL;
		return tvm_errf(e, EINVAL, "drive %u map: malformed section", sec ? sec->index : 0);
	}
	*nwords = n;
	return 0;
}
