/* ELF64 vmlinux loader (System V gABI, x86-64 psABI). */
#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "boot/boot.h"
#include "boot/boot_util.h"

/* A vmlinux has about five PT_LOAD segments; the cap bounds the pairwise
 * overlap check. */

#define XEN_NOTE_NAME "Xen"         /* with its NUL: namesz 4 */
#define XEN_ELFNOTE_PHYS32_ENTRY 18 /* include/xen/interface/elfnote.h */

static int check_ehdr(const Elf64_Ehdr *eh, size_t len, struct tvm_err *e)
{
	if (eh->e_ident[EI_CLASS] != ELFCLASS64)
		return tvm_errf(e, EINVAL, "ELF class %u is not ELFCLASS64", eh->e_ident[EI_CLASS]);
	if (eh->e_ident[EI_DATA] != ELFDATA2LSB)
		return tvm_errf(e, EINVAL, "ELF data encoding %u is not little-endian", eh->e_ident[EI_DATA]);
	if (eh->e_ident[EI_VERSION] != EV_CURRENT)
		return tvm_errf(e, EINVAL, "ELF version %u is not EV_CURRENT", eh->e_ident[EI_VERSION]);
	if (eh->e_machine != EM_X86_64)
		return tvm_errf(e, EINVAL, "ELF machine %u is not EM_X86_64 (%u)", eh->e_machine, EM_X86_64);
	if (eh->e_type != ET_EXEC)
		return tvm_errf(e, EINVAL, "ELF type %u is not ET_EXEC", eh->e_type);
	if (eh->e_phentsize != sizeof(Elf64_Phdr))
		return tvm_errf(e, EINVAL, "ELF e_phentsize %u is not %zu", eh->e_phentsize, sizeof(Elf64_Phdr));
	/* PN_XNUM (0xffff) would move the count to section 0; no kernel needs it. */
	if (eh->e_phnum == 0 || eh->e_phnum == PN_XNUM)
		return tvm_errf(e, EINVAL, "ELF e_phnum %u: no usable program headers", eh->e_phnum);
	/* e_phnum < 2^16 and e_phentsize is 56: the product cannot overflow. */
	if (!span_ok(eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr), len))
		return tvm_errf(e, EINVAL, "ELF program headers [0x%llx, +%u * %zu) are outside the %zu-byte file",
				(unsigned long long)eh->e_phoff, eh->e_phnum, sizeof(Elf64_Phdr), len);
	return 0;
}

static void read_phdr(const uint8_t *img, const Elf64_Ehdr *eh, int i, Elf64_Phdr *ph)
{
	memcpy(ph, img + eh->e_phoff + (uint64_t)i * sizeof(*ph), sizeof(*ph));
}

/* Validate one PT_LOAD against the file, guest RAM and the segments before it. */
static int check_load(const struct guest_mem *m, const Elf64_Phdr *ph, int i, size_t len,
		      const struct boot_segment *segs, int nsegs, struct tvm_err *e)
{
	char what[64];
	int r;

	if (!span_ok(ph->p_offset, ph->p_filesz, len))
		return tvm_errf(e, EINVAL,
				"ELF program header %d: file range [0x%llx, +0x%llx) is outside the %zu-byte file", i,
				(unsigned long long)ph->p_offset, (unsigned long long)ph->p_filesz, len);
	if (ph->p_filesz > ph->p_memsz)
		return tvm_errf(e, EINVAL, "ELF program header %d: p_filesz 0x%llx > p_memsz 0x%llx", i,
				(unsigned long long)ph->p_filesz, (unsigned long long)ph->p_memsz);
	snprintf(what, sizeof(what), "ELF program header %d segment", i);
	r = boot_check_kernel_range(m, ph->p_paddr, ph->p_memsz, what, e);
	if (r)
		return r;
	if (nsegs == BOOT_MAX_SEGS)
		return tvm_errf(e, EINVAL, "ELF program header %d: more than %d PT_LOAD segments", i, BOOT_MAX_SEGS);
	for (int j = 0; j < nsegs; j++)
		if (ranges_overlap(ph->p_paddr, ph->p_memsz, segs[j].gpa, segs[j].memsz))
			return tvm_errf(
				e, EINVAL,
				"ELF program header %d: segment [0x%llx, +0x%llx) overlaps an earlier one at [0x%llx, +0x%llx)",
				i, (unsigned long long)ph->p_paddr, (unsigned long long)ph->p_memsz,
				(unsigned long long)segs[j].gpa, (unsigned long long)segs[j].memsz);
	return 0;
}

static int in_segments(uint64_t gpa, const struct boot_segment *segs, int nsegs)
{
	for (int i = 0; i < nsegs; i++)
		if (gpa >= segs[i].gpa && gpa - segs[i].gpa < segs[i].memsz)
			return 1;
	return 0;
}

/* Find XEN_ELFNOTE_PHYS32_ENTRY in one PT_NOTE. The note is optional
 * metadata, so a malformed note section is ignored rather than rejected. */
static uint64_t note_pvh_entry(const uint8_t *img, size_t len, const Elf64_Phdr *ph)
{
	uint64_t off = ph->p_offset, rem = ph->p_filesz;

	if (!span_ok(off, rem, len))
		return 0;
	while (rem >= 12) {
		uint32_t namesz = rd32(img + off), descsz = rd32(img + off + 4), type = rd32(img + off + 8);
		/* Name and descriptor are each padded to 4 bytes; computed in
		 * 64 bits so a 0xffffffff size cannot wrap. */
		uint64_t name_len = ((uint64_t)namesz + 3) & ~3ULL;
		uint64_t desc_len = ((uint64_t)descsz + 3) & ~3ULL;
		const uint8_t *name = img + off + 12, *desc = name + name_len;

		if (name_len > rem - 12 || desc_len > rem - 12 - name_len)
			return 0;
		if (type == XEN_ELFNOTE_PHYS32_ENTRY && namesz == sizeof(XEN_NOTE_NAME) &&
		    memcmp(name, XEN_NOTE_NAME, sizeof(XEN_NOTE_NAME)) == 0) {
			if (descsz == 4)
				return rd32(desc);
			if (descsz == 8)
				return rd64(desc);
			return 0;
		}
		off += 12 + name_len + desc_len;
		rem -= 12 + name_len + desc_len;
	}
	return 0;
}

static uint64_t find_pvh_entry(const uint8_t *img, size_t len, const Elf64_Ehdr *eh, const struct boot_segment *segs,
			       int nsegs)
{
	for (int i = 0; i < eh->e_phnum; i++) {
		Elf64_Phdr ph;
		uint64_t entry;

		read_phdr(img, eh, i, &ph);
		if (ph.p_type != PT_NOTE)
			continue;
		entry = note_pvh_entry(img, len, &ph);
		/* The PVH entry runs in 32-bit protected mode. */
		if (entry && entry < (1ULL << 32) && in_segments(entry, segs, nsegs))
			return entry;
	}
	return 0;
}

static int elf_load(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k, bool copy,
		    struct tvm_err *e)
{
	struct boot_segment *segs = k->segs;
	int nsegs = 0, r;
	Elf64_Ehdr eh;

	memset(k, 0, sizeof(*k));
	if (len < sizeof(eh))
		return tvm_errf(e, EINVAL, "ELF header truncated (%zu bytes, need %zu)", len, sizeof(eh));
	memcpy(&eh, img, sizeof(eh));
	r = check_ehdr(&eh, len, e);
	if (r)
		return r;

	/* Check everything before copying anything. */
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		read_phdr(img, &eh, i, &ph);
		if (ph.p_type != PT_LOAD || ph.p_memsz == 0)
			continue;
		r = check_load(m, &ph, i, len, segs, nsegs, e);
		if (r)
			return r;
		segs[nsegs++] = (struct boot_segment){ ph.p_paddr, ph.p_memsz, ph.p_offset, ph.p_filesz };
		k->nsegs = nsegs;
	}
	if (nsegs == 0)
		return tvm_errf(e, EINVAL, "ELF has no non-empty PT_LOAD segment");
	if (!in_segments(eh.e_entry, segs, nsegs))
		return tvm_errf(e, EINVAL, "ELF entry point 0x%llx is not inside a loaded segment",
				(unsigned long long)eh.e_entry);

	k->load_start = UINT64_MAX;
	for (int i = 0; i < nsegs && copy; i++) {
		uint8_t *dst = gm_ptr(m, segs[i].gpa, segs[i].memsz);

		memcpy(dst, img + segs[i].file_off, segs[i].filesz);
		memset(dst + segs[i].filesz, 0, segs[i].memsz - segs[i].filesz);
	}
	for (int i = 0; i < nsegs; i++) {
		if (segs[i].gpa < k->load_start)
			k->load_start = segs[i].gpa;
		if (segs[i].gpa + segs[i].memsz > k->load_end)
			k->load_end = segs[i].gpa + segs[i].memsz;
	}
	k->entry = eh.e_entry;
	k->is_bzimage = 0;
	k->protocol = 0;
	k->initrd_addr_max = 0x7fffffff; /* the 2.03+ default for a kernel that does not say */
	/* An ELF has no setup header to say; x86 COMMAND_LINE_SIZE is 2048. */
	k->cmdline_size = BOOT_ELF_CMDLINE_SIZE;
	k->pvh_entry = find_pvh_entry(img, len, &eh, segs, nsegs);
	return 0;
}

int boot_elf(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k, bool copy,
	     struct tvm_err *e)
{
	int r = elf_load(m, img, len, k, copy, e);

	/* The segment list fills in while checking: an error leaves nothing. */
	if (r)
		memset(k, 0, sizeof(*k));
	return r;
}

int boot_load_elf(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k, struct tvm_err *e)
{
	return boot_elf(m, img, len, k, true, e);
}
