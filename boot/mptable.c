/* MP table (Intel MultiProcessor Specification 1.4, chapter 4): how Linux
 * finds the CPUs, the IOAPIC and the ISA interrupt routing without ACPI. */
#include <errno.h>
#include <string.h>

#include "boot/boot.h"
#include "boot/mpspec.h"

#define MPC_MAX (BOOT_MPTABLE_ADDR - BOOT_MPC_ADDR)

_Static_assert(MP_CONFIG_SIZE(BOOT_MAX_CPUS) <= MPC_MAX, "MP config table fits below the floating pointer");
_Static_assert(BOOT_MPTABLE_ADDR + sizeof(struct mp_float) <= 0xa0000, "MP floating pointer below 640 KiB");
_Static_assert(BOOT_MPTABLE_ADDR % 16 == 0, "MP floating pointer is paragraph aligned");
_Static_assert(BOOT_MAX_CPUS < 0xff, "APIC ids and the IOAPIC id fit in a byte, 0xff means all");

/* Family 6 and FPU|APIC in CPUID.1 EDX: plausible values for a modern CPU;
 * Linux only checks that the APIC bit is set (MP_processor_info). */
#define MP_CPU_SIGNATURE 0x600
#define MP_CPU_FEATURES 0x201

static uint8_t checksum(const uint8_t *p, size_t len)
{
	uint8_t sum = 0;

	while (len--)
		sum += *p++;
	return (uint8_t)-sum;
}

/* Append one entry to the table being built. The caller sized buf with
 * MP_CONFIG_SIZE, so the static assert above bounds every append. */
static void put(uint8_t *buf, size_t *off, const void *entry, size_t len)
{
	memcpy(buf + *off, entry, len);
	*off += len;
}

static void put_int(uint8_t *buf, size_t *off, uint8_t type, uint8_t int_type, uint8_t src_irq, uint8_t dst_apic,
		    uint8_t dst_pin)
{
	struct mp_intsrc s = { .type = type,
			       .int_type = int_type,
			       .flags = 0,
			       .src_bus = 0,
			       .src_irq = src_irq,
			       .dst_apic = dst_apic,
			       .dst_pin = dst_pin };

	put(buf, off, &s, sizeof(s));
}

int boot_write_mptable(const struct guest_mem *m, int ncpus, struct tvm_err *e)
{
	uint8_t buf[MPC_MAX];
	struct mp_config hdr = { .signature = MP_CONFIG_SIG,
				 .spec_rev = MP_SPEC_REV,
				 .oem_id = "TINYVMM ",
				 .product_id = "TINYVMM 0001",
				 .lapic_addr = MP_LAPIC_ADDR };
	struct mp_bus bus = { .type = MP_ENTRY_BUS, .bus_id = 0, .bus_type = "ISA   " };
	struct mp_ioapic ioapic = { .type = MP_ENTRY_IOAPIC,
				    .id = (uint8_t)ncpus,
				    .version = MP_IOAPIC_VERSION,
				    .flags = MP_IOAPIC_ENABLED,
				    .addr = MP_IOAPIC_ADDR };
	struct mp_float fp = {
		.signature = MP_FLOAT_SIG, .physptr = (uint32_t)BOOT_MPC_ADDR, .length = 1, .spec_rev = MP_SPEC_REV
	};
	size_t off = sizeof(hdr);

	if (ncpus < 1 || ncpus > BOOT_MAX_CPUS)
		return tvm_errf(e, EINVAL, "mptable: %d CPUs is outside 1..%d", ncpus, BOOT_MAX_CPUS);

	memset(buf, 0, sizeof(buf));
	for (int i = 0; i < ncpus; i++) {
		struct mp_processor cpu = { .type = MP_ENTRY_PROCESSOR,
					    .lapic_id = (uint8_t)i,
					    .lapic_version = MP_LAPIC_VERSION,
					    .flags = MP_CPU_ENABLED | (i == 0 ? MP_CPU_BSP : 0),
					    .signature = MP_CPU_SIGNATURE,
					    .features = MP_CPU_FEATURES };

		put(buf, &off, &cpu, sizeof(cpu));
	}
	put(buf, &off, &bus, sizeof(bus));
	put(buf, &off, &ioapic, sizeof(ioapic));
	/* ISA IRQ n on IOAPIC pin n, polarity and trigger conforming to ISA. */
	for (int irq = 0; irq < MP_ISA_IRQS; irq++)
		put_int(buf, &off, MP_ENTRY_IOINT, MP_INT, (uint8_t)irq, (uint8_t)ncpus, (uint8_t)irq);
	/* Virtual wire: the PIC on LINT0, NMI on LINT1, on every local APIC. */
	put_int(buf, &off, MP_ENTRY_LINT, MP_EXTINT, 0, MP_ALL_LAPICS, 0);
	put_int(buf, &off, MP_ENTRY_LINT, MP_NMI, 0, MP_ALL_LAPICS, 1);

	hdr.length = (uint16_t)off;
	hdr.entry_count = (uint16_t)(ncpus + 2 + MP_ISA_IRQS + 2);
	memcpy(buf, &hdr, sizeof(hdr));
	buf[offsetof(struct mp_config, checksum)] = checksum(buf, off);
	fp.checksum = checksum((const uint8_t *)&fp, sizeof(fp));

	/* One check for both pieces, so a failure writes neither. */
	if (!gm_ptr(m, BOOT_MPC_ADDR, BOOT_MPTABLE_ADDR + sizeof(fp) - BOOT_MPC_ADDR))
		return tvm_errf(e, EFAULT, "mptable: [0x%llx, 0x%llx) is not guest RAM",
				(unsigned long long)BOOT_MPC_ADDR,
				(unsigned long long)(BOOT_MPTABLE_ADDR + sizeof(fp)));
	gm_write(m, BOOT_MPC_ADDR, buf, off);
	gm_write(m, BOOT_MPTABLE_ADDR, &fp, sizeof(fp));
	return 0;
}
