#include "vmm/core/metrics.h"
#include "vmm/core/clock.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void metrics_init(struct metrics *m, uint64_t t0_ns)
{
	m->t0_ns = t0_ns ? t0_ns : clock_mono_ns();
	for (int i = 0; i < MARK_COUNT; i++)
		atomic_store(&m->at_us[i], 0);
}

void metrics_mark(struct metrics *m, enum metrics_mark which)
{
	metrics_mark_at(m, which, clock_mono_ns());
}

void metrics_mark_at(struct metrics *m, enum metrics_mark which, uint64_t ns)
{
	uint64_t zero = 0, now = ns > m->t0_ns ? (ns - m->t0_ns) / 1000 : 0;

	if (now == 0)
		now = 1; /* 0 means "not reached" */
	atomic_compare_exchange_strong(&m->at_us[which], &zero, now);
}

const char *metrics_mark_name(enum metrics_mark which)
{
	static const char *const names[MARK_COUNT] = {
		"vm_created_us", "kernel_loaded_us",  "first_kvm_run_us",  "first_serial_byte_us",
		"guest_end_us",  "restore_called_us", "state_restored_us",
	};
	return names[which];
}

long metrics_rss_kib_excluding(const void *start, uint64_t len)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	char line[512];
	long total = 0, kib;
	int skip = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		uintptr_t begin, end;
		char perms[8];

		/* Mapping header lines are "start-end perms ..."; field lines are
		 * "Name: value" (and some names start with hex digits). */
		if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &begin, &end, perms) == 3) {
			skip = start && begin >= (uintptr_t)start && begin - (uintptr_t)start < len;
			continue;
		}
		if (sscanf(line, "Rss: %ld kB", &kib) == 1 && !skip)
			total += kib;
	}
	fclose(f);
	return total;
}
