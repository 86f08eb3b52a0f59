/* jail_view (vmm/sandbox/jail_view.c): a running process's own view of
 * the file system, the daemon's first wall. Its refusals on any host; what
 * the view shows and hides (in a forked child) as root. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/core/err.h"
#include "vmm/sandbox/jail.h"
#include "tests/unit.h"

START_TEST(bad_directories_are_refused_in_one_line)
{
	struct tvm_err e = { 0 };
	struct jail_view_dir rel[] = { { "state", JAIL_M_RW } }, root[] = { { "/", 0 } },
			     missing[] = { { "/nonexistent-tvm-view", JAIL_M_RW } };
	struct jail_view_dir many[JAIL_VIEW_MAX + 1];

	ck_assert_int_eq(jail_view(rel, 1, &e), -EINVAL);
	ck_assert_str_eq(e.msg, "view: state: not an absolute path below /");
	ck_assert_int_eq(jail_view(root, 1, &e), -EINVAL);
	ck_assert_int_eq(jail_view(rel, 0, &e), -EINVAL);
	for (unsigned i = 0; i < JAIL_VIEW_MAX + 1; i++)
		many[i] = (struct jail_view_dir){ "/tmp", 0 };
	ck_assert_int_eq(jail_view(many, JAIL_VIEW_MAX + 1, &e), -EINVAL);
	if (geteuid() == 0) { /* a missing one is found before anything is mounted */
		pid_t pid = fork();
		int status;

		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			_exit(jail_view(missing, 1, &e) == -ENOENT &&
					      !strcmp(e.msg, "view: /nonexistent-tvm-view: No such file or directory")
				      ? 0
				      : 1);
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_int_eq(status, 0);
	}
}
END_TEST

static char rw[] = "/tmp/tvm-view-rw-XXXXXX", ro[] = "/tmp/tvm-view-ro-XXXXXX", hidden[] = "/tmp/tvm-view-no-XXXXXX";

/* In the view: 0, else the step that was not as expected. */
static int in_the_view(void)
{
	char p[128];
	int fd;

	snprintf(p, sizeof(p), "%s/written", rw);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) < 0 || write(fd, "x", 1) != 1)
		return 1;
	close(fd);
	snprintf(p, sizeof(p), "%s/kept", ro);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return 2;
	close(fd);
	if (open(p, O_WRONLY | O_CLOEXEC) >= 0 || errno != EROFS)
		return 3;
	snprintf(p, sizeof(p), "%s/kept", hidden);
	if (open(p, O_RDONLY | O_CLOEXEC) >= 0 || errno != ENOENT)
		return 4;
	if (open("/etc/passwd", O_RDONLY | O_CLOEXEC) >= 0 || errno != ENOENT)
		return 5;
	if (mkdir("/planted", 0755) == 0 || errno != EROFS)
		return 6;
	if (access("/proc/self/stat", R_OK))
		return 7;
	return 0;
}

/* A mount beneath a directory of the view (the state dir on a host with
 * a file system mounted in it) would be hidden by it: refused. */
static int mount_beneath(void)
{
	char p[128];
	struct tvm_err e = { 0 };
	struct jail_view_dir v[] = { { rw, JAIL_M_RW }, { "/proc", 0 } }, ro_only[] = { { rw, 0 } };

	snprintf(p, sizeof(p), "%s/sub dir", rw);
	if (mkdir(p, 0700) || unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
	    mount("tmpfs", p, "tmpfs", 0, NULL))
		return 1;
	if (jail_view(v, 2, &e) != -EBUSY)
		return 2;
	if (jail_view(ro_only, 1, &e)) /* read-only: what the mount hides is only not seen */
		return 4;
	snprintf(p, sizeof(p), "view: %s has a mount beneath it (%s/sub dir): its own view would hide it", rw, rw);
	return strcmp(e.msg, p) ? 3 : 0;
}

START_TEST(the_view_shows_only_its_directories)
{
	char p[128];
	int status, fd;
	pid_t pid;

	if (geteuid() != 0) {
		printf("test_jail_view: SKIPPED: a mount namespace needs root\n");
		return;
	}
	ck_assert_ptr_nonnull(mkdtemp(rw));
	ck_assert_ptr_nonnull(mkdtemp(ro));
	ck_assert_ptr_nonnull(mkdtemp(hidden));
	snprintf(p, sizeof(p), "%s/kept", ro);
	ck_assert_int_ge(fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), 0);
	close(fd);
	snprintf(p, sizeof(p), "%s/kept", hidden);
	ck_assert_int_ge(fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644), 0);
	close(fd);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct tvm_err e = { 0 };
		struct jail_view_dir v[] = { { rw, JAIL_M_RW }, { ro, 0 }, { "/proc", 0 } };

		if (jail_view(v, 3, &e)) {
			fprintf(stderr, "%s\n", e.msg);
			_exit(100);
		}
		_exit(in_the_view());
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status 0x%x", status);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(mount_beneath());
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "mount beneath: status 0x%x", status);
	/* what it wrote is on the host; its tmpfs over rw never was */
	snprintf(p, sizeof(p), "%s/written", rw);
	ck_assert_int_eq(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "grep -q ' %s ' /proc/self/mountinfo", rw);
	ck_assert_int_ne(system(p), 0);
	snprintf(p, sizeof(p), "rm -rf %s %s %s", rw, ro, hidden);
	ck_assert_int_eq(system(p), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jail_view");
	TCase *tc = tcase_create("view");

	tcase_add_test(tc, bad_directories_are_refused_in_one_line);
	tcase_add_test(tc, the_view_shows_only_its_directories);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
