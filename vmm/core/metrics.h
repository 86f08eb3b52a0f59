/* Boot-time milestones and VM-exit counters for --metrics (researchers'
 * side-by-side comparisons). Timestamps are CLOCK_MONOTONIC µs since t0. */
#ifndef TVM_METRICS_H
#define TVM_METRICS_H

#include <stdatomic.h>
#include <stdint.h>

#include "vmm/core/clock.h"

enum metrics_mark {
	MARK_VM_CREATED,
	MARK_KERNEL_LOADED,
	MARK_FIRST_KVM_RUN,
	MARK_FIRST_SERIAL_BYTE,
	MARK_GUEST_END,
	MARK_RESTORE_CALLED, /* tvm_vm_restore entered (restored VMs only) */
	MARK_STATE_RESTORED, /* its state loaded, ready to start */
	MARK_COUNT,
};

struct metrics {
	uint64_t t0_ns;
	_Atomic uint64_t at_us[MARK_COUNT]; /* 0 = not reached; set once */
};

/* Now on the marks' clock, in ns: clock_mono_ns (kept for callers that
 * think in metrics terms). */
static inline uint64_t metrics_now_ns(void)
{
	return clock_mono_ns();
}

/* Start the clock at t0_ns (CLOCK_MONOTONIC ns), or now if 0. */
void metrics_init(struct metrics *m, uint64_t t0_ns);

/* Record that a milestone was reached now; later calls keep the first. */
void metrics_mark(struct metrics *m, enum metrics_mark which);

/* Record that a milestone was reached at CLOCK_MONOTONIC time ns (before
 * the metrics existed). */
void metrics_mark_at(struct metrics *m, enum metrics_mark which, uint64_t ns);

/* JSON key of a milestone, e.g. "first_kvm_run_us". */
const char *metrics_mark_name(enum metrics_mark which);

/* Resident set of this process in KiB, not counting mappings inside
 * [start, start + len) (guest RAM, which may be split into several
 * mappings); from /proc/self/smaps. -1 if unreadable. */
long metrics_rss_kib_excluding(const void *start, uint64_t len);

#endif
