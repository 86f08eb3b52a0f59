/* Loading the guest: the kernel's segments and the initrd mapped or copied
 * into guest RAM, then the zero page, GDT, page tables, MP table and the
 * boot vCPU's registers. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "boot/boot.h"
#include "vmm/core/err.h"
#include "vmm/core/file_open.h"
#include "vmm/vm_impl.h"

/* Map a whole file read-only; what names it in errors ("kernel"). With fd
 * non-NULL the file stays open there (the caller closes it). */
static int map_file(const char *what, const char *path, const uint8_t **data, size_t *len, int *fd_out,
		    struct tvm_err *e)
{
	uint64_t size;
	void *p;
	int fd = file_open_regular(what, path, O_RDONLY, 1, UINT64_MAX, &size, e);

	if (fd < 0)
		return fd;
	p = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		int r = tvm_errf(e, errno, "%s %s: mmap: %s", what, path, strerror(errno));
		close(fd);
		return r;
	}
	if (fd_out)
		*fd_out = fd;
	else
		close(fd);
	*data = p;
	*len = (size_t)size;
	return 0;
}

/* Put an ELF kernel's checked segments in guest RAM. Whole pages whose
 * file offset and GPA are page aligned (all of a Linux vmlinux's) are
 * mapped copy-on-write from the file, so the guest reads them lazily from
 * the page cache and the VMM copies ~nothing before the first KVM_RUN;
 * partial pages are copied; bss is zeroed. */
static int place_segments(struct tvm_vm *vm, const struct boot_kernel *k, const uint8_t *img, int fd, struct tvm_err *e)
{
	for (int i = 0; i < k->nsegs; i++) {
		const struct boot_segment *s = &k->segs[i];
		uint8_t *dst = gm_ptr(&vm->mem, s->gpa, s->memsz); /* boot_plan_kernel checked it */
		uint64_t whole = ((s->gpa | s->file_off) & 4095) ? 0 : s->filesz & ~4095ULL;
		int r = whole ? gm_map_file(&vm->mem, s->gpa, fd, s->file_off, whole) : 0;

		if (r)
			return tvm_errf(e, -r, "segment %d at 0x%llx: mmap: %s", i, (unsigned long long)s->gpa,
					strerror(-r));
		memcpy(dst + whole, img + s->file_off + whole, s->filesz - whole);
		memset(dst + s->filesz, 0, s->memsz - s->filesz);
	}
	return 0;
}

int vm_load_guest(struct tvm_vm *vm, struct tvm_err *e)
{
	struct boot_kernel k;
	const uint8_t *img;
	size_t len;
	uint64_t initrd_gpa = 0, initrd_len = 0;
	struct kvm_sregs sregs;
	struct kvm_regs regs;
	int r, fd;

	r = map_file("kernel", vm->cfg.kernel_path, &img, &len, &fd, e);
	if (r)
		return r;
	r = boot_plan_kernel(&vm->mem, img, len, &k, e);
	if (!r)
		r = place_segments(vm, &k, img, fd, e);
	munmap((void *)img, len);
	close(fd);
	if (r) {
		tvm_err_prefix(e, "kernel %s", vm->cfg.kernel_path);
		return r;
	}
	if (vm->cfg.initrd_path) {
		r = map_file("initrd", vm->cfg.initrd_path, &img, &len, &fd, e);
		if (r)
			return r;
		r = boot_place_initrd(&vm->mem, &k, len, &initrd_gpa, e);
		if (!r) {
			/* Like the kernel: whole pages mapped, the tail copied. */
			struct boot_segment s = { .gpa = initrd_gpa, .memsz = len, .file_off = 0, .filesz = len };
			struct boot_kernel one = { .nsegs = 1, .segs = { s } };
			r = place_segments(vm, &one, img, fd, e);
		}
		munmap((void *)img, len);
		close(fd);
		if (r) {
			tvm_err_prefix(e, "initrd %s", vm->cfg.initrd_path);
			return r;
		}
		initrd_len = len;
	}
	r = boot_write_zero_page(&vm->mem, &k, vm->cmdline, initrd_gpa, initrd_len, e);
	if (!r)
		r = boot_write_gdt_and_page_tables(&vm->mem, e);
	if (!r)
		r = boot_write_mptable(&vm->mem, (int)vm->cfg.cpus, e);
	if (r)
		return r;
	boot_vcpu_regs(&k, &regs);
	r = vcpu_get_sregs(&vm->vcpus[0], &sregs, e);
	if (r)
		return r;
	boot_vcpu_sregs(&sregs);
	r = vcpu_set_sregs(&vm->vcpus[0], &sregs, e);
	if (!r)
		r = vcpu_set_regs(&vm->vcpus[0], &regs, e);
	metrics_mark(&vm->metrics, MARK_KERNEL_LOADED);
	return r;
}
