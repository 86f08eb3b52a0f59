/* dir_remove_flat (vmm/core/dir_remove.c), which the CLI's template cache
 * runs on every "<key>.tmp-*" name it finds: a folder of files goes; a
 * folder with a subfolder keeps that and itself; a symlink at the name is
 * removed and the folder it points to is left whole (a planted link must
 * not empty /etc); a missing name is nothing. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmm/core/dir_remove.h"
#include "tests/unit.h"

static char top[64];

static void mk_file(const char *dir, const char *name)
{
	char p[256];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

static int exists(const char *dir, const char *name)
{
	char p[256];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return lstat(p, &st) == 0;
}

static void setup(void)
{
	snprintf(top, sizeof(top), "/tmp/tvm-dir-remove-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(top));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", top);
	ck_assert_int_eq(system(cmd), 0);
}

START_TEST(a_folder_of_files_goes)
{
	char d[128];

	snprintf(d, sizeof(d), "%s/k.tmp-1", top);
	ck_assert_int_eq(mkdir(d, 0700), 0);
	mk_file(d, "mem");
	mk_file(d, "state");
	dir_remove_flat(d);
	ck_assert(!exists(top, "k.tmp-1"));
}
END_TEST

START_TEST(a_subfolder_stays_and_so_does_its_parent)
{
	char d[128], sub[160];

	snprintf(d, sizeof(d), "%s/k.tmp-2", top);
	snprintf(sub, sizeof(sub), "%s/sub", d);
	ck_assert_int_eq(mkdir(d, 0700), 0);
	ck_assert_int_eq(mkdir(sub, 0700), 0);
	mk_file(d, "mem");
	dir_remove_flat(d);
	ck_assert(!exists(d, "mem"));
	ck_assert(exists(d, "sub"));
}
END_TEST

START_TEST(a_symlink_goes_and_its_target_is_left_whole)
{
	char target[128], link[128];

	snprintf(target, sizeof(target), "%s/canary", top);
	snprintf(link, sizeof(link), "%s/k.tmp-3", top);
	ck_assert_int_eq(mkdir(target, 0700), 0);
	mk_file(target, "precious");
	ck_assert_int_eq(symlink(target, link), 0);
	dir_remove_flat(link);
	ck_assert_msg(exists(target, "precious"), "a file of the symlink's target was removed");
	ck_assert(!exists(top, "k.tmp-3"));
}
END_TEST

START_TEST(a_missing_name_is_nothing)
{
	char d[128];

	snprintf(d, sizeof(d), "%s/none", top);
	dir_remove_flat(d);
	ck_assert(exists(top, "."));
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("dir_remove");
	TCase *tc = tcase_create("flat");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, a_folder_of_files_goes);
	tcase_add_test(tc, a_subfolder_stays_and_so_does_its_parent);
	tcase_add_test(tc, a_symlink_goes_and_its_target_is_left_whole);
	tcase_add_test(tc, a_missing_name_is_nothing);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tvm_run_suite(suite());
}
