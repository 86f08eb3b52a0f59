/* Saving and restoring the virtio-mmio transport: a round trip keeps the
 * queue positions and the device keeps working; a tampered state (queue
 * outside RAM, bad size, used index that disagrees with guest memory,
 * other features) is refused with an error, never used. */
#include <check.h>
#include <errno.h>

#include "tests/test_virtio_driver.h"
#include "tests/unit.h"

#define QS 16

static struct virtqueue *dev_vqs;
static int activations;
static struct vq_chain chain;

static uint64_t st_features(void *dev)
{
	(void)dev;
	return 1ULL << 3;
}

static void st_config_read(void *dev, uint32_t off, uint8_t *data, uint32_t len)
{
	(void)dev, (void)off;
	memset(data, 0, len);
}

static int st_activate(void *dev, struct virtqueue *vqs, uint64_t features)
{
	(void)dev, (void)features;
	dev_vqs = vqs;
	activations++;
	return 0;
}

static void st_reset(void *dev)
{
	(void)dev;
	dev_vqs = NULL;
}

/* Complete every chain with its writable length. */
static int st_notify(void *dev, unsigned q)
{
	int r;

	(void)dev;
	while ((r = vq_pop(&dev_vqs[q], &chain)) > 0)
		vq_push(&dev_vqs[q], chain.head, chain.writable_len);
	return r;
}

static const struct virtio_dev_ops st_ops = {
	.device_id = 7,
	.num_queues = 1,
	.queue_max = 64,
	.config_size = 4,
	.features = st_features,
	.config_read = st_config_read,
	.activate = st_activate,
	.reset = st_reset,
	.notify = st_notify,
};

static struct td d;
static struct virtio_mmio t;
static struct virtio_mmio_state saved;

static void post_and_run(uint16_t head)
{
	td_desc(&d, head, TD_DATA + 256u * head, 64, VRING_DESC_F_WRITE, 0);
	td_post(&d, head);
	virtio_mmio_notify(&t, 0);
}

/* A driven device with two chains completed, saved into `saved`. */
static void setup(void)
{
	activations = 0;
	td_init(&d, QS);
	ck_assert_int_eq(virtio_mmio_init(&t, &st_ops, NULL, &d.mem, td_count_irq, &d, NULL), 0);
	td_negotiate(&t, td_device_features(&t));
	td_setup_queue(&d, &t, 0);
	td_wr(&t, VIRTIO_MMIO_STATUS, td_rd(&t, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_DRIVER_OK);
	post_and_run(0);
	post_and_run(1);
	ck_assert_uint_eq(td_used_idx(&d), 2);
	pthread_mutex_lock(&t.lock);
	virtio_mmio_save(&t, &saved);
	pthread_mutex_unlock(&t.lock);
	virtio_mmio_destroy(&t);
	ck_assert_int_eq(virtio_mmio_init(&t, &st_ops, NULL, &d.mem, td_count_irq, &d, NULL), 0);
}

static void teardown(void)
{
	virtio_mmio_destroy(&t);
	td_fini(&d);
}

START_TEST(round_trip_keeps_positions)
{
	ck_assert_uint_eq(saved.q[0].last_avail, 2);
	ck_assert_int_eq(virtio_mmio_restore(&t, &saved, NULL), 0);
	ck_assert_uint_eq(activations, 2);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_STATUS), saved.status);
	ck_assert_uint_eq(t.vqs[0].last_avail, 2);
	/* The restored device goes on where the old one stopped. */
	post_and_run(2);
	ck_assert_uint_eq(td_used_idx(&d), 3);
}
END_TEST

START_TEST(queue_outside_ram_refused)
{
	struct tvm_err e = { 0 };

	saved.q[0].desc_gpa = TD_RAM - 8;
	ck_assert_int_eq(virtio_mmio_restore(&t, &saved, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "queue 0"));
	ck_assert_int_eq(t.vqs[0].ready, 0);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_STATUS), 0);
}
END_TEST

START_TEST(bad_sizes_refused)
{
	static const uint32_t nums[] = { 3, 0, 128, 1u << 20 };

	for (unsigned i = 0; i < 4; i++) {
		struct virtio_mmio_state s = saved;

		s.q[0].num = nums[i];
		ck_assert_int_eq(virtio_mmio_restore(&t, &s, NULL), -EINVAL);
	}
}
END_TEST

START_TEST(used_index_mismatch_refused)
{
	struct tvm_err e = { 0 };

	saved.q[0].used_idx = 7;
	ck_assert_int_eq(virtio_mmio_restore(&t, &saved, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "used index"));
}
END_TEST

START_TEST(features_and_identity_checked)
{
	struct virtio_mmio_state s = saved;

	s.offered |= 1ULL << 5;
	ck_assert_int_eq(virtio_mmio_restore(&t, &s, NULL), -EINVAL);
	s = saved;
	s.acked |= 1ULL << 9; /* not offered */
	ck_assert_int_eq(virtio_mmio_restore(&t, &s, NULL), -EINVAL);
	s = saved;
	s.device_id = 2;
	ck_assert_int_eq(virtio_mmio_restore(&t, &s, NULL), -EINVAL);
	s = saved;
	s.status = 0;
	ck_assert_int_eq(virtio_mmio_restore(&t, &s, NULL), -EINVAL); /* active without DRIVER_OK */
	s = saved;
	s.q[0].ready = 2;
	ck_assert_int_eq(virtio_mmio_restore(&t, &s, NULL), -EINVAL);
	ck_assert_uint_eq(activations, 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("virtio_mmio_state");
	TCase *tc = tcase_create("state");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, round_trip_keeps_positions);
	tcase_add_test(tc, queue_outside_ram_refused);
	tcase_add_test(tc, bad_sizes_refused);
	tcase_add_test(tc, used_index_mismatch_refused);
	tcase_add_test(tc, features_and_identity_checked);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
