/* Layout of the x86 zero page (struct boot_params) and its setup header,
 * written from Documentation/x86/boot.rst and zero-page.rst (Linux 6.1).
 * Only the fields tinyvmm reads or writes are named; the rest is padding.
 * Offsets are ABI and checked below.
 */
#ifndef TVM_BOOT_BOOTPARAM_H
#define TVM_BOOT_BOOTPARAM_H

#include <stddef.h>
#include <stdint.h>

#include "boot/boot.h"

#define BP_HDR_OFFSET 0x1f1  /* setup header inside the image and the zero page */
#define BP_HDR_END_MAX 0x290 /* boot_params reserves 0x1f1..0x290 for it */
#define BP_BOOT_FLAG 0xAA55
#define BP_HDRS_MAGIC "HdrS" /* at 0x202 */
#define BP_E820_MAX 128      /* E820_MAX_ENTRIES_ZEROPAGE */

#define BP_LOADED_HIGH 0x01      /* loadflags */
#define BP_XLF_KERNEL_64 0x0001  /* xloadflags: 64-bit entry at +0x200 */
#define BP_LOADER_UNDEFINED 0xff /* type_of_loader for an unregistered loader */

/* struct setup_header: zero page 0x1f1..0x26c (protocol 2.15). */
struct tvm_setup_header {
	uint8_t setup_sects;
	uint16_t root_flags;
	uint32_t syssize;
	uint16_t ram_size;
	uint16_t vid_mode;
	uint16_t root_dev;
	uint16_t boot_flag;
	uint16_t jump;
	uint32_t header;
	uint16_t version;
	uint32_t realmode_swtch;
	uint16_t start_sys_seg;
	uint16_t kernel_version;
	uint8_t type_of_loader;
	uint8_t loadflags;
	uint16_t setup_move_size;
	uint32_t code32_start;
	uint32_t ramdisk_image;
	uint32_t ramdisk_size;
	uint32_t bootsect_kludge;
	uint16_t heap_end_ptr;
	uint8_t ext_loader_ver;
	uint8_t ext_loader_type;
	uint32_t cmd_line_ptr;
	uint32_t initrd_addr_max;
	uint32_t kernel_alignment;
	uint8_t relocatable_kernel;
	uint8_t min_alignment;
	uint16_t xloadflags;
	uint32_t cmdline_size;
	uint32_t hardware_subarch;
	uint64_t hardware_subarch_data;
	uint32_t payload_offset;
	uint32_t payload_length;
	uint64_t setup_data;
	uint64_t pref_address;
	uint32_t init_size;
	uint32_t handover_offset;
	uint32_t kernel_info_offset;
} __attribute__((packed));

/* struct boot_params, 4 KiB. */
struct tvm_boot_params {
	uint8_t _pad0[0xc0];
	uint32_t ext_ramdisk_image; /* 0x0c0: bits 63..32 of ramdisk_image */
	uint32_t ext_ramdisk_size;  /* 0x0c4 */
	uint32_t ext_cmd_line_ptr;  /* 0x0c8 */
	uint8_t _pad1[0x1e8 - 0xcc];
	uint8_t e820_entries; /* 0x1e8 */
	uint8_t _pad2[BP_HDR_OFFSET - 0x1e9];
	struct tvm_setup_header hdr; /* 0x1f1 */
	uint8_t _pad3[0x2d0 - BP_HDR_OFFSET - sizeof(struct tvm_setup_header)];
	struct boot_e820 e820_table[BP_E820_MAX]; /* 0x2d0 */
	uint8_t _pad4[0x1000 - 0xcd0];
} __attribute__((packed));

/* Offset of a setup header field in the image / zero page. */
#define BP_HDR_OFF(field) (BP_HDR_OFFSET + offsetof(struct tvm_setup_header, field))

_Static_assert(sizeof(struct tvm_setup_header) == 0x26c - 0x1f1, "setup_header size");
_Static_assert(BP_HDR_OFF(boot_flag) == 0x1fe, "boot_flag");
_Static_assert(BP_HDR_OFF(jump) == 0x200, "jump");
_Static_assert(BP_HDR_OFF(header) == 0x202, "header");
_Static_assert(BP_HDR_OFF(version) == 0x206, "version");
_Static_assert(BP_HDR_OFF(type_of_loader) == 0x210, "type_of_loader");
_Static_assert(BP_HDR_OFF(loadflags) == 0x211, "loadflags");
_Static_assert(BP_HDR_OFF(ramdisk_image) == 0x218, "ramdisk_image");
_Static_assert(BP_HDR_OFF(ramdisk_size) == 0x21c, "ramdisk_size");
_Static_assert(BP_HDR_OFF(heap_end_ptr) == 0x224, "heap_end_ptr");
_Static_assert(BP_HDR_OFF(cmd_line_ptr) == 0x228, "cmd_line_ptr");
_Static_assert(BP_HDR_OFF(initrd_addr_max) == 0x22c, "initrd_addr_max");
_Static_assert(BP_HDR_OFF(kernel_alignment) == 0x230, "kernel_alignment");
_Static_assert(BP_HDR_OFF(relocatable_kernel) == 0x234, "relocatable_kernel");
_Static_assert(BP_HDR_OFF(xloadflags) == 0x236, "xloadflags");
_Static_assert(BP_HDR_OFF(cmdline_size) == 0x238, "cmdline_size");
_Static_assert(BP_HDR_OFF(pref_address) == 0x258, "pref_address");
_Static_assert(BP_HDR_OFF(init_size) == 0x260, "init_size");
_Static_assert(BP_HDR_OFF(kernel_info_offset) == 0x268, "kernel_info_offset");
_Static_assert(sizeof(((struct boot_kernel *)0)->setup_header) == BP_HDR_END_MAX - BP_HDR_OFFSET,
	       "boot_kernel.setup_header covers 0x1f1..0x290");
_Static_assert(sizeof(struct boot_e820) == 20, "boot_e820_entry");
_Static_assert(offsetof(struct tvm_boot_params, ext_ramdisk_image) == 0x0c0, "ext_ramdisk_image");
_Static_assert(offsetof(struct tvm_boot_params, ext_ramdisk_size) == 0x0c4, "ext_ramdisk_size");
_Static_assert(offsetof(struct tvm_boot_params, ext_cmd_line_ptr) == 0x0c8, "ext_cmd_line_ptr");
_Static_assert(offsetof(struct tvm_boot_params, e820_entries) == 0x1e8, "e820_entries");
_Static_assert(offsetof(struct tvm_boot_params, hdr) == 0x1f1, "hdr");
_Static_assert(offsetof(struct tvm_boot_params, e820_table) == 0x2d0, "e820_table");
_Static_assert(sizeof(struct tvm_boot_params) == 0x1000, "boot_params is 4 KiB");

#endif
