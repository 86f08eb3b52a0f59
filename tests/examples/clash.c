/* A program embedding tinyvmm that defines its own ev_add, cow_open and
 * config_copy: the names of library internals (vmm/kvm/event_loop.c,
 * devices/blk/blk_cow.c, vmm/config_copy.c) with other signatures and
 * meanings. Built against build/libtinyvmm.a as a user would, it links only
 * because the library exports nothing but tvm_* names, and it boots the
 * guest only if the library's own calls reach the library's functions.
 *
 * It boots $TINYVMM_GUEST_DIR/vmlinux with initramfs.cpio and one
 * copy-on-write scratch drive (so the library calls its config_copy,
 * ev_add and cow_open during the run), waits for the test init's marker on
 * the console, and checks that each of its own three functions ran exactly
 * as often as it called them itself. Exit status 0 on success. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/tinyvmm.h"

#define MARKER "TINYVMM-TEST-INIT: ok"

static unsigned nr_ev_add, nr_cow_open, nr_config_copy;

/* The program's event log: how many named events it has seen. */
int ev_add(const char *event)
{
	nr_ev_add++;
	printf("clash: event %s\n", event);
	return (int)nr_ev_add;
}

/* How many cows a pasture of that many hectares holds. */
long cow_open(long hectares)
{
	nr_cow_open++;
	return hectares * 2;
}

/* The program's own settings copy: a bounded string copy. */
void config_copy(char *dst, const char *src, size_t n)
{
	nr_config_copy++;
	snprintf(dst, n, "%s", src);
}

static int fail(const char *what, const char *why)
{
	fprintf(stderr, "clash: %s: %s\n", what, why);
	return 1;
}

/* A fresh empty temp file of size bytes; its path is left in buf. */
static int tmp_file(char *buf, size_t len, const char *tag, off_t size)
{
	int fd;

	snprintf(buf, len, "/tmp/tinyvmm-clash-%s-XXXXXX", tag);
	fd = mkstemp(buf);
	if (fd < 0 || ftruncate(fd, size) < 0)
		return -1;
	return fd;
}

/* Whole file as a NUL-terminated malloc'd string, or NULL. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *s = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		s = calloc(1, (size_t)n + 1);
		if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
			free(s);
			s = NULL;
		}
	}
	fclose(f);
	return s;
}

int main(void)
{
	const char *dir = getenv("TINYVMM_GUEST_DIR");
	char kernel[512], initrd[512], console_path[64], disk_path[64], name[32];
	struct tvm_config c;
	struct tvm_vm *vm;
	struct tvm_err e = { 0 };
	char *console;
	int out_fd, disk_fd, rc = 0;

	if (!dir || !*dir)
		return fail("TINYVMM_GUEST_DIR", "not set (run through make integration)");
	snprintf(kernel, sizeof(kernel), "%s/vmlinux", dir);
	snprintf(initrd, sizeof(initrd), "%s/initramfs.cpio", dir);

	/* The program's functions before the VM exists... */
	config_copy(name, "clash-vm", sizeof(name));
	ev_add(name);
	if (cow_open(3) != 6)
		return fail("cow_open", "the program's own function returned a wrong value");

	out_fd = tmp_file(console_path, sizeof(console_path), "console", 0);
	disk_fd = tmp_file(disk_path, sizeof(disk_path), "disk", 1 << 20);
	if (out_fd < 0 || disk_fd < 0)
		return fail("temp file", strerror(errno));
	close(disk_fd);

	tvm_config_init(&c);
	c.kernel_path = kernel;
	c.initrd_path = initrd;
	c.serial_out_fd = out_fd;
	c.ttl_ms = 1800000; /* whatever happens, the VM goes */
	c.drives[0].path = disk_path;
	c.drives[0].cow = 1;
	c.nr_drives = 1;
	if (tvm_vm_create(&c, &vm, &e) < 0)
		return fail("tvm_vm_create", e.msg);
	if (tvm_vm_run(vm, &e) < 0)
		rc = fail("tvm_vm_run", e.msg);
	else if (tvm_vm_exit_reason(vm) != TVM_EXIT_RESET)
		rc = fail("tvm_vm_exit_reason", "the VM did not end by a guest reset");
	tvm_vm_destroy(vm);
	close(out_fd);
	unlink(disk_path);

	console = slurp(console_path);
	unlink(console_path);
	if (!console)
		return fail(console_path, "cannot read the console output");
	if (!strstr(console, MARKER))
		rc = fail("console", "no test init marker \"" MARKER "\"");
	free(console);

	/* ...and after it ran: the library never called them. */
	ev_add("vm-ended");
	if (nr_ev_add != 2 || nr_cow_open != 1 || nr_config_copy != 1) {
		fprintf(stderr, "clash: own ev_add, cow_open, config_copy called %u, %u, %u times (want 2, 1, 1)\n",
			nr_ev_add, nr_cow_open, nr_config_copy);
		rc = 1;
	}
	if (rc == 0)
		printf("clash: the guest booted; only the program called its ev_add, cow_open, config_copy\n");
	return rc;
}
