/* Intel MultiProcessor Specification 1.4 structures (chapter 4), written
 * from the spec. Little-endian, packed, sizes checked below.
 */
#ifndef TVM_BOOT_MPSPEC_H
#define TVM_BOOT_MPSPEC_H

#include <stdint.h>

#define MP_FLOAT_SIG "_MP_"
#define MP_CONFIG_SIG "PCMP"
#define MP_SPEC_REV 4 /* 1.4 */

#define MP_LAPIC_ADDR 0xfee00000u
#define MP_IOAPIC_ADDR 0xfec00000u
#define MP_LAPIC_VERSION 0x14 /* integrated local APIC */
#define MP_IOAPIC_VERSION 0x11
#define MP_ISA_IRQS 16

enum mp_entry_type {
	MP_ENTRY_PROCESSOR = 0,
	MP_ENTRY_BUS = 1,
	MP_ENTRY_IOAPIC = 2,
	MP_ENTRY_IOINT = 3,
	MP_ENTRY_LINT = 4,
};

enum mp_int_type { MP_INT = 0, MP_NMI = 1, MP_SMI = 2, MP_EXTINT = 3 };

#define MP_CPU_ENABLED 0x01
#define MP_CPU_BSP 0x02
#define MP_IOAPIC_ENABLED 0x01
#define MP_ALL_LAPICS 0xff

/* MP floating pointer structure: 16 bytes on a 16-byte boundary. */
struct mp_float {
	char signature[4]; /* "_MP_" */
	uint32_t physptr;  /* configuration table address */
	uint8_t length;    /* in 16-byte paragraphs: 1 */
	uint8_t spec_rev;
	uint8_t checksum;   /* all 16 bytes sum to 0 */
	uint8_t feature[5]; /* feature[0] 0: config table present; feature[1] bit 7 IMCR */
} __attribute__((packed));

/* MP configuration table header, followed by the entries. */
struct mp_config {
	char signature[4]; /* "PCMP" */
	uint16_t length;   /* base table incl. header and entries */
	uint8_t spec_rev;
	uint8_t checksum; /* base table sums to 0 */
	char oem_id[8];
	char product_id[12];
	uint32_t oem_table;
	uint16_t oem_table_size;
	uint16_t entry_count;
	uint32_t lapic_addr;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));

struct mp_processor {
	uint8_t type;
	uint8_t lapic_id;
	uint8_t lapic_version;
	uint8_t flags;      /* MP_CPU_* */
	uint32_t signature; /* CPUID family/model/stepping */
	uint32_t features;  /* CPUID.1 EDX */
	uint32_t reserved[2];
} __attribute__((packed));

struct mp_bus {
	uint8_t type;
	uint8_t bus_id;
	char bus_type[6]; /* space padded, e.g. "ISA   " */
} __attribute__((packed));

struct mp_ioapic {
	uint8_t type;
	uint8_t id;
	uint8_t version;
	uint8_t flags; /* MP_IOAPIC_ENABLED */
	uint32_t addr;
} __attribute__((packed));

/* I/O interrupt assignment (type 3) and local interrupt assignment (type 4). */
struct mp_intsrc {
	uint8_t type;
	uint8_t int_type; /* enum mp_int_type */
	uint16_t flags;   /* polarity/trigger; 0 = conforming to the bus */
	uint8_t src_bus;
	uint8_t src_irq;
	uint8_t dst_apic; /* IOAPIC id, or local APIC id (0xff: all) */
	uint8_t dst_pin;  /* IOAPIC pin, or LINTn */
} __attribute__((packed));

_Static_assert(sizeof(struct mp_float) == 16, "mp_float");
_Static_assert(sizeof(struct mp_config) == 44, "mp_config");
_Static_assert(sizeof(struct mp_processor) == 20, "mp_processor");
_Static_assert(sizeof(struct mp_bus) == 8, "mp_bus");
_Static_assert(sizeof(struct mp_ioapic) == 8, "mp_ioapic");
_Static_assert(sizeof(struct mp_intsrc) == 8, "mp_intsrc");

/* Config table size for ncpus processors: header, CPUs, ISA bus, IOAPIC,
 * 16 ISA interrupts and the two local interrupts. */
#define MP_CONFIG_SIZE(ncpus)                                                                       \
	(sizeof(struct mp_config) + (ncpus) * sizeof(struct mp_processor) + sizeof(struct mp_bus) + \
	 sizeof(struct mp_ioapic) + (MP_ISA_IRQS + 2) * sizeof(struct mp_intsrc))

#endif
