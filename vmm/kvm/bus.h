/* An address bus: PIO ports or MMIO addresses -> device handlers.
 *
 * Ranges are registered before the vCPUs start and never change while they
 * run, so dispatch takes no lock. Overlapping ranges are rejected.
 */
#ifndef TVM_BUS_H
#define TVM_BUS_H

#include <stdbool.h>
#include <stdint.h>

#include "vmm/core/err.h"

/* Handle one access of len (1, 2, 4 or 8) bytes at offset off from the start
 * of the range. For reads, fill data[0..len); for writes, data holds the
 * value (little endian, as KVM delivers it). Runs on a vCPU thread. */
typedef void (*bus_io_fn)(void *opaque, uint64_t off, uint8_t *data, uint32_t len, bool is_write);

struct bus_range {
	uint64_t base; /* first address */
	uint64_t len;  /* bytes, > 0 */
	const char *name;
	bus_io_fn fn;
	void *opaque;
};

#define BUS_MAX_RANGES 64

struct bus {
	int n;
	struct bus_range r[BUS_MAX_RANGES]; /* sorted by base */
};

/* Add [base, base + len). -EINVAL for len 0 or overflow, -EEXIST when it
 * overlaps a registered range (the message names both), -ENOSPC when full. */
int bus_register(struct bus *b, uint64_t base, uint64_t len, const char *name, bus_io_fn fn, void *opaque,
		 struct tvm_err *e);

/* The range holding addr, or NULL. */
const struct bus_range *bus_find(const struct bus *b, uint64_t addr);

/* Dispatch an access to the device holding [addr, addr + len). Returns 0, or
 * -ENOENT when no range holds the whole access; then a read returns all ones. */
int bus_dispatch(const struct bus *b, uint64_t addr, uint8_t *data, uint32_t len, bool is_write);

#endif
