#include "vmm/snapshot/dev_state.h"

#include "devices/blk/blk_persist.h"

#include <errno.h>
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
	uint8_t b[UART_8250_REGS_LEN];

	uart_8250_regs_encode(u, b);
	snap_w_begin(w, SNAP_UART, 0);
	snap_w_bytes(w, b, sizeof(b));
	snap_w_end(w);
}

int dev_state_read_uart(const struct snap_section *sec, struct uart_8250_regs *u, struct tvm_err *e)
{
	if (!sec || uart_8250_regs_decode(sec->data, sec->len, u))
		return tvm_errf(e, EINVAL, "serial state: malformed section");
	return 0;
}

static void put(void *ctx, const void *p, size_t n)
{
	snap_w_bytes(ctx, p, n);
}

void dev_state_write_disk(struct snap_w *w, uint32_t drive, const uint64_t *map, uint64_t nwords)
{
	snap_w_begin(w, SNAP_DISK, drive);
	blk_map_encode(map, nwords, put, w);
	snap_w_end(w);
}

int dev_state_read_disk(const struct snap_section *sec, uint64_t max_words, uint64_t **map, uint64_t *nwords,
			struct tvm_err *e)
{
	int r;

	*map = NULL;
	*nwords = 0;
	if (!sec)
		return tvm_errf(e, EINVAL, "drive 0 map: malformed section");
	r = blk_map_decode(sec->data, sec->len, max_words, map, nwords);
	if (r)
		return tvm_errf(e, -r, "drive %u map: %s", sec->index,
				r == -ENOMEM ? "out of memory" : "malformed section");
	return 0;
}
