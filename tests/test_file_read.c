/* The small-file readers of vmm/core/file_open.c, which the daemon runs
 * on its state, config and record files and on /proc: a whole regular
 * file is read and NUL-terminated; one over the buffer is -EFBIG (never
 * a cut one); a FIFO, a directory or a device is -EINVAL at once (a FIFO
 * would block a reader for ever); O_NOFOLLOW refuses a symlink. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/core/file_open.h"
#include "tests/unit.h"

static char top[64];

static const char *at(const char *name)
{
	static char p[128];

	snprintf(p, sizeof(p), "%s/%s", top, name);
	return p;
}

static void put(const char *name, const char *text)
{
	FILE *f = fopen(at(name), "w");

	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

static void setup(void)
{
	snprintf(top, sizeof(top), "/tmp/tvm-file-read-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(a_paths_parent)
{
	char out[8];

	ck_assert_int_eq(path_parent("a/b/c", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "a/b");
	ck_assert_int_eq(path_parent("/b", out, sizeof(out)), 0);
	ck_assert_str_eq(out, "/");
	ck_assert_int_eq(path_parent("b", out, sizeof(out)), 0);
	ck_assert_str_eq(out, ".");
	ck_assert_int_eq(path_parent("/abcdefgh/x", out, sizeof(out)), -ENAMETOOLONG);
}
END_TEST

START_TEST(whole_files_and_their_bounds)
{
	char buf[8];

	put("five", "12345");
	ck_assert_int_eq(file_read_whole(at("five"), 0, buf, sizeof(buf)), 5);
	ck_assert_str_eq(buf, "12345");
	put("seven", "1234567"); /* cap - 1: fits, with its NUL */
	ck_assert_int_eq(file_read_whole(at("seven"), 0, buf, sizeof(buf)), 7);
	ck_assert_str_eq(buf, "1234567");
	put("eight", "12345678");
	ck_assert_int_eq(file_read_whole(at("eight"), 0, buf, sizeof(buf)), -EFBIG);
	put("empty", "");
	ck_assert_int_eq(file_read_whole(at("empty"), 0, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
	ck_assert_int_eq(file_read_whole(at("absent"), 0, buf, sizeof(buf)), -ENOENT);
}
END_TEST

START_TEST(what_is_not_a_regular_file)
{
	char buf[64];

	ck_assert_int_eq(mkfifo(at("fifo"), 0600), 0);
	ck_assert_int_eq(file_read_whole(at("fifo"), 0, buf, sizeof(buf)), -EINVAL); /* at once, no writer */
	ck_assert_int_eq(file_read_whole(top, 0, buf, sizeof(buf)), -EINVAL);
	ck_assert_int_eq(file_read_whole("/dev/zero", 0, buf, sizeof(buf)), -EINVAL);
	put("real", "x");
	char real[128];

	snprintf(real, sizeof(real), "%s", at("real"));
	ck_assert_int_eq(symlink(real, at("link")), 0);
	ck_assert_int_eq(file_read_whole(at("link"), O_NOFOLLOW, buf, sizeof(buf)), -ELOOP);
	ck_assert_int_eq(file_read_whole(at("link"), 0, buf, sizeof(buf)), 1);
	/* the /proc reader: what fits, NUL-terminated; a FIFO does not block it */
	ck_assert_int_gt(file_read_small(AT_FDCWD, "/proc/self/stat", 0, buf, sizeof(buf)), 0);
	ck_assert_uint_lt(strlen(buf), sizeof(buf));
	ck_assert_int_eq(file_read_small(AT_FDCWD, at("fifo"), 0, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("file_read");
	TCase *tc = tcase_create("read");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_paths_parent);
	tcase_add_test(tc, whole_files_and_their_bounds);
	tcase_add_test(tc, what_is_not_a_regular_file);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
