#include "vmm/kvm/bus.h"

#include <errno.h>
#include <string.h>

int bus_register(struct bus *b, uint64_t base, uint64_t len, const char *name, bus_io_fn fn, void *opaque,
		 struct tvm_err *e)
{
	uint64_t last;
	int i;

	if (len == 0 || __builtin_add_overflow(base, len - 1, &last))
		return tvm_errf(e, EINVAL, "bus: %s: bad range 0x%llx+0x%llx", name, (unsigned long long)base,
				(unsigned long long)len);
	if (b->n == BUS_MAX_RANGES)
		return tvm_errf(e, ENOSPC, "bus: %s: no room for more than %d ranges", name, BUS_MAX_RANGES);
	for (i = 0; i < b->n; i++) {
		const struct bus_range *r = &b->r[i];
		if (base <= r->base + (r->len - 1) && r->base <= last)
			return tvm_errf(e, EEXIST, "bus: %s at 0x%llx+0x%llx overlaps %s at 0x%llx+0x%llx", name,
					(unsigned long long)base, (unsigned long long)len, r->name,
					(unsigned long long)r->base, (unsigned long long)r->len);
		if (r->base > base)
			break;
	}
	memmove(&b->r[i + 1], &b->r[i], (b->n - i) * sizeof(b->r[0]));
	b->r[i] = (struct bus_range){ base, len, name, fn, opaque };
	b->n++;
	return 0;
}

const struct bus_range *bus_find(const struct bus *b, uint64_t addr)
{
	int lo = 0, hi = b->n - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;
		const struct bus_range *r = &b->r[mid];

		if (addr < r->base)
			hi = mid - 1;
		else if (addr - r->base >= r->len)
			lo = mid + 1;
		else
			return r;
	}
	return NULL;
}

int bus_dispatch(const struct bus *b, uint64_t addr, uint8_t *data, uint32_t len, bool is_write)
{
	const struct bus_range *r = bus_find(b, addr);

	/* An access straddling the end of a range is not the device's. */
	if (!r || len == 0 || len > r->len - (addr - r->base)) {
		if (!is_write)
			memset(data, 0xff, len);
		return -ENOENT;
	}
	r->fn(r->opaque, addr - r->base, data, len, is_write);
	return 0;
}
