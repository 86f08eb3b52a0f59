/* The snapshot state file's container: header, CRC-32C, typed sections, and
 * the bounded cursors that write and read section payloads.
 *
 * Layout (all integers little endian):
 *   header, 32 bytes: magic "TVMSNAP\n", u32 version, u32 section count,
 *                     u64 file length, u32 CRC-32C of the whole file with
 *                     this field zero, u32 zero
 *   sections:         u32 type, u32 index, u64 payload length, payload,
 *                     zero padding to a multiple of 8
 *
 * snap_parse() is the one place the container is checked: magic, version,
 * length (against the bytes actually read), CRC, and every section length
 * (before anything is looked up). The readers below are the one place a
 * payload's fields are bounds-checked: a short read marks the cursor bad
 * and returns zeroes, and snap_r_done() tells the caller to refuse it.
 */
#ifndef TVM_SNAPSHOT_FORMAT_H
#define TVM_SNAPSHOT_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/core/err.h"

#define SNAP_MAGIC "TVMSNAP\n"
#define SNAP_VERSION 1
#define SNAP_HEADER_SIZE 32
#define SNAP_MAX_FILE (256u << 20) /* bytes of a state file we read at most */
#define SNAP_MAX_SECTIONS 1024

enum snap_type {
	SNAP_CONFIG = 1, /* the VM config needed to rebuild it */
	SNAP_VCPU,       /* one per vCPU, index = vCPU */
	SNAP_VM,         /* irqchip, PIT, clock */
	SNAP_VIRTIO,     /* one per virtio-mmio device, index = slot */
	SNAP_UART,       /* COM1 registers */
	SNAP_DISK,       /* copy-on-write map of drive index */
	SNAP_NET,        /* the network device's config; absent: no network */
	SNAP_BASE,       /* a diff snapshot's base (vmm/snapshot/snapshot_diff.h); absent: full */
};

/* Growing buffer for a state file. Errors (out of memory) are sticky and
 * reported by snap_w_finish(). */
struct snap_w {
	uint8_t *p;
	size_t len, cap;
	size_t sec_start; /* offset of the open section's header */
	uint32_t nsec;
	bool oom, open;
};

void snap_w_init(struct snap_w *w);
void snap_w_begin(struct snap_w *w, uint32_t type, uint32_t index);
void snap_w_end(struct snap_w *w);
void snap_w_u32(struct snap_w *w, uint32_t v);
void snap_w_u64(struct snap_w *w, uint64_t v);
void snap_w_bytes(struct snap_w *w, const void *p, size_t n);
/* u32 length then bytes; NULL is written as length 0xffffffff. */
void snap_w_str(struct snap_w *w, const char *s);
/* Fill in the header and CRC. Returns 0 (w->p, w->len are the file) or
 * -ENOMEM with e set. */
int snap_w_finish(struct snap_w *w, struct tvm_err *e);
void snap_w_free(struct snap_w *w);

struct snap_section {
	uint32_t type, index;
	const uint8_t *data; /* inside the parsed buffer */
	size_t len;
};

struct snap_file {
	struct snap_section *s; /* malloc'd */
	uint32_t n;
};

/* Check and index the state file buf[0..len) (name for messages). Returns 0,
 * or -EINVAL ("name: reason", e.g. "truncated", "checksum mismatch"),
 * -EPROTONOSUPPORT (other version), -ENOMEM. buf must outlive f. */
int snap_parse(const uint8_t *buf, size_t len, const char *name, struct snap_file *f, struct tvm_err *e);
void snap_file_free(struct snap_file *f);

/* The section of type and index, or NULL. */
const struct snap_section *snap_find(const struct snap_file *f, uint32_t type, uint32_t index);

/* Bounded reader over one section's payload. */
struct snap_r {
	const uint8_t *p;
	size_t len, off;
	bool bad; /* a read went past the end (or a value was refused) */
};

void snap_r_init(struct snap_r *r, const struct snap_section *s);
uint32_t snap_r_u32(struct snap_r *r);
uint64_t snap_r_u64(struct snap_r *r);
/* Copy n bytes into dst (zeroes when short). */
void snap_r_copy(struct snap_r *r, void *dst, size_t n);
/* Pointer to the next n bytes, or NULL (marks bad). */
const uint8_t *snap_r_bytes(struct snap_r *r, size_t n);
/* A string written by snap_w_str into buf (cap bytes incl. NUL). Returns buf,
 * or NULL for a NULL string; marks bad when longer than cap - 1 or holding
 * a NUL byte. */
const char *snap_r_str(struct snap_r *r, char *buf, size_t cap);
/* Mark the cursor bad (a value out of range). */
void snap_r_fail(struct snap_r *r);
/* True when every byte was read and nothing was refused. */
bool snap_r_done(const struct snap_r *r);

#endif
