/* Diff snapshots: a snapshot directory whose `mem` holds only the guest
 * pages that changed since the VM was restored from a base snapshot
 * directory, and whose state file names that base (SNAP_BASE).
 *
 * Diff memory file (all integers little endian):
 *   header, 64 bytes: magic "TVMDIFF\n", u32 version (1), u32 page size
 *                     (4096), u64 RAM bytes, u64 page count N, u64 data
 *                     offset (64 + 8·N rounded up to 4096), u32 CRC-32C of
 *                     the header (this field zero) followed by the index,
 *                     then zeroes
 *   index:            N u64 page numbers (byte offset / 4096 in the RAM's
 *                     host mapping), strictly increasing, each < RAM/4096
 *   data:             at the data offset, N pages in index order
 * The file is exactly data offset + N·4096 bytes. A page list rather than a
 * sparse file: a page the guest zeroed must still cover the base's page,
 * and no file system is trusted to report holes (SEEK_DATA) exactly.
 *
 * No chains: a diff's base is always a full snapshot. A VM restored from a
 * diff is diffed against that diff's base again: the new diff holds the
 * pages the old one laid plus those written since (snap_pages_union), so
 * each diff needs its base alone. */
#ifndef TVM_SNAPSHOT_DIFF_H
#define TVM_SNAPSHOT_DIFF_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "vmm/core/err.h"
#include "vmm/core/guest_mem.h"
#include "vmm/snapshot/snapshot_format.h"

#define SNAP_DIFF_MAGIC "TVMDIFF\n"
#define SNAP_DIFF_VERSION 1
#define SNAP_DIFF_HEADER 64
#define SNAP_DIFF_PAGE 4096
/* Runs of pages mapped from the diff file at most (each is a mapping of
 * its own); a diff with more runs is copied into guest memory instead. */
#define SNAP_DIFF_MAX_MAPS 4096

/* What a diff records of its base: the resolved directory, and the
 * identity of its memory file (size, inode, modification time) and state
 * file (its CRC-32C, from the header). Copying the base elsewhere changes
 * the inode: the diff then refuses it. */
struct snap_base {
	char dir[PATH_MAX];
	uint64_t mem_size, mem_ino, mtime_sec;
	uint32_t mtime_nsec, state_crc;
};

/* b's memory-file identity (size, inode, modification time) from st. */
void snap_base_set_mem(struct snap_base *b, const struct stat *st);
/* st is still the memory file b names: same size, inode and mtime. */
bool snap_base_same_mem(const struct snap_base *b, const struct stat *st);

/* Append the SNAP_BASE section. */
void snap_base_write(struct snap_w *w, const struct snap_base *b);

/* Parse and range-check the SNAP_BASE section (an absolute path without
 * newline, nanoseconds < 10^9). Returns 0 or -EINVAL with e set. */
int snap_base_read(const struct snap_section *sec, struct snap_base *b, struct tvm_err *e);

/* The identity of the snapshot directory dir (resolved into b->dir): its
 * `mem` by stat, its `state` read and checked whole (snap_parse) for its
 * CRC. *is_diff (may be NULL): dir is itself a diff. Returns 0 or -errno
 * with one line naming the file. */
int snap_base_identify(const char *dir, struct snap_base *b, bool *is_diff, struct tvm_err *e);

/* Check that the base want->dir is still what want describes and is a
 * full snapshot. Returns 0, or -errno (-ENOENT missing, -ESTALE changed,
 * -EINVAL a diff itself) with one line "BASE/FILE: changed since SINCE
 * (what differs)" or "BASE/FILE: No such file or directory". */
int snap_base_check(const struct snap_base *want, const char *since, struct tvm_err *e);

/* The pages of guest memory m that are private anonymous now, read from
 * /proc/self/pagemap (pagemap_fd): with m a MAP_PRIVATE mapping of a file,
 * those are exactly the pages written since it was mapped, by the guest or
 * by the VMM. *pages (malloc'd, sorted page numbers) and *n. Returns 0 or
 * -errno with e set. */
int snap_diff_scan(int pagemap_fd, const struct guest_mem *m, uint64_t **pages, uint64_t *n, struct tvm_err *e);

struct snap_diff_src {
	const struct guest_mem *m;
	const uint64_t *pages; /* sorted, each < m->size / 4096 */
	uint64_t n;
};

/* snap_fill_fn (ctx: const struct snap_diff_src *): the diff memory file. */
int snap_fill_diff(int fd, void *ctx, struct tvm_err *e);

struct snap_diff_hdr {
	uint64_t ram_size, npages, data_off;
	uint32_t crc;
};

/* Check the 64-byte header h (len bytes available) of a diff memory file
 * of file_size bytes for RAM of ram_size bytes. Returns 0 with *d, or
 * -EINVAL ("name: reason"), -EPROTONOSUPPORT (other version). */
int snap_diff_header(const uint8_t *h, size_t len, uint64_t file_size, uint64_t ram_size, struct snap_diff_hdr *d,
		     const char *name, struct tvm_err *e);

/* Check the header plus index buf[0..len) (len = 64 + 8·d->npages) against
 * d: the CRC, then every page number in range and strictly increasing.
 * Returns 0 or -EINVAL with e set. */
int snap_diff_index(const uint8_t *buf, size_t len, const struct snap_diff_hdr *d, const char *name, struct tvm_err *e);

/* Lay the diff memory file at path over guest memory m (whose size is the
 * RAM's): each checked run of pages mapped private from the file
 * (gm_map_file), or copied when there are more than SNAP_DIFF_MAX_MAPS
 * runs. *pages (may be NULL; malloc'd, the caller frees) gets the sorted
 * page numbers laid and *npages their count (may be NULL). Returns 0 or
 * -errno with one line naming the file; on failure m may be partly
 * covered (the VM must not run) and *pages is NULL. */
int snap_diff_load(const char *path, const struct guest_mem *m, uint64_t **pages, uint64_t *npages, struct tvm_err *e);

/* The sorted union of the sorted page lists a (na) and b (nb), without
 * repeats, into *out (malloc'd; NULL when empty) and *n. Returns 0 or
 * -ENOMEM. */
int snap_pages_union(const uint64_t *a, uint64_t na, const uint64_t *b, uint64_t nb, uint64_t **out, uint64_t *n);

#endif
