#include <check.h>
#include <errno.h>
#include <pthread.h>

#include "devices/virtio/virtio_mmio.h"
#include "tests/test_virtio_driver.h"
#include "tests/unit.h"

#define QS 8
#define F_VER (1ULL << VIRTIO_F_VERSION_1)
#define F_EVT (1ULL << VIRTIO_RING_F_EVENT_IDX)
#define F_DEV ((1ULL << 3) | (1ULL << 51))

/* A fake device: config space of 8 counting bytes; notify completes every
 * chain with its writable length. */
static struct fake {
	int activated, resets, notifies;
	uint64_t features;
	struct virtqueue *vqs;
	uint8_t cfg[8];
	uint8_t cfg_written[8];
} fk;

static uint64_t fk_features(void *dev)
{
	(void)dev;
	return F_DEV | (1ULL << 30) | (1ULL << 24); /* 24 and 30 are not the device's to offer */
}

static void fk_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	(void)dev;
	ck_assert_uint_le(off + len, sizeof(fk.cfg));
	memcpy(data, fk.cfg + off, len);
}

static void fk_config_write(void *dev, uint32_t off, const uint8_t *data, uint32_t len)
{
	(void)dev;
	memcpy(fk.cfg_written + off, data, len);
}

static int fk_activate(void *dev, struct virtqueue *vqs, uint64_t features)
{
	(void)dev;
	fk.activated++;
	fk.vqs = vqs;
	fk.features = features;
	return 0;
}

static void fk_reset(void *dev)
{
	(void)dev;
	fk.resets++;
	fk.vqs = NULL;
}

static struct vq_chain chain;

static int fk_notify(void *dev, unsigned q)
{
	int r;

	(void)dev;
	fk.notifies++;
	while ((r = vq_pop(&fk.vqs[q], &chain)) > 0)
		vq_push(&fk.vqs[q], chain.head, chain.writable_len);
	return r;
}

static const struct virtio_dev_ops fk_ops = {
	.device_id = 42,
	.num_queues = 2,
	.queue_max = 64,
	.config_size = sizeof(fk.cfg),
	.features = fk_features,
	.config_read = fk_config_read,
	.config_write = fk_config_write,
	.activate = fk_activate,
	.reset = fk_reset,
	.notify = fk_notify,
};

static struct td d;
static struct virtio_mmio t;

static void setup(void)
{
	memset(&fk, 0, sizeof(fk));
	for (unsigned i = 0; i < sizeof(fk.cfg); i++)
		fk.cfg[i] = 0x10 + i;
	td_init(&d, QS);
	ck_assert_int_eq(virtio_mmio_init(&t, &fk_ops, &fk, &d.mem, td_count_irq, &d, NULL), 0);
}

static void teardown(void)
{
	virtio_mmio_destroy(&t);
	td_fini(&d);
}

static uint32_t status(void)
{
	return td_rd(&t, VIRTIO_MMIO_STATUS);
}

/* One readable + one writable buffer as chain 0, made available. */
static void post_chain(void)
{
	td_desc(&d, 0, TD_DATA, 16, VRING_DESC_F_NEXT, 1);
	td_desc(&d, 1, TD_DATA + 16, 100, VRING_DESC_F_WRITE, 0);
	td_post(&d, 0);
}

START_TEST(identification)
{
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_VERSION), 2);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_DEVICE_ID), 42);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_VENDOR_ID), VIRTIO_MMIO_VENDOR);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_QUEUE_NUM_MAX), 64);
	td_wr(&t, VIRTIO_MMIO_QUEUE_SEL, 2);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_QUEUE_NUM_MAX), 0);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_SHM_LEN_LOW), 0xffffffff);
	ck_assert_uint_eq(VIRTIO_MMIO_NOTIFY_OFF, 0x50);
	ck_assert_uint_eq(VIRTIO_MMIO_WINDOW, 0x200);
}
END_TEST

START_TEST(offered_features)
{
	uint64_t f = td_device_features(&t);

	ck_assert_uint_eq(f, F_DEV | F_VER | F_EVT | (1ULL << VIRTIO_RING_F_INDIRECT_DESC));
	td_wr(&t, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 2);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_DEVICE_FEATURES), 0);
}
END_TEST

START_TEST(features_ok_needs_version_1)
{
	ck_assert_uint_eq(td_negotiate(&t, F_DEV) & VIRTIO_CONFIG_S_FEATURES_OK, 0);
	/* Unknown bit 40 (not offered). */
	td_wr(&t, VIRTIO_MMIO_STATUS, 0);
	ck_assert_uint_eq(td_negotiate(&t, F_VER | (1ULL << 40)) & VIRTIO_CONFIG_S_FEATURES_OK, 0);
	/* A bit the device tried to offer outside its range is not offered. */
	td_wr(&t, VIRTIO_MMIO_STATUS, 0);
	ck_assert_uint_eq(td_negotiate(&t, F_VER | (1ULL << 24)) & VIRTIO_CONFIG_S_FEATURES_OK, 0);
	td_wr(&t, VIRTIO_MMIO_STATUS, 0);
	ck_assert_uint_eq(td_negotiate(&t, F_VER | F_DEV),
			  VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK);
	/* Features are fixed from now on. */
	td_wr(&t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	td_wr(&t, VIRTIO_MMIO_DRIVER_FEATURES, 0);
	td_setup_queue(&d, &t, 0);
	td_wr(&t, VIRTIO_MMIO_STATUS, status() | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_int_eq(fk.activated, 1);
	ck_assert_uint_eq(fk.features, F_VER | F_DEV);
}
END_TEST

START_TEST(status_order)
{
	/* DRIVER without ACKNOWLEDGE, DRIVER_OK without FEATURES_OK: not taken. */
	td_wr(&t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_DRIVER);
	ck_assert_uint_eq(status(), 0);
	td_wr(&t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(status(), VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	ck_assert_int_eq(fk.activated, 0);
	/* Clearing a bit other than by reset is ignored. */
	td_wr(&t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE);
	ck_assert_uint_eq(status(), VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	td_wr(&t, VIRTIO_MMIO_STATUS, status() | VIRTIO_CONFIG_S_FAILED);
	ck_assert_uint_eq(status() & VIRTIO_CONFIG_S_FAILED, VIRTIO_CONFIG_S_FAILED);
}
END_TEST

START_TEST(queue_ready_needs_features_ok)
{
	td_wr(&t, VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER);
	td_setup_queue(&d, &t, 0);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_QUEUE_READY), 0);
}
END_TEST

START_TEST(request_and_interrupt)
{
	uint32_t id, len;

	ck_assert_uint_eq(td_driver_init(&d, &t, ~0ULL & ~F_EVT) & VIRTIO_CONFIG_S_DRIVER_OK,
			  VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_QUEUE_READY), 1);
	post_chain();
	virtio_mmio_notify(&t, 0);
	ck_assert_int_eq(fk.notifies, 1);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	td_used(&d, 0, &id, &len);
	ck_assert_uint_eq(id, 0);
	ck_assert_uint_eq(len, 100);
	ck_assert_int_eq(d.irqs, 1);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING);
	td_wr(&t, VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	/* A notify with nothing new: no interrupt. Queue 1 was never set up. */
	virtio_mmio_notify(&t, 0);
	virtio_mmio_notify(&t, 1);
	virtio_mmio_notify(&t, 7);
	ck_assert_int_eq(d.irqs, 1);
	ck_assert_int_eq(fk.notifies, 2);
}
END_TEST

START_TEST(notify_register_write)
{
	td_driver_init(&d, &t, ~0ULL);
	post_chain();
	td_wr(&t, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	ck_assert_int_eq(d.irqs, 1);
}
END_TEST

START_TEST(notify_before_driver_ok_ignored)
{
	td_negotiate(&t, F_VER);
	td_setup_queue(&d, &t, 0);
	post_chain();
	virtio_mmio_notify(&t, 0);
	ck_assert_int_eq(fk.notifies, 0);
	ck_assert_uint_eq(td_used_idx(&d), 0);
}
END_TEST

START_TEST(event_idx_suppresses)
{
	td_driver_init(&d, &t, ~0ULL);
	td_set_used_event(&d, 5); /* interrupt me after the 6th */
	post_chain();
	virtio_mmio_notify(&t, 0);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	ck_assert_int_eq(d.irqs, 0);
	for (int i = 0; i < 5; i++)
		post_chain();
	virtio_mmio_notify(&t, 0);
	ck_assert_uint_eq(td_used_idx(&d), 6);
	ck_assert_int_eq(d.irqs, 1);
}
END_TEST

START_TEST(reset_clears_everything)
{
	int resets;

	td_driver_init(&d, &t, ~0ULL);
	post_chain();
	virtio_mmio_notify(&t, 0);
	resets = fk.resets;
	td_wr(&t, VIRTIO_MMIO_STATUS, 0);
	ck_assert_int_eq(fk.resets, resets + 1);
	ck_assert_uint_eq(status(), 0);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_QUEUE_READY), 0);
	ck_assert_uint_eq(t.vqs[0].num, 0);
	ck_assert_uint_eq(t.vqs[0].desc_gpa, 0);
	ck_assert_uint_eq(t.vqs[0].used_gpa, 0);
	ck_assert_uint_eq(t.acked, 0);
	/* The device is quiet until set up again. */
	post_chain();
	virtio_mmio_notify(&t, 0);
	ck_assert_int_eq(fk.notifies, 1);
	/* And works after a fresh init, from used index 0. */
	memset(d.ram + TD_USED, 0, 4);
	d.avail_idx = 0;
	td_set_avail_idx(&d, 0);
	td_driver_init(&d, &t, ~0ULL);
	ck_assert_int_eq(fk.activated, 2);
	post_chain();
	virtio_mmio_notify(&t, 0);
	ck_assert_uint_eq(td_used_idx(&d), 1);
}
END_TEST

START_TEST(queue_registers_locked)
{
	td_driver_init(&d, &t, ~0ULL);
	/* Ready, and DRIVER_OK: writes are ignored. */
	td_wr(&t, VIRTIO_MMIO_QUEUE_DESC_LOW, 0x5000);
	td_wr(&t, VIRTIO_MMIO_QUEUE_NUM, 2);
	ck_assert_uint_eq(t.vqs[0].desc_gpa, TD_DESC);
	ck_assert_uint_eq(t.vqs[0].num, QS);
	/* Queue 1 not ready, but DRIVER_OK is set: still ignored. */
	td_wr(&t, VIRTIO_MMIO_QUEUE_SEL, 1);
	td_wr(&t, VIRTIO_MMIO_QUEUE_NUM, 4);
	td_wr(&t, VIRTIO_MMIO_QUEUE_READY, 1);
	ck_assert_uint_eq(t.vqs[1].num, 0);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_QUEUE_READY), 0);
}
END_TEST

START_TEST(bad_queue_at_ready)
{
	static const struct {
		uint32_t reg, val;
	} bad[] = {
		{ VIRTIO_MMIO_QUEUE_NUM, 0 },
		{ VIRTIO_MMIO_QUEUE_NUM, 3 },
		{ VIRTIO_MMIO_QUEUE_NUM, 128 },
		{ VIRTIO_MMIO_QUEUE_NUM, 0x10008 },
		{ VIRTIO_MMIO_QUEUE_DESC_HIGH, 1 },
		{ VIRTIO_MMIO_QUEUE_USED_LOW, TD_RAM - 8 },
		{ VIRTIO_MMIO_QUEUE_AVAIL_LOW, TD_AVAIL + 1 },
	};

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint32_t s;

		d.irqs = 0;
		td_wr(&t, VIRTIO_MMIO_STATUS, 0);
		s = td_negotiate(&t, F_VER);
		td_setup_queue(&d, &t, 0);
		td_wr(&t, VIRTIO_MMIO_QUEUE_READY, 0);
		td_wr(&t, bad[i].reg, bad[i].val);
		td_wr(&t, VIRTIO_MMIO_QUEUE_READY, 1);
		ck_assert_msg(td_rd(&t, VIRTIO_MMIO_QUEUE_READY) == 0, "case %u", i);
		ck_assert_uint_eq(status(), s | VIRTIO_CONFIG_S_NEEDS_RESET);
		ck_assert_ptr_nonnull(strstr(t.err.msg, "queue 0"));
		ck_assert_int_eq(d.irqs, 0); /* the driver cannot take interrupts yet */
		/* Told with a config interrupt once it can. */
		td_wr(&t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_DRIVER_OK);
		ck_assert_int_eq(d.irqs, 1);
		ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_CONFIG);
		post_chain();
		virtio_mmio_notify(&t, 0);
		ck_assert_int_eq(fk.notifies, 0);
	}
}
END_TEST

START_TEST(broken_ring_needs_reset)
{
	uint32_t s = td_driver_init(&d, &t, ~0ULL);

	post_chain();
	td_set_avail_idx(&d, d.avail_idx + QS + 1);
	virtio_mmio_notify(&t, 0);
	ck_assert_uint_eq(status(), s | VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_int_eq(d.irqs, 1);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_CONFIG);
	/* The device leaves the queue alone from now on. */
	virtio_mmio_notify(&t, 0);
	ck_assert_int_eq(fk.notifies, 1);
	ck_assert_uint_eq(td_used_idx(&d), 0);
	/* NEEDS_RESET survives the driver's status writes; a reset clears it. */
	td_wr(&t, VIRTIO_MMIO_STATUS, s);
	ck_assert_uint_eq(status() & VIRTIO_CONFIG_S_NEEDS_RESET, VIRTIO_CONFIG_S_NEEDS_RESET);
	td_wr(&t, VIRTIO_MMIO_STATUS, 0);
	ck_assert_uint_eq(status(), 0);
}
END_TEST

START_TEST(completed_chains_before_breakage_are_signalled)
{
	td_driver_init(&d, &t, ~0ULL & ~F_EVT);
	post_chain();
	td_post(&d, QS); /* bad head */
	virtio_mmio_notify(&t, 0);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG);
}
END_TEST

START_TEST(access_widths)
{
	uint8_t b[8];

	/* Registers: 4-byte aligned only. */
	memset(b, 0xaa, sizeof(b));
	virtio_mmio_io(&t, VIRTIO_MMIO_MAGIC_VALUE, b, 2, false);
	ck_assert_uint_eq(b[0] | b[1], 0);
	memset(b, 0xaa, sizeof(b));
	virtio_mmio_io(&t, VIRTIO_MMIO_MAGIC_VALUE + 1, b, 4, false);
	ck_assert_uint_eq(b[0] | b[1] | b[2] | b[3], 0);
	memset(b, 0xaa, sizeof(b));
	virtio_mmio_io(&t, VIRTIO_MMIO_MAGIC_VALUE, b, 8, false);
	ck_assert_uint_eq(b[0] | b[7], 0);
	b[0] = VIRTIO_CONFIG_S_ACKNOWLEDGE, b[1] = 0;
	virtio_mmio_io(&t, VIRTIO_MMIO_STATUS, b, 2, true);
	ck_assert_uint_eq(status(), 0);
	/* Config space: 1, 2, 4 bytes anywhere inside. */
	virtio_mmio_io(&t, VIRTIO_MMIO_CONFIG + 3, b, 1, false);
	ck_assert_uint_eq(b[0], 0x13);
	virtio_mmio_io(&t, VIRTIO_MMIO_CONFIG + 1, b, 2, false);
	ck_assert_uint_eq(b[0] | b[1] << 8, 0x1211);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_CONFIG + 4), 0x17161514);
	/* Past its end, straddling it, 8 bytes: zeroes. */
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_CONFIG + 8), 0);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_CONFIG + 6), 0);
	memset(b, 0xaa, sizeof(b));
	virtio_mmio_io(&t, VIRTIO_MMIO_CONFIG, b, 8, false);
	ck_assert_uint_eq(b[0] | b[7], 0);
	b[0] = 0x99;
	virtio_mmio_io(&t, VIRTIO_MMIO_CONFIG + 2, b, 1, true);
	ck_assert_uint_eq(fk.cfg_written[2], 0x99);
	virtio_mmio_io(&t, VIRTIO_MMIO_CONFIG + 7, b, 2, true); /* straddles the end */
	ck_assert_uint_eq(fk.cfg_written[7], 0);
}
END_TEST

START_TEST(config_changed)
{
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_CONFIG_GENERATION), 0);
	virtio_mmio_config_changed(&t); /* before DRIVER_OK: no interrupt */
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_CONFIG_GENERATION), 1);
	ck_assert_int_eq(d.irqs, 0);
	td_driver_init(&d, &t, ~0ULL);
	virtio_mmio_config_changed(&t);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_CONFIG_GENERATION), 2);
	ck_assert_int_eq(d.irqs, 1);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_INTERRUPT_STATUS), VIRTIO_MMIO_INT_CONFIG);
}
END_TEST

static int fail_activate(void *dev, struct virtqueue *vqs, uint64_t features)
{
	(void)dev, (void)vqs, (void)features;
	return -ENOMEM;
}

START_TEST(activate_failure)
{
	struct virtio_dev_ops ops = fk_ops;
	uint32_t s;

	ops.activate = fail_activate;
	virtio_mmio_destroy(&t);
	ck_assert_int_eq(virtio_mmio_init(&t, &ops, &fk, &d.mem, td_count_irq, &d, NULL), 0);
	td_negotiate(&t, F_VER);
	td_setup_queue(&d, &t, 0);
	s = status();
	td_wr(&t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(status(), s | VIRTIO_CONFIG_S_DRIVER_OK | VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_int_eq(d.irqs, 1);
	post_chain();
	virtio_mmio_notify(&t, 0);
	ck_assert_int_eq(fk.notifies, 0);
}
END_TEST

START_TEST(init_rejects_bad_ops)
{
	struct virtio_mmio t2;
	struct virtio_dev_ops ops = fk_ops;
	struct tvm_err e = { 0 };

	ops.num_queues = 0;
	ck_assert_int_eq(virtio_mmio_init(&t2, &ops, &fk, &d.mem, NULL, NULL, &e), -EINVAL);
	ops = fk_ops, ops.num_queues = VIRTIO_MMIO_MAX_QUEUES + 1;
	ck_assert_int_eq(virtio_mmio_init(&t2, &ops, &fk, &d.mem, NULL, NULL, &e), -EINVAL);
	ops = fk_ops, ops.queue_max = 48;
	ck_assert_int_eq(virtio_mmio_init(&t2, &ops, &fk, &d.mem, NULL, NULL, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "48"));
	ops = fk_ops, ops.notify = NULL;
	ck_assert_int_eq(virtio_mmio_init(&t2, &ops, &fk, &d.mem, NULL, NULL, &e), -EINVAL);
}
END_TEST

/* The event loop notifying while a vCPU takes interrupts and reads config:
 * the transport lock keeps both consistent. */
static void *vcpu_thread(void *arg)
{
	int *stop = arg;
	uint8_t b[4];

	while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
		uint32_t st = td_rd(&t, VIRTIO_MMIO_INTERRUPT_STATUS);

		td_wr(&t, VIRTIO_MMIO_INTERRUPT_ACK, st);
		virtio_mmio_io(&t, VIRTIO_MMIO_CONFIG, b, 4, false);
		ck_assert_uint_eq(b[0], 0x10);
	}
	return NULL;
}

START_TEST(concurrent_notify_and_registers)
{
	int stop = 0;
	pthread_t th;

	td_driver_init(&d, &t, ~0ULL & ~F_EVT);
	ck_assert_int_eq(pthread_create(&th, NULL, vcpu_thread, &stop), 0);
	for (int i = 0; i < 2000; i++) {
		post_chain();
		virtio_mmio_notify(&t, 0);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	ck_assert_uint_eq(td_used_idx(&d), 2000);
	ck_assert_int_eq(d.irqs, 2000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("virtio_mmio");
	TCase *tc = tcase_create("transport");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, identification);
	tcase_add_test(tc, offered_features);
	tcase_add_test(tc, features_ok_needs_version_1);
	tcase_add_test(tc, status_order);
	tcase_add_test(tc, queue_ready_needs_features_ok);
	tcase_add_test(tc, request_and_interrupt);
	tcase_add_test(tc, notify_register_write);
	tcase_add_test(tc, notify_before_driver_ok_ignored);
	tcase_add_test(tc, event_idx_suppresses);
	tcase_add_test(tc, reset_clears_everything);
	tcase_add_test(tc, queue_registers_locked);
	tcase_add_test(tc, bad_queue_at_ready);
	tcase_add_test(tc, broken_ring_needs_reset);
	tcase_add_test(tc, completed_chains_before_breakage_are_signalled);
	tcase_add_test(tc, access_widths);
	tcase_add_test(tc, config_changed);
	tcase_add_test(tc, activate_failure);
	tcase_add_test(tc, init_rejects_bad_ops);
	tcase_add_test(tc, concurrent_notify_and_registers);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
