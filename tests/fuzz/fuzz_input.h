/* Shared by the libFuzzer targets: the fuzz input read as a stream of
 * little-endian integers; past the end everything reads as zero, so every
 * input is a complete program. */
#ifndef TVM_FUZZ_INPUT_H
#define TVM_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

struct in {
	const uint8_t *p;
	size_t n;
};

/* The next `bytes` (0..8) bytes as an integer. */
static inline uint64_t take(struct in *in, unsigned bytes)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < bytes; i++) {
		uint8_t b = 0;

		if (in->n) {
			b = *in->p++;
			in->n--;
		}
		v |= (uint64_t)b << (8 * i);
	}
	return v;
}

#endif
