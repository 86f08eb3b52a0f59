/* CPU state for the 64-bit boot protocol (boot.rst, "64-bit Boot
 * Protocol"): a GDT with __BOOT_CS/__BOOT_DS, identity page tables, and
 * the vCPU registers. The segment caches handed to KVM are decoded from the
 * very descriptors written to the GDT, so the two cannot disagree. */
#include <errno.h>
#include <string.h>

#include "boot/boot.h"

#define SEL_CS 0x10
#define SEL_DS 0x18
#define SEL_TSS 0x20

/* Flat 4 GiB descriptors (Intel SDM vol. 3, 3.4.5 and 7.2.3). */
static const uint64_t gdt[] = {
	0,                     /* null */
	0,                     /* unused, as in Linux's boot GDT */
	0x00af9b000000ffffULL, /* 0x10: code, G L P S, type 0xb (exec/read, accessed) */
	0x00cf93000000ffffULL, /* 0x18: data, G DB P S, type 0x3 (read/write, accessed) */
	0x00008b0000000067ULL, /* 0x20: 64-bit TSS (busy), base 0, limit 0x67 */
	0,                     /*       TSS base bits 63..32 */
};

#define PTE_P 0x1ULL
#define PTE_RW 0x2ULL
#define PTE_PS 0x80ULL /* 2 MiB page in a PD entry */
#define PAGE_2M (2ULL << 20)
#define PT_PDPT (BOOT_PML4_ADDR + 0x1000)
#define PT_PD (BOOT_PML4_ADDR + 0x2000)
#define PT_NR_PD (BOOT_IDENTITY_MAP >> 30) /* one PD maps 1 GiB */
#define PT_SIZE (0x2000 + PT_NR_PD * 0x1000)

#define CR0_PE 0x1ULL
#define CR0_ET 0x10ULL
#define CR0_NE 0x20ULL
#define CR0_PG 0x80000000ULL
#define CR4_PAE 0x20ULL
#define EFER_LME 0x100ULL
#define EFER_LMA 0x400ULL

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

int boot_write_gdt_and_page_tables(const struct guest_mem *m, struct tvm_err *e)
{
	uint8_t *pt = gm_ptr(m, BOOT_PML4_ADDR, PT_SIZE);

	if (gm_write(m, BOOT_GDT_ADDR, gdt, sizeof(gdt)))
		return tvm_errf(e, EFAULT, "boot tables: GDT at 0x%llx is not guest RAM",
				(unsigned long long)BOOT_GDT_ADDR);
	if (!pt)
		return tvm_errf(e, EFAULT, "boot tables: page tables [0x%llx, +0x%llx) are not guest RAM",
				(unsigned long long)BOOT_PML4_ADDR, (unsigned long long)PT_SIZE);
	memset(pt, 0, PT_SIZE);
	put64(pt, PT_PDPT | PTE_P | PTE_RW);
	for (uint64_t i = 0; i < PT_NR_PD; i++) {
		put64(pt + 0x1000 + i * 8, (PT_PD + i * 0x1000) | PTE_P | PTE_RW);
		for (uint64_t j = 0; j < 512; j++)
			put64(pt + 0x2000 + i * 0x1000 + j * 8, ((i * 512 + j) * PAGE_2M) | PTE_P | PTE_RW | PTE_PS);
	}
	return 0;
}

void boot_vcpu_regs(const struct boot_kernel *k, struct kvm_regs *regs)
{
	memset(regs, 0, sizeof(*regs));
	regs->rip = k->entry;
	regs->rsi = BOOT_ZERO_PAGE_ADDR;
	regs->rsp = BOOT_STACK_TOP;
	regs->rbp = BOOT_STACK_TOP;
	regs->rflags = 0x2; /* bit 1 is reserved-one; IF clear as the protocol requires */
}

/* Segment register cache from a GDT descriptor (low 8 bytes). */
static void seg_from_desc(uint16_t sel, struct kvm_segment *s)
{
	uint64_t d = gdt[sel >> 3];
	uint32_t limit = (uint32_t)((d & 0xffff) | ((d >> 32) & 0xf0000));

	memset(s, 0, sizeof(*s));
	s->selector = sel;
	s->base = ((d >> 16) & 0xffffff) | (((d >> 56) & 0xff) << 24);
	s->type = (d >> 40) & 0xf;
	s->s = (d >> 44) & 1;
	s->dpl = (d >> 45) & 3;
	s->present = (d >> 47) & 1;
	s->avl = (d >> 52) & 1;
	s->l = (d >> 53) & 1;
	s->db = (d >> 54) & 1;
	s->g = (d >> 55) & 1;
	/* The cache holds the byte-granular limit. */
	s->limit = s->g ? (limit << 12) | 0xfff : limit;
	s->unusable = !s->present;
}

void boot_vcpu_sregs(struct kvm_sregs *sregs)
{
	seg_from_desc(SEL_CS, &sregs->cs);
	seg_from_desc(SEL_DS, &sregs->ds);
	seg_from_desc(SEL_DS, &sregs->es);
	seg_from_desc(SEL_DS, &sregs->fs);
	seg_from_desc(SEL_DS, &sregs->gs);
	seg_from_desc(SEL_DS, &sregs->ss);
	seg_from_desc(SEL_TSS, &sregs->tr);
	/* No LDT: null selector, marked unusable (type 2 = LDT for tidiness). */
	memset(&sregs->ldt, 0, sizeof(sregs->ldt));
	sregs->ldt.type = 2;
	sregs->ldt.unusable = 1;

	sregs->gdt.base = BOOT_GDT_ADDR;
	sregs->gdt.limit = sizeof(gdt) - 1;

	sregs->cr0 = CR0_PE | CR0_ET | CR0_NE | CR0_PG;
	sregs->cr3 = BOOT_PML4_ADDR;
	sregs->cr4 = CR4_PAE;
	sregs->efer = EFER_LME | EFER_LMA;
}
