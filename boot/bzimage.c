/* bzImage loader: Linux x86 boot protocol, Documentation/x86/boot.rst. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "boot/boot.h"
#include "boot/boot_util.h"
#include "boot/bootparam.h"

#define BZ_MIN_PROTOCOL 0x0206 /* cmdline_size */
#define BZ_XLF_PROTOCOL 0x020c /* xloadflags: says whether a 64-bit entry exists */
#define BZ_SECTOR 512
#define BZ_DEFAULT_SETUP_SECTS 4 /* setup_sects 0 means 4 */
#define BZ_ENTRY64_OFFSET 0x200  /* 64-bit entry: start of protected-mode code + 0x200 */
/* The header must reach at least to the end of init_size (2.10+). */
#define BZ_HDR_NEEDED (BP_HDR_OFF(init_size) + 4)

#define PROTO(v) (v) >> 8, (v)&0xff

static size_t min_sz(size_t a, size_t b)
{
	return a < b ? a : b;
}

/* Validate the setup header and copy it (zero-extended) into h and k. */
static int read_header(const uint8_t *img, size_t len, struct tvm_setup_header *h, struct boot_kernel *k,
		       struct tvm_err *e)
{
	size_t hdr_end;
	uint16_t version;

	if (len < BP_HDR_OFF(version) + 2)
		return tvm_errf(e, EINVAL, "bzImage setup header truncated (%zu bytes, need 0x%zx)", len,
				BP_HDR_OFF(version) + 2);
	if (rd16(img + BP_HDR_OFF(boot_flag)) != BP_BOOT_FLAG)
		return tvm_errf(e, EINVAL, "bzImage boot_flag 0x%04x at 0x1fe is not 0xaa55",
				rd16(img + BP_HDR_OFF(boot_flag)));
	if (memcmp(img + BP_HDR_OFF(header), BP_HDRS_MAGIC, 4) != 0)
		return tvm_errf(e, EINVAL, "bzImage has no \"HdrS\" magic at 0x202");
	version = rd16(img + BP_HDR_OFF(version));
	if (version < BZ_MIN_PROTOCOL)
		return tvm_errf(e, EINVAL, "bzImage boot protocol %u.%02u is older than 2.06", PROTO(version));
	if (version < BZ_XLF_PROTOCOL)
		return tvm_errf(e, EINVAL,
				"bzImage boot protocol %u.%02u has no xloadflags (2.12+), so no 64-bit entry",
				PROTO(version));
	/* boot.rst: the header ends at 0x202 + the jump's offset byte at 0x201. */
	hdr_end = BP_HDR_OFF(header) + img[BP_HDR_OFF(jump) + 1];
	if (hdr_end < BZ_HDR_NEEDED)
		return tvm_errf(e, EINVAL, "bzImage setup header ends at 0x%zx, before init_size ends at 0x%zx",
				hdr_end, BZ_HDR_NEEDED);
	if (hdr_end > len)
		return tvm_errf(e, EINVAL, "bzImage setup header ends at 0x%zx, past the end of the %zu-byte file",
				hdr_end, len);

	/* Fields past the header's end (newer protocol than the image) stay 0. */
	memset(h, 0, sizeof(*h));
	memcpy(h, img + BP_HDR_OFFSET, min_sz(hdr_end, BP_HDR_OFFSET + sizeof(*h)) - BP_HDR_OFFSET);
	memcpy(k->setup_header, img + BP_HDR_OFFSET, min_sz(hdr_end, BP_HDR_END_MAX) - BP_HDR_OFFSET);

	if (!(h->xloadflags & BP_XLF_KERNEL_64))
		return tvm_errf(e, EINVAL, "bzImage xloadflags 0x%x lack XLF_KERNEL_64: no 64-bit entry",
				h->xloadflags);
	if (!(h->loadflags & BP_LOADED_HIGH))
		return tvm_errf(e, EINVAL, "bzImage loadflags 0x%x lack LOADED_HIGH (zImage?)", h->loadflags);
	return 0;
}

/* Where the decompressor will run: head_64.S aligns the load address up to
 * kernel_alignment if relocatable, and never goes below LOAD_PHYSICAL_ADDR,
 * which the image publishes as pref_address. */
static int runtime_start(const struct tvm_setup_header *h, uint64_t *start, struct tvm_err *e)
{
	uint64_t aligned = 0, a = h->kernel_alignment;

	if (h->relocatable_kernel) {
		if (a == 0 || (a & (a - 1)))
			return tvm_errf(e, EINVAL, "bzImage kernel_alignment 0x%llx is not a power of two",
					(unsigned long long)a);
		/* a <= 2^31: no overflow in 64 bits. */
		aligned = (BOOT_HIMEM_START + a - 1) & ~(a - 1);
	}
	*start = aligned > h->pref_address ? aligned : h->pref_address;
	return 0;
}

int boot_load_bzimage(const struct guest_mem *m, const uint8_t *img, size_t len, struct boot_kernel *k,
		      struct tvm_err *e)
{
	struct tvm_setup_header h;
	uint64_t pm_off, pm_size, rt = 0;
	int r;

	memset(k, 0, sizeof(*k));
	r = read_header(img, len, &h, k, e);
	if (!r)
		r = runtime_start(&h, &rt, e);
	if (r)
		goto fail;

	pm_off = ((uint64_t)(h.setup_sects ? h.setup_sects : BZ_DEFAULT_SETUP_SECTS) + 1) * BZ_SECTOR;
	if (pm_off >= len) {
		r = tvm_errf(
			e, EINVAL,
			"bzImage setup_sects %u puts the protected-mode code at 0x%llx, past the end of the %zu-byte file",
			h.setup_sects, (unsigned long long)pm_off, len);
		goto fail;
	}
	pm_size = len - pm_off;
	if (pm_size <= BZ_ENTRY64_OFFSET) {
		r = tvm_errf(e, EINVAL,
			     "bzImage protected-mode code is %llu bytes, too short for the 64-bit entry at +0x200",
			     (unsigned long long)pm_size);
		goto fail;
	}
	r = boot_check_kernel_range(m, BOOT_HIMEM_START, pm_size, "bzImage protected-mode code", e);
	if (!r)
		r = boot_check_kernel_range(m, rt, h.init_size,
					    "bzImage decompression area (pref_address/kernel_alignment, init_size)", e);
	if (r)
		goto fail;

	gm_write(m, BOOT_HIMEM_START, img + pm_off, pm_size);
	k->entry = BOOT_HIMEM_START + BZ_ENTRY64_OFFSET;
	k->load_start = BOOT_HIMEM_START;
	/* Both ranges passed span_ok against low RAM, so neither end overflows. */
	k->load_end = BOOT_HIMEM_START + pm_size;
	if (rt + h.init_size > k->load_end)
		k->load_end = rt + h.init_size;
	k->is_bzimage = 1;
	k->protocol = h.version;
	k->initrd_addr_max = h.initrd_addr_max;
	k->cmdline_size = h.cmdline_size;
	return 0;
fail:
	memset(k, 0, sizeof(*k));
	return r;
}
