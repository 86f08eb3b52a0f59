#include "devices/virtio/virtio_mmio.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <linux/virtio_config.h>

#define MAGIC 0x74726976 /* "virt" */
#define VERSION 2
#define DEVICE_BITS (((1ULL << 24) - 1) | (~0ULL << 50)) /* device-type bits, spec 2.2 */
#define TRANSPORT_FEATURES \
	((1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_RING_F_INDIRECT_DESC) | (1ULL << VIRTIO_RING_F_EVENT_IDX))
#define DRIVER_BITS                                                                           \
	(VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK | \
	 VIRTIO_CONFIG_S_DRIVER_OK | VIRTIO_CONFIG_S_FAILED)

int virtio_mmio_init(struct virtio_mmio *t, const struct virtio_dev_ops *ops, void *dev, const struct guest_mem *mem,
		     virtio_interrupt_fn interrupt, void *irq_ctx, struct tvm_err *e)
{
	uint32_t qmax = ops->queue_max;

	memset(t, 0, sizeof(*t));
	if (ops->num_queues == 0 || ops->num_queues > VIRTIO_MMIO_MAX_QUEUES)
		return tvm_errf(e, EINVAL, "virtio-mmio: device %u has %u queues, not 1..%u", ops->device_id,
				ops->num_queues, VIRTIO_MMIO_MAX_QUEUES);
	if (qmax == 0 || (qmax & (qmax - 1)) || qmax > VQ_MAX_SIZE)
		return tvm_errf(e, EINVAL, "virtio-mmio: device %u queue size %u is not a power of two in 1..%u",
				ops->device_id, qmax, VQ_MAX_SIZE);
	if (!ops->features || !ops->config_read || !ops->activate || !ops->reset || !ops->notify)
		return tvm_errf(e, EINVAL, "virtio-mmio: device %u lacks a required callback", ops->device_id);
	t->ops = ops;
	t->dev = dev;
	t->mem = mem;
	t->interrupt = interrupt;
	t->irq_ctx = irq_ctx;
	t->offered = (ops->features(dev) & DEVICE_BITS) | TRANSPORT_FEATURES;
	pthread_mutex_init(&t->lock, NULL);
	return 0;
}

void virtio_mmio_destroy(struct virtio_mmio *t)
{
	if (t->ops)
		pthread_mutex_destroy(&t->lock);
	memset(t, 0, sizeof(*t));
}

static void raise_irq(struct virtio_mmio *t, uint32_t bit)
{
	t->int_status |= bit;
	if (t->interrupt)
		t->interrupt(t->irq_ctx);
}

void virtio_mmio_set_log(struct virtio_mmio *t, const char *name, virtio_log_fn log, void *ctx)
{
	pthread_mutex_lock(&t->lock);
	t->name = name;
	t->log = log;
	t->log_ctx = ctx;
	pthread_mutex_unlock(&t->lock);
}

uint64_t virtio_mmio_needs_resets(const struct virtio_mmio *t)
{
	return __atomic_load_n(&t->needs_resets, __ATOMIC_RELAXED);
}

/* Spec 2.1.2: the device tells the driver with a configuration change
 * interrupt, once the driver can take interrupts (DRIVER_OK). t->err says
 * why. The host hears of it once per reset cycle: a guest that keeps
 * breaking a device it does not reset cannot flood the log. */
static void needs_reset(struct virtio_mmio *t)
{
	if (!(t->status & VIRTIO_CONFIG_S_NEEDS_RESET)) {
		__atomic_fetch_add(&t->needs_resets, 1, __ATOMIC_RELAXED);
		if (t->log) {
			char line[sizeof(t->err.msg) + 64];

			snprintf(line, sizeof(line), "%s: device needs reset: %s", t->name ? t->name : "virtio-mmio",
				 t->err.msg);
			t->log(t->log_ctx, line);
		}
	}
	t->status |= VIRTIO_CONFIG_S_NEEDS_RESET;
	if (t->status & VIRTIO_CONFIG_S_DRIVER_OK)
		raise_irq(t, VIRTIO_MMIO_INT_CONFIG);
}

static void reset(struct virtio_mmio *t)
{
	t->ops->reset(t->dev);
	for (unsigned i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++)
		vq_reset(&t->vqs[i]);
	t->acked = 0;
	t->status = 0;
	t->dev_features_sel = t->drv_features_sel = t->queue_sel = t->shm_sel = 0;
	t->int_status = 0;
	t->active = false;
}

static bool features_ok(const struct virtio_mmio *t)
{
	return (t->acked & ~t->offered) == 0 && (t->acked & (1ULL << VIRTIO_F_VERSION_1));
}

static void driver_ok(struct virtio_mmio *t)
{
	int r = t->ops->activate(t->dev, t->vqs, t->acked);

	if (r < 0) {
		tvm_errf(&t->err, -r, "failed to start: %s", strerror(-r));
		needs_reset(t);
		return;
	}
	t->active = true;
	/* A queue rejected at QueueReady before the driver could take
	 * interrupts is reported now. */
	if (t->status & VIRTIO_CONFIG_S_NEEDS_RESET)
		raise_irq(t, VIRTIO_MMIO_INT_CONFIG);
}

/* Spec 3.1.1: ACKNOWLEDGE, DRIVER, FEATURES_OK, DRIVER_OK in this order; a
 * bit whose predecessor is missing is not taken. The driver never clears
 * bits except by writing 0 (reset); such writes are ignored. */
static void write_status(struct virtio_mmio *t, uint32_t v)
{
	uint32_t old = t->status, want = v & DRIVER_BITS, add = want & ~old;

	if (v == 0) {
		reset(t);
		return;
	}
	if (old & DRIVER_BITS & ~want)
		return;
	if ((add & VIRTIO_CONFIG_S_ACKNOWLEDGE))
		t->status |= VIRTIO_CONFIG_S_ACKNOWLEDGE;
	if ((add & VIRTIO_CONFIG_S_DRIVER) && (t->status & VIRTIO_CONFIG_S_ACKNOWLEDGE))
		t->status |= VIRTIO_CONFIG_S_DRIVER;
	if ((add & VIRTIO_CONFIG_S_FEATURES_OK) && (t->status & VIRTIO_CONFIG_S_DRIVER) && features_ok(t))
		t->status |= VIRTIO_CONFIG_S_FEATURES_OK;
	if (add & VIRTIO_CONFIG_S_FAILED)
		t->status |= VIRTIO_CONFIG_S_FAILED;
	if ((add & VIRTIO_CONFIG_S_DRIVER_OK) && (t->status & VIRTIO_CONFIG_S_FEATURES_OK)) {
		t->status |= VIRTIO_CONFIG_S_DRIVER_OK;
		driver_ok(t);
	}
}

/* The selected queue, if its registers may change now (spec 4.2.2: not
 * while ready; and the layout is fixed once the device runs). */
static struct virtqueue *setup_queue(struct virtio_mmio *t)
{
	struct virtqueue *vq;

	if (t->queue_sel >= t->ops->num_queues || (t->status & VIRTIO_CONFIG_S_DRIVER_OK))
		return NULL;
	vq = &t->vqs[t->queue_sel];
	return vq->ready ? NULL : vq;
}

static void set_lo(uint64_t *r, uint32_t v)
{
	*r = (*r & 0xffffffff00000000ULL) | v;
}

static void set_hi(uint64_t *r, uint32_t v)
{
	*r = (*r & 0xffffffffULL) | ((uint64_t)v << 32);
}

static void queue_ready(struct virtio_mmio *t, uint32_t v)
{
	struct virtqueue *vq;

	if (t->queue_sel >= t->ops->num_queues)
		return;
	if (v == 0) {
		vq_disable(&t->vqs[t->queue_sel]);
		return;
	}
	vq = setup_queue(t);
	if (!vq || !(t->status & VIRTIO_CONFIG_S_FEATURES_OK))
		return;
	if (vq_enable(vq, t->mem, t->ops->queue_max, t->acked, &t->err) < 0) {
		tvm_err_prefix(&t->err, "queue %u", t->queue_sel);
		vq->broken = true;
		needs_reset(t);
	}
}

static void write_queue_reg(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	struct virtqueue *vq = setup_queue(t);

	if (!vq)
		return;
	switch (off) {
	case VIRTIO_MMIO_QUEUE_NUM: vq->num = v > VQ_MAX_SIZE ? 0 : (uint16_t)v; break;
	case VIRTIO_MMIO_QUEUE_DESC_LOW: set_lo(&vq->desc_gpa, v); break;
	case VIRTIO_MMIO_QUEUE_DESC_HIGH: set_hi(&vq->desc_gpa, v); break;
	case VIRTIO_MMIO_QUEUE_AVAIL_LOW: set_lo(&vq->avail_gpa, v); break;
	case VIRTIO_MMIO_QUEUE_AVAIL_HIGH: set_hi(&vq->avail_gpa, v); break;
	case VIRTIO_MMIO_QUEUE_USED_LOW: set_lo(&vq->used_gpa, v); break;
	case VIRTIO_MMIO_QUEUE_USED_HIGH: set_hi(&vq->used_gpa, v); break;
	}
}

/* Run the device on queue q and raise what it calls for. Lock held. */
static void process(struct virtio_mmio *t, unsigned q)
{
	struct virtqueue *vq;
	int r;

	if (!t->active || q >= t->ops->num_queues)
		return;
	vq = &t->vqs[q];
	if (!vq->ready || vq->broken)
		return;
	r = t->ops->notify(t->dev, q);
	/* Chains completed before a failure still get their interrupt. */
	if (vq_should_interrupt(vq))
		raise_irq(t, VIRTIO_MMIO_INT_VRING);
	if (r < 0 || vq->broken) {
		vq->broken = true;
		tvm_errf(&t->err, EIO, "queue %u: the driver broke the ring format", q);
		needs_reset(t);
	}
}

static void reg_write(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	switch (off) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL: t->dev_features_sel = v; break;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL: t->drv_features_sel = v; break;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		/* Fixed once FEATURES_OK is set (spec 3.1.1 step 5). */
		if (t->status & VIRTIO_CONFIG_S_FEATURES_OK)
			break;
		if (t->drv_features_sel == 0)
			set_lo(&t->acked, v);
		else if (t->drv_features_sel == 1)
			set_hi(&t->acked, v);
		break;
	case VIRTIO_MMIO_QUEUE_SEL: t->queue_sel = v; break;
	case VIRTIO_MMIO_QUEUE_READY: queue_ready(t, v); break;
	case VIRTIO_MMIO_QUEUE_NOTIFY: process(t, v); break;
	case VIRTIO_MMIO_INTERRUPT_ACK: t->int_status &= ~v; break;
	case VIRTIO_MMIO_STATUS: write_status(t, v); break;
	case VIRTIO_MMIO_SHM_SEL: t->shm_sel = v; break;
	default: write_queue_reg(t, off, v); break;
	}
}

static uint32_t reg_read(struct virtio_mmio *t, uint64_t off)
{
	const struct virtqueue *vq = t->queue_sel < t->ops->num_queues ? &t->vqs[t->queue_sel] : NULL;

	switch (off) {
	case VIRTIO_MMIO_MAGIC_VALUE: return MAGIC;
	case VIRTIO_MMIO_VERSION: return VERSION;
	case VIRTIO_MMIO_DEVICE_ID: return t->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID: return VIRTIO_MMIO_VENDOR;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		return t->dev_features_sel < 2 ? (uint32_t)(t->offered >> (32 * t->dev_features_sel)) : 0;
	case VIRTIO_MMIO_QUEUE_NUM_MAX: return vq ? t->ops->queue_max : 0;
	case VIRTIO_MMIO_QUEUE_READY: return vq ? vq->ready : 0;
	case VIRTIO_MMIO_INTERRUPT_STATUS: return t->int_status;
	case VIRTIO_MMIO_STATUS: return t->status;
	/* No shared memory regions: length -1 (spec 4.2.2). */
	case VIRTIO_MMIO_SHM_LEN_LOW:
	case VIRTIO_MMIO_SHM_LEN_HIGH: return 0xffffffff;
	case VIRTIO_MMIO_CONFIG_GENERATION: return t->config_generation;
	default: return 0;
	}
}

static uint32_t get_le(const uint8_t *d, uint32_t len)
{
	uint32_t v = 0;

	for (uint32_t i = 0; i < len; i++)
		v |= (uint32_t)d[i] << (8 * i);
	return v;
}

static void put_le(uint8_t *d, uint32_t len, uint32_t v)
{
	for (uint32_t i = 0; i < len; i++)
		d[i] = v >> (8 * i);
}

void virtio_mmio_io(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write)
{
	struct virtio_mmio *t = opaque;

	if (!is_write)
		memset(data, 0, len);
	pthread_mutex_lock(&t->lock);
	if (off >= VIRTIO_MMIO_CONFIG && off < VIRTIO_MMIO_WINDOW) {
		uint64_t coff = off - VIRTIO_MMIO_CONFIG;

		if ((len == 1 || len == 2 || len == 4) && coff < t->ops->config_size &&
		    len <= t->ops->config_size - coff) {
			if (!is_write)
				t->ops->config_read(t->dev, coff, data, len);
			else if (t->ops->config_write)
				t->ops->config_write(t->dev, coff, data, len);
		}
	} else if (len == 4 && off % 4 == 0 && off < VIRTIO_MMIO_CONFIG) {
		if (is_write)
			reg_write(t, off, get_le(data, 4));
		else
			put_le(data, 4, reg_read(t, off));
	}
	pthread_mutex_unlock(&t->lock);
}

void virtio_mmio_notify(struct virtio_mmio *t, unsigned queue)
{
	pthread_mutex_lock(&t->lock);
	process(t, queue);
	pthread_mutex_unlock(&t->lock);
}

void virtio_mmio_config_changed(struct virtio_mmio *t)
{
	pthread_mutex_lock(&t->lock);
	t->config_generation++;
	if (t->status & VIRTIO_CONFIG_S_DRIVER_OK)
		raise_irq(t, VIRTIO_MMIO_INT_CONFIG);
	pthread_mutex_unlock(&t->lock);
}
