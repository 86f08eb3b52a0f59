/* Helpers shared by the boot loaders (internal to boot/). */
#ifndef TVM_BOOT_UTIL_H
#define TVM_BOOT_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "boot/boot.h"

/* Image fields are read with memcpy into host integers, so the host must be
 * little-endian like the formats (x86 only anyway). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "little-endian host");

/* [off, off + len) lies inside [0, size), without computing off + len. */
static inline int span_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* Non-empty ranges [a, a + alen) and [b, b + blen) intersect; both ends are
 * known not to overflow (they were checked against guest RAM). */
static inline int ranges_overlap(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

static inline uint16_t rd16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint32_t rd32(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return v;
}

/* Check that a kernel range [gpa, gpa + len) is low guest RAM (so also
 * identity-mapped) at or above BOOT_HIMEM_START; what names it in the
 * message ("ELF program header 2 segment"). Returns 0, or -EINVAL (below
 * 1 MiB) or -ENOSPC (not low RAM) with e set. */
int boot_check_kernel_range(const struct guest_mem *m, uint64_t gpa, uint64_t len, const char *what, struct tvm_err *e);

/* The ELF loader behind boot_load_elf (copy = true) and boot_plan_kernel
 * (copy = false: segments checked and listed in k->segs only). */
int boot_elf(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k, bool copy,
	     struct tvm_err *e);

#endif
