/* Kernel image dispatch and the placement check both loaders share. */
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "boot/boot.h"
#include "boot/boot_util.h"
#include "boot/bootparam.h"

int boot_check_kernel_range(const struct guest_mem *m, uint64_t gpa, uint64_t len, const char *what, struct tvm_err *e)
{
	/* The GDT, zero page, page tables, command line and MP table live
	 * below 1 MiB and are written after the kernel: overlapping them would
	 * silently corrupt one or the other. */
	if (gpa < BOOT_HIMEM_START)
		return tvm_errf(e, EINVAL, "%s: [0x%llx, +0x%llx) overlaps the boot area below 1 MiB", what,
				(unsigned long long)gpa, (unsigned long long)len);
	/* Only low RAM is both guest memory and identity-mapped by the boot
	 * page tables (it ends below the MMIO hole, under 4 GiB). */
	if (!span_ok(gpa, len, gm_low_end(m)))
		return tvm_errf(e, ENOSPC,
				"%s: [0x%llx, +0x%llx) is outside low guest RAM, which ends at 0x%llx (%llu MiB RAM)",
				what, (unsigned long long)gpa, (unsigned long long)len,
				(unsigned long long)gm_low_end(m), (unsigned long long)(m->size >> 20));
	return 0;
}

static int load_kernel(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k, bool copy,
		       struct tvm_err *e)
{
	memset(k, 0, sizeof(*k));
	if (len >= SELFMAG && memcmp(img, ELFMAG, SELFMAG) == 0)
		return boot_elf(m, img, len, k, copy, e);
	if (len >= BP_HDR_OFF(header) + 4 && memcmp(img + BP_HDR_OFF(header), BP_HDRS_MAGIC, 4) == 0)
		return boot_load_bzimage(m, img, len, k, e);
	return tvm_errf(e, ENOEXEC, "not an ELF vmlinux or bzImage (%zu bytes, no ELF magic, no \"HdrS\" at 0x202)",
			len);
}

int boot_load_kernel(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k,
		     struct tvm_err *e)
{
	return load_kernel(m, img, len, k, true, e);
}

int boot_plan_kernel(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k,
		     struct tvm_err *e)
{
	return load_kernel(m, img, len, k, false, e);
}
