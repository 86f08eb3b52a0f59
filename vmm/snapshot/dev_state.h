/* The state file's device sections: which section holds what, and the
 * virtio-mmio transport's own encoding. The payloads of the COM1 and drive
 * sections are the devices' encodings (devices/legacy/uart_persist.c,
 * devices/blk/blk_persist.c); these functions put them in and take them
 * out of their sections.
 *   SNAP_VIRTIO, index = slot: transport registers and queue positions,
 *                then the device's own save blob (u32 length, bytes)
 *   SNAP_UART, index 0:        COM1 registers
 *   SNAP_DISK, index = drive:  a copy-on-write drive's block map
 * Reading checks lengths and counts; values are checked where they are
 * applied (virtio_mmio_restore, virtio_blk_restore_blocks). */
#ifndef TVM_DEV_STATE_H
#define TVM_DEV_STATE_H

#include <stdint.h>

#include "devices/legacy/uart_8250.h"
#include "devices/virtio/virtio_mmio.h"
#include "vmm/snapshot/snapshot_format.h"

#define DEV_STATE_MAX_BLOB (64u << 10) /* bytes of a device's own save blob */

void dev_state_write_virtio(struct snap_w *w, uint32_t slot, const struct virtio_mmio_state *s, const void *blob,
			    size_t blob_len);
/* *blob points into the section (NULL when empty). */
int dev_state_read_virtio(const struct snap_section *sec, struct virtio_mmio_state *s, const uint8_t **blob,
			  size_t *blob_len, struct tvm_err *e);

void dev_state_write_uart(struct snap_w *w, const struct uart_8250_regs *u);
int dev_state_read_uart(const struct snap_section *sec, struct uart_8250_regs *u, struct tvm_err *e);

/* map: nwords 64-bit words. */
void dev_state_write_disk(struct snap_w *w, uint32_t drive, const uint64_t *map, uint64_t nwords);
/* *map is malloc'd (caller frees); at most max_words words. */
int dev_state_read_disk(const struct snap_section *sec, uint64_t max_words, uint64_t **map, uint64_t *nwords,
			struct tvm_err *e);

#endif
