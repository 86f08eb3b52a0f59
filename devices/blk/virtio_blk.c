#include "devices/blk/blk_impl.h"

#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/virtio_ids.h>

#include "devices/virtio/iov.h"

_Static_assert(VQ_MAX_SEGS <= IOV_MAX, "a chain's buffers must fit one preadv");
_Static_assert(VIRTIO_BLK_SEG_MAX + 2 <= VQ_MAX_SEGS, "seg_max + header + status fit a chain");

#define HDR_LEN sizeof(struct virtio_blk_outhdr)
#define F(bit) (1ULL << (bit))

/* One request as parsed from its chain. */
struct req {
	struct vq_chain *c;
	uint64_t sector;
	uint32_t extra_r; /* readable bytes after the header */
	uint32_t extra_w; /* writable bytes before the status byte */
	uint32_t written; /* bytes of extra_w the device filled */
};

/* Byte offset of a sector count, overflow-checked; the range against the
 * image size is checked by blk_image. */
static bool sector_off(uint64_t sector, uint64_t *off)
{
	return !__builtin_mul_overflow(sector, BLK_SECTOR, off);
}

static uint8_t do_rw(struct virtio_blk *b, struct req *r, bool write)
{
	struct vq_chain *c = r->c;
	uint32_t len = write ? r->extra_r : r->extra_w;
	uint64_t off;
	int k, e;

	if ((write ? r->extra_w : r->extra_r) != 0 || len % BLK_SECTOR || !sector_off(r->sector, &off))
		return VIRTIO_BLK_S_IOERR;
	if (write)
		k = iov_slice(c->iov, c->nreadable, HDR_LEN, len, b->data, VQ_MAX_SEGS);
	else
		k = iov_slice(c->iov + c->nreadable, c->n - c->nreadable, 0, len, b->data, VQ_MAX_SEGS);
	if (k < 0)
		return VIRTIO_BLK_S_IOERR;
	e = write ? blk_image_write(&b->img, b->data, k, off) : blk_image_read(&b->img, b->data, k, off);
	if (e)
		return VIRTIO_BLK_S_IOERR;
	if (!write)
		r->written = len;
	return VIRTIO_BLK_S_OK;
}

static uint8_t do_flush(struct virtio_blk *b, const struct req *r)
{
	if (r->extra_r || r->extra_w)
		return VIRTIO_BLK_S_IOERR;
	return blk_image_flush(&b->img) ? VIRTIO_BLK_S_IOERR : VIRTIO_BLK_S_OK;
}

static uint8_t do_get_id(struct virtio_blk *b, struct req *r)
{
	struct vq_chain *c = r->c;
	uint32_t n = r->extra_w < VIRTIO_BLK_ID_BYTES ? r->extra_w : VIRTIO_BLK_ID_BYTES;

	if (r->extra_r)
		return VIRTIO_BLK_S_IOERR;
	r->written = iov_from_buf(c->iov + c->nreadable, c->n - c->nreadable, 0, b->id, n);
	return VIRTIO_BLK_S_OK;
}

/* Spec 5.2.6.2: limits give IOERR, unknown flags (and unmap on a discard)
 * UNSUPP. Each segment is read once into a local. */
static uint8_t do_dwz(struct virtio_blk *b, struct req *r, bool zeroes)
{
	struct virtio_blk_discard_write_zeroes seg[VIRTIO_BLK_DWZ_SEGS];
	uint32_t allowed = zeroes ? VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP : 0;
	uint32_t max = zeroes ? VIRTIO_BLK_ZEROES_SECTORS : VIRTIO_BLK_DISCARD_SECTORS;
	uint32_t nseg = r->extra_r / sizeof(seg[0]);

	if (r->extra_w || r->extra_r % sizeof(seg[0]) || nseg == 0 || nseg > VIRTIO_BLK_DWZ_SEGS)
		return VIRTIO_BLK_S_IOERR;
	iov_to_buf(r->c->iov, r->c->nreadable, HDR_LEN, seg, r->extra_r);
	for (uint32_t i = 0; i < nseg; i++) {
		if (le32toh(seg[i].flags) & ~allowed)
			return VIRTIO_BLK_S_UNSUPP;
		if (le32toh(seg[i].num_sectors) > max)
			return VIRTIO_BLK_S_IOERR;
	}
	for (uint32_t i = 0; i < nseg; i++) {
		uint64_t off, len = (uint64_t)le32toh(seg[i].num_sectors) * BLK_SECTOR;
		int e;

		if (!sector_off(le64toh(seg[i].sector), &off))
			return VIRTIO_BLK_S_IOERR;
		e = zeroes ? blk_image_write_zeroes(&b->img, off, len) : blk_image_discard(&b->img, off, len);
		if (e)
			return VIRTIO_BLK_S_IOERR;
		/* Admitted for its segment list only, a write of zeroes then
		 * pays for the range it wrote (the drive owes it: later requests
		 * wait). A discard moves no data: its request is its cost. */
		if (zeroes)
			vq_throttle_take(&b->thr, 0, len, 0);
	}
	return VIRTIO_BLK_S_OK;
}

static uint8_t dispatch(struct virtio_blk *b, struct req *r, uint32_t type)
{
	switch (type) {
	case VIRTIO_BLK_T_IN: return do_rw(b, r, false);
	case VIRTIO_BLK_T_OUT: return do_rw(b, r, true);
	case VIRTIO_BLK_T_FLUSH: return do_flush(b, r);
	case VIRTIO_BLK_T_GET_ID: return do_get_id(b, r);
	case VIRTIO_BLK_T_DISCARD: return do_dwz(b, r, false);
	case VIRTIO_BLK_T_WRITE_ZEROES: return do_dwz(b, r, true);
	default: return VIRTIO_BLK_S_UNSUPP;
	}
}

/* Serve one chain; returns the used length. */
static uint32_t serve(struct virtio_blk *b, struct vq_chain *c)
{
	struct req r = { .c = c };
	struct virtio_blk_outhdr h;
	const struct iovec *last;
	uint8_t status = VIRTIO_BLK_S_IOERR;

	if (c->writable_len == 0)
		return 0;
	/* vq_pop() drops empty buffers, so the last one ends with the status. */
	last = &c->iov[c->n - 1];
	r.extra_w = c->writable_len - 1;
	if (c->readable_len >= HDR_LEN) {
		iov_to_buf(c->iov, c->nreadable, 0, &h, HDR_LEN);
		r.sector = le64toh(h.sector);
		r.extra_r = c->readable_len - HDR_LEN;
		status = dispatch(b, &r, le32toh(h.type));
	}
	((uint8_t *)last->iov_base)[last->iov_len - 1] = status;
	return r.written == r.extra_w ? c->writable_len : r.written;
}

/* What a request costs its limiter: one operation and the bytes it
 * moves, everything but the header and the status byte (from the
 * chain's lengths, which vq_pop read once: the guest cannot change them
 * after the fact). */
static uint64_t data_bytes(const struct vq_chain *c)
{
	uint64_t all = (uint64_t)c->readable_len + c->writable_len;

	return all > HDR_LEN + 1 ? all - HDR_LEN - 1 : 0;
}

static int blk_notify(void *dev, unsigned queue)
{
	struct virtio_blk *b = dev;
	int r;

	if (queue != 0 || !b->vq)
		return 0;
	while ((r = vq_pop(b->vq, &b->chain)) > 0) {
		if (vq_throttle_admit(&b->thr, 0, data_bytes(&b->chain), 1)) {
			/* Held: back on the ring untouched; the limiter's timer
			 * runs the queue again when the tokens are there. */
			vq_unpop(b->vq, 1);
			return 0;
		}
		vq_push(b->vq, b->chain.head, serve(b, &b->chain));
	}
	return r;
}

static uint64_t blk_features(void *dev)
{
	return ((struct virtio_blk *)dev)->features;
}

static void blk_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	memcpy(data, (const uint8_t *)&((struct virtio_blk *)dev)->cfg + off, len);
}

static int blk_activate(void *dev, struct virtqueue *vqs, uint64_t features)
{
	struct virtio_blk *b = dev;

	(void)features;
	b->vq = &vqs[0];
	return vq_throttle_activate(&b->thr);
}

static void blk_reset(void *dev)
{
	struct virtio_blk *b = dev;

	b->vq = NULL;
	vq_throttle_reset(&b->thr);
}

static struct vq_throttle *blk_throttle(void *dev)
{
	return &((struct virtio_blk *)dev)->thr;
}

const struct virtio_dev_ops virtio_blk_ops = {
	.device_id = VIRTIO_ID_BLOCK,
	.num_queues = 1,
	.queue_max = VIRTIO_BLK_QUEUE_MAX,
	.config_size = sizeof(struct virtio_blk_config),
	.features = blk_features,
	.config_read = blk_config_read,
	.activate = blk_activate,
	.reset = blk_reset,
	.notify = blk_notify,
	.save = blk_save,
	.restore = blk_restore,
	.throttle = blk_throttle,
};

static void fill_config(struct virtio_blk *b)
{
	struct virtio_blk_config *c = &b->cfg;

	c->capacity = htole64(b->img.size / BLK_SECTOR);
	c->size_max = htole32(VIRTIO_BLK_SIZE_MAX);
	c->seg_max = htole32(VIRTIO_BLK_SEG_MAX);
	c->blk_size = htole32(BLK_SECTOR);
	c->max_discard_sectors = htole32(VIRTIO_BLK_DISCARD_SECTORS);
	c->max_discard_seg = htole32(VIRTIO_BLK_DWZ_SEGS);
	c->discard_sector_alignment = htole32(BLK_COW_BLOCK / BLK_SECTOR);
	c->max_write_zeroes_sectors = htole32(VIRTIO_BLK_ZEROES_SECTORS);
	c->max_write_zeroes_seg = htole32(VIRTIO_BLK_DWZ_SEGS);
	c->write_zeroes_may_unmap = 1;
	b->features =
		F(VIRTIO_BLK_F_SEG_MAX) | F(VIRTIO_BLK_F_SIZE_MAX) | F(VIRTIO_BLK_F_BLK_SIZE) | F(VIRTIO_BLK_F_FLUSH);
	if (b->img.read_only)
		b->features |= F(VIRTIO_BLK_F_RO);
	else
		b->features |= F(VIRTIO_BLK_F_DISCARD) | F(VIRTIO_BLK_F_WRITE_ZEROES);
}

int virtio_blk_open(struct virtio_blk **out, const struct blk_opts *o, struct tvm_err *e)
{
	struct virtio_blk *b;
	size_t idlen = o->id ? strlen(o->id) : 0;
	char what[128];
	int r;

	*out = NULL;
	if (idlen > VIRTIO_BLK_ID_BYTES)
		return tvm_errf(e, EINVAL, "drive %s: id \"%s\" is longer than %d bytes", o->path ? o->path : "", o->id,
				VIRTIO_BLK_ID_BYTES);
	b = calloc(1, sizeof(*b));
	if (!b)
		return tvm_errf(e, ENOMEM, "drive %s: out of memory", o->path ? o->path : "");
	snprintf(what, sizeof(what), "drive %s", o->path ? o->path : "");
	r = vq_throttle_init(&b->thr, &(struct vq_limit){ .queue = 0, .name = "io", .limit = o->limit }, 1, &o->io,
			     o->clock, what, e);
	if (!r)
		r = blk_image_open(&b->img, o, e);
	if (r) {
		vq_throttle_close(&b->thr);
		free(b);
		return r;
	}
	memcpy(b->id, o->id ? o->id : "", idlen);
	fill_config(b);
	*out = b;
	return 0;
}

void virtio_blk_close(struct virtio_blk *b)
{
	if (!b)
		return;
	blk_image_close(&b->img);
	vq_throttle_close(&b->thr);
	free(b);
}

struct virtio_blk *virtio_blk_of(const struct virtio_mmio *t)
{
	return t->ops == &virtio_blk_ops ? t->dev : NULL;
}

uint64_t virtio_blk_size(const struct virtio_blk *b)
{
	return b->img.size;
}
