/* Shared by the device fuzzers (fuzz_virtio_blk, fuzz_net_device): a
 * hostile driver's moves against a virtio-mmio transport over 64 KiB of
 * guest RAM. Each move reads its choices from the input in a fixed order,
 * so one input layout serves every target:
 *   fuzz_mmio_access  one register access: offset u16, width u8, dir u8, value u32
 *   fuzz_poke_raw     at u16, len u8 (% 33), then len bytes
 *   fuzz_poke_desc    ring u8 (only with nrings > 1), index u8, then the descriptor
 *   fuzz_post_head    ring u8 (only with nrings > 1), then the head
 *   fuzz_event_idx    ring u8 (only with nrings > 1), value u16
 * plus fuzz_driver_init, the spec 3.1.1 sequence with the input's features
 * and ring layouts, and fuzz_tick: time passes for the device's rate
 * limiters (a clock of the input's, so runs repeat) and their timer fires
 * as the event loop would run it. */
#ifndef TVM_FUZZ_MMIO_H
#define TVM_FUZZ_MMIO_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "devices/virtio/throttle.h"
#include "devices/virtio/virtio_mmio.h"
#include "tests/fuzz/fuzz_input.h"

#define FUZZ_RAM (64 * 1024)

static uint8_t *fuzz_ram; /* FUZZ_RAM bytes, page aligned */

/* The rate limiters' clock (struct blk_opts/net_opts .clock), ns. */
static uint64_t fuzz_ns;

static inline uint64_t fuzz_clock(void)
{
	return fuzz_ns;
}

/* Limits small enough that a few requests hit them: bytes and requests. */
static const struct tvm_rate_limit fuzz_limit = { .bytes = { .size = 4096, .one_time_burst = 1024, .refill_ms = 10 },
						  .ops = { .size = 3, .refill_ms = 10 } };

/* Let 0..255 ms pass (u8), then run the callback of the device's limiter
 * timer (th) if cb/arg watch it: what the event loop does when it fires. */
static inline void fuzz_tick(struct in *in, const struct vq_throttle *th, fd_watch_cb cb, void *arg)
{
	fuzz_ns += (uint64_t)take(in, 1) * 1000000u;
	if (th->fd >= 0 && cb)
		cb(arg, 1);
}

/* A split virtqueue as the fuzzing driver laid it out. */
struct fuzz_ring {
	uint16_t qsize;
	uint32_t desc, avail, used; /* GPAs chosen by the input */
	uint16_t avail_idx;
};

static inline void fuzz_ram_init(void)
{
	if (!fuzz_ram && !(fuzz_ram = aligned_alloc(4096, FUZZ_RAM)))
		abort();
	memset(fuzz_ram, 0, FUZZ_RAM);
}

/* Write bytes into guest RAM the way the guest would, clipped to RAM. */
static inline void fuzz_poke(uint64_t gpa, const void *src, size_t len)
{
	if (gpa < FUZZ_RAM && len <= FUZZ_RAM - gpa)
		memcpy(fuzz_ram + gpa, src, len);
}

static inline void fuzz_reg(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };

	virtio_mmio_io(t, off, b, 4, true);
}

static inline uint32_t fuzz_reg_rd(struct virtio_mmio *t, uint64_t off)
{
	uint8_t b[4];

	virtio_mmio_io(t, off, b, 4, false);
	return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Ring layout from the input: size u8 (mostly a power of two), then the
 * three ring GPAs u16 each. */
static inline void fuzz_ring_take(struct in *in, struct fuzz_ring *r)
{
	uint8_t qs = (uint8_t)take(in, 1);

	r->qsize = qs < 0xf0 ? 1u << (qs % 9) : qs & 0xf;
	r->desc = (uint32_t)take(in, 2);
	r->avail = (uint32_t)take(in, 2);
	r->used = (uint32_t)take(in, 2);
}

/* Spec 3.1.1 with nq rings. Bit 39 of features asks to ack them as given
 * (mostly refused); otherwise only what the device offers is acked. */
static inline void fuzz_driver_init(struct virtio_mmio *t, uint64_t features, struct fuzz_ring *q, unsigned nq)
{
	uint32_t s = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER;
	uint64_t offered;

	fuzz_reg(t, VIRTIO_MMIO_STATUS, 0);
	fuzz_reg(t, VIRTIO_MMIO_STATUS, s);
	fuzz_reg(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	offered = (uint64_t)fuzz_reg_rd(t, VIRTIO_MMIO_DEVICE_FEATURES) << 32;
	fuzz_reg(t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	offered |= fuzz_reg_rd(t, VIRTIO_MMIO_DEVICE_FEATURES);
	if (!(features & (1ULL << 39)))
		features &= offered;
	fuzz_reg(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	fuzz_reg(t, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(features >> 32));
	fuzz_reg(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	fuzz_reg(t, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)features);
	fuzz_reg(t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_FEATURES_OK);
	for (unsigned i = 0; i < nq; i++) {
		fuzz_reg(t, VIRTIO_MMIO_QUEUE_SEL, i);
		fuzz_reg(t, VIRTIO_MMIO_QUEUE_NUM, q[i].qsize);
		fuzz_reg(t, VIRTIO_MMIO_QUEUE_DESC_LOW, q[i].desc);
		fuzz_reg(t, VIRTIO_MMIO_QUEUE_AVAIL_LOW, q[i].avail);
		fuzz_reg(t, VIRTIO_MMIO_QUEUE_USED_LOW, q[i].used);
		fuzz_reg(t, VIRTIO_MMIO_QUEUE_READY, 1);
		q[i].avail_idx = 0;
	}
	fuzz_reg(t, VIRTIO_MMIO_STATUS, fuzz_reg_rd(t, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_DRIVER_OK);
}

static inline void fuzz_mmio_access(struct in *in, struct virtio_mmio *t)
{
	static const uint8_t widths[] = { 1, 2, 4, 8 };
	uint16_t off = take(in, 2) % VIRTIO_MMIO_WINDOW;
	uint8_t w = widths[take(in, 1) % 4], b[8];
	bool wr = take(in, 1) & 1;
	uint64_t v = take(in, 4);

	memcpy(b, &v, sizeof(b));
	virtio_mmio_io(t, off, b, w, wr);
}

static inline void fuzz_poke_raw(struct in *in)
{
	uint16_t at = (uint16_t)take(in, 2);
	uint8_t len = take(in, 1) % 33, buf[32];

	for (unsigned i = 0; i < len; i++)
		buf[i] = (uint8_t)take(in, 1);
	fuzz_poke(at, buf, len);
}

/* The input's pick of one of nrings rings (no byte taken for one ring). */
static inline struct fuzz_ring *fuzz_pick(struct in *in, struct fuzz_ring *rings, unsigned nrings)
{
	return nrings > 1 ? &rings[take(in, 1) % nrings] : rings;
}

/* Descriptor i of a ring's table; addresses mostly in RAM, lengths mostly
 * below short_len. */
static inline void fuzz_poke_desc(struct in *in, struct fuzz_ring *rings, unsigned nrings, uint32_t short_len)
{
	struct fuzz_ring *r = fuzz_pick(in, rings, nrings);
	uint16_t i = (uint16_t)take(in, 1);
	struct vring_desc v;

	v.addr = take(in, 1) & 0x80 ? take(in, 8) : take(in, 2);
	v.len = (uint32_t)(take(in, 1) & 0x80 ? take(in, 4) : take(in, 2) % short_len);
	v.flags = take(in, 1) & 7;
	v.next = (uint16_t)take(in, 1);
	fuzz_poke(r->desc + 16ull * i, &v, sizeof(v));
}

/* Post a head (mostly inside the ring) on the avail ring and publish it. */
static inline void fuzz_post_head(struct in *in, struct fuzz_ring *rings, unsigned nrings)
{
	struct fuzz_ring *r = fuzz_pick(in, rings, nrings);
	uint16_t head = (uint16_t)(take(in, 1) & 0x80 ? take(in, 2) : take(in, 1) % (r->qsize ? r->qsize : 1));

	if (r->qsize) {
		fuzz_poke(r->avail + 4 + 2ull * (r->avail_idx % r->qsize), &head, 2);
		r->avail_idx++;
		fuzz_poke(r->avail + 2, &r->avail_idx, 2);
	}
}

/* The avail ring's flags and used_event fields. */
static inline void fuzz_event_idx(struct in *in, struct fuzz_ring *rings, unsigned nrings)
{
	struct fuzz_ring *r = fuzz_pick(in, rings, nrings);
	uint16_t v = (uint16_t)take(in, 2);

	if (r->qsize)
		fuzz_poke(r->avail + 4 + 2ull * r->qsize, &v, 2);
	fuzz_poke(r->avail, &v, 2);
}

#endif
