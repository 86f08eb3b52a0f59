#include <check.h>
#include <errno.h>
#include <sys/stat.h>

#include "devices/blk/blk_image.h"
#include "tests/test_blk_files.h"
#include "tests/unit.h"

#define SIZE (64 * 1024)
#define B BLK_COW_BLOCK

static struct tb tb;
static char img[128];
static struct blk_image im, im2;
static uint8_t buf[4 * B], out[4 * B];

static void setup(void)
{
	tb_init(&tb);
	strcpy(img, tb_image(&tb, "disk.img", SIZE));
	im.fd = im2.fd = -1;
}

static void teardown(void)
{
	blk_image_close(&im);
	blk_image_close(&im2);
	tb_fini(&tb);
}

static int rd(struct blk_image *m, uint64_t off, void *p, size_t len)
{
	struct iovec v = { p, len };
	return blk_image_read(m, &v, 1, off);
}

static int wr(struct blk_image *m, uint64_t off, uint8_t fill, size_t len)
{
	struct iovec v = { buf, len };

	memset(buf, fill, len);
	return blk_image_write(m, &v, 1, off);
}

static void open_cow(struct blk_image *m, uint64_t limit)
{
	struct blk_opts o = { .path = img, .cow = true, .overlay_dir = tb.dir, .overlay_limit = limit };
	struct tvm_err e = { 0 };

	ck_assert_msg(blk_image_open(m, &o, &e) == 0, "%s", e.msg);
}

START_TEST(open_errors)
{
	struct tvm_err e = { 0 };
	struct blk_opts o = { .path = tb_file(&tb, "missing.img") };
	int fd;

	ck_assert_int_eq(blk_image_open(&im, &o, &e), -ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, "drive "));
	ck_assert_ptr_nonnull(strstr(e.msg, "missing.img: cannot open"));
	o.path = tb_image(&tb, "odd.img", 1000);
	ck_assert_int_eq(blk_image_open(&im, &o, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "1000 bytes is not a positive multiple of 512"));
	fd = open(tb_file(&tb, "empty.img"), O_CREAT | O_RDWR, 0600);
	close(fd);
	o.path = tb.path;
	ck_assert_int_eq(blk_image_open(&im, &o, &e), -EINVAL);
	o = (struct blk_opts){ .path = img, .cow = true, .overlay_dir = "/nonexistent/dir" };
	ck_assert_int_eq(blk_image_open(&im, &o, &e), -ENOENT);
	ck_assert_ptr_nonnull(strstr(e.msg, "overlay"));
	ck_assert_int_eq(im.fd, -1);
}
END_TEST

START_TEST(locking)
{
	struct blk_opts rw = { .path = img }, ro = { .path = img, .read_only = true };
	struct tvm_err e = { 0 };

	ck_assert_int_eq(blk_image_open(&im, &rw, NULL), 0);
	ck_assert_int_eq(blk_image_open(&im2, &rw, &e), -EBUSY);
	ck_assert_ptr_nonnull(strstr(e.msg, "in use"));
	ck_assert_int_eq(blk_image_open(&im2, &ro, NULL), -EBUSY);
	blk_image_close(&im);
	/* Readers share. */
	ck_assert_int_eq(blk_image_open(&im, &ro, NULL), 0);
	open_cow(&im2, 0);
}
END_TEST

START_TEST(raw_read_write)
{
	struct blk_opts o = { .path = img };
	struct iovec v[2] = { { out, 100 }, { out + 100, 412 } };

	ck_assert_int_eq(blk_image_open(&im, &o, NULL), 0);
	ck_assert_uint_eq(im.size, SIZE);
	ck_assert_int_eq(blk_image_read(&im, v, 2, 1024), 0);
	ck_assert(tb_is_pattern(out, 1024, 512));
	ck_assert_int_eq(wr(&im, 2048, 0x5a, 1024), 0);
	tb_read(img, 2048, out, 1024);
	ck_assert(tb_is_fill(out, 0x5a, 1024));
	tb_read(img, 2048 + 1024, out, 1);
	ck_assert(tb_is_pattern(out, 3072, 1));
}
END_TEST

START_TEST(range_checked)
{
	struct blk_opts o = { .path = img };
	uint64_t h = tb_hash(img);

	ck_assert_int_eq(blk_image_open(&im, &o, NULL), 0);
	ck_assert_int_eq(wr(&im, SIZE - 512, 1, 1024), -ERANGE);
	ck_assert_int_eq(wr(&im, SIZE + 512, 1, 512), -ERANGE);
	ck_assert_int_eq(wr(&im, UINT64_MAX - 255, 1, 512), -ERANGE);
	ck_assert_int_eq(rd(&im, SIZE, out, 1), -ERANGE);
	ck_assert_int_eq(rd(&im, SIZE, out, 0), 0);
	ck_assert_int_eq(blk_image_write_zeroes(&im, SIZE - 512, 1024), -ERANGE);
	ck_assert_int_eq(blk_image_discard(&im, UINT64_MAX - 511, 1024), -ERANGE);
	ck_assert_uint_eq(tb_hash(img), h);
}
END_TEST

START_TEST(read_only)
{
	struct blk_opts o = { .path = img, .read_only = true, .cow = true };
	uint64_t h = tb_hash(img);

	ck_assert_int_eq(blk_image_open(&im, &o, NULL), 0);
	ck_assert(!im.cow); /* read-only wins */
	ck_assert_int_eq(wr(&im, 0, 1, 512), -EROFS);
	ck_assert_int_eq(blk_image_write_zeroes(&im, 0, 512), -EROFS);
	ck_assert_int_eq(blk_image_discard(&im, 0, 512), -EROFS);
	ck_assert_int_eq(blk_image_flush(&im), 0);
	ck_assert_int_eq(rd(&im, 512, out, 512), 0);
	ck_assert(tb_is_pattern(out, 512, 512));
	ck_assert_uint_eq(tb_hash(img), h);
}
END_TEST

START_TEST(raw_zeroes_and_discard)
{
	struct blk_opts o = { .path = img };

	ck_assert_int_eq(blk_image_open(&im, &o, NULL), 0);
	ck_assert_int_eq(blk_image_write_zeroes(&im, 1024, 3 * 512), 0);
	tb_read(img, 512, out, 3 * 1024);
	ck_assert(tb_is_pattern(out, 512, 512));
	ck_assert(tb_is_fill(out + 512, 0, 3 * 512));
	ck_assert(tb_is_pattern(out + 2048, 2560, 512));
	ck_assert_int_eq(blk_image_discard(&im, 8192, 8192), 0);
	ck_assert_int_eq(blk_image_flush(&im), 0);
}
END_TEST

START_TEST(cow_base_untouched)
{
	uint64_t h = tb_hash(img);

	open_cow(&im, 0);
	ck_assert_int_eq(wr(&im, 0, 0x11, B), 0);
	ck_assert_int_eq(wr(&im, SIZE - 512, 0x22, 512), 0);
	ck_assert_int_eq(blk_image_write_zeroes(&im, 3 * B, 2 * B), 0);
	ck_assert_int_eq(blk_image_discard(&im, 0, SIZE), 0);
	ck_assert_int_eq(blk_image_flush(&im), 0);
	ck_assert_uint_eq(tb_hash(img), h);
	/* Opened read-only: even a bug could not write it. */
	ck_assert_int_eq(fcntl(im.fd, F_GETFL) & O_ACCMODE, O_RDONLY);
	/* The overlay is unnamed: the directory holds only the image. */
	{
		DIR *dir = opendir(tb.dir);
		int files = 0;

		while (readdir(dir))
			files++;
		closedir(dir);
		ck_assert_int_eq(files, 3); /* ".", "..", disk.img */
	}
}
END_TEST

START_TEST(cow_reads_mix_overlay_and_base)
{
	open_cow(&im, 0);
	ck_assert_int_eq(wr(&im, B, 0x33, B), 0);
	/* Blocks 0 (base), 1 (overlay), 2 (base) in one read, unaligned ends. */
	ck_assert_int_eq(rd(&im, 512, out, 3 * B - 1024), 0);
	ck_assert(tb_is_pattern(out, 512, B - 512));
	ck_assert(tb_is_fill(out + B - 512, 0x33, B));
	ck_assert(tb_is_pattern(out + 2 * B - 512, 2 * B, B - 512));
}
END_TEST

START_TEST(cow_partial_block_keeps_rest)
{
	open_cow(&im, 0);
	ck_assert_int_eq(wr(&im, 2 * B + 1024, 0x44, 512), 0);
	ck_assert_uint_eq(im.in_overlay, 1);
	ck_assert_int_eq(rd(&im, 2 * B, out, B), 0);
	ck_assert(tb_is_pattern(out, 2 * B, 1024));
	ck_assert(tb_is_fill(out + 1024, 0x44, 512));
	ck_assert(tb_is_pattern(out + 1536, 2 * B + 1536, B - 1536));
	/* A write straddling two blocks copies up both edges. */
	ck_assert_int_eq(wr(&im, 5 * B - 512, 0x55, 1024), 0);
	ck_assert_int_eq(rd(&im, 4 * B, out, 2 * B), 0);
	ck_assert(tb_is_pattern(out, 4 * B, B - 512));
	ck_assert(tb_is_fill(out + B - 512, 0x55, 1024));
	ck_assert(tb_is_pattern(out + B + 512, 5 * B + 512, B - 512));
}
END_TEST

START_TEST(cow_two_drives_isolated)
{
	open_cow(&im, 0);
	open_cow(&im2, 0);
	ck_assert_int_eq(wr(&im, 0, 0x66, 512), 0);
	ck_assert_int_eq(wr(&im2, 512, 0x77, 512), 0);
	ck_assert_int_eq(rd(&im, 0, out, 1024), 0);
	ck_assert(tb_is_fill(out, 0x66, 512));
	ck_assert(tb_is_pattern(out + 512, 512, 512));
	ck_assert_int_eq(rd(&im2, 0, out, 1024), 0);
	ck_assert(tb_is_pattern(out, 0, 512));
	ck_assert(tb_is_fill(out + 512, 0x77, 512));
}
END_TEST

START_TEST(cow_limit)
{
	open_cow(&im, 2 * B + 100); /* two blocks */
	ck_assert_int_eq(wr(&im, 0, 1, 512), 0);
	ck_assert_int_eq(wr(&im, B, 2, B), 0);
	ck_assert_int_eq(wr(&im, 2 * B, 3, 512), -ENOSPC);
	ck_assert_int_eq(wr(&im, B + 512, 4, B), -ENOSPC); /* reaches block 2 */
	ck_assert_int_eq(blk_image_write_zeroes(&im, 2 * B, B), -ENOSPC);
	ck_assert_uint_eq(im.in_overlay, 2);
	/* Nothing of the refused writes is visible. */
	ck_assert_int_eq(rd(&im, B, out, 2 * B), 0);
	ck_assert(tb_is_fill(out, 2, B));
	ck_assert(tb_is_pattern(out + B, 2 * B, B));
	/* Blocks already in the overlay can be rewritten. */
	ck_assert_int_eq(wr(&im, 0, 5, B), 0);
	/* Discarding gives blocks back. */
	ck_assert_int_eq(blk_image_discard(&im, 0, B), 0);
	ck_assert_uint_eq(im.in_overlay, 1);
	ck_assert_int_eq(wr(&im, 2 * B, 3, 512), 0);
}
END_TEST

/* Without a limit given the overlay may hold the drive's size, counted
 * like any limit, and takes no more of the host's disk than that. */
START_TEST(cow_default_limit_is_the_drive)
{
	struct stat st;

	open_cow(&im, 0);
	ck_assert_uint_eq(im.limit_blocks, im.nblocks);
	for (uint64_t off = 0; off < SIZE; off += B)
		ck_assert_int_eq(wr(&im, off, 9, B), 0);
	ck_assert_uint_eq(im.in_overlay, SIZE / B);
	ck_assert_int_eq(fstat(im.ofd, &st), 0);
	ck_assert_uint_le((uint64_t)st.st_blocks * 512, SIZE);
}
END_TEST

START_TEST(cow_write_zeroes)
{
	open_cow(&im, 0);
	ck_assert_int_eq(blk_image_write_zeroes(&im, B + 512, B), 0);
	ck_assert_int_eq(rd(&im, B, out, 2 * B), 0);
	ck_assert(tb_is_pattern(out, B, 512));
	ck_assert(tb_is_fill(out + 512, 0, B));
	ck_assert(tb_is_pattern(out + B + 512, 2 * B + 512, B - 512));
}
END_TEST

START_TEST(cow_discard)
{
	open_cow(&im, 0);
	ck_assert_int_eq(wr(&im, 0, 9, 4 * B), 0);
	ck_assert_uint_eq(im.in_overlay, 4);
	/* Only blocks wholly inside the range are dropped: 1 and 2. */
	ck_assert_int_eq(blk_image_discard(&im, 512, 3 * B), 0);
	ck_assert_uint_eq(im.in_overlay, 2);
	ck_assert_int_eq(rd(&im, 0, out, 3 * B), 0);
	ck_assert(tb_is_fill(out, 9, B));
	ck_assert(tb_is_pattern(out + B, B, 2 * B));
}
END_TEST

START_TEST(cow_short_last_block)
{
	uint64_t size = 3 * B + 512;

	strcpy(img, tb_image(&tb, "short.img", size));
	open_cow(&im, 0);
	ck_assert_uint_eq(im.nblocks, 4);
	ck_assert_int_eq(wr(&im, size - 512, 0x88, 512), 0);
	ck_assert_int_eq(wr(&im, 3 * B - 512, 0x99, 512), 0);
	ck_assert_int_eq(rd(&im, 2 * B, out, B + 512), 0);
	ck_assert(tb_is_pattern(out, 2 * B, B - 512));
	ck_assert(tb_is_fill(out + B - 512, 0x99, 512));
	ck_assert(tb_is_fill(out + B, 0x88, 512));
	/* Discarding up to the end covers the short block. */
	ck_assert_int_eq(blk_image_discard(&im, 3 * B, 512), 0);
	ck_assert_uint_eq(im.in_overlay, 1);
}
END_TEST

START_TEST(cow_kept_overlay)
{
	char ov[160];
	struct blk_opts o = { .path = img, .cow = true };
	struct tvm_err e = { 0 };
	struct stat st;

	snprintf(ov, sizeof(ov), "%s/overlay.img", tb.dir);
	o.overlay_path = ov;
	ck_assert_int_eq(blk_image_open(&im, &o, NULL), 0);
	ck_assert_int_eq(wr(&im, B, 0xab, 512), 0);
	ck_assert_int_eq(blk_image_flush(&im), 0);
	blk_image_close(&im);
	ck_assert_int_eq(stat(ov, &st), 0);
	ck_assert_int_eq(st.st_size, SIZE);
	tb_read(ov, B, out, 512);
	ck_assert(tb_is_fill(out, 0xab, 512));
	/* Never clobbered. */
	ck_assert_int_eq(blk_image_open(&im, &o, &e), -EEXIST);
	ck_assert_ptr_nonnull(strstr(e.msg, "overlay.img"));
}
END_TEST

/* A copy-on-write drive larger than its image: the image's bytes, then
 * zeros until written; a block straddling the image's end keeps its
 * image part when partly written; the image is never written. */
START_TEST(cow_grown)
{
	uint64_t base = 3 * B + 512, size = 8 * B, h;
	struct blk_opts o = { .cow = true, .overlay_dir = tb.dir, .size = size };
	struct tvm_err e = { 0 };

	strcpy(img, tb_image(&tb, "small.img", base));
	h = tb_hash(img);
	o.path = img;
	ck_assert_msg(blk_image_open(&im, &o, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(im.size, size);
	ck_assert_uint_eq(im.base_size, base);
	ck_assert_uint_eq(im.nblocks, 8);
	/* One read across the image's end: pattern, then zeros. */
	memset(out, 0xee, sizeof(out));
	ck_assert_int_eq(rd(&im, 2 * B, out, 2 * B), 0);
	ck_assert(tb_is_pattern(out, 2 * B, B + 512));
	ck_assert(tb_is_fill(out + B + 512, 0, B - 512));
	/* Wholly past the end. */
	memset(out, 0xee, sizeof(out));
	ck_assert_int_eq(rd(&im, 6 * B, out, 2 * B), 0);
	ck_assert(tb_is_fill(out, 0, 2 * B));
	/* 512 bytes into the straddling block, past the image's part. */
	ck_assert_int_eq(wr(&im, 3 * B + 1024, 0x5a, 512), 0);
	ck_assert_int_eq(rd(&im, 3 * B, out, B), 0);
	ck_assert(tb_is_pattern(out, 3 * B, 512));
	ck_assert(tb_is_fill(out + 512, 0, 512));
	ck_assert(tb_is_fill(out + 1024, 0x5a, 512));
	ck_assert(tb_is_fill(out + 1536, 0, B - 1536));
	/* A partial write far past the end copies up zeros. */
	ck_assert_int_eq(wr(&im, 7 * B + 512, 0x6b, 512), 0);
	ck_assert_int_eq(rd(&im, 7 * B, out, B), 0);
	ck_assert(tb_is_fill(out, 0, 512));
	ck_assert(tb_is_fill(out + 512, 0x6b, 512));
	ck_assert(tb_is_fill(out + 1024, 0, B - 1024));
	/* The last byte of the drive, and no further. */
	ck_assert_int_eq(wr(&im, size - 512, 0x7c, 512), 0);
	ck_assert_int_eq(rd(&im, size, out, 512), -ERANGE);
	/* Discarded past the end: zeros again. */
	ck_assert_int_eq(blk_image_discard(&im, 7 * B, B), 0);
	ck_assert_int_eq(rd(&im, 7 * B, out, B), 0);
	ck_assert(tb_is_fill(out, 0, B));
	ck_assert_uint_eq(tb_hash(img), h);
}
END_TEST

/* Only a copy-on-write drive may be larger, never smaller, and in whole
 * sectors; the same size is the image's. */
START_TEST(cow_size_checked)
{
	struct blk_opts o = { .path = img, .cow = true, .overlay_dir = tb.dir };
	struct tvm_err e = { 0 };

	o.size = SIZE - 512;
	ck_assert_int_eq(blk_image_open(&im, &o, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "larger than its image"));
	o.size = SIZE + 100;
	ck_assert_int_eq(blk_image_open(&im, &o, &e), -EINVAL);
	o.size = 2 * SIZE;
	o.cow = false;
	ck_assert_int_eq(blk_image_open(&im, &o, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, "copy-on-write"));
	o.cow = true;
	o.size = SIZE;
	ck_assert_msg(blk_image_open(&im, &o, &e) == 0, "%s", e.msg);
	ck_assert_uint_eq(im.size, SIZE);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("blk_image");
	TCase *tc = tcase_create("image");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, open_errors);
	tcase_add_test(tc, locking);
	tcase_add_test(tc, raw_read_write);
	tcase_add_test(tc, range_checked);
	tcase_add_test(tc, read_only);
	tcase_add_test(tc, raw_zeroes_and_discard);
	tcase_add_test(tc, cow_base_untouched);
	tcase_add_test(tc, cow_reads_mix_overlay_and_base);
	tcase_add_test(tc, cow_partial_block_keeps_rest);
	tcase_add_test(tc, cow_two_drives_isolated);
	tcase_add_test(tc, cow_limit);
	tcase_add_test(tc, cow_default_limit_is_the_drive);
	tcase_add_test(tc, cow_write_zeroes);
	tcase_add_test(tc, cow_discard);
	tcase_add_test(tc, cow_short_last_block);
	tcase_add_test(tc, cow_kept_overlay);
	tcase_add_test(tc, cow_grown);
	tcase_add_test(tc, cow_size_checked);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
