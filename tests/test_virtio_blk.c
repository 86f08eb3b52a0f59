#include <check.h>
#include <errno.h>

#include "devices/blk/blk_persist.h"
#include "devices/blk/virtio_blk.h"
#include "tests/test_blk_files.h"
#include "tests/test_throttle.h"
#include "tests/test_virtio_driver.h"
#include "tests/unit.h"
#include "vmm/vdev.h"

#define QS 64
#define SECTORS 2048 /* 1 MiB image */
#define HDR 0x80000
#define ST 0x80100
#define SEGS 0x80200
#define DATA TD_DATA
#define R 0
#define W VRING_DESC_F_WRITE
#define N VRING_DESC_F_NEXT

static struct tb tb;
static char img[128];
static struct td d;
static struct virtio_mmio t;
static struct virtio_blk *blk;

static void start(struct blk_opts o)
{
	struct tvm_err e = { 0 };

	ck_assert_msg(virtio_blk_open(&blk, &o, &e) == 0, "%s", e.msg);
	ck_assert_int_eq(virtio_mmio_init(&t, &virtio_blk_ops, blk, &d.mem, td_count_irq, &d, NULL), 0);
	ck_assert_uint_eq(td_driver_init(&d, &t, ~0ULL) & VIRTIO_CONFIG_S_DRIVER_OK, VIRTIO_CONFIG_S_DRIVER_OK);
}

static void stop(void)
{
	virtio_mmio_destroy(&t);
	virtio_blk_close(blk);
	blk = NULL;
}

static void setup(void)
{
	tb_init(&tb);
	strcpy(img, tb_image(&tb, "disk.img", SECTORS * 512));
	td_init(&d, QS);
	start((struct blk_opts){ .path = img, .id = "serial-1" });
}

static void teardown(void)
{
	if (blk)
		stop();
	td_fini(&d);
	tb_fini(&tb);
}

static void header(uint32_t type, uint64_t sector)
{
	struct virtio_blk_outhdr h = { htole32(type), 0, htole64(sector) };
	memcpy(td_ptr(&d, HDR), &h, sizeof(h));
}

static uint8_t status_byte(void)
{
	return *(uint8_t *)td_ptr(&d, ST);
}

/* Make chain 0 available, notify, check one completion; returns used len. */
static uint32_t run(void)
{
	uint16_t before = td_used_idx(&d);
	uint32_t id, len;

	*(uint8_t *)td_ptr(&d, ST) = 0xee;
	td_post(&d, 0);
	virtio_mmio_notify(&t, 0);
	ck_assert_uint_eq(td_used_idx(&d), (uint16_t)(before + 1));
	td_used(&d, before, &id, &len);
	ck_assert_uint_eq(id, 0);
	return len;
}

/* Chain 0: header at HDR, len bytes at DATA, status at ST, with the given
 * direction flags (R or W) for each. */
static void chain3(uint16_t hflags, uint32_t len, uint16_t dflags, uint16_t sflags)
{
	td_desc(&d, 0, HDR, 16, hflags | N, 1);
	td_desc(&d, 1, DATA, len, dflags | N, 2);
	td_desc(&d, 2, ST, 1, sflags, 0);
}

/* The usual layout: readable header, data (dflags), writable status. */
static uint32_t req(uint32_t type, uint64_t sector, uint32_t len, uint16_t dflags)
{
	header(type, sector);
	chain3(R, len, dflags, W);
	return run();
}

/* header + status only. */
static uint32_t req0(uint32_t type, uint64_t sector)
{
	header(type, sector);
	td_desc(&d, 0, HDR, 16, R | N, 1);
	td_desc(&d, 1, ST, 1, W, 0);
	return run();
}

static uint8_t *data(void)
{
	return td_ptr(&d, DATA);
}

static void file(uint64_t off, void *buf, size_t len)
{
	tb_read(img, off, buf, len);
}

START_TEST(config_space)
{
	uint64_t f = td_device_features(&t);
	uint8_t b;

	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_DEVICE_ID), 2);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_CONFIG), SECTORS);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_CONFIG + 4), 0);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_CONFIG + 12), VIRTIO_BLK_SEG_MAX);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_CONFIG + 20), 512);
	virtio_mmio_io(&t, VIRTIO_MMIO_CONFIG + 1, &b, 1, false);
	ck_assert_uint_eq(b, SECTORS >> 8);
	ck_assert(f & (1ULL << VIRTIO_BLK_F_FLUSH));
	ck_assert(f & (1ULL << VIRTIO_BLK_F_DISCARD));
	ck_assert(f & (1ULL << VIRTIO_BLK_F_WRITE_ZEROES));
	ck_assert(!(f & (1ULL << VIRTIO_BLK_F_RO)));
}
END_TEST

START_TEST(read_sectors)
{
	memset(data(), 0xcc, 2048);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_IN, 3, 1024, W), 1025);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_OK);
	ck_assert(tb_is_pattern(data(), 3 * 512, 1024));
	ck_assert(tb_is_fill(data() + 1024, 0xcc, 1024));
	/* The last sector. */
	ck_assert_uint_eq(req(VIRTIO_BLK_T_IN, SECTORS - 1, 512, W), 513);
	ck_assert(tb_is_pattern(data(), (SECTORS - 1) * 512, 512));
}
END_TEST

START_TEST(write_sectors)
{
	uint8_t b[1536];

	memset(data(), 0x5a, 512);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, 5, 512, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_OK);
	file(4 * 512, b, sizeof(b));
	ck_assert(tb_is_pattern(b, 4 * 512, 512));
	ck_assert(tb_is_fill(b + 512, 0x5a, 512));
	ck_assert(tb_is_pattern(b + 1024, 6 * 512, 512));
}
END_TEST

START_TEST(scatter_gather)
{
	/* Three data buffers, scattered and of different sizes. */
	header(VIRTIO_BLK_T_IN, 10);
	td_desc(&d, 0, HDR, 16, R | N, 1);
	td_desc(&d, 1, DATA + 0x3000, 512, W | N, 2);
	td_desc(&d, 2, DATA, 1024, W | N, 3);
	td_desc(&d, 3, DATA + 0x5000, 512, W | N, 4);
	td_desc(&d, 4, ST, 1, W, 0);
	ck_assert_uint_eq(run(), 2049);
	ck_assert(tb_is_pattern(data() + 0x3000, 10 * 512, 512));
	ck_assert(tb_is_pattern(data(), 11 * 512, 1024));
	ck_assert(tb_is_pattern(data() + 0x5000, 13 * 512, 512));
}
END_TEST

START_TEST(any_layout)
{
	uint8_t b[512];
	struct virtio_blk_outhdr h = { htole32(VIRTIO_BLK_T_OUT), 0, htole64(7) };

	/* OUT: header and data in one buffer. */
	memcpy(data(), &h, 16);
	memset(data() + 16, 0x42, 512);
	td_desc(&d, 0, DATA, 16 + 512, R | N, 1);
	td_desc(&d, 1, ST, 1, W, 0);
	ck_assert_uint_eq(run(), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_OK);
	file(7 * 512, b, 512);
	ck_assert(tb_is_fill(b, 0x42, 512));
	/* IN: data and status in one buffer, the header split in two. */
	header(VIRTIO_BLK_T_IN, 7);
	td_desc(&d, 0, HDR, 5, R | N, 1);
	td_desc(&d, 1, HDR + 5, 11, R | N, 2);
	td_desc(&d, 2, DATA, 513, W, 0);
	data()[512] = 0xee;
	ck_assert_uint_eq(run(), 513);
	ck_assert(tb_is_fill(data(), 0x42, 512));
	ck_assert_uint_eq(data()[512], VIRTIO_BLK_S_OK);
}
END_TEST

START_TEST(flush_and_get_id)
{
	ck_assert_uint_eq(req0(VIRTIO_BLK_T_FLUSH, 0), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_OK);
	memset(data(), 0xcc, 32);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_GET_ID, 0, VIRTIO_BLK_ID_BYTES, W), 21);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_OK);
	ck_assert_mem_eq(data(), "serial-1\0\0\0\0\0\0\0\0\0\0\0\0", 20);
	ck_assert_uint_eq(data()[20], 0xcc);
	/* A short buffer gets the start of the id. */
	ck_assert_uint_eq(req(VIRTIO_BLK_T_GET_ID, 0, 4, W), 5);
	ck_assert_mem_eq(data(), "seri", 4);
	/* A long one: 20 bytes written, used length says so. */
	ck_assert_uint_eq(req(VIRTIO_BLK_T_GET_ID, 0, 64, W), 20);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_OK);
	/* A flush carrying data is malformed. */
	ck_assert_uint_eq(req(VIRTIO_BLK_T_FLUSH, 0, 512, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
}
END_TEST

START_TEST(writable_header)
{
	memset(data(), 0xcc, 512);
	header(VIRTIO_BLK_T_IN, 0);
	chain3(W, 512, W, W);
	ck_assert_uint_eq(run(), 0);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert(tb_is_fill(data(), 0xcc, 512));
}
END_TEST

START_TEST(short_header)
{
	header(VIRTIO_BLK_T_FLUSH, 0);
	td_desc(&d, 0, HDR, 8, R | N, 1);
	td_desc(&d, 1, ST, 1, W, 0);
	ck_assert_uint_eq(run(), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
}
END_TEST

START_TEST(readable_status)
{
	uint64_t h = tb_hash(img);

	/* OUT with no writable byte at all: nothing to report into, nothing done. */
	memset(data(), 0x11, 512);
	header(VIRTIO_BLK_T_OUT, 0);
	chain3(R, 512, R, R);
	ck_assert_uint_eq(run(), 0);
	ck_assert_uint_eq(status_byte(), 0xee);
	ck_assert_uint_eq(tb_hash(img), h);
	/* IN with a readable status after writable data breaks the ring rules. */
	header(VIRTIO_BLK_T_IN, 0);
	chain3(R, 512, W, R);
	td_post(&d, 0);
	virtio_mmio_notify(&t, 0);
	ck_assert_uint_eq(td_rd(&t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET, VIRTIO_CONFIG_S_NEEDS_RESET);
	ck_assert_uint_eq(td_used_idx(&d), 1);
}
END_TEST

START_TEST(wrong_data_direction)
{
	uint64_t h = tb_hash(img);

	memset(data(), 0xcc, 512);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_IN, 0, 512, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert(tb_is_fill(data(), 0xcc, 512));
	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, 0, 512, W), 0);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(tb_hash(img), h);
}
END_TEST

START_TEST(past_capacity)
{
	uint64_t h = tb_hash(img);

	memset(data(), 0xcc, 1024);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_IN, SECTORS - 1, 1024, W), 0);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert(tb_is_fill(data(), 0xcc, 1024));
	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, SECTORS - 1, 1024, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, SECTORS, 512, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	/* sector * 512 overflows 64 bits; sector * 512 + len wraps. */
	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, UINT64_MAX / 512 + 1, 512, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, UINT64_MAX / 512, 1024, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, UINT64_MAX, 512, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(tb_hash(img), h);
}
END_TEST

START_TEST(length_not_sector_multiple)
{
	uint64_t h = tb_hash(img);

	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, 0, 513, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_IN, 0, 100, W), 0);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(tb_hash(img), h);
}
END_TEST

START_TEST(unknown_type)
{
	ck_assert_uint_eq(req0(0x1234, 0), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_UNSUPP);
	ck_assert_uint_eq(req0(VIRTIO_BLK_T_SCSI_CMD, 0), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_UNSUPP);
}
END_TEST

/* A discard/write-zeroes request with n segments from segs[]. */
static uint32_t dwz(uint32_t type, const struct virtio_blk_discard_write_zeroes *segs, unsigned n)
{
	memcpy(td_ptr(&d, SEGS), segs, n * sizeof(*segs));
	header(type, 0);
	td_desc(&d, 0, HDR, 16, R | N, 1);
	td_desc(&d, 1, SEGS, n * sizeof(*segs), R | N, 2);
	td_desc(&d, 2, ST, 1, W, 0);
	return run();
}

static struct virtio_blk_discard_write_zeroes seg(uint64_t sector, uint32_t n, uint32_t flags)
{
	return (struct virtio_blk_discard_write_zeroes){ htole64(sector), htole32(n), htole32(flags) };
}

START_TEST(write_zeroes)
{
	struct virtio_blk_discard_write_zeroes s[2] = { seg(8, 16, 0),
							seg(100, 1, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP) };
	uint8_t b[18 * 512];

	ck_assert_uint_eq(dwz(VIRTIO_BLK_T_WRITE_ZEROES, s, 2), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_OK);
	file(7 * 512, b, sizeof(b));
	ck_assert(tb_is_pattern(b, 7 * 512, 512));
	ck_assert(tb_is_fill(b + 512, 0, 16 * 512));
	ck_assert(tb_is_pattern(b + 17 * 512, 24 * 512, 512));
	file(100 * 512, b, 512);
	ck_assert(tb_is_fill(b, 0, 512));
}
END_TEST

START_TEST(discard_and_zeroes_checked)
{
	struct virtio_blk_discard_write_zeroes many[VIRTIO_BLK_DWZ_SEGS + 1], s;
	uint64_t h = tb_hash(img);

	s = seg(0, 8, 0);
	ck_assert_uint_eq(dwz(VIRTIO_BLK_T_DISCARD, &s, 1), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_OK);
	h = tb_hash(img); /* a discard may or may not change the data */
	s = seg(0, 8, VIRTIO_BLK_WRITE_ZEROES_FLAG_UNMAP);
	ck_assert_uint_eq(dwz(VIRTIO_BLK_T_DISCARD, &s, 1), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_UNSUPP);
	s = seg(0, 8, 2);
	ck_assert_uint_eq(dwz(VIRTIO_BLK_T_WRITE_ZEROES, &s, 1), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_UNSUPP);
	s = seg(0, VIRTIO_BLK_ZEROES_SECTORS + 1, 0);
	ck_assert_uint_eq(dwz(VIRTIO_BLK_T_WRITE_ZEROES, &s, 1), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	s = seg(SECTORS - 4, 8, 0);
	ck_assert_uint_eq(dwz(VIRTIO_BLK_T_WRITE_ZEROES, &s, 1), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	s = seg(UINT64_MAX / 256, 8, 0);
	ck_assert_uint_eq(dwz(VIRTIO_BLK_T_WRITE_ZEROES, &s, 1), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	for (unsigned i = 0; i <= VIRTIO_BLK_DWZ_SEGS; i++)
		many[i] = seg(i, 1, 0);
	ck_assert_uint_eq(dwz(VIRTIO_BLK_T_WRITE_ZEROES, many, VIRTIO_BLK_DWZ_SEGS + 1), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_WRITE_ZEROES, 0, 20, R), 1); /* not whole segments */
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(req0(VIRTIO_BLK_T_DISCARD, 0), 1); /* no segment */
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(tb_hash(img), h);
}
END_TEST

START_TEST(batch_one_interrupt)
{
	/* Three chains: heads 0, 3, 6, each header + data + status. */
	for (unsigned k = 0; k < 3; k++) {
		struct virtio_blk_outhdr h = { htole32(VIRTIO_BLK_T_IN), 0, htole64(k) };

		memcpy(td_ptr(&d, HDR + 32 * k), &h, 16);
		td_desc(&d, 3 * k, HDR + 32 * k, 16, R | N, 3 * k + 1);
		td_desc(&d, 3 * k + 1, DATA + 512 * k, 512, W | N, 3 * k + 2);
		td_desc(&d, 3 * k + 2, ST + k, 1, W, 0);
		td_post(&d, 3 * k);
	}
	d.irqs = 0;
	virtio_mmio_notify(&t, 0);
	ck_assert_uint_eq(td_used_idx(&d), 3);
	ck_assert_int_eq(d.irqs, 1);
	ck_assert(tb_is_pattern(data(), 0, 3 * 512));
	for (unsigned k = 0; k < 3; k++) {
		uint32_t id, len;

		td_used(&d, k, &id, &len);
		ck_assert_uint_eq(id, 3 * k);
		ck_assert_uint_eq(len, 513);
		ck_assert_uint_eq(*(uint8_t *)td_ptr(&d, ST + k), VIRTIO_BLK_S_OK);
	}
}
END_TEST

START_TEST(read_only_drive)
{
	uint64_t h = tb_hash(img), f;
	struct virtio_blk_discard_write_zeroes s = seg(0, 8, 0);

	stop();
	start((struct blk_opts){ .path = img, .read_only = true });
	f = td_device_features(&t);
	ck_assert(f & (1ULL << VIRTIO_BLK_F_RO));
	ck_assert(!(f & (1ULL << VIRTIO_BLK_F_DISCARD)));
	memset(data(), 0x77, 512);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, 0, 512, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(dwz(VIRTIO_BLK_T_WRITE_ZEROES, &s, 1), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_IOERR);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_IN, 0, 512, W), 513);
	ck_assert(tb_is_pattern(data(), 0, 512));
	ck_assert_uint_eq(req0(VIRTIO_BLK_T_FLUSH, 0), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_OK);
	ck_assert_uint_eq(tb_hash(img), h);
}
END_TEST

START_TEST(copy_on_write_drive)
{
	uint64_t h = tb_hash(img);
	struct td d2;
	struct virtio_mmio t2;
	struct virtio_blk *b2;
	struct blk_opts o = { .path = img, .cow = true, .overlay_dir = tb.dir };

	stop();
	start(o);
	ck_assert_int_eq(virtio_blk_open(&b2, &o, NULL), 0);
	td_init(&d2, QS);
	ck_assert_int_eq(virtio_mmio_init(&t2, &virtio_blk_ops, b2, &d2.mem, NULL, NULL, NULL), 0);
	td_driver_init(&d2, &t2, ~0ULL);

	memset(data(), 0x3c, 512);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, 9, 512, R), 1);
	ck_assert_uint_eq(status_byte(), VIRTIO_BLK_S_OK);
	memset(data(), 0, 4096);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_IN, 8, 4096, W), 4097);
	ck_assert(tb_is_pattern(data(), 8 * 512, 512));
	ck_assert(tb_is_fill(data() + 512, 0x3c, 512));
	ck_assert(tb_is_pattern(data() + 1024, 10 * 512, 3072));
	ck_assert_uint_eq(tb_hash(img), h);

	/* The other VM over the same image sees none of it. */
	{
		struct virtio_blk_outhdr hd = { htole32(VIRTIO_BLK_T_IN), 0, htole64(9) };

		memcpy(td_ptr(&d2, HDR), &hd, 16);
		td_desc(&d2, 0, HDR, 16, R | N, 1);
		td_desc(&d2, 1, DATA, 512, W | N, 2);
		td_desc(&d2, 2, ST, 1, W, 0);
		td_post(&d2, 0);
		virtio_mmio_notify(&t2, 0);
		ck_assert_uint_eq(td_used_idx(&d2), 1);
		ck_assert(tb_is_pattern(td_ptr(&d2, DATA), 9 * 512, 512));
	}
	virtio_mmio_destroy(&t2);
	virtio_blk_close(b2);
	td_fini(&d2);
}
END_TEST

/* Bytes collected from blk_map_encode. */
struct bytes {
	uint8_t p[256];
	size_t n;
};

static void put_bytes(void *ctx, const void *p, size_t n)
{
	struct bytes *b = ctx;

	ck_assert_uint_le(b->n + n, sizeof(b->p));
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

/* The snapshot hooks: the VMM finds the drive by its transport's type, and
 * a copy-on-write drive's blocks and map go through a data file and the
 * encoded map into a fresh drive over the same image. */
START_TEST(snapshot_hooks)
{
	struct blk_opts o = { .path = img, .cow = true, .overlay_dir = tb.dir };
	struct virtio_mmio other = { 0 };
	struct bytes enc = { .n = 0 };
	const uint64_t *map;
	uint64_t *back, n, words = blk_map_words(SECTORS * 512);
	struct virtio_blk *b2;
	int fd;

	ck_assert_ptr_eq(virtio_blk_of(&t), blk);
	ck_assert_ptr_null(virtio_blk_of(&other));
	ck_assert_uint_eq(virtio_blk_size(blk), SECTORS * 512);
	ck_assert_uint_eq(words, SECTORS * 512 / 4096 / 64);
	ck_assert_int_eq(virtio_blk_save_blocks(blk, -1, &map, &n), -EINVAL); /* not copy-on-write */

	stop();
	start(o);
	memset(data(), 0x5a, 512);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_OUT, 17, 512, R), 1);
	fd = open(tb_file(&tb, "disk0"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(virtio_blk_save_blocks(blk, fd, &map, &n), 0);
	ck_assert_uint_eq(n, words);
	ck_assert_uint_eq(map[0], 1u << 2); /* sector 17 is in block 2 */
	blk_map_encode(map, n, put_bytes, &enc);
	ck_assert_uint_eq(enc.n, 8 + 8 * words);
	ck_assert_uint_eq(enc.p[0], words);
	ck_assert_uint_eq(enc.p[8], 1u << 2);

	ck_assert_int_eq(blk_map_decode(enc.p, enc.n, words - 1, &back, &n), -EINVAL);
	ck_assert_ptr_null(back);
	ck_assert_int_eq(blk_map_decode(enc.p, enc.n - 1, words, &back, &n), -EINVAL);
	ck_assert_int_eq(blk_map_decode(enc.p, 7, words, &back, &n), -EINVAL);
	ck_assert_int_eq(blk_map_decode(enc.p, enc.n, words, &back, &n), 0);
	ck_assert_uint_eq(n, words);
	ck_assert_int_eq(virtio_blk_open(&b2, &o, NULL), 0);
	ck_assert_int_eq(virtio_blk_restore_blocks(b2, fd, back, n), 0);
	free(back);
	close(fd);
	stop();
	blk = b2;
	ck_assert_int_eq(virtio_mmio_init(&t, &virtio_blk_ops, blk, &d.mem, td_count_irq, &d, NULL), 0);
	td_driver_init(&d, &t, ~0ULL);
	memset(data(), 0, 1024);
	ck_assert_uint_eq(req(VIRTIO_BLK_T_IN, 16, 1024, W), 1025);
	ck_assert(tb_is_pattern(data(), 16 * 512, 512));
	ck_assert(tb_is_fill(data() + 512, 0x5a, 512));
}
END_TEST

START_TEST(open_errors)
{
	struct virtio_blk *b;
	struct tvm_err e = { 0 };

	ck_assert_int_eq(virtio_blk_open(&b, &(struct blk_opts){ .path = img, .id = "123456789012345678901" }, &e),
			 -EINVAL);
	ck_assert_ptr_null(b);
	ck_assert_ptr_nonnull(strstr(e.msg, "longer than 20"));
	ck_assert_int_eq(virtio_blk_open(&b, &(struct blk_opts){ .path = "/nonexistent.img" }, &e), -ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, "drive /nonexistent.img"));
	/* Already open for writing by the fixture. */
	ck_assert_int_eq(virtio_blk_open(&b, &(struct blk_opts){ .path = img }, &e), -EBUSY);
}
END_TEST

/* ---- rate limit: a hostile or just busy driver against a limited drive ---- */

static struct tw lw; /* the limiter timer's watch; its callback is run by hand (tt_fire) */

static struct vq_throttle *thr(void)
{
	return virtio_blk_ops.throttle(blk);
}

static struct blk_opts limited_opts(struct tvm_rate_limit lim)
{
	memset(&lw, 0, sizeof(lw));
	lw.t = &t;
	return (struct blk_opts){
		.path = img, .limit = lim, .io = { tw_watch, tw_unwatch, tw_kick, &lw }, .clock = tt_clock
	};
}

static void start_limited(struct tvm_rate_limit lim)
{
	stop();
	tt_now = 0;
	start(limited_opts(lim));
}

/* Reset the device and start the driver again on empty rings. */
static void restart_driver(void)
{
	memset(d.ram + TD_AVAIL, 0, 0x20000);
	d.avail_idx = 0;
	td_driver_init(&d, &t, ~0ULL);
}

static uint64_t req_hdr(unsigned k)
{
	return HDR + 32ull * k;
}

/* Read request k (descriptors 3k..3k+2; its own header, status byte at ST
 * + k and data buffer at DATA + k * 64 KiB, filled with 0xcc) of len
 * bytes from sector, made available; the driver notifies when asked. */
static void post_read(unsigned k, uint64_t sector, uint32_t len, bool notify)
{
	struct virtio_blk_outhdr h = { htole32(VIRTIO_BLK_T_IN), 0, htole64(sector) };
	uint64_t buf = DATA + 0x10000ull * k;

	memcpy(td_ptr(&d, req_hdr(k)), &h, sizeof(h));
	*(uint8_t *)td_ptr(&d, ST + k) = 0xee;
	memset(td_ptr(&d, buf), 0xcc, len);
	td_desc(&d, 3 * k, req_hdr(k), 16, R | N, 3 * k + 1);
	td_desc(&d, 3 * k + 1, buf, len, W | N, 3 * k + 2);
	td_desc(&d, 3 * k + 2, ST + k, 1, W, 0);
	td_post(&d, 3 * k);
	if (notify)
		virtio_mmio_notify(&t, 0);
}

/* Request k was served: status OK and the image's bytes in its buffer. */
static void expect_read(unsigned k, uint64_t sector, uint32_t len)
{
	ck_assert_uint_eq(*(uint8_t *)td_ptr(&d, ST + k), VIRTIO_BLK_S_OK);
	ck_assert(tb_is_pattern(td_ptr(&d, DATA + 0x10000ull * k), sector * 512, len));
}

/* ... and request k was not touched at all. */
static void expect_untouched(unsigned k, uint32_t len)
{
	ck_assert_uint_eq(*(uint8_t *)td_ptr(&d, ST + k), 0xee);
	ck_assert(tb_is_fill(td_ptr(&d, DATA + 0x10000ull * k), 0xcc, len));
}

/* 4 KiB per second: the bucket's 4 KiB pass, the next request stays on the
 * ring (not popped, its buffers untouched) and the queue stops; the
 * timer, set for when the tokens are back, runs it; the driver's own
 * notifications meanwhile change nothing. */
START_TEST(limit_holds_request_on_ring)
{
	struct vq_throttle_stats st;

	start_limited((struct tvm_rate_limit){ .bytes = { .size = 4096, .refill_ms = 1000 } });
	ck_assert(tw_watched(&lw, thr()->fd, NULL)); /* watched from DRIVER_OK on */
	post_read(0, 0, 4096, false);
	post_read(1, 8, 4096, false);
	post_read(2, 16, 4096, true);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	expect_read(0, 0, 4096);
	expect_untouched(1, 4096);
	expect_untouched(2, 4096);
	ck_assert_uint_eq(t.vqs[0].last_avail, 1); /* given back: still available */
	ck_assert(tt_armed(thr()));
	virtio_mmio_notify(&t, 0);
	virtio_mmio_notify(&t, 0);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	ck_assert(!t.vqs[0].broken);

	tt_now = 999 * TT_MS; /* early (a timer may fire late, never early: still, nothing moves) */
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 1);
	ck_assert_int_eq(lw.kicks[0], 0);
	tt_now = 1000 * TT_MS;
	tt_fire(&lw, thr());
	ck_assert_int_eq(lw.kicks[0], 1);
	ck_assert_uint_eq(td_used_idx(&d), 2);
	expect_read(1, 8, 4096);
	expect_untouched(2, 4096);
	tt_now = 2000 * TT_MS;
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 3);
	expect_read(2, 16, 4096);
	ck_assert(!tt_armed(thr()));
	vq_throttle_stats(thr(), 0, &st);
	ck_assert_str_eq(st.name, "io");
	ck_assert_uint_eq(st.throttled, 2);
	ck_assert_uint_eq(st.throttled_ns, 2 * TT_S);
}
END_TEST

/* Two requests per second, whatever their size. */
START_TEST(limit_requests)
{
	start_limited((struct tvm_rate_limit){ .ops = { .size = 2 } });
	for (unsigned k = 0; k < 5; k++)
		post_read(k, k, 512, false);
	virtio_mmio_notify(&t, 0);
	ck_assert_uint_eq(td_used_idx(&d), 2);
	expect_untouched(2, 512);
	tt_now = 500 * TT_MS;
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 3);
	tt_now = 1000 * TT_MS;
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 4);
	tt_now = 1500 * TT_MS;
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 5);
	for (unsigned k = 0; k < 5; k++)
		expect_read(k, k, 512);
}
END_TEST

/* A request larger than the bucket passes at once; then the drive owes
 * what it overdrew: the next one waits for the debt and itself. */
START_TEST(limit_oversized_request_passes_then_owes)
{
	start_limited((struct tvm_rate_limit){ .bytes = { .size = 4096 } });
	post_read(0, 0, 16384, true);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	expect_read(0, 0, 16384);
	post_read(1, 64, 512, true);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	tt_now = 3124 * TT_MS;
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 1);
	tt_now = 3125 * TT_MS; /* (12 KiB owed + 512) at 4 KiB/s */
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 2);
	expect_read(1, 64, 512);
}
END_TEST

/* A write of zeroes is admitted for its 16-byte segment, then pays for
 * the 8 KiB it zeroed: the next read waits for that debt (without the
 * charge, one request could zero GiBs under bw=). */
START_TEST(limit_write_zeroes_pays_its_range)
{
	struct virtio_blk_discard_write_zeroes s = seg(0, 16, 0);

	start_limited((struct tvm_rate_limit){ .bytes = { .size = 4096 } });
	ck_assert_uint_eq(dwz(VIRTIO_BLK_T_WRITE_ZEROES, &s, 1), 1);
	ck_assert_uint_eq(*(uint8_t *)td_ptr(&d, ST), VIRTIO_BLK_S_OK);
	post_read(1, 64, 512, true);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	expect_untouched(1, 512);
	tt_now = 1000 * TT_MS; /* 4 KiB back: still in debt */
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 1);
	tt_now = 2000 * TT_MS; /* 16 + 8192 - 4096 owed, + 512, at 4 KiB/s: 1.13 s */
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 2);
	expect_read(1, 64, 512);
}
END_TEST

/* A driver that breaks its ring behind a held request: when the timer runs
 * the queue, the held request is served and the broken chain breaks the
 * queue (NEEDS_RESET), nothing else; after a reset the drive works, still
 * limited, and no stale timer runs the new queue. */
START_TEST(limit_broken_chain_under_throttling)
{
	start_limited((struct tvm_rate_limit){ .bytes = { .size = 4096 } });
	post_read(0, 0, 4096, false);
	post_read(1, 8, 4096, true);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	td_post(&d, QS + 3); /* head out of the table */
	virtio_mmio_notify(&t, 0);
	ck_assert(!t.vqs[0].broken); /* held: not even looked at yet */
	tt_now = 1 * TT_S;
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 2);
	expect_read(1, 8, 4096);
	ck_assert(t.vqs[0].broken);
	ck_assert(td_rd(&t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET);

	restart_driver(); /* the driver resets and starts again */
	ck_assert(!(td_rd(&t, VIRTIO_MMIO_STATUS) & VIRTIO_CONFIG_S_NEEDS_RESET));
	post_read(2, 16, 4096, true); /* the bucket is empty since the last read */
	ck_assert_uint_eq(td_used_idx(&d), 0);
	td_driver_init(&d, &t, ~0ULL); /* a reset forgets the held request's timer */
	tt_now = 2 * TT_S;
	tt_fire(&lw, thr());
	ck_assert_int_eq(lw.kicks[0], 1);
	restart_driver();
	post_read(3, 24, 4096, true);
	ck_assert_uint_eq(td_used_idx(&d), 1);
	expect_read(3, 24, 4096);
}
END_TEST

/* A fresh drive with limit lim takes the saved blob, then a driver starts
 * on fresh rings. */
static void restore_limited(struct tvm_rate_limit lim, const uint8_t *blob, size_t n)
{
	struct blk_opts o = limited_opts(lim);

	stop();
	ck_assert_int_eq(virtio_blk_open(&blk, &o, NULL), 0);
	ck_assert_int_eq(virtio_blk_ops.restore(blk, blob, n), 0);
	ck_assert_int_eq(virtio_mmio_init(&t, &virtio_blk_ops, blk, &d.mem, td_count_irq, &d, NULL), 0);
	restart_driver();
}

/* The device's blob is its limiter: none without a limit; given back to
 * a fresh drive it keeps the debt; a drive given limits of its own keeps
 * them (the saved state only when they are the same). */
START_TEST(limit_saved_and_restored)
{
	struct tvm_rate_limit lim = { .bytes = { .size = 4096 } }, other = { .bytes = { .size = 8192 } };
	uint8_t blob[256], bad[256];
	long n;

	ck_assert_int_eq(virtio_blk_ops.save(blk, blob, sizeof(blob)), 0);
	start_limited(lim);
	post_read(0, 0, 12288, true); /* 8 KiB owed: 2 s */
	n = virtio_blk_ops.save(blk, blob, sizeof(blob));
	ck_assert_int_eq(n, 8 + LIMITER_STATE_LEN);
	ck_assert_int_eq(virtio_blk_ops.save(blk, blob, (size_t)n - 1), -ENOSPC);

	/* A drive opened without a limit takes the saved one, debt and all. */
	start_limited((struct tvm_rate_limit){ 0 });
	ck_assert_int_eq(thr()->fd, -1);
	restore_limited((struct tvm_rate_limit){ 0 }, blob, (size_t)n);
	post_read(1, 8, 512, true);
	ck_assert_uint_eq(td_used_idx(&d), 0);
	tt_now = 2125 * TT_MS;
	tt_fire(&lw, thr());
	ck_assert_uint_eq(td_used_idx(&d), 1);

	/* Same limits given: same state (held); other limits: theirs, full. */
	for (int same = 1; same >= 0; same--) {
		tt_now = 0;
		restore_limited(same ? lim : other, blob, (size_t)n);
		post_read(2, 0, 8192, true);
		ck_assert_uint_eq(td_used_idx(&d), same ? 0 : 1);
	}

	/* Malformed: other length, format, count, or a bucket state no bucket has. */
	ck_assert_int_eq(virtio_blk_ops.restore(blk, blob, (size_t)n - 1), -EINVAL);
	memcpy(bad, blob, (size_t)n);
	bad[0] = 2;
	ck_assert_int_eq(virtio_blk_ops.restore(blk, bad, (size_t)n), -EINVAL);
	memcpy(bad, blob, (size_t)n);
	bad[4] = 2;
	ck_assert_int_eq(virtio_blk_ops.restore(blk, bad, (size_t)n), -EINVAL);
	memcpy(bad, blob, (size_t)n);
	bad[8 + 24] = 0xff; /* budget over the size */
	bad[8 + 25] = 0xff;
	ck_assert_int_eq(virtio_blk_ops.restore(blk, bad, (size_t)n), -EINVAL);
}
END_TEST

/* The metrics JSON gives each limiter's held requests and time. */
START_TEST(limit_in_metrics_json)
{
	struct vdev v[1];
	char *json = NULL;
	size_t len = 0;
	FILE *f;

	start_limited((struct tvm_rate_limit){ .ops = { .size = 1 } });
	post_read(0, 0, 512, false);
	post_read(1, 1, 512, true);
	tt_now = 250 * TT_MS;
	memset(v, 0, sizeof(v));
	snprintf(v[0].name, sizeof(v[0].name), "virtio-blk0");
	v[0].t = t; /* a copy of the transport, for its ops and device */
	v[0].t_ready = true;
	f = open_memstream(&json, &len);
	ck_assert_ptr_nonnull(f);
	vdev_write_metrics(v, 1, f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_str_eq(json, ",\"devices\":[{\"name\":\"virtio-blk0\",\"needs_reset\":0,"
			       "\"limiters\":{\"io\":{\"throttled\":1,\"throttled_us\":250000}}}]");
	free(json);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("virtio_blk");
	TCase *tc = tcase_create("requests");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, config_space);
	tcase_add_test(tc, read_sectors);
	tcase_add_test(tc, write_sectors);
	tcase_add_test(tc, scatter_gather);
	tcase_add_test(tc, any_layout);
	tcase_add_test(tc, flush_and_get_id);
	tcase_add_test(tc, writable_header);
	tcase_add_test(tc, short_header);
	tcase_add_test(tc, readable_status);
	tcase_add_test(tc, wrong_data_direction);
	tcase_add_test(tc, past_capacity);
	tcase_add_test(tc, length_not_sector_multiple);
	tcase_add_test(tc, unknown_type);
	tcase_add_test(tc, write_zeroes);
	tcase_add_test(tc, discard_and_zeroes_checked);
	tcase_add_test(tc, batch_one_interrupt);
	tcase_add_test(tc, read_only_drive);
	tcase_add_test(tc, copy_on_write_drive);
	tcase_add_test(tc, open_errors);
	tcase_add_test(tc, snapshot_hooks);
	suite_add_tcase(s, tc);
	tc = tcase_create("rate_limit");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, limit_holds_request_on_ring);
	tcase_add_test(tc, limit_requests);
	tcase_add_test(tc, limit_oversized_request_passes_then_owes);
	tcase_add_test(tc, limit_write_zeroes_pays_its_range);
	tcase_add_test(tc, limit_broken_chain_under_throttling);
	tcase_add_test(tc, limit_saved_and_restored);
	tcase_add_test(tc, limit_in_metrics_json);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
