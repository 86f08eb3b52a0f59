/* Shared by the device fuzzers: one virtio-mmio register access of any
 * offset, width and direction, chosen by the input (offset u16, width
 * index u8, direction u8, value u32, in that order). */
#ifndef TVM_FUZZ_MMIO_H
#define TVM_FUZZ_MMIO_H

#include <stdbool.h>
#include <string.h>

#include "devices/virtio_mmio.h"
#include "tests/fuzz/fuzz_input.h"

static inline void fuzz_mmio_access(struct in *in, struct virtio_mmio *t)
{
	static const uint8_t widths[] = { 1, 2, 4, 8 };
	uint16_t off = take(in, 2) % VIRTIO_MMIO_WINDOW;
	uint8_t w = widths[take(in, 1) % 4], b[8];
	bool wr = take(in, 1) & 1;
	uint64_t v = take(in, 4);

	memcpy(b, &v, sizeof(b));
	virtio_mmio_io(t, off, b, w, wr);
}

#endif
