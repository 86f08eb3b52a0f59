/* The one clock the host side measures time with: CLOCK_MONOTONIC in ns.
 * Inline, so the CLI can use it without a library symbol. */
#ifndef TVM_CLOCK_H
#define TVM_CLOCK_H

#include <stdint.h>
#include <time.h>

/* Now on CLOCK_MONOTONIC, in ns (never goes back; not wall time). */
static inline uint64_t clock_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
