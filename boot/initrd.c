/* initrd placement: boot.rst says the initrd may sit anywhere up to
 * initrd_addr_max; like other loaders we put it as high as possible so it
 * stays clear of where the kernel decompresses and grows. */
#include <errno.h>

#include "boot/boot.h"
#include "boot/boot_util.h"

#define PAGE_MASK_4K (~0xfffULL)

int boot_place_initrd(const struct guest_mem *m, const struct boot_kernel *k, size_t len, uint64_t *gpa,
		      struct tvm_err *e)
{
	uint64_t ceiling = gm_low_end(m), floor = k->load_end, start;

	*gpa = 0;
	if (len == 0)
		return 0;
	/* initrd_addr_max is the highest byte the initrd may occupy. */
	if ((uint64_t)k->initrd_addr_max + 1 < ceiling)
		ceiling = (uint64_t)k->initrd_addr_max + 1;
	if (floor < BOOT_HIMEM_START)
		floor = BOOT_HIMEM_START;
	if (len > ceiling || ((ceiling - len) & PAGE_MASK_4K) < floor)
		return tvm_errf(e, ENOSPC,
				"%zu bytes do not fit between the kernel end 0x%llx and 0x%llx (%llu bytes free)", len,
				(unsigned long long)floor, (unsigned long long)ceiling,
				(unsigned long long)(ceiling > floor ? ceiling - floor : 0));
	start = (ceiling - len) & PAGE_MASK_4K;
	if (!gm_ptr(m, start, len))
		return tvm_errf(e, EFAULT, "[0x%llx, +0x%zx) is not guest RAM", (unsigned long long)start, len);
	*gpa = start;
	return 0;
}

int boot_load_initrd(const struct guest_mem *m, const struct boot_kernel *k, const uint8_t *initrd, size_t len,
		     uint64_t *gpa, struct tvm_err *e)
{
	int r = boot_place_initrd(m, k, len, gpa, e);

	if (!r && len)
		gm_write(m, *gpa, initrd, len); /* boot_place_initrd checked the range */
	return r;
}
