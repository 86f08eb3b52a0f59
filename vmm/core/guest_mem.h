/* Guest physical memory and the one checked GPA -> host pointer translator.
 *
 * Layout (x86): RAM starts at GPA 0 and runs up to the 32-bit MMIO hole
 * [GM_MMIO_HOLE_START, 4 GiB); RAM beyond that continues at 4 GiB. All RAM
 * is one contiguous host mapping split into at most two regions.
 *
 * Every access to guest memory from the VMM (boot loaders, virtqueues,
 * devices, snapshot) goes through gm_ptr()/gm_read()/gm_write(): no other
 * code computes host addresses from guest-controlled values.
 */
#ifndef TVM_GUEST_MEM_H
#define TVM_GUEST_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/core/err.h"

#define GM_MMIO_HOLE_START 0xC0000000ULL /* 3 GiB: devices live above */
#define GM_MMIO_HOLE_END 0x100000000ULL  /* 4 GiB */
#define GM_MAX_REGIONS 2

/* One contiguous GPA range backed by host memory at host. */
struct gm_region {
	uint64_t gpa;  /* first guest-physical address */
	uint64_t size; /* bytes */
	uint8_t *host; /* host address of gpa */
};

struct guest_mem {
	uint8_t *base; /* start of the host mapping (region 0's host) */
	uint64_t size; /* total RAM in bytes */
	int nr;        /* regions in use */
	int mapped;    /* 1 when base was mmap'd by gm_init_* and is unmapped by gm_destroy */
	struct gm_region r[GM_MAX_REGIONS];
};

/* Map size bytes (a multiple of 4 KiB, > 0) of anonymous private memory and
 * lay it out around the MMIO hole. Returns 0, or -ENOMEM/-EINVAL with e set. */
int gm_init_anon(struct guest_mem *m, uint64_t size, struct tvm_err *e);

/* Map the file at path (a snapshot's memory, exactly size bytes) private
 * and copy-on-write: pages are read lazily and shared through the page
 * cache by every VM mapping the same file; guest writes stay private. Same
 * layout as gm_init_anon. Returns 0, or -errno with "path: reason" in e
 * (-EINVAL when the file's size is not size). */
int gm_init_file(struct guest_mem *m, const char *path, uint64_t size, struct tvm_err *e);

/* Use a caller-owned buffer of size bytes as guest RAM (tests, fuzzers).
 * Same layout rules as gm_init_anon; gm_destroy will not free buf. */
int gm_init_buffer(struct guest_mem *m, void *buf, uint64_t size, struct tvm_err *e);

/* Unmap memory mapped by gm_init_anon; safe on a zeroed struct. */
void gm_destroy(struct guest_mem *m);

/* Host pointer for [gpa, gpa + len) if the whole range lies inside one RAM
 * region, else NULL. Overflow-safe for any gpa and len; len 0 needs gpa to be
 * inside a region. */
void *gm_ptr(const struct guest_mem *m, uint64_t gpa, uint64_t len);

/* Replace guest RAM [gpa, gpa + len) with a private copy-on-write mapping
 * of file fd at offset off (all three page aligned, len > 0): the guest sees
 * the file's bytes, read lazily from the page cache, and its writes stay
 * private. Used to place kernel segments without copying them. Returns 0,
 * -EINVAL (alignment), -EFAULT (not inside one RAM region) or -errno from
 * mmap (then the range may be unmapped: the VM must not run). */
int gm_map_file(const struct guest_mem *m, uint64_t gpa, int fd, uint64_t off, uint64_t len);

/* Copy len bytes from/to guest memory. Return 0 or -EFAULT (nothing copied)
 * when the range is not entirely RAM. */
int gm_read(const struct guest_mem *m, uint64_t gpa, void *dst, uint64_t len);
int gm_write(const struct guest_mem *m, uint64_t gpa, const void *src, uint64_t len);

/* End of low RAM (exclusive): the highest usable GPA below the MMIO hole. */
uint64_t gm_low_end(const struct guest_mem *m);

#endif
