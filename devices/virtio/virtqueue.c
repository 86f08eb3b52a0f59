#include "devices/virtio/virtqueue.h"

#include <endian.h>
#include <errno.h>
#include <string.h>

#define DESC_SIZE 16u

void vq_reset(struct virtqueue *vq)
{
	memset(vq, 0, sizeof(*vq));
}

void vq_disable(struct virtqueue *vq)
{
	vq->ready = false;
}

/* Resolve one ring area; the sizes are small (num <= 32768) so the
 * multiplications cannot overflow. */
static void *ring_area(const struct guest_mem *mem, const char *what, uint64_t gpa, uint64_t len, uint64_t align,
		       struct tvm_err *e)
{
	void *p;

	if (gpa & (align - 1)) {
		tvm_errf(e, EINVAL, "virtqueue: %s ring at 0x%llx is not aligned to %llu bytes", what,
			 (unsigned long long)gpa, (unsigned long long)align);
		return NULL;
	}
	p = gm_ptr(mem, gpa, len);
	if (!p)
		tvm_errf(e, EINVAL, "virtqueue: %s ring [0x%llx, +%llu) is not in guest RAM", what,
			 (unsigned long long)gpa, (unsigned long long)len);
	return p;
}

int vq_enable(struct virtqueue *vq, const struct guest_mem *mem, uint16_t max_size, uint64_t features,
	      struct tvm_err *e)
{
	uint64_t n = vq->num;

	vq->ready = false;
	if (n == 0 || (n & (n - 1)) || n > max_size || n > VQ_MAX_SIZE)
		return tvm_errf(e, EINVAL, "virtqueue: size %llu is not a power of two in 1..%u", (unsigned long long)n,
				(unsigned)max_size);
	vq->desc = ring_area(mem, "descriptor", vq->desc_gpa, DESC_SIZE * n, 16, e);
	if (!vq->desc)
		return -EINVAL;
	vq->avail = ring_area(mem, "available", vq->avail_gpa, 6 + 2 * n, 2, e);
	if (!vq->avail)
		return -EINVAL;
	vq->used = ring_area(mem, "used", vq->used_gpa, 6 + 8 * n, 4, e);
	if (!vq->used)
		return -EINVAL;
	vq->mem = mem;
	vq->event_idx = features & (1ULL << VIRTIO_RING_F_EVENT_IDX);
	vq->indirect = features & (1ULL << VIRTIO_RING_F_INDIRECT_DESC);
	vq->last_avail = 0;
	vq->used_idx = 0;
	vq->signalled_used = 0;
	vq->broken = false;
	vq->ready = true;
	return 0;
}

/* The trailing event fields sit right after the rings (spec 2.7.6, 2.7.8).
 * num was validated by vq_enable, and the areas sized to include them. */
static uint16_t *used_event(const struct virtqueue *vq)
{
	return &vq->avail->ring[vq->num];
}

static uint16_t *avail_event(const struct virtqueue *vq)
{
	return (uint16_t *)&vq->used->ring[vq->num];
}

static uint16_t load16(const uint16_t *p, int order)
{
	return le16toh(__atomic_load_n(p, order));
}

/* Where a chain walk is: the table being followed and what was collected. */
struct walk {
	const uint8_t *table; /* bytes: an indirect table need not be aligned */
	uint32_t size;        /* entries in table */
	uint32_t seen;        /* descriptors visited in table: bounds loops */
	bool indirect;        /* table is an indirect table */
	uint64_t total;       /* bytes in the chain */
};

static int add_buf(const struct virtqueue *vq, struct vq_chain *c, struct walk *w, const struct vring_desc *d)
{
	uint64_t addr = le64toh(d->addr);
	uint32_t len = le32toh(d->len);
	bool writable = le16toh(d->flags) & VRING_DESC_F_WRITE;
	void *host;

	if (len == 0)
		return 0;
	if (!writable && c->n > c->nreadable)
		return -EINVAL; /* readable after writable */
	if (c->n == VQ_MAX_SEGS)
		return -E2BIG;
	w->total += len;
	if (w->total > UINT32_MAX)
		return -E2BIG; /* spec 2.7.5: a chain is shorter than 2^32 bytes */
	host = gm_ptr(vq->mem, addr, len);
	if (!host)
		return -EFAULT;
	c->iov[c->n++] = (struct iovec){ .iov_base = host, .iov_len = len };
	if (writable)
		c->writable_len += len;
	else {
		c->nreadable++;
		c->readable_len += len;
	}
	return 0;
}

/* Switch the walk to the indirect table d points at (spec 2.7.5.3). */
static int enter_indirect(const struct virtqueue *vq, struct walk *w, const struct vring_desc *d)
{
	uint64_t addr = le64toh(d->addr);
	uint32_t len = le32toh(d->len);
	uint16_t flags = le16toh(d->flags);

	if (!vq->indirect || w->indirect || (flags & VRING_DESC_F_NEXT))
		return -EINVAL;
	if (len == 0 || len % DESC_SIZE || len / DESC_SIZE > VQ_MAX_SEGS)
		return -EINVAL;
	w->table = gm_ptr(vq->mem, addr, len);
	if (!w->table)
		return -EFAULT;
	w->size = len / DESC_SIZE;
	w->seen = 0;
	w->indirect = true;
	return 0;
}

static int read_chain(const struct virtqueue *vq, uint16_t head, struct vq_chain *c)
{
	struct walk w = { .table = (const uint8_t *)vq->desc, .size = vq->num };
	uint32_t i = head;

	c->head = head;
	c->n = c->nreadable = 0;
	c->readable_len = c->writable_len = 0;
	if (head >= vq->num)
		return -EINVAL;
	for (;;) {
		struct vring_desc d;
		uint16_t flags;
		int r;

		/* Once: the guest may rewrite the descriptor while we look. */
		memcpy(&d, w.table + (size_t)i * DESC_SIZE, sizeof(d));
		flags = le16toh(d.flags);
		if (++w.seen > w.size)
			return -ELOOP;
		if (flags & VRING_DESC_F_INDIRECT) {
			r = enter_indirect(vq, &w, &d);
			if (r)
				return r;
			i = 0;
			continue;
		}
		r = add_buf(vq, c, &w, &d);
		if (r)
			return r;
		if (!(flags & VRING_DESC_F_NEXT))
			return 0;
		i = le16toh(d.next);
		if (i >= w.size)
			return -EINVAL;
	}
}

/* EVENT_IDX: ask the driver to notify once avail->idx passes idx. The
 * fence orders the request before the caller's next read of avail->idx
 * (an entry added before the driver could see it comes without one). */
static void want_notify_after(struct virtqueue *vq, uint16_t idx)
{
	__atomic_store_n(avail_event(vq), htole16(idx), __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

int vq_pop(struct virtqueue *vq, struct vq_chain *c)
{
	uint16_t avail_idx, head;

	if (vq->broken)
		return -EIO;
	if (!vq->ready)
		return 0;
	avail_idx = load16(&vq->avail->idx, __ATOMIC_ACQUIRE);
	if (avail_idx == vq->last_avail) {
		if (!vq->event_idx)
			return 0;
		/* Ask for a notification at the next entry, then look again:
		 * an entry added before the driver could see avail_event
		 * would otherwise come without a notification (2.7.10). */
		want_notify_after(vq, vq->last_avail);
		avail_idx = load16(&vq->avail->idx, __ATOMIC_ACQUIRE);
		if (avail_idx == vq->last_avail)
			return 0;
	}
	if ((uint16_t)(avail_idx - vq->last_avail) > vq->num)
		goto broken;
	head = load16(&vq->avail->ring[vq->last_avail & (vq->num - 1)], __ATOMIC_RELAXED);
	vq->last_avail++;
	if (read_chain(vq, head, c))
		goto broken;
	return 1;
broken:
	vq->broken = true;
	return -EIO;
}

uint16_t vq_watch_avail(struct virtqueue *vq)
{
	uint16_t idx;

	if (!vq->ready)
		return 0;
	idx = load16(&vq->avail->idx, __ATOMIC_ACQUIRE);
	if (vq->event_idx)
		want_notify_after(vq, idx);
	return idx;
}

void vq_unpop(struct virtqueue *vq, uint16_t n)
{
	vq->last_avail = (uint16_t)(vq->last_avail - n);
}

void vq_push(struct virtqueue *vq, uint16_t head, uint32_t len)
{
	struct vring_used_elem el = { .id = htole32(head), .len = htole32(len) };

	if (!vq->ready)
		return;
	memcpy(&vq->used->ring[vq->used_idx & (vq->num - 1)], &el, sizeof(el));
	vq->used_idx++;
	/* The element must be visible before the index that publishes it. */
	__atomic_store_n(&vq->used->idx, htole16(vq->used_idx), __ATOMIC_RELEASE);
}

bool vq_should_interrupt(struct virtqueue *vq)
{
	uint16_t old = vq->signalled_used, now = vq->used_idx;

	if (!vq->ready || old == now)
		return false;
	vq->signalled_used = now;
	/* used->idx must be visible before we read the driver's suppression
	 * state, or we could miss a driver that just re-enabled interrupts. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (vq->event_idx)
		return vring_need_event(load16(used_event(vq), __ATOMIC_RELAXED), now, old);
	return !(load16(&vq->avail->flags, __ATOMIC_RELAXED) & VRING_AVAIL_F_NO_INTERRUPT);
}
