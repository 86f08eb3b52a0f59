/* libFuzzer target: a hostile driver against virtio-mmio + virtqueue +
 * virtio-blk. The input is a program for a small interpreter: a header
 * choosing the drive mode (in place, read-only, copy-on-write; bit 3: a
 * rate limit on the input's clock), the ring layout and features, then
 * operations that poke guest memory, write descriptors, post chains,
 * notify, let time pass for the limiter and access registers. Guest RAM
 * is 64 KiB; the drive is a 256 KiB memfd restored before every run.
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

#include "devices/blk/virtio_blk.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/fuzz_mmio.h"

#define IMG (256 * 1024)

static uint8_t image0[IMG];
static int img_fd = -1;
static char img_path[64];

static void init_once(void)
{
	for (size_t i = 0; i < IMG; i++)
		image0[i] = (uint8_t)(i * 13 + (i >> 9));
	img_fd = memfd_create("fuzz-blk", MFD_CLOEXEC);
	if (img_fd < 0)
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
	struct fuzz_ring q;
	struct virtio_blk *blk;
};

/* The limiter timer's watch (one fd at most) and the queue kick. */
static fd_watch_cb timer_cb;
static void *timer_arg;

static int watch(void *ctx, int fd, uint32_t events, fd_watch_cb cb, void *arg)
{
	(void)ctx, (void)fd, (void)events;
	timer_cb = cb;
	timer_arg = arg;
	return 0;
}

static void unwatch(void *ctx, int fd)
{
	(void)ctx, (void)fd;
	timer_cb = NULL;
}

static void kick(void *ctx, unsigned q)
{
	virtio_mmio_notify(ctx, q);
}

static void step(struct drv *d, struct in *in, uint64_t features)
{
	uint8_t op = take(in, 1);

	switch (op % 8) {
	case 0: fuzz_poke_raw(in); break;
	case 1: fuzz_poke_desc(in, &d->q, 1, 65536); break;
	case 2: { /* block request header */
		uint16_t at = take(in, 2);
		struct virtio_blk_outhdr h;
		h.type = take(in, 1) & 0x80 ? take(in, 4) : take(in, 1) % 16;
		h.ioprio = 0;
		h.sector = take(in, 1) & 0x80 ? take(in, 8) : take(in, 2) % 600;
		fuzz_poke(at, &h, sizeof(h));
		break;
	}
	case 3: fuzz_post_head(in, &d->q, 1); break;
	case 4: { /* notify (queue 1 does not exist), or time passes for the limiter */
		unsigned q = take(in, 1) % 3;

		if (q == 2)
			fuzz_tick(in, virtio_blk_ops.throttle(d->blk), timer_cb, timer_arg);
		else
			virtio_mmio_notify(d->t, q);
		break;
	}
	case 5: /* any register access, any width */ fuzz_mmio_access(in, d->t); break;
	case 6: fuzz_driver_init(d->t, features, &d->q, 1); break;
	case 7: fuzz_event_idx(in, &d->q, 1); break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	struct guest_mem mem;
	struct virtio_mmio t;
	struct virtio_blk *blk;
	struct drv d = { .t = &t };
	uint8_t mode;
	uint64_t features;
	struct blk_opts o = { .id = "fuzz" };
	int steps = 0;

	if (img_fd < 0)
		init_once();
	restore_image();
	fuzz_ram_init();
	if (gm_init_buffer(&mem, fuzz_ram, FUZZ_RAM, NULL))
		abort();

	mode = take(&in, 1);
	o.path = img_path;
	o.read_only = mode & 1;
	o.cow = mode & 2;
	o.overlay_limit = (mode & 4) ? 16 * 1024 : 0;
	if (mode & 8) {
		o.limit = fuzz_limit;
		o.io = (struct fd_watch_ops){ watch, unwatch, kick, &t };
		o.clock = fuzz_clock;
		fuzz_ns = 0;
		timer_cb = NULL;
	}
	fuzz_ring_take(&in, &d.q);
	features = (uint32_t)take(&in, 4) | ((uint64_t)take(&in, 1) << 32);

	if (virtio_blk_open(&blk, &o, NULL))
		abort();
	d.blk = blk;
	if (virtio_mmio_init(&t, &virtio_blk_ops, blk, &mem, NULL, NULL, NULL))
		abort();
	fuzz_driver_init(&t, features, &d.q, 1);
	while (in.n && steps++ < 512)
		step(&d, &in, features);
	virtio_mmio_destroy(&t);
	virtio_blk_close(blk);
	if ((o.read_only || o.cow) && image_changed())
		abort(); /* a read-only or copy-on-write base was written */
	return 0;
}
