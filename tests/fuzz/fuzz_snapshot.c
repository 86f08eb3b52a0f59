/* libFuzzer target for the snapshot state-file parser and every section
 * decoder (vmm/snapshot/snapshot_format.c, snapshot_config.c, vcpu_state.c,
 * vm_state.c, dev_state.c, and the devices' own encodings it calls:
 * devices/legacy/uart_persist.c, devices/blk/blk_persist.c, and the
 * rate limiters' blob of virtio-blk and virtio-net,
 * devices/virtio/throttle.c with vmm/core/token_bucket.c): whatever the
 * bytes, no crash, no read past the input, no allocation sized by an
 * unchecked count. Inputs that are not sealed with a valid CRC stop at the
 * checksum, so byte 0's low bit asks the target to seal the rest first
 * (the fuzzer cannot compute CRCs).
 *
 * Diff snapshots (vmm/snapshot/snapshot_diff.c): the SNAP_BASE section
 * among the others, and, when byte 0 has bit 1 set, the rest taken as the
 * start of a diff memory file: header and page index (bit 0: the CRC
 * sealed; bit 2: the file's size taken from the header, so the checks
 * past the size are reached). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devices/virtio/throttle.h"
#include "vmm/core/crc32c.h"
#include "vmm/snapshot/dev_state.h"
#include "vmm/snapshot/snapshot_config.h"
#include "vmm/snapshot/snapshot_diff.h"
#include "vmm/snapshot/snapshot_format.h"
#include "vmm/snapshot/vcpu_state.h"
#include "vmm/snapshot/vm_state.h"

/* A virtio device's own blob read as a drive (one limiter) and as a
 * network device (two) read theirs. No watch ops: saved limits are
 * decoded and checked, then refused for want of a timer. */
static void throttle_blob(const uint8_t *p, size_t len)
{
	static const struct vq_limit none[VQ_THROTTLE_MAX] = { { .queue = 0, .name = "rx" },
							       { .queue = 1, .name = "tx" } };
	struct vq_throttle t;

	for (unsigned n = 1; n <= VQ_THROTTLE_MAX; n++) {
		vq_throttle_init(&t, none, n, NULL, NULL, "fuzz", NULL);
		vq_throttle_restore(&t, p, len);
		vq_throttle_close(&t);
	}
}

static void decode_all(const struct snap_file *f)
{
	static struct snap_config sc;
	static struct vcpu_state vs;
	static struct vm_state vm;
	static struct snap_base base;
	struct virtio_mmio_state ds;
	struct uart_8250_regs u;
	const uint8_t *blob;
	size_t blob_len;
	uint64_t *map, n;

	for (uint32_t i = 0; i < f->n; i++) {
		const struct snap_section *s = &f->s[i];

		switch (s->type) {
		case SNAP_CONFIG: snap_config_read(s, &sc, NULL); break;
		case SNAP_NET: snap_net_read(s, &sc, NULL); break;
		case SNAP_VCPU: vcpu_state_read(s, &vs, NULL); break;
		case SNAP_VM: vm_state_read(s, &vm, NULL); break;
		case SNAP_VIRTIO:
			if (dev_state_read_virtio(s, &ds, &blob, &blob_len, NULL) == 0 && blob_len)
				throttle_blob(blob, blob_len);
			break;
		case SNAP_UART: dev_state_read_uart(s, &u, NULL); break;
		case SNAP_BASE: snap_base_read(s, &base, NULL); break;
		case SNAP_DISK:
			if (dev_state_read_disk(s, 1u << 20, &map, &n, NULL) == 0)
				free(map);
			break;
		}
	}
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* buf[0..len): a diff memory file's first bytes. */
static void diff_file(uint8_t *buf, size_t len, unsigned flags)
{
	struct snap_diff_hdr d;
	uint64_t ram, file_size = len;
	uint8_t *idx;
	size_t ilen;

	if (len < SNAP_DIFF_HEADER) {
		snap_diff_header(buf, len, len, 1u << 28, &d, "fuzz", NULL);
		return;
	}
	/* RAM as a checked config would give it: 4 KiB multiple, <= 1 TiB. */
	ram = le64(buf + 16);
	if (!ram || ram % SNAP_DIFF_PAGE || ram > (1ULL << 40))
		ram = 1u << 28;
	if (flags & 4)
		file_size = le64(buf + 32) + le64(buf + 24) * SNAP_DIFF_PAGE; /* wraps: unsigned */
	if (snap_diff_header(buf, len, file_size, ram, &d, "fuzz", NULL))
		return;
	ilen = SNAP_DIFF_HEADER + (size_t)d.npages * 8;
	if (ilen > len)
		return;
	idx = malloc(ilen); /* exact size: ASan catches overreads */
	memcpy(idx, buf, ilen);
	if (flags & 1) {
		uint32_t c;

		memset(idx + 40, 0, 4);
		c = crc32c(0, idx, ilen);
		memcpy(idx + 40, &c, 4);
		d.crc = c;
	}
	snap_diff_index(idx, ilen, &d, "fuzz", NULL);
	free(idx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snap_file f;
	uint8_t *buf;

	if (size < 1)
		return 0;
	buf = malloc(size - 1 ? size - 1 : 1); /* exact size: ASan catches overreads */
	memcpy(buf, data + 1, size - 1);
	if (data[0] & 2) {
		diff_file(buf, size - 1, data[0]);
		free(buf);
		return 0;
	}
	if ((data[0] & 1) && size - 1 >= SNAP_HEADER_SIZE) {
		uint32_t c;

		/* Fix the length and CRC fields so the sections get parsed. */
		uint64_t len = size - 1;
		memcpy(buf + 16, &len, 8);
		memset(buf + 24, 0, 8);
		c = crc32c(0, buf, size - 1);
		memcpy(buf + 24, &c, 4);
	}
	if (snap_parse(buf, size - 1, "fuzz", &f, NULL) == 0) {
		decode_all(&f);
		snap_file_free(&f);
	}
	free(buf);
	return 0;
}
