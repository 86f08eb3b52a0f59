/* The guest's e820 memory map, derived from the guest_mem layout. */
#include "boot/boot.h"

static void add(struct boot_e820 *out, int max, int *n, uint64_t addr, uint64_t size, uint32_t type)
{
	if (size == 0)
		return;
	if (*n < max)
		out[*n] = (struct boot_e820){ .addr = addr, .size = size, .type = type };
	(*n)++;
}

int boot_e820(const struct guest_mem *m, struct boot_e820 *out, int max)
{
	uint64_t low = gm_low_end(m);
	int n = 0;

	if (low == 0)
		return 0;
	add(out, max, &n, 0, low < BOOT_EBDA_START ? low : BOOT_EBDA_START, BOOT_E820_RAM);
	/* Reserved even past the end of a tiny RAM: it holds the MP table and
	 * stands for the legacy VGA/BIOS hole, which the kernel never uses as RAM. */
	add(out, max, &n, BOOT_EBDA_START, BOOT_HIMEM_START - BOOT_EBDA_START, BOOT_E820_RESERVED);
	if (low > BOOT_HIMEM_START)
		add(out, max, &n, BOOT_HIMEM_START, low - BOOT_HIMEM_START, BOOT_E820_RAM);
	for (int i = 1; i < m->nr; i++)
		add(out, max, &n, m->r[i].gpa, m->r[i].size, BOOT_E820_RAM);
	return n;
}
