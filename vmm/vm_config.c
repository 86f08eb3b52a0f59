/* Checks on a caller's struct tvm_config before anything is built, and
 * what its settings resolve to on this host. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot/boot.h"
#include "vmm/core/err.h"
#include "vmm/core/file_open.h"
#include "vmm/kvm/host_quirks.h"
#include "vmm/vm_impl.h"

#define MAX_CPUS BOOT_MAX_CPUS
#define MIN_MEM_MIB 16
#define MAX_MEM_MIB (1u << 20) /* 1 TiB */

int vm_check_inplace(const struct tvm_config *c, struct tvm_err *e)
{
	for (unsigned i = 0; c->no_inplace_drives && i < c->nr_drives && i < TVM_MAX_DRIVES; i++)
		if (tvm_drive_in_place(&c->drives[i]))
			return tvm_errf(e, EPERM,
					"drive %u (%s): it would be written in place on the host (no_inplace_drives)",
					i, c->drives[i].path ? c->drives[i].path : "?");
	return 0;
}

/* The files the config names, as far as opening them tells, before KVM
 * is opened: a missing kernel is said as such on a host without KVM too.
 * The kernel and initrd get their whole file check (vm_kernel.c opens
 * them again to map them); a drive only whether it is there (its image
 * is checked when opened, with its mode). */
static int files_there(const struct tvm_config *c, bool need_kernel, struct tvm_err *e)
{
	const char *what[2] = { "kernel", "initrd" },
		   *path[2] = { need_kernel ? c->kernel_path : NULL, c->initrd_path };
	struct stat st;
	uint64_t size;

	for (int i = 0; i < 2; i++) {
		int fd = path[i] ? file_open_regular(what[i], path[i], O_RDONLY, 1, UINT64_MAX, &size, e) : 0;

		if (fd < 0)
			return fd;
		if (path[i])
			close(fd);
	}
	for (unsigned i = 0; i < c->nr_drives; i++)
		if (stat(c->drives[i].path, &st) < 0 && errno == ENOENT)
			return tvm_errf(e, ENOENT, "drive %s: cannot open: %s", c->drives[i].path, strerror(ENOENT));
	return 0;
}

int vm_check_config(const struct tvm_config *c, bool need_kernel, struct tvm_err *e)
{
	if (need_kernel && (!c->kernel_path || !*c->kernel_path))
		return tvm_errf(e, EINVAL, "no kernel given");
	if (c->cpus < 1 || c->cpus > MAX_CPUS)
		return tvm_errf(e, EINVAL, "cpus: %u is out of range 1..%d", c->cpus, MAX_CPUS);
	if (c->nr_drives > TVM_MAX_DRIVES)
		return tvm_errf(e, EINVAL, "drives: %u is more than %d", c->nr_drives, TVM_MAX_DRIVES);
	for (unsigned i = 0; i < c->nr_drives; i++)
		if (!c->drives[i].path || !*c->drives[i].path)
			return tvm_errf(e, EINVAL, "drive %u: no path given", i);
	if (vm_check_inplace(c, e))
		return -EPERM;
	if (c->seccomp != TVM_SECCOMP_OFF && c->seccomp != TVM_SECCOMP_KILL && c->seccomp != TVM_SECCOMP_LOG)
		return tvm_errf(e, EINVAL, "seccomp: %d is not TVM_SECCOMP_OFF, _KILL or _LOG", (int)c->seccomp);
	if (c->idle_ms && !c->vsock_cid)
		return tvm_errf(e, EINVAL,
				"idle timeout: needs a vsock device (vsock_cid), whose connections it watches");
	if (c->mem_mib < MIN_MEM_MIB || c->mem_mib > MAX_MEM_MIB)
		return tvm_errf(e, EINVAL, "memory: %u MiB is out of range %u..%u MiB", c->mem_mib, MIN_MEM_MIB,
				MAX_MEM_MIB);
	return vm_check_net(&c->net, e) ? -EINVAL : files_there(c, need_kernel, e);
}

bool vm_quirks_apply(enum tvm_quirks q)
{
	return q == TVM_QUIRKS_ON || (q == TVM_QUIRKS_AUTO && host_quirks_detect());
}
