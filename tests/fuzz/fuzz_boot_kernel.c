/* libFuzzer target for the boot layer: the whole input is a kernel image;
 * its last two bytes also size an initrd (taken from the input's tail) and
 * a command line (taken from its head). Checks the loaders' documented
 * guarantees, not just absence of crashes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot/boot.h"

#define RAM_SIZE (8u << 20)

static uint8_t ram[RAM_SIZE] __attribute__((aligned(4096)));
static char cmdline[256 * 20 + 1];

#define CHECK(c)                                                                                  \
	do {                                                                                      \
		if (!(c)) {                                                                       \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                                  \
		}                                                                                 \
	} while (0)

static void check_err(int r, const struct tvm_err *e)
{
	CHECK(r < 0);
	CHECK(e->code == -r);
	CHECK(e->msg[0] != 0);
	CHECK(strchr(e->msg, '\n') == NULL);
}

static void check_kernel(const struct guest_mem *m, const struct boot_kernel *k)
{
	CHECK(k->load_start >= BOOT_HIMEM_START);
	CHECK(k->load_start < k->load_end);
	CHECK(k->load_end <= gm_low_end(m));
	CHECK(k->entry >= k->load_start && k->entry < k->load_end);
	CHECK(k->is_bzimage == 0 || k->is_bzimage == 1);
	if (k->is_bzimage)
		CHECK(k->entry == BOOT_HIMEM_START + 0x200);
	if (k->pvh_entry)
		CHECK(!k->is_bzimage && k->pvh_entry < (1ULL << 32));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct guest_mem m;
	struct boot_kernel k;
	struct tvm_err e = { 0 };
	size_t rd_len = 0, cl_len = 0;
	uint64_t rd_gpa = 0;
	int r;

	if (!m.nr && gm_init_buffer(&m, ram, RAM_SIZE, &e))
		abort();
	if (size >= 2) {
		rd_len = (size_t)data[size - 1] * 1024;
		cl_len = (size_t)data[size - 2] * 20;
	}
	if (rd_len > size)
		rd_len = size;
	if (cl_len > size)
		cl_len = size;

	r = boot_load_kernel(&m, data, size, &k, &e);
	if (r) {
		static const struct boot_kernel zero;

		check_err(r, &e);
		CHECK(r == -EINVAL || r == -ENOEXEC || r == -ENOSPC);
		CHECK(memcmp(&k, &zero, sizeof(k)) == 0);
		return 0;
	}
	check_kernel(&m, &k);

	r = boot_load_initrd(&m, &k, data + size - rd_len, rd_len, &rd_gpa, &e);
	if (r) {
		check_err(r, &e);
		CHECK(r == -ENOSPC && rd_gpa == 0);
		rd_len = 0;
	} else if (rd_len) {
		uint64_t ceiling = (uint64_t)k.initrd_addr_max + 1;

		CHECK(rd_gpa % 4096 == 0);
		CHECK(rd_gpa >= k.load_end);
		CHECK(rd_gpa + rd_len <= gm_low_end(&m) && rd_gpa + rd_len <= ceiling);
		CHECK(memcmp(gm_ptr(&m, rd_gpa, rd_len), data + size - rd_len, rd_len) == 0);
	}

	memcpy(cmdline, data, cl_len);
	cmdline[cl_len] = 0;
	r = boot_write_zero_page(&m, &k, cmdline, rd_gpa, rd_len, &e);
	if (r) {
		check_err(r, &e);
		CHECK(r == -E2BIG);
		CHECK(strlen(cmdline) > k.cmdline_size || strlen(cmdline) >= BOOT_CMDLINE_MAX);
	} else {
		const uint8_t *zp = gm_ptr(&m, BOOT_ZERO_PAGE_ADDR, 4096);

		CHECK(strcmp(gm_ptr(&m, BOOT_CMDLINE_ADDR, strlen(cmdline) + 1), cmdline) == 0);
		CHECK(zp[0x210] == 0xff && (zp[0x211] & 1) && zp[0x1e8] == 3);
	}
	return 0;
}
