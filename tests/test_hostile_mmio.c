/* Hostile register traffic, exhaustively: every offset around a virtio-mmio
 * window on a real bus (vmm/kvm/bus.c), every access length 0..8, reads and
 * writes of several patterns, in several transport states, with a real
 * virtio-blk device over a memfd behind it. The fuzzer
 * (tests/fuzz/fuzz_virtio_blk.c) calls the transport directly with
 * lengths 1/2/4/8; this walks the bus too, and the odd lengths.
 *
 * Checked: accesses not wholly inside the window are refused and read as
 * all ones; nothing outside data[0..len) is touched; register reads of any
 * width but 4 give zeros; the read-only image is never written; and the
 * transport still resets and initialises normally afterwards. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/virtio_config.h>
#include <linux/virtio_mmio.h>

#include "devices/blk/blk_image.h"
#include "devices/blk/virtio_blk.h"
#include "devices/virtio/virtio_mmio.h"
#include "tests/test_vlog.h"
#include "tests/unit.h"
#include "vmm/kvm/bus.h"
#include "vmm/vdev.h"

/* Plain test, then ck_abort_msg: a ck_assert per byte would cost a message
 * to the check parent each, and there are millions. */
#define CHECK(cond, ...)                           \
	do {                                       \
		if (!(cond))                       \
			ck_abort_msg(__VA_ARGS__); \
	} while (0)

#define BASE 0xd0000000ull
#define RAM (64 * 1024)
#define IMG (64 * 1024)

struct rig {
	uint8_t *ram;
	struct guest_mem mem;
	int img_fd;
	char img_path[64];
	struct virtio_blk *blk;
	struct virtio_mmio t;
	struct bus bus;
	unsigned irqs;
};

static void on_irq(void *ctx)
{
	((struct rig *)ctx)->irqs++;
}

static void rig_open(struct rig *r, bool read_only)
{
	struct blk_opts o = { .id = "hostile", .read_only = read_only };
	struct tvm_err e = { 0 };
	uint8_t pattern[IMG];

	memset(r, 0, sizeof(*r));
	r->ram = aligned_alloc(4096, RAM);
	ck_assert_ptr_nonnull(r->ram);
	memset(r->ram, 0, RAM);
	ck_assert_int_eq(gm_init_buffer(&r->mem, r->ram, RAM, &e), 0);
	r->img_fd = memfd_create("hostile-mmio", MFD_CLOEXEC);
	ck_assert_int_ge(r->img_fd, 0);
	for (size_t i = 0; i < IMG; i++)
		pattern[i] = (uint8_t)(i * 7 + 3);
	ck_assert_int_eq(pwrite(r->img_fd, pattern, IMG, 0), IMG);
	snprintf(r->img_path, sizeof(r->img_path), "/proc/self/fd/%d", r->img_fd);
	o.path = r->img_path;
	ck_assert_msg(virtio_blk_open(&r->blk, &o, &e) == 0, "%s", e.msg);
	ck_assert_msg(virtio_mmio_init(&r->t, &virtio_blk_ops, r->blk, &r->mem, on_irq, r, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(bus_register(&r->bus, BASE, VIRTIO_MMIO_WINDOW, "virtio-blk", virtio_mmio_io, &r->t, &e), 0);
}

static void rig_close(struct rig *r)
{
	uint8_t now[IMG];

	virtio_mmio_destroy(&r->t);
	virtio_blk_close(r->blk);
	ck_assert_int_eq(pread(r->img_fd, now, IMG, 0), IMG);
	for (size_t i = 0; i < IMG; i++)
		CHECK(now[i] == (uint8_t)(i * 7 + 3), "image byte %zu written", i);
	close(r->img_fd);
	free(r->ram);
}

static void wr32(struct rig *r, uint64_t off, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };

	ck_assert_int_eq(bus_dispatch(&r->bus, BASE + off, b, 4, true), 0);
}

static uint32_t rd32(struct rig *r, uint64_t off)
{
	uint8_t b[4];

	ck_assert_int_eq(bus_dispatch(&r->bus, BASE + off, b, 4, false), 0);
	return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Spec 3.1.1 with the queue where the caller says. */
static void driver_init(struct rig *r, uint64_t desc, uint64_t avail, uint64_t used)
{
	uint32_t s = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER;

	wr32(r, VIRTIO_MMIO_STATUS, 0);
	wr32(r, VIRTIO_MMIO_STATUS, s);
	wr32(r, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	wr32(r, VIRTIO_MMIO_DRIVER_FEATURES, 1); /* VIRTIO_F_VERSION_1 */
	wr32(r, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	wr32(r, VIRTIO_MMIO_DRIVER_FEATURES, 0);
	wr32(r, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_FEATURES_OK);
	wr32(r, VIRTIO_MMIO_QUEUE_SEL, 0);
	wr32(r, VIRTIO_MMIO_QUEUE_NUM, 16);
	wr32(r, VIRTIO_MMIO_QUEUE_DESC_LOW, (uint32_t)desc);
	wr32(r, VIRTIO_MMIO_QUEUE_DESC_HIGH, (uint32_t)(desc >> 32));
	wr32(r, VIRTIO_MMIO_QUEUE_AVAIL_LOW, (uint32_t)avail);
	wr32(r, VIRTIO_MMIO_QUEUE_AVAIL_HIGH, (uint32_t)(avail >> 32));
	wr32(r, VIRTIO_MMIO_QUEUE_USED_LOW, (uint32_t)used);
	wr32(r, VIRTIO_MMIO_QUEUE_USED_HIGH, (uint32_t)(used >> 32));
	wr32(r, VIRTIO_MMIO_QUEUE_READY, 1);
	wr32(r, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
}

/* The sweep: every address from 16 before to 16 past the window, every
 * length 0..8, each pattern written then read back. */
static void sweep(struct rig *r)
{
	static const uint8_t fills[] = { 0x00, 0xff, 0x5a };

	for (uint64_t a = BASE - 16; a < BASE + VIRTIO_MMIO_WINDOW + 16; a++) {
		for (uint32_t len = 0; len <= 8; len++) {
			bool inside = len && a >= BASE && a + len <= BASE + VIRTIO_MMIO_WINDOW;
			uint64_t off = a - BASE;

			for (unsigned f = 0; f < sizeof(fills); f++) {
				uint8_t buf[24];
				int rc;

				/* Write: fill[0..len), canaries around. */
				memset(buf, 0xcc, sizeof(buf));
				memset(buf + 8, fills[f] ^ (uint8_t)a, len);
				rc = bus_dispatch(&r->bus, a, buf + 8, len, true);
				CHECK(rc == (inside ? 0 : -ENOENT), "write 0x%llx+%u: %d", (unsigned long long)a, len,
				      rc);
				for (unsigned i = 0; i < sizeof(buf); i++)
					CHECK(i >= 8 && i < 8 + len ? 1 : buf[i] == 0xcc,
					      "write 0x%llx+%u: byte %d touched", (unsigned long long)a, len,
					      (int)i - 8);

				/* Read. */
				memset(buf, 0xcc, sizeof(buf));
				rc = bus_dispatch(&r->bus, a, buf + 8, len, false);
				CHECK(rc == (inside ? 0 : -ENOENT), "read 0x%llx+%u: %d", (unsigned long long)a, len,
				      rc);
				for (unsigned i = 0; i < sizeof(buf); i++)
					CHECK(i >= 8 && i < 8 + len ? 1 : buf[i] == 0xcc,
					      "read 0x%llx+%u: byte %d touched", (unsigned long long)a, len,
					      (int)i - 8);
				for (unsigned i = 0; i < len; i++) {
					if (!inside)
						CHECK(buf[8 + i] == 0xff, "read 0x%llx+%u outside: byte %u is 0x%02x",
						      (unsigned long long)a, len, i, buf[8 + i]);
					else if (off < VIRTIO_MMIO_CONFIG && (len != 4 || off % 4))
						CHECK(buf[8 + i] == 0, "off 0x%llx len %u: byte %u is 0x%02x",
						      (unsigned long long)off, len, i, buf[8 + i]);
				}
			}
		}
	}
}

/* After anything, a reset and a normal initialisation work. */
static void assert_recovers(struct rig *r)
{
	ck_assert_uint_eq(rd32(r, VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	ck_assert_uint_eq(rd32(r, VIRTIO_MMIO_VERSION), 2);
	ck_assert_uint_eq(rd32(r, VIRTIO_MMIO_DEVICE_ID), 2);
	driver_init(r, 0x1000, 0x2000, 0x3000);
	ck_assert_uint_eq(rd32(r, VIRTIO_MMIO_STATUS), VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER |
							       VIRTIO_CONFIG_S_FEATURES_OK | VIRTIO_CONFIG_S_DRIVER_OK);
	ck_assert_uint_eq(rd32(r, VIRTIO_MMIO_QUEUE_READY), 1);
	/* Capacity in 512-byte sectors, config offset 0. */
	ck_assert_uint_eq(rd32(r, VIRTIO_MMIO_CONFIG), IMG / 512);
}

START_TEST(sweep_fresh)
{
	struct rig r;

	rig_open(&r, true);
	sweep(&r);
	wr32(&r, VIRTIO_MMIO_STATUS, 0);
	assert_recovers(&r);
	rig_close(&r);
}
END_TEST

START_TEST(sweep_running)
{
	struct rig r;

	rig_open(&r, true);
	driver_init(&r, 0x1000, 0x2000, 0x3000);
	ck_assert(rd32(&r, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_DRIVER_OK);
	sweep(&r);
	wr32(&r, VIRTIO_MMIO_STATUS, 0);
	assert_recovers(&r);
	rig_close(&r);
}
END_TEST

/* Rings outside guest RAM and at the very top of the address space. */
START_TEST(sweep_rings_outside_ram)
{
	static const uint64_t where[][3] = {
		{ RAM, RAM + 0x1000, RAM + 0x2000 },
		{ UINT64_MAX - 0xff, UINT64_MAX - 0x7f, UINT64_MAX - 0x3f },
		{ RAM - 8, RAM - 4, RAM - 2 },
	};

	for (unsigned i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		struct rig r;

		rig_open(&r, true);
		driver_init(&r, where[i][0], where[i][1], where[i][2]);
		/* Refused: the queue stays not ready, the transport wants a reset. */
		ck_assert_uint_eq(rd32(&r, VIRTIO_MMIO_QUEUE_READY), 0);
		wr32(&r, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
		sweep(&r);
		wr32(&r, VIRTIO_MMIO_STATUS, 0);
		assert_recovers(&r);
		rig_close(&r);
	}
}
END_TEST

/* Driver initialisation up to DRIVER_OK with queue 0's descriptor ring
 * outside guest RAM, QueueReady written twice: refused twice. */
static const struct {
	uint32_t reg, val;
} bad_start[] = {
	{ VIRTIO_MMIO_STATUS, 0 },
	{ VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER },
	{ VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1 },
	{ VIRTIO_MMIO_DRIVER_FEATURES, 1 }, /* VIRTIO_F_VERSION_1 */
	{ VIRTIO_MMIO_STATUS, VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER | VIRTIO_CONFIG_S_FEATURES_OK },
	{ VIRTIO_MMIO_QUEUE_SEL, 0 },
	{ VIRTIO_MMIO_QUEUE_NUM, 16 },
	{ VIRTIO_MMIO_QUEUE_DESC_LOW, RAM },
	{ VIRTIO_MMIO_QUEUE_READY, 1 },
	{ VIRTIO_MMIO_QUEUE_READY, 1 },
};

static const char refused_line[] = "tinyvmm: virtio-blk0: device needs reset: queue 0: virtqueue: ";

/* Exactly one line starting with prefix. */
static void assert_one_line(const char *text, const char *prefix)
{
	ck_assert_msg(!strncmp(text, prefix, strlen(prefix)), "log: %s", text);
	ck_assert_msg(strchr(text, '\n') == text + strlen(text) - 1, "log: %s", text);
}

/* A guest that breaks the device: one log line naming the device, the
 * queue and the reason, once per reset cycle, and the count. */
START_TEST(needs_reset_logged_once_per_reset)
{
	struct tlog l;
	struct rig r;
	const char *text;

	tlog_open(&l);
	rig_open(&r, true);
	virtio_mmio_set_log(&r.t, "virtio-blk0", tlog_line, &l);
	ck_assert_str_eq(tlog_read(&l), "");

	/* A ring outside guest RAM, refused at QueueReady, twice. */
	for (unsigned i = 0; i < sizeof(bad_start) / sizeof(bad_start[0]); i++)
		wr32(&r, bad_start[i].reg, bad_start[i].val);
	ck_assert(rd32(&r, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	text = tlog_read(&l);
	assert_one_line(text, refused_line);
	ck_assert_ptr_nonnull(strstr(text, "not in guest RAM"));
	ck_assert_uint_eq(virtio_mmio_needs_resets(&r.t), 1);
	/* More before a reset: nothing more. */
	wr32(&r, VIRTIO_MMIO_STATUS, rd32(&r, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_DRIVER_OK);
	wr32(&r, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	ck_assert_str_eq(tlog_read(&l), "");
	ck_assert_uint_eq(virtio_mmio_needs_resets(&r.t), 1);

	/* Reset, a good start (nothing logged), then an available index
	 * more than the queue size ahead breaks the running queue. */
	driver_init(&r, 0x1000, 0x2000, 0x3000);
	ck_assert_uint_eq(rd32(&r, VIRTIO_MMIO_QUEUE_READY), 1);
	ck_assert_str_eq(tlog_read(&l), "");
	r.ram[0x2002] = 17;
	wr32(&r, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	wr32(&r, VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	ck_assert(rd32(&r, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_str_eq(tlog_read(&l),
			 "tinyvmm: virtio-blk0: device needs reset: queue 0: the driver broke the ring format\n");
	ck_assert_uint_eq(virtio_mmio_needs_resets(&r.t), 2);
	rig_close(&r);
	tlog_close(&l);
}
END_TEST

static void fake_wr32(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };

	virtio_mmio_io(t, off, b, 4, true);
}

/* The metrics JSON's per-device counts (vdev_write_metrics), with two
 * devices as vdev_attach leaves them but without KVM: the transport over
 * the rig's drive, named, logging. The first one's guest puts its queue
 * outside guest RAM. */
START_TEST(needs_reset_in_metrics_json)
{
	struct vdev v[2];
	struct tlog l;
	struct rig r;
	char *json = NULL;
	size_t len = 0;
	FILE *f;

	tlog_open(&l);
	rig_open(&r, true);
	memset(v, 0, sizeof(v));
	for (unsigned i = 0; i < 2; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "virtio-blk%u", i);
		ck_assert_int_eq(virtio_mmio_init(&v[i].t, &virtio_blk_ops, r.blk, &r.mem, NULL, NULL, NULL), 0);
		virtio_mmio_set_log(&v[i].t, v[i].name, tlog_line, &l);
	}
	for (unsigned i = 0; i < sizeof(bad_start) / sizeof(bad_start[0]); i++)
		fake_wr32(&v[0].t, bad_start[i].reg, bad_start[i].val);
	assert_one_line(tlog_read(&l), refused_line);

	f = open_memstream(&json, &len);
	ck_assert_ptr_nonnull(f);
	vdev_write_metrics(v, 2, f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_str_eq(json, ",\"devices\":[{\"name\":\"virtio-blk0\",\"needs_reset\":1},"
			       "{\"name\":\"virtio-blk1\",\"needs_reset\":0}]");
	free(json);
	for (unsigned i = 0; i < 2; i++)
		virtio_mmio_destroy(&v[i].t);
	rig_close(&r);
	tlog_close(&l);
}
END_TEST

static Suite *hostile_mmio_suite(void)
{
	Suite *s = suite_create("hostile_mmio");
	TCase *tc = tcase_create("sweep");
	TCase *nr = tcase_create("needs_reset");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, sweep_fresh);
	tcase_add_test(tc, sweep_running);
	tcase_add_test(tc, sweep_rings_outside_ram);
	suite_add_tcase(s, tc);
	tcase_set_timeout(nr, 60);
	tcase_add_test(nr, needs_reset_logged_once_per_reset);
	tcase_add_test(nr, needs_reset_in_metrics_json);
	suite_add_tcase(s, nr);
	return s;
}

int main(void)
{
	return tvm_run_suite(hostile_mmio_suite());
}
