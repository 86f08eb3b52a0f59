/* Helpers shared by the boot unit tests: guest RAM backed by anonymous
 * memory, and builders for minimal ELF vmlinux and bzImage files. */
#ifndef TVM_TEST_BOOT_COMMON_H
#define TVM_TEST_BOOT_COMMON_H

#include <check.h>
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "boot/boot.h"
#include "boot/bootparam.h"
#include "tests/unit.h"

#define TB_MIB (1ULL << 20)
#define TB_GIB (1ULL << 30)
#define TB_FILL 0xAA /* what RAM holds before a load: shows what was written */

struct tb_ram {
	struct guest_mem m;
	uint8_t *buf;
	uint64_t size;
};

/* size bytes of RAM (MAP_NORESERVE, so many GiB cost nothing until
 * touched); the first min(size, 16 MiB) are filled with TB_FILL. */
static inline void tb_ram_init(struct tb_ram *r, uint64_t size)
{
	struct tvm_err e = { 0 };

	r->size = size;
	r->buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	ck_assert_ptr_ne(r->buf, MAP_FAILED);
	memset(r->buf, TB_FILL, size < 16 * TB_MIB ? size : 16 * TB_MIB);
	ck_assert_int_eq(gm_init_buffer(&r->m, r->buf, size, &e), 0);
}

static inline void tb_ram_fini(struct tb_ram *r)
{
	munmap(r->buf, r->size);
}

/* Host view of guest bytes, failing the test if the range is not RAM. */
static inline uint8_t *tb_gpa(const struct tb_ram *r, uint64_t gpa, uint64_t len)
{
	uint8_t *p = gm_ptr(&r->m, gpa, len);

	ck_assert_msg(p != NULL, "GPA 0x%llx +0x%llx not RAM", (unsigned long long)gpa, (unsigned long long)len);
	return p;
}

/* Every byte of [gpa, gpa + len) equals v. */
static inline int tb_all(const struct tb_ram *r, uint64_t gpa, uint64_t len, uint8_t v)
{
	const uint8_t *p = tb_gpa(r, gpa, len);

	for (uint64_t i = 0; i < len; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

/* Recognisable file contents: byte at file offset off. */
static inline uint8_t tb_byte(uint64_t off)
{
	return (uint8_t)(off * 7 + 3);
}

static inline void tb_fill(uint8_t *buf, uint64_t from, uint64_t to)
{
	for (uint64_t i = from; i < to; i++)
		buf[i] = tb_byte(i);
}

/* Builder preconditions: usable outside a running test (--write-seeds). */
#define TB_REQUIRE(c)                                                           \
	do {                                                                    \
		if (!(c)) {                                                     \
			fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                \
		}                                                               \
	} while (0)

/* ---- ELF ---- */

struct tb_seg {
	uint32_t type;
	uint64_t paddr, offset, filesz, memsz;
};

/* Write an ELF64 x86-64 ET_EXEC header, n program headers at 64, and
 * tb_byte() file contents up to the end of the last segment (within cap).
 * Returns the file length. */
static inline size_t tb_build_elf(uint8_t *buf, size_t cap, uint64_t entry, const struct tb_seg *s, int n)
{
	Elf64_Ehdr eh = { 0 };
	size_t end = sizeof(eh) + (size_t)n * sizeof(Elf64_Phdr);

	memset(buf, 0, cap);
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_EXEC;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_entry = entry;
	eh.e_phoff = sizeof(eh);
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = (uint16_t)n;
	TB_REQUIRE(end <= cap);
	for (int i = 0; i < n; i++) {
		Elf64_Phdr ph = { .p_type = s[i].type,
				  .p_flags = PF_R | PF_X,
				  .p_offset = s[i].offset,
				  .p_vaddr = s[i].paddr + 0xffffffff80000000ULL,
				  .p_paddr = s[i].paddr,
				  .p_filesz = s[i].filesz,
				  .p_memsz = s[i].memsz,
				  .p_align = 0x1000 };

		memcpy(buf + sizeof(eh) + (size_t)i * sizeof(ph), &ph, sizeof(ph));
		if (s[i].offset < cap && s[i].filesz <= cap - s[i].offset && s[i].offset + s[i].filesz > end) {
			tb_fill(buf, end > s[i].offset ? end : s[i].offset, s[i].offset + s[i].filesz);
			end = s[i].offset + s[i].filesz;
		}
	}
	memcpy(buf, &eh, sizeof(eh));
	return end;
}

/* The reference vmlinux: text at 1 MiB (0x300 bytes from the file, bss up
 * to +0x1000), data at 2 MiB; entry 1 MiB + 0x10. 0x1400 bytes. */
#define TB_ELF_ENTRY 0x100010ULL
static const struct tb_seg tb_elf_segs[] = {
	{ PT_LOAD, 0x100000, 0x1000, 0x300, 0x1000 },
	{ PT_LOAD, 0x200000, 0x1300, 0x100, 0x100 },
};

static inline size_t tb_good_elf(uint8_t *buf, size_t cap)
{
	return tb_build_elf(buf, cap, TB_ELF_ENTRY, tb_elf_segs, 2);
}

/* ---- bzImage ---- */

struct tb_bz {
	uint16_t version;
	uint8_t setup_sects;
	uint8_t hdr_len; /* byte at 0x201: header ends at 0x202 + hdr_len */
	uint8_t loadflags;
	uint16_t xloadflags;
	uint8_t relocatable;
	uint32_t kernel_alignment;
	uint64_t pref_address;
	uint32_t init_size;
	uint32_t initrd_addr_max;
	uint32_t cmdline_size;
	size_t pm_size; /* protected-mode bytes after the setup sectors */
};

/* A protocol 2.15 64-bit relocatable bzImage: one setup sector, 4 KiB of
 * protected-mode code, decompressing at 2 MiB with init_size 2 MiB. */
static inline struct tb_bz tb_bz_default(void)
{
	return (struct tb_bz){ .version = 0x020f,
			       .setup_sects = 1,
			       .hdr_len = 0x6a,
			       .loadflags = BP_LOADED_HIGH,
			       .xloadflags = BP_XLF_KERNEL_64,
			       .relocatable = 1,
			       .kernel_alignment = 0x200000,
			       .pref_address = 0x100000,
			       .init_size = 0x200000,
			       .initrd_addr_max = 0x7fffffff,
			       .cmdline_size = 2047,
			       .pm_size = 0x1000 };
}

/* Byte offset of the protected-mode code for p. */
static inline size_t tb_bz_pm_off(const struct tb_bz *p)
{
	return ((size_t)(p->setup_sects ? p->setup_sects : 4) + 1) * 512;
}

static inline size_t tb_build_bzimage(uint8_t *buf, size_t cap, const struct tb_bz *p)
{
	struct tvm_setup_header h = { 0 };
	size_t pm = tb_bz_pm_off(p), len = pm + p->pm_size;

	TB_REQUIRE(len <= cap);
	memset(buf, 0, cap);
	tb_fill(buf, 0, len);
	h.setup_sects = p->setup_sects;
	h.syssize = (uint32_t)((p->pm_size + 15) / 16);
	h.vid_mode = 0xffff;
	h.boot_flag = BP_BOOT_FLAG;
	h.jump = (uint16_t)(0xeb | (p->hdr_len << 8));
	memcpy(&h.header, BP_HDRS_MAGIC, 4);
	h.version = p->version;
	h.loadflags = p->loadflags;
	h.code32_start = 0x100000;
	h.initrd_addr_max = p->initrd_addr_max;
	h.kernel_alignment = p->kernel_alignment;
	h.relocatable_kernel = p->relocatable;
	h.min_alignment = 21;
	h.xloadflags = p->xloadflags;
	h.cmdline_size = p->cmdline_size;
	h.pref_address = p->pref_address;
	h.init_size = p->init_size;
	memcpy(buf + BP_HDR_OFFSET, &h, sizeof(h));
	return len;
}

/* `test --write-seeds DIR`: store the test's reference images as seeds for
 * tests/fuzz/fuzz_boot_kernel (DIR/name). */
static inline int tb_write_seed(const char *dir, const char *name, const uint8_t *img, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(img, 1, len, f) != len || fclose(f)) {
		perror(path);
		return EXIT_FAILURE;
	}
	return EXIT_SUCCESS;
}

#endif
