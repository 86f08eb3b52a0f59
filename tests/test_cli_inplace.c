/* tinyvmm run --no-inplace-drives (vmm/cli/cli_run.c), which tinyvmm serve
 * gives every VMM: a snapshot the daemon could have written must not make
 * the root VMM write a host file. A snapshot state file naming one drive
 * is written here with the library's own writer; the binary (./tinyvmm,
 * built before this test) is run on it. The check comes before /dev/kvm
 * is opened, so it runs on any host. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/unit.h"
#include "vmm/snapshot/snapshot_config.h"
#include "vmm/snapshot/snapshot_format.h"
#include "vmm/snapshot/snapshot_io.h"
#include "vmm/tinyvmm.h"

static char dir[] = "/tmp/tvm-inplace-XXXXXX";
static char victim[300];

/* dir/state naming one drive, victim, with these flags. */
static void snapshot_with(int cow, int read_only)
{
	struct tvm_config c;
	struct snap_w w;
	uint64_t sizes[TVM_MAX_DRIVES] = { 4096 };
	char path[400];
	FILE *f;

	tvm_config_init(&c);
	c.kernel_path = "/nonexistent/vmlinux";
	c.nr_drives = 1;
	c.drives[0] = (struct tvm_drive){ .path = victim, .cow = cow, .read_only = read_only };
	snap_w_init(&w);
	snap_config_write(&w, &c, true, "console=ttyS0", sizes);
	ck_assert_int_eq(snap_w_finish(&w, NULL), 0);
	snprintf(path, sizeof(path), "%s/" SNAP_STATE_FILE, dir);
	ck_assert_ptr_nonnull(f = fopen(path, "wb"));
	ck_assert_uint_eq(fwrite(w.p, 1, w.len, f), w.len);
	fclose(f);
	snap_w_free(&w);
}

/* ./tinyvmm run [--no-inplace-drives] --snapshot dir: its stderr into
 * out, its exit status returned. */
static int run(int flag, char *out, size_t cap)
{
	char cmd[1024];
	FILE *p;
	size_t n;
	int st;

	snprintf(cmd, sizeof(cmd), "./tinyvmm run %s --no-seccomp --snapshot %s --vsock-uds %s/v.sock 2>&1 >/dev/null",
		 flag ? "--no-inplace-drives" : "", dir, dir);
	ck_assert_ptr_nonnull(p = popen(cmd, "r"));
	n = fread(out, 1, cap - 1, p);
	out[n] = 0;
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(a_snapshot_that_writes_a_host_file_in_place_is_refused)
{
	char out[4096], want[600];

	ck_assert_msg(access("./tinyvmm", X_OK) == 0, "./tinyvmm missing (make builds it before this test)");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	ck_assert_int_eq(close(creat(victim, 0600)), 0);

	snapshot_with(0, 0);
	ck_assert_int_ne(run(1, out, sizeof(out)), 0);
	snprintf(want, sizeof(want),
		 "tinyvmm: --no-inplace-drives: drive 0 (%s) of %s would be written in place on the host\n", victim,
		 dir);
	ck_assert_str_eq(out, want);
	/* without the flag the same snapshot goes on (and fails later, on
	 * this host at the latest at /dev/kvm), not at this check */
	run(0, out, sizeof(out));
	ck_assert_ptr_null(strstr(out, "--no-inplace-drives"));
	/* copy-on-write or read-only: taken */
	snapshot_with(1, 0);
	run(1, out, sizeof(out));
	ck_assert_msg(!strstr(out, "--no-inplace-drives"), "%s", out);
	snapshot_with(0, 1);
	run(1, out, sizeof(out));
	ck_assert_msg(!strstr(out, "--no-inplace-drives"), "%s", out);
	/* a state file that is not one: said, refused */
	snprintf(want, sizeof(want), "echo garbage > %s/" SNAP_STATE_FILE, dir);
	ck_assert_int_eq(system(want), 0);
	ck_assert_int_ne(run(1, out, sizeof(out)), 0);
	ck_assert_msg(!strncmp(out, "tinyvmm: --no-inplace-drives: ", 30), "%s", out);

	snprintf(want, sizeof(want), "rm -rf %s", dir);
	ck_assert_int_eq(system(want), 0);
}
END_TEST

/* The library itself: what a restore checks is the state file it reads,
 * so a file swapped after a caller's own look (the CLI's, or the jail's
 * planning) cannot bring an in-place drive in. */
START_TEST(the_library_checks_the_drives_it_uses)
{
	struct tvm_config o, c;
	struct tvm_vm *vm = NULL;
	struct tvm_err e = { 0 };

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	ck_assert_int_eq(close(creat(victim, 0600)), 0);
	snapshot_with(0, 0);
	/* no drive given (the caller saw none, or a copy-on-write one) */
	tvm_config_init(&o);
	o.no_inplace_drives = 1;
	ck_assert_int_eq(tvm_vm_restore(&o, dir, &vm, &e), -EPERM);
	ck_assert_ptr_null(vm);
	ck_assert_ptr_nonnull(strstr(e.msg, "drive 0 ("));
	ck_assert_ptr_nonnull(strstr(e.msg, "would be written in place on the host"));
	/* without it the same file goes on, to the next thing it lacks */
	o.no_inplace_drives = 0;
	ck_assert_int_ne(tvm_vm_restore(&o, dir, &vm, &e), -EPERM);
	ck_assert_ptr_null(strstr(e.msg, "in place"));
	/* a boot's drives too, before anything is opened */
	tvm_config_init(&c);
	c.kernel_path = "/nonexistent/vmlinux";
	c.nr_drives = 1;
	c.drives[0] = (struct tvm_drive){ .path = victim };
	c.no_inplace_drives = 1;
	ck_assert_int_eq(tvm_vm_create(&c, &vm, &e), -EPERM);
	c.drives[0].cow = 1;
	ck_assert_int_ne(tvm_vm_create(&c, &vm, &e), -EPERM);
	if (vm)
		tvm_vm_destroy(vm);
	snprintf(e.msg, sizeof(e.msg), "rm -rf %s", dir);
	ck_assert_int_eq(system(e.msg), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cli_inplace");
	TCase *tc = tcase_create("inplace");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, a_snapshot_that_writes_a_host_file_in_place_is_refused);
	tcase_add_test(tc, the_library_checks_the_drives_it_uses);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
