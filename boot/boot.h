/* x86-64 Linux boot: kernel loaders and the boot-time structures the VMM
 * writes into guest memory before the first KVM_RUN.
 *
 * Follows the Linux x86 boot protocol (Documentation/x86/boot.rst, 64-bit
 * boot protocol) and the Intel MultiProcessor Specification 1.4 for the MP
 * table. Everything here is a pure function over struct guest_mem and input
 * buffers: no KVM, no files, unit-testable. Every value read from a kernel or
 * initrd image is checked before use; bad input returns -EINVAL (or -ENOEXEC
 * for an unrecognised image, -E2BIG / -ENOSPC for something that does not fit
 * guest memory) with a one-line message in the struct tvm_err. Loader
 * messages do not name the file ("ELF program header 1 segment: ..."): the
 * caller prefixes them with tvm_err_prefix(e, "kernel %s", path).
 */
#ifndef TVM_BOOT_H
#define TVM_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include <linux/kvm.h>

#include "vmm/core/err.h"
#include "vmm/core/guest_mem.h"

/* Fixed guest-physical layout of the boot structures (all below 1 MiB). */
#define BOOT_GDT_ADDR 0x500ULL        /* GDT: null, null, __BOOT_CS=0x10, __BOOT_DS=0x18, TSS=0x20 */
#define BOOT_ZERO_PAGE_ADDR 0x7000ULL /* struct boot_params, 4 KiB */
#define BOOT_STACK_TOP 0x8ff0ULL      /* initial RSP/RBP */
#define BOOT_PML4_ADDR 0x9000ULL      /* PML4, then PDPT at +0x1000, 4 PDs at +0x2000.. */
#define BOOT_CMDLINE_ADDR 0x20000ULL  /* kernel command line */
#define BOOT_CMDLINE_MAX 4096         /* bytes including the NUL (COMMAND_LINE_SIZE 2048 on 6.1; 4096 on newer) */
#define BOOT_ELF_CMDLINE_SIZE 2047    /* cmdline_size assumed for an ELF vmlinux (x86 COMMAND_LINE_SIZE 2048 - 1) */
/* The MP floating pointer must sit in the top 1 KiB of base memory (one of
 * the places Linux scans); the config table it points to is too big for that
 * 1 KiB with 64 CPUs, so it goes at the start of the reserved area, which is
 * also the start Linux itself reserves (BIOS_START_MAX, arch/x86/kernel/ebda.c). */
#define BOOT_MPTABLE_ADDR 0x9fc00ULL     /* MP floating pointer (16 bytes) */
#define BOOT_MPC_ADDR 0x9f000ULL         /* MP config table, up to BOOT_MPTABLE_ADDR */
#define BOOT_EBDA_START 0x9f000ULL       /* e820: [0, EBDA) is RAM, [EBDA, 1 MiB) is reserved */
#define BOOT_HIMEM_START 0x100000ULL     /* 1 MiB: where a bzImage's protected-mode code goes */
#define BOOT_IDENTITY_MAP 0x100000000ULL /* page tables identity-map the first 4 GiB */

#define BOOT_MAX_CPUS 64

#define BOOT_MAX_SEGS 32 /* PT_LOAD segments an ELF kernel may have */

/* One ELF PT_LOAD segment: file bytes [file_off, +filesz) belong at GPA
 * gpa, followed by zeros up to memsz. */
struct boot_segment {
	uint64_t gpa, memsz, file_off, filesz;
};

/* What a kernel loader found and placed in guest memory. */
struct boot_kernel {
	uint64_t entry;      /* GPA of the 64-bit entry point */
	uint64_t load_start; /* lowest GPA the kernel occupies (bytes) */
	uint64_t load_end;   /* first GPA past it, including bzImage init_size/ELF memsz */
	int is_bzimage;      /* 1: setup header below came from the image */
	/* bzImage setup header (boot_params offset 0x1f1..) copied as-is into the
	 * zero page; for an ELF vmlinux the zero page gets a synthesised header. */
	uint8_t setup_header[0x290 - 0x1f1];
	uint16_t protocol;        /* boot protocol version, e.g. 0x020f; 0 for ELF */
	uint32_t initrd_addr_max; /* highest byte address the initrd may occupy */
	uint32_t cmdline_size;    /* max command line length without NUL */
	uint64_t pvh_entry;       /* ELF: XEN_ELFNOTE_PHYS32_ENTRY (32-bit PVH entry GPA)
			     * when present and inside a loaded segment; else 0 */
	int nsegs;                /* ELF: its checked PT_LOAD segments; bzImage: 0 */
	struct boot_segment segs[BOOT_MAX_SEGS];
};

/* Load an image: dispatches on the ELF magic or the bzImage "HdrS" header.
 * img/len is the whole file; nothing is kept pointing into it. Everything
 * the kernel occupies must be low RAM (below the MMIO hole, so also inside
 * the identity map) at or above BOOT_HIMEM_START (the boot structures live
 * below): -EINVAL if it reaches below 1 MiB, -ENOSPC if it does not fit
 * low RAM. -ENOEXEC if neither format, -EINVAL for a malformed image. On
 * error *k is zeroed and guest memory is untouched: every check runs before
 * anything is copied. */
int boot_load_kernel(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k,
		     struct tvm_err *e);

/* Like boot_load_kernel, but an ELF's segments are only checked and listed
 * in k->segs, not copied: the caller places them (for example by mapping
 * page-aligned file ranges instead of copying). A bzImage is loaded as by
 * boot_load_kernel (k->nsegs = 0). Same errors. */
int boot_plan_kernel(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k,
		     struct tvm_err *e);

/* Load an uncompressed ELF64 x86-64 ET_EXEC vmlinux: copy each PT_LOAD
 * segment to its p_paddr (zero-filling p_memsz beyond p_filesz); entry =
 * e_entry, which must be inside a loaded segment. Segments must not overlap
 * each other; at most 32 PT_LOAD segments. All checks run before any copy. */
int boot_load_elf(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k, struct tvm_err *e);

/* Load a bzImage (boot protocol >= 2.12 so that xloadflags exists, with
 * XLF_KERNEL_64 and LOADED_HIGH): protected-mode part at 1 MiB, entry =
 * 1 MiB + 0x200. load_end also covers where the decompressor will run:
 * [runtime_start, runtime_start + init_size) with runtime_start =
 * max(pref_address, relocatable ? align_up(1 MiB, kernel_alignment) : 0)
 * (arch/x86/boot/compressed/head_64.S). */
int boot_load_bzimage(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k,
		      struct tvm_err *e);

/* Where boot_load_initrd would put an initrd of len bytes (page aligned,
 * checked to be guest RAM), without copying it: the caller places it. */
int boot_place_initrd(const struct guest_mem *m, const struct boot_kernel *k, size_t len, uint64_t *gpa,
		      struct tvm_err *e);

/* Copy an initrd to the highest page-aligned GPA that ends at or below both
 * the end of low RAM and k->initrd_addr_max, without overlapping the kernel
 * (k->load_end) or the boot area below 1 MiB. Stores its GPA in *gpa.
 * len 0 places nothing and sets *gpa = 0. -ENOSPC if it does not fit. */
int boot_load_initrd(const struct guest_mem *m, const struct boot_kernel *k, const uint8_t *initrd, size_t len,
		     uint64_t *gpa, struct tvm_err *e);

/* Write the command line (at BOOT_CMDLINE_ADDR) and the zero page
 * (boot_params at BOOT_ZERO_PAGE_ADDR): setup header (from the bzImage, or
 * synthesised for an ELF), type_of_loader 0xff, LOADED_HIGH, cmd_line_ptr,
 * ramdisk_image/size (+ ext_ fields), and the e820 map built by boot_e820().
 * cmdline NULL means "". initrd_len 0 means no initrd. -E2BIG if cmdline is
 * longer than min(k->cmdline_size, BOOT_CMDLINE_MAX - 1) bytes; -EINVAL if
 * the initrd range is not guest RAM; -EFAULT if RAM is too small for the
 * zero page or command line. */
int boot_write_zero_page(const struct guest_mem *m, const struct boot_kernel *k, const char *cmdline,
			 uint64_t initrd_gpa, uint64_t initrd_len, struct tvm_err *e);

/* One e820 entry (Linux struct boot_e820_entry layout). */
struct boot_e820 {
	uint64_t addr;
	uint64_t size;
	uint32_t type; /* 1 = RAM, 2 = reserved */
} __attribute__((packed));

#define BOOT_E820_RAM 1
#define BOOT_E820_RESERVED 2

/* Fill out[] (capacity max) with the guest's memory map: RAM below the EBDA,
 * reserved EBDA..1 MiB, RAM from 1 MiB to the MMIO hole, RAM above 4 GiB.
 * Writes at most max entries and returns how many the map has (at most 4;
 * like snprintf, a return value > max means out[] was too small). */
int boot_e820(const struct guest_mem *m, struct boot_e820 *out, int max);

/* GDT at BOOT_GDT_ADDR (entries as listed there; the TSS descriptor has
 * base 0, limit 0x67: only loaded into TR, never used before the kernel
 * loads its own) and identity page tables (2 MiB pages, first 4 GiB) at
 * BOOT_PML4_ADDR. Returns 0 or -EFAULT if guest RAM is too small. */
int boot_write_gdt_and_page_tables(const struct guest_mem *m, struct tvm_err *e);

/* MP table (floating pointer at BOOT_MPTABLE_ADDR, config table at
 * BOOT_MPC_ADDR) for ncpus processors (APIC ids 0..ncpus-1, BSP 0), one
 * IOAPIC (id ncpus, at 0xfec00000) and ISA interrupts 0..15 routed 1:1 to
 * IOAPIC pins; LINT0 ExtINT, LINT1 NMI. -EINVAL if ncpus is outside
 * 1..BOOT_MAX_CPUS, -EFAULT if guest RAM does not cover the tables. */
int boot_write_mptable(const struct guest_mem *m, int ncpus, struct tvm_err *e);

/* Register state for the 64-bit entry: RIP = k->entry, RSI = zero page,
 * RSP = RBP = BOOT_STACK_TOP, RFLAGS = 0x2. */
void boot_vcpu_regs(const struct boot_kernel *k, struct kvm_regs *regs);

/* Long mode with paging on the tables above: CR0 = PE|ET|NE|PG (CD/NW
 * cleared), CR4 = PAE, EFER = LME|LMA, CR3 = BOOT_PML4_ADDR, CS = 0x10
 * (64-bit code), DS/ES/FS/GS/SS = 0x18, TR = 0x20, LDTR unusable, GDTR at
 * BOOT_GDT_ADDR. The segment caches are decoded from the same descriptors
 * written to the GDT. sregs comes in holding what KVM_GET_SREGS returned;
 * only the fields above are changed. */
void boot_vcpu_sregs(struct kvm_sregs *sregs);

#endif
