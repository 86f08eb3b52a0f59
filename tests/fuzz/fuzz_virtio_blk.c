/* libFuzzer target: a hostile driver against virtio-mmio + virtqueue +
 * virtio-blk. The input is a program for a small interpreter: a header
 * choosing the drive mode (in place, read-only, copy-on-write), the ring
 * layout and features, then operations that poke guest memory, write
 * descriptors, post chains, notify and access registers. Guest RAM is
 * 64 KiB; the drive is a 256 KiB memfd restored before every run.
 *
 * Beyond crashes (ASan/UBSan), it checks after every run that a
 * copy-on-write or read-only drive left the image untouched.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devices/virtio_blk.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_mmio.h"

#define RAM (64 * 1024)
#define IMG (256 * 1024)

static uint8_t *ram;
static uint8_t image0[IMG];
static int img_fd = -1;
static char img_path[64];

static void init_once(void)
{
	ram = aligned_alloc(4096, RAM);
	for (size_t i = 0; i < IMG; i++)
		image0[i] = (uint8_t)(i * 13 + (i >> 9));
	img_fd = memfd_create("fuzz-blk", MFD_CLOEXEC);
	if (!ram || img_fd < 0)
		abort();
	snprintf(img_path, sizeof(img_path), "/proc/self/fd/%d", img_fd);
}

static void restore_image(void)
{
	if (ftruncate(img_fd, IMG) || pwrite(img_fd, image0, IMG, 0) != IMG)
		abort();
}

static int image_changed(void)
{
	static uint8_t now[IMG];

	return pread(img_fd, now, IMG, 0) != IMG || memcmp(now, image0, IMG);
}

struct drv {
	struct virtio_mmio *t;
	uint16_t qsize;
	uint32_t desc, avail, used; /* ring GPAs chosen by the input */
	uint16_t avail_idx;
};

static void reg(struct virtio_mmio *t, uint64_t off, uint32_t v)
{
	uint8_t b[4] = { v, v >> 8, v >> 16, v >> 24 };
	virtio_mmio_io(t, off, b, 4, true);
}

static uint32_t reg_rd(struct virtio_mmio *t, uint64_t off)
{
	uint8_t b[4];
	virtio_mmio_io(t, off, b, 4, false);
	return b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24;
}

/* The driver init sequence of spec 3.1.1 with the input's choices. */
static void driver_init(struct drv *d, uint64_t features)
{
	struct virtio_mmio *t = d->t;
	uint32_t s = VIRTIO_CONFIG_S_ACKNOWLEDGE | VIRTIO_CONFIG_S_DRIVER;

	reg(t, VIRTIO_MMIO_STATUS, 0);
	reg(t, VIRTIO_MMIO_STATUS, s);
	reg(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	reg(t, VIRTIO_MMIO_DRIVER_FEATURES, features >> 32);
	reg(t, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	reg(t, VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)features);
	reg(t, VIRTIO_MMIO_STATUS, s | VIRTIO_CONFIG_S_FEATURES_OK);
	reg(t, VIRTIO_MMIO_QUEUE_SEL, 0);
	reg(t, VIRTIO_MMIO_QUEUE_NUM, d->qsize);
	reg(t, VIRTIO_MMIO_QUEUE_DESC_LOW, d->desc);
	reg(t, VIRTIO_MMIO_QUEUE_AVAIL_LOW, d->avail);
	reg(t, VIRTIO_MMIO_QUEUE_USED_LOW, d->used);
	reg(t, VIRTIO_MMIO_QUEUE_READY, 1);
	reg(t, VIRTIO_MMIO_STATUS, reg_rd(t, VIRTIO_MMIO_STATUS) | VIRTIO_CONFIG_S_DRIVER_OK);
	d->avail_idx = 0;
}

/* Write bytes into guest RAM the way the guest would, clipped to RAM. */
static void poke(uint64_t gpa, const void *src, size_t len)
{
	if (gpa < RAM && len <= RAM - gpa)
		memcpy(ram + gpa, src, len);
}

static void step(struct drv *d, struct in *in, uint64_t features)
{
	uint8_t op = take(in, 1);

	switch (op % 8) {
	case 0: { /* raw bytes */
		uint16_t at = take(in, 2);
		uint8_t len = take(in, 1) % 33, buf[32];
		for (unsigned i = 0; i < len; i++)
			buf[i] = take(in, 1);
		poke(at, buf, len);
		break;
	}
	case 1: { /* descriptor i of the main table; addresses mostly in RAM */
		uint16_t i = take(in, 1);
		struct vring_desc v;
		v.addr = take(in, 1) & 0x80 ? take(in, 8) : take(in, 2);
		v.len = take(in, 1) & 0x80 ? take(in, 4) : take(in, 2);
		v.flags = take(in, 1) & 7;
		v.next = take(in, 1);
		poke(d->desc + 16ull * i, &v, sizeof(v));
		break;
	}
	case 2: { /* block request header */
		uint16_t at = take(in, 2);
		struct virtio_blk_outhdr h;
		h.type = take(in, 1) & 0x80 ? take(in, 4) : take(in, 1) % 16;
		h.ioprio = 0;
		h.sector = take(in, 1) & 0x80 ? take(in, 8) : take(in, 2) % 600;
		poke(at, &h, sizeof(h));
		break;
	}
	case 3: { /* post a head */
		uint16_t head = take(in, 1) & 0x80 ? take(in, 2) : take(in, 1) % (d->qsize ? d->qsize : 1);
		if (d->qsize) {
			poke(d->avail + 4 + 2ull * (d->avail_idx % d->qsize), &head, 2);
			d->avail_idx++;
			poke(d->avail + 2, &d->avail_idx, 2);
		}
		break;
	}
	case 4:
		virtio_mmio_notify(d->t, take(in, 1) % 3);
		break;
	case 5: /* any register access, any width */
		fuzz_mmio_access(in, d->t);
		break;
	case 6:
		driver_init(d, features);
		break;
	case 7: { /* event index fields and flags */
		uint16_t v = take(in, 2);
		if (d->qsize)
			poke(d->avail + 4 + 2ull * d->qsize, &v, 2);
		poke(d->avail, &v, 2);
		break;
	}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	struct guest_mem mem;
	struct virtio_mmio t;
	struct virtio_blk *blk;
	struct drv d = { .t = &t };
	uint8_t mode, qs;
	uint64_t features;
	struct blk_opts o = { .id = "fuzz" };
	int steps = 0;

	if (!ram)
		init_once();
	restore_image();
	memset(ram, 0, RAM);
	if (gm_init_buffer(&mem, ram, RAM, NULL))
		abort();

	mode = take(&in, 1);
	o.path = img_path;
	o.read_only = mode & 1;
	o.cow = mode & 2;
	o.overlay_limit = (mode & 4) ? 16 * 1024 : 0;
	qs = take(&in, 1);
	d.qsize = qs < 0xf0 ? 1u << (qs % 9) : qs & 0xf;
	d.desc = take(&in, 2);
	d.avail = take(&in, 2);
	d.used = take(&in, 2);
	features = (uint32_t)take(&in, 4) | ((uint64_t)take(&in, 1) << 32);

	if (virtio_blk_open(&blk, &o, NULL))
		abort();
	if (virtio_mmio_init(&t, &virtio_blk_ops, blk, &mem, NULL, NULL, NULL))
		abort();
	driver_init(&d, features);
	while (in.n && steps++ < 512)
		step(&d, &in, features);
	virtio_mmio_destroy(&t);
	virtio_blk_close(blk);
	if ((o.read_only || o.cow) && image_changed())
		abort(); /* a read-only or copy-on-write base was written */
	return 0;
}
