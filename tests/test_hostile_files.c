/* Files that are not files: FIFOs (whose open(O_RDONLY) blocks until a
 * writer comes, i.e. forever), directories, character devices, given as
 * drive images or found in a snapshot directory. Each must be refused at
 * once with one line naming the path and the reason. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devices/blk/blk_image.h"
#include "tests/unit.h"
#include "vmm/core/guest_mem.h"
#include "vmm/snapshot/snapshot_io.h"

static char dir[64], fifo[96];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/tinyvmm-hostile-files-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
}

static void teardown(void)
{
	unlink(fifo);
	rmdir(dir);
}

static void expect_refused(const char *path, bool read_only, bool cow, int err, const char *why)
{
	struct blk_opts o = { .path = path, .read_only = read_only, .cow = cow, .overlay_dir = dir };
	struct blk_image im;
	struct tvm_err e = { 0 };
	char want[256];

	ck_assert_int_eq(blk_image_open(&im, &o, &e), -err);
	snprintf(want, sizeof(want), "drive %s: %s", path, why);
	ck_assert_str_eq(e.msg, want);
	ck_assert_int_eq(im.fd, -1);
}

/* Before the fix, the read-only and copy-on-write opens never returned. */
START_TEST(fifo_every_mode)
{
	expect_refused(fifo, true, false, EINVAL, "not a regular file or block device");
	expect_refused(fifo, false, true, EINVAL, "not a regular file or block device");
	expect_refused(fifo, false, false, EINVAL, "not a regular file or block device");
}
END_TEST

START_TEST(directory_and_char_device)
{
	expect_refused(dir, true, false, EINVAL, "not a regular file or block device");
	expect_refused(dir, false, true, EINVAL, "not a regular file or block device");
	expect_refused(dir, false, false, EISDIR, "cannot open: Is a directory");
	expect_refused("/dev/zero", true, false, EINVAL, "not a regular file or block device");
	expect_refused("/dev/null", false, true, EINVAL, "not a regular file or block device");
}
END_TEST

/* A snapshot directory whose "state" or "mem" is a FIFO: restore used to
 * hang in open(). */
START_TEST(snapshot_files_fifo)
{
	struct guest_mem m;
	struct tvm_err e = { 0 };
	uint8_t *buf = (uint8_t *)&buf;
	size_t len = 1;
	char want[256];

	ck_assert_int_eq(snap_read_file(fifo, 4096, &buf, &len, &e), -EINVAL);
	snprintf(want, sizeof(want), "%s: not a regular file of at most 4096 bytes", fifo);
	ck_assert_str_eq(e.msg, want);
	ck_assert_ptr_null(buf);
	ck_assert_uint_eq(len, 0);
	ck_assert_int_eq(gm_init_file(&m, fifo, 16u << 20, &e), -EINVAL);
	ck_assert_ptr_nonnull(strstr(e.msg, fifo));
	ck_assert_ptr_nonnull(strstr(e.msg, "memory file"));
}
END_TEST

START_TEST(snapshot_out_dir_with_user_files_refused)
{
	char dir[] = "/tmp/tinyvmm-out-XXXXXX", f[64];
	struct tvm_err e = { 0 };
	FILE *fp;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(snap_mkdir(dir, &e), 0); /* empty: fine */
	snprintf(f, sizeof(f), "%s/notes.txt", dir);
	fp = fopen(f, "w");
	ck_assert_ptr_nonnull(fp);
	fputs("precious\n", fp);
	fclose(fp);
	ck_assert_int_eq(snap_mkdir(dir, &e), -EEXIST);
	ck_assert_ptr_nonnull(strstr(e.msg, "holds other files"));
	/* A previous snapshot there may be replaced. */
	snprintf(f, sizeof(f), "%s/state", dir);
	fp = fopen(f, "w");
	ck_assert_ptr_nonnull(fp);
	fclose(fp);
	ck_assert_int_eq(snap_mkdir(dir, &e), 0);
	unlink(f);
	snprintf(f, sizeof(f), "%s/notes.txt", dir);
	unlink(f);
	rmdir(dir);
}
END_TEST

static Suite *hostile_files_suite(void)
{
	Suite *s = suite_create("hostile_files");
	TCase *tc = tcase_create("drives");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, fifo_every_mode);
	tcase_add_test(tc, directory_and_char_device);
	tcase_add_test(tc, snapshot_files_fifo);
	tcase_add_test(tc, snapshot_out_dir_with_user_files_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(hostile_files_suite());
}
