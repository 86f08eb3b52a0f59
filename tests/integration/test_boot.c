/* Boot the real guest kernel (ELF and bzImage) to the test init's marker,
 * through the library and through the CLI. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "tests/integration/it_common.h"
#include "tests/unit.h"
#include "vmm/tinyvmm.h"

/* Value of "key": in a flat JSON object (first occurrence), or -1. */
static long long json_num(const char *json, const char *key)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(json, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

START_TEST(library_boots_vmlinux)
{
	struct tvm_config c;
	struct tvm_vm *vm;
	struct tvm_err e = { 0 };
	char out[128], metrics[128];
	char *console, *json;
	int fd;

	it_tmp(out, sizeof(out), "console");
	it_tmp(metrics, sizeof(metrics), "metrics");
	fd = open(out, O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	tvm_config_init(&c);
	c.kernel_path = it_guest("vmlinux");
	c.initrd_path = it_guest("initramfs.cpio");
	c.serial_out_fd = fd;
	ck_assert_msg(tvm_vm_create(&c, &vm, &e) == 0, "create: %s", e.msg);
	ck_assert_msg(tvm_vm_run(vm, &e) == 0, "run: %s", e.msg);
	ck_assert_int_eq(tvm_vm_exit_reason(vm), TVM_EXIT_RESET);
	ck_assert_int_eq(tvm_vm_write_metrics(vm, metrics, &e), 0);
	tvm_vm_destroy(vm);
	close(fd);

	console = it_slurp(out);
	ck_assert_msg(strstr(console, "Linux version"), "no kernel banner in console:\n%s", console);
	ck_assert_msg(strstr(console, IT_MARKER), "no init marker in console:\n%s", console);
	/* The init prints the marker only after its fork+exec+pipe check
	 * passed (on the kvm_pvm host that runs the SYSCALL completion path). */
	ck_assert_msg(strstr(console, "tinyvmm-test-init: started"), "init did not start:\n%s", console);
	json = it_slurp(metrics);
	{
		char want[64];
		snprintf(want, sizeof(want), "{\"version\":\"%s\",", tvm_version());
		ck_assert_msg(!strncmp(json, want, strlen(want)), "metrics do not start with %s: %.80s", want, json);
	}
	/* Every boot milestone was reached, in order. */
	{
		static const char *const order[] = { "vm_created_us", "kernel_loaded_us", "first_kvm_run_us",
						     "first_serial_byte_us", "guest_end_us" };
		long long prev = 0;

		for (int i = 0; i < 5; i++) {
			long long v = json_num(json, order[i]);
			ck_assert_msg(v > prev, "%s = %lld, not after %lld in %s", order[i], v, prev, json);
			prev = v;
		}
		ck_assert_int_gt(json_num(json, "io"), 0); /* the console is PIO */
	}
	free(console);
	free(json);
	unlink(out);
	unlink(metrics);
}
END_TEST

START_TEST(cli_boots_bzimage)
{
	char out[128], err[128];
	char *console;
	char *argv[] = { "tinyvmm",  "run",
			 "--kernel", (char *)it_guest("bzImage"),
			 "--initrd", (char *)it_guest("initramfs.cpio"),
			 "--mem",    "128",
			 NULL };

	it_tmp(out, sizeof(out), "out");
	it_tmp(err, sizeof(err), "err");
	ck_assert_int_eq(it_run_cli(argv, out, err, 0), 0);
	console = it_slurp(out);
	ck_assert_msg(strstr(console, IT_MARKER), "no init marker in console:\n%s", console);
	free(console);
	unlink(out);
	unlink(err);
}
END_TEST

START_TEST(cli_guest_panic_ends_vm)
{
	char out[128], err[128];
	char *console;
	char *argv[] = { "tinyvmm",
			 "run",
			 "--kernel",
			 (char *)it_guest("vmlinux"),
			 "--initrd",
			 (char *)it_guest("initramfs.cpio"),
			 "--cmdline-append",
			 "tinyvmm.test=panic",
			 NULL };

	it_tmp(out, sizeof(out), "out");
	it_tmp(err, sizeof(err), "err");
	/* panic=-1 makes the kernel reset at once, which ends the VM cleanly. */
	ck_assert_int_eq(it_run_cli(argv, out, err, 0), 0);
	console = it_slurp(out);
	ck_assert_msg(strstr(console, "Kernel panic"), "no panic in console:\n%s", console);
	ck_assert_ptr_null(strstr(console, IT_MARKER));
	free(console);
	unlink(out);
	unlink(err);
}
END_TEST

START_TEST(cli_rejects_bad_kernel)
{
	char out[128], err[128], junk[128];
	char *msg;
	char *argv[] = { "tinyvmm", "run", "--kernel", junk, NULL };
	int fd;

	it_tmp(out, sizeof(out), "out");
	it_tmp(err, sizeof(err), "err");
	it_tmp(junk, sizeof(junk), "junk");
	fd = open(junk, O_WRONLY);
	ck_assert_int_eq(write(fd, "this is not a kernel at all, just some text\n", 44), 44);
	close(fd);
	ck_assert_int_eq(it_run_cli(argv, out, err, 0), 125);
	msg = it_slurp(err);
	ck_assert_msg(strstr(msg, junk) && strstr(msg, "not an ELF"), "unclear error: %s", msg);
	/* One line that names the file and says what is wrong with it. */
	ck_assert_msg(strstr(msg, "tinyvmm: kernel "), "error does not name the kernel: %s", msg);
	free(msg);
	unlink(out);
	unlink(err);
	unlink(junk);
}
END_TEST

START_TEST(cli_rejects_bad_flags)
{
	char out[128], err[128];
	char *msg;
	char *argv1[] = { "tinyvmm", "run", "--kernel", "/nonexistent/vmlinux", NULL };
	char *argv2[] = { "tinyvmm", "run", "--kernel", "x", "--mem", "12abc", NULL };
	char *argv3[] = { "tinyvmm", "run", "--kernel", (char *)it_guest("vmlinux"), "--cpus", "0", NULL };

	it_tmp(out, sizeof(out), "out");
	it_tmp(err, sizeof(err), "err");
	ck_assert_int_eq(it_run_cli(argv1, out, err, 0), 125);
	msg = it_slurp(err);
	ck_assert_msg(strstr(msg, "/nonexistent/vmlinux") && strstr(msg, "No such file"), "unclear: %s", msg);
	free(msg);
	ck_assert_int_eq(it_run_cli(argv2, out, err, 0), 64); /* a wrong command line (README.md) */
	msg = it_slurp(err);
	ck_assert_msg(strstr(msg, "--mem") && strstr(msg, "12abc"), "unclear: %s", msg);
	free(msg);
	ck_assert_int_eq(it_run_cli(argv3, out, err, 0), 125);
	msg = it_slurp(err);
	ck_assert_msg(strstr(msg, "cpus"), "unclear: %s", msg);
	free(msg);
	unlink(out);
	unlink(err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("boot");
	TCase *fast = tcase_create("errors");
	TCase *tc = tcase_create("boot");

	tcase_add_test(fast, cli_rejects_bad_kernel);
	tcase_add_test(fast, cli_rejects_bad_flags);
	suite_add_tcase(s, fast);
	/* Each boot takes tens of seconds on the emulated-CPL0 host. */
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, library_boots_vmlinux);
	tcase_add_test(tc, cli_boots_bzimage);
	tcase_add_test(tc, cli_guest_panic_ends_vm);
	suite_add_tcase(s, tc);
	return tvm_run_suite(s);
}
