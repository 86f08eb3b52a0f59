/* Command line and zero page (struct boot_params) for the 64-bit boot
 * protocol: boot.rst "64-bit Boot Protocol" and zero-page.rst. */
#include <errno.h>
#include <string.h>

#include "boot/boot.h"
#include "boot/boot_util.h"
#include "boot/bootparam.h"

/* An ELF vmlinux carries no setup header: give the kernel the fields a
 * bzImage would, as a protocol 2.15 header. */
#define ELF_SYNTH_PROTOCOL 0x020f
#define ELF_SYNTH_ALIGNMENT 0x1000000 /* CONFIG_PHYSICAL_ALIGN default */

static void synth_header(const struct boot_kernel *k, struct tvm_setup_header *h)
{
	h->boot_flag = BP_BOOT_FLAG;
	memcpy(&h->header, BP_HDRS_MAGIC, 4);
	h->version = ELF_SYNTH_PROTOCOL;
	h->kernel_alignment = ELF_SYNTH_ALIGNMENT;
	h->initrd_addr_max = k->initrd_addr_max;
	h->cmdline_size = k->cmdline_size;
	h->xloadflags = BP_XLF_KERNEL_64;
}

static int write_cmdline(const struct guest_mem *m, const struct boot_kernel *k, const char *cmdline, struct tvm_err *e)
{
	uint64_t max = k->cmdline_size < BOOT_CMDLINE_MAX - 1 ? k->cmdline_size : BOOT_CMDLINE_MAX - 1;
	size_t len = strlen(cmdline);

	if (len > max)
		return tvm_errf(e, E2BIG, "command line: %zu bytes, but %s accepts at most %llu", len,
				max == k->cmdline_size ? "the kernel (cmdline_size)" : "tinyvmm (BOOT_CMDLINE_MAX - 1)",
				(unsigned long long)max);
	if (gm_write(m, BOOT_CMDLINE_ADDR, cmdline, len + 1))
		return tvm_errf(e, EFAULT, "command line: GPA 0x%llx is not guest RAM",
				(unsigned long long)BOOT_CMDLINE_ADDR);
	return 0;
}

int boot_write_zero_page(const struct guest_mem *m, const struct boot_kernel *k, const char *cmdline,
			 uint64_t initrd_gpa, uint64_t initrd_len, struct tvm_err *e)
{
	struct tvm_boot_params bp;
	int n, r;

	if (initrd_len && !gm_ptr(m, initrd_gpa, initrd_len))
		return tvm_errf(e, EINVAL, "zero page: initrd [0x%llx, +0x%llx) is not guest RAM",
				(unsigned long long)initrd_gpa, (unsigned long long)initrd_len);
	r = write_cmdline(m, k, cmdline ? cmdline : "", e);
	if (r)
		return r;

	/* Start from zero and take only the setup header from the image, as
	 * boot.rst asks (the kernel clears fields a careless loader copies). */
	memset(&bp, 0, sizeof(bp));
	if (k->is_bzimage)
		memcpy(&bp.hdr, k->setup_header, sizeof(bp.hdr));
	else
		synth_header(k, &bp.hdr);
	bp.hdr.type_of_loader = BP_LOADER_UNDEFINED;
	/* CAN_USE_HEAP/heap_end_ptr only matter to the real-mode setup code,
	 * which the 64-bit entry skips. */
	bp.hdr.loadflags |= BP_LOADED_HIGH;
	bp.hdr.cmd_line_ptr = (uint32_t)BOOT_CMDLINE_ADDR;
	bp.ext_cmd_line_ptr = (uint32_t)(BOOT_CMDLINE_ADDR >> 32);
	bp.hdr.ramdisk_image = (uint32_t)(initrd_len ? initrd_gpa : 0);
	bp.ext_ramdisk_image = (uint32_t)((initrd_len ? initrd_gpa : 0) >> 32);
	bp.hdr.ramdisk_size = (uint32_t)initrd_len;
	bp.ext_ramdisk_size = (uint32_t)(initrd_len >> 32);

	n = boot_e820(m, bp.e820_table, BP_E820_MAX);
	bp.e820_entries = (uint8_t)(n < BP_E820_MAX ? n : BP_E820_MAX); /* n <= 4 anyway */

	if (gm_write(m, BOOT_ZERO_PAGE_ADDR, &bp, sizeof(bp)))
		return tvm_errf(e, EFAULT, "zero page: GPA 0x%llx is not guest RAM",
				(unsigned long long)BOOT_ZERO_PAGE_ADDR);
	return 0;
}
