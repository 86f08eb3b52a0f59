/* Files of a snapshot directory: atomic writes (temporary file in the
 * directory, fsync, rename, directory fsync), bounded reads of the state
 * file, and the sparse guest memory file. */
#ifndef TVM_SNAPSHOT_IO_H
#define TVM_SNAPSHOT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/core/err.h"
#include "vmm/core/guest_mem.h"

#define SNAP_STATE_FILE "state"
#define SNAP_MEM_FILE "mem"

/* Fills a new file; returns 0 or -errno with e set. */
typedef int (*snap_fill_fn)(int fd, void *ctx, struct tvm_err *e);

/* "dir/name" into buf (cap bytes); -ENAMETOOLONG with e set. */
int snap_path(char *buf, size_t cap, const char *dir, const char *name, struct tvm_err *e);

/* Create dir (mode 0700), or accept an existing directory that is empty or
 * holds a snapshot (a `state` file) to be replaced: any other directory is
 * refused with -EEXIST, so `--out .` cannot overwrite a user's files. */
/* Write n bytes at off, retrying short writes and EINTR: 0, or -errno
 * with e ("WHAT: write: ..."). */
int snap_pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off, const char *what, struct tvm_err *e);
int snap_mkdir(const char *dir, struct tvm_err *e);

/* Write dir/name atomically: dir/.name.tmp is filled by fill, fsync'd and
 * renamed over dir/name; on failure it is removed. */
int snap_write_file(const char *dir, const char *name, snap_fill_fn fill, void *ctx, struct tvm_err *e);

/* fsync the directory (after the last rename). */
int snap_sync_dir(const char *dir, struct tvm_err *e);

/* Read a whole regular file of at most max bytes into *buf (malloc'd). */
int snap_read_file(const char *path, size_t max, uint8_t **buf, size_t *len, struct tvm_err *e);

/* snap_fill_fn for guest memory (ctx: const struct guest_mem *): the file
 * gets the RAM's size; all-zero 4 KiB pages are left as holes. */
int snap_fill_mem(int fd, void *ctx, struct tvm_err *e);

#endif
