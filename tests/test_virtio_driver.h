/* A tiny virtio driver for the virtio tests: guest RAM in a test-owned
 * buffer, split rings laid out in it by hand, and the driver side of the
 * virtio-mmio init sequence through the transport's register interface. */
#ifndef TVM_TESTS_VIRTIO_DRIVER_H
#define TVM_TESTS_VIRTIO_DRIVER_H

#include <check.h>
#include <endian.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <linux/virtio_config.h>
#include <linux/virtio_ring.h>

#include "devices/virtio/virtio_mmio.h"
#include "vmm/core/guest_mem.h"

#define TD_RAM (16u << 20) /* 16 MiB: big enough for chains over 4 GiB via aliasing */
#define TD_DESC 0x10000    /* room for 4096 descriptors */
#define TD_AVAIL 0x20000
#define TD_USED 0x30000
#define TD_DATA 0x100000 /* test buffers from here on */

struct td {
	uint8_t *ram;
	struct guest_mem mem;
	uint16_t qsize;
	uint16_t avail_idx; /* driver's next available index */
	int irqs;           /* interrupt callback count */
};

static inline void td_init(struct td *d, uint16_t qsize)
{
	memset(d, 0, sizeof(*d));
	d->ram = aligned_alloc(4096, TD_RAM);
	ck_assert_ptr_nonnull(d->ram);
	memset(d->ram, 0, TD_RAM);
	ck_assert_int_eq(gm_init_buffer(&d->mem, d->ram, TD_RAM, NULL), 0);
	d->qsize = qsize;
}

static inline void td_fini(struct td *d)
{
	free(d->ram);
	d->ram = NULL;
}

static inline void *td_ptr(struct td *d, uint64_t gpa)
{
	ck_assert_uint_lt(gpa, TD_RAM);
	return d->ram + gpa;
}

static inline void td_put16(struct td *d, uint64_t gpa, uint16_t v)
{
	v = htole16(v);
	memcpy(td_ptr(d, gpa), &v, 2);
}

static inline uint16_t td_get16(struct td *d, uint64_t gpa)
{
	uint16_t v;
	memcpy(&v, td_ptr(d, gpa), 2);
	return le16toh(v);
}

static inline uint32_t td_get32(struct td *d, uint64_t gpa)
{
	uint32_t v;
	memcpy(&v, td_ptr(d, gpa), 4);
	return le32toh(v);
}

/* Write descriptor i of the table at table_gpa (main table: TD_DESC). */
static inline void td_desc_at(struct td *d, uint64_t table_gpa, unsigned i, uint64_t addr, uint32_t len, uint16_t flags,
			      uint16_t next)
{
	struct vring_desc v = { htole64(addr), htole32(len), htole16(flags), htole16(next) };
	memcpy(td_ptr(d, table_gpa + 16ull * i), &v, sizeof(v));
}

static inline void td_desc(struct td *d, unsigned i, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	td_desc_at(d, TD_DESC, i, addr, len, flags, next);
}

/* Make head available in the ring at avail_gpa of size entries, whose
 * driver-side index is *idx (ring entry, then the index, as a driver does). */
static inline void td_post_at(struct td *d, uint64_t avail_gpa, uint16_t size, uint16_t *idx, uint16_t head)
{
	td_put16(d, avail_gpa + 4 + 2 * (*idx % size), head);
	(*idx)++;
	td_put16(d, avail_gpa + 2, *idx);
}

static inline void td_post(struct td *d, uint16_t head)
{
	td_post_at(d, TD_AVAIL, d->qsize, &d->avail_idx, head);
}

static inline void td_set_avail_idx(struct td *d, uint16_t idx)
{
	d->avail_idx = idx;
	td_put16(d, TD_AVAIL + 2, idx);
}

static inline uint16_t td_used_idx(struct td *d)
{
	return td_get16(d, TD_USED + 2);
}

/* Used element k (free-running index) of the ring at used_gpa of size entries. */
static inline void td_used_at(struct td *d, uint64_t used_gpa, uint16_t size, uint16_t k, uint32_t *id, uint32_t *len)
{
	uint64_t at = used_gpa + 4 + 8ull * (k % size);
	*id = td_get32(d, at);
	*len = td_get32(d, at + 4);
}

static inline void td_used(struct td *d, uint16_t k, uint32_t *id, uint32_t *len)
{
	td_used_at(d, TD_USED, d->qsize, k, id, len);
}

static inline void td_set_used_event(struct td *d, uint16_t v)
{
	td_put16(d, TD_AVAIL + 4 + 2ull * d->qsize, v);
}

static inline uint16_t td_avail_event(struct td *d)
{
	return td_get16(d, TD_USED + 4 + 8ull * d->qsize);
}

static inline void td_count_irq(void *ctx)
{
	((struct td *)ctx)->irqs++;
}

/* ---- transport side ---- */

static inline uint32_t td_rd(struct virtio_mmio *t, uint64_t off)
{
	uint8_t b[4];
	virtio_mmio_io(t, off, b, 4, false);
	return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
}

static inline void td_wr(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	uint8_t b[4] = { v, v >> 8, v >> 16, v >> 24 };
	virtio_mmio_io(t, off, b, 4, true);
}

static inline uint64_t td_device_features(struct virtio_mmio *t)
{
	uint64_t f;
	td_wr(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	f = (uint64_t)td_rd(t, VIRTIO_MMIO_DEVICE_FEATURES) << 32;
	td_wr(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	return f | td_rd(t, VIRTIO_MMIO_DEVICE_FEATURES);
}

/* ACKNOWLEDGE, DRIVER, write features, FEATURES_OK; returns the status read back. */
static inline uint32_t td_negotiate(struct virtio_mmio *t, uint64_t features)
{
	td_wr(t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	td_wr(t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	td_wr(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	td_wr(t, VIRTIO_MMIO_DRIVER_FEATURES, features >> 32);
	td_wr(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	td_wr(t, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)features);
	td_wr(t, VIRTIO_MMIO_STATUS,
	      VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK);
	return td_rd(t, VIRTIO_MMIO_STATUS);
}

/* Queue q with size entries at the given ring GPAs, then QueueReady = 1. */
static inline void td_setup_queue_at(struct virtio_mmio *t, unsigned q, uint16_t size, uint64_t desc, uint64_t avail,
				     uint64_t used)
{
	td_wr(t, VIRTIO_MMIO_QUEUE_SEL, q);
	td_wr(t, VIRTIO_MMIO_QUEUE_NUM, size);
	td_wr(t, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc);
	td_wr(t, VIRTIO_MMIO_QUEUE_DESC_HIGH, desc >> 32);
	td_wr(t, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)avail);
	td_wr(t, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, avail >> 32);
	td_wr(t, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)used);
	td_wr(t, VIRTIO_MMIO_QUEUE_USED_HIGH, used >> 32);
	td_wr(t, VIRTIO_MMIO_QUEUE_READY, 1);
}

/* Queue q at the TD_* rings with size d->qsize, then QueueReady = 1. */
static inline void td_setup_queue(struct td *d, struct virtio_mmio *t, unsigned q)
{
	td_setup_queue_at(t, q, d->qsize, TD_DESC, TD_AVAIL, TD_USED);
}

/* ---- devices with several queues: each has its own rings ---- */

struct td_vq {
	uint16_t size;
	uint64_t desc, avail, used; /* ring GPAs */
	uint16_t avail_idx;         /* driver's next available index */
	uint16_t last_used;         /* next used entry the driver will look at */
};

/* Rings of size entries (<= 256) at base: descriptors, then the available
 * ring at base + 0x1000, the used ring at base + 0x2000. */
static inline void td_vq_init(struct td_vq *q, uint64_t base, uint16_t size)
{
	*q = (struct td_vq){ .size = size, .desc = base, .avail = base + 0x1000, .used = base + 0x2000 };
}

static inline void td_vq_setup(struct virtio_mmio *t, unsigned qi, const struct td_vq *q)
{
	td_setup_queue_at(t, qi, q->size, q->desc, q->avail, q->used);
}

static inline void td_vq_desc(struct td *d, const struct td_vq *q, unsigned i, uint64_t addr, uint32_t len,
			      uint16_t flags, uint16_t next)
{
	td_desc_at(d, q->desc, i, addr, len, flags, next);
}

static inline void td_vq_post(struct td *d, struct td_vq *q, uint16_t head)
{
	td_post_at(d, q->avail, q->size, &q->avail_idx, head);
}

/* Whether a driver (EVENT_IDX negotiated) that moved q's avail->idx from
 * old to where it is now must notify: the device's avail_event lies in
 * [old, now) (spec 2.7.10, Linux's vring_need_event). */
static inline bool td_vq_needs_notify(struct td *d, const struct td_vq *q, uint16_t old)
{
	uint16_t ev = td_get16(d, q->used + 4 + 8ull * q->size);

	return (uint16_t)(q->avail_idx - ev - 1) < (uint16_t)(q->avail_idx - old);
}

/* Take the next used entry, if the device published one. */
static inline bool td_vq_take(struct td *d, struct td_vq *q, uint32_t *id, uint32_t *len)
{
	if (td_get16(d, q->used + 2) == q->last_used)
		return false;
	td_used_at(d, q->used, q->size, q->last_used++, id, len);
	return true;
}

/* The whole init sequence (spec 3.1.1) acking features & offered; queue 0
 * set up. Returns the final status. */
static inline uint32_t td_driver_init(struct td *d, struct virtio_mmio *t, uint64_t features)
{
	uint32_t s;

	td_wr(t, VIRTIO_MMIO_STATUS, 0);
	s = td_negotiate(t, features & td_device_features(t));
	ck_assert_uint_eq(s & VIRTIO_CONFIG_S_FEATURES_OK, VIRTIO_CONFIG_S_FEATURES_OK);
	td_setup_queue(d, t, 0);
	td_wr(t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_DRIVER_OK);
	return td_rd(t, VIRTIO_MMIO_STATUS);
}

#endif
